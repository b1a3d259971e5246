"""Models of user run-time estimates: replace ``req_time`` given the true run times.

Generated workloads (Lublin, Mao) and traces without estimates (Lublin-256)
only know the actual run time; schedulers that backfill need a requested
time. Three models (Cunha thesis, seed 003, section 2.4):

* ``exact``: the estimate is the run time (at least 1 s).
* ``gaussian``: run time plus noise whose scale grows with the run time,
  ``diff ~ N(0, nu * run)``; ``mode="over"`` takes ``|diff|``, ``"under"``
  takes ``-|diff|``, ``"both"`` the signed value (thesis eq. 2.6); estimates
  below 1 s become 1 s.
* ``tsafrir``: the modal model of Tsafrir, Etsion and Feitelson, "Modeling
  User Runtime Estimates" (JSSPP 2005). Users pick from a few round values;
  about 20 of them cover 89 % of jobs, the maximum allowed estimate being the
  most popular. The model builds such a histogram and hands its values to
  jobs so that every estimate is at least the job's run time.

Each model is a small class whose ``__init__`` only stores parameters and
whose ``estimate(run, rng)`` returns the estimates; :data:`ESTIMATE_MODELS`
maps names to classes and :func:`apply_estimates` applies one to a workload.

Examples:
    >>> from cosim.workloads.base import Workload
    >>> w = Workload.from_columns(submit=[0, 1], run=[100, 0], procs=[1, 1])
    >>> apply_estimates(w, "exact").req_time.tolist()
    [100.0, 1.0]
    >>> g = apply_estimates(w, "gaussian", seed=1, nu=0.5, mode="over")
    >>> bool(g.req_time[0] >= 100)
    True
"""

from __future__ import annotations

import inspect
import math
from dataclasses import replace

import numpy as np

from cosim.errors import WorkloadError
from cosim.workloads.base import Workload

__all__ = [
    "ExactEstimates",
    "GaussianEstimates",
    "TsafrirEstimates",
    "ESTIMATE_MODELS",
    "apply_estimates",
]

MIN_ESTIMATE = 1.0  # seconds; requested times must be positive


