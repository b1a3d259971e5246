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
5. **Windows of a running machine** (``evaluation="running"``): each
   validation and test span is simulated in one run, the way a cluster
   runs its policy, and a window is the set of its jobs measured inside that
   run (:func:`running_slices`), the training span is cut into a few long
   chunks run whole. Windows that start from an empty machine reward
   policies that drain a first burst well and break down under a standing
   backlog (on RICC a policy 0.937x the best heuristic on cold windows had
   2.4x its mean bsld over the span run whole); the windows of one run are
   paired the same way but not independent, so intervals resample blocks of
   :func:`running_block` consecutive windows.
6. **The test set is read once**, after every selection:
   :class:`SealedWindows` hands its windows out a single time and refuses a
   second read (:class:`ProtocolError`), so a selection loop cannot peek.

:class:`Evaluator` runs (policy, window) pairs, in worker processes when
asked; a policy is a name of the grammar (``saf+easy``, ``learned:DIR``) or a
:class:`cosim.policies.priority.PriorityWeights`.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import simpy

from cosim.config import Scenario
from cosim.errors import ScenarioError
from cosim.job import Outcome
from cosim.model import build
from cosim.paired import (  # the comparisons, re-exported: one place for the protocol
    CONTENTION,
    Comparison,
    ProtocolError,
    block_indices,
    bootstrap_interval,
    compare,
    contention_scores,
    mean_interval,
    most_contended,
    replace_near_optimal,
)
from cosim.policies.names import PolicySpec, make_policy, parse_policy
from cosim.policies.priority import PriorityWeights, make_priority_policy
from cosim.workloads.base import Workload
from cosim.workloads.loading import resolve_machine

__all__ = ["CLASSIC", "ProtocolError", "Span", "Split", "SealedWindows", "windows",
           "chronological_split", "seeded_split", "Evaluator", "WindowResult", "Comparison",
           "compare", "best_heuristic", "bootstrap_interval", "mean_interval", "capacity_of", "checked_source",
           "CONTENTION", "contention_scores", "most_contended", "replace_near_optimal",
           "window_starts", "overlap_block", "block_indices", "window_at", "MEASURED",
           "EVALUATIONS", "running_block", "running_slices", "run_slices"]

#: The heuristics a learned policy must beat, each with EASY backfilling.
CLASSIC = ("fcfs+easy", "sjf+easy", "saf+easy", "f1+easy", "wfp3+easy", "unicef+easy")


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
    #: ``running`` evaluation: per span (validation, test), the rows of its windows in the
    #: span's one run (:func:`running_slices`), the whole span last; empty for windows
    slices: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: ``windows`` (from an empty machine each) or ``running`` (measured in one run per span)
    evaluation: str = "windows"


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


#: How validation and test windows are measured (:func:`chronological_split`).
EVALUATIONS = ("windows", "running")


def running_block(n: int) -> int:
    """Bootstrap block length for ``n`` consecutive windows of one run: ``ceil(n ** (1/3))``,
    the usual order of a moving-block length (Hall, Horowitz and Jing, Biometrika 1995);
    a window's machine state carries into the next, so neighbours are not independent.

    Examples:
        >>> running_block(100), running_block(60), running_block(1)
        (5, 4, 1)
    """
    return max(1, math.ceil(round(n ** (1 / 3), 9)))


def running_slices(size: int, count: int, start: int, stop: int,
                   offset: int) -> list[tuple[int, int]]:
    """Rows, in a run that begins at row ``start - offset``, of the :func:`window_starts`
    windows of ``[start, stop)``, and last the whole span.

    Examples:
        >>> running_slices(10, 3, 20, 50, 5)
        [(5, 15), (15, 25), (25, 35), (5, 35)]
    """
    base = start - offset
    out = [(a - base, a - base + size) for a in window_starts(size, count, start, stop)]
    return out + [(offset, stop - base)]


def _span(workload: Workload, a: int, b: int) -> Span:
    return Span(a, b, float(workload.submit[a]), float(workload.submit[b - 1]))


