"""The ``python -m agents tune`` command line: its arguments, checked, handed to
:func:`agents.tuning.tune` (the package's docstring says what the search and the protocol do)."""

from __future__ import annotations

import math

from agents.tuning.beliefs import (
    DEFAULT_BELIEFS,
    add_belief_arguments,
    checked_beliefs,
    checked_corrections,
)
from agents.tuning.options import (
    DEFAULT_MAX_WAIT,
    EVALUATION,
    SELECTION,
    SELECTIONS,
    TRAIN_CHUNKS,
    TRAIN_FILTER,
    TRAIN_POOL,
    TRAIN_WINDOWS,
)
from agents.tuning.run import tune
from agents.tuning.select import FALLBACK, FALLBACKS, MINIMAX_MARGIN
from agents.tuning.slurm import checked_baseline
from agents.tuning.space import FITNESS, FOLDS
from cosim.cli import nonnegative_int
from cosim.engine import PROCESSES_PER_CPU, check_processes, max_processes  # re-exported
from cosim.errors import InputError
from cosim.evaluation import CONTENTION, EVALUATIONS

__all__ = ["add_parser", "run", "max_processes", "PROCESSES_PER_CPU"]

def _max_wait(text: str) -> float | None:
    """``--max-wait``: a ratio, or ``none`` for no bound (checked in :func:`run`)."""
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError("--max-wait", repr(text), "a ratio of at least 1, or none") from None


