"""The paired learning signal: an episode's return against a heuristic's schedule of the same jobs."""

from __future__ import annotations

import math

import pytest

from cosim.compose import run_policy
from cosim.config import scenario_from_dict
from cosim.env import SchedulingEnv
from cosim.env.wrappers import (
    CONTENTION_POLICIES,
    PairedReturn,
    heuristic_metric,
    paired_advantage,
)
from cosim.errors import InputError
from cosim.workloads.base import Workload


def small(cores):
    return scenario_from_dict({"cluster": {"nodes": cores},
                               "workload": {"kind": "swf", "path": "unused"}})


# 4 cores, tau 10. J1 (4 cores, 100 s) at 0; J2 (2 cores, 50 s) at 1; J3 (2
# cores, 20 s) at 2; J4 (1 core, 200 s) at 3.
HAND = Workload.from_columns(submit=[0, 1, 2, 3], run=[100, 50, 20, 200], procs=[4, 2, 2, 1])
# FCFS+EASY: J2 reserved at 100, nothing backfills (J1 holds every core); at
# 100 J2 and J3 start, J4 at 120 (J3's end). Waits 0, 99, 98, 117:
# bsld 1, 149/50, 118/20, 317/200.
FCFS_BSLD = (1 + 149 / 50 + 118 / 20 + 317 / 200) / 4          # 2.86625
# The select picks of test_action_models' "chooses again" schedule: J1 0,
# J2 100, J4 100, J3 150. Waits 0, 99, 148, 97.
WORSE_PICKS = {0.0: [0], 1.0: [0], 2.0: [0], 3.0: [2], 100.0: [2, 0, 0], 150.0: [0]}
WORSE_BSLD = (1 + 149 / 50 + 168 / 20 + 297 / 200) / 4         # 3.46625


def _env(workload=HAND, jobs=4, **kw):
    env = SchedulingEnv(small(4), actions="select", window=4, episode_jobs=jobs,
                        workload=workload, teacher="fcfs", reward="slowdown")
    return PairedReturn(env, baseline="fcfs+easy", **kw)


def _play(env, choose, seed=0):
    obs, info = env.reset(seed=seed)
    rewards, done = [], False
    while not done:
        obs, r, terminated, truncated, info = env.step(choose(info))
        rewards.append(r)
        done = terminated or truncated
    return rewards, info


def test_baseline_metric_is_the_hand_checked_schedule():
    env = _env()
    assert heuristic_metric(env, HAND, "fcfs+easy") == pytest.approx(FCFS_BSLD, rel=1e-12)
    # The engine's own run of the policy agrees.
    assert run_policy(small(4), "fcfs+easy", None, workload=HAND)["bsld_mean"] == pytest.approx(
        FCFS_BSLD, rel=1e-12)


def test_playing_the_baselines_choices_gives_exactly_zero():
    env = _env(mode="replace")
    rewards, info = _play(env, lambda info: info["teacher_action"])
    assert info["episode_metrics"]["bsld_mean"] == pytest.approx(FCFS_BSLD, rel=1e-12)
    assert info["paired_advantage"] == 0.0
    assert sum(rewards) == 0.0 and all(r == 0.0 for r in rewards)


def test_a_worse_schedule_gets_the_hand_checked_negative_return():
    env = _env(mode="replace")
    picks = {t: list(p) for t, p in WORSE_PICKS.items()}
    rewards, info = _play(env, lambda info: picks[info["time"]].pop(0))
    assert info["episode_metrics"]["bsld_mean"] == pytest.approx(WORSE_BSLD, rel=1e-12)
    expected = (FCFS_BSLD - WORSE_BSLD) / FCFS_BSLD            # -0.6 / 2.86625
    assert sum(rewards) == pytest.approx(expected, rel=1e-12)
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)


def test_add_mode_keeps_the_env_rewards_and_adds_the_advantage():
    plain = SchedulingEnv(small(4), actions="select", window=4, episode_jobs=4, workload=HAND,
                          teacher="fcfs", reward="slowdown")
    picks = {t: list(p) for t, p in WORSE_PICKS.items()}
    base_rewards, _ = _play(plain, lambda info: picks[info["time"]].pop(0))
    picks = {t: list(p) for t, p in WORSE_PICKS.items()}
    rewards, info = _play(_env(mode="add"), lambda info: picks[info["time"]].pop(0))
    assert rewards[:-1] == base_rewards[:-1]
    assert rewards[-1] == pytest.approx(base_rewards[-1] + info["paired_advantage"], rel=1e-12)


