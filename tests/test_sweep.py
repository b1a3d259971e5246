"""Studies (python -m cosim sweep): validation, plans, runs on Ray and in process, resume,
failures, the table and the bootstrap intervals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cosim.__main__ import main
from cosim.compose import run_policy
from cosim.config import load_scenario
from cosim.errors import InputError
from cosim.records import read_jobs
from cosim.studies import plan_study, run_study

ROOT = Path(__file__).resolve().parents[1]
LUBLIN = ROOT / "scenarios" / "lublin256.yaml"
SWF_LINE = "{i} {submit} 0 {run} {procs} -1 -1 {procs} {run} -1 1 1 1 -1 1 -1 -1 -1\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def study_file(tmp_path: Path, body: str, name: str = "study.yaml") -> Path:
    return write(tmp_path / name, f"scenario: {LUBLIN}\n{body}")


def swf(path: Path, jobs: int, bad_line: int | None = None) -> Path:
    rng = np.random.default_rng(jobs)
    lines = []
    for i in range(1, jobs + 1):
        if i == bad_line:
            lines.append(f"{i} abc\n")
            continue
        lines.append(SWF_LINE.format(i=i, submit=i * 30, run=int(rng.integers(10, 600)),
                                     procs=int(rng.integers(1, 9))))
    path.write_text("".join(lines))
    return path


# -- validation --------------------------------------------------------------------------
BAD = [
    ("polices: [fcfs+easy]\n",
     ["study.yaml:2: polices: expected one of name, description, scenario, policies",
      "got unknown key 'polices'; did you mean 'policies'?"]),
    ("set: {workload.jbos: 5}\n",
     ["study.yaml:2: set.workload.jbos: expected one of kind, path, jobs",
      "got unknown key 'jbos'; did you mean 'jobs'?"]),
    ("grid:\n  cluster.nodes: [64, -1]\n",
     ["study.yaml:3: grid.cluster.nodes[1]: expected greater than 0, got -1"]),
    ("set:\n  workload: {estimates: {model: tsafri}}\n",
     ["study.yaml:3: set.workload.estimates.model: expected 'trace', 'exact', 'gaussian' or "
      "'tsafrir', got 'tsafri'"]),
    ("policies: [fcfs+easy, sjf+esay]\n",
     ["study.yaml:2: policies[1]", "sjf+esay"]),
    ("seeds: [1, 2, 1]\n", ["study.yaml:2: seeds: expected distinct seeds, got seed 1 twice"]),
    ("seeds: {start: 1, cout: 3}\n", ["study.yaml:2: seeds.cout: expected one of start, count, "
                                     "got unknown key 'cout'; did you mean 'count'?"]),
    ("seeds: [1, two]\n", ["study.yaml:2: seeds[1]: expected a valid integer, got 'two'"]),
    ("seeds: abc\n", ["study.yaml:2: seeds: expected a list of seeds or {start: N, count: M}"]),
    # numpy seeds only non-negative integers: a negative one raised a traceback in the run
    ("seeds: [3, -1]\n", ["study.yaml:2: seeds[1]: expected greater than or equal to 0, got -1"]),
    ("set: {seed: 3}\n", ["set.seed: expected the seeds key"]),
    ("grid: {workload.jobs: []}\n", ["grid.workload.jobs: expected at least one value"]),
    ("set: {workload.jobs: 10}\ngrid: {workload.jobs: [20]}\n",
     ["grid.workload.jobs: expected it in one of them, got 'workload.jobs' in both set and grid"]),
    ("grid: {train.args.lr: [0.1]}\n", ["train.* keys need a train section"]),
    ("policies: [fcfs]\ntrain: {algo: ppo}\n", ["study.yaml:3: train: expected one of them"]),
    ("policies: [fcfs\n", ["study.yaml", "invalid YAML"]),
    ("train: {args: {lr: 0.1, ent_cof: 0.1}}\n",
     ["study.yaml:2: train.args.ent_cof: expected a field of Args, got unknown key 'ent_cof'; "
      "did you mean 'ent_coef'?"]),
    ("train: {args: {seed: 3}}\n", ["train.args.seed", "the seeds key"]),
    ("train: {algo: ppo, envs: {}}\n", ["train.envs: expected one of algo, env, args, got "
                                        "unknown key 'envs'; did you mean 'env'?"]),
    ("train: {env: {window: [0, 0]}}\n", ["train.env.window", "M_head + M_tail >= 1"]),
    ("grid: {train.args.lr: [0.001, -1.0]}\ntrain: {algo: ppo}\n",
     ["study.yaml:2: grid.train.args.lr: expected a positive number, got -1.0"]),
]


@pytest.mark.parametrize("body,fragments", BAD, ids=[b[0].split(":")[0] + str(i)
                                                     for i, b in enumerate(BAD)])
def test_a_bad_study_is_one_line_naming_the_key(tmp_path, capsys, body, fragments):
    path = study_file(tmp_path, body)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in err[0], err[0]
    assert not out.exists()     # nothing written, nothing run


def test_missing_files_are_named(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: expected a study YAML file, got no such file" in capsys.readouterr().err
    write(tmp_path / "s.yaml", "scenario: missing.yaml\n")
    assert main(["sweep", str(tmp_path / "s.yaml")]) == 2
    assert "s.yaml:1: scenario: expected a scenario file" in capsys.readouterr().err
    # An error in the scenario file itself names the scenario file and its line.
    write(tmp_path / "sc.yaml", "workload: {kind: lublin, jobs: 10}\nclustr: {nodes: 4}\n")
    write(tmp_path / "s2.yaml", "scenario: sc.yaml\n")
    assert main(["sweep", str(tmp_path / "s2.yaml")]) == 2
    assert "sc.yaml:2: clustr: expected one of" in capsys.readouterr().err


# -- plans ---------------------------------------------------------------------------------
def test_plan_has_every_combination_with_stable_folders(tmp_path):
    path = study_file(tmp_path, """
