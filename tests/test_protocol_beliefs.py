"""The protocol plans on predictions: ``@history`` and ``scheduler.correction`` in its windows
give the figures ``cosim run`` gives on the same jobs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import agents  # noqa: F401  (installs @history in the protocol's registry)
from cosim.compose import run_policy
from cosim.config import load_scenario
from cosim.errors import ScenarioError
from cosim.evaluation import Evaluator, window_at
from cosim.workloads.loading import load_workload

JOBS = 1500


@pytest.fixture
def sdsc(shared):
    path = shared / "traces" / "SDSC-SP2-1998-4.2-cln.swf.gz"
    if not path.exists():
        pytest.skip(f"trace not found: {path}")
    return path


def _scenario(trace, *more):
    return load_scenario("scenarios/swf.yaml", [f"workload.path={trace}",
                                                f"workload.jobs={JOBS}", *more])


@pytest.mark.parametrize("correction", ["overrun", "stepup"])
def test_history_and_a_correction_in_a_window_give_the_figures_of_cosim_run(
        sdsc, tmp_path, correction):
    scenario = _scenario(sdsc, f"scheduler.correction={correction}")
    workload = load_workload(scenario)
    names = ["saf+easy@history", "saf+easy"]
    with Evaluator(scenario, [window_at(workload, 0, len(workload))]) as ev:
        got = ev.evaluate(names)[:, 0, :]
    for row, name in zip(got, names):
        run_policy(scenario, name, tmp_path / name, workload=workload)
        summary = json.loads((tmp_path / name / "summary.json").read_text())["metrics"]
        assert row == pytest.approx([summary["bsld_mean"], summary["wait_mean"],
                                     summary["wait_max"]], rel=1e-9)
    # the predictions were planned with: the schedule is not the one on requests
    assert not np.allclose(got[0], got[1])


def test_corrections_change_the_schedule_on_history(sdsc):
    workload = load_workload(_scenario(sdsc))
    rows = []
    for correction in ("overrun", "request"):
        with Evaluator(_scenario(sdsc, f"scheduler.correction={correction}"),
                       [window_at(workload, 0, len(workload))]) as ev:
            rows.append(ev.evaluate(["saf+easy@history"])[0, 0])
    assert not np.allclose(rows[0], rows[1])


def test_history_without_users_is_refused_in_one_line(lublin_trace):
    scenario = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=300"])
    workload = load_workload(scenario)
    with Evaluator(scenario, [workload]) as ev, pytest.raises(ScenarioError) as err:
        ev.evaluate(["saf+easy@history"])
    assert "@history would share one history" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_predictor_without_a_registered_backend_is_refused(sdsc):
    scenario = _scenario(sdsc)
    workload = load_workload(scenario)
    with Evaluator(scenario, [workload]) as ev, pytest.raises(ScenarioError) as err:
        ev.evaluate(["saf+easy@rnn"])
    assert "@history" in str(err.value) and "cosim run" in str(err.value)


def test_the_trace_model_in_a_window_gives_the_figures_of_cosim_run_on_that_span(sdsc, tmp_path):
    # cosim run on jobs 2000..2999 (workload.offset) and the protocol's window of the same
    # rows of a longer prefix: the same model fitted on the past, the same refits
    cache = f"predictor.cache={tmp_path / 'cache'}"
    span = _scenario(sdsc, cache, "workload.offset=2000", "workload.jobs=1000")
    whole = load_workload(_scenario(sdsc, cache, "workload.jobs=3000"))
    window = window_at(whole, 2000, 1000)
    with Evaluator(_scenario(sdsc, cache, "workload.jobs=3000"), [window]) as ev:
        got = ev.evaluate(["saf+easy@xgboost", "saf+easy"])[:, 0, :]
    run_policy(span, "saf+easy@xgboost", tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]
    assert got[0] == pytest.approx([summary["bsld_mean"], summary["wait_mean"],
                                    summary["wait_max"]], rel=1e-9)
    assert not np.allclose(got[0], got[1])
