"""The ``backfill`` action model: the agent orders EASY's backfilling over a base policy."""

from __future__ import annotations

import json

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim.config import scenario_from_dict
from cosim.env import SchedulingEnv
from cosim.env.acting import acting_policy
from cosim.env.actions import make_action_model
from cosim.env.spec import EnvSpec
from cosim.errors import ScenarioError
from cosim.model import build
from cosim.policies import make_policy
from cosim.policies.priority import FEATURES, PriorityWeights, heuristic_weights
from cosim.workloads.base import Workload
from cosim.workloads.loading import load_workload


def small(cores):
    return scenario_from_dict({"cluster": {"nodes": cores},
                               "workload": {"kind": "swf", "path": "unused"}})


# 4 cores, exact estimates. J1 (3 cores, 100 s) at 0; J2 (4 cores, 50 s) at 1,
# reserved at 100 (J1's end), no extra cores; J3 (1 core, 90 s) and J4 (1 core,
# 60 s) at 2, both ending before 100: one may backfill on the free core.
HAND = Workload.from_columns(submit=[0, 1, 2, 2], run=[100, 50, 90, 60], procs=[3, 4, 1, 1])
# FCFS+EASY alone: J3 backfills at 2; J2 at 100; J4 at 150 (J2's end).
FCFS_STARTS = [0.0, 100.0, 2.0, 150.0]
STOP = 16   # the stop index with the default 16 candidate slots

# 6 cores, exact estimates. J1 (4 cores, 100 s) at 0; J2 (4 cores, 50 s) at 1,
# reserved at 100 with 2 extra cores; J3, J4 (1 core) and J5 (2 cores), all
# 300 s, at 2: they end after 100, so only the 2 extra cores can take them.
EXTRA = Workload.from_columns(submit=[0, 1, 2, 2, 2], run=[100, 50, 300, 300, 300],
                              procs=[4, 4, 1, 1, 2])


def _env(workload=HAND, cores=4, **kw):
    kw.setdefault("base_policy", "fcfs+easy")
    return SchedulingEnv(small(cores), actions="backfill", episode_jobs=len(workload),
                         workload=workload, **kw)


def _play(env, choices):
    """Play an episode with the given actions (then slot 0); asks and start times."""
    choices = list(choices)
    obs, info = env.reset(seed=0)
    asks, done = [], False
    while not done:
        agent = env.unwrapped._agent
        asks.append((info["time"], [j.id if j else None for j in agent.window[:3]],
                     int(info["action_mask"][STOP])))
        obs, _, terminated, truncated, info = env.step(choices.pop(0) if choices else 0)
        done = terminated or truncated
    jobs = sorted(env.simulation.scheduler.jobs, key=lambda j: j.id)
    return asks, [j.start for j in jobs], env.simulation.scheduler.counters


def _base_starts(scenario, workload, base):
    env = simpy.Environment()
    sim = build(env, scenario, make_policy(base), workload=workload)
    env.run(until=sim.finished)
    return [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.id)]


def _acting(act, workload, scenario, **config):
    """Run the model as a plain policy (as ``rl:DIR`` does); start times, policy, counters."""
    policy = acting_policy({"actions": "backfill", **config}, scenario, workload, act)
    env = simpy.Environment()
    sim = build(env, scenario, policy, workload=workload)
    env.run(until=sim.finished)
    starts = [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.id)]
    return starts, policy, sim.scheduler.counters


# -- hand-checked schedules ---------------------------------------------------------------
def test_slot_zero_is_easys_own_pick_by_hand():
    asks, starts, counters = _play(_env(), [0])
    assert _base_starts(small(4), HAND, "fcfs+easy") == FCFS_STARTS
    assert starts == FCFS_STARTS
    # One choice, at 2: J3 then J4 (FCFS order), stop legal (J1 runs).
    assert asks == [(2.0, [3, 4, None], 1)]
    assert counters.reservations_broken == 0