policies: [fcfs+easy, sjf]
seeds: {start: 5, count: 2}
set: {workload.jobs: 100}
grid:
  workload.estimates.model: [exact, tsafrir]
  cluster.nodes: [64, 128, 256]
""")
    plan = plan_study(path, tmp_path / "out")
    assert len(plan.runs) == 2 * 2 * 2 * 3
    assert plan.seeds == [5, 6] and plan.policies == ["fcfs+easy", "sjf"]
    assert plan.keys == ["workload.jobs", "workload.estimates.model", "cluster.nodes"]
    assert [label for label, _ in plan.settings][:3] == [
        "model=exact,nodes=64", "model=exact,nodes=128", "model=exact,nodes=256"]
    run = plan.runs[-1]
    assert (run.setting, run.seed, run.policy) == ("model=tsafrir,nodes=256", 6, "sjf")
    assert run.scenario["seed"] == 6 and run.scenario["cluster"]["nodes"] == 256
    assert run.scenario["workload"]["jobs"] == 100
    assert run.scenario["workload"]["estimates"]["model"] == "tsafrir"
    assert run.values == {"workload.jobs": 100, "workload.estimates.model": "tsafrir",
                          "cluster.nodes": 256}
    assert run.out_dir.endswith("out/runs/model=tsafrir,nodes=256/seed-6/sjf")
    assert len({r.digest for r in plan.runs}) == len(plan.runs)
    # The same study plans the same digests; another override changes them.
    assert [r.digest for r in plan_study(path, tmp_path / "out").runs] == [
        r.digest for r in plan.runs]
    write(path, path.read_text().replace("jobs: 100", "jobs: 101"))
    assert not {r.digest for r in plan_study(path).runs} & {r.digest for r in plan.runs}


def test_defaults_come_from_the_scenario(tmp_path):
    plan = plan_study(study_file(tmp_path, "name: mine\n"))
    scenario = load_scenario(LUBLIN)
    assert plan.policies == list(scenario.scheduler.policies)
    assert plan.seeds == [scenario.seed] and plan.settings == [("base", {})]
    assert plan.out == Path("results") / "mine"


# -- runs ----------------------------------------------------------------------------------
SMALL = """
policies: [fcfs+easy, sjf+easy]
seeds: [1, 2]
set: {workload.jobs: 300}
grid:
  workload.estimates.model: [exact, tsafrir]
