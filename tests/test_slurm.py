"""Slurm accounting import: hand-written sacct samples with known answers, conversion to SWF."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from cosim.__main__ import main
from cosim.errors import InputError, WorkloadError
from cosim.workloads.loading import workload_warnings
from cosim.workloads.slurm import (
    PEAK_SOURCE,
    parse_duration,
    parse_hostlist,
    parse_memory,
    read_sacct,
)
from cosim.workloads.swf import read_swf

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "sacct_small.txt"


# ----------------------------------------------------------------------------- fields


@pytest.mark.parametrize("text, seconds", [
    ("2-00:00:00", 172800.0), ("1-01:00:00", 90000.0), ("1-12", 129600.0), ("1-12:30", 131400.0),
    ("02:00:00", 7200.0), ("00:30:05", 1805.0), ("30:00", 1800.0), ("10:00", 600.0),
    ("05:07.250", 307.25), ("90", 5400.0),
    ("UNLIMITED", None), ("Partition_Limit", None), ("INVALID", None), ("Unknown", None),
    ("None", None), ("", None),
])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["1:2:3:4", "abc", "-5", "1.5", "1-99:99:99", "1-24:00:00",
                                  "10:60", "01:00:60"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("text, cpus, nodes, gb", [
    ("4000Mc", 8, 1, 31.25),      # per CPU, MB
    ("16Gn", 4, 2, 32.0),         # per node
    ("2G", 16, 2, 4.0),           # no suffix (Slurm 21.08+): per node
    ("4000M", 4, 1, 4000 / 1024),
    ("1T", 1, 1, 1024.0),
    ("512Kc", 2, 1, 1024 / 1024**2),
    ("1000", 1, 1, 1000 / 1024),  # the default unit is MB
    ("0n", 32, 4, 0.0),
    ("", 1, 1, 0.0),
])
def test_memory(text, cpus, nodes, gb):
    assert parse_memory(text, cpus, nodes) == pytest.approx(gb)


# ----------------------------------------------------------------------------- the sample


@pytest.fixture(scope="module")
def sample():
    return read_sacct(SAMPLE)


def test_sample_jobs_by_hand(sample):
    """tests/data/sacct_small.txt, worked out line by line.

    Kept (submit order): 100 completed, 101 TIMEOUT (ran 5 s over its 30:00),
    102 cancelled while running, 104 FAILED (UNLIMITED limit), 105 NODE_FAIL
    (Partition_Limit), 106 OUT_OF_MEMORY, array tasks 200_1 and 200_2 (MM:SS
    times), 300 (het components 300+0 and 300+1 merged), 109 (a day long).
    Dropped: 103 cancelled before it started, 107 and 200_[3-5] pending, 108
    still running. Steps 100.batch, 100.extern, 100.0 are not jobs.
    """
    w = sample
    assert w.features["slurm_id"].tolist() == ["100", "101", "102", "104", "105", "106",
                                              "200_1", "200_2", "300", "109"]
    assert w.job_id.tolist() == list(range(1, 11))
    # seconds after the first submit, 2025-03-01T08:00:00
    assert w.submit.tolist() == [0, 300, 600, 900, 1200, 1500, 2400, 2400, 2700, 3000]
    assert w.run.tolist() == [3600, 1805, 300, 60, 600, 120, 600, 300, 600, 90000]
    # UNLIMITED and Partition_Limit: the run time stands in (a perfect estimate)
    assert w.req_time.tolist() == [7200, 1800, 86400, 60, 600, 3600, 1200, 1200, 3600, 172800]
    assert w.procs.tolist() == [8, 4, 16, 32, 4, 1, 2, 2, 12, 4]
    assert w.features["nodes"].tolist() == [1, 1, 2, 4, 1, 1, 1, 1, 3, 1]
    # 4000Mc x 8, 16Gn x 1, 2G x 2 nodes, 0n, 4000M x 1, 1Gc x 1, 500Mc x 2 (twice),
    # 2Gn x 1 + 4Gn x 2, 4000Mc x 4
    np.testing.assert_allclose(w.mem, [31.25, 16, 4, 0, 4000 / 1024, 1, 1000 / 1024,
                                       1000 / 1024, 10, 15.625])
    assert w.user.tolist() == [0, 1, 0, 2, 1, 0, 2, 2, 1, 0]
    assert w.labels["user"] == {0: "alice", 1: "bob", 2: "carol"}
    assert w.features["partition"].tolist() == [1, 1, 2, 1, 1, 1, 1, 1, 1, 1]
    assert w.labels["partition"] == {1: "batch", 2: "gpu"}
    assert w.features["status"].tolist() == [1, 0, 5, 0, 0, 0, 1, 1, 1, 1]
    assert w.features["wait"].tolist() == [10, 0, 600, 30, 60, 0, 0, 60, 60, 0]


def test_sample_counts(sample):
    assert sample.cleaning == {
        "steps_ignored": 3, "het_components_merged": 1, "status_dropped": 0,
        "pending_dropped": 2, "cancelled_before_start_dropped": 1, "running_dropped": 1,
        "end_before_start_dropped": 0, "procs_unknown_dropped": 0, "procs_over_machine_dropped": 0, "array_tasks": 2,
        "req_time_missing": 2, "run_exceeds_request": 1, "submit_out_of_order": 0}
    assert sample.status_counts == {"COMPLETED": 5, "TIMEOUT": 1, "CANCELLED": 2, "FAILED": 1,
                                    "NODE_FAIL": 1, "OUT_OF_MEMORY": 1, "PENDING": 2,
                                    "RUNNING": 1}
    # Running at 930-990 s: 100 (8 CPUs), 101 (4) and 104 (32): the peak, 44.
    assert (sample.max_procs, sample.machine_source) == (44, PEAK_SOURCE.format(unit="cpus"))
    assert sample.machine_source.startswith("peak cpus allocated at once (GUESSED")


def test_status_choices_nodes_and_machine_size():
    done = read_sacct(SAMPLE, status="completed")
    assert done.features["slurm_id"].tolist() == ["100", "200_1", "200_2", "300", "109"]
    assert done.cleaning["status_dropped"] == 9
    two = read_sacct(SAMPLE, status=["completed", "TIMEOUT"])
    assert two.features["slurm_id"].tolist() == ["100", "101", "200_1", "200_2", "300", "109"]
    nodes = read_sacct(SAMPLE, unit="nodes")
    assert nodes.procs.tolist() == [1, 1, 2, 4, 1, 1, 1, 1, 3, 1]
    small = read_sacct(SAMPLE, max_procs=16)
    assert small.cleaning["procs_over_machine_dropped"] == 1        # 104, 32 CPUs
    assert (small.max_procs, small.machine_source) == (16, "")
    with pytest.raises(InputError, match="workload.params.status: expected all, completed"):
        read_sacct(SAMPLE, status="done")


def test_any_column_order_extra_columns_trailing_bar_and_gzip(tmp_path):
    text = SAMPLE.read_text().splitlines()
    header = text[0].split("|")
    order = list(reversed(range(len(header))))      # every column in reverse order
    rows = ["|".join(line.split("|")[i] for i in order) + "|" for line in text]  # --parsable
    p = tmp_path / "reversed.txt.gz"
    p.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    w = read_sacct(p)
    ref = read_sacct(SAMPLE)
    for col in ("submit", "run", "procs", "req_time", "mem", "user"):
        np.testing.assert_array_equal(getattr(w, col), getattr(ref, col))


def test_alloc_cpus_and_epoch_times(tmp_path):
    p = tmp_path / "old.txt"
    p.write_text("JobID|Submit|Start|End|Timelimit|AllocCPUS|State\n"
                 "5|1700000000|1700000100|1700000400|00:10:00|3|COMPLETED\n"
                 "6|1700000050|1700000400|1700000500|00:10:00|2|COMPLETED\n")
    w = read_sacct(p)
    assert w.submit.tolist() == [0, 50] and w.run.tolist() == [300, 100]
    assert w.features["wait"].tolist() == [100, 350] and w.procs.tolist() == [3, 2]
    assert w.user.tolist() == [-1, -1]   # no User column: unknown


def test_an_end_before_its_start_is_dropped_and_counted(tmp_path):
    # A clock set back: job 7 ended 60 s before it started. It was replayed as a
    # 0-second job, and alone in a file it was called "wider than the machine".
    p = tmp_path / "skew.txt"
    p.write_text("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
                 "5|1700000000|1700000100|1700000400|00:10:00|3|COMPLETED\n"
                 "7|1700000050|1700000400|1700000340|00:10:00|2|COMPLETED\n"
                 "8|1700000060|1700000400|1700000500|00:10:00|2|COMPLETED\n")
    w = read_sacct(p)
    assert w.features["slurm_id"].tolist() == ["5", "8"] and w.run.tolist() == [300, 100]
    assert w.cleaning["end_before_start_dropped"] == 1
    assert workload_warnings(w)[0] == "1 of 3 jobs dropped: 1 ending before they started"


@pytest.mark.parametrize("text, where, found", [
    ("JobID|Start|End|Timelimit|NCPUS|State\n", ":1: expected a header line",
     "no column Submit"),
    ("JobID|Submit|Start|End|Timelimit|State\n", ":1:", "no column NCPUS"),
    ("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
     "1|2025-01-01T00:00:00|2025-01-01T00:00:00|2025-01-01T01:00:00|1h|1|COMPLETED\n",
     ":2: expected a Slurm duration", "Timelimit '1h'"),
    ("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
     "1|2025-01-01T00:00:00|2025-01-01T00:00:00|2025-01-01T01:00:00|01:00:00|1\n",
     ":2: expected 7 fields", "got 6 fields"),
    ("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
     "1|yesterday|2025-01-01T00:00:00|2025-01-01T01:00:00|01:00:00|1|COMPLETED\n",
     ":2: expected Submit/Start/End", "yesterday"),
    ("JobID|Submit|Start|End|Timelimit|NCPUS|ReqMem|State\n"
     "1|2025-01-01T00:00:00|2025-01-01T00:00:00|2025-01-01T01:00:00|01:00:00|1|lots|COMPLETED\n",
     ":2: expected a Slurm memory", "ReqMem 'lots'"),
    ("\n\n", ": expected a header line", "an empty file"),
    ("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
     "1|2025-01-01T00:00:00|2025-01-01T00:00:00|2025-01-01T01:00:00|1-99:99:99|1|COMPLETED\n",
     ":2: expected a Slurm duration", "Timelimit '1-99:99:99'"),
    ("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
     "1|2025-01-01T00:00:00|2025-01-01T00:00:00|2025-01-01T01:00:00|01:00:00|-4|COMPLETED\n",
     ":2: expected a whole number from 0 within int64", "got NCPUS -4"),
    ("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
     "1|2025-01-01T00:00:00|2025-01-01T00:00:00|2025-01-01T01:00:00|01:00:00|"
     "99999999999999999999999|COMPLETED\n",
     ":2: expected a whole number from 0 within int64", "got NCPUS 99999999999999999999999"),
])
def test_bad_files_name_file_line_and_column(tmp_path, text, where, found):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises((InputError, WorkloadError)) as err:
        read_sacct(p)
    message = str(err.value)
    assert message.startswith(f"{p}{where}"), message
    assert found in message


# ----------------------------------------------------------------------------- runs and conversion


def _starts(folder: Path, policy: str) -> list:
    from cosim.records import read_jobs

    jobs = read_jobs(folder / policy / "jobs.parquet")
    return sorted(zip(jobs["submit"].tolist(), jobs["start"].tolist(), jobs["end"].tolist(),
                      jobs["procs"].tolist(), strict=True))


def test_slurm_scenario_runs_and_its_swf_conversion_replays_to_the_same_schedule(tmp_path,
                                                                                  capsys):
    # A contended machine (16 CPUs) so the schedule is not trivial.
    common = ["--set", "cluster.nodes=2", "--set", "cluster.cores_per_node=8", "--no-plots",
              "--quiet", "--policy", "fcfs+easy", "--policy", "sjf+conservative"]
    assert main(["run", str(ROOT / "scenarios" / "slurm.yaml"), "--set",
                 f"workload.path={SAMPLE}", "--out", str(tmp_path / "slurm"), *common]) == 0
    out = capsys.readouterr().out
    assert "fcfs+easy" in out and "sjf+conservative" in out
    assert main(["convert", str(SAMPLE), "--to", "swf", "--out", str(tmp_path / "s.swf"),
                 "--max-procs", "16"]) == 0
    assert "wrote 9 jobs to" in capsys.readouterr().out      # 104 (32 CPUs) is too wide
    swf = read_swf(tmp_path / "s.swf")
    assert swf.max_procs == 16 and len(swf) == 9
    assert swf.features["status"].tolist() == [1, 0, 5, 0, 0, 1, 1, 1, 1]
    assert main(["run", str(ROOT / "scenarios" / "swf.yaml"), "--set",
                 f"workload.path={tmp_path / 's.swf'}", "--out", str(tmp_path / "swf"),
                 *common]) == 0
    for policy in ("fcfs+easy", "sjf+conservative"):
        a, b = _starts(tmp_path / "slurm", policy), _starts(tmp_path / "swf", policy)
        assert a == b and len(a) == 9
    waits = [s - sub for sub, s, _, _ in _starts(tmp_path / "slurm", "fcfs+easy")]
    assert max(waits) > 0   # the machine was contended


def test_unset_machine_is_the_peak_and_the_swf_header_carries_it(tmp_path, capsys):
    assert main(["convert", str(SAMPLE), "--to", "swf", "--out", str(tmp_path / "s.swf")]) == 0
    text = (tmp_path / "s.swf").read_text()
    assert "; MaxProcs: 44" in text and "; Partition: 1 batch" in text
    assert "; Partition: 2 gpu" in text and "; Cleaning: steps_ignored 3" in text
    err = capsys.readouterr().err
    assert "machine size from the peak cpus allocated at once (GUESSED" in err and "(44)" in err
    for kind, path in (("slurm", SAMPLE), ("swf", tmp_path / "s.swf")):
        out = tmp_path / f"run-{kind}"
        assert main(["run", str(ROOT / "scenarios" / f"{kind}.yaml"), "--set",
                     f"workload.path={path}", "--out", str(out), "--no-plots", "--quiet"]) == 0
        resolved = (out / "scenario.yaml").read_text()
        assert "nodes: 44" in resolved and "cores_per_node: 1" in resolved
    summary = json.loads((tmp_path / "run-slurm" / "fcfs+easy" / "summary.json").read_text())
    assert summary["metrics"]["workload_status"]["PENDING"] == 2
    assert summary["metrics"]["machine_source"] == PEAK_SOURCE.format(unit="cpus")


def test_convert_errors(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "none.txt"), "--to", "swf"]) == 2
    assert "none.txt: expected sacct output" in capsys.readouterr().err
    p = tmp_path / "pending.txt"
    p.write_text("JobID|Submit|Start|End|Timelimit|NCPUS|State\n"
                 "1|2025-01-01T00:00:00|Unknown|Unknown|01:00:00|4|PENDING\n")
    assert main(["convert", str(p), "--to", "swf"]) == 2
    err = capsys.readouterr().err
    assert "expected at least one job to simulate, got no job left after cleaning " \
           "(1 dropped: 1 that never started (pending))" in err
    assert not (tmp_path / "pending.swf").exists()
    assert main(["run", str(ROOT / "scenarios" / "slurm.yaml"), "--set",
                 f"workload.path={p}", "--out", str(tmp_path / "o")]) == 2
    assert "no job left after cleaning" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text,names", [
    ("n[08-10,2],gpu1", ["n08", "n09", "n10", "n2", "gpu1"]),
    ("c1", ["c1"]),
    ("a[1-2]-ib,b", ["a1-ib", "a2-ib", "b"]),
    ("None assigned", []),
    ("", []),
])
def test_hostlists(text, names):
    assert parse_hostlist(text) == names


@pytest.mark.parametrize("text", ["n[1-", "n[3-1]", "n1]", "n[a-b]"])
def test_bad_hostlists(text):
    with pytest.raises(ValueError):
        parse_hostlist(text)


def test_machine_from_the_nodes_the_accounting_shows(tmp_path):
    # Three nodes appear (n01, n02, n03); the widest per-node use is 16 CPUs
    # (job 2: 32 CPUs on 2 nodes): the machine is 3 x 16 = 48 CPUs, although
    # at most 32 were ever in use at once.
    p = tmp_path / "s.txt"
    p.write_text("JobID|Submit|Start|End|Timelimit|NCPUS|NNodes|NodeList|State\n"
                 "1|0|0|100|00:10:00|8|1|n01|COMPLETED\n"
                 "2|0|100|200|00:10:00|32|2|n[02-03]|COMPLETED\n"
                 "3|0|300|400|00:10:00|4|1|n02|COMPLETED\n")
    w = read_sacct(p)
    assert (w.max_procs, w.max_nodes) == (48, 3)
    assert w.machine_source.startswith("nodes in NodeList (3 nodes x 16 cpus")
    assert (read_sacct(p, unit="nodes").max_procs, read_sacct(p, max_procs=64).max_procs) == (3, 64)
    p.write_text("JobID|Submit|Start|End|Timelimit|NCPUS|NNodes|NodeList|State\n"
                 "1|0|0|100|00:10:00|8|1|n[01|COMPLETED\n")
    with pytest.raises(WorkloadError, match=r"s.txt:2: .*NodeList"):
        read_sacct(p)