def test_another_pick_and_stop_by_hand():
    # Slot 1 at 2: J4 backfills (ends at 62); at 62 J3 would end at 152 > 100
    # and there are no extra cores, so it waits for J2 (100-150).
    asks, starts, _ = _play(_env(), [1])
    assert asks == [(2.0, [3, 4, None], 1)] and starts == [0.0, 100.0, 150.0, 2.0]
    # Stop at 2: nothing backfills; J3 and J4 start at J2's end.
    _, starts, _ = _play(_env(), [STOP])
    assert starts == [0.0, 100.0, 150.0, 150.0]


def test_candidates_are_recomputed_after_each_start_by_hand():
    # FCFS+EASY alone: J3, then J4 on the 2 extra cores; J5 (2 cores) at J2's end.
    assert _base_starts(small(6), EXTRA, "fcfs+easy") == [0.0, 100.0, 2.0, 2.0, 150.0]
    asks, starts, counters = _play(_env(EXTRA, 6), [0, 0])
    assert asks == [(2.0, [3, 4, 5], 1), (2.0, [4, None, None], 1)]
    assert starts == [0.0, 100.0, 2.0, 2.0, 150.0]
    # J5 first takes both extra cores: no candidate is left, nobody else is asked
    # about, J2 keeps its reservation (100) and J3, J4 start at its end.
    asks, starts, counters = _play(_env(EXTRA, 6), [2])
    assert asks == [(2.0, [3, 4, 5], 1)]
    assert starts == [0.0, 100.0, 150.0, 150.0, 2.0]
    assert counters.reservations_broken == 0


def test_the_guard_forbids_stopping_and_a_lone_choice_is_not_asked():
    # guard_wait 0: every candidate has waited long enough, so stop is illegal;
    # after J3 starts, J4 is the only legal action and starts without asking.
    asks, starts, _ = _play(_env(EXTRA, 6, guard_wait=0.0), [0])
    assert asks == [(2.0, [3, 4, 5], 0)]
    assert starts == [0.0, 100.0, 2.0, 2.0, 150.0]


def test_windows_that_never_ask_are_redrawn():
    # Four quiet jobs, then HAND: of the five 4-job windows only the last two
    # (with J1, J2 and J3) ever ask; a reset never returns one that does not.
    jobs = Workload.from_columns(submit=[0, 1000, 2000, 3000, 5000, 5001, 5002, 5002],
                                 run=[10, 10, 10, 10, 100, 50, 90, 60],
                                 procs=[1, 1, 1, 1, 3, 4, 1, 1])
    env = SchedulingEnv(small(4), actions="backfill", base_policy="fcfs+easy", episode_jobs=4,
                        workload=jobs)
    for seed in range(8):
        env.reset(seed=seed)
        assert env.unwrapped._agent.request is not None
        assert 3 in env.simulation.workload.procs


def test_observation_rows_by_hand():
    env = _env(observation="backfill")
    obs, info = env.reset(seed=0)
    assert obs.shape == (17, 23) and obs.dtype == np.float32
    # [is_job, is_stop, present, first, rank, procs]: J3, J4, an empty slot, stop.
    assert obs[0, :6].tolist() == [1.0, 0.0, 1.0, 1.0, 0.0, 0.25]
    assert obs[1, :6].tolist() == [1.0, 0.0, 1.0, 0.0, 1 / 16, 0.25]
    assert obs[2, 2] == 0.0 and obs[STOP, :3].tolist() == [0.0, 1.0, 1.0]
    # shadow_use: estimate over the 98 s left to the shadow; no extra cores used.
    assert obs[0, 10] == pytest.approx(90 / 98) and obs[1, 10] == pytest.approx(60 / 98)
    assert obs[0, 11] == obs[1, 11] == 0.0
    # The pass: 1 free core of 4, no extra; every row carries it.
    assert obs[:, 15].tolist() == [0.25] * 17 and obs[:, 16].tolist() == [0.0] * 17