def chronological_split(workload: Workload, *, size: int, train_count: int,
                        count: int = 100, train: float = 0.5, validation: float = 0.7,
                        warmup: int = 0, evaluation: str = "windows") -> Split:
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
        evaluation: ``windows``: each window its own run from an empty machine;
            ``running``: the training span cut into ``train_count`` chunks side
            by side, each one run (after ``warmup`` jobs of the training span);
            the validation and test spans each one run, after up to ``warmup``
            jobs of the past (rows before the span, never after), holding
            ``count`` windows measured inside it (:attr:`Split.slices`).

    Raises:
        ProtocolError: a span too short for one window, or an unknown evaluation.
    """
    if evaluation not in EVALUATIONS:
        raise ProtocolError(f"split: evaluation {evaluation!r}; expected one of "
                            f"{', '.join(EVALUATIONS)}")
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
    if evaluation == "windows":
        return Split(parts["train"], parts["validation"],
                     SealedWindows(parts["test"], spans["test"]), spans, note, blocks)
    chunk = a // max(1, train_count)
    train_runs = windows(workload, chunk, train_count, 0, a, warmup) if chunk else []
    if not train_runs:
        raise ProtocolError(f"split: the training span ({a} jobs) holds fewer than "
                            f"{train_count} chunks; use fewer training chunks")
    runs, slices = {}, {}
    for k in ("validation", "test"):
        s_ = spans[k]
        offset = min(max(0, int(warmup)), s_.start)
        runs[k] = window_at(workload, s_.start, s_.stop - s_.start, 0, offset)
        slices[k] = running_slices(size, count, s_.start, s_.stop, offset)
        blocks[k] = max(blocks[k], running_block(len(slices[k]) - 1))
    note = ("validation and test windows measured inside one run of their span "
            f"(after {min(max(0, int(warmup)), spans['validation'].start)} jobs of the past); "
            "intervals resample blocks of "
            + " and ".join(f"{blocks[k]} consecutive {k} windows" for k in ("validation", "test")))
    return Split(train_runs, [runs["validation"]], SealedWindows([runs["test"]], spans["test"]),
                 spans, note, blocks, slices, evaluation)


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


def _simulate(scenario: Scenario, source, window: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Simulate ``source`` on ``window`` from an empty machine: per row, the job's bsld
    and wait (NaN for a job that neither completed nor timed out)."""
    env = simpy.Environment()
    policy = _policy(checked_source(source, scenario))
    sim = build(env, scenario, policy, workload=window, record=False)
    sim.run()      # full collections put off while it runs (cosim.kernel.run)
    tau = scenario.metrics.tau
    bsld = np.full(len(window), np.nan)
    wait = np.full(len(window), np.nan)
    for j in sim.scheduler.jobs:
        if j.outcome in (Outcome.COMPLETED, Outcome.TIMEOUT):
            run = j.end - j.start
            bsld[j.index] = max(1.0, (j.end - j.submit) / max(tau, run))
            wait[j.index] = j.start - j.submit
    return bsld, wait


def _summary(bsld: np.ndarray, wait: np.ndarray) -> WindowResult:
    done = ~np.isnan(bsld)
    if not done.any():
        return WindowResult(math.nan, math.nan, math.nan)
    return WindowResult(float(bsld[done].mean()), float(wait[done].mean()),
                        float(wait[done].max()))


def run_window(scenario: Scenario, source, window: Workload) -> WindowResult:
    """Simulate ``source`` on ``window`` from an empty machine; bsld and waits.

    Of the window's measured jobs only, where it has warm-up jobs
    (:func:`window_at`).

    Raises:
        ScenarioError: ``source`` asks for predictions (see :func:`checked_source`).
    """
    bsld, wait = _simulate(scenario, source, window)
    measured = window.features.get(MEASURED)
    if measured is not None:
        bsld, wait = bsld[measured], wait[measured]
    return _summary(bsld, wait)


def run_slices(scenario: Scenario, source, window: Workload,
               slices: Sequence[tuple[int, int]]) -> list[WindowResult]:
    """Simulate ``source`` on ``window`` once; bsld and waits of the jobs of each slice
    of rows ``[a, b)`` (windows measured inside one run; :func:`running_slices`)."""
    bsld, wait = _simulate(scenario, source, window)
    return [_summary(bsld[a:b], wait[a:b]) for a, b in slices]


