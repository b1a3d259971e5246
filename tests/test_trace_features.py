"""Trace fields as job features: SWF fields 13-16, sacct's account, partition, QOS and job
name, read with their labels, warned about once when absent, and carried into jobs.parquet."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cosim.__main__ import main
from cosim.records import read_jobs
from cosim.workloads.base import TRACE_FEATURES
from cosim.workloads.loading import workload_warnings
from cosim.workloads.slurm import read_sacct
from cosim.workloads.swf import read_swf, write_swf

ROOT = Path(__file__).resolve().parents[1]
SACCT = ROOT / "tests" / "data" / "sacct_small.txt"

SWF = """; UnixStartTime: 893466664
; TimeZoneString: US/Pacific
; MaxProcs: 8
1 0 1 100 2 -1 -1 2 200 -1 1 3 7 11 1 2 -1 -1
2 10 1 50 4 -1 -1 4 100 -1 1 4 8 -1 2 2 -1 -1
3 20 1 30 1 -1 -1 1 60 -1 1 3 7 12 1 1 -1 -1
"""


def test_swf_fields_13_to_16_become_features_and_write_back(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(SWF)
    w = read_swf(path)
    assert w.features["group"].tolist() == [7, 8, 7]
    assert w.features["executable"].tolist() == [11, -1, 12]
    assert w.features["queue"].tolist() == [1, 2, 1]
    assert w.features["partition"].tolist() == [2, 2, 1]
    assert w.epoch == 893466664.0 and w.timezone == "US/Pacific"
    assert w.shifted(10.0).epoch == 893466674.0
    back = read_swf(write_swf(w, tmp_path / "back.swf"))
    for name in ("group", "executable", "queue", "partition"):
        assert back.features[name].tolist() == w.features[name].tolist(), name
    assert back.epoch == w.epoch and back.timezone == w.timezone
    assert workload_warnings(w) == []


def test_a_field_unknown_for_every_job_is_named_once(tmp_path):
    lines = [line.split() for line in SWF.splitlines() if not line.startswith(";")]
    for fields in lines:
        fields[13] = "-1"     # no executable anywhere
        fields[12] = "-1"     # nor group
    path = tmp_path / "t.swf"
    path.write_text("".join(" ".join(f) + "\n" for f in lines))
    warnings = workload_warnings(read_swf(path))
    assert [line for line in warnings if "(unknown for every job)" in line] == [
        "no group, executable in the trace (unknown for every job): run-time predictors learn "
        "without them"]
    assert read_swf(path).epoch is None and read_swf(path).timezone == ""


def test_sacct_account_partition_qos_and_job_name_are_labelled_ids():
    w = read_sacct(SACCT)
    for name in ("partition", "account", "qos", "job_name"):
        assert name in w.features and w.features[name].dtype == np.int64
    names = [w.labels["job_name"][int(i)] for i in w.features["job_name"]]
    assert names[0] == "relax"
    assert set(w.labels["account"].values()) >= {"proj"}
    # Ids are 1..k in alphabetical order of the names.
    for name in ("partition", "account", "job_name"):
        labels = w.labels[name]
        assert sorted(labels) == list(range(1, len(labels) + 1))
        assert [labels[k] for k in sorted(labels)] == sorted(labels.values())
    # The file has no QOS column: said once, with nothing else of the kind.
    assert [line for line in workload_warnings(w) if "(unknown for every job)" in line] == [
        "no qos in the trace (unknown for every job): run-time predictors learn without them"]
    assert w.epoch is not None


def test_the_fields_and_their_names_reach_jobs_parquet(tmp_path):
    assert main(["run", str(ROOT / "scenarios" / "slurm.yaml"), "--set",
                 f"workload.path={SACCT}", "--out", str(tmp_path / "r"), "--no-plots",
                 "--quiet", "--policy", "fcfs+easy"]) == 0
    w = read_sacct(SACCT)
    jobs = read_jobs(tmp_path / "r" / "fcfs+easy" / "jobs.parquet")
    order = np.argsort(jobs["job_id"])
    by_id = {int(i): k for k, i in enumerate(w.job_id)}
    rows = [by_id[int(i)] for i in jobs["job_id"][order]]
    for name in ("partition", "account", "qos", "job_name"):
        assert jobs[name][order].tolist() == w.features[name][rows].tolist(), name
        assert jobs.labels[name] == w.labels[name]
    # sacct has no group, executable or queue: no such columns.
    assert [name for name in TRACE_FEATURES if name in jobs] == [
        "partition", "account", "qos", "job_name"]
