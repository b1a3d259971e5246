"""The command line: a real run, the comparison table, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cosim.records import read_jobs

ROOT = Path(__file__).resolve().parents[1]


def cosim(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "cosim", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_run_compares_policies_and_writes_results(tmp_path):
    out = tmp_path / "res"
    proc = cosim("run", "scenarios/lublin256.yaml", "--policy", "fcfs+easy", "--policy",
                 "sjf+easy", "--policy", "f1+conservative", "--set", "workload.jobs=300",
                 "--out", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["policy", "jobs", "mean"]
    assert [ln.split()[0] for ln in lines[2:5]] == ["fcfs+easy", "sjf+easy", "f1+conservative"]
    comparison = json.loads((out / "comparison.json").read_text())
    names = [p["policy"] for p in comparison["policies"]]
    assert names == ["fcfs+easy", "sjf+easy", "f1+conservative"]
    for name in names:
        jobs = read_jobs(out / name / "jobs.parquet")
        assert len(jobs["job_id"]) == 300
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["metrics"]["jobs_finished"] == 300
        if name != "sjf+easy":   # SJF moves the EASY head when shorter jobs arrive
            assert summary["metrics"]["reservations_broken"] == 0
    assert (out / "report.html").exists() and (out / "scenario.yaml").exists()
    assert "jobs: 300" in (out / "scenario.yaml").read_text()


def test_same_seed_gives_byte_identical_jobs_parquet(tmp_path):
    def run(out):
        proc = cosim("run", "scenarios/lublin256.yaml", "--policy", "random+easy", "--set",
                     "workload.jobs=400", "--seed", "7", "--out", out, "--no-plots", "--quiet")
        assert proc.returncode == 0, proc.stderr
        return (out / "random+easy" / "jobs.parquet").read_bytes()

    a, b = run(tmp_path / "a"), run(tmp_path / "b")
    assert a == b
    other = cosim("run", "scenarios/lublin256.yaml", "--policy", "random+easy", "--set",
                  "workload.jobs=400", "--seed", "8", "--out", tmp_path / "c", "--no-plots",
                  "--quiet")
    assert other.returncode == 0, other.stderr
    assert (tmp_path / "c" / "random+easy" / "jobs.parquet").read_bytes() != a


def test_policies_lists_every_heuristic_and_backfill():
    proc = cosim("policies")
    assert proc.returncode == 0
    for name in ("fcfs", "sjf", "saf", "lcfs", "largest", "tetris", "random", "f1", "wfp3",
                 "unicef", "+easy", "+conservative", "+none", "+greedy"):
        assert name in proc.stdout


def test_validate_prints_the_resolved_scenario():
    proc = cosim("validate", "scenarios/deeprm.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "memory_per_node: 20" in proc.stdout and "# ok: 2000 jobs" in proc.stdout


@pytest.mark.parametrize("args, fragments", [
    (["--set", "workload.jbos=5"], ["workload.jbos", "unknown key 'jbos'", "did you mean 'jobs'?"]),
    (["--set", "cluster.nodes=many"], ["cluster.nodes", "'many'", "integer"]),
    (["--set", "cluster.nodes=-3"], ["cluster.nodes", "greater than 0", "-3"]),
    # numpy takes only non-negative seeds: these raised a traceback from the generator
    (["--set", "seed=-1"], ["lublin256.yaml:6: seed", "greater than or equal to 0", "-1"]),
    (["--seed", "-2"], ["--seed", "a whole number of 0 or more", "-2"]),
    (["--set", "predictor.train_seed=-3"], ["predictor.train_seed", "greater than or equal to 0"]),
    (["--policy", "sjf+eazy"], ["--policy", "'sjf+eazy'", "backfilling variant"]),
    (["--policy", "shortest"], ["--policy", "'shortest'", "fcfs"]),
    (["--set", "workload.params.procz=3"], ["workload.params.procz", "did you mean 'procs'?"]),
])
def test_bad_scenario_values_give_one_line_and_no_output(tmp_path, args, fragments):
    out = tmp_path / "out"
    proc = cosim("run", "scenarios/lublin256.yaml", *args, "--out", out, "--quiet")
    assert_one_line_error(proc, *fragments)
    assert not out.exists()


def test_missing_scenario_file(tmp_path):
    proc = cosim("run", tmp_path / "nope.yaml")
    assert_one_line_error(proc, "nope.yaml", "no such file")


def test_yaml_syntax_error_names_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkload:\n  kind: swf\n  path: [unclosed\n")
    proc = cosim("validate", bad)
    assert_one_line_error(proc, "bad.yaml:", "invalid YAML")


def test_unknown_key_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkload:\n  kind: lublin\n  jobs: 10\nclustr:\n  nodes: 4\n")
    proc = cosim("validate", bad)
    assert_one_line_error(proc, "bad.yaml:5: clustr", "did you mean 'cluster'?")


def test_malformed_swf_line_is_reported_with_file_and_line(tmp_path):
    trace = tmp_path / "t.swf"
    good = "1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
    trace.write_text("; MaxProcs: 4\n" + good + "2 5 0 ten 1 -1 -1 1 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    out = tmp_path / "out"
    proc = cosim("run", "scenarios/swf.yaml", "--set", f"workload.path={trace}", "--out", out)
    assert_one_line_error(proc, "t.swf:3", "ten")
    assert not out.exists()


def test_missing_trace_file(tmp_path):
    proc = cosim("run", "scenarios/swf.yaml", "--set", f"workload.path={tmp_path}/absent.swf",
                 "--out", tmp_path / "o")
    assert_one_line_error(proc, "absent.swf", "no such file")


def test_swf_scenario_without_a_path_says_how_to_give_one(tmp_path):
    proc = cosim("run", "scenarios/swf.yaml", "--out", tmp_path / "o", "--set", "workload.path=null")
    assert_one_line_error(proc, "workload.path", "--set workload.path=")


def test_bad_command_line_flag():
    proc = cosim("run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_trained_agent_is_just_another_policy(tmp_path):
    agent = tmp_path / "agent"
    train = subprocess.run([sys.executable, "-m", "agents", "train", "scenarios/lublin256.yaml",
                            "--algo", "ppo", "--steps", "256", "--out", str(agent), "--seed", "1"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert train.returncode == 0, train.stderr
    out = tmp_path / "res"
    proc = cosim("run", "scenarios/lublin256.yaml", "--policy", "fcfs+easy", "--policy",
                 f"rl:{agent}", "--set", "workload.jobs=200", "--out", out, "--quiet",
                 "--no-plots")
    assert proc.returncode == 0, proc.stderr
    rows = [ln.split()[0] for ln in proc.stdout.splitlines()[2:4]]
    assert rows == ["fcfs+easy", f"rl:{agent}"]
    comparison = json.loads((out / "comparison.json").read_text())
    sub = comparison["policies"][1]["dir"]
    assert "/" not in sub
    assert len(read_jobs(out / sub / "jobs.parquet")["job_id"]) == 200
    bad = cosim("run", "scenarios/lublin256.yaml", "--policy", f"rl:{tmp_path}/none", "--out",
                tmp_path / "x", "--quiet")
    assert_one_line_error(bad, "rl:", "checkpoint folder")
