"""Tests of cosim.metrics: hand-computed tables and hypothesis invariants."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim import metrics
from cosim.errors import InputError
from cosim.metrics import job_metrics, prediction_error, step_integral, summarize, time_series

NAN = float("nan")


def hand_jobs() -> dict:
    """Five jobs on a 4-core machine, worked out on paper.

    J1 submit 0, 2 cores, runs 0-100 (ready).
    J2 submit 10, 2 cores, starts 10, killed at 30 (20 s, 40 core-s lost),
       requeued, restarts 100 (reserved) and runs 50 s -> end 150.
    J3 submit 20, 1 core, starts 30 (backfilled), killed at its 5 s walltime.
    J4 submit 40, 8 cores: rejected.
    J5 submit 120, 4 cores: still queued when the run stops at 150.
    """
    return {
        "job_id": np.array([1, 2, 3, 4, 5]),
        "user": np.array([1, 1, 2, 2, -1]),
        "submit": np.array([0.0, 10.0, 20.0, 40.0, 120.0]),
        "start": np.array([0.0, 100.0, 30.0, NAN, NAN]),
        "end": np.array([100.0, 150.0, 35.0, NAN, NAN]),
        "run": np.array([100.0, 50.0, 5.0, NAN, NAN]),
        "req_time": np.array([120.0, 60.0, 5.0, 100.0, 300.0]),
        "estimate": np.array([100.0, 60.0, 5.0, 100.0, 200.0]),
        "procs": np.array([2, 2, 1, 8, 4]),
        "mem": np.zeros(5),
        "outcome": ["completed", "completed", "timeout", "rejected", "unfinished"],
        "mode": ["ready", "reserved", "backfilled", "", ""],
        "reason": ["fits at head", "reservation", "ends before shadow time",
                   "needs 8 cores, machine has 4", ""],
        "attempts": np.array([1, 2, 1, 0, 0], dtype=np.int32),
        "killed_seconds": np.array([0.0, 20.0, 0.0, 0.0, 0.0]),
        "killed_core_seconds": np.array([0.0, 40.0, 0.0, 0.0, 0.0]),
        "reservation": np.array([NAN, 100.0, NAN, NAN, NAN]),
    }


# time, kind, job, queue_len, running, used, up, queued_area, idle_fit
# idle_fit on non-pass rows is deliberately garbage (7): only pass rows count.
_EVENTS = [
    (0, "submit", 1, 1, 0, 0, 4, 200.0, 7),
    (0, "start", 1, 0, 1, 2, 4, 0.0, 7),
    (0, "pass", -1, 0, 1, 2, 4, 0.0, 0),
    (10, "submit", 2, 1, 1, 2, 4, 120.0, 7),
    (10, "start", 2, 0, 2, 4, 4, 0.0, 7),
    (10, "pass", -1, 0, 2, 4, 4, 0.0, 0),
    (20, "submit", 3, 1, 2, 4, 4, 5.0, 7),
    (20, "pass", -1, 1, 2, 4, 4, 5.0, 0),
    (30, "kill", 2, 1, 1, 2, 4, 5.0, 7),
    (30, "requeue", 2, 2, 1, 2, 4, 125.0, 7),
    (30, "start", 3, 1, 2, 3, 4, 120.0, 7),
    (30, "pass", -1, 1, 2, 3, 4, 120.0, 0),      # 1 idle core, J2 needs 2
    (35, "timeout", 3, 1, 1, 2, 4, 120.0, 7),
    (35, "pass", -1, 1, 1, 2, 4, 120.0, 2),      # J2 fits on 2 idle cores, agent waits
    (40, "submit", 4, 1, 1, 2, 4, 120.0, 7),
    (40, "reject", 4, 1, 1, 2, 4, 120.0, 7),
    (40, "pass", -1, 1, 1, 2, 4, 120.0, 2),
    (100, "end", 1, 1, 0, 0, 4, 120.0, 7),
    (100, "start", 2, 0, 1, 2, 4, 0.0, 7),
    (100, "pass", -1, 0, 1, 2, 4, 0.0, 0),
    (120, "submit", 5, 1, 1, 2, 4, 800.0, 7),
    (120, "pass", -1, 1, 1, 2, 4, 800.0, 0),     # J5 needs 4
    (150, "end", 2, 1, 0, 0, 4, 800.0, 7),
    (150, "pass", -1, 1, 0, 0, 4, 800.0, 4),     # after the span: contributes 0
]


def hand_events() -> dict:
    """The events of :func:`hand_jobs`, one row per change."""
    cols = list(zip(*_EVENTS, strict=True))
    return {
        "time": np.array(cols[0], dtype=float), "kind": list(cols[1]),
        "job_id": np.array(cols[2]), "node": np.full(len(_EVENTS), -1),
        "queue_len": np.array(cols[3]), "running": np.array(cols[4]),
        "used_cores": np.array(cols[5]), "up_cores": np.array(cols[6]),
        "queued_area": np.array(cols[7]), "idle_fit_cores": np.array(cols[8]),
    }


@pytest.fixture
def summary() -> dict:
    return summarize(hand_jobs(), hand_events(), cores=4)


def test_counts(summary):
    assert (summary["jobs_total"], summary["jobs_completed"], summary["jobs_timeout"],
            summary["jobs_failed"], summary["jobs_rejected"], summary["jobs_unfinished"],
            summary["jobs_finished"]) == (5, 2, 1, 0, 1, 1, 3)


def test_waits_subtract_killed_seconds(summary):
    # waits: J1 0, J2 100 - 10 - 20 = 70, J3 30 - 20 = 10
    assert summary["wait_mean"] == pytest.approx(80 / 3)
    assert summary["wait_median"] == 10.0
    # linear percentile of [0, 10, 70]: rank 0.95 * 2 = 1.9 -> 10 + 0.9 * 60
    assert summary["wait_p95"] == pytest.approx(64.0)
    assert summary["wait_p99"] == pytest.approx(68.8)
    assert summary["wait_max"] == 70.0
    per = job_metrics(hand_jobs())
    np.testing.assert_array_equal(per["wait"][:3], [0.0, 70.0, 10.0])
    assert np.isnan(per["wait"][3:]).all()


def test_response_slowdown_bsld(summary):
    # responses 100, 140, 15; slowdowns 1, 2.8, 3
    assert summary["response_mean"] == pytest.approx(85.0)
    assert summary["slowdown_mean"] == pytest.approx(6.8 / 3)
    # bsld: 1, 140 / 50 = 2.8, 15 / max(10, 5) = 1.5
    assert summary["bsld_mean"] == pytest.approx(5.3 / 3)
    assert summary["bsld_max"] == pytest.approx(2.8)
    assert summary["slowdown_excluded"] == 0


def test_bsld_tau():
    s = summarize(hand_jobs(), hand_events(), cores=4, tau=60)
    # 1, 140 / max(60, 50) = 7/3, max(1, 15 / 60) = 1
    assert s["bsld_mean"] == pytest.approx((1 + 7 / 3 + 1) / 3)
    assert s["tau"] == 60.0


def test_useful_and_busy_time_and_waste_by_cause(summary):
    # useful: completed attempts 2*100 + 2*50 = 300; J3's attempt, killed at its
    # walltime, is busy but wasted (5); J2's killed attempt wasted 40 more.
    assert summary["useful_core_seconds"] == 300.0
    assert summary["waste_timeout_core_seconds"] == 5.0
    assert summary["waste_kill_core_seconds"] == 40.0
    assert summary["waste_failure_core_seconds"] == 0.0
    assert summary["wasted_core_seconds"] == 45.0
    assert summary["busy_core_seconds"] == 345.0
    assert summary["utilization"] == pytest.approx(300 / 600)
    assert summary["utilization_busy"] == pytest.approx(345 / 600)
    assert summary["utilization_up"] == pytest.approx(300 / 600)
    assert summary["killed_seconds"] == 20.0
    assert (summary["span_start"], summary["span_end"], summary["makespan"]) == (0.0, 150.0, 150.0)


def test_timed_out_jobs_finish_but_are_not_useful(summary):
    # J3 (timeout) is in every average of waits and slowdowns...
    assert summary["jobs_finished"] == 3 and summary["jobs_completed"] == 2
    assert summary["bsld_max"] == pytest.approx(2.8)
    # ...but its core-time is waste, not useful work
    assert summary["useful_core_seconds"] + summary["wasted_core_seconds"] == \
        summary["busy_core_seconds"]


def test_waste_split_between_kills_and_node_failures():
    # 4 cores. J1 (2 cores) starts at 0, its node fails at 30 (a kill row naming
    # node 3), it restarts at 50 and completes at 100. J2 (1 core) starts at 0,
    # the scheduler kills it at 20 (node -1), it restarts at 20 and completes at 40.
    jobs = {"job_id": [1, 2], "user": [7, 8], "submit": [0.0, 0.0], "start": [50.0, 20.0],
            "end": [100.0, 40.0], "run": [50.0, 20.0], "procs": [2, 1],
            "outcome": ["completed"] * 2, "mode": ["ready"] * 2,
            "killed_seconds": [30.0, 20.0], "killed_core_seconds": [60.0, 20.0]}
    rows = [(0, "start", 1, -1), (0, "start", 2, -1), (20, "kill", 2, -1), (20, "start", 2, -1),
            (30, "node_down", -1, 3), (30, "kill", 1, 3), (40, "end", 2, -1),
            (50, "start", 1, -1), (100, "end", 1, -1)]
    t, k, j, n = zip(*rows, strict=True)
    events = {"time": list(t), "kind": list(k), "job_id": list(j), "node": list(n),
              "queue_len": [0] * len(rows)}
    s = summarize(jobs, events, cores=4)
    assert s["waste_failure_core_seconds"] == 60.0 and s["waste_kill_core_seconds"] == 20.0
    assert s["useful_core_seconds"] == 120.0 and s["busy_core_seconds"] == 200.0
    assert s["utilization"] == pytest.approx(120 / 400)
    # without events the causes cannot be told apart; the total still can
    s = summarize(jobs, None, cores=4)
    assert s["waste_failure_core_seconds"] is None and s["waste_kill_core_seconds"] is None
    assert s["wasted_core_seconds"] == 80.0


def test_jain_fairness_by_hand():
    # users 1: bsld 1 and 3 (mean 2); 2: 4; 3: 1; user 4's only job timed out
    # (not completed) and user -1 is unknown: both left out.
    # J = (2 + 4 + 1)^2 / (3 * (4 + 16 + 1)) = 49 / 63
    bsld = [1.0, 3.0, 4.0, 1.0, 9.0, 9.0]
    user = [1, 1, 2, 3, 4, -1]
    completed = [True, True, True, True, False, True]
    f = metrics.fairness(user, bsld, completed)
    assert f["fairness_jain"] == pytest.approx(49 / 63)
    assert (f["fairness_users"], f["bsld_worst_user_mean"], f["worst_user"]) == (3, 4.0, 2)
    assert metrics.fairness([5, 6], [2.0, 2.0], [True, True])["fairness_jain"] == 1.0
    assert metrics.fairness([5], [2.0], [False])["fairness_jain"] is None


def test_jain_in_the_summary(summary):
    # only user 1 has completed jobs (bsld 1 and 2.8): one user is trivially fair
    assert summary["fairness_jain"] == 1.0 and summary["fairness_users"] == 1
    assert summary["bsld_worst_user_mean"] == pytest.approx(1.9) and summary["worst_user"] == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(1.0, 1e4)), min_size=1, max_size=40))
def test_jain_bounds(rows):
    user, bsld = zip(*rows, strict=True)
    f = metrics.fairness(user, bsld, [True] * len(rows))
    n = f["fairness_users"]
    assert n == len(set(user))
    assert 1.0 / n - 1e-12 <= f["fairness_jain"] <= 1.0 + 1e-12


def test_queue_time_averages_use_last_row_at_each_time(summary):
    # queue length 1 on [20, 100) and [120, 150): 80 + 30 = 110 job-seconds
    assert summary["queue_len_mean"] == pytest.approx(110 / 150)
    # queued area 5 on [20, 30), 120 on [30, 100), 800 on [120, 150)
    assert summary["queued_load_mean"] == pytest.approx((50 + 8400 + 24000) / 150)


def test_resource_holes_from_pass_rows(summary):
    # 2 idle cores that J2 could use on [35, 100)
    assert summary["resource_holes_core_seconds"] == pytest.approx(130.0)
    assert summary["resource_holes_frac"] == pytest.approx(130 / 600)


def test_mode_shares(summary):
    for m in ("ready", "reserved", "backfilled"):
        assert summary[f"mode_jobs_{m}"] == pytest.approx(1 / 3)
    assert summary["mode_corehours_ready"] == pytest.approx(200 / 305)
    assert summary["mode_corehours_reserved"] == pytest.approx(100 / 305)
    assert summary["mode_corehours_backfilled"] == pytest.approx(5 / 305)


def test_per_class_waits(summary):
    assert summary["jobs_size_1"] == 1 and summary["wait_mean_size_1"] == 10.0
    assert summary["jobs_size_2_8"] == 2 and summary["wait_mean_size_2_8"] == 35.0
    for suffix in ("9_32", "33_128", "gt128"):
        assert summary[f"jobs_size_{suffix}"] == 0
        assert summary[f"wait_mean_size_{suffix}"] is None
    assert summary["jobs_run_lt10m"] == 3
    assert summary["wait_mean_run_lt10m"] == pytest.approx(80 / 3)
    assert summary["wait_mean_run_gt4h"] is None


def test_class_boundaries():
    np.testing.assert_array_equal(metrics.size_class([1, 2, 8, 9, 32, 33, 128, 129, 0]),
                                  [0, 1, 1, 2, 2, 3, 3, 4, -1])
    np.testing.assert_array_equal(metrics.run_class([0, 599.9, 600, 3599, 3600, 14400, NAN]),
                                  [0, 0, 1, 1, 2, 3, -1])


def test_summary_is_strict_json(summary):
    import json

    json.dumps(summary, allow_nan=False)
    assert all(isinstance(v, (int, float, type(None))) for v in summary.values())


def test_failed_job_wastes_but_is_not_averaged():
    jobs = hand_jobs()
    # J3 becomes failed: lost after 5 s on 1 core, never completed
    jobs["outcome"][2] = "failed"
    jobs["end"][2], jobs["run"][2] = NAN, NAN
    jobs["killed_seconds"][2], jobs["killed_core_seconds"][2] = 5.0, 5.0
    s = summarize(jobs, hand_events(), cores=4)
    assert s["jobs_failed"] == 1 and s["jobs_finished"] == 2
    assert s["wait_mean"] == 35.0
    assert s["wasted_core_seconds"] == 45.0   # 40 + 5 lost on J3, no timeout any more
    assert s["waste_kill_core_seconds"] == 45.0 and s["waste_timeout_core_seconds"] == 0.0
    assert s["utilization"] == pytest.approx(300 / 600)
    assert s["mode_jobs_backfilled"] == 0.0


def test_utilization_up_under_node_failure():
    jobs = {"submit": [0.0], "start": [0.0], "end": [100.0], "run": [100.0], "procs": [2],
            "outcome": ["completed"], "mode": ["ready"], "killed_seconds": [0.0],
            "killed_core_seconds": [0.0]}
    events = {"time": [0.0, 0.0, 50.0, 100.0], "kind": ["submit", "start", "node_down", "end"],
              "queue_len": [1, 0, 0, 0], "up_cores": [4, 4, 2, 2]}
    s = summarize(jobs, events, cores=4)
    assert s["utilization"] == 0.5
    assert s["utilization_up"] == pytest.approx(200 / 300)
    assert s["queue_len_mean"] == 0.0
    assert s["resource_holes_core_seconds"] is None  # no idle_fit_cores column


def test_zero_run_job_excluded_from_slowdown_not_bsld():
    jobs = {"submit": [0.0, 0.0], "start": [0.0, 4.0], "end": [4.0, 4.0], "run": [4.0, 0.0],
            "procs": [1, 1], "outcome": ["completed"] * 2, "mode": ["ready"] * 2,
            "killed_seconds": [0.0, 0.0], "killed_core_seconds": [0.0, 0.0]}
    s = summarize(jobs, None, cores=1)
    assert s["slowdown_mean"] == 1.0 and s["slowdown_excluded"] == 1
    # bsld: max(1, 4/10) = 1 for both
    assert s["bsld_mean"] == 1.0
    assert s["queue_len_mean"] is None


def test_no_finished_job_gives_none():
    jobs = {"submit": [5.0], "start": [NAN], "end": [NAN], "run": [NAN], "procs": [1],
            "outcome": ["unfinished"], "mode": [""], "killed_seconds": [0.0],
            "killed_core_seconds": [0.0]}
    s = summarize(jobs, None, cores=2)
    assert s["jobs_unfinished"] == 1
    assert s["wait_mean"] is None and s["utilization"] is None and s["makespan"] is None
    assert s["mode_jobs_ready"] is None


def test_empty_tables():
    cols = ("submit", "start", "end", "run", "procs", "killed_seconds", "killed_core_seconds")
    jobs = {c: np.array([]) for c in cols} | {"outcome": [], "mode": []}
    s = summarize(jobs, {"time": [], "kind": []}, cores=2)
    assert s["jobs_total"] == 0 and s["wait_mean"] is None


# --------------------------------------------------------- bad input ----

def test_bad_outcome_names_row():
    jobs = hand_jobs()
    jobs["outcome"][1] = "done"
    with pytest.raises(InputError, match=r"jobs.outcome\[1\]: expected one of 'completed'.*got 'done'"):
        summarize(jobs, None, cores=4)


def test_bad_mode_and_missing_column():
    jobs = hand_jobs()
    jobs["mode"][0] = "easy"
    with pytest.raises(InputError, match=r"jobs.mode\[0\].*got 'easy'"):
        summarize(jobs, None, cores=4)
    jobs = hand_jobs()
    del jobs["killed_seconds"]
    with pytest.raises(InputError, match="jobs: expected .*got no column 'killed_seconds'"):
        summarize(jobs, None, cores=4)


def test_finished_job_without_end():
    jobs = hand_jobs()
    jobs["end"][0] = NAN
    with pytest.raises(InputError, match=r"jobs.end\[0\]: expected a finite time.*completed job"):
        summarize(jobs, None, cores=4)


def test_length_mismatch():
    jobs = hand_jobs()
    jobs["procs"] = jobs["procs"][:4]
    with pytest.raises(InputError, match=r"jobs.procs: expected 5 rows.*got 4 rows"):
        summarize(jobs, None, cores=4)


def test_events_out_of_order():
    ev = hand_events()
    ev["time"][5] = 5.0
    with pytest.raises(InputError, match=r"events.time\[5\]: expected rows in non-decreasing.*got 5.0 after 10.0"):
        summarize(hand_jobs(), ev, cores=4)


@pytest.mark.parametrize("kw, where", [({"cores": 0}, "cores"), ({"cores": 4.5}, "cores"),
                                       ({"cores": 4, "tau": 0}, "tau"),
                                       ({"cores": 4, "tau": NAN}, "tau")])
def test_bad_parameters(kw, where):
    with pytest.raises(InputError, match=f"^{where}: expected a positive"):
        summarize(hand_jobs(), None, **kw)


# -------------------------------------------------------- time series ----

def test_step_integral():
    t, v = [0, 0, 2, 5, 5], [9, 1, 3, 7, 2]
    # 1 on [0,2), 3 on [2,5), 2 from 5
    assert step_integral(t, v, 0, 10) == 1 * 2 + 3 * 3 + 2 * 5
    assert step_integral(t, v, 1, 3) == 1 + 3
    assert step_integral(t, v, -5, 1) == 1  # 0 before the first change
    assert step_integral(t, v, 6, 6) == 0.0
    assert step_integral([], [], 0, 10) == 0.0


def test_time_series_knots():
    ts = time_series(hand_events(), 4)
    np.testing.assert_array_equal(ts["time"], [0, 10, 20, 30, 35, 40, 100, 120, 150])
    np.testing.assert_array_equal(ts["queue_len"], [0, 0, 1, 1, 1, 1, 0, 1, 1])
    np.testing.assert_allclose(ts["utilization"], [0.5, 1, 1, 0.75, 0.5, 0.5, 0.5, 0.5, 0])


def test_time_series_downsampled_keeps_integral():
    ts = time_series(hand_events(), 4, max_points=3)
    np.testing.assert_array_equal(ts["time"], [0, 50, 100])
    # used cores: 2*10 + 4*20 + 3*5 + 2*15 = 145 on [0,50); 2*50 on [50,100); 2*50 on [100,150)
    np.testing.assert_allclose(ts["used_cores"], [145 / 50, 2, 2])
    np.testing.assert_allclose(ts["queue_len"], [30 / 50, 1, 30 / 50])


# --------------------------------------------------- prediction error ----

def test_prediction_error_hand():
    e = prediction_error([100, 200, 50], [110, 150, 50])
    assert e["n"] == 3
    assert e["mape"] == pytest.approx((0.1 + 0.25 + 0) / 3)
    assert e["underestimation_rate"] == pytest.approx(1 / 3)
    assert e["accuracy"] == pytest.approx((100 / 110 + 0.75 + 1) / 3)


def test_prediction_error_by_progress_decile():
    e = prediction_error([100, 100, 100], [50, 100, 80], progress=[0.05, 0.95, 1.0])
    assert e["mape_progress_0"] == 0.5
    assert e["mape_progress_9"] == pytest.approx(0.1)
    assert e["mape_progress_5"] is None
    # a negative prediction is as bad as 0 for accuracy
    assert prediction_error([10], [-5])["accuracy"] == 0.0


def test_prediction_error_bad_input():
    with pytest.raises(InputError, match=r"y\[1\]: expected a positive true value, got 0.0"):
        prediction_error([1, 0], [1, 1])
    with pytest.raises(InputError, match=r"yhat: expected shape \(2,\)"):
        prediction_error([1, 2], [1])
    with pytest.raises(InputError, match=r"progress\[0\]: expected a fraction"):
        prediction_error([1], [1], progress=[1.5])


# ---------------------------------------------------------- properties ----

def fcfs(submit, run, procs, modes, cores):
    """A tiny strict-FCFS machine: consistent jobs and events tables."""
    n = len(submit)
    start = np.zeros(n)
    busy: list[tuple[float, int]] = []  # (end, procs) of started jobs
    prev = -math.inf
    for j in range(n):
        t = max(submit[j], prev)
        # after the previous start usage only falls, so try t then each later end
        for cand in [t] + sorted(e for e, _ in busy if e > t):
            used = sum(p for e, p in busy if e > cand)
            if used + procs[j] <= cores:
                t = cand
                break
        start[j] = prev = t
        busy.append((t + run[j], procs[j]))
    end = start + run
    jobs = {"submit": np.array(submit), "start": start, "end": end, "run": np.array(run),
            "procs": np.array(procs), "outcome": ["completed"] * n, "mode": list(modes),
            "killed_seconds": np.zeros(n), "killed_core_seconds": np.zeros(n)}
    # replay: at each time, ends then starts then submits (state is what
    # counts: only the last row per time is read)
    changes = sorted([(end[j], 0, j) for j in range(n)] + [(start[j], 1, j) for j in range(n)]
                     + [(submit[j], 2, j) for j in range(n)])
    rows, queued, used, running = [], set(), 0, 0
    for i, (t, k, j) in enumerate(changes):
        if k == 0:
            used, running = used - procs[j], running - 1
        elif k == 1:
            used, running = used + procs[j], running + 1
            queued.discard(j)
        elif start[j] > submit[j]:  # a job started at its submit time never queues
            queued.add(j)
        rows.append((t, "x", len(queued), running, used, sum(procs[q] * run[q] for q in queued), 0))
        if i + 1 == len(changes) or changes[i + 1][0] != t:
            idle = cores - used
            fit = idle if any(procs[q] <= idle for q in queued) else 0
            rows.append((t, "pass", len(queued), running, used, rows[-1][5], fit))
    cols = list(zip(*rows, strict=True)) if rows else [[]] * 7
    events = {"time": np.array(cols[0], dtype=float), "kind": list(cols[1]),
              "queue_len": np.array(cols[2]), "running": np.array(cols[3]),
              "used_cores": np.array(cols[4]), "up_cores": np.full(len(rows), cores),
              "queued_area": np.array(cols[5], dtype=float), "idle_fit_cores": np.array(cols[6])}
    return jobs, events


@st.composite
def workloads(draw):
    cores = draw(st.integers(1, 16))
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    submit = np.cumsum(gaps).astype(float)
    run = draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))
    procs = draw(st.lists(st.integers(1, cores), min_size=n, max_size=n))
    modes = draw(st.lists(st.sampled_from(metrics.EXEC_MODES), min_size=n, max_size=n))
    tau = draw(st.sampled_from([1.0, 10.0, 60.0]))
    return cores, tau, fcfs(submit, [float(r) for r in run], procs, modes, cores)


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_invariants(case):
    cores, tau, (jobs, events) = case
    s = summarize(jobs, events, cores=cores, tau=tau)
    per = job_metrics(jobs, tau=tau)
    assert np.all(per["bsld"] >= 1.0)
    assert np.all(per["wait"] >= 0)
    assert s["bsld_mean"] >= 1.0
    assert sum(s[f"mode_jobs_{m}"] for m in metrics.EXEC_MODES) == pytest.approx(1.0)
    if s["useful_core_seconds"] > 0:
        assert sum(s[f"mode_corehours_{m}"] for m in metrics.EXEC_MODES) == pytest.approx(1.0)
    if s["makespan"]:
        span = s["makespan"]
        assert 0.0 <= s["utilization"] <= 1.0 + 1e-12
        # the jobs table and the events step function tell the same story
        used = step_integral(events["time"], events["used_cores"], s["span_start"], s["span_end"])
        assert s["utilization"] == pytest.approx(used / (cores * span))
        # every queued second of every job is in the queue-length integral
        assert s["queue_len_mean"] * span == pytest.approx(float(np.sum(per["wait"])))
        assert 0.0 <= s["resource_holes_frac"] <= 1.0 - s["utilization"] + 1e-9


def test_headline_equals_the_summary_by_the_same_definitions(summary):
    from cosim.metrics import headline

    h = headline(hand_jobs(), hand_events(), cores=4)
    for key in ("jobs_finished", "wait_mean", "wait_max", "bsld_mean", "utilization",
                "queue_len_mean"):
        assert h[key] == summary[key], key


def test_every_summary_key_is_defined_in_the_code_and_in_docs_metrics_md(summary):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    for key in summary:
        assert metrics.definition(key), key
    documented = set(re.findall(r"`([a-z0-9_<>]+)`", text))
    for key in metrics.METRIC_DEFINITIONS:
        if key in ("jobs_total", "jobs_completed", "jobs_timeout", "jobs_failed",
                   "jobs_rejected", "jobs_unfinished", "jobs_finished", "wait_median",
                   "wait_p95", "wait_p99", "span_start", "span_end", "cores", "tau"):
            continue   # described in prose (outcomes, percentiles, the span)
        assert key in documented, key


def starving_jobs() -> dict:
    """Seven jobs around the day and week thresholds, worked out by hand.

    A waits exactly a day (86,400 s: not more), B a day and a second, C
    604,800 s once the 1,000 s it ran in a killed attempt are taken off (a
    day, not more than a week), D a week and a second, E failed after
    700,000 s queued (it counts, as in wait_max); F was rejected at submit
    and G is still queued: neither has a time queued, so both are out of the
    counts and of the shares' denominator (5 jobs).
    """
    return {
        "submit": np.zeros(7),
        "start": np.array([86_400.0, 86_401.0, 605_800.0, 604_801.0, NAN, NAN, NAN]),
        "end": np.array([86_500.0, 86_501.0, 605_900.0, 604_901.0, 700_000.0, NAN, NAN]),
        "run": np.array([100.0, 100.0, 100.0, 100.0, NAN, NAN, NAN]),
        "procs": np.ones(7, dtype=np.int64),
        "outcome": ["completed"] * 4 + ["failed", "rejected", "unfinished"],
        "mode": ["ready"] * 4 + [""] * 3,
        "killed_seconds": np.array([0.0, 0.0, 1_000.0, 0.0, 0.0, 0.0, 0.0]),
        "killed_core_seconds": np.array([0.0, 0.0, 1_000.0, 0.0, 0.0, 0.0, 0.0]),
    }


def test_starved_jobs_count_waits_beyond_a_day_and_a_week():
    from cosim.metrics import headline, starves

    s = summarize(starving_jobs(), None, cores=1)
    assert (s["starved_1d"], s["starved_1w"]) == (4, 2)
    assert s["starved_1d_share"] == pytest.approx(4 / 5)
    assert s["starved_1w_share"] == pytest.approx(2 / 5)
    assert s["wait_max"] == 700_000.0
    assert starves(s)
    h = headline(starving_jobs(), cores=1)
    for key in ("starved_1d", "starved_1w", "starved_1d_share", "starved_1w_share"):
        assert h[key] == s[key], key


def test_no_starved_jobs_and_no_jobs_queued(summary):
    from cosim.metrics import starvation, starves

    assert (summary["starved_1d"], summary["starved_1w"]) == (0, 0)
    assert summary["starved_1d_share"] == summary["starved_1w_share"] == 0.0
    assert not starves(summary)
    assert starvation([NAN]) == {"starved_1d": 0, "starved_1d_share": None,
                                 "starved_1w": 0, "starved_1w_share": None}
    assert not starves({"starved_1w": None}) and not starves({})
