"""The scheduler's event and decision rows: one writer (cosim.records.Recorder), named fields."""

from __future__ import annotations

import math

import simpy

from cosim.config import scenario_from_dict
from cosim.model import build
from cosim.policies import make_policy
from cosim.records import (
    DECISION_COLUMNS,
    EVENT_COLUMNS,
    DecisionRow,
    EventRow,
    Recorder,
    decisions_table,
    events_table,
)
from cosim.workloads.base import Workload


def run(rows, cores, policy="fcfs+easy"):
    w = Workload.from_columns(submit=[r[0] for r in rows], procs=[r[1] for r in rows],
                              run=[r[2] for r in rows], req_time=[r[2] for r in rows])
    sc = scenario_from_dict({"cluster": {"nodes": cores},
                             "workload": {"kind": "swf", "path": "unused"}})
    env = simpy.Environment()
    sim = build(env, sc, make_policy(policy), workload=w)
    env.run(until=sim.finished)
    return sim


def test_rows_are_named_in_schema_order():
    assert EventRow._fields == EVENT_COLUMNS
    assert DecisionRow._fields == DECISION_COLUMNS
    assert EVENT_COLUMNS[4] == "queue_len" and DECISION_COLUMNS[-1] == "reserved_time"


def test_a_hand_checked_schedule_writes_these_rows():
    # 4 cores: J1 (2 cores, 0-10) starts at 0; J2 (4 cores) arrives at 1 and is
    # promised 10 (J1's end); it starts there and ends at 15.
    sim = run([(0, 2, 10), (1, 4, 5)], 4)
    d = [DecisionRow(*r) for r in sim.scheduler.decisions]
    assert [(r.time, r.job_id, r.action, r.mode, r.reason) for r in d] == [
        (0.0, 1, "start", "ready", "fits at head"),
        (1.0, 2, "reserve", "", "EASY head reservation"),
        (10.0, 2, "start", "reserved", "fits at head")]
    assert d[1].reserved_time == 10.0 and math.isnan(d[0].reserved_time)
    ev = [EventRow(*r) for r in sim.scheduler.events]
    assert [(r.time, r.kind, r.job_id) for r in ev if r.kind != "pass"] == [
        (0.0, "submit", 1), (0.0, "start", 1), (1.0, "submit", 2), (10.0, "end", 1),
        (10.0, "start", 2), (15.0, "end", 2)]
    start2 = [r for r in ev if r.kind == "start" and r.job_id == 2][0]
    assert (start2.queue_len, start2.running, start2.used_cores, start2.up_cores) == (0, 1, 4, 4)
    # Still plain tuples to the table builders.
    assert events_table(sim.scheduler.events)["kind"][0] == "submit"
    assert list(decisions_table(sim.scheduler.decisions)["action"]) == ["start", "reserve", "start"]
    # Plain tuples: the garbage collector stops tracking them.
    assert type(sim.scheduler.events[0]) is tuple


def test_the_recorder_writes_every_decision_kind():
    log = Recorder()
    log.start(1.0, 3, "backfilled", "uses extra cores")
    log.started(1.5, 8, "ready", "fits at head", 2, 1, 3, 4, 120.0)
    log.reserve(1.0, 4, "EASY head reservation", 9.0)
    log.reserve(2.0, 4, "withdrawn", math.nan)
    log.kill(3.0, 3, "over budget")
    log.wait(4.0, "nothing to do")
    log.refused(5.0, 5, "start", "ready", "does not fit now")
    log.event(6.0, "pass", -1, -1, 2, 1, 3, 4, 120.0, 1)
    rows = [(r.action, r.job_id, r.reason) for r in map(DecisionRow._make, log.decisions)]
    assert rows == [("start", 3, "uses extra cores"), ("start", 8, "fits at head"),
                    ("reserve", 4, "EASY head reservation"),
                    ("reserve", 4, "withdrawn"), ("kill", 3, "over budget"),
                    ("wait", -1, "nothing to do"), ("start", 5, "refused: does not fit now")]
    assert [EventRow(*r) for r in log.events] == [EventRow(1.5, "start", 8, -1, 2, 1, 3, 4, 120.0, 0),
                          EventRow(6.0, "pass", -1, -1, 2, 1, 3, 4, 120.0, 1)]
