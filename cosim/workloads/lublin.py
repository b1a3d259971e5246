"""The Lublin-Feitelson (2003) model of rigid parallel jobs.

U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers:
modeling the characteristics of rigid jobs", JPDC 63(11):1105-1122, 2003;
summarised in the Cunha thesis (seed 003, section 2.3.2). The model has
three parts, each fitted separately for batch and interactive jobs and for
the whole sample ("typeless"):

* **Arrivals** follow a daily cycle. Inter-arrival "work" is
  ``exp(g)`` seconds with ``g ~ Gamma(aarr * arar, barr)`` (rush-hour gaps,
  redrawn when ``g > 13``); it is spent through 48 half-hour buckets whose
  weights come from a ``Gamma(anum, bnum)`` density over bucket indices (the
  day starting at bucket 11), normalised to mean 1. A bucket with weight 2
  passes time half as fast, so twice as many jobs arrive in it.
* **Sizes** are serial with probability ``serial_prob``; otherwise
  ``log2(size)`` is two-stage uniform (``U(ulow, umed)`` with probability
  ``uprob``, else ``U(umed, uhi)``, ``uhi = log2(machine size)``) and it is
  rounded to an integer (a power-of-two size) with probability
  ``pow2_prob``.
* **Run times** are ``exp(h)`` seconds, ``h`` hyper-Gamma: ``Gamma(a1, b1)``
  with probability ``p = pa * size + pb`` (clipped to [0, 1]), else
  ``Gamma(a2, b2)``; redrawn when ``h > 12``. ``pa < 0`` makes larger jobs
  run longer.

Parameter values are the published ones, as distributed with the authors'
reference implementation of the model (``m_lublin99.c``, Parallel Workloads
Archive, models page); they are facts of the model, cited per constant below.
The machine-size dependent ones (``uhi``, ``umed``) are expressed as offsets
from ``log2(procs)`` so the model scales: the reference values are for 128
processors (batch ``umed = uhi - 2``, interactive ``uhi = log2(P) - 1.5`` and
``umed = uhi - 2.5``, typeless ``umed = uhi - 2.5``).

The default ``kind="typeless"`` uses the whole-sample parameters: that is
how the widely used "Lublin-256" trace (``traces/lublin_256.swf``, the DBF
and RLScheduler workload) was generated (all its jobs have queue 0 and 24.9 %
serial jobs, matching the typeless 24.4 % rather than batch 29.3 %).

Examples:
    >>> w = lublin(1000, procs=128, seed=1)
    >>> len(w), int(w.procs.max()) <= 128, bool((w.run >= 1).all())
    (1000, True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosim.errors import WorkloadError
from cosim.workloads.base import Workload

__all__ = ["LublinParams", "LUBLIN_PARAMS", "LUBLIN_KINDS", "lublin", "arrival_weights"]

BUCKETS = 48  # half-hour buckets per day
SECONDS_IN_BUCKET = 86400 / BUCKETS
CYCLIC_DAY_START = 11  # the fitted day starts at bucket 11 (m_lublin99.c)
MAX_LOG_RUN = 12.0  # exp(12) s ~ 1.9 days; larger draws are redrawn
MAX_LOG_GAP = 13.0  # exp(13) s ~ 5 days; larger draws are redrawn


@dataclass(frozen=True)
class LublinParams:
    """Parameters of one job type of the Lublin-Feitelson model.

    Attributes:
        serial_prob: share of serial (1-processor) jobs.
        pow2_prob: share of jobs whose size is a power of two (of all jobs).
        ulow: log2 of the smallest parallel size (the first uniform's low end).
        umed_offset: ``uhi - umed``; umed is where the two uniforms meet.
        uhi_offset: ``log2(machine size) - uhi``; 0 lets jobs span the machine.
        uprob: probability of the first uniform ``U(ulow, umed)``.
        a1, b1, a2, b2: shape and scale of the two Gammas of ``log(run time)``.
        pa, pb: mixing probability of the first Gamma, ``p = pa * size + pb``.
        aarr, barr: shape and scale of the Gamma of ``log(gap)`` at rush hours.
        arar: "arrive rush to all ratio", multiplies ``aarr`` so the gaps
            describe all hours of the day.
        anum, bnum: shape and scale of the Gamma that weights the buckets.
    """

    serial_prob: float
    pow2_prob: float
    ulow: float
    umed_offset: float
    uhi_offset: float
    uprob: float
    a1: float
    b1: float
    a2: float
    b2: float
    pa: float
    pb: float
    aarr: float
    barr: float
    arar: float
    anum: float
    bnum: float


# Values from Lublin & Feitelson (2003), as in the reference m_lublin99.c.
LUBLIN_PARAMS: dict[str, LublinParams] = {
    "batch": LublinParams(
        serial_prob=0.2927, pow2_prob=0.6686, ulow=1.2, umed_offset=2.0, uhi_offset=0.0,
        uprob=0.875, a1=6.57, b1=0.823, a2=639.1, b2=0.0156, pa=-0.003, pb=0.6986,
        aarr=6.0415, barr=0.8531, arar=1.0519, anum=6.1271, bnum=5.2740,
    ),
    "interactive": LublinParams(
        serial_prob=0.1541, pow2_prob=0.625, ulow=1.0, umed_offset=2.5, uhi_offset=1.5,
        uprob=0.705, a1=3.8351, b1=0.6605, a2=7.073, b2=0.6856, pa=-0.0118, pb=0.9156,
        aarr=6.5510, barr=0.6621, arar=0.9797, anum=8.9186, bnum=3.6680,
    ),
    "typeless": LublinParams(
        serial_prob=0.244, pow2_prob=0.576, ulow=0.8, umed_offset=2.5, uhi_offset=0.0,
        uprob=0.86, a1=4.2, b1=0.94, a2=312.0, b2=0.03, pa=-0.0054, pb=0.78,
        aarr=10.2303, barr=0.4871, arar=1.0225, anum=8.1737, bnum=3.9631,
    ),
}

#: Accepted ``kind`` values: one parameter set, or "both" (batch and
#: interactive streams merged by arrival time, as the reference model does).
LUBLIN_KINDS: tuple[str, ...] = ("typeless", "batch", "interactive", "both")


def _gamma_cdf(x: float, shape: float, scale: float) -> float:
    """Regularised lower incomplete gamma P(shape, x / scale), by its power series."""
    z = x / scale
    if z <= 0:
        return 0.0
    term = total = 1.0 / shape
    a = shape
    for _ in range(1000):
        a += 1.0
        term *= z / a
        total += term
        if term < total * 1e-15:
            break
    return total * math.exp(shape * math.log(z) - z - math.lgamma(shape))


def arrival_weights(kind: str | LublinParams = "typeless") -> np.ndarray:
    """Relative arrival intensity of the 48 half-hour buckets of a day (mean 1).

    Bucket ``k`` covers ``[k * 1800, (k + 1) * 1800)`` seconds after midnight.
    ``kind`` is ``"typeless"``, ``"batch"``, ``"interactive"``, or a
    :class:`LublinParams` (its ``anum``, ``bnum``).
    """
    p = kind if isinstance(kind, LublinParams) else _params(kind)
    w = np.empty(BUCKETS)
    # The fitted density is over bucket indices starting at CYCLIC_DAY_START;
    # indices past the end of the day wrap to its beginning.
    for i in range(CYCLIC_DAY_START, CYCLIC_DAY_START + BUCKETS):
        w[(i - 1) % BUCKETS] = _gamma_cdf(i + 0.5, p.anum, p.bnum) - _gamma_cdf(i - 0.5, p.anum, p.bnum)
    return w / w.mean()


def _params(kind: str) -> LublinParams:
    if kind not in LUBLIN_PARAMS:
        raise WorkloadError("lublin.kind", repr(kind), f"one of {sorted(LUBLIN_PARAMS)}")
    return LUBLIN_PARAMS[kind]


def _truncated_gamma(rng: np.random.Generator, shape, scale, limit: float, n: int) -> np.ndarray:
    """Gamma draws, each redrawn until it is <= limit (as the reference model does)."""
    shape = np.broadcast_to(np.asarray(shape, dtype=float), (n,))
    scale = np.broadcast_to(np.asarray(scale, dtype=float), (n,))
    out = rng.gamma(shape, scale)
    bad = np.flatnonzero(out > limit)
    while bad.size:
        out[bad] = rng.gamma(shape[bad], scale[bad])
        bad = bad[out[bad] > limit]
    return out


class _Stream:
    """One job type's arrival work and per-job attributes, drawn once."""

    def __init__(self, p: LublinParams, n: int, machine: int, start_bucket: int,
                 rng: np.random.Generator, kind: str):
        self.kind = kind
        gaps = np.exp(_truncated_gamma(rng, p.aarr * p.arar, p.barr, MAX_LOG_GAP, n))
        self.points = np.cumsum(gaps / SECONDS_IN_BUCKET)
        w = np.roll(arrival_weights(p), -start_bucket)
        self.weights = w
        self.cum = np.concatenate([[0.0], np.cumsum(w)])  # cum[-1] == 48
        self.offset = start_bucket * SECONDS_IN_BUCKET
        self.procs = _sizes(p, n, machine, rng)
        self.run = _run_times(p, self.procs, rng)

    def times(self, rate: float) -> np.ndarray:
        """Arrival times (s from the start) when arrivals are ``rate`` times denser."""
        q = self.points / rate
        day = np.floor(q / BUCKETS)
        r = q - day * BUCKETS
        k = np.clip(np.searchsorted(self.cum, r, side="right") - 1, 0, BUCKETS - 1)
        frac = (r - self.cum[k]) / self.weights[k]
        return day * 86400.0 + (k + frac) * SECONDS_IN_BUCKET


def _sizes(p: LublinParams, n: int, machine: int, rng: np.random.Generator) -> np.ndarray:
    uhi = max(math.log2(machine) - p.uhi_offset, 0.0)
    ulow = min(p.ulow, uhi)
    umed = uhi - p.umed_offset
    if umed < ulow:  # small machines: keep both uniforms non-empty
        umed = (ulow + uhi) / 2
    u = rng.random(n)
    first = rng.random(n) <= p.uprob
    lo = np.where(first, ulow, umed)
    hi = np.where(first, umed, uhi)
    par = lo + rng.random(n) * (hi - lo)
    pow2 = u <= p.serial_prob + p.pow2_prob
    par = np.where(pow2, np.floor(par + 0.5), par)
    size = np.floor(2.0**par + 0.5)
    # A rounded exponent may overshoot a machine whose size is not a power of two.
    largest_pow2 = 2.0 ** math.floor(math.log2(machine))
    size = np.where(pow2 & (size > machine), largest_pow2, np.minimum(size, machine))
    size = np.where(u <= p.serial_prob, 1.0, size)
    return np.maximum(size, 1).astype(np.int64)


def _run_times(p: LublinParams, procs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(procs)
    mix = np.clip(p.pa * procs + p.pb, 0.0, 1.0)
    first = rng.random(n) <= mix
    h = _truncated_gamma(rng, np.where(first, p.a1, p.a2), np.where(first, p.b1, p.b2),
                         MAX_LOG_RUN, n)
    return np.floor(np.exp(h))  # whole seconds, >= 1 since h > 0


def _merge(streams: list[_Stream], n: int, rate: float):
    times = np.concatenate([s.times(rate) for s in streams])
    which = np.concatenate([np.full(len(s.points), i) for i, s in enumerate(streams)])
    index = np.concatenate([np.arange(len(s.points)) for s in streams])
    order = np.argsort(times, kind="stable")[:n]
    return times[order], which[order], index[order]


def _offered_load(streams, n, rate, machine) -> float:
    times, which, index = _merge(streams, n, rate)
    work = sum(float((s.run[index[which == i]] * s.procs[index[which == i]]).sum())
               for i, s in enumerate(streams))
    return work / (machine * times[-1])


def lublin(
    n_jobs: int,
    *,
    procs: int = 256,
    seed: int = 0,
    kind: str = "typeless",
    arrival_rate: float = 1.0,
    load: float | None = None,
    start_hour: int = 0,
    params: LublinParams | None = None,
) -> Workload:
    """Generate ``n_jobs`` rigid jobs from the Lublin-Feitelson model.

    Args:
        n_jobs: number of jobs (>= 0).
        procs: machine size in processors; job sizes are in ``[1, procs]``.
        seed: seed of the one ``numpy`` generator used.
        kind: ``"typeless"`` (whole-sample fit, default; how Lublin-256 was
            made), ``"batch"``, ``"interactive"``, or ``"both"`` (batch and
            interactive arrival streams merged; then
            ``features["interactive"]`` marks the interactive jobs).
        arrival_rate: multiplies the arrival intensity (2.0 = twice as many
            jobs per day, about twice the load); the daily cycle is kept.
        load: instead of ``arrival_rate``, the offered load to reach:
            ``sum(run * procs) / (procs_machine * last_submit)`` (the model's
            own definition; time counted from the start, midnight). The
            arrival rate is solved for it (daily cycle kept); whole-second
            submit times make it exact to about 1e-4.
        start_hour: hour of the day (0-23) at which time 0 falls.
        params: the model's parameters instead of the published ones of
            ``kind`` (a single kind, not ``"both"``); randomised ones come
            from :mod:`cosim.workloads.mixture`.

    Returns:
        Workload with integer submit and run times in seconds, ``req_time``
        equal to the run time (use :mod:`cosim.workloads.estimates` for user
        estimates), ``max_procs = procs``, users unknown.

    Raises:
        WorkloadError: an argument is out of range (the message names it).
    """
    _check_int("lublin.n_jobs", n_jobs, 0)
    _check_int("lublin.procs", procs, 1)
    _check_int("lublin.start_hour", start_hour, 0)
    if start_hour > 23:
        raise WorkloadError("lublin.start_hour", repr(start_hour), "an hour in 0..23")
    if kind not in LUBLIN_KINDS:
        raise WorkloadError("lublin.kind", repr(kind), f"one of {list(LUBLIN_KINDS)}")
    if not (isinstance(arrival_rate, int | float) and math.isfinite(arrival_rate) and arrival_rate > 0):
        raise WorkloadError("lublin.arrival_rate", repr(arrival_rate), "a positive finite number")
    if load is not None:
        if not (isinstance(load, int | float) and math.isfinite(load) and load > 0):
            raise WorkloadError("lublin.load", repr(load), "a positive finite number or None")
        if arrival_rate != 1.0:
            raise WorkloadError("lublin.load", f"load={load} with arrival_rate={arrival_rate}",
                                "only one of load and arrival_rate")

    if params is not None and (kind == "both" or not isinstance(params, LublinParams)):
        raise WorkloadError("lublin.params", f"{type(params).__name__} with kind={kind!r}",
                            "a LublinParams with one kind (typeless, batch or interactive)")

    rng = np.random.default_rng(seed)
    kinds = ["batch", "interactive"] if kind == "both" else [kind]
    streams = [_Stream(params or LUBLIN_PARAMS[k], n_jobs, procs, 2 * start_hour, rng, k)
               for k in kinds]

    rate = arrival_rate
    if load is not None and n_jobs > 0:
        rate = _solve_rate(streams, n_jobs, procs, load)

    if n_jobs == 0:
        times = np.empty(0)
        which = index = np.empty(0, dtype=np.int64)
    else:
        times, which, index = _merge(streams, n_jobs, rate)
    run = np.empty(n_jobs)
    size = np.empty(n_jobs, dtype=np.int64)
    for i, s in enumerate(streams):
        sel = which == i
        run[sel] = s.run[index[sel]]
        size[sel] = s.procs[index[sel]]
    features = {}
    if kind == "both":
        features["interactive"] = which == kinds.index("interactive")
    rate_note = f", load={load}" if load is not None else (
        f", arrival_rate={arrival_rate}" if arrival_rate != 1.0 else "")
    if params is not None:
        rate_note += ", params randomised"
    return Workload.from_columns(
        submit=np.floor(times),
        run=run,
        procs=size,
        req_time=np.maximum(run, 1.0),
        features=features,
        max_procs=procs,
        source=f"lublin(kind={kind}, procs={procs}, seed={seed}{rate_note})",
    )


def _solve_rate(streams, n, machine, target: float) -> float:
    """Arrival-rate multiplier giving the target offered load (bisection in log space)."""
    # Offered load grows with the rate (the same jobs arrive sooner), so a
    # bracket found by doubling and a bisection on log(rate) converge.
    lo, hi = 1.0, 1.0
    while _offered_load(streams, n, lo, machine) > target:
        lo /= 2
        if lo < 1e-9:
            break
    while _offered_load(streams, n, hi, machine) < target:
        hi *= 2
        if hi > 1e9:
            break
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if _offered_load(streams, n, mid, machine) < target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return math.sqrt(lo * hi)


def _check_int(where: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise WorkloadError(where, repr(value), f"an integer >= {minimum}")
