"""The evaluator runs what a name says, or refuses it: no silently dropped @PREDICTOR."""

from __future__ import annotations

import numpy as np
import pytest

import agents  # noqa: F401  (installs rl: and @history, as a tune or evaluate does)
from cosim.config import load_scenario
from cosim.errors import ScenarioError
from cosim.evaluation import Evaluator, run_window, windows
from cosim.workloads.base import Workload

SCENARIO = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=200"])


def _window() -> Workload:
    return Workload.from_columns(submit=[0.0, 1.0, 2.0], run=[50, 10, 10], procs=[4, 2, 2],
                                 req_time=[100, 100, 20])


# @history and @xgboost are scored where ``import agents`` registered them
# (tests/test_protocol_beliefs.py)
@pytest.mark.parametrize("name", ["sjf+easy@rnn", "fcfs+easy@rnn+kill"])
def test_a_predictor_name_is_refused_with_one_line(name):
    with pytest.raises(ScenarioError) as e:
        with Evaluator(SCENARIO, [_window()]) as ev:
            ev.evaluate(["saf+easy", name])
    msg = str(e.value)
    assert "\n" not in msg and repr(name) in msg and "or no @PREDICTOR" in msg
    with pytest.raises(ScenarioError, match="or no @PREDICTOR"):
        run_window(SCENARIO, name, _window())


def test_the_scenario_default_predictor_is_refused_too():
    sc = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=200",
                                                    "predictor.runtime=history"])
    with pytest.raises(ScenarioError, match=r"--set predictor.runtime=estimate\), got "
                                            r"'f1\+easy' with predictor.runtime 'history'"):
        run_window(sc, "f1+easy", _window())


def test_estimate_is_what_runs_and_an_agent_without_a_checkpoint_is_refused():
    from cosim.workloads.loading import load_workload

    w = windows(load_workload(SCENARIO), 100, 2)
    with Evaluator(SCENARIO, w) as ev:
        r = ev.evaluate(["f1+easy", "f1+easy@estimate"])
    np.testing.assert_array_equal(r[0], r[1])
    # an agent is scored (tests/test_protocol_agents.py); one without its folder is one line
    with pytest.raises(ScenarioError, match="rl:DIR with DIR a checkpoint folder"):
        run_window(SCENARIO, "rl:runs/ppo", _window())
