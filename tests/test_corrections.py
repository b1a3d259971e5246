"""Planning on predictions, safely (EASY++): named corrections, the cap at the request,
and the refusal of @history where it cannot be per-user or capped at a real request."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from cosim.__main__ import main
from cosim.actors.corrections import CORRECTIONS, STEP_UP_LADDER, corrected_end
from cosim.actors.nodes import Cluster
from cosim.actors.scheduler import Scheduler, SchedulerRules
from cosim.config import load_scenario
from cosim.errors import ScenarioError
from cosim.job import Job
from cosim.policies import make_policy

ROOT = Path(__file__).resolve().parents[1]


def schedule(jobs: list[Job], correction: str, *, enforce: bool = False
             ) -> tuple[dict[int, float], Scheduler]:
    """Start time of each job under FCFS+EASY on 2 one-core nodes, and the scheduler."""
    env = simpy.Environment()
    cluster = Cluster(env, nodes=2, cores_per_node=1, enforce_walltime=enforce)
    sched = Scheduler(env, cluster, make_policy("fcfs+easy"), expected_jobs=len(jobs),
                      rules=SchedulerRules(correction=correction))

    def arrive(job):
        yield env.timeout(job.submit)
        sched.submit(job)

    for job in jobs:
        env.process(arrive(job))
    env.run(sched.finished)
    return {j.id: j.start for j in jobs}, sched


def probe_jobs() -> list[Job]:
    """A runs 1000 s on one core, predicted 100 s, requested 3600 s; B needs both
    cores (the head, its shadow time is A's expected end); D1 (500 s) and D2
    (650 s) are exactly estimated one-core jobs that backfill only where they
    end before that shadow time."""
    # Job(id, index, submit, run, procs, req_time, estimate)
    return [Job(1, 0, 0.0, 1000.0, 1, 3600.0, 100.0),
            Job(2, 1, 1.0, 10.0, 2, 10.0, 10.0),
            Job(3, 2, 120.0, 500.0, 1, 500.0, 500.0),
            Job(4, 3, 121.0, 650.0, 1, 650.0, 650.0)]


# Hand-checked (A's expected end after each correction, and so B's shadow time):
# - overrun: 160, 220, 280, 340, 408, ... (max(60 s, 0.2 x elapsed) never reaches 500 s
#   before A ends at 1000): nothing backfills; B at 1000, D1 and D2 after it at 1010.
# - stepup: 100 + 60 = 160 (t=100), 100 + 300 = 400 (t=160), 100 + 900 = 1000 (t=400):
#   D1 (400 + 500 <= 1000) at 400; B at 1000; D2 after B at 1010.
# - double: 200 (t=100), 400 (t=200), 800 (t=400), 1600 (t=800): D1 (800 + 500 <= 1600)
#   at 800; A ends at 1000 and B's shadow is D1's end, 1300: D2 (1000 + 650) does not
#   fit before it; B at 1300, D2 at 1310.
# - request: 3600 at t=100: D1 at 120, D2 at 620 when D1 ends (620 + 650 <= 3600);
#   B when D2 ends, 1270.
EXPECTED = {
    "overrun": {1: 0.0, 2: 1000.0, 3: 1010.0, 4: 1010.0},
    "stepup": {1: 0.0, 2: 1000.0, 3: 400.0, 4: 1010.0},
    "double": {1: 0.0, 2: 1300.0, 3: 800.0, 4: 1310.0},
    "request": {1: 0.0, 2: 1270.0, 3: 120.0, 4: 620.0},
}


@pytest.mark.parametrize("correction", sorted(EXPECTED))
def test_each_correction_gives_its_hand_checked_schedule(correction):
    starts, sched = schedule(probe_jobs(), correction)
    assert starts == EXPECTED[correction]
    assert sched.counters.overruns == {"overrun": 10, "stepup": 3, "double": 4,
                                       "request": 1}[correction]
    assert sched.counters.reservations_broken >= 1   # B's promise moved each time


def test_every_correction_is_capped_at_the_request():
    # A is predicted 100 s and killed at its request, 300 s. Doubling expects
    # 200 s, then 400 s: capped at 300 s, D (150 s, from t=120) never fits
    # before the shadow time (uncapped it would start at 200 and delay B to 350).
    jobs = [Job(1, 0, 0.0, 1000.0, 1, 300.0, 100.0), Job(2, 1, 1.0, 10.0, 2, 10.0, 10.0),
            Job(3, 2, 120.0, 150.0, 1, 150.0, 150.0)]
    starts, _ = schedule(jobs, "double", enforce=True)
    assert starts == {1: 0.0, 2: 300.0, 3: 310.0}
    job = Job(1, 0, 0.0, 1000.0, 1, 300.0, 100.0)
    job.start = 0.0
    for name in CORRECTIONS:
        end, _ = corrected_end(name, job, 250.0, 3)
        assert 250.0 < end <= 300.0, name
    # the overrun rule, uncapped before: 250 + 60 = 310 is now the request, 300
    assert corrected_end("overrun", job, 250.0, 0) == (300.0, 1)


def test_a_job_past_its_request_is_corrected_beyond_it():
    # walltime not enforced: the request bounds nothing any more
    job = Job(1, 0, 0.0, 5000.0, 1, 300.0, 100.0)
    job.start = 0.0
    assert corrected_end("overrun", job, 400.0, 0) == (480.0, 1)
    assert corrected_end("request", job, 400.0, 0) == (480.0, 1)   # falls back to overrun
    assert corrected_end("double", job, 400.0, 0) == (800.0, 1)
    assert corrected_end("stepup", job, 400.0, 0) == (1000.0, 3)   # 100 + 900: rungs skipped



def test_a_job_at_its_request_to_the_last_bit_is_expected_after_now():
    # SDSC-SP2 in submit order: a job started at 8372819.51689024 s with an
    # 18,000 s request that ran it all; at its request's end, now - start rounds
    # to 17999.99999999907 < 18000 while start + 18000 is now itself, and the
    # cap put the expected end at now: corrected at now again, the run never
    # moved on (fcfs+easy@history on the first 10,000 jobs).
    job = Job(1, 0, 0.0, 18000.0, 1, 18000.0, 3638.5)
    job.start = 8372819.51689024
    now = 8390819.516890239
    assert job.start + job.req_time == now and now - job.start < job.req_time
    for name in CORRECTIONS:
        for count in (0, 3):
            end, _ = corrected_end(name, job, now, count)
            assert end > now, name
    # at the request: the overrun rule, 0.2 x elapsed
    assert corrected_end("overrun", job, now, 0)[0] == now + 0.2 * (now - job.start)

def test_the_step_up_ladder_is_easy_plus_plus_and_goes_on_past_its_end():
    assert STEP_UP_LADDER == (60, 300, 900, 1800, 3600, 7200, 18000, 36000, 72000, 180000,
                              360000)
    job = Job(1, 0, 0.0, 1e7, 1, 1e9, 10.0)
    job.start = 0.0
    ends, count, now = [], 0, 10.0
    for _ in range(13):
        end, count = corrected_end("stepup", job, now, count)
        ends.append(end - 10.0)
        now = end
    assert ends == [*STEP_UP_LADDER, 720000.0, 1080000.0]


def test_an_unknown_correction_is_one_line_naming_the_choices():
    with pytest.raises(ScenarioError, match="scheduler.correction.*'overrun', 'stepup'"):
        load_scenario(ROOT / "scenarios" / "swf.yaml", ["scheduler.correction=halve"])


# ----------------------------------------------------------------------------- @history


def _trace(tmp_path: Path, *, users: bool, requests: bool) -> Path:
    lines = []
    for i in range(1, 9):
        user = (i % 3) + 1 if users else -1
        req = 400 if requests else -1
        lines.append(f"{i} {10 * i} -1 {50 + i} 2 -1 -1 2 {req} -1 1 {user} -1 -1 -1 -1 -1 -1")
    path = tmp_path / ("t.swf" if users else "nousers.swf")
    path.write_text("; MaxProcs: 4\n" + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("users,requests,fragment,override", [
    (False, True, "nousers.swf: expected user ids for @history, got none (every job's user "
     "is -1: @history would share one history among all jobs); use @estimate, or --set "
     "predictor.allow_shared_history=true", "predictor.allow_shared_history=true"),
    (True, False, "t.swf: expected requested times for @history, got none (every request is "
     "missing: @history would be capped at each job's own run time); use @estimate, or "
     "--set predictor.allow_missing_requests=true", "predictor.allow_missing_requests=true"),
])
def test_history_without_users_or_requests_is_refused_with_one_line(
        tmp_path, capsys, users, requests, fragment, override):
    path = _trace(tmp_path, users=users, requests=requests)
    args = ["run", str(ROOT / "scenarios" / "swf.yaml"), "--set", f"workload.path={path}",
            "--policy", "sjf+easy@history", "--out", str(tmp_path / "out"), "--no-plots"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {fragment}"]
    assert not (tmp_path / "out").exists()
    assert main([*args, "--set", override]) == 0
    assert (tmp_path / "out" / "comparison.json").exists()


def test_history_with_users_and_requests_runs_and_estimates_are_never_refused(tmp_path):
    path = _trace(tmp_path, users=True, requests=True)
    assert main(["run", str(ROOT / "scenarios" / "swf.yaml"), "--set", f"workload.path={path}",
                 "--policy", "sjf+easy@history", "--out", str(tmp_path / "a"),
                 "--no-plots"]) == 0
    bare = _trace(tmp_path, users=False, requests=False)
    assert main(["run", str(ROOT / "scenarios" / "swf.yaml"), "--set", f"workload.path={bare}",
                 "--policy", "sjf+easy", "--out", str(tmp_path / "b"), "--no-plots"]) == 0
