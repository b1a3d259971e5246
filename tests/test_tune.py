"""``python -m agents tune``: a policy folder selected on validation, the test set read after."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from agents.__main__ import main
from agents.tuning import tune
from cosim.evaluation import CLASSIC
from cosim.policies import make_policy
from cosim.policies.priority import BACKLOG_FEATURES

FIELDS = 18


def write_swf(path, submit, run, procs, req=None, user=None):
    lines = ["; MaxProcs: 32", "; MaxNodes: 32"]
    req = run if req is None else req
    user = np.ones(len(run), dtype=int) if user is None else user
    for i, (s, r, p, q, u) in enumerate(zip(submit, run, procs, req, user), start=1):
        row = [i, int(s), 0, int(r), int(p), -1, -1, int(p), int(q), -1, 1, int(u), 1, 1, 1, 1,
               -1, -1]
        assert len(row) == FIELDS
        lines.append(" ".join(str(v) for v in row))
    path.write_text("\n".join(lines) + "\n")


def trace(tmp_path, name, test_scale, seed=7):
    rng = np.random.default_rng(seed)
    n = 1000
    submit = np.cumsum(rng.exponential(60, n))
    run = rng.lognormal(6, 1.5, n).clip(1, 50_000)
    procs = rng.choice([1, 2, 4, 8, 16, 32], n, p=[.3, .2, .2, .15, .1, .05])
    run[700:] *= test_scale           # the future differs; the past is the same
    path = tmp_path / f"{name}.swf"
    write_swf(path, submit, run, procs)
    scenario = tmp_path / f"{name}.yaml"
    scenario.write_text(f"name: t\nworkload:\n  kind: swf\n  path: {path}\n")
    return str(scenario)


def small_tune(scenario, out):
    return tune(scenario, [], 10.0, out, window_jobs=80, train_windows=4, count=6,
                processes=1, generations=2, keep=2, evaluation="windows", echo=lambda *a: None)


def test_selection_never_reads_the_test_span(tmp_path):
    # Two traces with the same past and different futures: the search and the
    # selection are identical (the test span is read once, after them); only
    # the test figures differ.
    a = small_tune(trace(tmp_path, "a", 1.0), tmp_path / "out_a")
    b = small_tune(trace(tmp_path, "b", 3.0), tmp_path / "out_b")
    assert a["validation_mean_bsld"] == b["validation_mean_bsld"]
    assert a["chosen"] == b["chosen"] and a["train_ratio_of_searched"] == b["train_ratio_of_searched"]
    assert a["test"]["mean_bsld"] != b["test"]["mean_bsld"]
    # The result is the fallback heuristic (chosen on the training periods and validation)
    # or a searched policy better than every heuristic on validation.
    v = a["validation_mean_bsld"]
    assert a["chosen"] == a["fallback"]["heuristic"] or v[a["chosen"]] < min(
        v[h] for h in CLASSIC)
    # The folder runs as learned:DIR and says what it is.
    out = tmp_path / "out_a"
    assert json.loads((out / "policy.json").read_text())["kind"] in ("priority", "heuristic")
    make_policy(f"learned:{out}")
    card = (out / "card.md").read_text()
    for part in ("## Data", "## Budget", "## Search space", "## Validation", "## Test"):
        assert part in card
    assert all(h in card for h in CLASSIC)
    assert "plans with: each job's request (`@estimate`)" in card and "overrun" in card
    # room in hindsight: the per-window best heuristic bounds the span's best one
    h = a["test"]["hindsight"]
    assert h["per_window_oracle_ratio"] <= h["best_heuristic_ratio"] <= 1.0
    assert h["best_heuristic"] in CLASSIC and "Room in hindsight" in card


def test_bad_budget_is_one_clear_line(tmp_path, capsys):
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "0", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --minutes: expected a positive number of minutes, got 0.0"]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("processes", ["0", "-2"])
def test_a_worker_count_below_one_is_one_clear_line(processes, tmp_path, capsys):
    # it used to run serially without a word (-2) or on every CPU (0)
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--processes", processes,
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: --processes: expected at least 1 (or leave it out: "
                                 f"every CPU available), got {processes}"]
    assert not (tmp_path / "o").exists()


def test_fitness_by_hand():
    from agents.tuning.space import fitness_of
    ref = np.array([10.0, 1.0])
    res = np.array([[5.0, 2.0],          # halves the heavy window, doubles the light one
                    [10.0, 1.0],
                    [np.nan, 1.0]])
    assert fitness_of(res, ref, "ratio").tolist() == [7.0 / 11.0, 1.0, 1e9]
    assert fitness_of(res, ref, "windows").tolist() == [1.25, 1.0, 1e9]
    # folds: windows 0-1 are fold 0, windows 2-3 fold 1; per fold the reference is
    # the heuristic best on that fold (row 1 on fold 0, row 0 on fold 1), and the
    # worst fold counts
    heur = np.array([[4.0, 4.0, 1.0, 1.0],
                     [2.0, 2.0, 3.0, 3.0]])
    cand = np.array([[2.0, 2.0, 1.0, 1.0],      # the best heuristic of each fold: 1
                     [4.0, 4.0, 1.0, 1.0],      # row 0 itself: 2x on fold 0
                     [1.0, 1.0, 1.5, 1.5],      # 0.5x on fold 0, 1.5x on fold 1
                     [1.0, 3.0, 1.0, 1.0]])     # the same mean on fold 0 as row 0: 1
    folds = np.array([0, 0, 1, 1])
    assert fitness_of(cand, heur, "folds", folds).tolist() == [1.0, 2.0, 1.5, 1.0]
    # one fold: the ratio to the best heuristic of all the windows
    assert fitness_of(cand, heur, "folds", np.zeros(4, dtype=int)).tolist() == [
        6.0 / 10.0, 10.0 / 10.0, 5.0 / 10.0, 6.0 / 10.0]


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_searched_backfill_order_is_written_and_runs(tmp_path):
    r = small_tune(trace(tmp_path, "a", 1.0), tmp_path / "out")
    assert r["search_space"]["backfill_order"] == "searched"
    policy = json.loads((tmp_path / "out" / "policy.json").read_text())
    if policy["kind"] == "priority":
        assert len(policy["backfill_weights"]) == len(policy["weights"])
    assert "backfill candidates tried in the order of a second" in \
        (tmp_path / "out" / "card.md").read_text()
    assert r["budget"]["generations"] == 2 and r["budget"]["cpu_seconds"] > 0


def test_the_shipped_ricc_policy_runs_and_says_what_it_was_selected_on():
    folder = "agents/pretrained/ricc-tuned"
    r = json.loads(open(f"{folder}/results.json").read())
    policy = json.loads(open(f"{folder}/policy.json").read())
    assert make_policy(f"learned:{folder}") is not None
    # Trained and selected on the first 70 % (train 0-50 %, validation 50-70 %);
    # tested on the rest, once.
    assert r["split"] == [0.5, 0.7] and r["spans"]["test"]["start"] == int(0.7 * r["workload"]["jobs"])
    chosen = r["chosen"]
    assert (policy.get("name") == chosen) if policy["kind"] == "heuristic" else chosen.startswith(
        ("searched", "cma-mean"))
    v = r["validation_mean_bsld"]
    assert v[chosen] <= min(v[h] for h in CLASSIC)


def test_a_searched_policy_needs_a_clear_validation_win(tmp_path):
    # With the interval rule a searched policy is chosen only when its validation
    # interval lies below 1; with the plain mean rule, the lowest mean wins.
    s = trace(tmp_path, "a", 1.0)
    for rule in ("interval", "mean"):
        r = tune(s, [], 10.0, tmp_path / rule, window_jobs=80, train_windows=4, count=6,
                 processes=1, generations=2, keep=2, selection=rule, evaluation="windows",
                 echo=lambda *a: None)
        v, ci, chosen = r["validation_mean_bsld"], r["validation_ratio_ci"], r["chosen"]
        rp, best = r["validation_replay"], r["best_heuristic"]
        assert set(ci) == set(v) - set(CLASSIC) and set(rp) == set(v)
        if rule == "mean":
            assert v[chosen] == min(v.values())
        elif chosen not in CLASSIC:
            assert ci[chosen][1] < 1.0 and rp[chosen] <= rp[best]
        else:
            assert all(ci[k][1] >= 1.0 or v[k] > v[chosen] or rp[k] > rp[best] for k in ci)


def test_spans_replayed_whole_are_one_run_of_every_job(tmp_path):
    # The validation and test spans, each run through once from an empty machine:
    # the figures equal one window of the whole span, every job measured.
    from cosim.config import load_scenario
    from cosim.evaluation import run_window, window_at
    from cosim.workloads.loading import load_workload, resolve_machine

    s = trace(tmp_path, "r", 1.0)
    r = small_tune(s, tmp_path / "out")
    sc = load_scenario(s, [])
    wl = load_workload(sc)
    sc = resolve_machine(sc, wl)
    for key, replay in (("validation", r["validation_replay"]), ("test", r["test"]["replay"])):
        span = r["spans"][key]
        whole = window_at(wl, span["start"], span["stop"] - span["start"])
        for name in ("fcfs+easy", "saf+easy"):
            assert replay[name] == run_window(sc, name, whole).bsld_mean
    assert r["chosen"] in r["test"]["replay"]
    card = (tmp_path / "out" / "card.md").read_text()
    assert "the span replayed whole" in card and "The test span replayed whole" in card


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_user_features_join_the_search_when_asked_or_when_requests_are_loose(tmp_path):
    # Exact requests (run = request): auto leaves the features out, and says why.
    scenario = trace(tmp_path, "u", 1.0)
    plain = small_tune(scenario, tmp_path / "plain")
    assert not {"log_user_pred", "log_user_accuracy"} & set(plain["search_space"]["features"])
    assert plain["search_space"]["user_features"].startswith("auto: off (100% of jobs name")
    assert "user-history features: auto: off" in (tmp_path / "plain" / "card.md").read_text()
    users = tune(scenario, [], 10.0, tmp_path / "users", window_jobs=80, train_windows=4,
                 count=6, processes=1, generations=2, keep=2, user_features="on",
                 evaluation="windows", echo=lambda *a: None)
    assert {"log_user_pred", "log_user_accuracy"} <= set(users["search_space"]["features"])
    card = (tmp_path / "users" / "card.md").read_text()
    assert "log_user_pred" in card and "Tsafrir" in card and "(on (asked))" in card
    make_policy(f"learned:{tmp_path / 'users'}")
    # Loose requests (every job asks for 10x its run time) from 5 named users: auto
    # searches them; off forces them out.
    rng = np.random.default_rng(3)
    n = 1000
    submit = np.cumsum(rng.exponential(60, n))
    run = rng.lognormal(6, 1.5, n).clip(1, 5_000)
    procs = rng.choice([1, 2, 4, 8, 16, 32], n)
    path = tmp_path / "loose.swf"
    write_swf(path, submit, run, procs, req=10 * run, user=rng.integers(1, 6, n))
    loose = tmp_path / "loose.yaml"
    loose.write_text(f"name: t\nworkload:\n  kind: swf\n  path: {path}\n")
    auto = small_tune(str(loose), tmp_path / "auto")
    assert {"log_user_pred", "log_user_accuracy"} <= set(auto["search_space"]["features"])
    assert auto["search_space"]["user_features"] == (
        "auto: on (100% of jobs name their user, 100% request more than 1.25x their run time)")
    off = tune(str(loose), [], 10.0, tmp_path / "off", window_jobs=80, train_windows=4,
               count=6, processes=1, generations=2, keep=2, user_features="off",
               evaluation="windows", echo=lambda *a: None)
    assert not {"log_user_pred", "log_user_accuracy"} & set(off["search_space"]["features"])


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_contention_filter_keeps_the_most_contended_training_windows(tmp_path):
    from cosim.config import load_scenario
    from cosim.evaluation import Evaluator, chronological_split, most_contended
    from cosim.workloads.loading import load_workload, resolve_machine

    s = trace(tmp_path, "c", 1.0)
    r = tune(s, [], 10.0, tmp_path / "c", window_jobs=80, train_windows=4, count=6,
             processes=1, generations=1, keep=2, train_filter="spread", train_pool=3,
             evaluation="windows", echo=lambda *a: None)
    f = r["train_filter"]
    assert (f["rule"], f["pool"], f["kept"], r["windows"]["train"]) == ("spread", 12, 4, 4)
    # The same pool, scored independently: the kept windows are its 4 of widest spread.
    sc = load_scenario(s, [])
    w = load_workload(sc)
    pool = chronological_split(w, size=80, train_count=12, count=6).train
    with Evaluator(resolve_machine(sc, w), pool) as ev:
        b = ev.evaluate(CLASSIC)[:, :, 0]
    assert f["kept_windows"] == most_contended(b, 4, "spread")
    card = (tmp_path / "c" / "card.md").read_text()
    assert "training windows filtered by contention: 4 kept of a pool of 12" in card
    # Validation is untouched by the filter: the same windows as without it.
    plain = tune(s, [], 10.0, tmp_path / "plain", window_jobs=80, train_windows=4, count=6,
                 processes=1, generations=1, keep=2, train_filter="none",
                 evaluation="windows", echo=lambda *a: None)
    assert plain["validation_mean_bsld"]["f1+easy"] == r["validation_mean_bsld"]["f1+easy"]
    assert plain["train_filter"] is None and plain["windows"]["train"] == 4


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_skip_replaces_only_the_near_optimal_windows(tmp_path):
    # The default rule keeps the evenly spaced windows where the heuristics differ
    # by more than 5 % and replaces only the others with the pool's most contended.
    from cosim.config import load_scenario
    from cosim.evaluation import Evaluator, contention_scores, window_starts
    from cosim.workloads.loading import load_workload, resolve_machine

    s = trace(tmp_path, "k", 1.0)
    r = small_tune(s, tmp_path / "k")
    f = r["train_filter"]
    assert f["rule"] == "skip" and f["kept"] == 4 and r["windows"]["train"] == 4
    sc = load_scenario(s, [])
    w = load_workload(sc)
    base = window_starts(80, 4, 0, 500)
    with Evaluator(resolve_machine(sc, w), [w.take(slice(a, a + 80)) for a in base]) as ev:
        score = contention_scores(ev.evaluate(CLASSIC)[:, :, 0])
    contended = [a for a, x in zip(base, score) if x > np.log(1.05)]
    assert set(contended) <= set(f["kept_starts"]) and f["unchanged"] >= len(contended)
    assert "training windows filtered by contention: 4 kept" in (tmp_path / "k" / "card.md").read_text()


def test_bad_train_pool_is_one_clear_line(tmp_path, capsys):
    assert main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--out", str(tmp_path / "o"),
                 "--train-pool", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--train-pool" in err and "at least 1" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_snapshots_join_validation_only_when_asked(tmp_path):
    from agents.tuning.space import checkpoints

    assert sorted(checkpoints(45)) == [5, 10, 20, 40] and checkpoints(4) == set()
    s = trace(tmp_path, "s", 1.0)
    r = tune(s, [], 10.0, tmp_path / "s", window_jobs=80, train_windows=4, count=6,
             processes=1, generations=5, keep=1, snapshots=True, train_filter="none",
             evaluation="windows", echo=lambda *a: None)
    assert r["snapshots"] == ["best@g5", "mean@g5"]
    # Each snapshot went to validation unless it is the same policy as a candidate.
    v = r["validation_mean_bsld"]
    assert "mean@g5" not in v or v["mean@g5"] != v["cma-mean"]
    assert "best@g5" not in v or v["best@g5"] != v["searched1"]
    assert "snapshots best@g5, mean@g5" in (tmp_path / "s" / "card.md").read_text()
    assert small_tune(s, tmp_path / "p")["snapshots"] == []


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_warm_windows_change_only_what_is_measured_and_are_carded(tmp_path, capsys):
    s = trace(tmp_path, "w", 1.0)
    cold = small_tune(s, tmp_path / "cold")
    warm = tune(s, [], 10.0, tmp_path / "warm", window_jobs=80, train_windows=4, count=6,
                processes=1, generations=2, keep=2, warmup=40, evaluation="windows",
                echo=lambda *a: None)
    assert cold["warmup_jobs"] == 0 and warm["warmup_jobs"] == 40
    # the same windows, now measured after 40 jobs of the same policy: other figures
    assert warm["validation_mean_bsld"] != cold["validation_mean_bsld"]
    # 6 windows of 80 side by side in 200 validation jobs would not fit: they overlap
    assert cold["bootstrap_blocks"]["validation"] > 1
    assert "after up to 40 warm-up jobs" in (tmp_path / "warm" / "card.md").read_text()
    assert main(["tune", s, "--minutes", "1", "--out", str(tmp_path / "o"), "--warmup", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --warmup: expected 0 or more jobs, or all, got -1"
    assert main(["tune", s, "--minutes", "1", "--out", str(tmp_path / "o"), "--warmup", "most"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --warmup: expected 0 or more jobs, or all, got 'most'"
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_train_batch_scores_each_generation_on_a_fresh_paired_draw(tmp_path, capsys):
    from cosim.config import load_scenario
    from cosim.evaluation import Evaluator, window_at
    from cosim.workloads.loading import load_workload

    s = trace(tmp_path, "b", 1.0)

    def run(out, batch):
        return tune(s, [], 10.0, tmp_path / out, window_jobs=80, train_windows=4, count=6,
                    processes=1, generations=3, keep=2, train_filter="none",
                    train_batch=batch, evaluation="windows", echo=lambda *a: None)

    full, every, half = run("full", 0), run("every", 4), run("half", 2)
    # a batch of all the windows is the plain search, generation by generation
    assert every["train_ratio_of_searched"] == full["train_ratio_of_searched"]
    assert every["search_space"]["train_batch"] is None
    # 3 generations of 6 candidates, each on 2 windows, not 4
    assert half["budget"]["window_evaluations"] == 3 * 6 * 2
    assert full["budget"]["window_evaluations"] == 3 * 6 * 4
    assert half["train_ratio_of_searched"] != full["train_ratio_of_searched"]
    assert "2 of 4 training windows, drawn afresh each generation" in (
        tmp_path / "half" / "card.md").read_text()
    # the evaluator runs the windows asked for, in the order asked
    sc = load_scenario(s, [])
    wl = load_workload(sc)
    wins = [window_at(wl, a, 80, 0, 0) for a in (0, 100, 200)]
    with Evaluator(sc, wins, 1) as ev:
        allw = ev.evaluate(["sjf+easy", "fcfs+easy"])
        some = ev.evaluate(["sjf+easy", "fcfs+easy"], only=[2, 0])
    assert some.shape == (2, 2, 3) and np.array_equal(some, allw[:, [2, 0]])
    assert main(["tune", s, "--minutes", "1", "--out", str(tmp_path / "o"),
                 "--train-batch", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --train-batch: expected 0 (all) or more windows, got -1"
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_fold_fitness_scores_the_worst_period_and_is_carded(tmp_path, capsys):
    from agents.tuning.space import fitness_of
    from cosim.config import load_scenario
    from cosim.evaluation import Evaluator, chronological_split
    from cosim.policies.priority import PriorityWeights
    from cosim.workloads.loading import load_workload, resolve_machine

    s = trace(tmp_path, "f", 1.0)
    r = tune(s, [], 10.0, tmp_path / "out", window_jobs=80, train_windows=4, count=6,
             processes=1, generations=2, keep=2, fitness="folds", folds=2,
             train_filter="none",
                 evaluation="windows", echo=lambda *a: None)
    # the folds, recomputed: windows 0-1 and 2-3 of the training span, each with
    # its own best heuristic
    sc = load_scenario(s, [])
    wl = load_workload(sc)
    sc = resolve_machine(sc, wl)
    train = chronological_split(wl, size=80, train_count=4, count=6).train
    best = r["best_heuristic"]
    with Evaluator(sc, train, 1) as ev:
        heur = ev.evaluate(CLASSIC)[:, :, 0]
        c = r["candidates"]["searched1"]
        w = PriorityWeights(tuple(c["weights"]), c["capacity"],
                            backfill_weights=tuple(c["backfill_weights"]))
        searched = ev.evaluate([w])[:, :, 0]
    folds = r["search_space"]["folds"]
    assert [d["windows"] for d in folds] == [2, 2]
    for f, d in enumerate(folds):
        part = heur[:, 2 * f:2 * f + 2].mean(axis=1)
        assert d["best_heuristic"] == CLASSIC[int(np.argmin(part))]
        assert d["ratio_of_best"] == part[CLASSIC.index(best)] / part.min()
    # the search's fitness is the worst fold's ratio
    fit = fitness_of(searched, heur, "folds", np.array([0, 0, 1, 1]))
    assert r["train_ratio_of_searched"][0] == fit[0]
    card = (tmp_path / "out" / "card.md").read_text()
    assert "the worst, over 2 chronological folds of the training windows" in card
    make_policy(f"learned:{tmp_path / 'out'}")
    assert main(["tune", s, "--minutes", "1", "--out", str(tmp_path / "o"),
                 "--fitness", "folds", "--folds", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --folds: expected at least 1, got 0"
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_relaxed_easy_joins_the_search_only_when_asked(tmp_path, monkeypatch):
    from cosim.evaluation import Evaluator
    from cosim.policies.priority import PriorityWeights

    tried = []
    evaluate = Evaluator.evaluate

    def recording(self, sources, only=None):    # the real evaluation, sources noted
        tried.extend(s.slack for s in sources if isinstance(s, PriorityWeights))
        return evaluate(self, sources, only)
    monkeypatch.setattr(Evaluator, "evaluate", recording)
    s = trace(tmp_path, "s", 1.0)
    plain = small_tune(s, tmp_path / "plain")
    assert plain["search_space"]["slack"] == "off" and tried and not any(tried)
    assert not any("slack" in c for c in plain["candidates"].values())
    tried.clear()
    relaxed = tune(s, [], 10.0, tmp_path / "relaxed", window_jobs=80, train_windows=4,
                   count=6, processes=1, generations=3, keep=6, slack="searched",
                   evaluation="windows", echo=lambda *a: None)
    assert relaxed["search_space"]["slack"] == "searched"
    # seeded at slack 0: the first generations sample both sides of it
    assert any(x > 0 for x in tried) and 0.0 in tried and min(tried) >= 0
    assert "relaxed EASY's slack searched" in (tmp_path / "relaxed" / "card.md").read_text()
    make_policy(f"learned:{tmp_path / 'relaxed'}")


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_drain_searched_starts_from_the_best_of_its_grid(tmp_path):
    from agents.tuning.space import DRAIN_GRID, drain_coordinates, drain_of
    s = trace(tmp_path, "d", 1.0)
    plain = small_tune(s, tmp_path / "plain")
    assert plain["search_space"]["drain"] == "off" and plain["drain_grid"] == []
    assert not any("drain_factor" in c for c in plain["candidates"].values())
    r = tune(s, [], 10.0, tmp_path / "drain", window_jobs=80, count=6, processes=1,
             generations=3, keep=6, warmup=40, evaluation="running", drain="searched",
             fitness="folds", echo=lambda *a: None)
    assert r["search_space"]["drain"] == "searched"
    # the seed (the best heuristic's order) without the rule, then at each grid point,
    # sorted by training fitness; every grid point with the rule goes to validation
    names = [n for n, _ in r["drain_grid"]]
    assert len(names) == 1 + len(DRAIN_GRID) and sorted(f for _, f in r["drain_grid"]) == \
        [f for _, f in r["drain_grid"]]
    lead = r["best_heuristic"].partition("+")[0]
    assert sorted(names) == sorted([lead] + [f"{lead}+drain{d:g}x{g:g}d" for d, g in DRAIN_GRID])
    grid_cands = {n: c for n, c in r["candidates"].items() if "+drain" in n}
    # the seed's grid, and the runner-up heuristic on validation with the rule (as
    # validation candidates only, not searched from)
    v = r["validation_mean_bsld"]
    runner = sorted(CLASSIC, key=lambda h: v[h])[1].partition("+")[0]
    assert sorted(grid_cands) == sorted(
        [f"{b}+drain{d:g}x{g:g}d" for b in (lead, runner) for d, g in DRAIN_GRID])
    assert all(c["drain_factor"] > 0 and c["drain_grace"] > 0 for c in grid_cands.values())
    assert set(grid_cands) <= set(r["validation_mean_bsld"])
    assert "a drain-aware reservation, D and G searched" in \
        (tmp_path / "drain" / "card.md").read_text()
    make_policy(f"learned:{tmp_path / 'drain'}")
    # the coordinates: log10 D and log10 days; off beyond DRAIN_OFF, and back again
    from cosim.policies.priority import FEATURES, PriorityWeights
    off = PriorityWeights((0.0,) * len(FEATURES), 32)
    assert drain_of(*drain_coordinates(off)) == (0.0, 0.0)
    assert drain_of(2.0, math.log10(30.0)) == pytest.approx((100.0, 30 * 86400.0))


def test_running_evaluation_measures_windows_in_one_run_and_never_reads_the_future(tmp_path):
    from cosim.config import load_scenario
    from cosim.evaluation import run_window, window_at
    from cosim.workloads.loading import load_workload, resolve_machine

    def run(name, scale):
        s = trace(tmp_path, name, scale)
        return s, tune(s, [], 10.0, tmp_path / name, window_jobs=80, count=6, processes=1,
                       generations=2, keep=2, warmup=40, evaluation="running",
                       echo=lambda *a: None)
    s, a = run("a", 1.0)
    _, b = run("b", 3.0)
    # the same past, another future: search and selection are identical
    assert a["validation_mean_bsld"] == b["validation_mean_bsld"]
    assert a["chosen"] == b["chosen"] and a["train_ratio_of_searched"] == b["train_ratio_of_searched"]
    assert a["test"]["mean_bsld"] != b["test"]["mean_bsld"]
    assert a["evaluation"] == "running" and a["train_filter"] is None
    assert a["windows"] == {"train": 4, "validation": 6, "test": 6}
    assert a["train_chunk_jobs"] == 125       # 500 training jobs in 4 chunks
    # the span's whole figure is the run that began 40 jobs before it, every span job measured
    sc = load_scenario(s, [])
    wl = load_workload(sc)
    sc = resolve_machine(sc, wl)
    for key, whole in (("validation", a["validation_replay"]), ("test", a["test"]["replay"])):
        span = a["spans"][key]
        one = window_at(wl, span["start"], span["stop"] - span["start"], 0, 40)
        for name in ("fcfs+easy", "saf+easy"):
            assert whole[name] == run_window(sc, name, one).bsld_mean
    card = (tmp_path / "a" / "card.md").read_text()
    assert "measured inside one run of their span" in card and "4 chunks" in card
    assert "The test span as a whole" in card


def test_the_command_measures_running_spans_by_default(tmp_path):
    s = trace(tmp_path, "d", 1.0)
    out = tmp_path / "o"
    assert main(["tune", s, "--minutes", "1", "--generations", "1", "--window-jobs", "80",
                 "--windows", "6", "--processes", "1", "--keep", "1", "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert r["evaluation"] == "running" and r["windows"]["train"] == 4
    # max wait bounded by default: 2x FCFS+EASY's on the same validation windows
    assert r["max_wait_bound"]["ratio"] == 2.0 and r["search_space"]["guard"] == "searched"
    assert "fairness bound: max wait at most 2x FCFS+EASY's" in (out / "card.md").read_text()
    assert r["windows"]["test"] == 6 and set(r["test"]["replay"]) >= set(CLASSIC)
    assert not set(BACKLOG_FEATURES) & set(r["search_space"]["features"])
    make_policy(f"learned:{out}")


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_backlog_products_join_the_search_when_asked(tmp_path):
    s = trace(tmp_path, "b", 1.0)
    out = tmp_path / "o"
    assert main(["tune", s, "--minutes", "1", "--generations", "2", "--window-jobs", "80",
                 "--windows", "6", "--processes", "1", "--keep", "3", "--backlog", "searched",
                 "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert r["search_space"]["backlog"] == "searched"
    assert set(BACKLOG_FEATURES) <= set(r["search_space"]["features"])
    assert "the backlog products searched" in (out / "card.md").read_text()
    make_policy(f"learned:{out}")


def test_a_max_wait_bound_guards_the_search_and_the_selection(tmp_path, capsys):
    s = trace(tmp_path, "m", 1.0)
    r = tune(s, [], 10.0, tmp_path / "m", window_jobs=80, count=6, processes=1,
             generations=2, keep=2, warmup=40, evaluation="running", max_wait=1.5,
             backfill_order="same", echo=lambda *a: None)
    mw, bsld = r["validation_max_wait"], r["validation_mean_bsld"]
    bound = 1.5 * mw["fcfs+easy"]
    mb = r["max_wait_bound"]
    assert mb["ratio"] == 1.5 and mb["validation_fcfs_easy_max_wait"] == mw["fcfs+easy"]
    # the lead is the best by bsld alone; the reference, the best heuristic within the bound
    assert mb["lead_heuristic"] == min(CLASSIC, key=lambda h: bsld[h])
    within = [h for h in CLASSIC if mw[h] <= bound]
    assert r["best_heuristic"] == min(within, key=lambda h: bsld[h])
    # whatever is chosen keeps the bound on validation
    assert mw[r["chosen"]] <= bound
    # the guard grid's best points and the searched guards went to validation
    grid = [n for n, _ in r["guard_grid_best"]]
    assert len(grid) == 2 and all("+guard" in n for n in grid) and set(grid) <= set(bsld)
    assert all(c["promote_after"] > 0 for c in r["candidates"].values())
    assert r["search_space"]["guard"] == "searched"
    card = (tmp_path / "m" / "card.md").read_text()
    assert "fairness bound: max wait at most 1.5x FCFS+EASY's" in card
    assert "max wait / FCFS+EASY's" in card
    h, t = r["test"]["hindsight"], r["test"]
    kept = [k for k in CLASSIC if t["max_wait"][k] <= 1.5 * t["max_wait"]["fcfs+easy"]]
    assert h["best_within_bound"] == min(kept, key=lambda k: t["mean_bsld"][k])
    make_policy(f"learned:{tmp_path / 'm'}")
    # a bound below FCFS+EASY's own max wait is refused in one line, no folder written
    assert main(["tune", s, "--minutes", "1", "--max-wait", "0.5", "--out",
                 str(tmp_path / "bad")]) == 2
    assert "--max-wait" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_the_wait_penalty_by_hand():
    from agents.tuning.space import WAIT_PENALTY, wait_penalty
    fcfs = np.array([100.0, 200.0])
    # max waits 150/300 (1.5x FCFS's max, within 2x), 500 (2.5x: 25 % over 2x)
    pen = wait_penalty(np.array([[150.0, 300.0], [100.0, 500.0]]), fcfs, 2.0)
    assert pen.tolist() == [0.0, WAIT_PENALTY * 0.25]


def test_the_guard_grid_stops_within_the_budget(tmp_path):
    # A budget already spent: the grid scores the lead heuristic's thresholds only
    # (one order: 12 points), no generation runs, and the choice still keeps the bound.
    s = trace(tmp_path, "g", 1.0)
    r = tune(s, [], 1e-4, tmp_path / "g", window_jobs=80, count=6, processes=1, keep=2,
             warmup=40, evaluation="running", max_wait=2.0, backfill_order="same",
             echo=lambda *a: None)
    from agents.tuning.space import GUARD_FRACTIONS
    lead = r["max_wait_bound"]["lead_heuristic"].partition("+")[0]
    assert r["guard_grid_points"] == len(GUARD_FRACTIONS) and r["budget"]["generations"] == 0
    assert all(n.startswith(f"{lead}+guard") for n, _ in r["guard_grid_best"])
    assert r["validation_max_wait"][r["chosen"]] <= 2.0 * r["validation_max_wait"]["fcfs+easy"]


def test_user_features_refuses_an_unknown_choice():
    from agents.tuning.space import user_features_choice

    with pytest.raises(ValueError, match="user_features: 'maybe'; expected auto, on or off"):
        user_features_choice("maybe", None)


def test_past_selection_checks_every_training_period_by_hand(tmp_path):
    from agents.tuning.select import past_check
    from cosim.config import load_scenario
    from cosim.evaluation import chronological_split, run_window
    from cosim.policies.priority import PriorityWeights, heuristic_weights
    from cosim.workloads.loading import load_workload, resolve_machine

    s = trace(tmp_path, "p", 1.0)
    scenario = load_scenario(s, [])
    workload = load_workload(scenario)
    scenario = resolve_machine(scenario, workload)
    sp = chronological_split(workload, size=80, train_count=6, count=6, evaluation="windows")
    saf = PriorityWeights(heuristic_weights("saf", 32), 32, name="same-as-saf")
    largest = PriorityWeights(tuple(-w for w in heuristic_weights("saf", 32)), 32,
                              name="largest-first")
    check = past_check(scenario, sp.train, "saf+easy", [saf, largest], 3, 1)
    assert check["reference"] == "saf+easy" and check["periods"] == 3
    # SAF's own order ties SAF+EASY in every period: it passes; largest-first loses
    assert check["fold_ratios"]["same-as-saf"] == pytest.approx([1.0, 1.0, 1.0])
    assert check["passed"] == {"same-as-saf": True, "largest-first": False}
    # each period's ratio is the mean over its windows (2 of the 6, in time order)
    by_hand = [np.mean([run_window(scenario, src, w).bsld_mean for w in sp.train[2:4]])
               for src in ("saf+easy", largest)]
    assert check["fold_ratios"]["largest-first"][1] == pytest.approx(by_hand[1] / by_hand[0])
    assert past_check(scenario, sp.train, "saf+easy", [], 3, 1)["passed"] == {}


def test_past_selection_is_the_default_and_keeps_only_what_the_past_supports(tmp_path):
    s = trace(tmp_path, "q", 1.0, seed=5)     # a trace where a searched policy passes validation
    r = tune(s, [], 10.0, tmp_path / "q", window_jobs=80, train_windows=4, count=6,
             processes=1, generations=3, keep=3, evaluation="windows", echo=lambda *a: None)
    interval = tune(s, [], 10.0, tmp_path / "i", window_jobs=80, train_windows=4, count=6,
                    processes=1, generations=3, keep=3, evaluation="windows",
                    selection="interval", echo=lambda *a: None)
    assert r["selection"] == "past" and interval["past_check"] is None
    check, v, ci, rp = (r["past_check"], r["validation_mean_bsld"], r["validation_ratio_ci"],
                        r["validation_replay"])
    best = r["best_heuristic"]
    assert check["reference"] == best and check["periods"] == 4     # --folds 4 of 4 windows
    # checked: exactly the searched policies that pass the interval rule
    assert set(check["fold_ratios"]) == {k for k in ci if ci[k][1] < 1.0 and rp[k] <= rp[best]}
    assert all(len(f) == check["periods"] for f in check["fold_ratios"].values())
    chosen = r["chosen"]
    if chosen not in CLASSIC:
        assert check["passed"][chosen] and max(check["fold_ratios"][chosen]) <= 1.0
    # the past rule chooses among a subset of what the interval rule may choose
    assert v[chosen] >= v[interval["chosen"]]
    # here: the interval rule ships a searched policy that loses to the heuristic in a
    # training period, and the past rule keeps the heuristic
    assert interval["chosen"] not in CLASSIC and chosen == best
    assert check["passed"][interval["chosen"]] is False
    assert max(check["fold_ratios"][interval["chosen"]]) > 1.0
    assert "periods of the training span" in (tmp_path / "q" / "card.md").read_text()


@pytest.mark.slow   # long on 2 cores: .ci/run runs it (-m slow)
def test_warmup_all_runs_every_span_from_the_traces_first_job(tmp_path):
    s = trace(tmp_path, "all", 1.0)
    kw = dict(window_jobs=80, count=6, processes=1, generations=1, keep=1,
              evaluation="running", echo=lambda *a: None)
    a = tune(s, [], 10.0, tmp_path / "a", warmup="all", **kw)
    n = tune(s, [], 10.0, tmp_path / "n", warmup=1000, **kw)
    cold = tune(s, [], 10.0, tmp_path / "c", **kw)
    assert a["warmup_jobs"] == "all" and a["validation_mean_bsld"] == n["validation_mean_bsld"]
    assert a["test"]["mean_bsld"] == n["test"]["mean_bsld"]
    assert a["validation_mean_bsld"] != cold["validation_mean_bsld"]
    assert "after every job of the past" in (tmp_path / "a" / "card.md").read_text()