@pytest.mark.parametrize("base, asks", [("fcfs+easy", 100), ("saf+easy", 20)])
def test_the_base_as_teacher_says_slot_zero(lublin_trace, base, asks):
    # The teacher mechanism asks a fresh base on the agent's view: its first
    # start is EASY's next backfill, slot 0, also after earlier starts in the pass.
    scenario = scenario_from_dict({"cluster": {"nodes": 256},
                                   "workload": {"kind": "swf", "path": str(lublin_trace),
                                                "jobs": 600, "estimates": {"model": "tsafrir"}}})
    jobs = load_workload(scenario)
    env = SchedulingEnv(scenario, actions="backfill", base_policy=base,
                        teacher=base, episode_jobs=len(jobs), workload=jobs)
    _, info = env.reset(seed=0)
    seen, done = [], False
    while not done:
        seen.append(info["teacher_action"])
        _, _, terminated, truncated, info = env.step(info["teacher_action"])
        done = terminated or truncated
    assert len(seen) > asks and set(seen) == {0}


# -- properties ---------------------------------------------------------------------------------
@st.composite
def workloads(draw):
    """Random small workloads with inexact estimates (request >= run time)."""
    cores = draw(st.integers(2, 10))
    n = draw(st.integers(2, 14))
    submit = sorted(draw(st.lists(st.integers(0, 80), min_size=n, max_size=n)))
    run = draw(st.lists(st.one_of(st.integers(1, 40), st.integers(60, 300)),
                        min_size=n, max_size=n))
    over = draw(st.lists(st.sampled_from([1.0, 1.0, 1.5, 3.0, 10.0]), min_size=n, max_size=n))
    procs = draw(st.lists(st.integers(1, cores), min_size=n, max_size=n))
    return cores, Workload.from_columns(submit=submit, run=run, procs=procs,
                                        req_time=[r * o for r, o in zip(run, over)])


def _two_order(tmp_path_factory) -> str:
    """A ``learned:DIR`` base whose backfill order is its own (a searched backfill key)."""
    folder = tmp_path_factory.mktemp("two-order")
    bw = [0.0] * len(FEATURES)
    bw[0] = -1.0     # longest estimate first: far from any queue order
    spec = PriorityWeights(tuple(heuristic_weights("f1", 8)), 8, "easy", tuple(bw))
    (folder / "policy.json").write_text(json.dumps(spec.as_dict()))
    return f"learned:{folder}"


BASES = ["fcfs+easy", "saf+easy", "sjf+easy", "f1+easy", "wfp3+easy", "two-order"]


@pytest.fixture(scope="module")
def two_order(tmp_path_factory):
    return _two_order(tmp_path_factory)


@settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=workloads(), base=st.sampled_from(BASES))
def test_slot_zero_never_stopping_is_the_base_schedule(case, base, two_order):
    cores, jobs = case
    base = two_order if base == "two-order" else base
    starts, policy, _ = _acting(lambda obs, mask: 0, jobs, small(cores), base_policy=base)
    assert starts == _base_starts(small(cores), jobs, base)
    assert policy.stops == policy.departures == 0


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=workloads(), seed=st.integers(0, 10_000))
def test_any_choice_keeps_every_reservation(case, seed):
    # FCFS's head changes only by starting, so any broken promise would be the agent's.
    cores, jobs = case
    rng = np.random.default_rng(seed)

    def pick(obs, mask):
        return int(rng.choice(np.flatnonzero(mask)))
    starts, policy, counters = _acting(pick, jobs, small(cores), base_policy="fcfs+easy")
    assert counters.reservations_broken == 0 and counters.refused == 0
    assert all(s >= sub for s, sub in zip(starts, jobs.submit))


def test_random_choices_on_lublin_depart_and_stay_valid(lublin_trace):
    scenario = scenario_from_dict({"cluster": {"nodes": 256},
                                   "workload": {"kind": "swf", "path": str(lublin_trace),
                                                "jobs": 300, "estimates": {"model": "tsafrir"}}})
    jobs = load_workload(scenario)
    rng = np.random.default_rng(0)
    starts, policy, counters = _acting(
        lambda obs, mask: int(rng.choice(np.flatnonzero(mask))), jobs, scenario,
        base_policy="fcfs+easy")
    assert policy.departures > 10 and policy.stops > 10
    assert counters.reservations_broken == 0 and counters.refused == 0
    assert all(s >= sub for s, sub in zip(starts, jobs.submit))