class ExactEstimates:
    """Estimates equal to the run time, at least 1 s."""

    name = "exact"

    def estimate(self, run: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Return ``max(run, 1)``; ``rng`` is unused (kept for a common interface)."""
        return np.maximum(np.asarray(run, dtype=float), MIN_ESTIMATE)


class GaussianEstimates:
    """Run time plus Gaussian noise of scale ``nu * run`` (thesis eq. 2.6).

    Args:
        nu: noise scale factor, >= 0 (0 = exact; the thesis uses 0 to 2).
        mode: ``"over"`` (never below the run time), ``"under"`` (never above
            it) or ``"both"`` (two-sided).
    """

    name = "gaussian"
    MODES = ("both", "over", "under")

    def __init__(self, nu: float = 0.5, mode: str = "both"):
        if isinstance(nu, bool) or not isinstance(nu, int | float) or not math.isfinite(nu) or nu < 0:
            raise WorkloadError("estimates.gaussian.nu", repr(nu), "a finite number >= 0")
        if mode not in self.MODES:
            raise WorkloadError("estimates.gaussian.mode", repr(mode), f"one of {list(self.MODES)}")
        self.nu = float(nu)
        self.mode = mode

    def estimate(self, run: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy estimates for the run times ``run`` (seconds)."""
        run = np.asarray(run, dtype=float)
        diff = rng.normal(0.0, 1.0, size=run.shape) * (self.nu * run)
        if self.mode == "over":
            diff = np.abs(diff)
        elif self.mode == "under":
            diff = -np.abs(diff)
        return np.maximum(run + diff, MIN_ESTIMATE)


# --- Tsafrir, Etsion & Feitelson (2005) ------------------------------------
# Parameter values are the published ones (JSSPP 2005 paper and the authors'
# reference implementation on the Parallel Workloads Archive).

_MIN, _HOUR = 60, 3600
HEAD_BINS = 20  # the "head": the 20 most popular estimates
HEAD_SHARE = 89.0  # percent of jobs using a head estimate
# Popularity of head ranks 2..20 (percent): a * exp(b * rank) + c; rank 1 (the
# maximum estimate) gets what is left of HEAD_SHARE.
HEAD_SIZE = (14.0491, -0.177531, 0.462513)
# Popularity of tail ranks 21...: a * rank ** b, scaled to 100 - HEAD_SHARE.
TAIL_SIZE = (795.6, -2.267)
# Tail times: relative time y = (a - 1) x / (a - x) at relative time rank x,
# with a = 1 + p * K ** q for K estimate values in all.
TAIL_TIME = (12.1039, -0.6026)
# Number of distinct estimate values as a function of the number of jobs
# (piecewise linear through these points, constant beyond the last).
N_BINS_POINTS = ((0, 0), (20, 10), (200, 20), (1000, 35), (10_000, 90), (70_000, 340), (250_000, 565))
# Values popular in all four traces studied (SDSC, CTC, KTH, Blue Horizon).
JOINT_VALUES = tuple(m * _MIN for m in (5, 15, 10, 20, 30)) + tuple(
    h * _HOUR for h in (1, 2, 3, 4, 5, 6, 8, 10, 12, 18))
# Round steps used, largest first, to complete the head below the maximum.
ROUND_STEPS = tuple(h * _HOUR for h in (200, 100, 50, 10, 5, 2, 1)) + tuple(
    m * _MIN for m in (20, 10, 5))
# Observed popularity rank (1 = most popular) of the estimate with time rank
# 0..19 (0 = the maximum, then the other head values in increasing time), in
# the four traces (columns: SDSC, CTC, KTH, Blue Horizon).
TIME_RANK_TO_POPULARITY = (
    (3, 1, 1, 1), (1, 3, 4, 6), (4, 4, 10, 5), (17, 2, 14, 3), (13, 12, 20, 7),
    (7, 9, 2, 2), (8, 8, 3, 18), (18, 18, 7, 19), (2, 6, 12, 4), (6, 7, 6, 11),
    (16, 11, 19, 20), (10, 20, 5, 9), (5, 16, 18, 10), (15, 5, 16, 14), (14, 14, 9, 13),
    (19, 13, 17, 16), (11, 10, 15, 15), (12, 15, 13, 17), (9, 17, 8, 8), (20, 19, 11, 12),
)
_TAIL_OFFSETS = (0, 30, -30, 20, -20, 10, -10)  # seconds, to avoid duplicate values


def _n_bins(n_jobs: int) -> int:
    xs, ys = zip(*N_BINS_POINTS, strict=True)
    return int(round(float(np.interp(n_jobs, xs, ys))))


def _head_times(max_est: int) -> list[int]:
    """The maximum, then the joint and round values below it, ascending."""
    values = [max_est] + [v for v in JOINT_VALUES if v < max_est]
    for step in ROUND_STEPS:
        v = (max_est // step) * step
        while v > 0 and len(values) < HEAD_BINS:
            if v not in values:
                values.append(v)
            v -= step
        if len(values) >= HEAD_BINS:
            break
    return [values[0]] + sorted(values[1:])


def _popularity_ranks(m: int, rng: np.random.Generator) -> np.ndarray:
    """Popularity rank (1..m) for each of the m head values in time-rank order."""
    table = np.array(TIME_RANK_TO_POPULARITY)
    # A popularity rank is "due" by the largest time rank it was seen at.
    due = {int(p): int(t) for t in range(HEAD_BINS) for p in table[t]}
    chosen: list[int] = []
    pool: list[int] = []
    for t in range(m):
        pool.extend(int(p) for p in table[t] if p not in chosen)
        if t == 0:
            pick = 1  # the maximum estimate is the most popular
        else:
            overdue = [p for p in range(1, HEAD_BINS + 1) if due[p] <= t and p not in chosen]
            if overdue:
                pick = min(overdue)
            elif pool:
                # two draws from the pool, keep the more popular: favours small ranks
                pick = min(pool[i] for i in rng.integers(0, len(pool), size=2))
            else:
                pick = min(p for p in range(1, HEAD_BINS + 1) if p not in chosen)
        chosen.append(pick)
        pool = [p for p in pool if p != pick]
    # Fewer than 20 head values: keep the order of the ranks, renumbered 1..m.
    return np.argsort(np.argsort(chosen)) + 1


def _apportion(shares: np.ndarray, n: int) -> np.ndarray:
    """Whole counts summing to n, proportional to shares (largest remainder)."""
    if n == 0 or len(shares) == 0:
        return np.zeros(len(shares), dtype=np.int64)
    exact = shares / shares.sum() * n
    counts = np.floor(exact).astype(np.int64)
    rest = n - counts.sum()
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:rest]] += 1
    return counts