def add_parser(sub) -> None:
    """The ``tune`` subcommand's arguments."""
    t = sub.add_parser("tune", help="search a priority policy with EASY on a workload's past "
                                    "(CMA-ES), select on validation, test once on its future")
    t.add_argument("scenario", help="scenario YAML file (its workload: a trace or a generator)")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")
    t.add_argument("--minutes", type=float, required=True, help="budget: wall clock from the start (loading and the heuristics' "
                        "validation runs included) to the end of the search")
    t.add_argument("--out", required=True, help="output folder (runs as --policy learned:DIR)")
    t.add_argument("--window-jobs", type=int, default=256, help="jobs per window")
    t.add_argument("--train-windows", type=int, default=None,
                   help=f"training windows (default {TRAIN_WINDOWS}); with --evaluation running, "
                        f"chunks of the training span, each run whole (default "
                        f"{TRAIN_CHUNKS})")
    t.add_argument("--evaluation", choices=EVALUATIONS, default=EVALUATION,
                   help="running (default): the validation and test spans each run once, as a "
                        "cluster runs its policy, with the windows measured inside that run, "
                        "and the search scored on --train-windows long chunks of the training "
                        "span (no contention filter), so a policy that drains a window's first "
                        "burst well but breaks down under a standing backlog cannot win; "
                        "windows: every window its own run from an empty machine")
    t.add_argument("--windows", type=int, default=100, help="validation and test windows each")
    t.add_argument("--split", type=float, nargs=2, default=(0.5, 0.7), metavar=("TRAIN", "VAL"),
                   help="cut points as fractions of the jobs (train | validation | test)")
    t.add_argument("--processes", type=int, default=None,
                   help=f"worker processes (default: every CPU available; at most "
                        f"{PROCESSES_PER_CPU} per CPU)")
    t.add_argument("--seed", type=nonnegative_int, default=0, help="CMA-ES and bootstrap seed")
    t.add_argument("--keep", type=int, default=5, help="searched policies taken to validation")
    t.add_argument("--with-submit-time", action="store_true",
                   help="also search the log submit time weight (F1's second term); off by "
                        "default: absolute time is not stationary, so a weight learned on the "
                        "past means another policy on the future")
    t.add_argument("--user-features", nargs="?", const="on", default="auto",
                   choices=("auto", "on", "off"),
                   help="also search the user-history features (log of the mean run time of "
                        "the user's last two completed jobs, capped by the request, and the "
                        "user's recent run/request ratio; Tsafrir et al. 2007), computed on the "
                        "whole workload's recorded history before it is cut; auto (default): "
                        "on when at least half the jobs name their user and at least half "
                        "request more than 1.25x their run time (a real trace with user "
                        "estimates), off otherwise; the flag alone means on")
    t.add_argument("--generations", type=int, default=None,
                   help="stop after this many CMA-ES generations (a reproducible search)")
    t.add_argument("--backfill-order", choices=("searched", "same"), default="searched",
                   help="searched (default): a second weight vector orders EASY's backfill "
                        "candidates, searched with the first; same: backfill in queue order")
    t.add_argument("--fitness", choices=FITNESS, default="ratio",
                   help="ratio (default): the candidate's mean bsld over the best heuristic's "
                        "on the training windows; windows: the mean of per-window ratios "
                        "(each window weighs the same, heavy windows less); folds: the worst, "
                        "over --folds chronological blocks of the training windows, of the "
                        "candidate's mean bsld over the best heuristic's in that block (a "
                        "policy must hold in every period of the past, whichever heuristic "
                        "leads there)")
    t.add_argument("--folds", type=int, default=FOLDS,
                   help=f"chronological blocks of training windows for --fitness folds "
                        f"(default {FOLDS})")
    t.add_argument("--selection", choices=SELECTIONS, default=SELECTION,
                   help="past (default): interval, and the policy must also do no worse than "
                        "the best heuristic in every one of the --folds periods of the "
                        "training span (the evidence of the whole past); interval: a searched "
                        "policy replaces the best heuristic only when the 95 %% bootstrap "
                        "interval of its mean bsld ratio to it on validation lies below 1 (and "
                        "it does no worse over the span as a whole); mean: the lowest "
                        "validation mean wins; minimax: the search's fitness is the worst "
                        "ratio to the best heuristic over the training chunks and the "
                        "validation span (the whole past; --evaluation running; where "
                        "F1+EASY leads, its submit-time term is searched too), and the "
                        "smallest step from the heuristic's point toward the best point (a "
                        "quarter, half, three quarters or all of the way) whose ratio is "
                        "below --margin ships")
    t.add_argument("--margin", type=float, default=MINIMAX_MARGIN,
                   help=f"--selection minimax: a searched point ships only if its worst-period ratio is below this "
                        f"(default {MINIMAX_MARGIN:g})")
    t.add_argument("--fallback", choices=FALLBACKS, default=FALLBACK,
                   help="the heuristic kept when no searched policy qualifies: validation "
                        "(default): the best on validation; median: the lowest median, over "
                        "the --folds periods of the training span and validation, of its mean "
                        "bsld over the period's best heuristic's (better on average on unseen "
                        "traces, but sometimes worse than the best on validation)")
    t.add_argument("--train-filter", choices=("none",) + CONTENTION, default=TRAIN_FILTER,
                   help="contention filtering of the training windows: cut --train-pool times "
                        "--train-windows windows from the training span and run the "
                        "heuristics on them once; skip: the evenly spaced windows, each one "
                        "where every heuristic is within 5 %% of the best replaced by the "
                        "pool's window of widest worst/best spread; spread: the windows of "
                        "widest spread; excess: of largest best-heuristic bsld; none: evenly "
                        f"spaced windows, no pool (default: {TRAIN_FILTER})")
    t.add_argument("--train-pool", type=int, default=TRAIN_POOL,
                   help=f"pool size as a multiple of --train-windows (default {TRAIN_POOL})")
    t.add_argument("--snapshots", action="store_true",
                   help="also take to validation the best point so far and the search mean at "
                        "generations 5, 10, 20, 40, ... (early stopping chosen on validation)")
    t.add_argument("--warmup", default="0", metavar="JOBS|all",
                   help="jobs simulated before each window (train, validation and test; from "
                        "the window's own span) and not measured, so windows start on a busy "
                        "machine as on a running cluster (default 0: from an empty machine); "
                        "all: with --evaluation running, every run starts at the trace's "
                        "first job, so each span is measured in the state the policy itself "
                        "leaves after the whole past (the policy has run all along)")
    t.add_argument("--train-batch", type=int, default=0, metavar="K",
                   help="each generation scores its candidates on K training windows drawn "
                        "afresh (the same K for every candidate of the generation), so the "
                        "search cannot fit a fixed few windows (default 0: all, every "
                        "generation)")
    t.add_argument("--max-wait", type=_max_wait, default=DEFAULT_MAX_WAIT, metavar="RATIO|none",
                   help="a fairness bound: the chosen policy's max wait on validation at most "
                        "RATIO x FCFS+EASY's there. The best heuristic within it is the "
                        "reference; the search adds a starvation guard (a job that has waited "
                        "T s goes ahead of the rest, oldest first; T searched) and is penalized "
                        "where a training chunk's max wait exceeds RATIO x FCFS+EASY's "
                        f"(default {DEFAULT_MAX_WAIT:g}; none: no bound); the model card says "
                        "whether the chosen policy kept it on the test span")
    # Two EASY variants the search may take on (off by default; docs/results/tuning.md says why).
    for flag, what in (
            ("--slack", "relaxed EASY's slack, the head promised its shadow time plus slack x "
                        "its estimate, so backfilling may delay it by that much (Ward, Mahood "
                        "and West, JSSPP 2002; seeded at 0, textbook EASY); off: relaxed "
                        "EASY's window gains on Lublin came from the empty start and reversed "
                        "with a backlog"),
            ("--drain", "a drain-aware reservation: a head whose shadow time is more than D x "
                        "its estimate away gets no reservation (every job that fits may start) "
                        "until it has waited G; D and G searched from the best of a small grid "
                        "on the training chunks, off included; off: on RICC it mended the "
                        "past's worst chunk but lost on validation")):
        t.add_argument(flag, choices=("searched", "off"), default="off",
                       help=f"searched: also search {what} (default off)")
    t.add_argument("--backlog", choices=("searched", "off"), default="off",
                   help="searched: also search three backlog products (B = log10(1 + the queued "
                        "jobs' estimated core-hours / N) times log estimate, log cores and log "
                        "wait), so the order may change with the queue (default off)")
    t.add_argument("--space", choices=("priority", "slurm"), default="priority",
                   help="priority (default): the weights of a priority over job features with "
                        "EASY; slurm: Slurm's own knobs (the PriorityWeight* weights, "
                        "PriorityMaxAge, PriorityDecayHalfLife, PriorityFavorSmall, bf_window, "
                        "bf_max_job_test), the chosen lines written to slurm.conf beside the "
                        "card")
    t.add_argument("--baseline", default=None, metavar="'slurm:KEY=VALUE,...'",
                   help="--space slurm: the site's current configuration, a slurm policy "
                        "name; its row is shown on validation and test and it competes in "
                        "selection")
    add_belief_arguments(t)
    t.add_argument("--sigma", type=float, default=0.3, help="CMA-ES initial step size on "
                                                            "unit-norm weights")


