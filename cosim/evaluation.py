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

:class:`Evaluator` runs (policy, window) pairs on the one engine
(:class:`cosim.engine.Engine`), in worker processes when asked; a policy is a
name of the grammar (``saf+easy``, ``learned:DIR``) or a
:class:`cosim.policies.priority.PriorityWeights`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

from cosim import metrics, records
from cosim.actors.corrections import CORRECTIONS
from cosim.config import Scenario
from cosim.engine import Engine, default_processes  # default_processes re-exported
from cosim.errors import ScenarioError
from cosim.model import build, capacity_of  # capacity_of re-exported for the protocol's users
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
from cosim.policies.loaders import POLICY_LOADERS, PREDICTION_BACKENDS, load_prefixed, prefix_of
from cosim.policies.names import PolicySpec, make_policy, parse_policy
from cosim.policies.priority import PriorityWeights, make_priority_policy
from cosim.prediction_hub import check_history_inputs, scenario_hub
from cosim.splits import (  # the windows, re-exported: one place for the protocol
    EVALUATIONS,
    MEASURED,
    SealedWindows,
    Span,
    Split,
    chronological_split,
    overlap_block,
    running_block,
    running_slices,
    seeded_split,
    window_at,
    window_starts,
    windows,
)
from cosim.workloads.base import Workload
from cosim.workloads.loading import resolve_machine

__all__ = ["CLASSIC", "Corrected", "ProtocolError", "Span", "Split", "SealedWindows", "windows",
           "chronological_split", "seeded_split", "Evaluator", "WindowResult", "Comparison",
           "compare", "best_heuristic", "bootstrap_interval", "mean_interval", "capacity_of", "checked_source",
           "CONTENTION", "contention_scores", "most_contended", "replace_near_optimal",
           "window_starts", "overlap_block", "block_indices", "window_at", "MEASURED",
           "EVALUATIONS", "running_block", "running_slices", "run_slices", "Protocol", "Scores",
           "source_name", "default_processes", "ROW_METRICS", "WINDOW_KEYS", "window_summary", "COL_BSLD", "COL_WAIT", "COL_MAX_WAIT", "span_row", "span_rows", "job_rows"]

#: The heuristics a learned policy must beat, each with EASY backfilling.
CLASSIC = ("fcfs+easy", "sjf+easy", "saf+easy", "f1+easy", "wfp3+easy", "unicef+easy")


# -- evaluation ------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowResult:
    """What one policy did on one window."""

    bsld_mean: float
    wait_mean: float
    wait_max: float


@dataclass(frozen=True)
class Corrected:
    """A policy name planned with its own ``scheduler.correction`` (the scenario's otherwise):
    the correction as a dimension of what is compared on the same windows (``agents tune
    --corrections``). Named ``POLICY/CORRECTION`` (``saf+easy@history/stepup``)."""

    policy: str
    correction: str

    @property
    def name(self) -> str:
        return f"{self.policy}/{self.correction}"

    def __str__(self) -> str:
        return self.name


def _corrected(scenario: Scenario, source):
    """``(scenario, source)`` as a run of ``source`` sees them: a :class:`Corrected` name
    unwrapped, its correction (or a ``learned:DIR`` folder's) in the scenario."""
    correction = getattr(source, "correction", "")     # also a learned folder's own
    if not correction:
        return scenario, source
    sched = scenario.scheduler.model_copy(update={"correction": correction})
    return (scenario.model_copy(update={"scheduler": sched}),
            source.policy if isinstance(source, Corrected) else source)


