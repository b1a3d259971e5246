"""The evaluation protocol: time-ordered splits, paired windows, ratios, the test set read once."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.config import load_scenario
from cosim.evaluation import (
    CLASSIC,
    ROW_METRICS,
    Evaluator,
    Protocol,
    ProtocolError,
    Scores,
    SealedWindows,
    best_heuristic,
    chronological_split,
    compare,
    run_window,
    windows,
)
from cosim.policies.priority import PriorityWeights, heuristic_weights
from cosim.workloads.base import Workload
from cosim.workloads.loading import load_workload

SCENARIO = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=1200"])


def test_split_is_in_time_order_and_disjoint():
    w = Workload.from_columns(submit=np.arange(1000) * 10.0, run=[5] * 1000, procs=[1] * 1000)
    s = chronological_split(w, size=50, train_count=8, count=100, train=0.5, validation=0.7)
    last = lambda ws: max(float(x.submit[-1]) for x in ws)     # noqa: E731
    first = lambda ws: min(float(x.submit[0]) for x in ws)     # noqa: E731
    test = s.test.read()
    assert last(s.train) < first(s.validation) and last(s.validation) < first(test)
    assert (len(s.train), len(s.validation), len(test)) == (8, 100, 100)
    assert s.spans["test"].start == 700 and s.spans["validation"].start == 500
    assert "overlap" in s.note      # 100 windows of 50 from 200 and 300 jobs


def test_windows_are_evenly_spaced_and_never_cross_the_span():
    w = Workload.from_columns(submit=np.arange(100.0), run=[5] * 100, procs=[1] * 100)
    ws = windows(w, 10, 5, start=20, stop=70)
    assert [float(x.submit[0]) for x in ws] == [20.0, 30.0, 40.0, 50.0, 60.0]
    assert windows(w, 60, 3, start=20, stop=70) == []
    assert len(windows(w, 48, 10, start=20, stop=70)) == 3      # only 3 distinct starts


def test_the_test_set_is_read_once():
    sealed = SealedWindows([Workload.from_columns(submit=[0], run=[1], procs=[1])])
    assert len(sealed.read()) == 1
    with pytest.raises(ProtocolError, match="already read once"):
        sealed.read()



def test_the_protocol_hands_out_its_test_windows_once_and_then_refuses_its_test():
    w = Workload.from_columns(submit=np.arange(1000) * 10.0, run=[5] * 1000, procs=[1] * 1000)
    protocol = Protocol(SCENARIO, chronological_split(w, size=50, train_count=1, count=3))
    got = protocol.test_windows()
    assert [int(x.submit[0]) for x in got] == [7000, 8250, 9500]
    with pytest.raises(ProtocolError, match="already read once"):
        protocol.test(["fcfs"])

def test_a_split_too_short_is_clear():
    w = Workload.from_columns(submit=np.arange(100.0), run=[5] * 100, procs=[1] * 100)
    with pytest.raises(ProtocolError, match="validation, test span holds fewer than 40 jobs"):
        chronological_split(w, size=40, train_count=2)


def test_compare_hand_checked():
    # Ratios 0.5, 1, 2, 1 -> median 1; means 7.5 / 7.5 -> 1; one win, one loss.
    a, b = np.array([1.0, 4.0, 8.0, 17.0]), np.array([2.0, 4.0, 4.0, 20.0])
    c = compare(a, b, policy="p", reference_name="r")
    assert c.mean_ratio == pytest.approx(30.0 / 30.0)
    assert c.median_ratio == pytest.approx(np.median([0.5, 1.0, 2.0, 0.85]))
    assert (c.wins, c.losses, c.windows) == (2, 1, 4)
    assert c.mean_ratio_ci[0] <= c.mean_ratio <= c.mean_ratio_ci[1]
    assert compare(a, b, seed=3) == compare(a, b, seed=3)        # reproducible intervals
    with pytest.raises(ProtocolError, match="same windows"):
        compare(a, b[:3])


def test_best_heuristic_is_chosen_on_the_values_given():
    vals = {"fcfs+easy": np.array([9.0, 9.0]), "saf+easy": np.array([3.0, 5.0]),
            "sjf+easy": np.array([4.0, 4.5])}   # median would pick sjf
    assert best_heuristic(vals) == "saf+easy"      # mean 4.0 against 4.25 and 9


def test_evaluator_pairs_windows_and_processes_agree():
    w = load_workload(SCENARIO)
    ws = windows(w, 200, 4)
    sources = ["fcfs+easy", PriorityWeights(heuristic_weights("saf", 256), 256)]
    with Evaluator(SCENARIO, ws, processes=1) as one:
        a = one.evaluate(sources)
    with Evaluator(SCENARIO, ws, processes=2) as two:
        b = two.evaluate(sources)
    assert a.shape == (2, 4, 3) and np.array_equal(a, b)
    # SAF as a point of the priority space is SAF+EASY, window by window.
    saf = [run_window(Evaluator(SCENARIO, ws).scenario, "saf+easy", x).bsld_mean for x in ws]
    assert a[1, :, 0].tolist() == saf
    assert set(CLASSIC) == {"fcfs+easy", "sjf+easy", "saf+easy", "f1+easy", "wfp3+easy",
                            "unicef+easy"}


def test_lublin_sized_split_shares_no_job_between_sets():
    # The tuner's default on a 10,000-job trace: windows of 256, 32 / 100 / 100.
    # Windows overlap within a span, never across spans.
    n = 10_000
    w = Workload.from_columns(submit=np.arange(n) * 60.0, run=[5] * n, procs=[1] * n)
    s = chronological_split(w, size=256, train_count=32, count=100)
    ids = {k: set(np.concatenate([x.job_id for x in ws]).tolist())
           for k, ws in (("train", s.train), ("validation", s.validation), ("test", s.test.read()))}
    assert not ids["train"] & ids["validation"] and not ids["validation"] & ids["test"]
    assert not ids["train"] & ids["test"]
    assert max(ids["train"]) <= 5000 and min(ids["validation"]) == 5001
    assert max(ids["validation"]) == 7000 and min(ids["test"]) == 7001


def test_overlap_block_counts_the_windows_that_share_a_job():
    from cosim.evaluation import overlap_block, window_starts
    assert overlap_block(10, 5, 20, 70) == 1              # side by side: 20, 30, ..., 60
    # starts 0, 4, 8, 12, 16, 20: a window of 10 shares jobs with the next two
    assert window_starts(10, 6, 0, 30) == [0, 4, 8, 12, 16, 20]
    assert overlap_block(10, 6, 0, 30) == 3
    assert overlap_block(10, 1, 0, 30) == 1
    # the tuner's Lublin default: 100 windows of 256 in 2,000 and 3,000 jobs
    assert overlap_block(256, 100, 5000, 7000) == 15
    assert overlap_block(256, 100, 7000, 10000) == 10


def test_split_records_its_bootstrap_blocks():
    n = 10_000
    w = Workload.from_columns(submit=np.arange(n) * 60.0, run=[5] * n, procs=[1] * n)
    s = chronological_split(w, size=256, train_count=32, count=100)
    assert s.blocks == {"validation": 15, "test": 10}
    assert "blocks of 15 consecutive validation windows" in s.note
    side = chronological_split(w, size=20, train_count=8, count=100)   # 100 x 20 fit in 2,000
    assert side.blocks == {"validation": 1, "test": 1} and side.note == ""


def test_block_bootstrap_draws_runs_of_consecutive_windows():
    from cosim.evaluation import block_indices
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert np.array_equal(block_indices(a, 50, 1), b.integers(0, 50, 50))   # the plain draw
    idx = block_indices(np.random.default_rng(1), 50, 7)
    assert len(idx) == 50 and idx.min() >= 0 and idx.max() < 50
    runs = idx[:49].reshape(7, 7)          # the first 7 whole blocks
    assert (np.diff(runs, axis=1) == 1).all()


def test_overlapping_windows_give_wider_intervals():
    # Ten independent values, each repeated over 10 consecutive windows (as
    # heavily overlapping windows repeat one burst): the plain bootstrap sees
    # 100 draws, the block bootstrap about 10.
    rng = np.random.default_rng(0)
    a = np.repeat(rng.lognormal(0.0, 0.5, 10), 10)
    b = np.ones(100)
    plain = compare(a, b).mean_ratio_ci
    block = compare(a, b, block=10).mean_ratio_ci
    assert (block[1] - block[0]) > 2 * (plain[1] - plain[0])
    assert block[0] <= compare(a, b).mean_ratio <= block[1]
    with pytest.raises(ProtocolError, match="block 0"):
        compare(a, b, block=0)


def test_warm_windows_measure_only_the_window_on_a_busy_machine():
    # One core, FCFS+EASY. Job 0 (100 s) runs first; jobs 1 and 2 (10 s each,
    # submitted at 0 and 10) then wait 100 s each; job 3 (5 s, at 20) waits 100 s.
    from cosim.evaluation import MEASURED, window_at
    sc = load_scenario("scenarios/lublin256.yaml", ["cluster.nodes=1", "cluster.cores_per_node=1"])
    w = Workload.from_columns(submit=[0.0, 0.0, 10.0, 20.0], run=[100, 10, 10, 5],
                              procs=[1, 1, 1, 1])
    cold = w.take(slice(1, 3))                      # from an empty machine: no waits
    warm = window_at(w, 1, 2, span_start=0, warmup=1)
    assert len(warm) == 3 and warm.features[MEASURED].tolist() == [False, True, True]
    no_room = window_at(w, 1, 2, span_start=1, warmup=1)    # the span starts at the window
    assert len(no_room) == 2 and MEASURED not in no_room.features
    late = window_at(w, 2, 2, span_start=0, warmup=5)       # only 2 jobs before it
    with Evaluator(sc, [cold, warm, no_room, late]) as ev:
        r = ev.evaluate(["fcfs+easy"])[0]
    # [mean bsld, mean wait, max wait]; tau 10 s: a 10 s job that waited 100 s has bsld 11
    assert r.tolist() == [[1.0, 0.0, 0.0], [11.0, 100.0, 100.0], [1.0, 0.0, 0.0],
                          [(11.0 + 10.5) / 2, 100.0, 100.0]]
    s = chronological_split(Workload.from_columns(submit=np.arange(1000.0), run=[5] * 1000,
                                                  procs=[1] * 1000),
                            size=50, train_count=4, count=4, warmup=30)
    first_val, first_test = s.validation[0], s.test.read()[0]
    assert float(first_val.submit[0]) == 500.0 and MEASURED not in first_val.features
    assert len(s.validation[1]) == 80 and s.validation[1].features[MEASURED].sum() == 50
    assert float(first_test.submit[0]) == 700.0     # never from the validation span


def test_running_split_measures_windows_inside_one_run_of_each_span():
    w = Workload.from_columns(submit=np.arange(1000) * 10.0, run=[5] * 1000, procs=[1] * 1000)
    s = chronological_split(w, size=50, train_count=4, count=6, train=0.5, validation=0.7,
                            warmup=30, evaluation="running")
    assert s.evaluation == "running"
    # training: 4 chunks side by side over the training span, each after 30 warm-up jobs
    assert [len(c) for c in s.train] == [125, 155, 155, 155]
    assert float(s.train[-1].submit[-1]) == 4990.0
    # validation and test: one run each, from 30 jobs of the past to the span's end
    (val,), (test,) = s.validation, s.test.read()
    assert (float(val.submit[0]), float(val.submit[-1])) == (4700.0, 6990.0)
    assert (float(test.submit[0]), float(test.submit[-1])) == (6700.0, 9990.0)
    with pytest.raises(ProtocolError):
        s.test.read()
    sl = s.slices["test"]
    assert len(sl) == 7 and sl[-1] == (30, 330)          # six windows, then the whole span
    assert sl[0] == (30, 80) and sl[5] == (280, 330)     # evenly spaced, never past the end
    assert s.blocks["test"] == 2 and "one run" in s.note
    with pytest.raises(ProtocolError, match="evaluation 'cold'"):
        chronological_split(w, size=50, train_count=4, evaluation="cold")
    with pytest.raises(ProtocolError, match=r"training span \(500 jobs\) holds fewer than 600 chunks"):
        chronological_split(w, size=50, train_count=600, evaluation="running")


def test_windows_of_one_run_are_slices_of_that_run():
    wl = load_workload(SCENARIO)
    window = wl.take(slice(0, 600))
    slices = [(0, 200), (200, 600), (100, 400), (0, 600)]
    with Evaluator(SCENARIO, [window], 1, slices=[slices]) as ev:
        one = ev.evaluate(["saf+easy", "fcfs+easy"])
    with Evaluator(SCENARIO, [window], 2, slices=[slices]) as ev:
        two = ev.evaluate(["saf+easy", "fcfs+easy"])
    assert one.shape == (2, 4, 3) and np.array_equal(one, two)
    for i, name in enumerate(("saf+easy", "fcfs+easy")):
        # the whole slice is the window's own run, every job measured
        whole = run_window(SCENARIO, name, window)
        assert one[i, 3, 0] == pytest.approx(whole.bsld_mean)
        assert one[i, 3, 2] == whole.wait_max
        # two slices side by side make up the whole: a job-weighted mean
        assert (200 * one[i, 0, 0] + 400 * one[i, 1, 0]) / 600 == pytest.approx(one[i, 3, 0])
        assert max(one[i, 0, 2], one[i, 1, 2]) == one[i, 3, 2]
    # a slice in the middle of the run is not that slice run on its own from empty
    alone = run_window(SCENARIO, "fcfs+easy", wl.take(slice(100, 400)))
    assert one[1, 2, 0] != alone.bsld_mean
    with pytest.raises(ProtocolError, match="2 slice lists for 1 windows"):
        Evaluator(SCENARIO, [window], 1, slices=[slices, slices])


# -- the protocol as one object ------------------------------------------------------------
def _protocol(evaluation):
    w = load_workload(SCENARIO)
    return w, Protocol.chronological(SCENARIO, w, size=100, train_count=2, count=3,
                                     evaluation=evaluation)


@pytest.mark.parametrize("evaluation", ["windows", "running"])
def test_the_protocol_scores_spans_chooses_on_validation_and_reads_the_test_once(evaluation):
    w, p = _protocol(evaluation)
    sources = ["fcfs+easy", "saf+easy"]
    val = p.score("validation", sources, whole=True)
    assert val.names == sources and val.windows.shape == (2, 3, 3) and val.whole.shape == (2,)
    # the span run whole is one run of the validation span's jobs
    span = p.split.spans["validation"]
    alone = run_window(p.scenario, "saf+easy", w.take(slice(span.start, span.stop))).bsld_mean
    assert val.whole[1] == pytest.approx(alone)
    # the same windows through the Evaluator: the protocol adds nothing of its own
    with p.evaluator("validation") as ev:
        assert np.array_equal(p.score("validation", sources, ev).windows[:, :, 0],
                              ev.evaluate(sources)[:, :val.windows.shape[1], 0])
    lead, best, bound = p.reference(val, sources)
    assert lead == best == min(sources, key=lambda s: val.bsld(s).mean()) and bound is None
    c = p.compare("validation", val.bsld("saf+easy"), val.bsld("fcfs+easy"), policy="saf+easy",
                  reference_name="fcfs+easy")
    assert c.windows == 3 and c.mean_ratio == pytest.approx(
        val.bsld("saf+easy").mean() / val.bsld("fcfs+easy").mean())
    with pytest.raises(ProtocolError, match="read once, by Protocol.test"):
        p.evaluator("test")
    test = p.test(sources)
    assert test.windows.shape == (2, 3, 3) and test.whole.shape == (2,)
    # the test span's rows: starvation beside the mean, by summary.json's definitions; the
    # span's mean bsld is the one the span run whole gives
    assert list(test.rows) == sources and all(set(r) == set(ROW_METRICS)
                                              for r in test.rows.values())
    for i, name in enumerate(sources):
        row = test.rows[name]
        assert row["bsld_mean"] == pytest.approx(test.whole[i])
        assert row["wait_p99"] <= row["wait_max"] and row["starved_1w"] <= row["starved_1d"]
    with pytest.raises(ProtocolError, match="already read once"):
        p.test(sources)


def test_the_reference_keeps_the_max_wait_bound_by_hand():
    scores = Scores(["fcfs+easy", "saf+easy", "sjf+easy"],
                    np.array([[[3.0, 0.0, 100.0]], [[1.0, 0.0, 900.0]], [[2.0, 0.0, 150.0]]]))
    _, p = _protocol("windows")
    assert p.reference(scores, scores.names) == ("saf+easy", "saf+easy", None)
    # within 2x FCFS+EASY's max wait (200 s): SAF (900 s) is out, SJF (150 s) is in
    assert p.reference(scores, scores.names, max_wait=2.0) == ("saf+easy", "sjf+easy", 200.0)
    # FCFS+EASY is always within its own bound
    assert p.reference(scores, scores.names, max_wait=1.0)[1] == "fcfs+easy"