_WORKER: dict = {}


#: Seconds between a worker's checks that the process that started it is alive.
PARENT_POLL_S = 0.5


def _parent_alive(parent: int, first_ppid: int) -> bool:
    if os.getppid() != first_ppid:   # orphaned: adopted by init or a subreaper
        return False
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _watch_parent(parent: int, first_ppid: int) -> None:
    while _parent_alive(parent, first_ppid):
        time.sleep(PARENT_POLL_S)
    os._exit(1)   # the parent is gone (kill -9 runs no cleanup): end, as it cannot


def _init_worker(parent, scenario, windows_, slices):
    # Workers end with the process that started them, even one killed by SIGKILL: a
    # worker blocked on the pool's queue would otherwise wait for work forever (an
    # interrupted tune left four 130 MB workers running for minutes).
    threading.Thread(target=_watch_parent, args=(parent, os.getppid()), daemon=True,
                     name="watch-parent").start()
    _WORKER["scenario"], _WORKER["windows"], _WORKER["slices"] = scenario, windows_, slices


def _run(scenario, source, window, slices) -> list[WindowResult]:
    if slices is None:
        return [run_window(scenario, source, window)]
    return run_slices(scenario, source, window, slices)


def _work(task):
    source, k = task
    slices = _WORKER["slices"]
    return _run(_WORKER["scenario"], source, _WORKER["windows"][k],
                None if slices is None else slices[k])


class Evaluator:
    """Runs policies on a fixed list of windows, in ``processes`` worker processes.

    Args:
        scenario: the machine and metrics (its workload section is not used).
        windows_: the windows, shipped to each worker once.
        processes: 1 runs in this process.
        slices: per window, row ranges ``[a, b)`` each measured as a window of
            its own inside the window's one run (:attr:`Split.slices`); None:
            each window is one result.

    Use as a context manager (or call :meth:`close`) to end the workers.
    """

    def __init__(self, scenario: Scenario, windows_: Sequence[Workload], processes: int = 1,
                 slices: Sequence[Sequence[tuple[int, int]]] | None = None):
        if windows_:
            scenario = resolve_machine(scenario, windows_[0])
        self.scenario = scenario
        self.windows = list(windows_)
        if slices is not None and len(slices) != len(self.windows):
            raise ProtocolError(f"evaluator: {len(slices)} slice lists for "
                                f"{len(self.windows)} windows")
        self.slices = None if slices is None else [list(x) for x in slices]
        self.processes = max(1, int(processes))
        self._pool = None
        if self.processes > 1:
            self._pool = ProcessPoolExecutor(self.processes, initializer=_init_worker,
                                             initargs=(os.getpid(), scenario, self.windows,
                                                       self.slices))

    def evaluate(self, sources: Sequence, only: Sequence[int] | None = None) -> np.ndarray:
        """Mean bsld, mean wait and max wait: an array ``[policy, window, 3]``.

        ``only``: indices of the windows to run (default all), in the order given.
        With ``slices``, the window axis holds the selected windows' slices, in order.

        Raises:
            ScenarioError: a source asks for predictions (:func:`checked_source`),
                before any window runs.
        """
        for s in sources:
            checked_source(s, self.scenario)
        ks = range(len(self.windows)) if only is None else [int(k) for k in only]
        tasks = [(s, k) for s in sources for k in ks]
        if self._pool is None:
            results = [_run(self.scenario, s, self.windows[k],
                            None if self.slices is None else self.slices[k]) for s, k in tasks]
        else:
            chunk = max(1, len(tasks) // (4 * self.processes))
            results = list(self._pool.map(_work, tasks, chunksize=chunk))
        out = np.array([[r.bsld_mean, r.wait_mean, r.wait_max] for rs in results for r in rs],
                       dtype=float)
        per_source = (len(ks) if self.slices is None
                      else sum(len(self.slices[k]) for k in ks))
        return out.reshape(len(sources), per_source, 3)

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


def best_heuristic(validation_bsld: dict[str, np.ndarray]) -> str:
    """The heuristic with the lowest mean bsld on validation (ties: first named)."""
    return min(validation_bsld, key=lambda name: float(np.mean(validation_bsld[name])))