def checked_source(source, scenario: Scenario, *, where: str = "policy"):
    """``source`` as the evaluator will run it: a :class:`PriorityWeights` or a parsed name.

    The evaluator simulates with the workload's requested times as the
    scheduler's beliefs, or with a name's ``@PREDICTOR`` where a higher layer
    registered its backend (:data:`cosim.policies.loaders.PREDICTION_BACKENDS`:
    ``import agents`` installs ``@history``), through the hub a run makes
    (:func:`cosim.prediction_hub.scenario_hub`), re-predicted by the scenario's
    ``scheduler.correction``. Any other predictor (or any name when the scenario's
    ``predictor.runtime`` is not ``estimate``) would silently be evaluated as the
    plain heuristic, so it is refused instead.

    Raises:
        ScenarioError: a name that does not parse, asks for a predictor, or is
            a trained agent (``rl:DIR``), or ``@history`` where the workload has no users or
            requests (:func:`cosim.prediction_hub.check_history_inputs`).
    """
    if isinstance(source, PriorityWeights):
        return source
    if isinstance(source, Corrected):
        if source.correction not in CORRECTIONS:
            raise ScenarioError(where, repr(source.name), "a correction of "
                                + ", ".join(CORRECTIONS))
        checked_source(source.policy, scenario, where=where)
        return source
    known = "".join(f", @{p}" for p in PREDICTION_BACKENDS)
    accepted = (f"a heuristic, selector, learned:DIR or rl:DIR with @estimate{known} or no "
                "@PREDICTOR: windows are evaluated on the requested times or a registered "
                "predictor; use 'python -m cosim run' for the others")
    if hasattr(source, "policy_for"):        # a policy source (agents.acting.ActingAgent)
        if scenario.predictor.runtime != "estimate":
            raise ScenarioError(where, f"{source_name(source)!r} with predictor.runtime "
                                       f"{scenario.predictor.runtime!r}",
                                accepted + " (--set predictor.runtime=estimate)")
        return source
    spec = source if isinstance(source, PolicySpec) else parse_policy(source, where=where)
    if spec.predictor not in (None, "estimate") and (spec.predictor not in PREDICTION_BACKENDS
                                                     or spec.kill):
        raise ScenarioError(where, repr(spec.name), accepted)
    if spec.predictor is None and scenario.predictor.runtime != "estimate":
        raise ScenarioError(where, f"{spec.name!r} with predictor.runtime "
                                   f"{scenario.predictor.runtime!r}",
                            accepted + " (--set predictor.runtime=estimate)")
    if spec.kind == "agent" and prefix_of(spec) not in POLICY_LOADERS:
        raise ScenarioError(where, repr(spec.name), "a heuristic, selector or learned:DIR "
                                                    "(a trained agent, rl:DIR, needs its loader: "
                                                    "import agents)")
    if spec.kind == "agent" and not Path(spec.checkpoint).is_dir():
        raise ScenarioError(where, repr(spec.name), "rl:DIR with DIR a checkpoint folder "
                                                    "written by 'python -m agents train'")
    return spec


def _policy(source, scenario: Scenario, window: Workload):
    """A fresh policy of ``source`` for one simulation of ``window``: a trained agent
    (``rl:DIR``) through the loader the learners registered (:mod:`cosim.policies.loaders`)."""
    source = checked_source(source, scenario)
    if isinstance(source, PriorityWeights):
        return make_priority_policy(source)
    if hasattr(source, "policy_for"):
        return source.policy_for(scenario, window)
    if source.kind == "agent":
        return load_prefixed(source, scenario, window)
    return make_policy(source)


def _built(scenario: Scenario, source, window: Workload, record: bool = False):
    """The simulation of ``source`` on ``window``: its policy and, for a name's registered
    ``@PREDICTOR``, the prediction hub it plans with."""
    policy = _policy(source, scenario, window)
    predictor = getattr(source, "predictor", None)
    hooks = ()
    if predictor not in (None, "estimate"):
        backend = PREDICTION_BACKENDS[predictor](scenario, window)
        refit = scenario.predictor.refit or getattr(backend, "default_refit", None)
        hooks = (scenario_hub(predictor, scenario, window, backend, refit=refit),)
    return build(simpy.Environment(), scenario, policy, workload=window, record=record,
                 hooks=hooks)


def _registries() -> tuple[dict, dict]:
    """The loaders and prediction backends higher layers registered: shipped to workers."""
    return dict(POLICY_LOADERS), dict(PREDICTION_BACKENDS)


def _install(registries: tuple[dict, dict]) -> None:
    """The parent's registries (rl:DIR, @history), in a worker too."""
    POLICY_LOADERS.update(registries[0])
    PREDICTION_BACKENDS.update(registries[1])


