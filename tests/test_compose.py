"""The front (cosim.compose, cosim.env.acting): acting policies without an env, the loader
registry, the prediction set-up's explicit training, picklable factories."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import simpy

from cosim.compose import (
    EnvFactory,
    HubFactory,
    load_policy,
    prepare_models,
    register_policy_loader,
    run_policy,
)
from cosim.compose.policies import POLICY_LOADERS
from cosim.config import load_scenario, scenario_from_dict
from cosim.env import SchedulingEnv
from cosim.env.acting import ACTING_KEYS, acting_config, acting_policy
from cosim.errors import InputError, ScenarioError
from cosim.model import build
from cosim.policies import PolicySpec
from cosim.workloads.loading import load_workload

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "lublin256.yaml"


def _last_legal(obs, mask):
    """A deterministic scorer that depends on the observation too (so a wrong encoder shows)."""
    legal = np.flatnonzero(mask)
    return int(legal[int(abs(float(np.asarray(obs, dtype=float).sum())) * 7) % len(legal)])


def _schedule(scenario, workload, policy):
    sim = build(simpy.Environment(), scenario, policy, workload=workload)
    sim.env.run(until=sim.finished)
    jobs = sim.jobs_table()
    return np.asarray(jobs["start"]).tolist(), np.asarray(jobs["outcome"]).tolist()


@pytest.mark.parametrize("config", [
    {"actions": "start", "window": [6, 2], "kill_slots": 2},
    {"actions": "select", "window": 16, "backfill_order": "saf", "observation": "kernel"},
    {"actions": "select", "window": 8, "guard_wait": 3600.0, "reserve": "sticky",
     "max_time": 5e5, "queue_norm": 512.0},
    {"actions": "dras", "window": 10, "node_rows": 32},
    {"actions": "start", "observation": "image", "image_slots": 10},
    {"actions": "kill", "base_policy": "fcfs+easy"},
])
def test_acting_policy_schedules_as_the_envs_acting_policy(config):
    scenario = load_scenario(SCENARIO, ["workload.jobs=150"])
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    kwargs = acting_config(config)
    env = SchedulingEnv(scenario, workload=workload, episode_jobs=len(workload), **kwargs)
    via_env = _schedule(scenario, workload, env.acting_policy(_last_legal))
    direct = _schedule(scenario, workload, acting_policy(config, scenario, workload, _last_legal))
    assert direct == via_env
    assert len(set(direct[0])) > 10      # the policy did schedule the jobs


def test_acting_config_keeps_only_what_shapes_the_agent():
    saved = {"scenario": "x.yaml", "teacher": "sjf", "episode_jobs": 64, "reward": "bsld",
             "predictor": "rnn", "window": [8, 2], "actions": "start", "curriculum": None}
    assert acting_config(saved) == {"window": (8, 2), "actions": "start"}
    assert acting_config({"window": [128]})["window"] == 128
    assert set(acting_config({k: 1 for k in ACTING_KEYS})) == set(ACTING_KEYS)


def test_a_registered_loader_loads_its_prefix(monkeypatch):
    scenario = load_scenario(SCENARIO, ["workload.jobs=120"])
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    seen = []

    def loader(spec, sc, wl):
        seen.append((spec.checkpoint, len(wl)))
        return load_policy(PolicySpec(name="sjf+easy", kind="queue", heuristic="sjf",
                                      backfill="easy"), sc, wl)

    monkeypatch.setitem(POLICY_LOADERS, "fake", None)
    register_policy_loader("fake", loader)
    spec = PolicySpec(name="fake:somewhere", kind="agent", checkpoint="somewhere",
                      predictor="estimate")
    got = run_policy(scenario, spec, None, workload=workload)
    want = run_policy(scenario, "sjf+easy", None, workload=workload)
    assert seen == [("somewhere", 120)]
    assert got["wait_mean"] == want["wait_mean"] and got["bsld_mean"] == want["bsld_mean"]


def test_an_unregistered_prefix_is_refused_with_the_known_ones():
    scenario = load_scenario(SCENARIO, ["workload.jobs=50"])
    spec = PolicySpec(name="nope:x", kind="agent", checkpoint="x", predictor="estimate")
    with pytest.raises(InputError,
                       match=r"^policy: expected a prefix with a loader: rl:, got 'nope:x'$"):
        load_policy(spec, scenario, load_workload(scenario, base_dir=SCENARIO.parent))


def _vasp(cache: Path):
    return scenario_from_dict({"name": "tiny-vasp", "seed": 3,
                               "cluster": {"nodes": 2, "cores_per_node": 64},
                               "workload": {"kind": "vasp", "jobs": 50},
                               "predictor": {"cache": str(cache)}})


def test_models_are_never_trained_unless_allowed(tmp_path, capsys):
    sc = _vasp(tmp_path / "cache")
    with pytest.raises(ScenarioError, match="python -m predictors train"):
        prepare_models(sc, ["fcfs+easy@xgboost"], echo=None, train_if_missing=False)
    with pytest.raises(ScenarioError, match="python -m predictors train"):
        HubFactory(sc, "rnn", train_if_missing=False)
    assert not (tmp_path / "cache").exists()
    assert prepare_models(sc, ["fcfs+easy@history", "sjf"], echo=None) is None   # nothing to train
    assert capsys.readouterr().err == ""


def test_factories_are_picklable_and_build_what_they_describe():
    # Lublin jobs have no users: @history runs only when told to share one history
    scenario = load_scenario(SCENARIO, ["workload.jobs=80", "predictor.allow_shared_history=true"])
    hubs = pickle.loads(pickle.dumps(HubFactory(scenario, "history")))
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    hub = hubs(workload)
    assert hub is not None and type(hub.backend).__name__ == "HistoryBackend"
    factory = pickle.loads(pickle.dumps(EnvFactory({"scenario": str(SCENARIO),
                                                    "scenario_set": ["workload.jobs=80"],
                                                    "window": [4, 1]}, episode_jobs=40)))
    env = factory()
    assert env.window == (4, 1) and env.episode_jobs == 40


def test_pin_scales_saves_the_scales_the_env_derived_and_keeps_given_ones():
    from cosim.compose import make_env, pin_scales
    from cosim.env.scheduling import default_max_time

    cfg = {"scenario": str(SCENARIO), "scenario_set": ["workload.jobs=60"],
           "actions": "start", "observation": "image", "max_time": 5e5, "episode_jobs": 40}
    env = make_env(cfg)
    assert pin_scales(cfg, env) is env
    assert cfg["max_time"] == 5e5   # given: kept
    assert cfg["image_slot_s"] == env.unwrapped.image_slot_s
    assert "node_rows" not in cfg   # not a dras observation
    env.close()
    dras = {"scenario": str(SCENARIO), "scenario_set": ["workload.jobs=60"],
            "actions": "dras", "episode_jobs": 40}
    pin_scales(dras).close()
    assert dras["node_rows"] == 256   # lublin256: 256 nodes, the cap
    workload = load_workload(load_scenario(SCENARIO, ["workload.jobs=60"]),
                             base_dir=SCENARIO.parent)
    assert dras["max_time"] == default_max_time(workload) == max(
        1e5, 2.0 * float(workload.req_time.max()))


def test_env_settings_are_the_spec_fields():
    import inspect

    from cosim.env import SchedulingEnv
    from cosim.env.spec import EnvSpec

    names = list(EnvSpec.names())
    assert {"max_time", "window", "actions", "base_policy"} <= set(names)
    # the live collaborators the caller supplies are never saved settings
    live = [n for n in inspect.signature(SchedulingEnv.__init__).parameters
            if n not in ("self", "settings")]
    assert {"scenario", "spec", "workload", "predictions", "base_factory"} <= set(live)
    assert not set(live) & set(names)


def test_the_run_table_shows_starvation_beside_the_mean_and_marks_who_starves():
    from cosim.compose.table import comparison_table

    table = comparison_table({
        "fcfs+easy": {"bsld_mean": 3.0, "wait_max": 90_000.0, "starved_1d": 1,
                      "starved_1d_share": 0.01, "starved_1w": 0, "starved_1w_share": 0.0},
        "saf+easy": {"bsld_mean": 2.0, "wait_max": 700_000.0, "starved_1d": 3,
                     "starved_1d_share": 0.03, "starved_1w": 2, "starved_1w_share": 0.02}})
    lines = table.splitlines()
    header = lines[0].split("  ")
    header = [h.strip() for h in header if h.strip()]
    assert header[:8] == ["policy", "jobs", "mean bsld", "mean wait s", "p99 wait s",
                          "max wait s", "waited >1d", "waited >1w"]
    assert "1 (1.0%)" in lines[2] and "!" not in lines[2]
    assert "3 (3.0%)" in lines[3] and "2 (2.0%) !" in lines[3]
    assert lines[4] == "! starves: a job waited more than a week under saf+easy"
    assert len(lines) == 5
    # no policy starves: no footnote
    assert len(comparison_table({"fcfs+easy": {"starved_1w": 0}}).splitlines()) == 3
