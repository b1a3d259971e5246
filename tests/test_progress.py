"""Progress features of running jobs (predictors.progress), checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predictors.progress import (
    FEATURE_NAMES,
    PHYSICS_COLUMNS,
    ProgressInputs,
    expected_ionic_steps,
    progress_features,
    quantize,
    segment_rows,
)

NAN = float("nan")


def _inputs(rows, now, *, scf=-1, lines=(), startup=NAN, prerun=600.0, **physics):
    values = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    phys = {c: np.array([physics.get(c, NAN)], dtype=np.float64) for c in PHYSICS_COLUMNS}
    return ProgressInputs(values=values, starts=np.array([0]), k=np.array([len(values)]),
                          now=np.array([now], dtype=np.float64), scf=np.array([scf]),
                          trace=np.asarray(lines, dtype=np.float64), trace_starts=np.array([0]),
                          trace_len=np.array([len(lines)]), prerun=np.array([prerun]),
                          physics=phys, startup=np.array([startup]))


def _feat(inputs) -> dict[str, float]:
    out = progress_features(inputs)
    assert out.shape == (1, len(FEATURE_NAMES)) and out.dtype == np.float32
    return {name: float(v) for name, v in zip(FEATURE_NAMES, out[0], strict=True)}


def test_an_md_run_by_hand():
    # MD, NSW 10: steps end at 100, 130, 160 s (start-up 40 s; 20, 6, 6 SCF
    # steps). At 175 s, 3 SCF lines of step 4 are out.
    f = _feat(_inputs([[100, -0.5, 1.0, 20], [130, -0.1, 0.8, 6], [160, -0.05, 0.9, 6]], 175.0,
                      scf=3, lines=[0.1, -0.01, -0.001], startup=40.0,
                      NSW=10, IBRION=0, EDIFF=1e-5, EDIFFG=-0.02, NELM=60, AtomNumber=8))
    approx = lambda x: pytest.approx(x, rel=1e-6)  # noqa: E731 (float32 rounding)
    assert f["steps_done"] == 3 and f["nsw_left"] == 7 and f["steps_over_nsw"] == approx(0.3)
    assert f["log_t_last"] == approx(math.log1p(160)) and f["log_in_step"] == approx(math.log1p(15))
    assert f["scf_first"] == 20 and f["scf_later_mean"] == 6 and f["scf_last"] == 6
    assert f["log_tau_later"] == approx(math.log(60 / 12))       # 60 s over 12 SCF steps
    assert f["log_tau_first"] == approx(math.log(60 / 20))       # (100 - 40 s start-up) / 20
    assert f["log_step_time"] == approx(math.log(30))
    assert f["log_tau_now"] == approx(math.log(15 / 3.5))        # 3 lines out, one under way
    assert f["scf_done_over_expected"] == approx(3 / 6)
    assert f["de_last"] == approx(-3.0) and f["de_min"] == approx(-3.0)
    assert f["de_last2"] == approx(-2.5)
    assert f["log_startup"] == approx(math.log1p(40))
    # MD runs NSW steps: 6 more after this one, 30 s each, plus the rest of this
    # step (lines left from the SCF rate, at its pace)
    lines_left = f["lines_left_slope"] if math.isnan(f["lines_left_mean"]) else f["lines_left_mean"]
    rest = lines_left * 15 / 3.5
    assert f["proj_ionic"] == approx(math.log((175 + rest + 6 * 30) / 175))
    assert f["proj_total"] == f["proj_ionic"]


def test_a_relaxation_extrapolates_the_force_decay():
    # force halves every step from 1.6 eV/A; EDIFFG -0.05: log10 gap 1.6->0.05 is
    # 5 halvings from the first step, so 2 more after the 4th (0.2 -> 0.05)
    rows = [[60 * (i + 1), -0.1, 1.6 / 2 ** i, 6] for i in range(4)]
    f = _feat(_inputs(rows, 250.0, NSW=99, IBRION=2, EDIFF=1e-5, EDIFFG=-0.05, AtomNumber=4))
    assert f["force_slope"] == pytest.approx(-math.log10(2), rel=1e-5)
    assert f["steps_left_force"] == pytest.approx(2.0, rel=1e-5)
    assert f["steps_left"] == f["steps_left_force"]
    total = expected_ionic_steps({c: np.array([v]) for c, v in
                                  {"IBRION": 2.0, "NSW": 99.0, "AtomNumber": 4.0}.items()},
                                 np.array([4]), np.array([f["steps_left"]]))
    assert total[0] == pytest.approx(6.0, rel=1e-5)


def test_expected_ionic_steps_by_kind():
    phys = {"IBRION": np.array([0, 2, 2, 2, 5, 6, -1.0]),
            "NSW": np.array([100, 99, 99, 20, 1, 1, 0.0]),
            "AtomNumber": np.array([8, 8, 8, 8, 4, 4, 4.0])}
    k = np.array([10, 10, 10, 10, 3, 3, 0])
    left = np.array([NAN, 5, 500, NAN, NAN, NAN, NAN])
    got = expected_ionic_steps(phys, k, left)
    # MD: NSW; relaxation: k + left, capped at NSW, NSW when no decay is known;
    # IBRION=5: 1 + 6 N; IBRION=6 (symmetry unknown) and single points: unknown
    np.testing.assert_array_equal(got[:5], [100, 15, 99, 20, 25])
    assert np.isnan(got[5:]).all()


def test_unknown_things_are_nan_not_errors():
    # no finished step, no SCF view, no physics columns: only the clock and the prior
    f = _feat(_inputs(np.zeros((0, 4)), 30.0))
    assert f["steps_done"] == 0 and f["log_elapsed"] == pytest.approx(math.log1p(30))
    for name in ("scf_done", "log_tau_now", "de_last", "force_last", "proj_total", "steps_left"):
        assert math.isnan(f[name]), name


def test_first_step_lines_start_self_consistent_after_the_jump():
    # a fresh start: 3 non-self-consistent lines fall, then the SCF jumps up
    lines = [1e3, 1e2, 1e1, 1e-1, 5.0, 1.0, 0.2]
    f = _feat(_inputs(np.zeros((0, 4)), 50.0, scf=7, lines=lines, startup=20.0,
                      EDIFF=1e-4, NELM=60))
    assert f["sc_started"] == 1 and f["sc_lines"] == 3          # 5.0, 1.0, 0.2
    assert f["de_max_sc"] == pytest.approx(math.log10(5.0), rel=1e-6)
    # still falling steadily: no jump seen, the self-consistent part is taken to start at line 1
    f = _feat(_inputs(np.zeros((0, 4)), 50.0, scf=3, lines=[1e3, 1e2, 1e1], startup=20.0))
    assert f["sc_started"] == 0 and f["sc_lines"] == 2


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=12), st.data())
def test_batch_rows_are_independent(lengths, data):
    # features of a batch equal the features of each job alone
    rng = np.random.default_rng(len(lengths))
    rows = [np.column_stack([np.cumsum(rng.uniform(5, 50, n)), rng.normal(0, 0.1, n),
                             rng.uniform(0.01, 2, n), rng.integers(2, 30, n)]) for n in lengths]
    lines = [rng.normal(0, 1, data.draw(st.integers(0, 6))) for _ in lengths]
    now = np.array([r[-1, 0] + 3.0 if len(r) else 10.0 for r in rows])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    tstarts = np.concatenate([[0], np.cumsum([len(x) for x in lines])[:-1]])
    n = len(lengths)
    phys = {c: rng.choice([0.0, 2.0, 5.0], n) if c == "IBRION" else rng.uniform(1, 50, n)
            for c in PHYSICS_COLUMNS}
    batch = ProgressInputs(
        values=np.concatenate(rows) if sum(lengths) else np.zeros((0, 4)), starts=starts,
        k=np.array(lengths), now=now, scf=np.array([len(x) for x in lines]),
        trace=np.concatenate(lines) if sum(map(len, lines)) else np.zeros(0),
        trace_starts=tstarts, trace_len=np.array([len(x) for x in lines]),
        prerun=np.full(n, 500.0), physics=phys, startup=np.full(n, 30.0))
    together = progress_features(batch)
    for i in range(n):
        alone = ProgressInputs(
            values=rows[i] if lengths[i] else np.zeros((0, 4)), starts=np.array([0]),
            k=np.array([lengths[i]]), now=now[i:i + 1], scf=np.array([len(lines[i])]),
            trace=lines[i], trace_starts=np.array([0]), trace_len=np.array([len(lines[i])]),
            prerun=np.array([500.0]), physics={c: v[i:i + 1] for c, v in phys.items()},
            startup=np.array([30.0]))
        np.testing.assert_array_equal(together[i], progress_features(alone)[0])


def test_quantize_and_segments():
    a = np.array([1.0, 1.0 + 2 ** -40, np.inf, -np.inf, np.nan])
    q = quantize(a)
    assert q[0] == q[1] and np.isinf(q[2]) and np.isinf(q[3]) and np.isnan(q[4])
    assert segment_rows(np.array([3, 10, 0]), np.array([2, 0, 1])).tolist() == [3, 4, 0]
