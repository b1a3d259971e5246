"""The "as recorded" row of a Slurm replay (issue 21, item 5): the ``recorded``
policy starts every job at its recorded start, and ``convert`` writes the
recorded wait into the SWF wait field."""

from __future__ import annotations

from pathlib import Path

import simpy

from cosim.__main__ import main
from cosim.config import scenario_from_dict
from cosim.model import build
from cosim.policies import make_policy, policy_names
from cosim.policies.recorded import recorded_starts
from cosim.workloads.base import Workload
from cosim.workloads.slurm import read_sacct
from cosim.workloads.swf import read_swf

SAMPLE = Path(__file__).parent / "data" / "sacct_small.txt"
# By hand from tests/data/sacct_small.txt: the kept jobs' Start - Submit (s), in submit order.
SAMPLE_WAITS = [10.0, 0.0, 600.0, 30.0, 60.0, 0.0, 0.0, 60.0, 60.0, 0.0]
SAMPLE_SUBMITS = [0.0, 300.0, 600.0, 900.0, 1200.0, 1500.0, 2400.0, 2400.0, 2700.0, 3000.0]


def _run(w: Workload, cores: int, kind: str = "slurm"):
    sc = scenario_from_dict({"cluster": {"nodes": cores},
                             "workload": {"kind": "lublin", "jobs": len(w)}})
    env = simpy.Environment()
    policy = make_policy("recorded")
    sim = build(env, sc, policy, workload=w)
    env.run(until=sim.finished)
    return sim, policy


def test_sample_waits_by_hand():
    w = read_sacct(SAMPLE)
    assert w.submit.tolist() == SAMPLE_SUBMITS
    assert w.features["wait"].tolist() == SAMPLE_WAITS


def test_recorded_replays_every_start_of_the_sample():
    w = read_sacct(SAMPLE)
    sim, policy = _run(w, int(w.max_procs))
    jobs = sorted(sim.scheduler.jobs, key=lambda j: j.index)
    assert [j.start for j in jobs] == [s + d for s, d in zip(SAMPLE_SUBMITS, SAMPLE_WAITS)]
    assert all(j.reason == "as recorded" for j in jobs)
    assert (policy.late, policy.unknown) == (0, 0)
    # mean wait 820 / 10 s, as Slurm did
    assert sum(j.start - j.submit for j in jobs) / len(jobs) == 82.0


def test_a_job_that_does_not_fit_at_its_recorded_start_starts_late_never_early():
    # Two 2-core jobs recorded to start at 5 on a 2-core machine: the first (by
    # recorded start, then id) runs 5..15, the second starts at 15, late.
    w = Workload.from_columns(submit=[0.0, 1.0], run=[10.0, 10.0], procs=[2, 2],
                              features={"wait": [5.0, 4.0]})
    sim, policy = _run(w, 2)
    a, b = sorted(sim.scheduler.jobs, key=lambda j: j.index)
    assert (a.start, b.start) == (5.0, 15.0)
    assert policy.late == 1 and b.reason.startswith("as recorded, late")


def test_unknown_waits_start_at_submit():
    w = Workload.from_columns(submit=[0.0, 3.0], run=[10.0, 1.0], procs=[1, 1],
                              features={"wait": [-1.0, 7.0]})
    assert recorded_starts(w).tolist() == [0.0, 10.0]
    sim, policy = _run(w, 2)
    assert [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.index)] == [0.0, 10.0]
    assert policy.unknown == 1


def test_convert_writes_the_recorded_wait_and_it_replays(tmp_path):
    out = tmp_path / "s.swf"
    assert main(["convert", str(SAMPLE), "--to", "swf", "--out", str(out)]) == 0
    rows = [ln.split() for ln in out.read_text().splitlines() if not ln.startswith(";")]
    assert [float(r[2]) for r in rows] == SAMPLE_WAITS
    w = read_swf(out)
    assert w.features["wait"].tolist() == SAMPLE_WAITS
    sim, _ = _run(w, int(w.max_procs))
    assert [j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.index)] == [
        s + d for s, d in zip(SAMPLE_SUBMITS, SAMPLE_WAITS)]


def test_recorded_is_listed_beside_the_other_policies(capsys):
    assert "recorded" in dict(policy_names())
    assert main(["policies"]) == 0
    assert "recorded" in capsys.readouterr().out


def test_unbound_recorded_policy_starts_jobs_in_queue_order():
    from cosim.actors.nodes import Cluster
    from cosim.actors.scheduler import Scheduler
    from cosim.job import Job

    env = simpy.Environment()
    sched = Scheduler(env, Cluster(env, nodes=2, cores_per_node=1), make_policy("recorded"),
                      expected_jobs=2)
    jobs = [Job(1, 0, 0.0, 10.0, 2, 10.0, 10.0), Job(2, 1, 0.0, 5.0, 1, 5.0, 5.0)]
    for j in jobs:
        sched.submit(j)
    env.run(until=sched.finished)
    assert [(j.start, j.end) for j in jobs] == [(0.0, 10.0), (10.0, 15.0)]


def test_recorded_on_a_generated_workload_is_one_line_before_anything_runs(capsys, tmp_path):
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "lublin256.yaml"
    out = tmp_path / "res"
    assert main(["run", str(scenario), "--policy", "fcfs+easy", "--policy", "recorded",
                 "--set", "workload.jobs=20", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: policy recorded: expected a trace replay (workload.kind swf "
                          "or slurm): recorded starts are the trace's submit + wait, got a "
                          "workload with no recorded starts (lublin")
    assert len(err.splitlines()) == 1 and not out.exists()
