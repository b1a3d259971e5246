"""The counts a replay warns about are those of the jobs replayed (issue 21).

A trace reader counts its cleaning rules over the whole file. Two lines used
those counts against the jobs actually replayed: "N of n jobs have no
requested time" (a window of a trace, or Slurm jobs dropped as wider than the
machine, counted as missing), and "X of X+n jobs dropped" (n the window,
not the file). Exact messages, hand-counted on small files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cosim.__main__ import main
from cosim.config import scenario_from_dict
from cosim.workloads.loading import load_workload, workload_warnings
from cosim.workloads.slurm import read_sacct

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "sacct_small.txt"
NO_QOS = "no qos in the trace (unknown for every job): run-time predictors learn without them"
PERFECT = ("their estimate is their real run time, a perfect estimate no real scheduler has "
           "(set workload.estimates.model to gaussian or tsafrir for realistic ones)")
#: The sample's 14 jobs: 2 pending, 1 cancelled before it started, 1 running;
#: on 16 CPUs 104 (32 CPUs, no time limit) is too wide. 9 are kept:
#: 100 101 102 105 106 200_1 200_2 300 109, of which only 105 has no time limit.
SLURM_DROPS = ("5 of 14 jobs dropped: 2 that never started (pending), 1 cancelled before "
               "they started, 1 still running (no end), 1 wider than the machine")


def _warnings(workload: dict, cluster: dict | None = None) -> tuple[list[str], list]:
    sc = scenario_from_dict({"workload": workload, **({"cluster": cluster} if cluster else {})})
    w = load_workload(sc)
    ids = w.features["slurm_id"].tolist() if "slurm_id" in w.features else w.job_id.tolist()
    return workload_warnings(w, sc), ids


def test_slurm_jobs_dropped_as_too_wide_are_not_counted_as_missing_a_request():
    w = read_sacct(SAMPLE, max_procs=16)
    assert "104" not in w.features["slurm_id"].tolist()
    assert w.cleaning["req_time_missing"] == 1                    # 105 only (104 dropped)
    assert w.features["req_time_missing"].tolist() == [
        sid == "105" for sid in w.features["slurm_id"].tolist()]
    assert read_sacct(SAMPLE).cleaning["req_time_missing"] == 2  # 104 and 105, both kept


@pytest.mark.parametrize("jobs,offset,ids,lines", [
    (None, 0, ["100", "101", "102", "105", "106", "200_1", "200_2", "300", "109"],
     [SLURM_DROPS, f"1 of 9 jobs (11%) have no requested time: {PERFECT}", NO_QOS]),
    (3, 3, ["105", "106", "200_1"],
     [SLURM_DROPS + "; 3 of the 9 kept replayed (workload.jobs)",
      f"1 of 3 jobs (33%) have no requested time: {PERFECT}", NO_QOS]),
    (3, 0, ["100", "101", "102"],                                # every one has a limit
     [SLURM_DROPS + "; 3 of the 9 kept replayed (workload.jobs)", NO_QOS]),
])
def test_a_slurm_replay_warns_with_the_counts_of_the_jobs_replayed(jobs, offset, ids, lines):
    wl = {"kind": "slurm", "path": str(SAMPLE), "offset": offset, **({"jobs": jobs} if jobs else {})}
    found, replayed = _warnings(wl, {"nodes": 1, "cores_per_node": 16})
    assert replayed == ids
    assert found == lines


def _swf(tmp_path: Path) -> Path:
    # 12 jobs on 16 processors: job 2 has an unknown run time, job 5 is 32 wide;
    # 10 are kept (1 3 4 6 7 8 9 10 11 12); jobs 1-6 have no requested time.
    rows = []
    for i in range(1, 13):
        run = -1 if i == 2 else 100
        procs = 32 if i == 5 else 4
        req = -1 if i <= 6 else 200
        rows.append(f"{i} {10 * i} -1 {run} {procs} -1 -1 {procs} {req} -1 1 1 -1 -1 -1 -1 -1 -1")
    path = tmp_path / "t.swf"
    path.write_text("; MaxProcs: 16\n" + "\n".join(rows) + "\n")
    return path


SWF_DROPS = "2 of 12 jobs dropped: 1 with an unknown run time, 1 wider than the machine"
# fields 13-16 are -1 in _swf's rows, the sample's sacct output has no QOS column
SWF_NO_FIELDS = ("no group, executable, queue, partition in the trace (unknown for every job): "
                 "run-time predictors learn without them")


@pytest.mark.parametrize("jobs,offset,ids,lines", [
    (None, 0, [1, 3, 4, 6, 7, 8, 9, 10, 11, 12],
     [SWF_DROPS, f"4 of 10 jobs (40%) have no requested time: {PERFECT}", SWF_NO_FIELDS]),
    (4, 0, [1, 3, 4, 6],
     [SWF_DROPS + "; 4 of the 10 kept replayed (workload.jobs)",
      f"4 of 4 jobs (100%) have no requested time: {PERFECT}", SWF_NO_FIELDS]),
    (5, 5, [8, 9, 10, 11, 12],
     [SWF_DROPS + "; 5 of the 10 kept replayed (workload.jobs)", SWF_NO_FIELDS]),
])
def test_an_swf_replay_warns_with_the_counts_of_the_jobs_replayed(tmp_path, jobs, offset, ids,
                                                                   lines):
    wl = {"kind": "swf", "path": str(_swf(tmp_path)), "offset": offset,
          **({"jobs": jobs} if jobs else {})}
    found, replayed = _warnings(wl)
    assert replayed == ids
    assert found == lines


def test_the_run_command_prints_the_replayed_counts(tmp_path, capsys):
    code = main(["run", str(ROOT / "scenarios" / "swf.yaml"), "--set",
                 f"workload.path={_swf(tmp_path)}", "--set", "workload.jobs=4", "--out",
                 str(tmp_path / "o"), "--no-plots"])
    err = capsys.readouterr().err
    assert code == 0
    assert err.splitlines()[1:3] == [
        f"  {SWF_DROPS}; 4 of the 10 kept replayed (workload.jobs)",
        f"  4 of 4 jobs (100%) have no requested time: {PERFECT}"]