# -- bad input ----------------------------------------------------------------------------------
def _relaxed_saf():
    from cosim.policies.priority import PriorityWeights, heuristic_weights, make_priority_policy
    return make_priority_policy(PriorityWeights(heuristic_weights("saf", 16), 16, slack=2.0))


@pytest.mark.parametrize("kw, message", [
    ({"window": -1}, "window: expected a number of candidate slots >= 1 for actions='backfill'"),
    ({"kill_slots": 2}, "kill_slots: expected 0 for actions='backfill'"),
    ({"base": None}, "base_policy: expected the policy with EASY that orders the queue"),
    ({"base": make_policy("saf+conservative")},
     "base_policy: expected a policy with EASY backfilling under actions='backfill'"),
    ({"max_skips": 2}, "max_skips: expected nothing for actions='backfill'"),
    ({"base": _relaxed_saf()}, "base_policy: expected textbook EASY under actions='backfill' "
                               r"\(this learned policy relaxes EASY with slack 2"),
])
def test_bad_options_say_what_is_expected(kw, message):
    args = {"window": None, "base": make_policy("saf+easy"), **kw}
    with pytest.raises(ScenarioError, match=message):
        make_action_model("backfill", **args)


@pytest.mark.parametrize("kw, message", [
    ({"actions": "backfill", "base_policy": "sjf+greedy"},
     "train.env.base_policy: expected a policy with EASY backfilling under "
     "actions='backfill' (e.g. saf+easy or learned:DIR), got 'sjf+greedy'"),
    ({"actions": "backfill", "base_policy": "rl:some/dir"},
     "train.env.base_policy: expected a policy with EASY backfilling"),
    ({"actions": "select", "observation": "backfill"},
     "train.env.observation: expected another observation unless actions is 'backfill'"),
])
def test_spec_errors_are_one_line(kw, message):
    with pytest.raises(ScenarioError) as err:
        EnvSpec.from_dict(kw, where="train.env")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_cli_error_prints_one_line(tmp_path, capsys):
    from agents.__main__ import main

    assert main(["train", "scenarios/lublin256.yaml", "--out", str(tmp_path / "o"), "--quiet",
                 "--actions", "backfill", "--base-policy", "saf+none"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert "EASY backfilling" in err and not (tmp_path / "o").exists()


# -- wiring: agents train -> rl:DIR in cosim run ----------------------------------------------
def test_trained_backfiller_runs_in_cosim_run_as_in_its_env(tmp_path):
    import torch

    from agents.__main__ import main
    from agents.checkpoint import read_meta
    from agents.evaluation import greedy_episode
    from agents.rl_policy import load_rl_policy
    from cosim import records
    from cosim.compose import make_env, run_policy
    from cosim.config import load_scenario
    from cosim.workloads.windows import window

    torch.set_num_threads(1)
    out = tmp_path / "bf"
    assert main(["train", "scenarios/lublin256.yaml", "--actions", "backfill", "--base-policy",
                 "saf+easy", "--teacher", "saf+easy", "--paired", "saf+easy", "--paired-mode",
                 "log", "--steps", "64", "--envs", "1", "--arg", "num_steps=64", "--arg",
                 "num_minibatches=2", "--episode-jobs", "64", "--quiet", "--out", str(out)]) == 0
    env_config = read_meta(out)["env"]
    assert (env_config["actions"], env_config["base_policy"]) == ("backfill", "saf+easy")
    assert env_config["paired"]["mode"] == "log"
    policy = load_rl_policy(out)
    env = make_env(policy.env_config, teacher=None, episode_jobs=80)
    w = window(env.workload, 80, start=300)
    info = greedy_episode(policy, env, seed=0, options={"jobs": w}).info
    starts = [j.start for j in sorted(env.simulation.scheduler.jobs, key=lambda j: j.id)]
    summary = run_policy(load_scenario("scenarios/lublin256.yaml"), f"rl:{out}", tmp_path / "r",
                         workload=w)
    assert summary["bsld_mean"] == info["episode_metrics"]["bsld_mean"]
    assert list(records.read_jobs(tmp_path / "r" / "jobs.parquet")["start"]) == starts