@pytest.mark.parametrize("baseline, agent, mode, expected", [
    (20.0, 10.0, "replace", 0.5), (10.0, 40.0, "replace", -3.0),      # unbounded below
    (20.0, 10.0, "clip", 0.5), (10.0, 40.0, "clip", -1.0), (10.0, 5.0, "clip", 0.5),
    (4.0, 2.0, "log", math.log(2.0)), (2.0, 4.0, "log", -math.log(2.0)),  # symmetric
    (10.0, 40.0, "log", -1.0), (40.0, 10.0, "log", 1.0),              # clipped at +-1
    (0.0, 0.5, "log", 0.0), (0.0, 30.0, "replace", -30.0),            # the floor of 1
    (0.0, 30.0, "log", -1.0), (3.0, 3.0, "log", 0.0)])
def test_paired_advantage_by_hand(baseline, agent, mode, expected):
    assert paired_advantage(baseline, agent, mode) == pytest.approx(expected, rel=1e-12, abs=0)


# The inspect model skipping whatever it may (at most 2 in a row) on HAND:
# starts 2, 102, 152, 172 (tests/test_inspect.py), waits 2, 101, 150, 169.
SKIPPER_BSLD = (102 / 100 + 151 / 50 + 170 / 20 + 369 / 200) / 4      # 3.59625


@pytest.mark.parametrize("mode, expected", [
    ("replace", (FCFS_BSLD - SKIPPER_BSLD) / FCFS_BSLD),           # -0.2547
    ("clip", (FCFS_BSLD - SKIPPER_BSLD) / FCFS_BSLD),
    ("log", math.log(FCFS_BSLD / SKIPPER_BSLD))])                  # -0.2269
def test_bounded_modes_on_an_inspect_episode_by_hand(mode, expected):
    env = SchedulingEnv(small(4), actions="inspect", base_policy="fcfs+easy", max_skips=2,
                        episode_jobs=4, workload=HAND, reward="slowdown")
    rewards, info = _play(PairedReturn(env, baseline="fcfs+easy", mode=mode), lambda info: 1)
    assert info["episode_metrics"]["bsld_mean"] == pytest.approx(SKIPPER_BSLD, rel=1e-12)
    assert rewards[-1] == pytest.approx(expected, rel=1e-12)
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)


# Three jobs on 4 cores that heuristics order differently: J1 (4 cores, 100 s)
# at 0, J2 (4 cores, 100 s) at 1, J3 (1 core, 10 s) at 2. FCFS starts J3 at
# 200, SJF and SAF at 100.
CONTENDED = Workload.from_columns(submit=[0, 1, 2], run=[100, 100, 10], procs=[4, 4, 1])


def test_hand_windows_spread_zero_and_contended():
    env = _env()
    # On HAND every heuristic gives the same schedule; on CONTENDED they differ.
    assert [heuristic_metric(env, HAND, n) for n in CONTENTION_POLICIES] == pytest.approx(
        [FCFS_BSLD] * 3, rel=1e-12)
    fcfs = heuristic_metric(env, CONTENDED, "fcfs+easy")
    sjf = heuristic_metric(env, CONTENDED, "sjf+easy")
    assert fcfs == pytest.approx((1 + 199 / 100 + 208 / 10) / 3, rel=1e-12)
    assert sjf == pytest.approx((1 + 209 / 100 + 108 / 10) / 3, rel=1e-12)


def _two_part_workload():
    """HAND, then CONTENDED 10,000 s later: windows of 4 at offsets 0..3."""
    return Workload.from_columns(
        submit=[0, 1, 2, 3, 10_000, 10_001, 10_002], run=[100, 50, 20, 200, 100, 100, 10],
        procs=[4, 2, 2, 1, 4, 4, 1])


def test_contention_filter_skips_windows_with_nothing_to_learn():
    env = _env(workload=_two_part_workload(), contention_min=0.01)
    skips = 0
    for seed in range(12):
        _, info = env.reset(seed=seed)
        wl = env.unwrapped.simulation.workload
        values = [run_policy(small(4), n, None, workload=wl)["bsld_mean"]
                  for n in CONTENTION_POLICIES]
        assert max(values) > min(values) * 1.01         # every accepted window is contended
        assert list(wl.run) != [100, 50, 20, 200]       # HAND, with spread 0, never is
        assert info["paired_contended"]
        skips += info["paired_skipped"]
    assert skips > 0
    # Deterministic given the reset seed (resume replays the same episodes).
    env.reset(seed=5)
    first = list(env.unwrapped.simulation.workload.submit)
    env.reset(seed=5)
    assert list(env.unwrapped.simulation.workload.submit) == first


