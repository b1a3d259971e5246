"""``agents tune --selection minimax``: the search scored on the whole past, a margin to ship."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_tune import trace

from agents.__main__ import main
from agents.tuning import tune
from agents.tuning.select import SHRINK
from cosim.config import load_scenario
from cosim.errors import InputError
from cosim.evaluation import CLASSIC, Evaluator, chronological_split
from cosim.policies import make_policy
from cosim.policies.priority import PriorityWeights
from cosim.workloads.loading import load_workload, resolve_machine

LUBLIN = Path(__file__).resolve().parent.parent / "scenarios" / "lublin256.yaml"


def minimax_tune(scenario, out, margin, **kw):
    return tune(scenario, [], 10.0, out, window_jobs=80, count=6, processes=1, generations=3,
                keep=3, selection="minimax", evaluation="running", margin=margin,
                echo=lambda *a: None, **kw)


def test_every_candidate_is_scored_on_every_period_of_the_past_by_hand(tmp_path):
    s = trace(tmp_path, "a", 1.0)
    r = minimax_tune(s, tmp_path / "a", 0.95)
    mm = r["minimax"]
    lead = mm["reference"]
    assert r["selection"] == "minimax" and r["search_space"]["fitness"] == "minimax"
    assert lead == min((h for h in CLASSIC), key=lambda h: r["validation_mean_bsld"][h])
    # each candidate's ratios, rerun here on the same chunks and validation span
    scenario = load_scenario(s, [])
    workload = load_workload(scenario)
    scenario = resolve_machine(scenario, workload)
    sp = chronological_split(workload, size=80, train_count=4, count=6, evaluation="running")
    shrunk = [f"shrunk{a:g}" for a in SHRINK]
    assert list(mm["period_ratios"])[3:] == shrunk and mm["shrink"] == list(SHRINK)
    names = list(mm["period_ratios"])[:3]
    assert names == [f"searched{i + 1}" for i in range(len(names))] and len(names) == 3
    pols = [PriorityWeights(tuple(d["weights"]), d["capacity"], d["backfill"], name=n,
                            backfill_weights=tuple(d["backfill_weights"]))
            for n, d in ((n, r["candidates"][n]) for n in names + shrunk)]
    with Evaluator(scenario, sp.train, 1) as ev:
        train = ev.evaluate([lead] + pols)[:, :, 0]
    with Evaluator(scenario, sp.validation, 1, slices=[sp.slices["validation"]]) as ev:
        val = ev.evaluate([lead] + pols)[:, :-1, 0].mean(axis=1)
    for i, n in enumerate(names + shrunk, start=1):
        by_hand = list(train[i] / train[0]) + [val[i] / val[0]]
        assert mm["period_ratios"][n] == pytest.approx(by_hand)
        assert mm["worst"][n] == pytest.approx(max(by_hand))
    # the candidates are the best points by that worst ratio, and the seed point (the
    # heuristic's own order) is among what was scored
    worst = [mm["worst"][n] for n in names]
    assert worst == sorted(worst) and worst[0] <= 1.0
    assert r["train_ratio_of_searched"] == pytest.approx(worst)
    # nothing below the margin: the heuristic stays
    assert min(mm["worst"].values()) >= 0.95 and r["chosen"] == lead
    card = (tmp_path / "a" / "card.md").read_text()
    assert "selection on the whole past (minimax)" in card and "below 0.95" in card


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_the_margin_alone_decides_what_ships_and_the_future_is_never_read(tmp_path):
    s = trace(tmp_path, "b", 1.0, seed=5)
    wide = minimax_tune(s, tmp_path / "wide", 2.0)
    tight = minimax_tune(s, tmp_path / "tight", 0.5)
    other_future = minimax_tune(trace(tmp_path, "c", 3.0, seed=5), tmp_path / "c", 2.0)
    # the same search in all three
    assert wide["minimax"]["period_ratios"] == tight["minimax"]["period_ratios"]
    assert wide["minimax"]["period_ratios"] == other_future["minimax"]["period_ratios"]
    assert wide["chosen"] == other_future["chosen"]
    assert wide["test"]["mean_bsld"] != other_future["test"]["mean_bsld"]
    # a margin above every candidate's worst ratio ships the smallest step toward the
    # best point; one below every ratio keeps the heuristic
    assert max(wide["minimax"]["worst"].values()) < 2.0
    assert wide["chosen"] == "shrunk0.25" and tight["chosen"] == tight["best_heuristic"]
    # a margin just above the lowest worst ratio: only the candidates at it pass, and the
    # smallest step among them ships (the point found, searched1, is the whole step)
    worst = wide["minimax"]["worst"]
    low = min(worst.values())
    mid = minimax_tune(s, tmp_path / "mid", low + 1e-9)
    steps = [k for k in (*(f"shrunk{a:g}" for a in SHRINK), "searched1") if worst[k] <= low]
    assert steps and mid["chosen"] == steps[0]
    make_policy(f"learned:{tmp_path / 'wide'}")


def test_minimax_needs_running_spans_and_a_margin_below_one(tmp_path, capsys):
    s = trace(tmp_path, "d", 1.0)
    with pytest.raises(InputError, match="--evaluation running"):
        tune(s, [], 1.0, tmp_path / "d", selection="minimax", evaluation="windows",
             echo=lambda *a: None)
    assert main(["tune", s, "--minutes", "1", "--out", str(tmp_path / "e"),
                 "--selection", "minimax", "--margin", "1.5"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--margin" in err[0] and "(0, 1]" in err[0]
    assert not (tmp_path / "e").exists()


def test_the_benchmark_applies_the_same_rule_by_hand():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import minimax_rows

    from agents.tuning.select import MINIMAX_MARGIN

    iv = {"test": {"mean_ratio": 0.8, "mean_ratio_ci": [0.7, 0.9], "wins": 60, "losses": 40}}
    heur = {"saf+easy": [10.0, 10.0, 10.0, 10.0, 20.0, 30.0]}

    def row(means):
        return {"heuristics": heur, "best_on_validation": "saf+easy", "intervals": iv,
                "found": {"means": means}}
    # worst past ratio 0.94 (chunk 4): below the margin, ships; the test column is not
    # part of the past
    ship = minimax_rows.outcome(row([9.0, 9.0, 9.0, 9.4, 18.0, 99.0]), MINIMAX_MARGIN)
    assert ship["worst_past"] == pytest.approx(0.94) and ship["shipped"]
    assert ship["test"] == 0.8
    # 0.96 on validation: kept, 1.000, whatever the point would have done on test
    kept = minimax_rows.outcome(row([9.0, 9.0, 9.0, 9.0, 19.2, 3.0]), MINIMAX_MARGIN)
    assert kept["worst_past"] == pytest.approx(0.96) and not kept["shipped"]
    assert kept["test"] == 1.0 and kept["point_test"] == 0.8
    assert len(minimax_rows.rows("design")) == 9 and len(minimax_rows.rows("holdout")) == 40
    assert minimax_rows.rows("holdout")[4][0] == "seed=105"
    fresh = minimax_rows.rows("fresh")
    assert len(fresh) == 40 and fresh[0][0] == "seed=201"
    assert fresh[0][1] != minimax_rows.rows("holdout")[0][1]
    fresh3 = minimax_rows.rows("fresh3")
    assert len(fresh3) == 40 and fresh3[0][0] == "seed=301" and fresh3[0][1] != fresh[0][1]


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_where_f1_leads_its_submit_time_term_joins_the_space_and_the_seed_is_f1(tmp_path):
    # A small Lublin trace on which F1+EASY leads validation (and one where SAF+EASY does):
    # with the term the seed point orders jobs as F1 does, so the search starts at 1.000
    # of its reference in every period of the past.
    def run(seed, name):
        return tune(str(LUBLIN), [f"seed={seed}", "workload.jobs=1200",
                                                 "workload.params.kind=interactive",
                                                 "workload.params.load=0.9"],
                    10.0, tmp_path / name, window_jobs=80, count=6, processes=1,
                    generations=1, keep=3, selection="minimax", evaluation="running",
                    margin=0.95, echo=lambda *a: None)
    f1 = run(3, "f1")
    assert f1["minimax"]["reference"] == "f1+easy"
    assert "log_submit" in f1["search_space"]["features"]
    assert f1["search_space"]["submit_time"].startswith("F1+EASY leads validation")
    assert [1.0] * 5 in f1["minimax"]["period_ratios"].values()     # the seed point, exactly
    assert "log_submit searched: F1+EASY leads" in (tmp_path / "f1" / "card.md").read_text()
    saf = run(1, "saf")
    assert saf["minimax"]["reference"] == "saf+easy"
    assert "log_submit" not in saf["search_space"]["features"]
    assert saf["search_space"]["submit_time"] is None


def test_the_backlog_switch_probe_changes_order_at_its_threshold_by_hand():
    # benchmarks/backlog_switch.py: SJF below backlog B = 1, FCFS from it on. R fills the
    # 10 cores until 100; A and B take the 10 cores and queue at 1 and 2. A 1000 s, B 100
    # s: B = log10(1 + 11000 / 3600 / 10) = 0.12, SJF, so B at 100 and A at 200. A 10^5
    # s, B 10^4 s: B = 1.50, FCFS, so A at 100 and B at 100,100.
    import sys

    import simpy
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import backlog_switch

    from cosim.model import build
    from cosim.policies import QueuePolicy
    from cosim.workloads.base import Workload

    tiny = load_scenario(str(LUBLIN), ["cluster.nodes=10"])
    order = backlog_switch.switch("sjf", "fcfs", 1.0, "switch-test")

    def starts(run):
        w = Workload.from_columns(submit=[0, 1, 2], run=run, procs=[10] * 3)
        env = simpy.Environment()
        sim = build(env, tiny, QueuePolicy(order, "easy"), workload=w, record=False)
        env.run(until=sim.finished)
        return {int(j.id): j.start for j in sim.scheduler.jobs}
    assert starts([100, 1000, 100]) == {1: 0, 2: 200, 3: 100}
    assert starts([100, 100_000, 10_000]) == {1: 0, 2: 100, 3: 100_100}


def test_the_backlog_switch_probe_refuses_an_unknown_heuristic_in_one_line(capsys):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import backlog_switch

    assert backlog_switch.main(["--pair", "saf,wfp3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --pair: 'wfp3', expected two of saf, sjf, f1, fcfs"


def test_the_shrink_rule_ships_the_smallest_step_toward_the_point_that_clears_the_margin():
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import minimax_rows

    heur = {"saf+easy": [10.0, 10.0, 10.0, 10.0, 20.0, 30.0]}
    row = {"heuristics": heur, "best_on_validation": "saf+easy",
           "found": {"means": [9.0, 9.0, 9.0, 9.0, 18.0, 33.0]},       # worst 0.90
           "shrunk": {"0.25": [9.8, 9.0, 9.0, 9.0, 18.0, 30.0],         # 0.98: not below
                      "0.5": [9.4, 9.0, 9.0, 9.0, 18.0, 27.0],          # 0.94: the first
                      "0.75": [9.2, 9.0, 9.0, 9.0, 18.0, 24.0]}}        # 0.92: larger a
    got = minimax_rows.shrink_outcome(row, 0.95)
    assert got["alpha"] == 0.5 and got["shipped"]
    assert got["worst_past"] == pytest.approx(0.94) and got["test"] == pytest.approx(0.9)
    # nothing below the margin: the heuristic stays, 1.000
    row["found"]["means"] = [9.9] * 4 + [19.8, 3.0]
    row["shrunk"] = {"0.5": [9.6] * 4 + [19.8, 3.0]}
    assert minimax_rows.shrink_outcome(row, 0.95) == {
        "alpha": None, "worst_past": None, "shipped": False, "test": 1.0}


@pytest.mark.parametrize("value", ["0.5,1", "half", "0"])
def test_hindsight_search_refuses_a_shrink_fraction_outside_zero_one_in_one_line(value, capsys):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import hindsight_search

    assert hindsight_search.main(["--shrink", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --shrink: expected fractions in (0, 1) separated by commas, "
                   f"got {value!r}")


def test_heavier_past_reads_a_row_on_its_own_past_and_on_a_compressed_one(tmp_path, capsys):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import heavier_past
    from hindsight_search import ROOT, Periods

    from cosim.evaluation import CLASSIC
    from cosim.policies.priority import FEATURES, PriorityWeights

    overrides = ["seed=5", "workload.jobs=1500"]
    per = Periods(str(ROOT / "scenarios" / "lublin256.yaml"), overrides, 1)
    w = [0.0] * len(FEATURES)
    w[FEATURES.index("log_est")], w[FEATURES.index("log_wait")] = 0.8, -0.6
    point = PriorityWeights(tuple(w), per.capacity, name="found")
    try:
        means = per.run([*CLASSIC, point], ("train", "validation"))["means"]
    finally:
        per.close()
    lead = CLASSIC[int(np.argmin(means[:len(CLASSIC), -2]))]
    row = {"trace": "lublin256.yaml " + " ".join(overrides), "best_on_validation": lead,
           "heuristics": dict(zip(CLASSIC, means[:len(CLASSIC)].tolist())),
           "found": {"weights": w, "backfill_weights": [], "means": means[-1].tolist()}}
    own = heavier_past.point_on_compressed_past(row, 1.0, 1)
    lead_row = means[CLASSIC.index(lead), :-1]
    assert own["ratios"] == (means[-1, :-1] / lead_row).tolist()     # its own past, exactly
    heavy = heavier_past.point_on_compressed_past(row, 0.5, 1)
    # the same jobs at twice the rate: FCFS+EASY's bsld is higher over the past as a whole
    # (not in every period: on chunks of 187 jobs, 311.3 on the first at the trace's own
    # rate against 38.1 at twice it, where the same jobs pack otherwise)
    assert sum(heavy["fcfs"]) > sum(own["fcfs"]) and heavy["ratios"] != own["ratios"]
    assert heavy["worst"] == max(heavy["ratios"])
    path = tmp_path / "row.json"
    path.write_text(json.dumps(row))
    assert heavier_past.main([str(path), "--factors", "1.5"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --factors: expected fractions in (0, 1] "
                                               "separated by commas, got '1.5'")
    (tmp_path / "torn.json").write_text("{")
    assert heavier_past.main([str(tmp_path / "torn.json")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'torn.json'}: expected a row "
                                              "written by minimax_rows.py")
