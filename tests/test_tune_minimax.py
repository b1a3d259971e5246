"""``agents tune --selection minimax``: the search scored on the whole past, a margin to ship."""

from __future__ import annotations

from pathlib import Path

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
