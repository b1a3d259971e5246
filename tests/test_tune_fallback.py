"""``agents tune --fallback``: the heuristic kept when no searched policy qualifies, chosen
on the training periods and validation together."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_tune import trace

from agents.tuning import tune
from agents.tuning.select import FALLBACK, fallback_heuristic
from cosim.evaluation import CLASSIC


def test_median_rule_by_hand():
    # Three heuristics, four training windows in two folds, then validation.
    # "a" has one catastrophic period and is best elsewhere; "b" is 1.2x everywhere;
    # "c" is best on validation only.
    train = np.array([[10., 10., 90., 90.],     # a: periods 10, 90
                      [12., 12., 12., 12.],     # b: 12, 12
                      [20., 20., 30., 30.]])    # c: 20, 30
    val = np.array([6., 6., 5.])
    r = fallback_heuristic(["a", "b", "c"], train, val, 2, "median")
    # period bests 10, 12, 5: a -> 1, 7.5, 1.2; b -> 1.2, 1, 1.2; c -> 2, 2.5, 1
    assert r["period_ratios"]["a"] == pytest.approx([1.0, 7.5, 1.2])
    assert r["period_ratios"]["b"] == pytest.approx([1.2, 1.0, 1.2])
    assert r["median_ratio"] == pytest.approx({"a": 1.2, "b": 1.2, "c": 2.0})
    # a and b tie on the median: the lower validation mean, then the first, decides
    assert r["heuristic"] == "a" and r["periods"] == 3 and r["rule"] == "median"
    # the best on validation alone would be c; a worst-period rule would be b
    assert fallback_heuristic(["a", "b", "c"], None, val, 2) == {
        "rule": "validation", "heuristic": "c"}
    val_b = np.array([6., 5.5, 5.])
    assert fallback_heuristic(["a", "b", "c"], train, val_b, 2, "median")["heuristic"] == "b"
    with pytest.raises(ValueError, match="fallback rule 'worst'; expected one of"):
        fallback_heuristic(["a"], train[:1], val[:1], 2, "worst")


def _tune(scenario, out, **kw):
    return tune(scenario, [], 10.0, out, window_jobs=80, train_windows=4, count=6,
                processes=1, generations=1, keep=1, evaluation="windows",
                echo=lambda *a: None, **kw)


def test_the_fallback_is_chosen_on_the_whole_past(tmp_path):
    from cosim.config import load_scenario
    from cosim.evaluation import chronological_split, run_window
    from cosim.workloads.loading import load_workload, resolve_machine

    # seed 1: WFP3+EASY leads validation, SJF+EASY is best over the past as a whole
    s = trace(tmp_path, "f", 1.0, seed=1)
    r = _tune(s, tmp_path / "median", fallback="median")
    v = _tune(s, tmp_path / "validation")
    assert FALLBACK == "validation" and r["fallback"]["rule"] == "median"
    best, fb = r["best_heuristic"], r["fallback"]["heuristic"]
    assert (best, fb) == ("wfp3+easy", "sjf+easy")
    # the reference of every ratio stays the best on validation
    assert v["best_heuristic"] == best and v["fallback"] == {"rule": "validation",
                                                             "heuristic": best}
    medians = r["fallback"]["median_ratio"]
    assert set(medians) == set(CLASSIC) and medians[fb] == min(medians.values())
    # nothing searched qualified in either run: each keeps its fallback
    assert (r["chosen"], v["chosen"]) == (fb, best)
    # the last period is validation: each heuristic's mean there over the best one's
    val = r["validation_mean_bsld"]
    assert r["fallback"]["period_ratios"][fb][-1] == pytest.approx(
        val[fb] / min(val[h] for h in CLASSIC))
    # the first period: the first 1 of the 4 training windows (--folds 4), by hand
    scenario = load_scenario(s, [])
    workload = load_workload(scenario)
    scenario = resolve_machine(scenario, workload)
    sp = chronological_split(workload, size=80, train_count=4, count=6, evaluation="windows")
    first = {h: run_window(scenario, h, sp.train[0]).bsld_mean for h in CLASSIC}
    assert r["fallback"]["period_ratios"][fb][0] == pytest.approx(
        first[fb] / min(first.values()))
    # the test span is read once, after the choice, and the headline is against `best`
    assert r["test"]["against"][best]["mean_ratio"] == pytest.approx(
        r["test"]["mean_bsld"][fb] / r["test"]["mean_bsld"][best])
    card = (tmp_path / "median" / "card.md").read_text()
    assert f"the heuristic kept when no searched policy qualifies: {fb}" in card
    assert f"| {fb} (fallback) (chosen) |" in card
    assert "kept when no searched" not in (tmp_path / "validation" / "card.md").read_text()


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_the_command_line_passes_the_fallback(tmp_path, capsys):
    from agents.__main__ import main

    s = trace(tmp_path, "c", 1.0, seed=1)
    args = ["tune", s, "--minutes", "1", "--generations", "1", "--window-jobs", "80",
            "--windows", "6", "--train-windows", "4", "--evaluation", "windows",
            "--processes", "1", "--keep", "1"]
    assert main(args + ["--fallback", "median", "--out", str(tmp_path / "m")]) == 0
    r = json.loads((tmp_path / "m" / "results.json").read_text())
    assert r["fallback"]["rule"] == "median" and r["chosen"] == r["fallback"]["heuristic"]
    assert "selected on the whole past: sjf+easy" in capsys.readouterr().out
    assert main(args + ["--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "results.json").read_text())
    assert v["fallback"] == {"rule": "validation", "heuristic": v["best_heuristic"]}
    with pytest.raises(SystemExit) as bad:     # argparse's own one-line error
        main(args + ["--fallback", "worst", "--out", str(tmp_path / "w")])
    assert bad.value.code == 2
    assert "argument --fallback: invalid choice: 'worst'" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()
