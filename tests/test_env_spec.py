"""EnvSpec (cosim/env/spec.py): validated once, JSON round trip, resolved against a run,
saved in checkpoints; old checkpoints still load and act as they did."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import simpy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.checkpoint import env_meta, read_env_spec, read_meta
from cosim.config import load_scenario
from cosim.env import SchedulingEnv
from cosim.env.acting import acting_policy
from cosim.env.spec import EnvSpec, split_config
from cosim.errors import ScenarioError
from cosim.model import build
from cosim.workloads.loading import load_workload
from cosim.workloads.lublin import lublin

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "lublin256.yaml"
PRETRAINED = ROOT / "agents" / "pretrained" / "lublin256-select"

torch.set_num_threads(1)

_seconds = st.floats(min_value=1e-3, max_value=1e7, allow_nan=False, allow_infinity=False)


@st.composite
def specs(draw) -> EnvSpec:
    """Valid specs over every setting (each action model's own options)."""
    actions = draw(st.sampled_from(["start", "select", "dras", "kill"]))
    kw: dict = {"actions": actions}
    if actions == "start":
        head = draw(st.integers(0, 12))
        tail = draw(st.integers(0 if head else 1, 6))
        kw["window"] = draw(st.sampled_from([None, [head, tail], (head, tail)]))
        kw["kill_slots"] = draw(st.integers(0, 4))
        if head or kw["window"] is None:
            kw["guard_wait"] = draw(st.none() | st.floats(0, 1e6))
    elif actions in ("select", "dras"):
        n = draw(st.integers(1, 300))
        kw["window"] = draw(st.sampled_from([None, n, [n], [n, 0]]))
        kw["guard_wait"] = draw(st.none() | st.floats(0, 1e6))
        if actions == "select":
            kw["backfill"] = draw(st.sampled_from(["easy", "none"]))
            kw["backfill_order"] = draw(st.sampled_from(["fcfs", "sjf", "saf", "f1"]))
            kw["reserve"] = draw(st.sampled_from(["easy", "sticky"]))
    else:
        kw["kill_slots"] = draw(st.integers(0, 6))
        kw["base_policy"] = draw(st.sampled_from([None, "sjf+easy", "fcfs+easy", "rl:some/dir"]))
        kw["teacher"] = draw(st.sampled_from([None, "rule"]))
    if actions != "kill":
        kw["teacher"] = draw(st.sampled_from([None, "sjf", "fcfs+easy"]))
    kw["observation"] = draw(st.sampled_from([None, "compact", "kernel", "image", "dras", "kill"]))
    kw["reward"] = draw(st.sampled_from(["slowdown", "slowdown_queued", "bsld", "completion",
                                         "dbf", "capability", "capacity"]))
    kw["episode_jobs"] = draw(st.integers(1, 10_000))
    kw["episode_end"] = draw(st.sampled_from(["placed", "completed"]))
    source = draw(st.sampled_from(["window", "jobsets", "curriculum"]))
    kw["episode_source"] = source
    if source == "curriculum":
        kw["curriculum"] = draw(st.fixed_dictionaries(
            {"sampled": st.integers(1, 30)},
            optional={"periods": st.integers(0, 30), "seed": st.integers(0, 2**31),
                      "load_range": st.tuples(_seconds, _seconds).map(sorted)}))
    kw["horizon"] = draw(st.integers(0, 64))
    kw["image_slots"] = draw(st.integers(1, 64))
    for name in ("image_slot_s", "tau", "max_time"):
        kw[name] = draw(st.none() | _seconds)
    kw["node_rows"] = draw(st.none() | st.integers(1, 1024))
    kw["time_scale"] = draw(_seconds | st.integers(1, 10**6))
    kw["smdp_gamma"] = draw(st.none() | st.floats(1e-6, 1.0))
    kw["reward_weights"] = draw(st.lists(st.floats(-10, 10), min_size=3, max_size=3))
    kw["queue_norm"] = draw(st.floats(1, 1e6) | st.integers(1, 10**6))
    return EnvSpec(**kw)


@settings(max_examples=150, deadline=None)
@given(specs())
def test_a_spec_survives_json_and_back(spec):
    text = json.dumps(spec.to_dict(), allow_nan=False)   # JSON-safe: no tuples, no NaN
    back = EnvSpec.from_dict(json.loads(text))
    assert back == spec and back.to_dict() == spec.to_dict()
    assert back.action_map == spec.action_map


def _scenario(jobs: int = 60):
    return load_scenario(SCENARIO, [f"workload.jobs={jobs}"])


@settings(max_examples=40, deadline=None)
@given(specs())
def test_resolving_fills_every_default_and_is_idempotent(spec):
    scenario = _scenario()
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    r = spec.resolved(scenario, workload)
    assert None not in (r.observation, r.window, r.tau, r.max_time, r.image_slot_s, r.node_rows)
    assert (r.base_policy is not None) == (spec.actions == "kill")
    assert r.resolved(scenario, workload) == r and r.action_map == spec.action_map
    assert EnvSpec.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_resolved_values_by_hand():
    # 256 cores; the longest request of the workload sets max_time and the image slot.
    scenario = _scenario()
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    longest = float(workload.req_time.max())
    r = EnvSpec(actions="select", observation="image", image_slots=10).resolved(scenario, workload)
    assert (r.window, r.observation, r.tau, r.node_rows) == (128, "image", 10.0, 256)
    assert r.max_time == max(1e5, 2 * longest)
    assert r.image_slot_s == longest / 7.5
    kill = EnvSpec(actions="kill").resolved(scenario, workload)
    assert (kill.window, kill.kill_slots, kill.base_policy, kill.observation) == (0, 4, "sjf+easy",
                                                                                   "kill")
    start = EnvSpec(max_time=5e5, window=[6, 2]).resolved(scenario, workload)
    assert (start.window, start.max_time, start.observation) == ((6, 2), 5e5, "compact")


def test_with_scales_pins_only_the_feature_scales_of_the_observation():
    scenario = _scenario()
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    for spec, pinned in ((EnvSpec(), {"max_time"}),
                         (EnvSpec(observation="image"), {"max_time", "image_slot_s"}),
                         (EnvSpec(actions="dras"), {"max_time", "node_rows"}),
                         (EnvSpec(max_time=7.0), set())):
        out = spec.with_scales(spec.resolved(scenario, workload))
        changed = {k for k in spec.names() if getattr(out, k) != getattr(spec, k)}
        assert changed == pinned


@pytest.mark.parametrize("settings_, message", [
    ({"observation": "pixels"},
     "train.env.observation: expected one of compact, kernel, image, dras, kill, backfill, got 'pixels'"),
    ({"imgae_slots": 3},
     "train.env.imgae_slots: expected a setting of cosim.env.EnvSpec, got unknown key "
     "'imgae_slots'; did you mean 'image_slots'?"),
    ({"window": [3]}, "train.env.window: expected (M_head, M_tail) for actions='start', got 3"),
    ({"window": True}, "train.env.window: expected a number of job slots, or (M_head, M_tail), "
                       "got True"),
    ({"time_scale": "x"}, "train.env.time_scale: expected seconds > 0, got 'x'"),
    ({"max_time": 0}, "train.env.max_time: expected seconds > 0, got 0"),
    ({"episode_jobs": 2.5}, "train.env.episode_jobs: expected a job count >= 1, got 2.5"),
    ({"horizon": -1}, "train.env.horizon: expected an integer >= 0, got -1"),
    ({"smdp_gamma": 1.5}, "train.env.smdp_gamma: expected a discount in (0, 1], got 1.5"),
    ({"reward_weights": [1, 2]},
     "train.env.reward_weights: expected three weights w1, w2, w3, got [1, 2]"),
    ({"actions": "select", "kill_slots": 2},
     "train.env.kill_slots: expected 0 for actions='select' (kill slots belong to the 'start' "
     "model), got 2"),
    ({"base_policy": "sjf+easy"},
     "train.env.base_policy: expected nothing unless actions is 'kill', 'inspect' or "
     "'backfill' (the policy that schedules while the agent decides kills, skips or "
     "backfills), got 'sjf+easy'"),
    ({"curriculum": {"sampled": 2}},
     "train.env.curriculum: expected a non-empty list of workloads exactly when "
     "episode_source is 'curriculum', got given"),
    ({"episode_source": "curriculum", "curriculum": {"sampeld": 2}},
     "train.env.curriculum: expected keys among sampled, periods, synthetic, load_range, seed, "
     "got {'sampeld': 2}; did you mean 'sampled'?"),
    ({"episode_source": "curriculum", "curriculum": {"sampled": 0}},
     "train.env.curriculum: expected episode counts sampled, periods, synthetic >= 0 with at "
     "least one episode, got {'sampled': 0}"),
    ({"episode_source": "curriculum", "curriculum": {"sampled": 1, "load_range": [2, 1]}},
     "train.env.curriculum.load_range: expected [LOW, HIGH] with 0 < LOW <= HIGH, got [2, 1]"),
])
def test_a_bad_spec_says_where_what_and_what_is_expected(settings_, message):
    with pytest.raises(ScenarioError) as err:
        EnvSpec.from_dict(settings_, where="train.env")
    assert str(err.value) == message


def test_keywords_go_through_the_spec():
    # gym.make(ENV_ID, **kw) and the tests build envs by keyword: the same spec, same checks.
    scenario = _scenario()
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    spec = EnvSpec(actions="select", window=16, episode_jobs=40)
    by_spec = SchedulingEnv(scenario, spec, workload=workload)
    by_kw = SchedulingEnv(scenario, workload=workload, actions="select", window=[16], episode_jobs=40)
    by_dict = SchedulingEnv(scenario, spec.to_dict(), workload=workload)
    assert by_spec.given_spec == by_kw.given_spec == by_dict.given_spec == spec
    assert by_spec.env_spec == by_kw.env_spec == spec.resolved(scenario, workload)
    a, _ = by_spec.reset(seed=3)
    b, _ = by_kw.reset(seed=3)
    assert np.array_equal(a, b)
    over = SchedulingEnv(scenario, spec, workload=workload, episode_jobs=20)
    assert over.given_spec == spec.replace(episode_jobs=20)
    with pytest.raises(ScenarioError, match=r"^horizn: .*did you mean 'horizon'\?$"):
        SchedulingEnv(scenario, workload=workload, horizn=3)
    with pytest.raises(ScenarioError, match=r"^base_policy: expected a heuristic name here"):
        SchedulingEnv(scenario, workload=workload, actions="kill", base_policy="rl:x",
                      episode_jobs=4)


def test_a_checkpoint_saves_the_spec_beside_the_front_keys():
    config = {"scenario": "s.yaml", "scenario_set": ["a=1"], "predictor": "rnn",
              "actions": "select", "window": [16], "teacher": "sjf"}
    saved = json.loads(json.dumps(env_meta(config)))
    assert set(saved) == {"scenario", "scenario_set", "predictor", *EnvSpec.names()}
    spec, front = read_env_spec({"env": saved, "_path": "ckpt"})
    assert spec == EnvSpec(actions="select", window=16, teacher="sjf")
    assert front == {"scenario": "s.yaml", "scenario_set": ["a=1"], "predictor": "rnn"}
    assert env_meta(None) is None
    with pytest.raises(ScenarioError) as err:
        read_env_spec({"env": {**saved, "windw": 3}, "_path": "ckpt"})
    assert str(err.value) == ("ckpt/meta.json: env.windw: expected a setting of "
                              "cosim.env.EnvSpec, got unknown key 'windw'; did you mean 'window'?")


def _starts_digest(policy, scenario, workload) -> str:
    sim = build(simpy.Environment(), scenario, policy, workload=workload)
    sim.env.run(until=sim.finished)
    starts = np.asarray(sim.jobs_table()["start"], dtype=float).tolist()
    return hashlib.sha256(json.dumps(starts).encode()).hexdigest()[:16]


def test_an_old_checkpoint_loads_and_acts_as_before():
    # agents/pretrained was written before EnvSpec: its env holds only some keys.
    from agents.rl_policy import load_rl_policy

    meta = read_meta(PRETRAINED)
    spec, front = read_env_spec(meta)
    assert spec == EnvSpec(actions="select", backfill_order="saf", episode_jobs=256,
                           max_time=317738.0, observation="kernel", window=128)
    assert front == {"scenario": "scenarios/lublin256.yaml",
                     "scenario_set": ["workload.estimates.model=exact"]}
    agent = load_rl_policy(PRETRAINED)
    scenario = load_scenario(SCENARIO, front["scenario_set"])
    jobs = lublin(150, procs=256, seed=77)
    # Recorded before EnvSpec (from the saved dict, at commit 6e626c2).
    before = "b9dde73e366b133f"
    assert _starts_digest(acting_policy(spec, scenario, jobs, agent.act), scenario, jobs) == before
    assert _starts_digest(acting_policy(meta["env"], scenario, jobs, agent.act),
                          scenario, jobs) == before
    assert split_config(env_meta(meta["env"]))[0] == spec      # re-saved, it reads the same


_junk = (st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats() | st.text(max_size=8)
         | st.lists(st.integers(-3, 300), max_size=4) | st.dictionaries(st.text(max_size=4),
                                                                        st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(EnvSpec.names()), _junk, st.sampled_from(["start", "select", "dras", "kill"]))
def test_any_value_is_a_valid_setting_or_a_one_line_error_at_its_field(name, value, actions):
    settings_ = {"actions": actions, name: value}
    try:
        spec = EnvSpec.from_dict(settings_, where="env")
    except ScenarioError as exc:
        assert exc.where.startswith("env.") and "\n" not in str(exc)
        return
    assert EnvSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_a_spec_pickles_with_its_action_map():
    import pickle

    spec = EnvSpec(actions="dras", window=[7])
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and back.action_map.window == 7


@pytest.mark.parametrize("argv, message", [
    (["--env", "imgae_slots=3"], "error: --env imgae_slots: expected a field of cosim.env.EnvSpec, "
                                 "got an unknown environment setting; did you mean 'image_slots'?"),
    (["--env", "max_time=-3"], "error: env.max_time: expected seconds > 0, got -3"),
    (["--arg", "ent_coeff=3"], "error: --arg ent_coeff: expected a field of agents.loop.Args, "
                               "got an unknown hyper-parameter; did you mean 'ent_coef'?"),
])
def test_agents_train_names_a_bad_env_setting_in_one_line(tmp_path, capsys, argv, message):
    from agents.__main__ import main

    out = tmp_path / "run"
    assert main(["train", str(SCENARIO), "--quiet", "--out", str(out), *argv]) == 2
    assert capsys.readouterr().err.strip() == message
    assert not out.exists()


def test_a_teacher_per_dras_level_is_one_setting():
    # DRAS's level-1 and level-2 teachers are the env's own teacher setting
    # (no wrapper): saved with the spec, read back as a pair.
    spec = EnvSpec(actions="dras", teacher=["fcfs", "wfp3"])
    assert spec.teacher == ("fcfs", "wfp3")
    assert spec.to_dict()["teacher"] == ["fcfs", "wfp3"]
    assert EnvSpec.from_dict(spec.to_dict()) == spec
    assert EnvSpec(teacher=["sjf"]).teacher == "sjf"
    with pytest.raises(ScenarioError) as err:
        EnvSpec.from_dict({"teacher": ["fcfs", "wfp3", "sjf"]}, where="train.env")
    assert str(err.value) == ("train.env.teacher: expected a heuristic policy name, or two: "
                              "[level-1 teacher, level-2 teacher], got ['fcfs', 'wfp3', 'sjf']")


def test_the_level_teacher_answers_per_level():
    scenario = _scenario()
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    env = SchedulingEnv(scenario, workload=workload, actions="dras", teacher=["fcfs", "wfp3"],
                        episode_jobs=40)
    _, info = env.reset(seed=3)
    seen = set()
    for _ in range(200):
        name = ("fcfs", "wfp3")[env.unwrapped.level - 1]
        assert info["teacher_action"] == env.teacher_action(name)
        seen.add(name)
        _, _, done, trunc, info = env.step(info["teacher_action"])
        if done or trunc:
            _, info = env.reset()
    assert seen == {"fcfs", "wfp3"}