"""


def read_table(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_serial_sweep_writes_runs_table_and_report(tmp_path, capsys):
    out = tmp_path / "out"
    path = study_file(tmp_path, SMALL)
    assert main(["sweep", str(path), "--out", str(out), "--serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "8 runs (2 policies x 2 seeds x 2 settings); 0 finished earlier, 8 to run" in text
    assert "setting model=tsafrir" in text and "bsld_mean (95% CI)" in text
    rows = read_table(out / "study.parquet")
    assert len(rows) == 8
    assert list(rows[0])[:9] == ["setting", "policy", "seed", "workload.jobs",
                                 "workload.estimates.model", "status", "error", "run_seconds",
                                 "dir"]
    assert {(r["setting"], r["policy"], r["seed"]) for r in rows} == {
        (f"model={m}", p, s) for m in ("exact", "tsafrir") for p in ("fcfs+easy", "sjf+easy")
        for s in (1, 2)}
    # A run is exactly `python -m cosim run` of that seed and setting.
    row = next(r for r in rows if r["setting"] == "model=tsafrir" and r["seed"] == 2
               and r["policy"] == "sjf+easy")
    scenario = load_scenario(LUBLIN, ["workload.jobs=300", "workload.estimates.model=tsafrir",
                                      "seed=2"])
    direct = run_policy(scenario, "sjf+easy", tmp_path / "direct")
    assert row["bsld_mean"] == direct["bsld_mean"] and row["wait_max"] == direct["wait_max"]
    ours = read_jobs(out / row["dir"] / "jobs.parquet")
    theirs = read_jobs(tmp_path / "direct" / "jobs.parquet")
    for col in ("job_id", "submit", "start", "end", "procs"):
        np.testing.assert_array_equal(ours[col], theirs[col])
    group = (out / row["dir"]).parent
    comparison = json.loads((group / "comparison.json").read_text())
    assert [p["policy"] for p in comparison["policies"]] == ["fcfs+easy", "sjf+easy"]
    assert "seed: 2" in (group / "scenario.yaml").read_text()
    report = json.loads((out / "report.json").read_text())
    stat = next(s for s in report["rows"] if s["setting"] == "model=exact"
                and s["policy"] == "sjf+easy" and s["metric"] == "bsld_mean")
    vals = [r["bsld_mean"] for r in rows if r["setting"] == "model=exact"
            and r["policy"] == "sjf+easy"]
    base = [r["bsld_mean"] for r in rows if r["setting"] == "model=exact"
            and r["policy"] == "fcfs+easy"]
    assert stat["n"] == 2 and stat["mean"] == pytest.approx(np.mean(vals))
    assert stat["diff_mean"] == pytest.approx(np.mean(vals) - np.mean(base))
    assert (out / "report.html").exists() and (out / "metric_bsld_mean.png").exists()
    assert "study.yaml" in os.listdir(out)


def test_sweep_on_ray_gives_the_serial_results(tmp_path, ray_cluster):
    path = study_file(tmp_path, SMALL)
    assert run_study(path, out=tmp_path / "serial", serial=True, quiet=True, echo=None) == 0
    lines = []
    assert run_study(path, out=tmp_path / "ray", quiet=True, echo=lines.append) == 0
    assert "8 to run on a local Ray (2 CPUs, 2 at once)" in lines[0]
    a, b = read_table(tmp_path / "serial" / "study.parquet"), read_table(
        tmp_path / "ray" / "study.parquet")
    timing = {"run_seconds", "wall_seconds", "jobs_per_second"}
    assert [{k: v for k, v in r.items() if k not in timing} for r in a] == [
        {k: v for k, v in r.items() if k not in timing} for r in b]
    assert ray_cluster.ray.is_initialized()      # the sweep used the test's Ray and left it up


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path, ray_cluster):
    good, bad = swf(tmp_path / "good.swf", 40), swf(tmp_path / "bad.swf", 40, bad_line=7)
    write(tmp_path / "sc.yaml", "cluster: {nodes: 16}\nworkload: {kind: swf}\n")
    path = write(tmp_path / "study.yaml", f"""scenario: sc.yaml
policies: [fcfs+easy, sjf+easy]
grid:
  workload.path: [{good}, {bad}]
""")
    lines = []
    assert run_study(path, out=tmp_path / "out", quiet=True, echo=lines.append) == 1
    rows = read_table(tmp_path / "out" / "study.parquet")
    assert [r["status"] for r in rows] == ["ok", "ok", "error", "error"]
    assert rows[2]["error"] == (f"{bad}:7: expected 18 numeric fields per job line, "
                                "got 2 fields in '7 abc'")
    assert np.isnan(rows[2]["bsld_mean"]) and rows[0]["jobs_finished"] == 40
    record = json.loads((tmp_path / "out" / rows[2]["dir"] / "run.json").read_text())
    assert record["status"] == "error" and record["error"] == rows[2]["error"]
    assert any(line.startswith("failed: runs/path=") for line in lines)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Failed runs" in html and "expected 18 numeric fields" in html
    # Once the input is fixed, a rerun redoes only the failed runs.
    swf(bad, 40)
    lines = []
    assert run_study(path, out=tmp_path / "out", quiet=True, echo=lines.append) == 0
    assert "2 finished earlier, 2 to run" in lines[0]


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_an_interrupted_study_finishes_only_the_missing_runs(tmp_path, ray_cluster):
    # Small runs first, then large ones (about a second each): interrupt the
    # sweep (Ctrl-C) once the small ones are done, then run it again on Ray.
    path = study_file(tmp_path, """
