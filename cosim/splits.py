"""Splits of a workload for the evaluation protocol: spans in time order or by seed, windows.

The windows half of :mod:`cosim.evaluation` (which re-exports every name here and
describes the protocol): a trace cut in time order into training, validation and test
spans (:func:`chronological_split`) or a generator's disjoint seeds
(:func:`seeded_split`); evenly spaced windows of a span (:func:`windows`), with warm-up
jobs (:func:`window_at`) or measured inside one run of the span (:func:`running_slices`);
the bootstrap block lengths of windows that overlap or follow one another in one run;
and the test windows sealed so that they are read once (:class:`SealedWindows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cosim.paired import ProtocolError
from cosim.workloads.base import Workload

__all__ = ["Span", "SealedWindows", "Split", "MEASURED", "windows", "window_at",
           "window_starts", "overlap_block", "EVALUATIONS", "running_block", "running_slices",
           "chronological_split", "seeded_split"]


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
