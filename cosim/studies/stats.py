"""Study statistics: per setting, policy and metric, a mean and its interval.

:func:`summarize_study` applies the project's one interval method,
:func:`cosim.paired.mean_interval` (the mean and a seeded BCa bootstrap
interval of it), per setting, policy and metric, and to each policy's paired
difference to the first.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cosim.errors import ScenarioError, did_you_mean
from cosim.paired import mean_interval
from cosim.studies.schema import DEFAULT_METRICS, TRAIN_METRICS, StudyPlan

__all__ = ["summarize_study"]


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
                mean, lo, hi = mean_interval(vals, confidence=conf, resamples=n_boot)
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
                    d, dlo, dhi = mean_interval(diffs, confidence=conf, resamples=n_boot)
                    row.update(diff_mean=d, diff_low=dlo, diff_high=dhi)
                out.append(row)
    return out


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
