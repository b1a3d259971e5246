"""The evaluation protocol: paired windows, the best heuristic, ratios with intervals.

One place for how a policy is compared with the heuristics it must beat:

1. **Splits.** A trace is cut in time order: training windows come from
   its past, validation windows from what follows, test windows from its
   future (:func:`chronological_split`). A generator gives disjoint seeds
   instead (:func:`seeded_split`). Nothing of one span is in another.
2. **Paired windows.** Every policy runs on the same windows (the same
   jobs, from an empty machine); a comparison is per window.
   :func:`windows` cuts ``count`` windows of ``size`` consecutive jobs from
   a span, evenly spaced: non-overlapping when the span is long enough,
   overlapping otherwise (100 windows of 256 jobs from 3,000 jobs overlap).
   Overlapping windows share jobs, so they are not independent draws: the
   split records, per span, how many consecutive windows share a job with
   one window (:attr:`Split.blocks`), and :func:`compare` resamples blocks
   of that many consecutive windows (a moving-block bootstrap; Kuensch,
   Annals of Statistics 1989), so the interval is as wide as the span's
   independent evidence rather than its window count.
3. **The best heuristic** is the best of :data:`CLASSIC` (FCFS, SJF, SAF, F1,
   WFP3, UNICEF, each with EASY) by mean bounded slowdown on **validation**
   (:func:`best_heuristic`), and is reported on test.
4. **Ratios.** :func:`compare` gives, against a reference on the same
   windows: the ratio of mean bsld (policy / reference), the median of the
   per-window ratios, wins and losses, each with a 95 % bootstrap interval
   over windows, or over blocks of windows that overlap (seeded, so a report
   is reproducible).
5. **The test set is read once**, after every selection:
   :class:`SealedWindows` hands its windows out a single time and refuses a
   second read (:class:`ProtocolError`), so a selection loop cannot peek.

:class:`Evaluator` runs (policy, window) pairs, in worker processes when
asked; a policy is a name of the grammar (``saf+easy``, ``learned:DIR``) or a
:class:`cosim.policies.priority.PriorityWeights`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import simpy

from cosim.config import Scenario
from cosim.errors import CosimError, ScenarioError
from cosim.job import Outcome
from cosim.model import build
from cosim.policies.names import PolicySpec, make_policy, parse_policy
from cosim.policies.priority import PriorityWeights, make_priority_policy
from cosim.workloads.base import Workload
from cosim.workloads.loading import resolve_machine

__all__ = ["CLASSIC", "ProtocolError", "Span", "Split", "SealedWindows", "windows",
           "chronological_split", "seeded_split", "Evaluator", "WindowResult", "Comparison",
           "compare", "best_heuristic", "bootstrap_interval", "capacity_of", "checked_source",
           "CONTENTION", "contention_scores", "most_contended", "replace_near_optimal",
           "window_starts", "overlap_block", "block_indices", "window_at", "MEASURED"]

#: The heuristics a learned policy must beat, each with EASY backfilling.
CLASSIC = ("fcfs+easy", "sjf+easy", "saf+easy", "f1+easy", "wfp3+easy", "unicef+easy")


class ProtocolError(CosimError):
    """The protocol was not followed (the test set read twice, a split too small)."""


@dataclass(frozen=True)
class Span:
    """Rows ``[start, stop)`` of the workload a set of windows was cut from."""

    start: int
    stop: int
    first_submit: float
    last_submit: float

    def describe(self) -> str:
        """``jobs a..b (submit s1..s2 s)``."""
        return (f"jobs {self.start}..{self.stop - 1} "
                f"(submit {self.first_submit:.0f}..{self.last_submit:.0f} s)")


class SealedWindows:
    """Test windows that can be read once (:meth:`read`); a second read raises.

    Selection (snapshots, configurations, hyper-parameters) must be over by
    the time the test set is read; the seal makes a loop that reads it twice
    fail loudly instead of quietly selecting on test.
    """

    def __init__(self, windows: list[Workload], span: Span | None = None):
        self._windows = windows
        self.span = span
        self.count = len(windows)
        self.read_count = 0

    def read(self) -> list[Workload]:
        """The windows, once.

        Raises:
            ProtocolError: they were read before.
        """
        if self.read_count:
            raise ProtocolError("the test windows were already read once; selection must end "
                                "before the test set is read, and it is read only once")
        self.read_count = 1
        windows, self._windows = self._windows, []
        return windows


@dataclass
class Split:
    """Training and validation windows, and the sealed test windows."""

    train: list[Workload]
    validation: list[Workload]
    test: SealedWindows
    spans: dict[str, Span] = field(default_factory=dict)
    note: str = ""
    #: per span, the bootstrap block length (:func:`overlap_block`): 1 for windows side by side
    blocks: dict[str, int] = field(default_factory=dict)


#: A window's per-job feature: False for the warm-up jobs, simulated but not measured.
MEASURED = "evaluation_measured"


def windows(workload: Workload, size: int, count: int, start: int = 0,
            stop: int | None = None, warmup: int = 0) -> list[Workload]:
    """``count`` windows of ``size`` consecutive jobs of rows ``[start, stop)``, evenly spaced.

    Fewer when the span holds fewer than ``size`` jobs (none) or than
    ``count`` distinct starting rows. Submit times are kept (features such as
    F1's log submit time read them). ``warmup``: see :func:`window_at`.
    """
    stop = len(workload) if stop is None else stop
    return [window_at(workload, s, size, start, warmup)
            for s in window_starts(size, count, start, stop)]


def window_at(workload: Workload, first: int, size: int, span_start: int = 0,
              warmup: int = 0) -> Workload:
    """Rows ``[first, first + size)``, after up to ``warmup`` jobs of warm-up.

    The warm-up jobs are the ones submitted just before the window, from
    the same span only (rows ``>= span_start``): the policy under test
    schedules them too, so the window's jobs meet a machine that is already
    busy and a queue that is already long, as on a running cluster, but they
    are not measured (:data:`MEASURED`; :func:`run_window`). Windows cut from
    an empty machine see no backlog at first and drain at the end: on a
    lightly loaded trace most of them give bsld ~1 to every policy.
    """
    a = max(span_start, first - max(0, int(warmup)))
    w = workload.take(slice(a, first + size))
    if a < first:
        w.features[MEASURED] = np.arange(len(w)) >= first - a
    return w


def window_starts(size: int, count: int, start: int, stop: int) -> list[int]:
    """First rows of the windows :func:`windows` cuts from rows ``[start, stop)``.

    Examples:
        >>> window_starts(10, 5, 20, 70)
        [20, 30, 40, 50, 60]
    """
    if size < 1 or count < 1:
        raise ProtocolError(f"windows: size {size} and count {count} must be at least 1")
    room = stop - start - size
    if room < 0:
        return []
    count = min(count, room + 1)
    starts = (np.linspace(start, start + room, count).round().astype(int) if count > 1
              else np.array([start]))
    return [int(s) for s in starts]


def overlap_block(size: int, count: int, start: int, stop: int) -> int:
    """How many consecutive windows of :func:`window_starts` share a job with one window.

    The block length for :func:`compare`'s bootstrap: 1 when the windows lie
    side by side, ``ceil(size / stride)`` when they overlap (windows further
    apart than that share no job).

    Examples:
        >>> overlap_block(256, 100, 5000, 7000)     # stride 17.6: 15 windows share a job
        15
        >>> overlap_block(10, 5, 20, 70)
        1
    """
    starts = np.asarray(window_starts(size, count, start, stop))
    # the smallest k with starts[i + k] - starts[i] >= size for every i
    for k in range(1, len(starts)):
        if int((starts[k:] - starts[:-k]).min()) >= size:
            return k
    return max(1, len(starts))


def _span(workload: Workload, a: int, b: int) -> Span:
    return Span(a, b, float(workload.submit[a]), float(workload.submit[b - 1]))


def chronological_split(workload: Workload, *, size: int, train_count: int,
                        count: int = 100, train: float = 0.5, validation: float = 0.7,
                        warmup: int = 0) -> Split:
    """Cut a trace in time order: train on ``[0, train)``, validate on
    ``[train, validation)``, test on ``[validation, 1]`` (fractions of its jobs).

    Args:
        workload: the trace, in submit order.
        size: jobs per window.
        train_count: training windows.
        count: validation and test windows each (fewer if a span is short).
        train, validation: the two cut points, as fractions of the jobs.
        warmup: jobs simulated before each window and not measured, from its
            own span (:func:`window_at`).

    Raises:
        ProtocolError: a span too short for one window.
    """
    n = len(workload)
    if not 0 < train < validation < 1:
        raise ProtocolError(f"split: cut points {train} and {validation}; expected "
                            "0 < train < validation < 1")
    a, b = int(n * train), int(n * validation)
    spans = {"train": _span(workload, 0, a), "validation": _span(workload, a, b),
             "test": _span(workload, b, n)}
    parts = {"train": windows(workload, size, train_count, 0, a, warmup),
             "validation": windows(workload, size, count, a, b, warmup),
             "test": windows(workload, size, count, b, n, warmup)}
    short = [k for k, v in parts.items() if not v]
    if short:
        raise ProtocolError(f"split: the {', '.join(short)} span holds fewer than {size} jobs "
                            f"(the workload has {n}); use smaller windows or a longer trace")
    overlap = [k for k in ("validation", "test")
               if len(parts[k]) * size > spans[k].stop - spans[k].start]
    blocks = {k: overlap_block(size, count, spans[k].start, spans[k].stop)
              for k in ("validation", "test")}
    note = (f"{' and '.join(overlap)} windows overlap (more windows than the span holds "
            "side by side): intervals resample blocks of "
            + " and ".join(f"{blocks[k]} consecutive {k} windows" for k in overlap)
            + " (windows that share jobs)") if overlap else ""
    return Split(parts["train"], parts["validation"], SealedWindows(parts["test"], spans["test"]),
                 spans, note, blocks)


def seeded_split(make_workload, *, size: int, train_count: int, count: int = 100,
                 seeds: tuple[int, int, int] = (1, 2, 3)) -> Split:
    """Windows from a generator: ``make_workload(seed, jobs)`` with one seed per set.

    Each set is its own run of the generator (disjoint seeds), cut into
    non-overlapping windows.
    """
    sets = []
    for seed, k in zip(seeds, (train_count, count, count)):
        w = make_workload(seed, size * k)
        sets.append(windows(w, size, k))
    return Split(sets[0], sets[1], SealedWindows(sets[2]), {},
                 f"disjoint generator seeds {seeds[0]}, {seeds[1]}, {seeds[2]}")


# -- evaluation ------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowResult:
    """What one policy did on one window."""

    bsld_mean: float
    wait_mean: float
    wait_max: float


def capacity_of(scenario: Scenario) -> int:
    """Schedulable units of the scenario's machine."""
    c = scenario.cluster
    return c.nodes if c.granularity == "node" else c.nodes * c.cores_per_node


def checked_source(source, scenario: Scenario, *, where: str = "policy"):
    """``source`` as the evaluator will run it: a :class:`PriorityWeights` or a parsed name.

    The evaluator simulates with the workload's requested times as the
    scheduler's beliefs (no prediction hub: that lives in :mod:`cosim.compose`,
    which this layer may not import). A name asking for predictions
    (``f1+easy@history``, or any name when the scenario's
    ``predictor.runtime`` is not ``estimate``) would silently be evaluated
    as the plain heuristic, so it is refused instead.

    Raises:
        ScenarioError: a name that does not parse, asks for a predictor, or is
            a trained agent (``rl:DIR``).
    """
    if isinstance(source, PriorityWeights):
        return source
    spec = source if isinstance(source, PolicySpec) else parse_policy(source, where=where)
    accepted = ("a heuristic, selector or learned:DIR without @PREDICTOR (or with @estimate): "
                "windows are evaluated on the requested times; use 'python -m cosim run' for "
                "predictions")
    if spec.predictor not in (None, "estimate"):
        raise ScenarioError(where, repr(spec.name), accepted)
    if spec.predictor is None and scenario.predictor.runtime != "estimate":
        raise ScenarioError(where, f"{spec.name!r} with predictor.runtime "
                                   f"{scenario.predictor.runtime!r}",
                            accepted + " (--set predictor.runtime=estimate)")
    if spec.kind == "agent":
        raise ScenarioError(where, repr(spec.name), "a heuristic, selector or learned:DIR "
                                                    "(a trained agent, rl:DIR, runs through "
                                                    "'python -m cosim run')")
    return spec


def _policy(source):
    if isinstance(source, PriorityWeights):
        return make_priority_policy(source)
    return make_policy(source)


def run_window(scenario: Scenario, source, window: Workload) -> WindowResult:
    """Simulate ``source`` on ``window`` from an empty machine; bsld and waits.

    Of the window's measured jobs only, where it has warm-up jobs
    (:func:`window_at`).

    Raises:
        ScenarioError: ``source`` asks for predictions (see :func:`checked_source`).
    """
    env = simpy.Environment()
    policy = _policy(checked_source(source, scenario))
    sim = build(env, scenario, policy, workload=window, record=False)
    sim.run()      # full collections put off while it runs (cosim.kernel.run)
    tau = scenario.metrics.tau
    bs, waits = [], []
    measured = window.features.get(MEASURED)
    for j in sim.scheduler.jobs:
        if measured is not None and not measured[j.index]:
            continue
        if j.outcome in (Outcome.COMPLETED, Outcome.TIMEOUT):
            run = j.end - j.start
            bs.append(max(1.0, (j.end - j.submit) / max(tau, run)))
            waits.append(j.start - j.submit)
    if not bs:
        return WindowResult(math.nan, math.nan, math.nan)
    return WindowResult(float(np.mean(bs)), float(np.mean(waits)), float(np.max(waits)))


_WORKER: dict = {}


def _init_worker(scenario, windows_):
    _WORKER["scenario"], _WORKER["windows"] = scenario, windows_


def _work(task):
    source, k = task
    return run_window(_WORKER["scenario"], source, _WORKER["windows"][k])


class Evaluator:
    """Runs policies on a fixed list of windows, in ``processes`` worker processes.

    Args:
        scenario: the machine and metrics (its workload section is not used).
        windows_: the windows, shipped to each worker once.
        processes: 1 runs in this process.

    Use as a context manager (or call :meth:`close`) to end the workers.
    """

    def __init__(self, scenario: Scenario, windows_: Sequence[Workload], processes: int = 1):
        if windows_:
            scenario = resolve_machine(scenario, windows_[0])
        self.scenario = scenario
        self.windows = list(windows_)
        self.processes = max(1, int(processes))
        self._pool = None
        if self.processes > 1:
            self._pool = ProcessPoolExecutor(self.processes, initializer=_init_worker,
                                             initargs=(scenario, self.windows))

    def evaluate(self, sources: Sequence, only: Sequence[int] | None = None) -> np.ndarray:
        """Mean bsld, mean wait and max wait: an array ``[policy, window, 3]``.

        ``only``: indices of the windows to run (default all), in the order given.

        Raises:
            ScenarioError: a source asks for predictions (:func:`checked_source`),
                before any window runs.
        """
        for s in sources:
            checked_source(s, self.scenario)
        ks = range(len(self.windows)) if only is None else [int(k) for k in only]
        tasks = [(s, k) for s in sources for k in ks]
        if self._pool is None:
            results = [run_window(self.scenario, s, self.windows[k]) for s, k in tasks]
        else:
            chunk = max(1, len(tasks) // (4 * self.processes))
            results = list(self._pool.map(_work, tasks, chunksize=chunk))
        out = np.array([[r.bsld_mean, r.wait_mean, r.wait_max] for r in results], dtype=float)
        return out.reshape(len(sources), len(ks), 3)

    def close(self) -> None:
        """End the worker processes."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def default_processes() -> int:
    """Worker processes to use: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


# -- comparison ------------------------------------------------------------------------
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

    def summary(self) -> str:
        """One line: ratios with intervals, wins and losses."""
        return (f"{self.policy} vs {self.reference} on {self.windows} windows: mean bsld "
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


def best_heuristic(validation_bsld: dict[str, np.ndarray]) -> str:
    """The heuristic with the lowest mean bsld on validation (ties: first named)."""
    return min(validation_bsld, key=lambda name: float(np.mean(validation_bsld[name])))
