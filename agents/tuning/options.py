"""The options of ``agents tune`` (one :class:`Options`) and their defaults."""

from __future__ import annotations

from dataclasses import dataclass

from agents.tuning.select import FALLBACK, MINIMAX_MARGIN
from agents.tuning.space import FOLDS

__all__ = ["Options", "DEFAULT_MAX_WAIT", "EVALUATION", "SELECTION", "SELECTIONS", "SKIP_TOLERANCE", "TRAIN_CHUNKS",
           "TRAIN_FILTER", "TRAIN_POOL", "TRAIN_WINDOWS"]

#: Contention filtering of the training windows (``--train-filter``, ``--train-pool``).
TRAIN_FILTER, TRAIN_POOL = "skip", 4
#: How validation selects (``--selection``): ``past`` (the default) is ``interval`` with
#: the training check of :func:`agents.tuning.select.past_check`; ``interval``: validation
#: alone; ``mean``: the lowest validation mean; ``minimax``: the search's fitness is the
#: worst ratio over the whole past (training chunks and validation) and the best point
#: ships only below ``--margin`` (:data:`agents.tuning.select.MINIMAX_MARGIN`).
SELECTIONS = ("past", "interval", "mean", "minimax")
SELECTION = "past"
#: ``skip``: a window is near-optimal when every heuristic is within 5 % of the best.
SKIP_TOLERANCE = 0.05
#: How validation and test windows are measured (``--evaluation``): in one run of each
#: span, as a cluster runs its policy. On RICC and Lublin the best heuristic on cold
#: windows (F1+EASY) had 1.1-1.6x SAF+EASY's mean bsld when the spans were run through.
EVALUATION = "running"
#: Training windows by default; with ``--evaluation running``, training chunks (each run whole).
TRAIN_WINDOWS, TRAIN_CHUNKS = 32, 4
#: ``python -m agents tune`` bounds the chosen policy's max wait by default: at most this
#: many times FCFS+EASY's on the same validation windows (``--max-wait none``: no bound).
#: The best heuristic by mean bsld alone starves jobs for months on real traces (SAF+EASY
#: 28.8 M s on one 128-processor trace against FCFS+EASY's 0.41 M s; a 3-minute tune on
#: lublin_256 shipped SAF+EASY with 7.2x FCFS+EASY's max wait).
DEFAULT_MAX_WAIT = 2.0


@dataclass
class Options:
    """What :func:`agents.tuning.tune` searches, how it selects and how it measures;
    ``python -m agents tune --help`` says what each does (the flags' names, with dashes)."""

    window_jobs: int = 256
    train_windows: int | None = None
    count: int = 100
    split: tuple[float, float] = (0.5, 0.7)
    processes: int | None = None
    seed: int = 0
    keep: int = 5
    generations: int | None = None
    submit_time: bool = False
    backfill_order: str = "searched"
    fitness: str = "ratio"
    sigma: float = 0.3
    selection: str = SELECTION
    user_features: bool | str = "auto"
    train_filter: str = TRAIN_FILTER
    train_pool: int = TRAIN_POOL
    snapshots: bool = False
    warmup: int | str = 0
    train_batch: int = 0
    folds: int = FOLDS
    slack: str = "off"
    evaluation: str = EVALUATION
    max_wait: float | None = None
    drain: str = "off"
    fallback: str = FALLBACK
    margin: float = MINIMAX_MARGIN
    backlog: str = "off"
    space: str = "priority"
    baseline: str | None = None
    #: what the classic heuristics may plan with (agents.tuning.beliefs): requests only
    #: by default, as before beliefs were a dimension of the search
    beliefs: tuple[str, ...] = ("requests",)
    corrections: tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        """Validation and test windows measured inside one run of their span."""
        return self.evaluation == "running"

    @property
    def minimax(self) -> bool:
        """The search scored on the whole past (``--selection minimax``)."""
        return self.selection == "minimax"