def test_contention_filter_gives_up_after_max_skips():
    env = _env(contention_min=0.01, max_skips=3)
    _, info = env.reset(seed=0)
    assert (info["paired_skipped"], info["paired_contended"]) == (3, False)
    # A workload given to reset is played as given.
    _, info = env.reset(seed=0, options={"jobs": HAND})
    assert info["paired_skipped"] == 0
    assert info["paired_baseline"] == pytest.approx(FCFS_BSLD, rel=1e-12)


@pytest.mark.parametrize("kw, message", [
    ({"baseline": "nosuch"}, "nosuch"), ({"metric": "util"}, "one of bsld, wait"),
    ({"mode": "both"}, "one of replace, add, log, clip"), ({"contention_min": -1}, ">= 0")])
def test_bad_settings_say_what_is_expected(kw, message):
    env = SchedulingEnv(small(4), actions="select", window=4, episode_jobs=4, workload=HAND)
    with pytest.raises(Exception, match=message):
        PairedReturn(env, **kw)


def test_truncated_episodes_are_refused():
    env = SchedulingEnv(small(4), actions="select", window=4, episode_jobs=4, workload=HAND,
                        episode_end="placed")
    with pytest.raises(InputError, match="completed"):
        PairedReturn(env)


# -- python -m agents train --paired -------------------------------------------------------
SCENARIO = "scenarios/lublin256.yaml"
TINY = ["--steps", "128", "--envs", "2", "--arg", "num_steps=64", "--arg", "num_minibatches=2",
        "--episode-jobs", "16", "--quiet", "--actions", "select", "--window", "16"]


def test_train_with_paired_saves_it_and_resumes_the_same_way(tmp_path, capsys):
    import torch

    from agents.__main__ import main
    from agents.checkpoint import load_checkpoint, read_meta

    torch.set_num_threads(1)
    flags = ["--paired", "saf+easy", "--contention-min", "0.01"]
    full, split = tmp_path / "full", tmp_path / "split"
    assert main(["train", SCENARIO, "--out", str(full), "--algo", "a2c", *flags, *TINY]) == 0
    paired = read_meta(full)["env"]["paired"]
    assert paired == {"baseline": "saf+easy", "mode": "replace", "metric": "bsld",
                      "contention_min": 0.01}
    assert main(["train", SCENARIO, "--out", str(split), "--algo", "a2c", "--time-budget", "0",
                 *flags, *TINY]) == 0
    assert main(["train", SCENARIO, "--out", str(split), "--algo", "a2c", "--resume",
                 "--quiet"]) == 0
    a, b = load_checkpoint(full)[0], load_checkpoint(split)[0]
    assert b["update"] == a["update"] > 0
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    # The saved env config still builds the plain env (evaluate, cosim run rl:DIR).
    assert main(["evaluate", SCENARIO, "--checkpoint", str(full), "--episodes", "1",
                 "--baseline", "none", "--episode-jobs", "16"]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--contention-min", "0.1"], "expected --paired BASELINE"),
    (["--paired", "nosuch+easy"], "nosuch"),
    (["--paired", "saf+easy", "--episode-end", "placed"], "expected completed"),
])
def test_paired_user_errors_print_one_line(tmp_path, capsys, argv, message):
    from agents.__main__ import main

    assert main(["train", SCENARIO, "--out", str(tmp_path / "o"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("error: ")


def test_imitation_anneals_to_zero_within_the_decay_horizon(tmp_path):
    import csv

    import torch

    from agents.__main__ import main

    torch.set_num_threads(1)
    out = tmp_path / "run"
    # 4 updates of 128 decisions; alpha_t = 0.5 * max(0, 1 - (k / 4) / 0.5).
    assert main(["train", SCENARIO, "--out", str(out), "--algo", "a2c", "--teacher", "saf",
                 "--paired", "saf+easy", "--mimic-decay", "0.5", *TINY, "--steps", "512"]) == 0
    with open(out / "curve.csv", encoding="utf-8") as fh:
        coefs = [float(r["mimic_coef"]) for r in csv.DictReader(fh)]
    assert coefs == [0.5, 0.25, 0.0, 0.0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_clone_that_reproduces_the_baseline_scores_zero_on_lublin_windows(seed):
    # select with SAF's backfill order, answering as SAF would, is SAF+EASY's
    # schedule: the paired advantage is exactly 0 on any window.
    env = SchedulingEnv(SCENARIO, actions="select", window=32, backfill_order="saf",
                        episode_jobs=48, teacher="saf")
    rewards, info = _play(PairedReturn(env, baseline="saf+easy"),
                          lambda info: info["teacher_action"], seed=seed)
    assert info["paired_advantage"] == 0.0 and sum(rewards) == 0.0
