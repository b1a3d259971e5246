"""Progress features of running jobs: what an in-run model reads, computed in one vectorized pass.

A running VASP job shows its progress in its OSZICAR: the ionic steps it
finished (when, how many SCF steps each took, the largest force, the energy
change) and, for the step under way, the SCF lines written so far, whose
``dE`` falls towards EDIFF as the step converges. RLSchert (seed 001,
section 3.2) feeds "energy-change and force" per time step to its in-run
model; :func:`progress_features` turns the same observations into one row
of numbers per running job:

* **pace**: time per SCF step in the step under way, in the earlier ionic
  steps and in the first one (which includes the start-up), time per ionic
  step;
* **the step under way**: SCF steps done, ``log10 |dE|`` of its latest lines,
  how fast it falls, and how many more lines reach EDIFF at that rate;
* **the trajectory**: largest force and ``|d E|`` of the last ionic steps,
  their decay per step, and the steps still needed to reach ``|EDIFFG|``
  at that decay (relaxations), ``NSW`` minus the steps done (MD);
* **projections**: the remaining time these imply (steps left x time per
  step, plus the rest of the step under way), as ratios to the elapsed time;
* **the prior**: the pre-run prediction against the elapsed time.

Every feature is causal (uses only what was written by ``elapsed``) and
NaN when unknown (a job with no finished ionic step has no force decay).
Values are rounded to float32: transcendental functions in numpy differ in
the last bits between CPU instruction sets (numpy picks AVX-512 or AVX2
kernels at run time), and the rounding removes those differences before they
reach a model, so a model trains to the same bytes on any x86 machine
(XGBoost reads its inputs as float32 anyway).

The static columns the projections need (``NSW``, ``EDIFFG``, ``EDIFF``,
``IBRION``, ``NELM``, ``AtomNumber``; :data:`PHYSICS_COLUMNS`) are taken from
the pre-run feature matrix by name; a data set without them (another
application) gets NaN projections and the model learns from the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PHYSICS_COLUMNS", "FEATURE_NAMES", "ProgressInputs", "progress_features",
           "physics_from_matrix", "expected_ionic_steps", "segment_rows", "quantize", "log10_abs"]

#: Pre-run columns the projections use, when the feature spec has them.
PHYSICS_COLUMNS: tuple[str, ...] = ("NSW", "EDIFFG", "EDIFF", "IBRION", "NELM", "AtomNumber")

#: Names of the columns :func:`progress_features` returns, in order.
FEATURE_NAMES: tuple[str, ...] = (
    # the prior and the clock
    "log_elapsed", "log_prerun", "prerun_over_elapsed", "log_startup",
    # ionic progress
    "steps_done", "log_t_last", "log_in_step", "log_t_first", "scf_first", "scf_later_mean",
    "log_tau_later", "log_tau_first", "log_step_time", "log_last_step_time", "scf_last",
    "steps_over_nsw", "nsw_left", "steps_over_displacements",
    # the step under way
    "scf_done", "log_tau_now", "scf_done_over_expected", "de_last", "de_last2", "de_min",
    "sc_started", "sc_lines", "de_slope", "de_max_sc", "lines_since_max", "de_gap",
    "lines_left_slope", "lines_left_mean",
    # trajectory
    "force_last", "force_first", "force_slope", "force_gap", "steps_left_force",
    "dE_last", "dE_slope", "steps_left_energy", "steps_left",
    # projections (log of projected total over elapsed)
    "proj_step_now", "proj_ionic", "proj_total", "proj_single",
)

_W_IONIC = 8   # ionic steps in the decay fits
_W_SCF = 5     # SCF lines in the slope of the step under way


def quantize(a: np.ndarray) -> np.ndarray:
    """Round to the nearest float32 and back (NaN and inf kept), so last-bit differences vanish.

    IEEE rounding to float32 is exact and the same on every CPU, unlike
    numpy's float64 ``exp``/``log``, whose AVX-512 and AVX2 kernels differ in
    the last bits; two such results round to the same float32 except in the
    rare case that they straddle a rounding boundary (about 1 in 5e8).

    Examples:
        >>> quantize(np.array([1.0000000000000002, 123456789.0, np.nan])).tolist()
        [1.0, 123456792.0, nan]
    """
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def log10_abs(x: np.ndarray, floor: float = 1e-12) -> np.ndarray:
    """``log10 |x|`` with ``|x|`` floored (a ``dE`` of exactly 0 happens); NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.log10(np.maximum(np.abs(x), floor))