def _simulate(scenario: Scenario, source, window: Workload) -> tuple[np.ndarray, ...]:
    """Simulate ``source`` on ``window`` from an empty machine: per row, the job's bsld,
    wait and time queued (see :func:`job_rows`)."""
    scenario, source = _corrected(scenario, checked_source(source, scenario))
    sim = _built(scenario, checked_source(source, scenario), window)
    sim.run()      # full collections put off while it runs (cosim.kernel.run)
    return job_rows(sim.scheduler.jobs, len(window), scenario.metrics.tau)


#: The job columns :func:`job_rows` reads.
_JOB_COLUMNS = ("submit", "start", "end", "run", "procs", "outcome", "killed_seconds")


def job_rows(jobs, rows: int, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window row, the bsld, wait and time queued of the simulated ``jobs``.

    By :func:`cosim.metrics.job_metrics` and :func:`cosim.metrics.queued_time`,
    the definitions of ``summary.json``: bsld and wait are NaN in the rows of
    jobs that neither completed nor timed out; the time queued (whose maximum
    is ``wait_max``) is also that of failed and given-up jobs.
    """
    table = records.jobs_table(jobs, _JOB_COLUMNS)
    per = metrics.job_metrics(table, tau=tau)
    queued = metrics.queued_time(table, np.asarray(table["outcome"], dtype=str))
    out = np.full((3, rows), np.nan)
    out[:, [j.index for j in jobs]] = per["bsld"], per["wait"], queued
    return out[0], out[1], out[2]


def _summary(bsld: np.ndarray, wait: np.ndarray, queued: np.ndarray) -> WindowResult:
    done = ~np.isnan(bsld)
    if not done.any():
        return WindowResult(math.nan, math.nan, math.nan)
    return WindowResult(float(bsld[done].mean()), float(wait[done].mean()),
                        float(np.nanmax(queued)))


def run_window(scenario: Scenario, source, window: Workload) -> WindowResult:
    """Simulate ``source`` on ``window`` from an empty machine; bsld and waits.

    Of the window's measured jobs only, where it has warm-up jobs
    (:func:`window_at`).

    Raises:
        ScenarioError: ``source`` asks for predictions (see :func:`checked_source`).
    """
    per_row = _simulate(scenario, source, window)
    measured = window.features.get(MEASURED)
    if measured is not None:
        per_row = tuple(values[measured] for values in per_row)
    return _summary(*per_row)


def run_slices(scenario: Scenario, source, window: Workload,
               slices: Sequence[tuple[int, int]]) -> list[WindowResult]:
    """Simulate ``source`` on ``window`` once; bsld and waits of the jobs of each slice
    of rows ``[a, b)`` (windows measured inside one run; :func:`running_slices`)."""
    per_row = _simulate(scenario, source, window)
    return [_summary(*(values[a:b] for values in per_row)) for a, b in slices]


def _run(scenario, source, window, slices) -> list[WindowResult]:
    if slices is None:
        return [run_window(scenario, source, window)]
    return run_slices(scenario, source, window, slices)


def _window_task(state, task) -> list[WindowResult]:
    """One (source, window index) of an :class:`Evaluator`, on the engine (``state``: the
    scenario, the windows and their slices, shipped to each worker once)."""
    scenario, windows_, slices, loaders = state
    _install(loaders)       # the parent's registries, in a worker too
    source, k = task
    return _run(scenario, source, windows_[k], None if slices is None else slices[k])


#: A span's row (:func:`span_rows`): starvation beside the mean, by the names of summary.json.
#: The last axis of :meth:`Evaluator.evaluate`'s array: mean bsld, mean wait, max wait.
COL_BSLD, COL_WAIT, COL_MAX_WAIT = 0, 1, 2

ROW_METRICS = ("bsld_mean", "wait_mean", "wait_max", "wait_p99", "starved_1d", "starved_1w")


def span_row(scenario: Scenario, source, window: Workload) -> dict[str, float | None]:
    """``source`` run once through ``window``: :data:`ROW_METRICS` of its measured jobs, as
    :func:`cosim.metrics.summarize` defines them for ``summary.json``."""
    scenario, source = _corrected(scenario, checked_source(source, scenario))
    sim = _built(scenario, checked_source(source, scenario), window)
    sim.run()
    table = records.jobs_table(sim.scheduler.jobs)
    measured = window.features.get(MEASURED)
    if measured is not None:
        keep = np.asarray(measured)[[j.index for j in sim.scheduler.jobs]]
        table = {k: np.asarray(v)[keep] for k, v in table.items()}
    row = metrics.summarize(table, None, cores=capacity_of(scenario), tau=scenario.metrics.tau)
    return {k: row[k] for k in ROW_METRICS}


def _row_task(state, source):
    scenario, window, loaders = state
    _install(loaders)
    return span_row(scenario, source, window)


#: The columns every :class:`Scores` starts with (:data:`COL_BSLD`, ...), by summary.json's names.
WINDOW_KEYS = ("bsld_mean", "wait_mean", "wait_max")


def window_summary(scenario: Scenario, source, window: Workload,
                   keys: Sequence[str]) -> list[float]:
    """``source`` run on ``window`` from an empty machine: the ``keys`` of its
    :func:`cosim.metrics.summarize` (events recorded: time averages too), NaN where undefined."""
    scenario, source = _corrected(scenario, checked_source(source, scenario))
    sim = _built(scenario, checked_source(source, scenario), window, record=True)
    sim.run()
    row = metrics.summarize(sim.jobs_table(), sim.events_table(), cores=sim.cluster.capacity,
                            tau=scenario.metrics.tau)
    return [math.nan if row[k] is None else float(row[k]) for k in keys]


def _summary_task(state, task):
    scenario, windows_, keys, loaders = state
    _install(loaders)
    source, k = task
    return window_summary(scenario, source, windows_[k], keys)


def span_rows(scenario: Scenario, sources: Sequence, window: Workload,
              processes: int = 1) -> dict[str, dict[str, float | None]]:
    """:func:`span_row` of each source on ``window``, in up to ``processes`` workers."""
    scenario = resolve_machine(scenario, window)
    n = min(max(1, int(processes)), len(sources))
    if n <= 1:
        return {source_name(s): span_row(scenario, s, window) for s in sources}
    with Engine((scenario, window, _registries()), n) as engine:
        return dict(zip((source_name(s) for s in sources), engine.map(_row_task, sources)))


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
        self._engine = Engine((scenario, self.windows, self.slices, _registries()),
                              self.processes)

    def evaluate(self, sources: Sequence, only: Sequence[int] | None = None) -> np.ndarray:
        """Mean bsld, mean wait and max wait: an array ``[policy, window, 3]``.

        ``only``: indices of the windows to run (default all), in the order given.
        With ``slices``, the window axis holds the selected windows' slices, in order.

        Raises:
            ScenarioError: a source asks for predictions (:func:`checked_source`),
                before any window runs.
        """
        for s in sources:
            spec = checked_source(s, self.scenario)
            spec = checked_source(spec.policy, self.scenario) if isinstance(spec, Corrected) \
                else spec
            if self.windows and isinstance(spec, PolicySpec):
                check_history_inputs(spec.predictor, self.scenario, self.windows[0])
        ks = range(len(self.windows)) if only is None else [int(k) for k in only]
        results = self._engine.map(_window_task, [(s, k) for s in sources for k in ks])
        out = np.array([[r.bsld_mean, r.wait_mean, r.wait_max] for rs in results for r in rs],
                       dtype=float)
        per_source = (len(ks) if self.slices is None
                      else sum(len(self.slices[k]) for k in ks))
        return out.reshape(len(sources), per_source, 3)

    def close(self) -> None:
        """End the worker processes."""
        self._engine.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def best_heuristic(validation_bsld: dict[str, np.ndarray]) -> str:
    """The heuristic with the lowest mean bsld on validation (ties: first named)."""
    return min(validation_bsld, key=lambda name: float(np.mean(validation_bsld[name])))


@dataclass
class Scores:
    """What policies did on a span: per window ``[policy, window, (bsld_mean, wait_mean,
    wait_max)]``, and each policy's mean bsld over the span run whole (None: not run)."""

    names: list[str]
    windows: np.ndarray
    whole: np.ndarray | None = None
    #: the test span: each policy's :data:`ROW_METRICS` over the span as a whole
    rows: dict[str, dict] | None = None
    #: the names of the last axis of :attr:`windows` (:data:`WINDOW_KEYS` first)
    keys: tuple[str, ...] = WINDOW_KEYS

    def column(self, name: str, key: str) -> np.ndarray:
        """The policy's ``key`` (a name of :attr:`keys`) per window."""
        return self.windows[self.names.index(name), :, self.keys.index(key)]

    def bsld(self, name: str) -> np.ndarray:
        """The policy's mean bsld per window."""
        return self.windows[self.names.index(name), :, 0]

    def max_wait(self, name: str) -> float:
        """The policy's longest wait over the windows."""
        return float(self.windows[self.names.index(name), :, 2].max())


def source_name(source) -> str:
    """A policy's name: the grammar's name, or a :class:`PriorityWeights`' or policy source's own."""
    return str(source) if isinstance(source, str) else str(getattr(source, "name", source))


class Protocol:
    """The evaluation protocol as one object: a split, its spans scored, the reference chosen
    on validation, paired comparisons, and the test span read once.

    Built from a scenario and a workload split in time order (:meth:`chronological`) or
    from a generator's disjoint seeds (:meth:`seeded`); windows are cold or measured inside
    one run of their span (``evaluation``). Every figure comes from :class:`Evaluator`
    (the per-job definitions of :mod:`cosim.metrics`) and every interval from
    :func:`compare` (:mod:`cosim.paired`, resampling the split's blocks).
    """

    def __init__(self, scenario: Scenario, split: Split, workload: Workload | None = None, *,
                 processes: int = 1, seed: int = 0):
        self.scenario, self.split, self.workload = scenario, split, workload
        self.processes, self.seed = max(1, int(processes)), seed
        self.running = split.evaluation == "running"

    @classmethod
    def chronological(cls, scenario: Scenario, workload: Workload, *, processes: int = 1,
                      seed: int = 0, **split) -> Protocol:
        """The workload cut in time order (``split``: :func:`chronological_split`'s options)."""
        return cls(resolve_machine(scenario, workload), chronological_split(workload, **split),
                   workload, processes=processes, seed=seed)

    @classmethod
    def given(cls, scenario: Scenario, windows_: Sequence[Workload], *, processes: int = 1,
              seed: int = 0, note: str = "windows given by the caller") -> Protocol:
        """A protocol over windows someone else cut (an environment's episodes): they are its
        test set, read once; nothing is selected on them (no training or validation span)."""
        split = Split([], [], SealedWindows(list(windows_)), note=note)
        return cls(resolve_machine(scenario, windows_[0]) if windows_ else scenario, split,
                   processes=processes, seed=seed)

    @classmethod
    def seeded(cls, scenario: Scenario, make_workload, *, processes: int = 1, seed: int = 0,
               **split) -> Protocol:
        """Disjoint generator seeds per set (``split``: :func:`seeded_split`'s options)."""
        return cls(scenario, seeded_split(make_workload, **split), processes=processes, seed=seed)

    def evaluator(self, part: str) -> Evaluator:
        """An :class:`Evaluator` of the ``train`` or ``validation`` windows (the caller closes it).

        Raises:
            ProtocolError: ``part`` is ``test``, which only :meth:`test` reads.
        """
        if part not in ("train", "validation"):
            raise ProtocolError(f"protocol: part {part!r}; expected train or validation "
                                "(the test span is read once, by Protocol.test)")
        windows_ = self.split.train if part == "train" else self.split.validation
        slices = [self.split.slices[part]] if self.running and part == "validation" else None
        return Evaluator(self.scenario, windows_, self.processes, slices=slices)

    def score(self, part: str, sources: Sequence, evaluator: Evaluator | None = None, *,
              whole: bool = False) -> Scores:
        """``sources`` on the windows of ``part``; with ``whole`` (or running windows), also
        each source's mean bsld over the span run whole."""
        if evaluator is None:
            with self.evaluator(part) as ev:
                return self.score(part, sources, ev, whole=whole)
        return self._scores(part, sources, evaluator.evaluate(sources), whole)

    def _scores(self, part: str, sources: Sequence, res: np.ndarray, whole: bool) -> Scores:
        names = [source_name(s) for s in sources]
        if self.running and part != "train":        # the last slice: the span as a whole
            return Scores(names, res[:, :-1], res[:, -1, 0])
        return Scores(names, res, self.replay(part, sources) if whole else None)

    def replay(self, part: str, sources: Sequence) -> np.ndarray:
        """Each source's mean bsld over one run through the whole span of ``part``.

        Windows start from an empty machine, where a policy can gain by draining the
        window's first burst in a way that costs it once a backlog stands; a cluster
        runs its policy continuously, so the span replayed whole (one run, no interval)
        checks that a window gain is not an artefact of the empty start.

        Raises:
            ProtocolError: ``part`` is ``test`` and the test span was not read yet.
        """
        if part == "test" and not self.split.test.read_count:
            raise ProtocolError("protocol: the test span is replayed only by Protocol.test")
        span = self.split.spans[part]
        window = window_at(self.workload, span.start, span.stop - span.start)
        with Evaluator(self.scenario, [window], min(self.processes, len(sources))) as ev:
            return ev.evaluate(sources)[:, 0, 0]

    def reference(self, scores: Scores, candidates: Sequence[str] = CLASSIC,
                  max_wait: float | None = None) -> tuple[str, str, float | None]:
        """``(lead, best, bound)`` on validation: ``lead``, the candidate of lowest mean bsld;
        ``best``, the lowest within the bound of ``max_wait`` x FCFS+EASY's max wait (which
        is always within it), ``lead`` itself without a bound."""
        lead = best_heuristic({h: scores.bsld(h) for h in candidates})
        if max_wait is None:
            return lead, lead, None
        bound = max_wait * scores.max_wait("fcfs+easy")
        best = best_heuristic({h: scores.bsld(h) for h in candidates
                               if scores.max_wait(h) <= bound or h == "fcfs+easy"})
        return lead, best, bound

    def compare(self, part: str, values, reference, **names) -> Comparison:
        """:func:`compare` of per-window values on ``part``, resampling its blocks."""
        return compare(values, reference, seed=self.seed, block=self.split.blocks.get(part, 1),
                       **names)

    def test_windows(self) -> list[Workload]:
        """The test windows themselves, once, after selection: for what :meth:`test` does
        not run (a learned agent played window by window).

        Raises:
            ProtocolError: the test span was read before.
        """
        return self.split.test.read()

    def test(self, sources: Sequence, *, whole: bool = True,
             keys: Sequence[str] = ()) -> Scores:
        """``sources`` on the test windows (and the span run whole): once, after selection.

        ``keys``: more metrics of ``summary.json`` per window after :data:`WINDOW_KEYS`
        (``utilization``, ``queue_len_mean``: each window's run then records its events),
        in :attr:`Scores.keys`; the span is not run whole then.

        Raises:
            ProtocolError: the test span was read before, or ``keys`` with running windows.
        """
        windows_ = self.split.test.read()
        if keys:
            return self._summaries(sources, windows_, keys)
        slices = [self.split.slices["test"]] if self.running else None
        with Evaluator(self.scenario, windows_, self.processes, slices=slices) as ev:
            scores = self._scores("test", sources, ev.evaluate(sources), whole)
        if self.running:      # the span's one run (after its warm-up jobs, not measured)
            span = windows_[0]
        elif self.workload is not None:
            s = self.split.spans["test"]
            span = window_at(self.workload, s.start, s.stop - s.start)
        else:
            return scores
        scores.rows = span_rows(self.scenario, sources, span, self.processes)
        return scores

    def _summaries(self, sources: Sequence, windows_: list[Workload], more: Sequence[str]
                   ) -> Scores:
        if self.running:
            raise ProtocolError("protocol: metrics per window need cold windows "
                                "(evaluation 'windows')")
        keys = WINDOW_KEYS + tuple(k for k in more if k not in WINDOW_KEYS)
        for source in sources:
            checked_source(source, self.scenario)
        tasks = [(source, k) for source in sources for k in range(len(windows_))]
        state = (self.scenario, windows_, keys, _registries())
        with Engine(state, min(self.processes, max(1, len(tasks)))) as engine:
            values = np.array(engine.map(_summary_task, tasks), dtype=float)
        return Scores([source_name(s) for s in sources],
                      values.reshape(len(sources), len(windows_), len(keys)), keys=keys)