policies: [fcfs+easy, sjf+easy]
seeds: [1, 2]
grid:
  workload.jobs: [200, 15000]
""")
    out = tmp_path / "out"
    # A test suite started as a background job inherits SIGINT ignored, and so
    # would the sweep: give it the default handler, as a terminal's Ctrl-C meets.
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "sweep", str(path), "--out",
                             str(out), "--serial", "--quiet"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def finished():
        return sorted(p for p in out.glob("runs/*/*/*/run.json")
                      if json.loads(p.read_text() or "{}").get("status") == "ok")

    deadline = time.monotonic() + 60
    while len(finished()) < 4 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: 4 of 8 runs finished; run the same command again" in err
    done = {p: (p.stat().st_mtime_ns, p.read_text()) for p in finished()}
    assert len(done) == 4 and all("jobs=200" in str(p) for p in done)
    assert not (out / "study.parquet").exists()      # no table of a partial study
    lines = []
    assert run_study(path, out=out, quiet=True, echo=lines.append) == 0
    assert "8 runs (2 policies x 2 seeds x 2 settings); 4 finished earlier, 4 to run" in lines[0]
    assert {p: (p.stat().st_mtime_ns, p.read_text()) for p in done} == done   # untouched
    rows = read_table(out / "study.parquet")
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    assert sorted({r["jobs_finished"] for r in rows}) == [200, 15000]


def test_a_changed_study_redoes_the_changed_runs_only(tmp_path):
    path = study_file(tmp_path, "policies: [fcfs+easy]\nseeds: [1, 2]\nset: {workload.jobs: 200}\n")
    out = tmp_path / "out"
    assert run_study(path, out=out, serial=True, quiet=True, echo=None) == 0
    write(path, path.read_text().replace("seeds: [1, 2]", "seeds: [1, 2, 3]"))
    lines = []
    assert run_study(path, out=out, serial=True, quiet=True, echo=lines.append) == 0
    assert "2 finished earlier, 1 to run" in lines[0]
    write(path, path.read_text().replace("jobs: 200", "jobs: 250"))
    lines = []
    assert run_study(path, out=out, serial=True, quiet=True, echo=lines.append) == 0
    assert "0 finished earlier, 3 to run" in lines[0]
    assert {r["jobs_finished"] for r in read_table(out / "study.parquet")} == {250}


def test_an_unknown_metric_is_named_with_the_nearest(tmp_path):
    path = study_file(tmp_path, "policies: [fcfs]\nset: {workload.jobs: 50}\n"
                                "metrics: [bsld_mean, wait_mena]\n")
    with pytest.raises(InputError, match=r"metrics\[1\]: expected a numeric summary metric.*"
                                         r"got 'wait_mena'; did you mean 'wait_mean'\?"):
        run_study(path, out=tmp_path / "out", serial=True, quiet=True, echo=None)
    # refused while planning: no run ran, no folder was written
    assert not (tmp_path / "out").exists()


def test_every_number_of_a_run_summary_is_a_metric_a_study_may_name(tmp_path):
    from cosim.compose.run import summary_metric_names
    path = study_file(tmp_path, "policies: [fcfs+easy]\nset: {workload.jobs: 30, "
                                "faults.mtbf: 100000, faults.mttr: 600}\n")
    assert run_study(path, out=tmp_path / "out", serial=True, quiet=True, echo=None) == 0
    summary = json.loads(next((tmp_path / "out").rglob("summary.json")).read_text())["metrics"]
    numbers = {k for k, v in summary.items() if isinstance(v, int | float)
               and not isinstance(v, bool)}
    assert numbers <= summary_metric_names()


# -- training studies --------------------------------------------------------------------------
TRAIN = """
seeds: [1, 2]
set: {workload.jobs: 300}
train:
  algo: ppo
  env: {window: [4, 0], episode_jobs: 6}
  args: {total_steps: 64, num_steps: 32, num_minibatches: 2, update_epochs: 1}
