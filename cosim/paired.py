"""Paired comparisons of per-window figures: ratios, bootstrap intervals, contention.

The statistics half of :mod:`cosim.evaluation` (which re-exports every name
here): a policy against a reference on the same windows, with moving-block
bootstrap intervals where windows overlap or follow one another in one run,
and the contention scores that filter training windows. Plain numpy, no
simulation.

Every confidence interval the project prints comes from this module (a check
in ``tests/test_architecture.py`` keeps it so): :func:`mean_interval` for the
mean of independent values (seeds of a study, of a benchmark),
:func:`bootstrap_interval` for a statistic of paired windows (which may
overlap, so they are resampled in blocks), as :func:`compare` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimError

__all__ = ["ProtocolError", "block_indices", "bootstrap_interval", "mean_interval",
           "Comparison", "compare", "compare_each",
           "CONTENTION", "contention_scores", "most_contended", "replace_near_optimal"]


class ProtocolError(CosimError):
    """The protocol was not followed (the test set read twice, a split too small)."""


def block_indices(rng: np.random.Generator, n: int, block: int) -> np.ndarray:
    """One moving-block bootstrap draw of ``n`` indices: blocks of ``block`` consecutive
    indices from uniform starts in ``[0, n - block]``, cut to ``n`` (``block`` 1: the
    plain bootstrap's ``rng.integers(0, n, n)``)."""
    if block <= 1:
        return rng.integers(0, n, n)
    block = min(block, n)
    starts = rng.integers(0, n - block + 1, -(-n // block))
    return (starts[:, None] + np.arange(block)[None, :]).ravel()[:n]


def bootstrap_interval(stat, n: int, *, resamples: int = 2000, seed: int = 0,
                       level: float = 0.95, block: int = 1) -> tuple[float, float]:
    """Percentile interval of ``stat(index)`` over ``resamples`` bootstrap index draws
    (blocks of ``block`` consecutive indices when the items overlap; :func:`block_indices`)."""
    rng = np.random.default_rng(seed)
    values = np.array([stat(block_indices(rng, n, block)) for _ in range(resamples)])
    lo, hi = np.nanquantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def mean_interval(values: Sequence[float] | np.ndarray, *, confidence: float = 0.95,
                  resamples: int = 9999, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``values`` and a BCa bootstrap confidence interval of it: ``(mean, low, high)``.

    Bias-corrected and accelerated (``scipy.stats.bootstrap``; Efron and
    Tibshirani, *An Introduction to the Bootstrap*, ch. 14). Non-finite values
    (and ``None``) are left out. With fewer than two values there is no interval
    (NaN bounds); when every value is the same the interval is that value; where
    BCa is undefined the percentile interval is given. Seeded, so a table re-made
    from the same numbers prints the same interval.

    Examples:
        >>> mean_interval([2.0, 2.0, 2.0])
        (2.0, 2.0, 2.0)
        >>> m, lo, hi = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        >>> m, lo < m < hi
        (3.5, True)
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan, math.nan
    if np.all(x == x[0]):
        return mean, mean, mean
    from scipy.stats import bootstrap

    for method in ("BCa", "percentile"):
        res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=resamples,
                        method=method, rng=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            break
    return mean, lo, hi


@dataclass(frozen=True)
class Comparison:
    """A policy against a reference on the same windows (lower bsld is better)."""

    policy: str
    reference: str
    windows: int
    mean_ratio: float                 # mean bsld of the policy / of the reference
    mean_ratio_ci: tuple[float, float]
    median_ratio: float               # median of per-window ratios
    median_ratio_ci: tuple[float, float]
    wins: int                         # windows where the policy's bsld is lower
    losses: int
    policy_mean: float
    reference_mean: float

    def summary(self, items: str = "windows") -> str:
        """One line: ratios with intervals, wins and losses (over ``items``)."""
        return (f"{self.policy} vs {self.reference} on {self.windows} {items}: mean bsld "
                f"{self.policy_mean:.2f} vs {self.reference_mean:.2f}, ratio {self.mean_ratio:.3f} "
                f"[{self.mean_ratio_ci[0]:.3f}, {self.mean_ratio_ci[1]:.3f}], median ratio "
                f"{self.median_ratio:.3f} [{self.median_ratio_ci[0]:.3f}, "
                f"{self.median_ratio_ci[1]:.3f}], wins {self.wins}, losses {self.losses}")

    def as_dict(self) -> dict:
        """Plain data for JSON."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def compare(values: np.ndarray, reference: np.ndarray, *, policy: str = "policy",
            reference_name: str = "reference", seed: int = 0, resamples: int = 2000,
            block: int = 1) -> Comparison:
    """Paired comparison of per-window values (same windows, same order).

    ``block``: windows in time order that overlap are resampled in blocks of
    that many consecutive windows (:attr:`Split.blocks`); 1 for independent
    windows.

    Examples:
        >>> c = compare(np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.0, 2.0]))
        >>> c.mean_ratio, c.median_ratio, c.wins, c.losses
        (1.1666666666666667, 1.0, 1, 1)
    """
    a, b = np.asarray(values, dtype=float), np.asarray(reference, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ProtocolError(f"compare: {a.shape} and {b.shape}; expected the same windows")
    ratio = a / b
    n = len(a)
    if block < 1:
        raise ProtocolError(f"compare: block {block}; expected at least 1")
    mean_ci = bootstrap_interval(lambda i: a[i].mean() / b[i].mean(), n, seed=seed,
                                 resamples=resamples, block=block)
    median_ci = bootstrap_interval(lambda i: np.median(ratio[i]), n, seed=seed + 1,
                                   resamples=resamples, block=block)
    return Comparison(policy, reference_name, n, float(a.mean() / b.mean()), mean_ci,
                      float(np.median(ratio)), median_ci, int(np.sum(a < b)), int(np.sum(a > b)),
                      float(a.mean()), float(b.mean()))


def compare_each(values: dict[str, Sequence[float]], policy: str, *, seed: int = 0,
                 block: int = 1) -> dict[str, Comparison]:
    """:func:`compare` of ``values[policy]`` against every other entry (the same items,
    in the same order: windows, or episodes of the same jobs).

    Examples:
        >>> c = compare_each({"agent": [1.0, 2.0], "sjf": [2.0, 2.0], "fcfs": [1.0, 4.0]}, "agent")
        >>> {k: (v.mean_ratio, v.wins, v.losses) for k, v in c.items()}
        {'sjf': (0.75, 1, 0), 'fcfs': (0.6, 1, 0)}
    """
    a = np.asarray(values[policy], dtype=float)
    return {name: compare(a, np.asarray(v, dtype=float), policy=policy, reference_name=name,
                          seed=seed, block=block)
            for name, v in values.items() if name != policy}


#: Rules for filtering training windows by contention (``agents tune --train-filter``).
CONTENTION = ("skip", "spread", "excess")


def contention_scores(bsld: np.ndarray, rule: str = "spread") -> np.ndarray:
    """How much a window leaves to gain, from the heuristics' mean bsld on it.

    Args:
        bsld: ``[heuristic, window]`` mean bsld (every value at least 1).
        rule: ``spread``: log of the worst heuristic's bsld over the best's
            (the order matters here: 0 where every heuristic does the same);
            ``excess``: log of the best heuristic's bsld (0 where it is
            already optimal, bsld 1 for every job).

    A window where every heuristic is near-optimal scores near 0 under both.
    Non-finite values (a window no job of which finished) score -inf.

    Examples:
        >>> b = np.array([[1.0, 2.0, 5.0], [1.0, 4.0, 5.0]])
        >>> np.round(contention_scores(b, "spread"), 3).tolist()
        [0.0, 0.693, 0.0]
        >>> np.round(contention_scores(b, "excess"), 3).tolist()
        [0.0, 0.693, 1.609]
    """
    b = np.asarray(bsld, dtype=float)
    if b.ndim != 2 or not b.shape[0]:
        raise ProtocolError(f"contention: bsld of shape {b.shape}; expected [heuristic, window]")
    if rule in ("spread", "skip"):
        score = np.log(b.max(axis=0) / b.min(axis=0))
    elif rule == "excess":
        score = np.log(b.min(axis=0))
    else:
        raise ProtocolError(f"contention: rule {rule!r}; expected one of {', '.join(CONTENTION)}")
    return np.where(np.isfinite(score), score, -np.inf)


def most_contended(bsld: np.ndarray, keep: int, rule: str = "spread") -> list[int]:
    """Indices (ascending, so time order is kept) of the ``keep`` windows of highest
    :func:`contention_scores`; ties go to the earlier window.

    Examples:
        >>> most_contended(np.array([[1.0, 2.0, 5.0, 1.5], [1.0, 4.0, 5.0, 1.0]]), 2)
        [1, 3]
    """
    score = contention_scores(bsld, rule)
    order = np.argsort(-score, kind="stable")
    return sorted(int(i) for i in order[:max(0, keep)])


def replace_near_optimal(bsld: np.ndarray, base: Sequence[int], tolerance: float = 0.05
                         ) -> list[int]:
    """The windows ``base`` with each near-optimal one replaced by a contended one.

    A window is near-optimal when every heuristic's mean bsld on it is within
    ``tolerance`` of the best one's (the order cannot change the outcome by
    more: on RICC most 2,048-job windows give bsld ~1 to every heuristic).
    Each such window of ``base`` is replaced by the window outside ``base`` of
    widest spread (:func:`contention_scores`), while contended ones remain;
    where every window of ``base`` is contended the result is ``base``
    itself, so the rule changes nothing on a busy trace.

    Args:
        bsld: ``[heuristic, window]`` mean bsld over a pool of windows.
        base: indices of the pool's evenly spaced windows (the unfiltered choice).
        tolerance: relative spread below which a window counts as near-optimal.

    Returns:
        Indices into the pool, ascending, as many as ``base`` has.

    Examples:
        >>> b = np.array([[1.0, 1.0, 3.0, 2.0, 1.0], [1.0, 1.5, 1.0, 1.0, 1.01]])
        >>> replace_near_optimal(b, [0, 1, 4])
        [1, 2, 3]
        >>> replace_near_optimal(b, [1, 2])
        [1, 2]
    """
    score = contention_scores(bsld, "spread")
    limit = math.log1p(tolerance)
    base = [int(i) for i in base]
    kept = [i for i in base if score[i] > limit]
    spare = [int(i) for i in np.argsort(-score, kind="stable") if int(i) not in base]
    return sorted(kept + spare[:len(base) - len(kept)])