def segment_rows(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])`` without a Python loop.

    Examples:
        >>> segment_rows(np.array([5, 0]), np.array([2, 3])).tolist()
        [5, 6, 0, 1, 2]
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    seg_start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(starts - seg_start, lengths) + np.arange(total)


def _seg_sum(x: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(seg, weights=x, minlength=n) if len(seg) else np.zeros(n)


def _slope(y: np.ndarray, seg: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray:
    """Least-squares slope of ``y`` against ``pos`` within each segment (NaN below 2 points)."""
    ok = np.isfinite(y)
    y, seg, pos = y[ok], seg[ok], pos[ok].astype(np.float64)
    c = _seg_sum(np.ones(len(y)), seg, n)
    sx, sy = _seg_sum(pos, seg, n), _seg_sum(y, seg, n)
    sxx, sxy = _seg_sum(pos * pos, seg, n), _seg_sum(pos * y, seg, n)
    den = c * sxx - sx * sx
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((c >= 2) & (den > 0), (c * sxy - sx * sy) / den, np.nan)


@dataclass
class ProgressInputs:
    """What is known about each running job (one sample per job and time).

    Attributes:
        values: flat progress rows ``[elapsed, denergy, max_force, scf_steps]``.
        starts: per sample, the first row of its job in ``values``.
        k: per sample, ionic steps finished (its rows are ``starts .. starts+k``).
        now: per sample, seconds since the job started.
        scf: per sample, SCF lines finished in the step under way (< 0: unknown).
        trace: flat ``dE`` of the step under way's SCF lines (all samples).
        trace_starts, trace_len: per sample, where its lines are in ``trace``
            (``trace_len`` 0: not known, even if ``scf`` > 0).
        prerun: per sample, the pre-run run-time prediction (s).
        physics: per sample, the :data:`PHYSICS_COLUMNS` (NaN when unknown).
        startup: per sample, seconds from the job's start to its first SCF
            line (VASP's initialisation; OUTCAR times it), NaN while unknown.
    """

    values: np.ndarray
    starts: np.ndarray
    k: np.ndarray
    now: np.ndarray
    scf: np.ndarray
    trace: np.ndarray
    trace_starts: np.ndarray
    trace_len: np.ndarray
    prerun: np.ndarray
    physics: Mapping[str, np.ndarray]
    startup: np.ndarray | None = None


def expected_ionic_steps(physics: Mapping[str, np.ndarray], k: np.ndarray,
                         steps_left: np.ndarray) -> np.ndarray:
    """Ionic steps a multi-ionic job is expected to run in total, or NaN when nothing says.

    MD (``IBRION = 0``) runs ``NSW`` steps; a relaxation (``IBRION`` 1-3)
    runs the steps done plus ``steps_left`` (the force or energy decay
    extrapolated to ``EDIFFG``), at most ``NSW``; a finite-difference phonon
    run with ``IBRION = 5`` runs ``1 + 6 N`` steps. This is the "progress
    extrapolation" baseline's denominator too.
    """
    ib, nsw = physics["IBRION"], physics["NSW"]
    atoms = physics["AtomNumber"]
    relax = np.isin(ib, (1.0, 2.0, 3.0))
    with np.errstate(invalid="ignore"):
        relax_total = np.minimum(k + np.where(np.isfinite(steps_left), steps_left, np.inf),
                                 np.where(np.isfinite(nsw) & (nsw > 0), nsw, np.inf))
    relax_total = np.where(np.isfinite(relax_total), relax_total, np.nan)
    out = np.select([ib == 0, relax, ib == 5], [nsw, relax_total, 1 + 6 * atoms], np.nan)
    return np.where(np.isfinite(out) & (out >= 1), np.maximum(out, k), np.nan)


# progress_features() in parts by what they read: the SCF lines of the step under
# way and the finished ionic steps; each returns its columns in FEATURE_NAMES order.
def _scf_line_features(p: ProgressInputs, phys: Mapping[str, np.ndarray], has1: np.ndarray,
                       d: np.ndarray) -> tuple[np.ndarray, ...]:
    """log10 |dE| of the lines so far of the step under way, and the lines left."""
    n = len(p.now)
    tl = np.asarray(p.trace_len, dtype=np.int64)
    rows = segment_rows(p.trace_starts, tl)
    seg = np.repeat(np.arange(n), tl)
    pos = rows - np.repeat(np.asarray(p.trace_starts, dtype=np.int64), tl)
    lv = log10_abs(p.trace[rows]) if len(rows) else np.zeros(0)
    has_t = tl >= 1
    # position of each sample's last line in lv (segments are back to back)
    end = np.cumsum(tl) - 1
    lvp = lv if len(lv) else np.zeros(1)
    de_last = np.where(has_t, lvp[np.where(has_t, end, 0)], np.nan)
    de_last2 = np.where(tl >= 2, 0.5 * (de_last + lvp[np.where(tl >= 2, end - 1, 0)]), de_last)
    de_min = np.full(n, np.nan)
    if len(rows):
        mins = np.full(n, np.inf)
        np.minimum.at(mins, seg, lv)
        de_min = np.where(has_t, mins, np.nan)
    # Where the self-consistent lines start. In the first ionic step of a fresh
    # run, NELMDL non-self-consistent lines fall steeply, then the SCF jumps up:
    # the first line that rises (after line 1) is the first self-consistent one.
    # In later steps, line 0 carries the ionic energy change and the SCF starts
    # at line 1.
    first_rise = np.full(n, np.iinfo(np.int64).max)
    if len(rows):
        prev_lv = np.concatenate([[np.inf], lv[:-1]])
        rise = (pos >= 2) & (lv > prev_lv)
        np.minimum.at(first_rise, seg[rise], pos[rise])
    rise_seen = first_rise < np.iinfo(np.int64).max
    sc0 = np.where(has1, 1, np.where(rise_seen, first_rise, 1))
    sc_lines = np.maximum(tl - sc0, 0)
    in_sc = pos >= np.repeat(sc0, tl)
    recent = in_sc & (pos >= (np.repeat(tl, tl) - _W_SCF))
    de_slope = _slope(lv[recent], seg[recent], pos[recent], n)
    de_max = np.full(n, np.nan)
    argmax = np.zeros(n, dtype=np.int64)
    if len(rows):
        mx = np.full(n, -np.inf)
        np.maximum.at(mx, seg[in_sc], lv[in_sc])
        de_max = np.where(sc_lines >= 1, mx, np.nan)
        is_max = in_sc & (lv == np.repeat(np.where(np.isfinite(mx), mx, np.inf), tl))
        np.maximum.at(argmax, seg[is_max], pos[is_max])
    lines_since_max = np.where(sc_lines >= 2, tl - 1 - argmax, np.nan)
    log_ediff = log10_abs(phys["EDIFF"])
    de_gap = de_last2 - log_ediff
    with np.errstate(divide="ignore", invalid="ignore"):
        lines_left_slope = np.clip(de_gap / np.maximum(-de_slope, 0.05), 0, 200)
        mean_rate = (de_max - de_last2) / lines_since_max
        lines_left_mean = np.clip(de_gap / np.maximum(mean_rate, 0.05), 0, 200)
    lines_left_slope = np.where(np.isfinite(de_gap) & np.isfinite(de_slope), lines_left_slope,
                                np.nan)
    lines_left_mean = np.where(np.isfinite(de_gap) & (lines_since_max >= 2), lines_left_mean,
                               np.nan)
    nelm = phys["NELM"]
    with np.errstate(invalid="ignore"):
        lines_left_slope = np.where(np.isfinite(nelm) & np.isfinite(d),
                                    np.minimum(lines_left_slope, np.maximum(nelm - d, 0)),
                                    lines_left_slope)
        lines_left_mean = np.where(np.isfinite(nelm) & np.isfinite(d),
                                   np.minimum(lines_left_mean, np.maximum(nelm - d, 0)),
                                   lines_left_mean)
    return (de_last, de_last2, de_min, has_t, rise_seen, sc_lines, de_slope, de_max, lines_since_max,
            de_gap, lines_left_slope, lines_left_mean)


def _ionic_step_features(p: ProgressInputs, phys: Mapping[str, np.ndarray], k: np.ndarray,
                         starts: np.ndarray, v: np.ndarray, first: np.ndarray, last: np.ndarray,
                         has1: np.ndarray) -> tuple[np.ndarray, ...]:
    """Trajectory of the finished ionic steps: decay of force and |d E|, steps left."""
    n = len(p.now)
    w = np.minimum(k, _W_IONIC)
    irows = segment_rows(starts + k - w, w)
    iseg = np.repeat(np.arange(n), w)
    ipos = irows - np.repeat(starts + k - w, w)
    f = p.values[irows, 2] if len(irows) else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lf = np.where(np.isfinite(f) & (f > 0), np.log10(np.where(f > 0, f, 1.0)), np.nan)
    force_slope = _slope(lf, iseg, ipos, n)
    fl = v[last, 2]
    ff = v[first, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        force_last = np.where(has1 & (fl > 0), np.log10(np.where(fl > 0, fl, 1.0)), np.nan)
        force_first = np.where(has1 & (ff > 0), np.log10(np.where(ff > 0, ff, 1.0)), np.nan)
    ediffg = phys["EDIFFG"]
    by_force = ediffg < 0
    log_g = log10_abs(ediffg)
    force_gap = np.where(by_force, force_last - log_g, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        steps_left_force = np.where(by_force & np.isfinite(force_slope),
                                    np.clip(force_gap / np.maximum(-force_slope, 0.01), 0, 2000),
                                    np.nan)
    lde = log10_abs(p.values[irows, 1]) if len(irows) else np.zeros(0)
    de_i_slope = _slope(lde, iseg, ipos, n)
    dE_last = np.where(has1, log10_abs(v[last, 1]), np.nan)
    by_energy = ediffg > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        steps_left_energy = np.where(by_energy & np.isfinite(de_i_slope),
                                     np.clip((dE_last - log_g) / np.maximum(-de_i_slope, 0.01),
                                             0, 2000), np.nan)
    steps_left = np.where(by_force, steps_left_force, steps_left_energy)
    return (force_last, force_first, force_slope, force_gap, steps_left_force, dE_last, de_i_slope,
            steps_left_energy, steps_left)


def progress_features(p: ProgressInputs) -> np.ndarray:
    """The :data:`FEATURE_NAMES` columns for every sample: float32, ``(n, len(FEATURE_NAMES))``."""
    n = len(p.now)
    v = p.values if len(p.values) else np.zeros((1, 4))
    k = np.asarray(p.k, dtype=np.int64)
    now = np.asarray(p.now, dtype=np.float64)
    starts = np.asarray(p.starts, dtype=np.int64)
    phys = {c: np.asarray(p.physics.get(c, np.full(n, np.nan)), dtype=np.float64)
            for c in PHYSICS_COLUMNS}
    has1, has2 = k >= 1, k >= 2
    first = np.where(has1, starts, 0)
    last = np.where(has1, starts + k - 1, 0)
    prev = np.where(has2, starts + k - 2, 0)
    t1 = np.where(has1, v[first, 0], np.nan)
    tk = np.where(has1, v[last, 0], 0.0)
    tprev = np.where(has2, v[prev, 0], np.nan)
    n1 = np.where(has1, v[first, 3], np.nan)
    nk = np.where(has1, v[last, 3], np.nan)
    # SCF steps of steps 2..k: a cumulative sum over all rows
    scf_col = p.values[:, 3]
    if np.isnan(scf_col).any():
        scf_col = np.nan_to_num(scf_col)
    cs = np.zeros(len(p.values) + 1)
    np.cumsum(scf_col, out=cs[1:])
    later_scf = np.where(has2, cs[np.where(has2, starts + k, 0)] - cs[np.where(has2, starts + 1, 0)],
                         np.nan)
    now_eff = np.maximum(now, tk)
    startup = np.full(n, np.nan) if p.startup is None else np.asarray(p.startup, dtype=np.float64)
    # the step under way started at the end of the last finished step, or after start-up
    t0 = np.where(has1, tk, np.where(np.isfinite(startup), startup, 0.0))
    in_step = np.maximum(now_eff - t0, 0.0)
    prerun = np.maximum(np.asarray(p.prerun, dtype=np.float64), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scf_later_mean = later_scf / (k - 1)
        tau_later = (tk - np.where(has2, v[first, 0], np.nan)) / later_scf
        tau_first = (t1 - np.where(np.isfinite(startup), startup, 0.0)) / n1
        step_time = (tk - np.where(has2, v[first, 0], np.nan)) / (k - 1)
        last_step = np.where(has2, tk - tprev, t1)
        # mean SCF lines of a step to expect for the step under way
        expected_scf = np.where(has2, scf_later_mean, np.where(has1, n1, np.nan))
        d = np.asarray(p.scf, dtype=np.float64)
        d = np.where(d >= 0, d, np.nan)
        # d lines written and one under way: (d + 0.5) lines so far on average
        tau_now = np.where(d > 0, in_step / (d + 0.5), np.nan)

    (de_last, de_last2, de_min, has_t, rise_seen, sc_lines, de_slope, de_max, lines_since_max,
     de_gap, lines_left_slope, lines_left_mean) = _scf_line_features(p, phys, has1, d)

    (force_last, force_first, force_slope, force_gap, steps_left_force, dE_last, de_i_slope,
     steps_left_energy, steps_left) = _ionic_step_features(
        p, phys, k, starts, v, first, last, has1)
    total_steps = expected_ionic_steps(phys, k, steps_left)
    nsw = phys["NSW"]
    with np.errstate(divide="ignore", invalid="ignore"):
        steps_over_nsw = np.where(nsw > 0, k / nsw, np.nan)
        nsw_left = np.where(nsw > 0, nsw - k, np.nan)
        # finite differences: at most 1 + 6 N displacements (fewer with symmetry, IBRION=6)
        phonon = np.isin(phys["IBRION"], (5.0, 6.0))
        steps_over_disp = np.where(phonon, k / (1 + 6 * phys["AtomNumber"]), np.nan)

        # --- projections of the total run time, as log(total / elapsed)
        # rest of the step under way at its own pace, from the SCF lines if known
        lines_left = np.where(np.isfinite(lines_left_mean), lines_left_mean, lines_left_slope)
        scf_rest = np.where(np.isfinite(lines_left), lines_left,
                            np.maximum(expected_scf - np.nan_to_num(d), 1.0))
        tau = np.where(np.isfinite(tau_now), tau_now,
                       np.where(np.isfinite(tau_later), tau_later, tau_first))
        rest_now = scf_rest * tau
        proj_step_now = np.log((now_eff + rest_now) / now_eff)
        ionic_time = np.where(has2, step_time, last_step)
        more_steps = np.maximum(total_steps - k - 1, 0)
        proj_ionic_rem = np.where(np.isfinite(total_steps) & (total_steps > k),
                                  rest_now + more_steps * ionic_time, np.nan)
        proj_ionic = np.log((now_eff + proj_ionic_rem) / now_eff)
        single = np.where(total_steps == 1, True, False) | (phys["IBRION"] == -1) | (nsw == 0)
        proj_single = np.where(single & ~has1, proj_step_now, np.nan)
        proj_total = np.where(np.isfinite(proj_ionic), proj_ionic,
                              np.where(single, proj_step_now, np.nan))
        scf_over = np.nan_to_num(d) / expected_scf
        log_prerun = np.log1p(prerun)
        cols = [
            np.log1p(now_eff), log_prerun, log_prerun - np.log1p(now_eff), np.log1p(startup),
            k.astype(np.float64), np.log1p(tk), np.log1p(in_step), np.log1p(t1), n1,
            scf_later_mean, np.log(tau_later), np.log(tau_first), np.log(step_time),
            np.log(last_step), nk, steps_over_nsw, nsw_left, steps_over_disp,
            d, np.log(tau_now), scf_over, de_last, de_last2, de_min,
            np.where(has_t, (has1 | rise_seen).astype(np.float64), np.nan),
            np.where(has_t, sc_lines, np.nan), de_slope, de_max,
            lines_since_max, de_gap, lines_left_slope, lines_left_mean,
            force_last, force_first, force_slope, force_gap, steps_left_force,
            dE_last, de_i_slope, steps_left_energy, steps_left,
            proj_step_now, proj_ionic, proj_total, proj_single,
        ]
    out = np.empty((n, len(cols)), dtype=np.float32)
    for i, c in enumerate(cols):
        out[:, i] = c
    out[~np.isfinite(out)] = np.nan
    # float32, as the trees use them: last-bit differences of numpy's float64
    # functions between instruction sets do not survive the rounding (quantize)
    return out


def physics_from_matrix(X: np.ndarray, names: Sequence[str] | None) -> dict[str, np.ndarray]:
    """The :data:`PHYSICS_COLUMNS` of a pre-run feature matrix whose columns are ``names``."""
    names = list(names or [])
    return {c: (X[:, names.index(c)].astype(np.float64) if c in names
                else np.full(len(X), np.nan)) for c in PHYSICS_COLUMNS}