grid:
  train.args.lr: [0.001, 0.003]
"""


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_a_training_study_runs_like_agents_train(tmp_path):
    from agents.__main__ import main as agents_main

    path = study_file(tmp_path, TRAIN)
    out = tmp_path / "out"
    assert run_study(path, out=out, serial=True, quiet=True, echo=None) == 0
    rows = read_table(out / "study.parquet")
    assert [(r["setting"], r["seed"], r["policy"]) for r in rows] == [
        ("lr=0.001", 1, "ppo"), ("lr=0.001", 2, "ppo"), ("lr=0.003", 1, "ppo"),
        ("lr=0.003", 2, "ppo")]
    assert all(r["status"] == "ok" and r["updates"] == 2 and r["global_step"] == 64 for r in rows)
    assert all(np.isfinite(r["mean_return"]) for r in rows)
    assert rows[0]["train.args.lr"] == 0.001
    # The run with lr=0.003, seed 2 is `python -m agents train` with the same options.
    cli = tmp_path / "cli"
    assert agents_main(["train", str(LUBLIN), "--set", "workload.jobs=300", "--set", "seed=2",
                        "--window", "4", "0", "--episode-jobs", "6", "--steps", "64",
                        "--seed", "2", "--arg", "num_steps=32", "--arg", "num_minibatches=2",
                        "--arg", "update_epochs=1", "--arg", "lr=0.003", "--out", str(cli),
                        "--quiet"]) == 0

    def curve(folder):
        lines = (folder / "curve.csv").read_text().splitlines()
        head = lines[0].split(",")
        keep = [i for i, h in enumerate(head) if h not in ("fps", "elapsed_s")]
        return [[row.split(",")[i] for i in keep] for row in lines]

    assert curve(out / rows[3]["dir"]) == curve(cli)
    assert (out / "learning_curves.png").exists()


def test_without_ray_a_study_runs_in_process_and_an_address_is_an_error(tmp_path):
    path = study_file(tmp_path, "policies: [fcfs]\nset: {workload.jobs: 50}\nplots: false\n")
    code = ("import sys; sys.modules['ray'] = None; from cosim.__main__ import main; "
            "sys.exit(main(sys.argv[1:]))")

    def sweep(*args):
        return subprocess.run([sys.executable, "-c", code, "sweep", str(path), "--quiet", *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)

    proc = sweep("--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "note: Ray is not installed" in proc.stderr
    assert "1 to run in this process" in proc.stdout
    proc = sweep("--out", str(tmp_path / "out2"), "--address", "auto")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: ray: expected Ray for python -m cosim sweep (pip install -e \".[ray]\"), "
        "got Ray is not installed"]


@pytest.mark.parametrize("name", ["study-lublin.yaml", "study-ppo.yaml"])
def test_the_shipped_studies_are_valid(name, capsys):
    assert main(["sweep", str(ROOT / "scenarios" / name), "--dry-run",
                 "--out", "/nonexistent/never-written"]) == 0
    assert "runs (" in capsys.readouterr().out


@pytest.mark.parametrize("address,found", [
    ("127.0.0.1:1", "got '127.0.0.1:1' (Connection refused)"),
    ("nohost", "expected auto or HOST:PORT of a Ray head node, got 'nohost'"),
])
def test_a_cluster_that_does_not_answer_is_one_line_and_nothing_is_written(tmp_path, address,
                                                                           found):
    path = study_file(tmp_path, "policies: [fcfs]\nset: {workload.jobs: 50}\n")
    proc = subprocess.run([sys.executable, "-m", "cosim", "sweep", str(path), "--address",
                           address, "--out", str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --address: ") and found in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_interrupting_a_ray_sweep_keeps_finished_runs(tmp_path):
    # The whole command as a user runs it: its own local Ray, Ctrl-C, then again.
    path = study_file(tmp_path, """
policies: [fcfs+easy, sjf+easy]
seeds: [1, 2, 3]
grid:
  workload.jobs: [200, 20000]
""")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "cosim", "sweep", str(path), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,   # the default SIGINT handler, as above
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and len(
            [p for p in out.glob("runs/*/*/*/run.json") if '"ok"' in p.read_text()]) < 6:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted: " in err
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    first = again.stdout.splitlines()[0]
    finished = int(first.split("; ")[1].split()[0])
    assert finished >= 6 and f"{12 - finished} to run" in first
    assert len(read_table(out / "study.parquet")) == 12
