"""What a run tells the user and leaves behind: warnings, the machine of a trace,
output folders replaced as a whole, progress on stderr."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from agents.__main__ import main as agents_main
from cosim.__main__ import main
from cosim.cli import run_command
from cosim.compose import default_out_dir, table
from cosim.compose import run as runner
from cosim.config import load_scenario
from cosim.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SWF = str(ROOT / "scenarios" / "swf.yaml")


def swf_line(jid, submit, run, procs, req=-1, status=1):
    return f"{jid} {submit} -1 {run} {procs} -1 -1 {procs} {req} -1 {status} 1 -1 -1 -1 -1 -1 -1"


def trace(tmp_path, header, lines, name="t.swf") -> Path:
    p = tmp_path / name
    p.write_text(header + "".join(ln + "\n" for ln in lines))
    return p


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# ----------------------------------------------------------------------------- warnings


def test_warning_block_on_stderr_table_alone_on_stdout(tmp_path, capsys):
    # 16 processors (header). Two jobs without a requested time, one too wide,
    # one with an unknown run time.
    p = trace(tmp_path, "; MaxProcs: 16\n", [
        swf_line(1, 0, 100, 4, 200), swf_line(2, 10, 50, 8), swf_line(3, 20, 30, 32, 60),
        swf_line(4, 30, -1, 2, 60), swf_line(5, 40, 70, 2)])
    code, out, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--out",
                             tmp_path / "o", "--no-plots")
    assert code == 0
    assert err.splitlines()[:3] == [
        f"warning: {p}:",
        "  2 of 5 jobs dropped: 1 with an unknown run time, 1 wider than the machine",
        "  2 of 3 jobs (67%) have no requested time: their estimate is their real run time, a "
        "perfect estimate no real scheduler has (set workload.estimates.model to gaussian or "
        "tsafrir for realistic ones)"]
    assert "warning:" not in out and out.splitlines()[0].startswith("policy")
    summary = json.loads((tmp_path / "o" / "fcfs+easy" / "summary.json").read_text())
    assert summary["metrics"]["workload_cleaning"]["req_time_missing"] == 2
    # replacing the estimates removes the perfect-estimate warning, not the drops
    code, out, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--out",
                             tmp_path / "o", "--no-plots", "--set",
                             "workload.estimates.model=gaussian")
    assert code == 0 and "dropped" in err and "no requested time" not in err
    # --quiet: no warnings, no progress
    code, out, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--out",
                             tmp_path / "o", "--no-plots", "--quiet")
    assert code == 0 and err == ""


def test_no_warning_for_a_clean_trace(tmp_path, capsys):
    # fields 13-16 (group, executable, queue, partition) known: nothing to say
    lines = [swf_line(1, 0, 10, 2, 20), swf_line(2, 5, 10, 4, 60)]
    lines = [ln.rsplit(" ", 6)[0] + " 3 7 1 1 -1 -1" for ln in lines]
    p = trace(tmp_path, "; MaxProcs: 8\n", lines)
    code, out, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--out",
                             tmp_path / "o", "--no-plots")
    assert code == 0 and err == ""


def test_a_trace_without_its_categorical_fields_says_so_once(tmp_path, capsys):
    p = trace(tmp_path, "; MaxProcs: 8\n", [swf_line(1, 0, 10, 2, 20), swf_line(2, 5, 10, 4, 60)])
    code, out, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--out",
                             tmp_path / "o", "--no-plots")
    assert code == 0
    assert err.count("no group, executable, queue, partition in the trace") == 1, err


def test_machine_from_the_trace_header_unless_the_scenario_sets_it(tmp_path, capsys):
    p = trace(tmp_path, "; MaxProcs: 16\n; MaxNodes: 2\n",
              [swf_line(1, 0, 10, 12, 20), swf_line(2, 1, 10, 8, 20)])
    code, _, _ = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--out",
                         tmp_path / "a", "--no-plots", "--quiet")
    assert code == 0
    resolved = (tmp_path / "a" / "scenario.yaml").read_text()
    assert "nodes: 2" in resolved and "cores_per_node: 8" in resolved
    summary = json.loads((tmp_path / "a" / "fcfs+easy" / "summary.json").read_text())
    assert summary["metrics"]["cores"] == 16 and summary["metrics"]["jobs_finished"] == 2
    # cores_per_node alone splits the header's processors into nodes of that size
    code, _, _ = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--set",
                         "cluster.cores_per_node=4", "--out", tmp_path / "b", "--no-plots",
                         "--quiet")
    assert "nodes: 4" in (tmp_path / "b" / "scenario.yaml").read_text()
    # an explicit size wins: 1 node x 8 cores drops the 12-processor job, and says so
    code, _, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--set",
                           "cluster.nodes=1", "--set", "cluster.cores_per_node=8", "--out",
                           tmp_path / "c", "--no-plots")
    assert code == 0 and "1 of 2 jobs dropped: 1 wider than the machine" in err
    # no header at all: the largest job, with a warning
    q = trace(tmp_path, "", [swf_line(1, 0, 10, 6, 20)], "bare.swf")
    code, _, err = run_cli(capsys, "validate", SWF, "--set", f"workload.path={q}")
    assert code == 0 and "machine size from the largest job (6)" in err


def test_generators_keep_their_default_machine():
    sc = load_scenario(ROOT / "scenarios" / "lublin256.yaml", ["workload.jobs=10"])
    from cosim.workloads.loading import load_workload, resolve_machine

    assert resolve_machine(sc, load_workload(sc)) is sc


def test_status_filter_and_empty_workload(tmp_path, capsys):
    p = trace(tmp_path, "; MaxProcs: 8\n", [swf_line(1, 0, 10, 2, 20, status=1),
                                           swf_line(2, 1, 10, 2, 20, status=0),
                                           swf_line(3, 2, 10, 2, 20, status=5)])
    code, out, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--set",
                             "workload.params.status=completed", "--out", tmp_path / "o",
                             "--no-plots")
    assert code == 0
    assert "2 of 3 jobs dropped: 2 with a status not kept (workload.params.status)" in err
    assert "status filter in force; statuses in the file: 1 failed (0), 1 completed (1), " \
           "1 cancelled (5)" in err
    assert out.splitlines()[2].split()[:2] == ["fcfs+easy", "1"]
    # a trace with no job is an error, and nothing is written
    empty = trace(tmp_path, "; MaxProcs: 8\n", [], "empty.swf")
    code, out, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={empty}", "--out",
                             tmp_path / "e")
    assert code == 2 and out == ""
    assert err == f"error: {empty}: expected at least one job to simulate, got no job in it\n"
    assert not (tmp_path / "e").exists()
    code, _, err = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--set",
                           "workload.params.status=[7]", "--out", tmp_path / "e")
    assert code == 2 and "no job left after cleaning (3 dropped: 3 with a status not kept" in err


# ----------------------------------------------------------------------------- output folders


def _lublin(capsys, out, *policies, jobs=120):
    args = ["run", ROOT / "scenarios" / "lublin256.yaml", "--set", f"workload.jobs={jobs}",
            "--out", out, "--quiet"]
    for p in policies:
        args += ["--policy", p]
    code, stdout, err = run_cli(capsys, *args)
    assert code == 0, err
    return stdout


def test_a_rerun_replaces_the_whole_folder(tmp_path, capsys):
    out = tmp_path / "res"
    _lublin(capsys, out, "fcfs+easy", "sjf+easy")
    assert {p.name for p in out.iterdir()} >= {"fcfs+easy", "sjf+easy", "gantt_sjf_easy.png"}
    stdout = _lublin(capsys, out, "lcfs+easy")
    names = {p.name for p in out.iterdir()}
    assert "fcfs+easy" not in names and "sjf+easy" not in names      # no stale policy folders
    assert "gantt_sjf_easy.png" not in names and "gantt_lcfs_easy.png" in names
    assert "lcfs+easy" in names and "sjf+easy" not in (out / "report.html").read_text()
    assert stdout.splitlines()[-2:] == [f"results: {out}/", f"  report: {out / 'report.html'}"]
    # nothing is left beside it either
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


def test_killed_runs_leave_the_folder_as_it_was_and_are_cleaned_up(tmp_path, capsys,
                                                                  monkeypatch):
    out = tmp_path / "res"
    _lublin(capsys, out, "fcfs+easy")
    before = (out / "fcfs+easy" / "jobs.parquet").read_bytes()
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    real = runner.run_policy
    monkeypatch.setattr(runner, "run_policy", interrupted)
    code, _, err = run_cli(capsys, "run", ROOT / "scenarios" / "lublin256.yaml", "--set",
                           "workload.jobs=120", "--out", out, "--quiet", "--policy", "sjf+easy",
                           "--policy", "lcfs+easy")
    assert code == 130 and err == "interrupted\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]
    assert (out / "fcfs+easy" / "jobs.parquet").read_bytes() == before
    monkeypatch.undo()
    # A run killed hard (kill -9) leaves its staging folder, with .tmp files in it:
    # the next run into the same folder removes it.
    dead = tmp_path / ".res.partial-999999"
    (dead / "sjf+easy").mkdir(parents=True)
    (dead / "sjf+easy" / ".jobs.parquet.x1.tmp").write_bytes(b"half")
    _lublin(capsys, out, "sjf+easy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


def test_a_folder_that_is_not_a_results_folder_is_never_replaced(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    code, out, err = run_cli(capsys, "run", ROOT / "scenarios" / "lublin256.yaml", "--set",
                             "workload.jobs=50", "--out", mine, "--quiet")
    assert code == 2 and out == ""
    assert err.startswith(f"error: {mine}: expected a new or empty folder, or one written by "
                          "'cosim run'")
    assert (mine / "thesis.tex").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_default_folder_names_the_workload(tmp_path, capsys, monkeypatch):
    sc = load_scenario(SWF, ["workload.path=/data/RICC-2010-2.swf.gz"])
    assert default_out_dir(sc) == Path("results/swf-RICC-2010-2")
    sc = load_scenario(ROOT / "scenarios" / "slurm.yaml", ["workload.path=jobs.txt"])
    assert default_out_dir(sc) == Path("results/slurm-jobs")
    assert default_out_dir(load_scenario(ROOT / "scenarios" / "vasp.yaml")) == \
        Path("results/vasp")
    p = trace(tmp_path, "; MaxProcs: 8\n", [swf_line(1, 0, 10, 2, 20)], "mytrace.swf")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "run", SWF, "--set", f"workload.path={p}", "--no-plots",
                           "--quiet")
    assert code == 0 and (tmp_path / "results" / "swf-mytrace" / "comparison.json").exists()
    assert out.splitlines()[-1] == "results: results/swf-mytrace/"


# ----------------------------------------------------------------------------- feedback


def test_progress_goes_to_stderr_per_policy_with_jobs_done(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(table, "PROGRESS_DELAY_S", 0.0)   # as if each policy ran > 2 s
    code, out, err = run_cli(capsys, "run", ROOT / "scenarios" / "lublin256.yaml", "--set",
                             "workload.jobs=300", "--out", tmp_path / "o", "--no-plots",
                             "--policy", "fcfs+easy", "--policy", "sjf+easy")
    assert code == 0
    assert "fcfs+easy" in err and "sjf+easy" in err and "/300" in err and "job" in err
    assert "300/300" in err
    assert "/300" not in out and "\r" not in out        # the table stays clean
    # a short run with the real delay prints no bar at all
    monkeypatch.undo()
    code, out, err = run_cli(capsys, "run", ROOT / "scenarios" / "lublin256.yaml", "--set",
                             "workload.jobs=50", "--out", tmp_path / "p", "--no-plots")
    assert code == 0 and err == ""


def test_the_models_folder_is_named_on_stderr(tmp_path, capsys):
    from predictors.bundle import ensure_models

    models = ensure_models(tmp_path / "cache", jobs=200, seed=1, remaining=False, echo=None)
    code, out, err = run_cli(capsys, "run", ROOT / "scenarios" / "vasp.yaml", "--set",
                             "workload.jobs=60", "--set", f"predictor.models={models}",
                             "--policy", "sjf+easy@xgboost", "--out", tmp_path / "o",
                             "--no-plots")
    assert code == 0, err
    assert f"predictors: {models}" in err and "predictors:" not in out


def test_an_output_the_file_system_refuses_is_one_line_and_nothing_is_written(tmp_path,
                                                                             capsys):
    # Each raised FileExistsError or NotADirectoryError with a traceback.
    blocker = tmp_path / "trace.swf"
    blocker.write_text("not a folder\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    lublin = str(ROOT / "scenarios" / "lublin256.yaml")
    code, _, err = run_cli(capsys, "run", lublin, "--set", "workload.jobs=20", "--no-plots",
                           "--quiet", "--out", blocker / "res" / "a")
    assert code == 2 and err.strip() == (
        f"error: {blocker / 'res' / 'a'}: expected a results folder this user can write "
        f"(--out DIR), got a path under the file {blocker}")
    for command, expected in ((["train", lublin, "--steps", "64"],
                               "a path this user can read or write"),
                              (["tune", lublin, "--minutes", "1"],
                               "a tuned policy folder this user can write (--out DIR)")):
        assert agents_main([*command, "--out", str(blocker / "o")]) == 2
        assert capsys.readouterr().err.strip() == (
            f"error: {blocker / 'o'}: expected {expected}, got a path under the file {blocker}")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # Elsewhere the system's reason is quoted, with the path it refused when that is another.
    read_only = OSError(errno.EROFS, "Read-only file system", str(tmp_path / ".o.partial-1"))
    assert str(InputError.from_os_error(read_only, tmp_path / "o")) == (
        f"{tmp_path / 'o'}: expected a path this user can read or write, got Read-only file "
        f"system ({tmp_path / '.o.partial-1'})")

    def broken(argv):
        raise OSError("no path")
    with pytest.raises(OSError):   # an OSError naming no path is a bug: it keeps its traceback
        run_command(broken, [])
