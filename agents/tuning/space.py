"""The search space of ``python -m agents tune``: fitness, starting grids, coordinates.

:func:`agents.tuning.tune` runs the protocol (split, search, selection on
validation, the test read once); this module holds what a candidate is and
how it is scored: the training fitness (``--fitness``), the max-wait penalty
and the starvation guard's grid (``--max-wait``), the drain-aware reservation's
grid and coordinates (``--drain searched``), and the unit-norm weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from cosim.evaluation import CLASSIC
from cosim.policies.priority import (
    BACKLOG_FEATURES,
    FEATURES,
    USER_FEATURES,
    PriorityWeights,
    heuristic_weights,
    user_history_applies,
)

__all__ = ["DAY", "DRAIN_GRID", "DRAIN_OFF", "FITNESS", "FOLDS", "GUARD_FRACTIONS",
           "SLACK_SCALE", "SearchSpace", "WAIT_PENALTY", "checkpoints", "drain_coordinates", "drain_grid", "drain_of",
           "fitness_of", "fold_index", "guard_grid", "same_policy", "unit", "user_features_choice",
           "wait_penalty"]

#: Fitness of a candidate on the training windows (see ``--fitness``).
FITNESS = ("ratio", "windows", "folds")
#: ``--fitness folds``: chronological folds of the training windows (``--folds``).
FOLDS = 4

#: ``--max-wait``: the penalty per unit of a candidate's excess over the bound (its max wait
#: over FCFS+EASY's on the training chunks, divided by the bound, minus 1), added
#: to a fitness near 1 (a 10 % excess costs as much as twice the best heuristic's bsld).
WAIT_PENALTY = 10.0
#: The starvation guard's search coordinate is log10 of its threshold in days.
DAY = 86400.0
#: ``--slack searched``: relaxed EASY's slack is this times the search coordinate's
#: positive part (seeded at 0, textbook EASY; CMA-ES's first steps reach 1-3).
SLACK_SCALE = 5.0

def fitness_of(res: np.ndarray, ref: np.ndarray, kind: str,
             fold_of: np.ndarray | None = None) -> np.ndarray:
    """Fitness of each candidate (rows of ``res``: per-window mean bsld) against the
    reference's per-window values ``ref``; lower is better, non-finite is 1e9.

    ``ratio``: ratio of means; ``windows``: mean of the per-window ratios;
    ``folds``: ``ref`` is ``[heuristic, window]`` and ``fold_of`` gives each
    window's fold; per fold, the ratio of the candidate's mean to the mean of
    the heuristic best on that fold, and the worst fold counts.
    """
    if kind == "ratio":
        fit = res.mean(axis=1) / ref.mean()
    elif kind == "windows":
        fit = (res / ref[None, :]).mean(axis=1)
    elif kind == "folds":
        ref = np.atleast_2d(ref)
        fit = np.max([res[:, m].mean(axis=1) / ref[:, m].mean(axis=1).min()
                      for m in (fold_of == f for f in np.unique(fold_of))], axis=0)
    else:
        raise ValueError(f"fitness: {kind!r}, expected one of {', '.join(FITNESS)}")
    return np.where(np.isfinite(fit), fit, 1e9)



#: ``--max-wait``'s grid: the guard's threshold as these fractions of the bound times
#: FCFS+EASY's max wait over the training chunks.
GUARD_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5)


def guard_grid(capacity: int, scale: float, first: tuple[str, ...] = ()
                ) -> list[list[PriorityWeights]]:
    """Per classic order of the priority space (those named in ``first`` first), that
    order with the starvation guard at ``GUARD_FRACTIONS`` of ``scale`` seconds (at
    least a minute)."""
    out = []
    for h in dict.fromkeys(first + CLASSIC):
        base = h.partition("+")[0]
        w = heuristic_weights(base, capacity)
        if w is None:
            continue
        row: dict[str, PriorityWeights] = {}
        for f in GUARD_FRACTIONS:
            t = max(60.0, f * scale)
            name = f"{base}+guard{t / 3600:.3g}h"
            row.setdefault(name, PriorityWeights(w, capacity, name=name, promote_after=t))
        out.append(list(row.values()))
    return out


def wait_penalty(max_waits: np.ndarray, fcfs: np.ndarray, bound: float) -> np.ndarray:
    """Per candidate (rows of ``max_waits``, one column per training window): the fitness
    penalty for its max wait over FCFS+EASY's, both the largest over the windows (the
    measure the bound is checked with on validation and test), exceeding ``bound``."""
    excess = max_waits.max(axis=1) / fcfs.max() / bound - 1.0
    return WAIT_PENALTY * np.maximum(excess, 0.0)



def checkpoints(upto: int) -> set[int]:
    """Generations at which ``--snapshots`` keeps candidates: 5, 10, 20, 40, ... up to ``upto``."""
    out, g = set(), 5
    while g <= upto:
        out.add(g)
        g *= 2
    return out


def same_policy(a: PriorityWeights, b: PriorityWeights) -> bool:
    """The same policy under two names."""
    return replace(a, name="") == replace(b, name="")



def unit(x: np.ndarray) -> tuple[float, ...]:
    """``x`` scaled to unit norm (a zero vector as it is): a priority order ignores scale."""
    n = float(np.linalg.norm(x))
    return tuple(float(v) for v in (x / n if n > 0 else x))


def user_features_choice(asked: bool | str, workload) -> tuple[bool, str]:
    """``--user-features`` resolved: ``auto`` (the default) searches the user-history
    features where :func:`user_history_applies` says they can help; ``on``/``off`` force it.

    Auto, because on RICC's validation span, windows measured in running spans, 9 of
    the 11 validation candidates of a 30-minute search with them beat SAF+EASY (6.18-6.79
    against 7.65), against 3 of 11 without them (stop 32).
    """
    if asked in (True, "on"):
        return True, "on (asked)"
    if asked in (False, "off"):
        return False, "off (asked)"
    if asked != "auto":
        raise ValueError(f"user_features: {asked!r}; expected auto, on or off")
    on, why = user_history_applies(workload)
    return on, f"auto: {'on' if on else 'off'} ({why})"


def user_history_note(recorded_wait: bool) -> str:
    """What the user-history features are, for the model card."""
    return ("log_user_pred: log10 of the mean run time of the user's last two jobs completed "
            "before the job's submit (as recorded: submit + "
            + ("recorded wait" if recorded_wait else "no wait")
            + " + run), capped by its request; log_user_accuracy: log10 of their mean "
            "min(run/request, 1); unknown users or no completed job: the request, accuracy 1 "
            "(Tsafrir, Etsion and Feitelson, TPDS 2007); computed on the whole workload "
            "before the split")


#: ``--drain searched``: the drain-aware reservation's starting grid, (D, grace in days):
#: a head more than D times its estimate from its shadow time gets no reservation
#: until it has waited the grace (:class:`cosim.policies.backfill.QueuePolicy`). On
#: RICC, SAF with (100, 30) took the worst training chunk from 538.77 to 12.28.
DRAIN_GRID = ((10.0, 7.0), (30.0, 7.0), (100.0, 30.0), (300.0, 30.0))
#: The drain coordinates are log10 D and log10 of the grace in days; at log10 D of
#: DRAIN_OFF or more the rule is off (the seed when the grid's best is off).
DRAIN_OFF = 5.0


def drain_of(x_factor: float, x_grace: float) -> tuple[float, float]:
    """``(drain_factor, drain_grace)`` of the search's drain coordinates ((0, 0): off)."""
    if not x_factor < DRAIN_OFF:
        return 0.0, 0.0
    return 10.0 ** x_factor, DAY * 10.0 ** min(float(x_grace), 3.0)