def run(ns) -> int:
    """Entry point of the subcommand."""
    if not ns.minutes > 0 or not math.isfinite(ns.minutes):
        raise InputError("--minutes", repr(ns.minutes), "a positive number of minutes")
    if ns.train_windows is None:
        ns.train_windows = TRAIN_CHUNKS if ns.evaluation == "running" else TRAIN_WINDOWS
    for flag, value in (("--window-jobs", ns.window_jobs), ("--train-windows", ns.train_windows),
                        ("--windows", ns.windows), ("--keep", ns.keep),
                        ("--train-pool", ns.train_pool), ("--folds", ns.folds)):
        if value < 1:
            raise InputError(flag, repr(value), "at least 1")
    warmup = ns.warmup
    if warmup != "all":
        try:
            warmup = int(warmup)
        except ValueError:
            pass
        if not isinstance(warmup, int) or warmup < 0:
            raise InputError("--warmup", repr(warmup), "0 or more jobs, or all")
    check_processes(ns.processes)
    if ns.train_batch < 0:
        raise InputError("--train-batch", repr(ns.train_batch), "0 (all) or more windows")
    if ns.generations is not None and ns.generations < 1:
        raise InputError("--generations", repr(ns.generations), "at least 1")
    if ns.max_wait is not None and not (ns.max_wait >= 1 and math.isfinite(ns.max_wait)):
        raise InputError("--max-wait", repr(ns.max_wait), "a ratio of at least 1 (FCFS+EASY's "
                                                           "own max wait is 1)")
    if not 0 < ns.margin <= 1:
        raise InputError("--margin", repr(ns.margin), "a ratio in (0, 1]")
    if not 0 < ns.sigma <= 2 or not math.isfinite(ns.sigma):
        raise InputError("--sigma", repr(ns.sigma), "a step size in (0, 2]")
    if ns.baseline is not None and ns.space != "slurm":
        raise InputError("--baseline", repr(ns.baseline), "--space slurm (a baseline is a "
                                                           "slurm configuration)")
    baseline = checked_baseline(ns.baseline)
    beliefs, corrections = checked_beliefs(ns.beliefs), checked_corrections(ns.corrections)
    if ns.space == "slurm" and (beliefs != DEFAULT_BELIEFS or corrections):
        raise InputError("--beliefs", " ".join(beliefs), "requests with --space slurm "
                                                         "(Slurm's knobs plan on requests)")
    if corrections and beliefs == DEFAULT_BELIEFS:
        raise InputError("--corrections", " ".join(corrections), "a belief besides requests "
                                                                 "(--beliefs requests history)")
    tune(ns.scenario, ns.overrides, ns.minutes, ns.out, window_jobs=ns.window_jobs,
         train_windows=ns.train_windows, count=ns.windows, split=tuple(ns.split),
         processes=ns.processes, seed=ns.seed, keep=ns.keep, generations=ns.generations,
         submit_time=ns.with_submit_time, backfill_order=ns.backfill_order,
         fitness=ns.fitness, sigma=ns.sigma, selection=ns.selection,
         fallback=ns.fallback, margin=ns.margin,
         user_features=ns.user_features, train_filter=ns.train_filter,
         train_pool=ns.train_pool, snapshots=ns.snapshots, warmup=warmup,
         train_batch=ns.train_batch, folds=ns.folds, slack=ns.slack,
         evaluation=ns.evaluation, max_wait=ns.max_wait, drain=ns.drain,
         backlog=ns.backlog, space=ns.space, baseline=baseline,
         beliefs=beliefs, corrections=corrections)
    return 0