class TsafrirEstimates:
    """Modal user estimates (Tsafrir, Etsion & Feitelson 2005).

    Args:
        max_est: the largest estimate users may request, in seconds (>= 3600,
            the model's head values span minutes to hours). Default: the
            longest run time rounded up to a whole hour (at least one hour).
        n_bins: number of distinct estimate values; default from the
            published fit to the number of jobs (e.g. 90 for 10,000 jobs).

    After :meth:`estimate`, ``histogram_`` holds the generated
    ``(values, counts)`` and ``repaired_`` the number of jobs whose drawn
    value had to be raised to the next modal value to stay >= their run time
    (0 unless the histogram has too few long values for the run times).

    Examples:
        >>> m = TsafrirEstimates(max_est=18 * 3600)
        >>> values, counts = m.histogram(1000, np.random.default_rng(0))
        >>> int(values[np.argmax(counts)]) == 18 * 3600  # the maximum is the mode
        True
    """

    name = "tsafrir"

    def __init__(self, max_est: float | None = None, n_bins: int | None = None):
        if max_est is not None and (
            isinstance(max_est, bool) or not isinstance(max_est, int | float)
            or not math.isfinite(max_est) or max_est < _HOUR
        ):
            raise WorkloadError("estimates.tsafrir.max_est", repr(max_est), "seconds >= 3600, or None")
        if n_bins is not None and (isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1):
            raise WorkloadError("estimates.tsafrir.n_bins", repr(n_bins), "a positive integer, or None")
        self.max_est = max_est
        self.n_bins = n_bins

    def histogram(self, n_jobs: int, rng: np.random.Generator, max_est: float | None = None):
        """Modal estimate values (seconds, ascending) and how many of n_jobs use each.

        Args:
            n_jobs: number of estimates to hand out.
            rng: random generator (the head popularity order and the tail
                matching are random).
            max_est: overrides the constructor's ``max_est``.
        """
        top = int(max_est if max_est is not None else (self.max_est or _HOUR))
        k_total = self.n_bins if self.n_bins is not None else max(1, _n_bins(n_jobs))

        head = _head_times(top)
        m = len(head)
        a, b, c = HEAD_SIZE
        rank_share = np.array([0.0] + [a * math.exp(b * r) + c for r in range(2, m + 1)])
        rank_share[0] = max(HEAD_SHARE - rank_share.sum(), 0.0)
        head_share = rank_share[_popularity_ranks(m, rng) - 1]

        tail = self._tail_times(top, k_total, set(head))
        if tail:
            ta, tb = TAIL_SIZE
            tail_share = ta * np.arange(HEAD_BINS + 1, HEAD_BINS + 1 + len(tail), dtype=float) ** tb
            tail_share *= (100.0 - HEAD_SHARE) / tail_share.sum()
            tail_share = rng.permutation(tail_share)  # values and popularity matched at random
        else:
            tail_share = np.empty(0)

        values = np.array(head + tail, dtype=float)
        shares = np.concatenate([head_share, tail_share])
        order = np.argsort(values)
        values, shares = values[order], shares[order]
        counts = _apportion(shares, n_jobs)
        return values, counts

    @staticmethod
    def _tail_times(top: int, k_total: int, taken: set[int]) -> list[int]:
        n_tail = k_total - len(taken)
        if n_tail <= 0:
            return []
        p, q = TAIL_TIME
        a = 1.0 + p * k_total**q
        out: list[int] = []
        used = set(taken)
        for i in range(1, n_tail + 1):
            x = i / n_tail
            sec = int(round((a - 1) * x / (a - x) * top / 60.0) * 60)  # whole minutes
            for off in _TAIL_OFFSETS:
                s = sec + off
                if 0 < s < top and s not in used:
                    out.append(s)
                    used.add(s)
                    break
        return out

    def estimate(self, run: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Modal estimates, each >= its run time, for the run times ``run``."""
        run = np.asarray(run, dtype=float)
        n = len(run)
        longest = float(run.max()) if n else 0.0
        if self.max_est is None:
            top = max(_HOUR, math.ceil(longest / _HOUR) * _HOUR)
        else:
            top = math.ceil(self.max_est)
        if longest > top:
            raise WorkloadError("estimates.tsafrir.max_est", f"{top:g} s below the longest run time {longest:g} s",
                                "a maximum estimate >= every run time")
        values, counts = self.histogram(n, rng, max_est=top)
        self.histogram_ = (values, counts)
        out = np.empty(n)
        self.repaired_ = 0
        if n == 0:
            return out

        # Hand out values from the longest job down: each job draws uniformly,
        # without replacement, among the values still unused that are >= its
        # run time (the reference model's assignment). Jobs whose run times lie
        # between the same two modal values share one candidate set, so the
        # draws for such a group are one multivariate hypergeometric sample
        # handed out in random order.
        by_run = np.argsort(-run, kind="stable")
        runs_desc = run[by_run]
        ests_desc = np.repeat(values, counts)[::-1]
        need = np.searchsorted(values, runs_desc, side="left")  # smallest value >= run
        short = ests_desc < runs_desc
        if short.any():
            # Not enough long values for the longest jobs: raise the k-th
            # largest estimate to the smallest modal value covering the k-th
            # largest run (both sequences stay sorted).
            self.repaired_ = int(short.sum())
            ests_desc = np.where(short, values[need], ests_desc)
        pool = np.zeros(len(values), dtype=np.int64)
        left = np.unique(ests_desc, return_counts=True)
        left_counts = np.zeros(len(values), dtype=np.int64)
        left_counts[np.searchsorted(values, left[0])] = left[1]

        start = 0
        nxt = len(values)  # values with index >= nxt are already in the pool
        while start < n:
            k = need[start]
            stop = start + int(np.searchsorted(-need[start:], -k, side="right"))
            pool[k:nxt] += left_counts[k:nxt]
            nxt = k
            got = rng.multivariate_hypergeometric(pool[k:], stop - start)
            pool[k:] -= got
            drawn = np.repeat(values[k:], got)
            out[by_run[start:stop]] = rng.permutation(drawn)
            start = stop
        return np.maximum(out, MIN_ESTIMATE)


#: Estimate model name -> class (call it with the model's parameters).
ESTIMATE_MODELS: dict[str, type] = {
    "exact": ExactEstimates,
    "gaussian": GaussianEstimates,
    "tsafrir": TsafrirEstimates,
}


def apply_estimates(workload: Workload, name: str, seed: int = 0, **params) -> Workload:
    """A copy of ``workload`` whose ``req_time`` comes from estimate model ``name``.

    Args:
        workload: jobs with their true run times.
        name: a key of :data:`ESTIMATE_MODELS`.
        seed: seed of the generator the model draws from.
        **params: the model's parameters (``nu``/``mode``; ``max_est``/``n_bins``).

    Returns:
        The new workload (same rows and order); its ``source`` records the
        model, parameters and seed.

    Raises:
        WorkloadError: unknown model or parameter, or a parameter out of range.
    """
    if name not in ESTIMATE_MODELS:
        raise WorkloadError("estimates.model", repr(name), f"one of {sorted(ESTIMATE_MODELS)}")
    cls = ESTIMATE_MODELS[name]
    allowed = [p for p in inspect.signature(cls).parameters if p != "self"]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise WorkloadError(f"estimates.{name}", f"unknown parameter(s) {unknown}",
                            f"parameters among {allowed}" if allowed else "no parameters")
    model = cls(**params)
    req = model.estimate(workload.run, np.random.default_rng(seed))
    args = ", ".join([f"{k}={v!r}" for k, v in params.items()] + [f"seed={seed}"])
    source = f"{workload.source} + estimates {name}({args})" if workload.source else f"estimates {name}({args})"
    return replace(workload.take(slice(None)), req_time=req.astype(np.float64), source=source)