def drain_grid(seed: PriorityWeights) -> list[PriorityWeights]:
    """``seed`` as it is, then with the drain rule at each :data:`DRAIN_GRID` point."""
    out = [seed]
    for factor, days in DRAIN_GRID:
        out.append(replace(seed, name=f"{seed.name}+drain{factor:g}x{days:g}d",
                           drain_factor=factor, drain_grace=days * DAY))
    return out


def drain_coordinates(spec: PriorityWeights) -> list[float]:
    """The drain coordinates of ``spec`` (off: log10 D = DRAIN_OFF + 1, a 30-day grace)."""
    if not spec.drain_factor:
        return [DRAIN_OFF + 1.0, math.log10(30.0)]
    return [math.log10(spec.drain_factor), math.log10(spec.drain_grace / DAY)]


def fold_index(n: int, folds: int) -> np.ndarray:
    """The period (0 .. folds-1) of each of ``n`` training windows, cut in time order.

    Examples:
        >>> fold_index(5, 2).tolist()
        [0, 0, 0, 1, 1]
    """
    out = np.zeros(n, dtype=int)
    for f, part in enumerate(np.array_split(np.arange(n), max(1, folds))):
        out[part] = f
    return out


@dataclass(frozen=True)
class SearchSpace:
    """The coordinates CMA-ES moves and the policy each point is.

    A point is the unit-norm weights of the searched ``features`` (indices into
    :data:`cosim.policies.priority.FEATURES`), then, with ``backfill_order``, a
    second such vector that orders EASY's backfill candidates; then one
    coordinate each for the starvation guard (``guarded``: log10 of the threshold
    in days), the drain rule (``drained``: :func:`drain_of`'s two) and relaxed
    EASY's slack (``relaxed``), in that order.

    Examples:
        >>> space = SearchSpace.of(256, submit_time=False, user_features=False)
        >>> x = space.seed(heuristic_weights("saf", 256))
        >>> bool(np.allclose(space.spec(x, "saf").weights, unit(np.array(heuristic_weights("saf", 256)))))
        True
        >>> len(x), space.spec(x).backfill_weights == space.spec(x).weights
        (12, True)
    """

    features: tuple[int, ...]
    capacity: int
    backfill_order: bool = True
    guarded: bool = False
    drained: bool = False
    relaxed: bool = False

    @classmethod
    def of(cls, capacity: int, *, submit_time: bool, user_features: bool,
           backlog: bool = False, **flags: bool) -> SearchSpace:
        """The tuner's space: every feature but absolute submit time (unless asked), the
        user-history features (unless on) and the backlog products (unless asked)."""
        return cls(tuple(i for i, f in enumerate(FEATURES)
                         if (submit_time or f != "log_submit")
                         and (user_features or f not in USER_FEATURES)
                         and (backlog or f not in BACKLOG_FEATURES)), capacity, **flags)

    @property
    def guard_index(self) -> int:
        """The guard's coordinate (the first after the weight vectors)."""
        return len(self.features) * (1 + self.backfill_order)

    def seed(self, weights) -> np.ndarray:
        """The weight coordinates of a full weight vector: its searched features,
        unit-norm, twice with a searched backfill order (the same order for both: that
        policy's own schedule)."""
        x = np.array(weights)[list(self.features)]
        if not np.any(x):       # FCFS without submit time: oldest first is -log wait
            x[self.features.index(FEATURES.index("log_wait"))] = -1.0
        x = np.array(unit(x))
        return np.concatenate([x, x] if self.backfill_order else [x])

    def spec(self, x, name: str = "priority") -> PriorityWeights:
        """The policy at search point ``x``."""
        k, idx = len(self.features), list(self.features)
        w = np.zeros(len(FEATURES))
        w[idx] = unit(np.asarray(x[:k]))
        b = None
        if self.backfill_order:
            b = np.zeros(len(FEATURES))
            b[idx] = unit(np.asarray(x[k:2 * k]))
            b = tuple(float(v) for v in b)
        gi = self.guard_index
        di = gi + self.guarded
        return PriorityWeights(tuple(float(v) for v in w), self.capacity, name=name,
                               backfill_weights=b,
                               slack=SLACK_SCALE * max(0.0, float(x[-1])) if self.relaxed else 0.0,
                               promote_after=(DAY * 10.0 ** min(float(x[gi]), 4.0)
                                              if self.guarded else 0.0),
                               **dict(zip(("drain_factor", "drain_grace"),
                                          drain_of(x[di], x[di + 1]) if self.drained
                                          else (0.0, 0.0))))
