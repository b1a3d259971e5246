"""The reproductions table and the benchmarks' shared helpers (:mod:`agents.reproductions`)."""

from __future__ import annotations

import sys

from agents.reproductions import TABLE, command_cell, fmt_ci, mean_ci, row_cells, write_row


def test_mean_ci_is_the_seeded_bca_bootstrap():
    # BCa over [1..5]: the mean, an interval strictly inside the data's range
    # around it, the same numbers on every call (seeded resampling).
    m, lo, hi = mean_ci([1, 2, 3, 4, 5])
    assert m == 3.0 and 1.0 <= lo < 3.0 < hi <= 5.0
    assert mean_ci([1, 2, 3, 4, 5]) == (m, lo, hi)
    # A skewed sample: BCa's interval leans toward the long tail.
    m, lo, hi = mean_ci([1, 1, 1, 1, 1, 1, 1, 10])
    assert hi - m > m - lo
    assert fmt_ci([2.0, 2.0, 2.0]) == "2 [2, 2]"
    assert fmt_ci([7.0]) == "7"


def test_write_row_replaces_its_own_row_and_appends_new_ones(tmp_path):
    table = tmp_path / "t.md"
    table.write_text("# T\n\n| seed | figure |\n|---|---|\n| 000 A | old |\n| 004 B | keep |\n\ntail\n")
    write_row("000", ["000 A", "new | piped"], table)
    write_row("002", ["002 C", "added"], table)
    lines = table.read_text().splitlines()
    assert lines[4] == "| 000 A | new \\| piped |" and lines[5] == "| 004 B | keep |"
    assert lines[6] == "| 002 C | added |" and lines[-1] == "tail"


def test_command_cell_names_the_run_and_the_full_budget(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["x", "--minutes", "4", "--out", "/tmp/o", "--no-table"])
    assert command_cell("dras.py", 4) == ("`python benchmarks/dras.py --minutes 4` "
                                          "(full budget: `python benchmarks/dras.py`)")


def test_the_table_has_a_row_with_a_command_for_every_seed():
    rows = [row_cells(line) for line in TABLE.read_text().splitlines()
            if line.startswith("| 0")]
    assert [r[0].split()[0] for r in rows] == ["000", "001", "002", "003", "004"]
    header = [c for c in row_cells(next(line for line in TABLE.read_text().splitlines()
                                         if line.startswith("| seed")))]
    command = header.index("command")
    for r in rows:
        assert len(r) == len(header)
        script = "rlschert.py" if r[0].startswith("001") else None
        assert "python benchmarks/" in r[command] and (script is None or script in r[command])


def test_held_out_scores_are_the_runners_figures_read_once():
    import pytest

    from agents.reproductions import ROOT, held_out_scores
    from cosim.compose import run_policy
    from cosim.config import load_scenario
    from cosim.evaluation import ProtocolError
    from cosim.workloads.lublin import lublin
    from cosim.workloads.windows import window

    scenario = load_scenario(ROOT / "scenarios" / "lublin256.yaml")
    jobs = lublin(2 * 96, procs=256, seed=5)
    test = [window(jobs, 96, start=k * 96) for k in range(2)]
    keys = ("wait_mean", "queue_len_mean")
    protocol, scores = held_out_scores(scenario, test, ["fcfs+easy", "sjf+easy"], keys=keys)
    assert scores.names == ["fcfs+easy", "sjf+easy"]
    assert scores.keys == ("bsld_mean", "wait_mean", "wait_max", "queue_len_mean")
    for name in scores.names:
        for k, w in enumerate(test):
            summary = run_policy(scenario, name, None, workload=w)
            assert [float(scores.column(name, key)[k]) for key in scores.keys] == [
                float(summary[key]) for key in scores.keys]
    # the windows are the protocol's test set: a second read is refused
    with pytest.raises(ProtocolError, match="read"):
        protocol.test(["fcfs+easy"], whole=False)
