"""The ``inspect`` action model: accept or skip each start the base policy proposes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import simpy

from cosim.config import scenario_from_dict
from cosim.env import SchedulingEnv
from cosim.env.acting import acting_policy
from cosim.env.actions import make_action_model
from cosim.env.wrappers import heuristic_metric
from cosim.errors import ScenarioError
from cosim.model import build
from cosim.policies import make_policy
from cosim.policies.priority import PriorityWeights, heuristic_weights
from cosim.workloads.base import Workload
from cosim.workloads.loading import load_workload
from cosim.workloads.lublin import lublin


def small(cores):
    return scenario_from_dict({"cluster": {"nodes": cores},
                               "workload": {"kind": "swf", "path": "unused"}})


# 4 cores. J1 (4 cores, 100 s) at 0; J2 (2 cores, 50 s) at 1; J3 (2 cores, 20 s)
# at 2; J4 (1 core, 200 s) at 3 (exact estimates).
HAND = Workload.from_columns(submit=[0, 1, 2, 3], run=[100, 50, 20, 200], procs=[4, 2, 2, 1])
# FCFS+EASY alone: J1 at 0; J2 reserved at 100, nothing backfills; at 100 J2 and
# J3 start; J4 (reserved at 120) at J3's end.
FCFS_STARTS = [0.0, 100.0, 100.0, 120.0]


def _env(**kw):
    kw.setdefault("base_policy", "fcfs+easy")
    return SchedulingEnv(small(4), actions="inspect", episode_jobs=4, workload=HAND, **kw)


def _play(env, choose):
    """Play an episode; the (time, mask) of every ask and the start times."""
    obs, info = env.reset(seed=0)
    asks, done = [], False
    while not done:
        asks.append((info["time"], tuple(int(x) for x in info["action_mask"])))
        obs, _, terminated, truncated, info = env.step(choose(info))
        done = terminated or truncated
    starts = [j.start for j in sorted(env.simulation.scheduler.jobs, key=lambda j: j.id)]
    return asks, starts, info


def _acting(act, workload=HAND, scenario=None, **config):
    """Run the model as a plain policy (as ``rl:DIR`` does); the start times."""
    scenario = scenario or small(4)
    policy = acting_policy({"actions": "inspect", **config}, scenario, workload, act)
    env = simpy.Environment()
    sim = build(env, scenario, policy, workload=workload)
    env.run(until=sim.finished)
    return [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.id)], policy


def test_accepting_every_proposal_is_the_base_schedule_by_hand():
    asks, starts, info = _play(_env(), lambda info: 0)
    assert starts == FCFS_STARTS
    # Asked at J1 (0, arrivals to come), J3 (100, J2 runs) and J4 (120, J2
    # runs). J2 at 100 is accepted without asking: nothing runs and every job
    # has arrived, so a skip would wait for an event that never comes.
    assert asks == [(0.0, (1, 1)), (100.0, (1, 1)), (120.0, (1, 1))]
    assert info["episode_metrics"]["bsld_mean"] == pytest.approx(
        heuristic_metric(_env(), HAND, "fcfs+easy"), rel=1e-12)


def test_a_skip_delays_to_the_next_event_by_hand():
    choices = iter([1, 0, 0, 0])
    asks, starts, _ = _play(_env(), lambda info: next(choices))
    # J1 skipped at 0 waits for the next event, J2's arrival at 1, where the
    # base proposes it again; everything after shifts by 1 s.
    assert [t for t, _ in asks] == [0.0, 1.0, 101.0, 121.0]
    assert starts == [1.0, 101.0, 101.0, 121.0]


def test_max_skips_accepts_without_asking():
    env = _env(max_skips=1)
    asks, starts, _ = _play(env, lambda info: 1 if info["time"] == 0 else 0)
    # After one skip the proposal at 1 is accepted without asking.
    assert [t for t, _ in asks] == [0.0, 101.0, 121.0]
    assert starts == [1.0, 101.0, 101.0, 121.0]


def test_always_skip_is_bounded_by_hand():
    # max_skips 2: J1 skipped at 0 and 1, accepted at 2 (J3's arrival). J2 at
    # 102 cannot be skipped: nothing runs and every job has arrived. J3 is
    # skipped at 102 (J2 runs), accepted at 152 (nothing left to wait for);
    # J4 skipped at 152, accepted at 172.
    starts, policy = _acting(lambda obs, mask: 1, max_skips=2, base_policy="fcfs+easy")
    assert starts == [2.0, 102.0, 152.0, 172.0]
    assert (policy.skips, policy.accepts) == (4, 4)


def test_the_guard_forbids_skipping_a_job_that_has_waited():
    starts, policy = _acting(lambda obs, mask: 1, guard_wait=0.5, base_policy="fcfs+easy")
    assert starts == [1.0, 101.0, 101.0, 121.0]
    assert policy.skips == 1


def test_a_lone_job_is_never_skipped():
    one = Workload.from_columns(submit=[5], run=[10], procs=[2])
    starts, policy = _acting(lambda obs, mask: 1, workload=one, base_policy="fcfs+easy")
    assert starts == [5.0] and policy.skips == 0


def test_observation_shows_the_proposed_job_and_whether_it_backfills():
    env = _env(observation="compact")
    obs, info = env.reset(seed=0)
    # Slot [present, fits_now, procs, mem, estimate, wait]: J1, 4 of 4 cores.
    assert obs[:3].tolist() == [1.0, 1.0, 1.0]
    assert env.unwrapped._agent.window[0].id == 1 and env.level == 1


@pytest.mark.parametrize("base", ["f1+easy", "sjf+easy", "learned"])
def test_accepting_every_proposal_is_the_base_schedule_on_lublin(base, lublin_trace, tmp_path):
    scenario = scenario_from_dict({"cluster": {"nodes": 256},
                                   "workload": {"kind": "swf", "path": str(lublin_trace),
                                                "jobs": 400}})
    jobs = load_workload(scenario)
    if base == "learned":
        w = list(heuristic_weights("f1", 256))
        w[4] = -0.5        # a dynamic key (wait per estimate): recomputed at every pass
        (tmp_path / "policy.json").write_text(json.dumps(
            PriorityWeights(tuple(w), 256, "easy").as_dict()))
        base = f"learned:{tmp_path}"
    starts, policy = _acting(lambda obs, mask: 0, jobs, scenario, base_policy=base)
    env = simpy.Environment()
    sim = build(env, scenario, make_policy(base), workload=jobs)
    env.run(until=sim.finished)
    assert starts == [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.id)]
    assert policy.skips == 0 and policy.accepts == len(jobs)


def test_random_choices_keep_the_schedule_valid_and_bounded(lublin_trace):
    scenario = scenario_from_dict({"cluster": {"nodes": 256},
                                   "workload": {"kind": "swf", "path": str(lublin_trace),
                                                "jobs": 300}})
    jobs = load_workload(scenario)
    rng = np.random.default_rng(0)
    starts, policy = _acting(lambda obs, mask: int(rng.integers(2)), jobs, scenario,
                             base_policy="sjf+easy", max_skips=3)
    assert all(s >= sub for s, sub in zip(starts, jobs.submit))
    assert policy.skips > 10 and policy.accepts == len(jobs)


@pytest.mark.parametrize("kw, message", [
    ({"window": 5}, "window: expected no window for actions='inspect'"),
    ({"max_skips": 0}, "max_skips: expected an integer >= 1"),
    ({"base": None}, "base_policy: expected the policy that proposes"),
])
def test_bad_options_say_what_is_expected(kw, message):
    args = {"window": None, "base": make_policy("fcfs+easy"), **kw}
    with pytest.raises(ScenarioError, match=message):
        make_action_model("inspect", **args)


def test_max_skips_belongs_to_inspect():
    with pytest.raises(ScenarioError, match="max_skips: expected nothing for actions='select'"):
        make_action_model("select", 8, max_skips=2)


def test_the_base_as_teacher_says_accept():
    env = _env(teacher="fcfs+easy")
    _, info = env.reset(seed=0)
    seen, done = [], False
    while not done:
        seen.append(info["teacher_action"])
        _, _, terminated, truncated, info = env.step(info["teacher_action"])
        done = terminated or truncated
    assert seen == [0, 0, 0]


def test_trained_inspector_runs_in_cosim_run_as_in_its_env(tmp_path):
    # python -m agents train --actions inspect --base-policy ... --paired ...;
    # then rl:DIR in the runner makes the env episode's choices on the same jobs.
    import torch

    from agents.__main__ import main
    from agents.checkpoint import read_meta
    from agents.evaluation import greedy_episode
    from agents.rl_policy import load_rl_policy
    from cosim.compose import make_env, run_policy
    from cosim.config import load_scenario
    from cosim.workloads.windows import window

    torch.set_num_threads(1)
    out = tmp_path / "insp"
    assert main(["train", "scenarios/lublin256.yaml", "--actions", "inspect", "--base-policy",
                 "f1+easy", "--paired", "f1+easy", "--paired-mode", "log", "--steps", "64",
                 "--envs", "1", "--arg", "num_steps=64", "--arg", "num_minibatches=2",
                 "--episode-jobs", "24", "--quiet", "--out", str(out)]) == 0
    env_config = read_meta(out)["env"]
    assert (env_config["actions"], env_config["base_policy"]) == ("inspect", "f1+easy")
    assert env_config["paired"]["mode"] == "log"
    policy = load_rl_policy(out)
    env = make_env(policy.env_config, teacher=None, episode_jobs=60)
    w = window(env.workload, 60, start=300)
    info = greedy_episode(policy, env, seed=0, options={"jobs": w}).info
    starts = [j.start for j in sorted(env.simulation.scheduler.jobs, key=lambda j: j.id)]
    summary = run_policy(load_scenario("scenarios/lublin256.yaml"), f"rl:{out}", tmp_path / "r",
                         workload=w)
    assert summary["bsld_mean"] == info["episode_metrics"]["bsld_mean"]
    from cosim import records

    assert list(records.read_jobs(tmp_path / "r" / "jobs.parquet")["start"]) == starts


@pytest.mark.parametrize("argv, message", [
    (["--actions", "select", "--base-policy", "f1+easy"], "expected --actions kill or inspect"),
    (["--actions", "inspect", "--base-policy", "nosuch+easy"], "nosuch"),
])
def test_inspect_user_errors_print_one_line(tmp_path, capsys, argv, message):
    from agents.__main__ import main

    assert main(["train", "scenarios/lublin256.yaml", "--out", str(tmp_path / "o"), "--quiet",
                 *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("error: ")


def test_acting_policy_from_a_saved_config_is_the_envs(lublin_trace):
    # The saved env config (base_policy, max_skips) rebuilds the same model.
    scenario = scenario_from_dict({"cluster": {"nodes": 256},
                                   "workload": {"kind": "swf", "path": str(lublin_trace),
                                                "jobs": 150}})
    jobs = load_workload(scenario)
    config = {"actions": "inspect", "base_policy": "f1+easy", "max_skips": 2, "guard_wait": 7200.0}
    env = SchedulingEnv(scenario, workload=jobs, episode_jobs=len(jobs), **config)

    def skip(obs, mask):
        return int(mask[1])

    def run(policy):
        sim_env = simpy.Environment()
        sim = build(sim_env, scenario, policy, workload=jobs)
        sim_env.run(until=sim.finished)
        return [j.start for j in sim.scheduler.jobs], policy.skips
    via_env, direct = run(env.acting_policy(skip)), run(acting_policy(config, scenario, jobs, skip))
    assert via_env == direct and direct[1] > 10


def test_a_user_history_base_is_bound_under_inspect_and_kill(tmp_path):
    # A learned:DIR base with user-history weights reads features bound to the run
    # (attach_model); wrapped by inspect, accepting every proposal must still be its
    # schedule, not the request-ordered one it fell back to before.
    from cosim.env.actions import make_action_model as make_model
    from cosim.policies.priority import FEATURES

    rng = np.random.default_rng(3)
    n = 300
    jobs = Workload.from_columns(submit=np.cumsum(rng.exponential(20, n)),
                                 run=rng.lognormal(5, 1.5, n).clip(1, 20_000),
                                 req_time=np.full(n, 30_000.0), procs=rng.integers(1, 64, n),
                                 user=rng.integers(-1, 8, n))
    w = [0.0] * len(FEATURES)
    w[FEATURES.index("log_user_pred")] = 1.0
    (tmp_path / "policy.json").write_text(json.dumps(PriorityWeights(tuple(w), 256).as_dict()))
    base = f"learned:{tmp_path}"
    scenario = small(256)

    def alone(name):
        env = simpy.Environment()
        sim = build(env, scenario, make_policy(name), workload=jobs)
        env.run(until=sim.finished)
        return [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.id)]

    starts, policy = _acting(lambda obs, mask: 0, jobs, scenario, base_policy=base)
    assert starts == alone(base)
    assert starts != alone("fcfs+easy")     # the user term orders this queue
    kill = make_model("kill", None, kill_slots=2, base=make_policy(base))
    assert hasattr(kill, "attach_model")


@pytest.mark.parametrize("skip_rate", [0.0, 0.3])
def test_passes_the_base_would_spend_idle_are_skipped_with_the_same_schedule(skip_rate):
    # The inspect model offers its base's pass_is_idle (none while a skip has cut
    # the last pass short): the scheduler skips those passes, and the schedule is
    # the one every pass would give, for an agent that accepts everything and for
    # one that skips at random.
    jobs = lublin(600, procs=64, seed=31)
    scenario = small(64)
    runs = {}
    for offered in (True, False):
        draw = np.random.default_rng(4).random
        policy = acting_policy({"actions": "inspect", "base_policy": "saf+easy"}, scenario,
                               jobs, lambda obs, mask, draw=draw: int(draw() < skip_rate))
        if not offered:
            del policy.pass_is_idle
        env = simpy.Environment()
        sim = build(env, scenario, policy, workload=jobs)
        env.run(until=sim.finished)
        starts = [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.id)]
        runs[offered] = (starts, sim.scheduler.counters.passes, policy.skips)
    assert runs[True][0] == runs[False][0]
    assert runs[True][2] == runs[False][2]
    assert (runs[True][2] > 50) == (skip_rate > 0)
    assert runs[True][1] < runs[False][1]


def test_the_inspector_harness_cuts_a_trace_as_the_tuner_does(tmp_path, capsys):
    # --trace: windows of a trace's validation span, each from an empty machine, and a
    # random-skip probe over them; a missing trace is one line and exit 2.
    from pathlib import Path

    from test_tune import trace

    from agents import corrections
    from cosim.evaluation import chronological_split

    path = Path(trace(tmp_path, "t", 1.0)).with_suffix(".swf")
    protocol = corrections.trace_protocol(str(path), 64, 3)
    scenario, split = protocol.scenario, protocol.split
    wl = load_workload(scenario)
    expected = chronological_split(wl, size=64, train_count=1, count=3)
    assert [w.job_id.tolist() for w in split.validation] == [
        w.job_id.tolist() for w in expected.validation]
    first = int(split.validation[0].job_id[0])
    # SWF ids count from 1: rows 500..699 of 1,000 are the validation span (50-70 %)
    assert 501 <= first and int(split.validation[-1].job_id[-1]) <= 700
    assert corrections.main(["--trace", str(path), "--size", "64", "--windows", "3",
                             "--probe", "0.5", "--tries", "2"]) == 0
    assert "random skips p=0.5 over saf+easy, 2 tries x 3 windows" in capsys.readouterr().out
    assert corrections.main(["--trace", str(tmp_path / "none.swf")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "none.swf" in err[0]
