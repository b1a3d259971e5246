"""Study statistics: one interval method for the whole project.

:func:`bootstrap_ci` is the mean and a seeded BCa bootstrap interval of it
(``scipy.stats.bootstrap``); :func:`summarize_study` applies it per setting,
policy and metric, and to each policy's paired difference to the first.
Benchmarks that report intervals call :func:`bootstrap_ci` too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cosim.errors import ScenarioError, did_you_mean
from cosim.studies.schema import DEFAULT_METRICS, TRAIN_METRICS, StudyPlan

__all__ = ["bootstrap_ci", "summarize_study"]

def bootstrap_ci(values: Sequence[float] | np.ndarray, *, confidence: float = 0.95,
                 resamples: int = 9999, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``values`` and a BCa bootstrap confidence interval of it.

    Non-finite values are left out. With fewer than two values there is no
    interval (NaN bounds); when every value is the same the interval is that
    value. Seeded, so the same values always give the same interval.

    Examples:
        >>> bootstrap_ci([2.0, 2.0, 2.0])
        (2.0, 2.0, 2.0)
        >>> m, lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
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

    res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=resamples,
                    method="BCa", rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):   # BCa undefined: percentile instead
        res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=resamples,
                        method="percentile", rng=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return mean, lo, hi


def summarize_study(plan: StudyPlan, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting, policy and metric: runs, mean, interval, and the paired difference
    to the first policy (by seed).

    Raises:
        ScenarioError: a metric of the study is in no run's summary (the
            nearest names are suggested).
    """
    ok = [r for r in rows if r["status"] == "ok"]
    numeric = sorted({k for r in ok for k, v in r.items()
                      if isinstance(v, int | float) and not isinstance(v, bool)}
                     - {"seed", "run_seconds"})
    if ok:
        for i, metric in enumerate(plan.metrics):
            if metric not in numeric:
                where = (f"{plan.path}: metrics[{i}]" if plan.study.metrics
                         else f"{plan.path}: metrics (default)")
                raise ScenarioError(where, repr(metric), "a numeric summary metric such as "
                                    + ", ".join(DEFAULT_METRICS if plan.kind == "policy"
                                                else TRAIN_METRICS),
                                    did_you_mean(metric, numeric))
    conf, n_boot = plan.study.confidence, plan.study.bootstrap
    policies = plan.policies
    baseline = policies[0]
    out = []
    for label, _ in plan.settings:
        by_policy = {p: {r["seed"]: r for r in rows if r["setting"] == label and r["policy"] == p}
                     for p in policies}
        for policy in policies:
            runs = by_policy[policy]
            good = {s: r for s, r in runs.items() if r["status"] == "ok"}
            for metric in plan.metrics:
                vals = [_num(r.get(metric)) for r in good.values()]
                mean, lo, hi = bootstrap_ci(vals, confidence=conf, resamples=n_boot)
                row = {"setting": label, "policy": policy, "metric": metric,
                       "runs": len(runs), "ok": len(good),
                       "n": int(np.isfinite(np.array(vals, dtype=float)).sum()),
                       "mean": mean, "low": lo, "high": hi,
                       "std": float(np.nanstd(vals, ddof=1)) if len(vals) > 1 else math.nan,
                       "baseline": baseline}
                if policy != baseline:
                    base = by_policy[baseline]
                    diffs = [_num(r.get(metric)) - _num(base[s].get(metric))
                             for s, r in good.items()
                             if s in base and base[s]["status"] == "ok"]
                    d, dlo, dhi = bootstrap_ci(diffs, confidence=conf, resamples=n_boot)
                    row.update(diff_mean=d, diff_low=dlo, diff_high=dhi)
                out.append(row)
    return out


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
