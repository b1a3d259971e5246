"""The ``slurm`` policy: hand-checked schedules, equivalences with EASY and
conservative backfilling, property tests of its plans, and bad knobs."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim.config import scenario_from_dict
from cosim.errors import ScenarioError
from cosim.job import Job
from cosim.model import build
from cosim.policies import make_policy, parse_policy
from cosim.policies.fairshare import FairShare
from cosim.policies.slurm import SlurmPolicy, slurm_plan
from cosim.policies.slurm_params import (
    SlurmParams,
    format_slurm_time,
    parse_slurm_params,
    parse_slurm_time,
    slurm_candidates,
    slurm_conf,
    slurm_space,
)
from cosim.workloads.base import Workload
from cosim.workloads.swf import read_swf

ROOT = Path(__file__).resolve().parents[1]


def simulate(rows, cores, policy, users=None, features=None, slurm=None):
    """rows: (submit, procs, run[, estimate]) -> ({job_id: start}, sim)."""
    w = Workload.from_columns(submit=[r[0] for r in rows], run=[r[2] for r in rows],
                              procs=[r[1] for r in rows],
                              req_time=[r[3] if len(r) > 3 else r[2] for r in rows],
                              user=users, features=features)
    return run_workload(w, cores, policy, slurm)


def run_workload(w, cores, policy, slurm=None):
    sc = scenario_from_dict({"cluster": {"nodes": cores},
                             "workload": {"kind": "swf", "path": "unused"},
                             "scheduler": {"slurm": slurm or {}}})
    env = simpy.Environment()
    pol = policy if not isinstance(policy, str) else make_policy(policy, slurm=slurm)
    sim = build(env, sc, pol, workload=w)
    env.run(until=sim.finished)
    return {j.id: j.start for j in sim.scheduler.jobs}, sim


# --------------------------------------------------------------------------- knobs


def test_slurm_alone_is_slurms_documented_defaults():
    p = make_policy("slurm").params
    assert p == SlurmParams()
    assert p.weights == (0, 0, 0, 0, 0)
    assert (p.PriorityMaxAge, p.PriorityDecayHalfLife) == (7 * 86400.0, 7 * 86400.0)
    assert (p.bf_window, p.bf_max_job_test, p.bf_resolution, p.bf_interval) == (1440, 500, 60, 30)
    assert not p.PriorityFavorSmall and p.PriorityUsageResetPeriod == "NONE"


def test_names_are_case_insensitive_and_canonical():
    spec = parse_policy("SLURM:priorityweightage=1000,PriorityMaxAge=1-0,bf_window=1440@history")
    assert spec.kind == "slurm" and spec.predictor == "history"
    # the default bf_window is left out of the canonical name
    assert spec.order == "slurm:PriorityWeightAge=1000,PriorityMaxAge=1-0"
    assert make_policy(spec).params.PriorityMaxAge == 86400.0


def test_slurm_times_parse_in_every_slurm_conf_form():
    assert [parse_slurm_time(t) for t in ("10", "1:30", "2:00:00", "1-0", "1-2:3", "0-0:0:5")] \
        == [600.0, 90.0, 7200.0, 86400.0, 93780.0, 5.0]
    assert format_slurm_time(7 * 86400) == "7-0"
    for seconds in (5, 90, 3600, 90061, 86400 * 14):
        assert parse_slurm_time(format_slurm_time(seconds)) == seconds


def test_scenario_knobs_sit_under_the_name_knobs():
    pol = make_policy("slurm:PriorityWeightAge=5", slurm={"PriorityWeightAge": 1, "bf_window": 60})
    assert pol.params.PriorityWeightAge == 5 and pol.params.bf_window == 60


@pytest.mark.parametrize("name, fragment", [
    ("slurm:Foo=1", "Foo: expected one of PriorityWeightAge"),
    ("slurm:PriorityWeightAge=-1", "PriorityWeightAge: expected an integer 0..4294967295, got '-1'"),
    ("slurm:PriorityWeightAge=1.5", "PriorityWeightAge: expected an integer"),
    ("slurm:bf_window=0", "bf_window: expected whole minutes 1..43200, got '0'"),
    ("slurm:bf_max_job_test=0", "bf_max_job_test: expected an integer 1..1000000"),
    ("slurm:bf_resolution=4000", "bf_resolution: expected whole seconds 1..3600"),
    ("slurm:bf_interval=-1", "bf_interval: expected whole seconds 0..10800"),
    ("slurm:PriorityMaxAge=0", "PriorityMaxAge: expected a slurm.conf time above 0"),
    ("slurm:PriorityDecayHalfLife=soon", "PriorityDecayHalfLife: expected a slurm.conf time"),
    ("slurm:PriorityFavorSmall=maybe", "PriorityFavorSmall: expected YES or NO"),
    ("slurm:PriorityUsageResetPeriod=HOURLY", "expected NONE, NOW, DAILY, WEEKLY"),
    ("slurm:bf_window=60,bf_window=90", "bf_window: expected each key once"),
    ("slurm:bf_window", "expected KEY=VALUE"),
    ("slurm:", "expected slurm or slurm:KEY=VALUE"),
    ("slurm+easy", "no +BACKFILL"),
])
def test_bad_knobs_say_which_key_and_what_is_expected(name, fragment):
    with pytest.raises(ScenarioError) as err:
        parse_policy(name, where="--policy")
    assert str(err.value).startswith("--policy: ") and fragment in str(err.value)


def test_bad_knobs_on_the_command_line_are_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cosim", "run", "scenarios/lublin256.yaml",
                           "--policy", "slurm:PriorityWeightAge=x", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: --policy: 'slurm:PriorityWeightAge=x': "
                                  "PriorityWeightAge: expected an integer")
    assert not (tmp_path / "o").exists()


def test_bad_scenario_knobs_name_the_file_and_key(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("workload: {kind: lublin, jobs: 20}\n"
                    "scheduler: {policies: [slurm], slurm: {bf_windw: 60}}\n")
    proc = subprocess.run([sys.executable, "-m", "cosim", "validate", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{path}: scheduler.slurm: bf_windw: expected one of" in proc.stderr


# --------------------------------------------------------------------------- priority


# 10 cores. J1 fills the machine until 100; J2 (4 cores) and J3 (8 cores) cannot
# run together. PriorityMaxAge is 100 s, both weights 1000. At 100:
# J2 submitted at 10: age 0.9 -> 900 + 1000*0.4 = 1300 > J3's 100 + 800 = 900, J2 first;
# J2 submitted at 80: age 0.2 -> 200 + 400 = 600 < 900, J3 first.
AGE_SIZE = "slurm:PriorityWeightAge=1000,PriorityWeightJobSize=1000,PriorityMaxAge=1:40," \
           "bf_resolution=1"


@pytest.mark.parametrize("j2_submit, starts", [
    (10, {1: 0, 2: 100, 3: 150}),
    (80, {1: 0, 2: 150, 3: 100}),
])
def test_age_overtakes_size(j2_submit, starts):
    got, _ = simulate([(0, 10, 100), (j2_submit, 4, 50), (90, 8, 50)], 10, AGE_SIZE)
    assert got == starts


def test_favor_small_turns_the_size_factor_around():
    # size alone: J3 (8 cores) first; with PriorityFavorSmall J2 (4 cores) first
    rows = [(0, 10, 100), (80, 4, 50), (90, 8, 50)]
    assert simulate(rows, 10, "slurm:PriorityWeightJobSize=1000")[0] == {1: 0, 2: 150, 3: 100}
    assert simulate(rows, 10, "slurm:PriorityWeightJobSize=1000,PriorityFavorSmall=YES")[0] \
        == {1: 0, 2: 100, 3: 150}


def test_small_relative_to_time_ranks_short_jobs_first():
    # size over time limit: J2 (2 cores, 50 s -> 1 minute) 0.2 beats J3 (8 cores, 1 h) 0.8/60
    rows = [(0, 10, 100), (80, 2, 50, 50), (90, 8, 50, 3600)]
    name = "slurm:PriorityWeightJobSize=1000,PriorityFlags=SMALL_RELATIVE_TO_TIME,bf_resolution=1"
    got, _ = simulate(rows, 10, name)
    assert got == {1: 0, 2: 100, 3: 100}          # both fit at 100: 2 + 8 cores
    rows = [(0, 10, 100), (80, 4, 50, 50), (90, 8, 50, 3600)]
    assert simulate(rows, 10, name)[0] == {1: 0, 2: 100, 3: 150}
    assert simulate(rows, 10, "slurm:PriorityWeightJobSize=1000,bf_resolution=1")[0] \
        == {1: 0, 2: 150, 3: 100}
    assert "PriorityFlags=NO_FAIR_TREE,SMALL_RELATIVE_TO_TIME" in slurm_conf(name)


def test_all_weights_zero_is_first_in_first_out():
    rows = [(0, 10, 100), (5, 2, 50), (6, 10, 50), (7, 1, 10)]
    got, _ = simulate(rows, 10, "slurm:bf_resolution=1")
    # J2 starts at 100; J3 (10 cores) is planned at 150; J4 fits beside J2 and ends
    # by 150 (100 + 10): backfilled at 100.
    assert got == {1: 0, 2: 100, 3: 150, 4: 100}


# User A (0) uses the machine over [0, 100), user B (1) over [100, 200). At 200,
# J3 (B, submitted 150) and J4 (A, submitted 160) both want the whole machine.
# Without decay both used 1000 core-seconds: a tie, the earlier submit (J3) first.
# With a 100 s half-life A's usage is older: at 200 U_A = U_B / 2, F_A > F_B, J4 first.
FAIR_ROWS = [(0, 10, 100), (1, 10, 100), (150, 10, 10), (160, 10, 10)]
FAIR_USERS = [0, 1, 1, 0]


@pytest.mark.parametrize("half_life, starts", [
    ("0", {1: 0, 2: 100, 3: 200, 4: 210}),
    ("1:40", {1: 0, 2: 100, 3: 210, 4: 200}),
])
def test_fairshare_decays_over_a_half_life(half_life, starts):
    name = f"slurm:PriorityWeightFairshare=1000,PriorityDecayHalfLife={half_life}"
    got, _ = simulate(FAIR_ROWS, 10, name, users=FAIR_USERS)
    assert got == starts


def _ran(index, user_procs, start, end):
    job = Job(index, index, start, end - start, user_procs, end - start, end - start)
    job.start, job.end = float(start), float(end)
    return job


def test_fairshare_factor_is_two_to_the_minus_usage_over_shares():
    fs = FairShare([0, 1], None, half_life=100.0, reset_period=0.0)
    a, b = _ran(0, 10, 0, 100), _ran(1, 10, 100, 200)
    fs.observe([a], 50.0, started=[a])
    fs.observe([b], 100.0, started=[b])
    fs.observe([], 200.0)
    # U(t) = p * (2^-(t-b)/H - 2^-(t-a)/H) * H / ln 2 for a job over [a, b)
    k = 10 * 100 / math.log(2)
    ua, ub = k * (2 ** -1 - 2 ** -2), k * (1 - 2 ** -1)
    assert fs.usage(200.0) == pytest.approx([ua, ub], rel=1e-12)
    share = 0.5
    assert fs.factor(200.0) == pytest.approx(
        [2 ** (-(ua / (ua + ub)) / share), 2 ** (-(ub / (ua + ub)) / share)], rel=1e-12)
    # one more half-life halves both: the normalised usage and so the factor stay
    assert fs.factor(300.0) == pytest.approx(fs.factor(200.0), rel=1e-12)
    assert fs.usage(300.0) == pytest.approx([ua / 2, ub / 2], rel=1e-12)


def test_usage_of_a_running_job_accrues_and_resets_daily():
    fs = FairShare([0], None, half_life=0.0, reset_period=86400.0)
    job = _ran(0, 4, 86000, 90000)
    job.end = math.nan                                  # still running
    fs.observe([job], 86000.0, started=[job])
    assert fs.usage(86399.0)[0] == pytest.approx(4 * 399)
    assert fs.usage(86500.0)[0] == pytest.approx(4 * 100)   # the day's boundary cleared it


def test_accounts_give_users_their_account_share():
    # two accounts; x has users 0 and 1, y has user 2: S = 1/4, 1/4, 1/2
    fs = FairShare([0, 1, 2], ["x", "x", "y"], half_life=0.0, reset_period=0.0)
    assert fs.share.tolist() == [0.25, 0.25, 0.5]
    j = _ran(0, 1, 0, 10)
    fs.observe([j], 0.0, started=[j])
    fs.observe([], 10.0)
    # user 0 has all the usage: UA = 1, account x's UE = 1; user 1: UE = 0 + (1 - 0)/2
    assert fs.factor(10.0) == pytest.approx([2 ** -4, 2 ** -2, 1.0])


# FAIR_ROWS without decay: at 200 both users used 1000 core-seconds, UA = 1/2 each.
# Equal shares tie (F = 2^-1 each): J3 (user 1, submitted first) runs first. Fairshare
# 3 for user 0 and 1 for user 1: S = 3/4, 1/4, F_0 = 2^(-2/3) > F_1 = 2^-2: J4 (user 0)
# first. The other way round: J3 first again.
@pytest.mark.parametrize("shares, starts", [
    (None, {1: 0, 2: 100, 3: 200, 4: 210}),
    ({0: 3, 1: 1}, {1: 0, 2: 100, 3: 210, 4: 200}),
    ({"user:0": 3}, {1: 0, 2: 100, 3: 210, 4: 200}),
    ({"1": 3}, {1: 0, 2: 100, 3: 200, 4: 210}),
])
def test_a_bigger_share_changes_the_start_order(shares, starts):
    name = "slurm:PriorityWeightFairshare=1000,PriorityDecayHalfLife=0"
    slurm = {"shares": shares} if shares else None
    got, _ = simulate(FAIR_ROWS, 10, name, users=FAIR_USERS, slurm=slurm)
    assert got == starts


def test_account_shares_weigh_the_accounts():
    # accounts x (Fairshare 3: users 0 and 1, user 1 with Fairshare 2) and y (1: user 2)
    fs = FairShare([0, 1, 2], ["x", "x", "y"], half_life=0.0, reset_period=0.0,
                   shares={"x": 3, "user:1": 2})
    assert fs.share.tolist() == pytest.approx([0.75 / 3, 0.75 * 2 / 3, 0.25])
    assert fs.sibling_share.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])


@pytest.mark.parametrize("shares, fragment", [
    ({"nobody": 1}, "scheduler.slurm: shares: nobody: expected an account (the workload's "
                    "account column) or a user id, such as 0, 1, got a name no account"),
    ({"0": -1}, "scheduler.slurm: shares: 0: expected a Fairshare: a whole number >= 1, got -1"),
    ({"0": 1.5}, "shares: 0: expected a Fairshare: a whole number >= 1, got 1.5"),
    ("all", "scheduler.slurm: shares: expected a mapping of account or user to its Fairshare"),
])
def test_bad_shares_say_which_name_and_what_is_expected(shares, fragment):
    with pytest.raises(ScenarioError) as err:
        simulate(FAIR_ROWS, 10, "slurm:PriorityWeightFairshare=1000", users=FAIR_USERS,
                 slurm={"shares": shares})
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_bad_shares_in_a_scenario_are_one_line_and_exit_2(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("workload: {kind: lublin, jobs: 20}\n"
                    "scheduler: {policies: [slurm], slurm: {shares: {'7': -2}}}\n")
    proc = subprocess.run([sys.executable, "-m", "cosim", "validate", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "scheduler.slurm: shares: 7: expected a Fairshare: a whole number >= 1, got -2" \
        in proc.stderr


def test_partition_and_qos_factors_come_from_the_workload_features():
    rows = [(0, 10, 100), (5, 10, 50), (6, 10, 50)]
    feats = {"partition": np.array(["batch", "batch", "debug"]), "qos": np.array(["n", "n", "n"])}
    slurm = {"partitions": {"batch": 1, "debug": 10}}
    got, _ = simulate(rows, 10, "slurm:PriorityWeightPartition=1000", features=feats, slurm=slurm)
    assert got == {1: 0, 2: 150, 3: 100}
    # no column: no effect (first in, first out)
    got, _ = simulate(rows, 10, "slurm:PriorityWeightPartition=1000", slurm=slurm)
    assert got == {1: 0, 2: 100, 3: 150}


# --------------------------------------------------------------------------- backfill


# 10 cores. J1 (6 cores) runs until 7200; J2 (8 cores) must wait for it; J3 (4 cores,
# 10000 s) fits now. A backfill cycle at every event (bf_interval=0). With a 60-minute window J2's earliest start (7200 - 1 s
# away) is beyond it: J2 gets no plan, J3 starts at 2 and J2 waits for it (10002).
# With a 180-minute window J2 is planned at 7200 and J3 may not delay it: J3 goes
# after J2 (7300).
@pytest.mark.parametrize("window, starts", [
    (60, {1: 0, 2: 10002, 3: 2}),
    (180, {1: 0, 2: 7200, 3: 7300}),
])
def test_a_job_beyond_bf_window_gets_no_plan(window, starts):
    rows = [(0, 6, 7200), (1, 8, 100), (2, 4, 10000)]
    got, _ = simulate(rows, 10, f"slurm:bf_window={window},bf_resolution=1,bf_interval=0")
    assert got == starts


# 10 cores. J1 (6 cores) runs until 7200; J2 (8 cores, submitted at 10) waits for it and
# is planned at 7200; J3 (4 cores, 100 s, submitted at 35) fits now and ends long before
# 7200. A cycle ran at 0 (J1's arrival). bf_interval=0: J3 starts at its arrival. 30: the
# change at 10 had a cycle at 30 (nothing to start), so J3 waits for the next, at 60.
# 20: the cycle for the change at 10 ran at 20; J3 waits for the one at 40.
# 1: a cycle at every event second.
@pytest.mark.parametrize("interval, j3", [(0, 35), (30, 60), (20, 40), (1, 35)])
def test_backfill_cycles_come_every_bf_interval(interval, j3):
    rows = [(0, 6, 7200), (10, 8, 100), (35, 4, 100)]
    got, sim = simulate(rows, 10, f"slurm:bf_interval={interval},bf_resolution=1")
    assert got == {1: 0, 2: 7200, 3: j3}
    # the default is Slurm's 30 s
    assert simulate(rows, 10, "slurm:bf_resolution=1")[0] == {1: 0, 2: 7200, 3: 60}


def test_depth_limits_the_plans():
    # 10 cores. J1 (8 cores) runs until 100; J2 (8 cores) and J3 (9 cores) wait; J4
    # (2 cores, 1000 s) fits now. Depth 1: only J2 is planned (at 100); J4 fits
    # beside it (2 free at 100) and starts at 3; J3, unplanned, waits for J4 (1003).
    # Depth 2: J3 is planned too (at 200, 9 cores) and J4 would delay it: J4 goes
    # after J3 (300).
    rows = [(0, 8, 100), (1, 8, 100), (2, 9, 100), (3, 2, 1000)]
    got1, _ = simulate(rows, 10, "slurm:bf_max_job_test=1,bf_resolution=1,bf_interval=0")
    got2, _ = simulate(rows, 10, "slurm:bf_max_job_test=2,bf_resolution=1,bf_interval=0")
    assert got1 == {1: 0, 2: 100, 3: 1003, 4: 3}
    assert got2 == {1: 0, 2: 100, 3: 200, 4: 300}


def _lublin(shared, n=400):
    path = shared / "traces" / "lublin_256.swf"
    if not path.exists():
        pytest.skip(f"{path} absent (the shared traces)")
    w = read_swf(path).take(slice(0, n))
    return Workload.from_columns(submit=w.submit, run=w.run, procs=w.procs, req_time=w.run,
                                 job_id=w.job_id, user=w.user)


@pytest.mark.parametrize("slurm_name, classic", [
    ("slurm:bf_max_job_test=1,bf_resolution=1,bf_interval=0", "fcfs+easy"),
    ("slurm:bf_max_job_test=1000000,bf_window=43200,bf_resolution=1,bf_interval=0",
     "fcfs+conservative"),
])
def test_depth_one_is_easy_and_unlimited_depth_is_conservative(shared, slurm_name, classic):
    w = _lublin(shared)
    ours, _ = run_workload(w, 256, slurm_name)
    theirs, _ = run_workload(w, 256, classic)
    assert ours == theirs
    assert len(set(ours.values())) > 100         # a real schedule, not a trivial one


class _EveryPass(SlurmPolicy):
    """The same policy, never telling the scheduler that a pass is idle."""

    def pass_is_idle(self, view):
        return False


def test_passes_skipped_between_cycles_change_no_start(shared):
    w = _lublin(shared)
    params = parse_slurm_params("bf_max_job_test=100,bf_interval=30")
    skipping, sim = run_workload(w, 256, SlurmPolicy(params))
    every, _ = run_workload(w, 256, _EveryPass(params))
    assert skipping == every
    assert sim.scheduler.counters.wakeups_skipped > 0


# --------------------------------------------------------------------------- properties


class _Checked(SlurmPolicy):
    """Checks at every pass that the starts are exactly the full plan's starts now
    (a backfill cycle) or its leading starts in priority order (the main scheduler
    alone, between cycles)."""

    def _decide(self, view, cycle):
        order = self.order(view)
        jobs = [view.queue.jobs[s] for s in order]
        plan = slurm_plan(view.now, view.cluster.free, list(view.ends()), jobs, self.params)
        if cycle:
            expected = {j.id for j, t in zip(jobs, plan) if t == view.now}
        else:
            lead = next((k for k, t in enumerate(plan) if t != view.now), len(plan))
            expected = {j.id for j in jobs[:lead]}
        started = set()
        for d in super()._decide(view, cycle):
            started.add(d.job.id)
            yield d
        assert started == expected


job_rows = st.lists(st.tuples(st.integers(0, 50), st.integers(1, 8), st.integers(1, 40),
                              st.integers(0, 30), st.integers(0, 2)),
                    min_size=1, max_size=14)
knobs = st.fixed_dictionaries({
    "PriorityWeightAge": st.sampled_from([0, 10, 1000]),
    "PriorityWeightJobSize": st.sampled_from([0, 100]),
    "PriorityWeightFairshare": st.sampled_from([0, 1000]),
    "PriorityMaxAge": st.sampled_from(["1", "1:00:00"]),
    "PriorityDecayHalfLife": st.sampled_from(["0", "1", "7-0"]),
    "bf_max_job_test": st.integers(1, 6),
    "bf_window": st.sampled_from([1, 2, 1440]),
    "bf_resolution": st.sampled_from([1, 7, 60]),
    "bf_interval": st.sampled_from([0, 1, 30]),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=job_rows, knob=knobs)
def test_no_oversubscription_and_starts_follow_the_plan(rows, knob):
    # (submit, procs, run, extra estimate, user): estimates at least the run time
    w = Workload.from_columns(submit=[r[0] for r in rows], run=[r[2] for r in rows],
                              procs=[r[1] for r in rows], req_time=[r[2] + r[3] for r in rows],
                              user=[r[4] for r in rows])
    params = parse_slurm_params(knob)
    starts, sim = run_workload(w, 8, _Checked(params))
    assert sim.scheduler.counters.refused == 0
    jobs = sim.scheduler.jobs
    assert all(j.start == j.start for j in jobs)
    for t in {j.start for j in jobs}:
        assert sum(j.procs for j in jobs if j.start <= t < j.end) <= 8


@settings(max_examples=80, deadline=None)
@given(running=st.lists(st.tuples(st.integers(1, 200), st.integers(1, 4)), max_size=5),
       queued=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 120)), min_size=1,
                       max_size=10),
       depth=st.integers(1, 12), window=st.sampled_from([1, 2, 60]),
       res=st.sampled_from([1, 10, 60]))
def test_no_planned_start_is_delayed_by_a_lower_priority_job(running, queued, depth, window,
                                                             res):
    busy = sum(p for _, p in running)
    if busy > 8:
        return
    ends = sorted((float(t), i, Job(100 + i, 0, 0.0, t, p, t, t))
                  for i, (t, p) in enumerate(running))
    jobs = [Job(i, 0, 0.0, e, p, e, e) for i, (p, e) in enumerate(queued)]
    params = SlurmParams(bf_max_job_test=depth, bf_window=window, bf_resolution=res)
    plan = slurm_plan(0.0, 8 - busy, ends, jobs, params)
    for i, t in enumerate(plan):
        # the same plan for job i with every lower-priority job left out
        alone = slurm_plan(0.0, 8 - busy, ends, jobs[:i + 1], params)
        assert alone[i] == t
    # the plan never uses more than the machine, at any time
    ticks = sorted({0.0} | {float(math.ceil(t / res) * res) for t, _, _ in ends}
                   | {t for t in plan if t is not None})
    for tick in ticks:
        used = sum(j.procs for t, _, j in ends if tick < math.ceil(t / res) * res)
        used += sum(j.procs for j, t in zip(jobs, plan)
                    if t is not None and t <= tick < t + math.ceil(j.estimate / res) * res)
        assert used <= 8


# --------------------------------------------------------------------------- tuning


def test_the_search_space_covers_slurms_knobs_and_its_points_parse():
    space = slurm_space()
    assert set(space) == {"PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightFairshare",
                          "PriorityMaxAge", "PriorityDecayHalfLife", "PriorityFavorSmall",
                          "PriorityFlags", "bf_window", "bf_max_job_test"}
    points = slurm_candidates(40, seed=3)
    assert points[0] == SlurmParams() and len(set(points)) == 40
    assert slurm_candidates(40, seed=3) == points          # seeded
    for p in points:
        # every point is a policy name that parses back to itself
        assert make_policy(p.policy_name()).params == p
    tiny = slurm_candidates(10, space={"bf_max_job_test": ("1", "500")})
    assert [p.policy_name() for p in tiny] == ["slurm", "slurm:bf_max_job_test=1"]


def test_slurm_conf_lines_say_the_policy_in_slurms_own_terms():
    text = slurm_conf("slurm:PriorityWeightAge=1000,PriorityMaxAge=1-0,PriorityFavorSmall=YES,"
                      "bf_window=720,bf_max_job_test=100@history")
    lines = text.splitlines()
    assert lines[1:] == [
        "PriorityType=priority/multifactor", "PriorityFlags=NO_FAIR_TREE",
        "PriorityWeightAge=1000", "PriorityWeightJobSize=0", "PriorityWeightFairshare=0",
        "PriorityWeightPartition=0", "PriorityWeightQOS=0", "PriorityMaxAge=1-0",
        "PriorityFavorSmall=YES", "PriorityDecayHalfLife=7-0", "PriorityUsageResetPeriod=NONE",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=bf_window=720,bf_max_job_test=100,bf_resolution=60"]
    # bf_interval: written where it is not Slurm's default; 0 (every event) as a comment
    assert slurm_conf("slurm:bf_interval=60").splitlines()[-1].endswith(",bf_interval=60")
    assert "# bf_interval=0: a backfill cycle at every event" in slurm_conf("slurm:bf_interval=0")
    # the lines read back (KEY=VALUE) give the same knobs
    knobs = dict(line.split("=", 1) for line in lines[3:11])
    sched = dict(kv.split("=") for kv in lines[-1].split("=", 1)[1].split(","))
    assert parse_slurm_params({**knobs, **sched}) == make_policy(
        "slurm:PriorityWeightAge=1000,PriorityMaxAge=1-0,PriorityFavorSmall=YES,"
        "bf_window=720,bf_max_job_test=100").params
    with pytest.raises(ScenarioError, match="a slurm policy name"):
        slurm_conf("fcfs+easy")
    with pytest.raises(ScenarioError, match="bf_window: expected whole minutes"):
        slurm_conf("slurm:bf_window=0")
