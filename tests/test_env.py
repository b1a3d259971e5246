"""The Gymnasium environment over the SimPy model."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim.config import scenario_from_dict
from cosim.env import ENV_ID, SchedulingEnv
from cosim.errors import ScenarioError
from cosim.workloads.base import Workload

SCENARIO = "scenarios/lublin256.yaml"


def small_scenario(cores=8):
    return scenario_from_dict({"cluster": {"nodes": cores},
                               "workload": {"kind": "swf", "path": "unused"}})


@pytest.mark.parametrize("observation", ["compact", "kernel", "image"])
@pytest.mark.parametrize("window, kills", [((10, 0), 0), ((8, 2), 3)])
def test_check_env_passes_with_warnings_as_errors(observation, window, kills):
    env = SchedulingEnv(SCENARIO, observation=observation, window=window, kill_slots=kills,
                        episode_jobs=64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_registered_under_an_id():
    env = gym.make(ENV_ID, scenario=SCENARIO, episode_jobs=32)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert info["action_mask"].dtype == np.int8


def rollout(env, seed, steps=300, policy_seed=0):
    rng = np.random.default_rng(policy_seed)
    obs, info = env.reset(seed=seed)
    trace = []
    for _ in range(steps):
        mask = info["action_mask"]
        assert mask.dtype == np.int8 and mask.any()
        assert np.array_equal(mask, env.unwrapped.action_masks())
        action = int(rng.choice(np.flatnonzero(mask)))
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((action, float(reward), obs.tobytes(), terminated, truncated, info["time"]))
        if terminated or truncated:
            obs, info = env.reset()
    return trace


@pytest.mark.parametrize("observation", ["compact", "kernel"])
def test_same_seed_same_trajectory(observation):
    kwargs = dict(observation=observation, window=(6, 2), kill_slots=2, episode_jobs=48)
    a = rollout(SchedulingEnv(SCENARIO, **kwargs), seed=5)
    b = rollout(SchedulingEnv(SCENARIO, **kwargs), seed=5)
    assert a == b
    c = rollout(SchedulingEnv(SCENARIO, **kwargs), seed=6)
    assert a != c


@pytest.mark.parametrize("reward", ["slowdown", "slowdown_queued", "bsld", "completion", "dbf",
                                    "capability", "capacity"])
def test_masks_never_allow_what_the_engine_refuses(reward):
    env = SchedulingEnv(SCENARIO, window=(5, 3), kill_slots=2, episode_jobs=80, reward=reward,
                        episode_end="completed")
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=3)
    done = False
    total = 0.0
    while not done:
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, r, terminated, truncated, info = env.step(action)
        assert np.isfinite(r)
        total += r
        done = terminated or truncated
    sched = env._sim.scheduler
    assert sched.counters.refused == 0
    assert terminated and not truncated
    metrics = info["episode_metrics"]
    assert metrics["jobs_finished"] == 80 and metrics["bsld_mean"] >= 1.0
    if reward in ("slowdown", "completion", "bsld", "dbf", "capacity"):
        assert total < 0


def test_illegal_action_means_wait():
    env = SchedulingEnv(SCENARIO, window=(4, 0), episode_jobs=32)
    obs, info = env.reset(seed=0)
    illegal = np.flatnonzero(info["action_mask"] == 0)
    assert len(illegal)
    _, _, _, _, info2 = env.step(int(illegal[0]))
    assert env._sim.scheduler.counters.refused == 0
    assert info2["time"] >= info["time"]


def test_kill_action_frees_cores_at_the_kill_time_and_requeues():
    # 8 cores; job 1 (8 cores, 100 s) runs; job 2 (4 cores) waits. Killing
    # running slot 0 at t=1 frees all 8 cores at once; job 2 can start at 1.
    w = Workload.from_columns(submit=[0, 1], run=[100, 10], procs=[8, 4])
    env = SchedulingEnv(small_scenario(8), window=(2, 0), kill_slots=1, episode_jobs=2,
                        workload=w)
    obs, info = env.reset(seed=0)
    assert info["time"] == 0.0 and info["action_mask"].tolist() == [1, 0, 1, 0]
    obs, r, term, trunc, info = env.step(0)          # start job 1
    # The queue is empty and job 1 cannot be killed in the instant it started:
    # the next decision is job 2's arrival.
    assert info["time"] == 1.0 and info["action_mask"].tolist() == [0, 0, 1, 1]
    obs, r, term, trunc, info = env.step(3)          # kill running slot 0 (job 1)
    sched = env._sim.scheduler
    job1 = sched.jobs[0]
    assert job1.killed_seconds == 1.0 and job1.attempts == 1
    assert info["time"] == 1.0
    assert sched.cluster.free == 8                   # freed at the kill time
    # Both queued again and both fit; nothing runs and nothing will arrive, so
    # Fwd would stall the simulation and is not legal.
    assert info["action_mask"].tolist() == [1, 1, 0, 0]
    assert {j.id for j in env._agent.window if j is not None} == {1, 2}


def test_a_job_cannot_be_killed_in_the_instant_it_started():
    # Start/kill loops at one instant would freeze simulated time (issue 10).
    w = Workload.from_columns(submit=[0, 0], run=[100, 100], procs=[4, 4])
    env = SchedulingEnv(small_scenario(4), window=(2, 0), kill_slots=1, episode_jobs=2,
                        workload=w)
    obs, info = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(0)          # job 1 starts at 0
    assert info["time"] == 0.0                       # job 2 waits: asked again (DBF)
    assert info["action_mask"].tolist() == [0, 0, 1, 0]   # Fwd only: no kill at once


def test_start_model_asks_at_every_event_and_needs_fwd_to_move_on():
    # DBF's schedule cycling: the agent keeps placing until Fwd, and is asked
    # at each arrival and completion while jobs wait, even when only Fwd is legal.
    w = Workload.from_columns(submit=[0, 0, 5], run=[10, 10, 10], procs=[2, 2, 2])
    env = SchedulingEnv(small_scenario(2), window=(3, 0), episode_jobs=3, workload=w)
    obs, info = env.reset(seed=0)
    times, kinds = [info["time"]], []
    for action in (0, 3, 3, 0, 3, 0):
        obs, r, term, trunc, info = env.step(action)
        times.append(info["time"])
        kinds.append(info["action_kind"])
        if term:
            break
    # 0: J1 starts, asked again (Fwd only); Fwd -> 5 (J3 arrives); Fwd -> 10
    # (J1 ends): J2 starts; asked again at 10; Fwd -> 20: J3 starts; done.
    assert times == [0.0, 0.0, 5.0, 10.0, 10.0, 20.0, 30.0]   # the last: the end
    assert kinds == ["start", "wait", "wait", "start", "wait", "start"]
    assert term


def test_teacher_action_is_what_the_heuristic_would_start():
    w = Workload.from_columns(submit=[0, 0, 0], run=[50, 5, 20], procs=[2, 2, 2])
    env = SchedulingEnv(small_scenario(2), window=(3, 0), episode_jobs=3, workload=w,
                        teacher="sjf")
    obs, info = env.reset(seed=0)
    assert info["teacher_action"] == 1        # job 2 has the shortest estimate
    env.teacher_name = "fcfs"
    assert env.teacher_action("fcfs") == 0


def test_teacher_outside_the_window_maps_to_its_best_window_job():
    # SJF would start job 3 (5 s), which a 2-job head window does not show; the
    # teacher's best visible job is job 2 (20 s), not Wait.
    w = Workload.from_columns(submit=[0, 0, 0], run=[50, 20, 5], procs=[2, 2, 2])
    env = SchedulingEnv(small_scenario(2), window=(2, 0), episode_jobs=3, workload=w,
                        teacher="sjf")
    obs, info = env.reset(seed=0)
    assert [j.id for j in env._agent.window] == [1, 2]
    assert info["teacher_action"] == 1
    # Job 1 starts against the teacher's advice; nothing else fits: the teacher waits.
    obs, r, term, trunc, info = env.step(0)
    assert info["time"] == 0.0 and info["teacher_action"] == 2
    # Once job 1 ends, job 3 is visible.
    obs, r, term, trunc, info = env.step(2)
    assert info["time"] == 50.0
    assert [j.id for j in env._agent.window] == [2, 3]
    assert info["teacher_action"] == 1


def test_smdp_discounting_shrinks_integral_rewards():
    kwargs = dict(window=(4, 0), episode_jobs=40, reward="completion")
    plain = SchedulingEnv(SCENARIO, **kwargs)
    disc = SchedulingEnv(SCENARIO, smdp_gamma=0.5, **kwargs)
    for a, b in zip(rollout(plain, seed=2, steps=60), rollout(disc, seed=2, steps=60)):
        assert a[0] == b[0]
        assert b[1] >= a[1] - 1e-12            # discounted penalties are smaller in size


def test_episode_truncates_after_placing_episode_jobs():
    env = SchedulingEnv(SCENARIO, window=(4, 0), episode_jobs=20, episode_end="placed")
    obs, info = env.reset(seed=1)
    steps = 0
    while True:
        legal = np.flatnonzero(info["action_mask"][:4])
        action = int(legal[0]) if len(legal) else 4
        obs, r, terminated, truncated, info = env.step(action)
        steps += 1
        if terminated or truncated:
            break
    assert truncated and not terminated
    assert info["placed"] == 20


def test_bad_arguments_are_clear():
    with pytest.raises(ScenarioError, match="observation: expected one of compact"):
        SchedulingEnv(SCENARIO, observation="pixels")
    with pytest.raises(ScenarioError, match="episode_jobs"):
        SchedulingEnv(SCENARIO, episode_jobs=10**9)
    with pytest.raises(ScenarioError, match="teacher"):
        SchedulingEnv(SCENARIO, teacher="best")


def test_queue_counts_scale_by_queue_norm_not_episode_length():
    # Three jobs queued at t=0, 1-job window: the queue-length feature is
    # log1p(3)/log1p(queue_norm) whatever the episode length, so an agent
    # trained on short episodes reads a whole trace on the same scale.
    w = Workload.from_columns(submit=[0, 0, 0], run=[5, 5, 5], procs=[2, 2, 2])
    for episode_jobs in (2, 3):
        env = SchedulingEnv(small_scenario(2), window=(1, 0), episode_jobs=episode_jobs,
                            workload=w, queue_norm=4096)
        obs, info = env.reset(seed=0)
        queued = env._sim.scheduler.queue.count
        assert obs[6 + 2] == pytest.approx(math.log1p(queued) / math.log1p(4096), rel=1e-6)
        assert obs[6 + 4] == pytest.approx(math.log1p(queued - 1) / math.log1p(4096), rel=1e-6)
    with pytest.raises(ScenarioError, match="queue_norm"):
        SchedulingEnv(small_scenario(2), workload=w, episode_jobs=3, queue_norm=0)


def test_starvation_guard_reserves_for_the_queue_head():
    # 4 cores. J1 (2 cores, 100 s) runs from 0. J2 (4 cores, 10 s) queues at 1
    # and cannot fit; with guard_wait=0 it holds an EASY reservation at 100
    # (shadow time, 0 extra cores). J3 (2 cores, 1000 s) would delay it and
    # stays illegal; J4 (2 cores, 50 s) ends at 53 <= 100 and is legal.
    w = Workload.from_columns(submit=[0, 1, 2, 3], run=[100, 10, 1000, 50],
                              procs=[2, 4, 2, 2])
    free = SchedulingEnv(small_scenario(4), window=(3, 0), episode_jobs=4, workload=w)
    guarded = SchedulingEnv(small_scenario(4), window=(3, 0), episode_jobs=4, workload=w,
                            guard_wait=0.0)
    seen = []
    for env in (free, guarded):
        obs, info = env.reset(seed=0)
        obs, r, term, trunc, info = env.step(0)            # J1 starts at 0
        assert info["time"] == 1.0 and info["action_mask"].tolist() == [0, 0, 0, 1]
        obs, r, term, trunc, info = env.step(3)            # Fwd to J3's arrival
        seen.append((info["time"], info["action_mask"].tolist()))
    assert seen[0] == (2.0, [0, 1, 0, 1])                  # free: J3 may start
    assert seen[1] == (2.0, [0, 0, 0, 1])                  # guarded: J3 would delay J2
    job2 = guarded.simulation.scheduler.jobs[1]
    assert job2.reservation == 100.0                       # a real, recorded reservation
    _, _, _, _, info = guarded.step(3)                     # Fwd to J4's arrival
    assert info["time"] == 3.0 and info["action_mask"].tolist() == [0, 0, 1, 1]
    _, _, _, _, info = guarded.step(2)                     # J4 backfills, ends at 53
    assert info["time"] == 3.0 and info["action_mask"].tolist() == [0, 0, 0, 1]
    _, _, _, _, info = guarded.step(3)                     # 53: J4 ends, J3 still illegal
    assert info["time"] == 53.0 and info["action_mask"].tolist() == [0, 0, 0, 1]
    _, _, _, _, info = guarded.step(3)
    # At 100 J1 ends: J2 fits and is the only legal action (no Wait).
    assert info["time"] == 100.0 and info["action_mask"].tolist() == [1, 0, 0, 0]
    _, _, _, _, info = guarded.step(0)
    # J3, now the guarded head, waits for J2 (shadow 110): Fwd only, then it alone.
    assert info["time"] == 100.0 and info["action_mask"].tolist() == [0, 0, 0, 1]
    _, _, _, _, info = guarded.step(3)
    assert info["time"] == 110.0 and info["action_mask"].tolist() == [1, 0, 0, 0]
    _, _, term, _, info = guarded.step(0)
    assert term
    sched = guarded.simulation.scheduler
    assert {j.id: j.start for j in sched.jobs} == {1: 0.0, 2: 100.0, 3: 110.0, 4: 3.0}
    assert sched.counters.reservations_broken == 0


def test_guard_needs_a_head_window():
    w = Workload.from_columns(submit=[0], run=[5], procs=[1])
    with pytest.raises(ScenarioError, match="guard_wait"):
        SchedulingEnv(small_scenario(2), window=(0, 2), workload=w, episode_jobs=1, guard_wait=60)
    with pytest.raises(ScenarioError, match="guard_wait"):
        SchedulingEnv(small_scenario(2), workload=w, episode_jobs=1, guard_wait=-1)


def test_curriculum_episodes_play_in_order_and_cycle():
    from cosim.workloads.windows import curriculum

    base = Workload.from_columns(submit=list(range(0, 400, 10)), run=[5] * 40,
                                 procs=[1 + i % 3 for i in range(40)])
    sets = curriculum(base, 6, sampled=1, periods=1, synthetic=1, seed=4)
    assert [len(s) for s in sets] == [6, 6, 6]
    assert sets[2].job_id.tolist() == [1, 2, 3, 4, 5, 6]     # synthetic: renumbered
    env = SchedulingEnv(small_scenario(4), window=(3, 0), workload=base, episode_jobs=6,
                        episode_source="curriculum", curriculum=sets)
    played = []
    for k in range(4):
        env.reset(seed=k)
        played.append(env.simulation.workload.job_id.tolist())
    assert played == [s.job_id.tolist() for s in sets + sets[:1]]
    # A trainer can also hand any workload to reset.
    env.reset(options={"jobs": sets[1]})
    assert env.simulation.workload.job_id.tolist() == sets[1].job_id.tolist()
    with pytest.raises(ScenarioError, match="curriculum"):
        SchedulingEnv(small_scenario(4), workload=base, episode_jobs=6, episode_source="curriculum")


def test_curriculum_from_a_json_spec():
    base = Workload.from_columns(submit=list(range(0, 400, 10)), run=[5] * 40, procs=[1] * 40)
    env = SchedulingEnv(small_scenario(4), workload=base, episode_jobs=5,
                        episode_source="curriculum",
                        curriculum={"sampled": 1, "periods": 2, "synthetic": 1, "seed": 9})
    assert [len(w) for w in env.curriculum] == [5, 5, 5, 5]
    with pytest.raises(ScenarioError, match="curriculum: .*keys among"):
        SchedulingEnv(small_scenario(4), workload=base, episode_jobs=5,
                      episode_source="curriculum", curriculum={"phases": 3})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_guard_keeps_its_reservations_with_exact_estimates(data):
    # guard_wait=0: the queue head always holds an EASY reservation, a real
    # one the scheduler records and checks. With exact estimates and any
    # legal actions, no guarded job starts after the shadow time it was
    # first promised, and the scheduler counts no broken reservation.
    cores = data.draw(st.integers(2, 8))
    n = data.draw(st.integers(2, 14))
    submit = sorted(data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)))
    run = data.draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    procs = data.draw(st.lists(st.integers(1, cores), min_size=n, max_size=n))
    w = Workload.from_columns(submit=submit, run=run, procs=procs)
    env = SchedulingEnv(small_scenario(cores), window=(3, 1), episode_jobs=n, workload=w,
                        guard_wait=0.0)
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    done = False
    while not done:
        legal = np.flatnonzero(info["action_mask"])
        obs, _, term, trunc, info = env.step(int(rng.choice(legal)))
        done = term or trunc
    sched = env.simulation.scheduler
    guarded = [j for j in sched.jobs if j.reservation == j.reservation]
    for job in guarded:
        assert job.start <= job.reservation + 1e-9, (job.id, job.start, job.reservation)
        assert job.mode == "reserved"
    assert sched.counters.reservations_broken == 0
    assert all(j.end >= 0 for j in sched.jobs)


def test_episode_metrics_by_hand():
    # 1 core: J1 runs 0-10, J2 (submitted at 0) waits 10 s and runs 10-30.
    w = Workload.from_columns(submit=[0, 0], run=[10, 20], procs=[1, 1])
    env = SchedulingEnv(small_scenario(1), window=(2, 0), episode_jobs=2, workload=w)
    obs, info = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(0)      # J1 at 0
    obs, r, term, trunc, info = env.step(2)      # Fwd to 10
    obs, r, term, trunc, info = env.step(0)      # J2 at 10
    assert term and not trunc
    m = info["episode_metrics"]
    assert m["jobs_finished"] == 2 and m["wait_mean"] == 5.0 and m["wait_max"] == 10.0
    assert m["queue_len_mean"] == pytest.approx(10 / 30)          # 10 queued seconds over 30 s
    assert m["utilization"] == pytest.approx(1.0)
    assert m["bsld_mean"] == pytest.approx((1.0 + 30 / 20) / 2)


@pytest.mark.parametrize("actions", ["start", "select", "dras"])
def test_gym_make_with_no_arguments_uses_a_builtin_scenario_and_passes_check_env(actions):
    env = gym.make(ENV_ID) if actions == "start" else gym.make(ENV_ID, actions=actions)
    obs, info = env.reset(seed=0)
    assert env.unwrapped.scenario.name == "lublin256-default"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("observation", ["compact", "kernel", "dras"])
@pytest.mark.parametrize("actions", ["select", "dras"])
def test_check_env_passes_for_every_action_model(actions, observation):
    env = SchedulingEnv(SCENARIO, actions=actions, observation=observation, window=16,
                        episode_jobs=64, node_rows=32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


class _Halves:
    """A prediction backend that predicts half the requested time."""

    def runtime(self, batch):
        return np.asarray(batch["req_time"], dtype=float) / 2, "halves"

    def remaining(self, batch):
        raise AssertionError("not asked")


def test_agents_can_see_predictions_instead_of_estimates():
    from cosim.prediction_hub import PredictionHub

    w = Workload.from_columns(submit=[0, 0, 0], run=[50, 20, 5], procs=[2, 2, 2],
                              req_time=[400, 400, 400])
    plain = SchedulingEnv(small_scenario(2), actions="select", window=4, workload=w,
                          episode_jobs=3, max_time=1e5)
    seeing = SchedulingEnv(small_scenario(2), actions="select", window=4, workload=w,
                           episode_jobs=3, max_time=1e5,
                           predictions=lambda jobs: PredictionHub(jobs, _Halves()))
    obs_plain, _ = plain.reset(seed=0)
    obs_pred, _ = seeing.reset(seed=0)
    col = 8   # kernel time_a: the estimate the scheduler believes
    assert obs_plain[0, col] == pytest.approx(math.log1p(400) / math.log1p(1e5), rel=1e-6)
    assert obs_pred[0, col] == pytest.approx(math.log1p(200) / math.log1p(1e5), rel=1e-6)
    assert seeing.predictions_hub.stats.runtime_predictions == 3


def test_event_horizon_pads_with_the_last_state_and_its_time():
    # Two running jobs on 8 cores, ending at 100 and 300 s: with H = 4 the
    # horizon is [t1, free after 1], [t2, free after 2], then [t2, free after 2]
    # twice more (the thesis repeats the last state, time included, not 0).
    w = Workload.from_columns(submit=[0, 0, 1], run=[100, 300, 50], procs=[3, 4, 8])
    env = SchedulingEnv(small_scenario(8), workload=w, observation="compact", window=(2, 0),
                        horizon=4, episode_jobs=3, max_time=1e4)
    obs, info = env.reset(seed=0)
    env.step(0)
    obs, *_ = env.step(0)                 # both small jobs started; job 3 waits (t = 1)
    assert env.simulation.env.now == 1.0
    h = obs[2 * 6 + 7:2 * 6 + 7 + 8].reshape(4, 2)
    t = np.log1p([99.0, 299.0]) / np.log1p(1e4)
    assert h[0] == pytest.approx([t[0], 4 / 8]) and h[1] == pytest.approx([t[1], 1.0])
    assert h[2] == pytest.approx(h[1]) and h[3] == pytest.approx(h[1])


@pytest.mark.parametrize("observation", ["kernel", "dras"])
def test_dras_level_two_rows_describe_the_backfill_candidates(observation):
    # At level 2 the window holds backfill candidates, not the head window of
    # level 1: each job row must show its own job (the kernel encoder once
    # read the level-1 queue slots there).
    env = SchedulingEnv(SCENARIO, actions="dras", observation=observation, window=50,
                        episode_jobs=256)
    rng = np.random.default_rng(11)
    obs, info = env.reset(seed=5)
    checked = 0
    cap = env.capacity
    for _ in range(1500):
        agent = env._agent
        if agent.request is not None and agent.level == 2:
            for i, job in enumerate(agent.window):
                size = np.float32(min(1.0, job.procs / cap)) if job is not None else 0.0
                got = obs[i, 5] if observation == "kernel" else obs[2 * i, 0]
                present = obs[i, 3] if observation == "kernel" else float(job is not None)
                assert got == size and present == float(job is not None), (i, job)
            checked += 1
        legal = np.flatnonzero(info["action_mask"])
        obs, _, terminated, truncated, info = env.step(int(legal[rng.integers(len(legal))]))
        if terminated or truncated:
            obs, info = env.reset()
    assert checked > 100


def test_dras_node_rows_by_hand():
    # 8 units, 4 node rows (2 units each); 3 units free, running jobs of 2 and
    # 3 units expected to end in 100 s and 1000 s: row 1 (2 units) is free now,
    # row 2 (4 units) when the first ends, rows 3-4 (6, 8 units) when the
    # second ends (3 + 2 + 3 = 8).
    from types import SimpleNamespace as NS

    from cosim.env.actions import ActionMap
    from cosim.env.observations import DrasEncoder, ObservationConfig

    enc = DrasEncoder(ObservationConfig(amap=ActionMap(1, 0, 0, has_wait=False), capacity=8,
                                        mem_capacity=0.0, max_time=1e4, queue_norm=64,
                                        node_rows=4))
    enc.reset()
    view = NS(env=NS(now=50.0), queue=NS(first=lambda: None), cluster=NS(free=3),
              ends=lambda: [(150.0, 0, NS(procs=2)), (1050.0, 1, NS(procs=3))])
    agent = NS(window=[None], slots=None, level=1)
    obs = enc.encode(view, agent)
    t = [math.log1p(100.0) / math.log1p(1e4), math.log1p(1000.0) / math.log1p(1e4)]
    np.testing.assert_array_equal(obs, np.array([[0, 0], [0, 0], [1, 0], [0, t[0]], [0, t[1]],
                                                 [0, t[1]]], dtype=np.float32))
    # Nothing running and 3 units free: rows 2-4 are never freed (time 1).
    view.ends = list
    np.testing.assert_array_equal(enc.encode(view, agent)[2:],
                                  np.array([[1, 0], [0, 1], [0, 1], [0, 1]], dtype=np.float32))
