"""``agents tune``'s output and processes: refused before any work, written whole or not at
all, workers that end with their parent (kill -9 included), a bounded worker count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.__main__ import main
from agents.tuning.cli import max_processes
from cosim.errors import CosimError
from cosim.evaluation import CLASSIC

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_tune import small_tune, trace  # noqa: E402


def missing_trace(tmp_path):
    """A scenario whose trace does not exist: an error about it means the work began."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: t\nworkload:\n  kind: swf\n  path: {tmp_path / 'absent.swf'}\n")
    return str(scenario)


@pytest.mark.parametrize("where", ["file", "proc", "foreign"])
def test_an_output_it_cannot_write_is_refused_before_any_work(where, tmp_path, capsys):
    out = {"file": tmp_path / "f.txt", "proc": Path("/proc/x"), "foreign": tmp_path / "d"}[where]
    if where == "file":
        out.write_text("mine\n")
    if where == "foreign":
        out.mkdir()
        (out / "notes.txt").write_text("mine\n")
    code = main(["tune", missing_trace(tmp_path), "--minutes", "10", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(out) in err[0], err
    assert "absent.swf" not in err[0]           # the output was checked first
    expected = {"file": "a file", "proc": "this user can write",
                "foreign": "not a tuned policy folder (no policy.json or results.json)"}[where]
    assert expected in err[0]
    if where == "file":
        assert out.read_text() == "mine\n"
    if where == "foreign":
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert not list(tmp_path.glob(".*partial*"))


def test_more_processes_than_the_bound_is_one_clear_line(tmp_path, capsys):
    too_many = max_processes() + 1
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--processes",
                 str(too_many), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: --processes: expected at most {max_processes()} (4 "
                                 "per CPU; each worker holds the windows and a simulation), "
                                 f"got {too_many}"]
    assert not (tmp_path / "o").exists()


def test_a_rerun_replaces_the_folder_whole_and_a_failed_one_leaves_it(tmp_path):
    out = tmp_path / "tuned"
    first = small_tune(trace(tmp_path, "a", 1.0), out)
    (out / "stale.txt").write_text("from before\n")
    small_tune(trace(tmp_path, "b", 3.0), out)
    assert sorted(p.name for p in out.iterdir()) == ["card.md", "policy.json", "results.json"]
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(CosimError):
        small_tune(missing_trace(tmp_path), out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not list(tmp_path.glob(".tuned.*"))       # no staging folder left behind
    assert _policy_matches(out) and first["chosen"]


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _policy_matches(out: Path) -> bool:
    """policy.json is the policy results.json says was chosen (not one of an earlier run)."""
    results = json.loads((out / "results.json").read_text())
    policy = json.loads((out / "policy.json").read_text())
    if policy["kind"] == "heuristic":
        return policy["name"] == results["chosen"]
    return policy == results["candidates"][results["chosen"]]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_kill_9_leaves_no_workers_and_no_mixed_folder(tmp_path):
    out = tmp_path / "tuned"
    small_tune(trace(tmp_path, "a", 1.0), out)
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents", "tune", trace(tmp_path, "b", 3.0), "--minutes", "5",
         "--window-jobs", "80", "--train-windows", "4", "--windows", "6", "--processes", "2",
         "--evaluation", "windows", "--out", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            workers = _children(proc.pid)
        assert len(workers) >= 2, "the tune started no workers"
        # while it searches, nothing of the new run is in the folder
        assert {p.name: p.read_bytes() for p in out.iterdir()} == old
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        gone_by = time.monotonic() + 20
        while any(_alive(w) for w in workers) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "workers outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
    # the folder is the old one, whole; the staging folder is cleaned up by the next run
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old and _policy_matches(out)
    small_tune(trace(tmp_path, "b", 3.0), out)
    assert _policy_matches(out) and not list(tmp_path.glob(".tuned.*"))


def test_the_bound_is_off_with_none_and_the_card_says_whether_the_policy_starves(tmp_path):
    from agents.tuning.card import model_card
    from agents.tuning.report import starvation_of

    s, out = trace(tmp_path, "d", 1.0), tmp_path / "o"
    assert main(["tune", s, "--minutes", "1", "--generations", "1", "--window-jobs", "80",
                 "--windows", "6", "--processes", "1", "--keep", "1", "--max-wait", "none",
                 "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert r["max_wait_bound"] is None and r["search_space"]["guard"] is None
    st = r["test"]["starvation"]
    chosen = r["chosen"]
    assert st["max_wait"] == r["test"]["max_wait"][chosen] and st["bound_ratio"] is None
    assert st["fcfs_easy_max_wait"] == r["test"]["max_wait"]["fcfs+easy"]
    assert st["starves"] == (st["max_wait"] > 604_800)
    card = (out / "card.md").read_text()
    assert "The bound: no bound (--max-wait none)." in card
    # every policy's row over the test span carries starvation beside the mean
    rows = r["test"]["span_rows"]
    assert set(rows) >= set(CLASSIC) | {chosen}
    assert rows[chosen]["wait_max"] >= rows[chosen]["wait_p99"] >= 0
    assert all((row["starved_1w"] > 0) == (row["wait_max"] > 604_800) for row in rows.values())
    assert "| policy | mean bsld | mean wait | max wait | p99 wait | waited > 1 day |" in card
    # A policy over the bound, or with a job queued over a week, is named as starving.
    policy = json.loads((out / "policy.json").read_text())
    r["test"]["starvation"] = starvation_of(3 * st["fcfs_easy_max_wait"] + 1,
                                            st["fcfs_easy_max_wait"], 2.0)
    assert f"**Starvation: {chosen} starves on the test span**" in model_card(policy, r)
    r["test"]["starvation"] = starvation_of(700_000.0, 10**7, None)
    assert "over a week" in model_card(policy, r)
    r["test"]["starvation"] = starvation_of(1000.0, 1000.0, 2.0)
    assert "Starvation: none on the test span" in model_card(policy, r)
