"""Cut episodes out of a long workload: windows of consecutive jobs, sampled jobsets.

* :func:`window` takes ``n`` consecutive jobs from a (random) offset and
  shifts them so the first submit is at 0: the episode sampling of DBF
  (seed 000) and RLScheduler, which train on random windows of a trace.
* :func:`jobsets` draws jobs at random from the whole trace and re-times them
  with Poisson arrivals: DRAS (seed 004) phase-1 "sampled jobsets", whose
  arrival rate follows the average inter-arrival time of the original trace.
* :func:`curriculum` chains DRAS's three training phases: sampled jobsets,
  periods of the real trace, then synthetic jobsets (job shapes drawn with
  replacement, arrivals following the trace's hourly and daily pattern at
  rates varied around the trace's).
* :func:`arrival_profile` measures that pattern (relative arrival rate by
  hour of day and by day of week) and :func:`profiled_arrivals` draws
  arrival times from it (a Poisson process whose rate changes every hour).

Dependencies between jobs (``prev_job`` / ``think``) only survive when the
preceding job is in the same episode; otherwise both are reset to -1 and the
job is counted in ``cleaning["prev_job_cut"]``.

Examples:
    >>> from cosim.workloads.base import Workload
    >>> w = Workload.from_columns(submit=[0, 10, 20, 30], run=[5] * 4, procs=[1] * 4)
    >>> window(w, 2, start=1).submit.tolist()
    [0.0, 10.0]
    >>> [len(s) for s in jobsets(w, 3, 2, arrival_rate=0.1, seed=0)]
    [2, 2, 2]
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from cosim.errors import WorkloadError
from cosim.workloads.base import Workload

__all__ = ["window", "source_file", "jobsets", "curriculum", "arrival_profile", "profiled_arrivals",
           "HOUR", "DAY", "WEEK"]


HOUR = 3600.0
DAY = 24 * HOUR
WEEK = 7 * DAY


def _check_count(where: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
        expected = f"an integer in {low}..{high}" if high >= low else f"an integer >= {low} (the workload is too small)"
        raise WorkloadError(where, repr(value), expected)
    return int(value)


def _cut_dependencies(w: Workload) -> Workload:
    """Reset prev_job/think of jobs whose preceding job is not in ``w``."""
    has_prev = w.prev_job >= 0
    outside = has_prev & ~np.isin(w.prev_job, w.job_id)
    cleaning = dict(w.cleaning)
    cleaning["prev_job_cut"] = int(outside.sum())
    if outside.any():
        w = replace(w, prev_job=np.where(outside, -1, w.prev_job),
                    think=np.where(outside, -1.0, w.think))
    return replace(w, cleaning=cleaning)


def window(
    workload: Workload,
    n_jobs: int,
    *,
    rng_or_seed: int | np.random.Generator | None = None,
    start: int | None = None,
) -> Workload:
    """``n_jobs`` consecutive jobs from a random (or given) offset, first submit at 0.

    Args:
        workload: the source, sorted by submit time.
        n_jobs: window length, 1..len(workload).
        rng_or_seed: seed or generator for the random offset, uniform over
            ``0..len(workload) - n_jobs``. Required unless ``start`` is given.
        start: explicit offset (index of the first job) instead of a random one.

    Returns:
        The window; ``source`` records the offset, ``cleaning["prev_job_cut"]``
        counts dependencies on jobs before the window, ``cleaning["outside_window"]``
        the jobs left out, and the per-job counts (``req_time_missing``,
        ``run_exceeds_request``, ``run_zero_kept``) are the window's own.

    Raises:
        WorkloadError: ``n_jobs`` or ``start`` out of range, or neither
            ``start`` nor ``rng_or_seed`` given.
    """
    total = len(workload)
    n = _check_count("window.n_jobs", n_jobs, 1, total)
    if start is None:
        if rng_or_seed is None:
            raise WorkloadError("window.rng_or_seed", "None", "a seed or numpy Generator, or an explicit start")
        rng = _rng(rng_or_seed, "window.rng_or_seed")
        first = int(rng.integers(0, total - n, endpoint=True))
    else:
        first = _check_count("window.start", start, 0, total - n)
    w = workload.take(slice(first, first + n)).shifted()
    w = _cut_dependencies(w)
    _recount(w, left_out=total - n)
    w.source = f"{workload.source}{_JOBS}{first}..{first + n - 1}]".lstrip()
    return w


#: How a window's ``source`` records its rows after the trace's file.
_JOBS = " [jobs "


def source_file(source: str) -> str:
    """The file of a window's ``source``, without the rows it records.

    Examples:
        >>> source_file("traces/a.swf.gz [jobs 0..2999]")
        'traces/a.swf.gz'
    """
    return source.split(_JOBS, 1)[0]


def _recount(w: Workload, left_out: int) -> None:
    """Per-job cleaning counts of a window over the window's own jobs.

    A trace reader counts them over the whole file; a 2,000-job window of a
    10,000-job trace would otherwise warn "10000 of 2000 jobs (500%) have no
    requested time". Counts of dropped jobs stay the file's (no window holds
    them); ``outside_window`` adds the kept jobs this window leaves out, so
    the file's size stays known (dropped + outside_window + len).
    """
    c = w.cleaning
    missing = w.features.get("req_time_missing")
    if missing is not None:
        missing = np.asarray(missing, dtype=bool)
        c["req_time_missing"] = int(missing.sum())
        c["run_exceeds_request"] = int((~missing & (w.run > w.req_time)).sum())
    if "run_zero_kept" in c:
        c["run_zero_kept"] = int((w.run == 0).sum())
    c["outside_window"] = c.get("outside_window", 0) + left_out


def jobsets(
    workload: Workload,
    n_sets: int,
    set_size: int,
    *,
    arrival_rate: float | None = None,
    seed: int = 0,
) -> list[Workload]:
    """Job sets sampled from ``workload`` and re-timed with Poisson arrivals (DRAS phase 1).

    Each set draws ``set_size`` distinct jobs uniformly at random (kept in
    their trace order) and gives them new submit times: exponential gaps of
    mean ``1 / arrival_rate``, the first job at 0. Set ``i`` depends only on
    ``seed`` and ``i`` (one spawned stream per set), so asking for more sets
    keeps the earlier ones.

    Args:
        workload: the source trace.
        n_sets: number of sets (>= 1).
        set_size: jobs per set, 1..len(workload).
        arrival_rate: jobs per second; default the trace's own average,
            ``(n - 1) / (last submit - first submit)``.
        seed: seed of the sampling and the arrival times.

    Returns:
        ``n_sets`` workloads. Job ids are the original ones; ``prev_job`` and
        ``think`` are reset to -1 when the preceding job was not drawn.

    Raises:
        WorkloadError: an argument out of range, or no ``arrival_rate`` given
            for a trace whose submit times do not span any time.
    """
    total = len(workload)
    sets = _check_count("jobsets.n_sets", n_sets, 1, 10**9)
    size = _check_count("jobsets.set_size", set_size, 1, total)
    if arrival_rate is None:
        span = float(workload.submit[-1] - workload.submit[0]) if total else 0.0
        if total < 2 or span <= 0:
            raise WorkloadError("jobsets.arrival_rate", "None for a trace whose submits span no time",
                                "an explicit arrival rate (jobs per second)")
        arrival_rate = (total - 1) / span
    elif (isinstance(arrival_rate, bool) or not isinstance(arrival_rate, int | float)
          or not math.isfinite(arrival_rate) or arrival_rate <= 0):
        raise WorkloadError("jobsets.arrival_rate", repr(arrival_rate), "a positive finite number of jobs per second")

    out = []
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(sets)):
        rng = np.random.default_rng(child)
        index = np.sort(rng.choice(total, size=size, replace=False))
        gaps = rng.exponential(1.0 / arrival_rate, size=size)
        gaps[0] = 0.0
        w = workload.take(index)
        w.submit = np.cumsum(gaps)
        w = _cut_dependencies(w)
        w.source = (f"{workload.source} [jobset {i}: {size} sampled jobs, "
                    f"Poisson {arrival_rate:.6g}/s, seed {seed}]").lstrip()
        out.append(w)
    return out


def curriculum(
    workload: Workload,
    set_size: int,
    *,
    sampled: int = 10,
    periods: int = 10,
    synthetic: int = 10,
    load_range: tuple[float, float] = (0.75, 1.5),
    seed: int = 0,
    arrival_shape: bool = True,
) -> list[Workload]:
    """DRAS's three-phase training sequence (seed 004, section III-C), in order.

    1. ``sampled`` jobsets from :func:`jobsets` (controlled Poisson arrivals at
       the trace's average rate: the easiest setting);
    2. ``periods`` windows of consecutive jobs from random offsets (the real
       arrival patterns, bursts included);
    3. ``synthetic`` jobsets that mimic the trace's patterns (DRAS section
       IV-C: "hourly and daily job arrivals, and distributions of job sizes
       and runtimes"): jobs drawn with replacement from the trace (each job's
       size, run time and request kept together, so the size and run-time
       distributions and their correlation are the trace's; renumbered
       ``1..set_size``), arriving by :func:`profiled_arrivals` with the
       trace's :func:`arrival_profile` from a random hour of the week, at the
       trace's average rate times a factor uniform in ``load_range``: states
       the trace may not contain.

    Args:
        workload: the source trace.
        set_size: jobs per episode, 1..len(workload).
        sampled, periods, synthetic: episodes in each phase (>= 0, total >= 1).
        load_range: arrival-rate factors of the synthetic phase.
        seed: seed of every draw.
        arrival_shape: False gives the synthetic phase plain Poisson arrivals
            (no hourly or daily pattern).

    Returns:
        The episodes' workloads, phase 1 first; a trainer plays them in order
        (``SchedulingEnv(..., episode_source="curriculum", curriculum=...)``).

    Raises:
        WorkloadError: a count or ``load_range`` out of range.

    Examples:
        >>> from cosim.workloads.base import Workload
        >>> w = Workload.from_columns(submit=range(0, 100, 10), run=[5] * 10, procs=[1] * 10)
        >>> [len(s) for s in curriculum(w, 4, sampled=1, periods=1, synthetic=1)]
        [4, 4, 4]
    """
    total = len(workload)
    size = _check_count("curriculum.set_size", set_size, 1, total)
    counts = [_check_count(f"curriculum.{name}", value, 0, 10**9)
              for name, value in (("sampled", sampled), ("periods", periods), ("synthetic", synthetic))]
    if sum(counts) < 1:
        raise WorkloadError("curriculum", "no episodes", "sampled + periods + synthetic >= 1")
    lo, hi = (float(x) for x in load_range)
    if not (0 < lo <= hi and math.isfinite(hi)):
        raise WorkloadError("curriculum.load_range", repr(load_range), "0 < low <= high, finite")
    seq_phase1, seq_phase2, seq_phase3 = np.random.SeedSequence(seed).spawn(3)
    out = jobsets(workload, counts[0], size, seed=int(seq_phase1.generate_state(1)[0])) \
        if counts[0] else []
    rng = np.random.default_rng(seq_phase2)
    out += [window(workload, size, rng_or_seed=rng) for _ in range(counts[1])]
    span = float(workload.submit[-1] - workload.submit[0]) if total else 0.0
    rate = (total - 1) / span if total > 1 and span > 0 else 1.0 / 60.0
    hourly, daily = arrival_profile(workload) if arrival_shape else (np.ones(24), np.ones(7))
    shaped = bool(np.ptp(hourly) or np.ptp(daily))
    for i, child in enumerate(seq_phase3.spawn(counts[2])):
        rng = np.random.default_rng(child)
        index = rng.choice(total, size=size, replace=True)
        factor = float(rng.uniform(lo, hi))
        if shaped:
            start = float(rng.uniform(0.0, WEEK))
            submit = profiled_arrivals(size, rate * factor, hourly, daily, rng, start=start)
            submit -= submit[0]
            how = f"hourly/daily profile from hour {start / HOUR:.0f} of the week"
        else:
            gaps = rng.exponential(1.0 / (rate * factor), size=size)
            gaps[0] = 0.0
            submit = np.cumsum(gaps)
            how = "Poisson"
        w = workload.take(index)
        w = replace(w, job_id=np.arange(1, size + 1, dtype=np.int64), submit=submit,
                    prev_job=np.full(size, -1, dtype=np.int64), think=np.full(size, -1.0),
                    cleaning=dict(w.cleaning))
        w.source = (f"{workload.source} [synthetic {i}: {size} jobs drawn with replacement, "
                    f"{how}, mean {rate * factor:.6g}/s]").lstrip()
        out.append(w)
    return out


def _exposure(t0: float, t1: float, period: float, bins: int) -> np.ndarray:
    """Seconds of ``[t0, t1]`` that fall in each of ``bins`` equal parts of a ``period`` cycle."""
    width = period / bins
    cycles = math.floor((t1 - t0) / period)
    out = np.full(bins, cycles * width)
    a, b = t0 + cycles * period, t1          # less than one period left
    first = math.floor(a / width)
    for k in range(first, first + 2 * bins + 1):
        lo = k * width
        overlap = min(lo + width, b) - max(lo, a)
        if overlap > 0:
            out[k % bins] += overlap
    return out


def _relative_rate(times: np.ndarray, t0: float, t1: float, period: float, bins: int) -> np.ndarray:
    """Arrivals per second of exposure in each bin of the cycle, scaled to mean 1."""
    counts = np.bincount(((times % period) // (period / bins)).astype(np.int64) % bins,
                         minlength=bins).astype(float)
    exposure = _exposure(t0, t1, period, bins)
    rate = np.where(exposure > 0, counts / np.maximum(exposure, 1e-12), np.nan)
    if not np.isfinite(rate).any() or np.nanmean(rate) <= 0:
        return np.ones(bins)
    rate = np.where(np.isfinite(rate), rate, np.nanmean(rate))
    return rate / rate.mean()


def arrival_profile(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """The trace's relative arrival rate by hour of day (24 values) and day of week (7).

    Each is arrivals per second of trace time spent in that hour (or day),
    divided by its mean, so both average 1 and the product
    ``hourly[h] * daily[d]`` scales the trace's average rate (hour and day are
    taken as independent factors). Times are the trace's own clock (``submit
    mod 86400``; a trace that starts at midnight has hour 0 at 0). A trace
    spanning less than two days gets a flat hourly profile, less than two
    weeks a flat daily one: too little to tell a pattern from noise.

    Examples:
        >>> t = np.arange(0, 30 * DAY, HOUR / 2)        # every half hour for 30 days
        >>> w = Workload.from_columns(submit=t, run=np.ones(len(t)), procs=np.ones(len(t)))
        >>> hourly, daily = arrival_profile(w)
        >>> bool(np.allclose(hourly, 1, atol=0.02) and np.allclose(daily, 1, atol=0.02))
        True
    """
    if len(workload) < 2:
        return np.ones(24), np.ones(7)
    times = np.asarray(workload.submit, dtype=np.float64)
    t0, t1 = float(times[0]), float(times[-1])
    hourly = _relative_rate(times, t0, t1, DAY, 24) if t1 - t0 >= 2 * DAY else np.ones(24)
    daily = _relative_rate(times, t0, t1, WEEK, 7) if t1 - t0 >= 2 * WEEK else np.ones(7)
    return hourly, daily


def profiled_arrivals(n: int, rate: float, hourly: np.ndarray, daily: np.ndarray,
                      rng: np.random.Generator, *, start: float = 0.0) -> np.ndarray:
    """``n`` arrival times of a Poisson process whose rate changes every hour.

    The rate in the hour beginning at clock time ``t`` is ``rate *
    hourly[hour of day] * daily[day of week]`` (day 0 begins at clock 0).
    Times come from the time-rescaling theorem: unit-rate exponential gaps
    are mapped through the inverse of the cumulative rate, so an hour of rate
    0 gets no arrival.

    Args:
        n: arrivals (>= 1).
        rate: mean arrivals per second (profiles of mean 1 keep it the mean).
        hourly, daily: relative rates (24 and 7 non-negative values, not all 0).
        rng: the generator of the exponential gaps.
        start: clock time (s) the process starts at.

    Returns:
        Sorted absolute times, all after ``start``.
    """
    hourly = np.asarray(hourly, dtype=np.float64)
    daily = np.asarray(daily, dtype=np.float64)
    if hourly.shape != (24,) or daily.shape != (7,) or (hourly < 0).any() or (daily < 0).any():
        raise WorkloadError("profiled_arrivals.profile", f"{hourly.shape} x {daily.shape}",
                            "24 hourly and 7 daily non-negative relative rates")
    if not (np.outer(daily, hourly) > 0).any() or not rate > 0:
        raise WorkloadError("profiled_arrivals.rate", repr(rate), "a positive rate in some hour")
    targets = np.cumsum(rng.exponential(1.0, size=int(n)))   # cumulative rate at each arrival
    first_hour = math.floor(start / HOUR)
    # Hour-slot rates, one week at a time, until the cumulative rate passes the last target.
    edges, cum, k = [start], [0.0], first_hour
    week = int(WEEK // HOUR)
    while cum[-1] < targets[-1]:
        hours = np.arange(k, k + week)
        r = rate * hourly[hours % 24] * daily[(hours // 24) % 7]
        lo = np.maximum(hours * HOUR, start)
        hi = (hours + 1) * HOUR
        edges.extend(hi.tolist())
        cum.extend((cum[-1] + np.cumsum(r * (hi - lo))).tolist())
        k += week
    edges_a, cum_a = np.asarray(edges), np.asarray(cum)
    slot = np.searchsorted(cum_a, targets, side="left") - 1     # cum[slot] < target <= cum[slot+1]
    slot_rate = (cum_a[slot + 1] - cum_a[slot]) / (edges_a[slot + 1] - edges_a[slot])
    return edges_a[slot] + (targets - cum_a[slot]) / slot_rate


def _rng(value, where: str) -> np.random.Generator:
    if isinstance(value, np.random.Generator):
        return value
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0:
        return np.random.default_rng(int(value))
    raise WorkloadError(where, repr(value), "a non-negative integer seed or a numpy Generator")
