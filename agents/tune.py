"""``python -m agents tune``: search a priority policy on a workload's past, test it on its future.

The operator's question: given my cluster's history, is there a policy that
would have done better than the best classic heuristic with EASY on what
came after? The command answers it with :mod:`cosim.evaluation`:

1. The workload is cut in time order (``--split 0.5 0.7``: train on the
   first half, validate on the next 20 %, test on the last 30 %).
2. The classic heuristics (FCFS, SJF, SAF, F1, WFP3, UNICEF, with EASY) run
   on the validation windows; the best of them is the reference.
3. CMA-ES (the ``cma`` package) searches the weights of
   :mod:`cosim.policies.priority` (log estimate, log cores, log wait, their
   product, wait/estimate, F1's area term; log submit time only with
   ``--with-submit-time``, since absolute time is not stationary and a
   weight on it learned on the past is another policy on the future; the
   user-history prediction and accuracy of Tsafrir et al. with
   ``--user-features``, computed once on the whole workload), with
   EASY backfilling in the same order, starting from the best heuristic's
   point of that space. Fitness: the candidate's mean bsld over the best
   heuristic's, on paired training windows, evaluated in worker processes.
   Contention filtering (``--train-filter``, default ``skip``): windows
   where every heuristic is within 5 % of the best say nothing to the
   search, so each such evenly spaced training window is replaced by the
   window of widest heuristic spread from a pool ``--train-pool`` times
   larger (``spread``: the most contended windows of the pool, ``none``:
   no filtering). ``--train-batch K`` scores each generation on K of the
   training windows drawn afresh (paired within the generation), a
   minibatch against fitting a fixed few windows. It runs until
   ``--minutes`` are spent.
4. Selection on validation only: the best few searched policies, the
   search distribution's mean and the classic heuristics themselves
   compete, so on validation the result is never worse than the best
   heuristic. A searched policy must also beat the best heuristic on
   validation with its 95 % paired bootstrap interval below 1
   (``--selection interval``; where validation windows overlap, the
   bootstrap resamples blocks of windows that share jobs, so the interval
   reflects the span's independent evidence): small validation gains did not survive the
   test span (a 1.8 % gain on validation became +11.6 % on test on an
   unseen Lublin trace), so the heuristic stays unless the evidence is clear.
   It must also do no worse than the best heuristic when the whole
   validation span is run through at once: windows start from an empty
   machine, and a policy shipped on window evidence for RICC had 2.4x
   F1+EASY's mean bsld over its validation span run whole.
5. The test windows are read once, after selection: the chosen policy and
   every heuristic run on them; ratios to the best heuristic with 95 %
   bootstrap intervals, wins and losses, max wait against FCFS+EASY, the
   test span run whole, and the room in hindsight (the heuristic best on
   the test span, and each window given the heuristic best on it).

``--evaluation running`` measures every policy the way a cluster runs it:
the validation and test spans are each simulated in one run (after
``--warmup`` jobs of the past), their windows are the jobs measured inside
that run, and the search is scored on ``--train-windows`` (default 4) long
chunks of the training span, each run whole; the contention filter is off.
The bootstrap resamples blocks of consecutive windows, since one window's
backlog carries into the next.

Options beyond the defaults: ``--fitness folds`` scores the worst of
``--folds`` chronological blocks of the training windows, each against the
heuristic best there; ``--slack searched`` adds relaxed EASY's slack
(:class:`cosim.policies.backfill.QueuePolicy`) to the search.

The output folder runs as ``--policy learned:DIR``: ``policy.json``,
``card.md`` (the model card: data, spans, budget, search space, validation
and test figures against every heuristic) and ``results.json``.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from agents.tune_card import write_folder
from cosim.config import load_scenario
from cosim.errors import InputError
from cosim.evaluation import (
    CLASSIC,
    CONTENTION,
    EVALUATIONS,
    Evaluator,
    best_heuristic,
    capacity_of,
    chronological_split,
    compare,
    contention_scores,
    default_processes,
    most_contended,
    replace_near_optimal,
    window_at,
    window_starts,
)
from cosim.policies.priority import (
    FEATURES,
    USER_FEATURES,
    PriorityWeights,
    heuristic_weights,
    user_history,
)
from cosim.workloads.loading import load_workload, resolve_machine

__all__ = ["tune", "add_parser", "run"]

_BSLD, _WAIT, _MAXWAIT = 0, 1, 2
#: Fitness of a candidate on the training windows (see ``--fitness``).
FITNESS = ("ratio", "windows", "folds")
#: ``--fitness folds``: chronological folds of the training windows (``--folds``).
FOLDS = 4
#: Contention filtering of the training windows (``--train-filter``, ``--train-pool``).
TRAIN_FILTER, TRAIN_POOL = "skip", 4
#: ``skip``: a window is near-optimal when every heuristic is within 5 % of the best.
SKIP_TOLERANCE = 0.05
#: How validation and test windows are measured (``--evaluation``): in one run of each
#: span, as a cluster runs its policy. On RICC and Lublin the best heuristic on cold
#: windows (F1+EASY) had 1.1-1.6x SAF+EASY's mean bsld when the spans were run through.
EVALUATION = "running"
#: Training windows by default; with ``--evaluation running``, training chunks (each run whole).
TRAIN_WINDOWS, TRAIN_CHUNKS = 32, 4
#: ``--slack searched``: relaxed EASY's slack is this times the search coordinate's
#: positive part (seeded at 0, textbook EASY; CMA-ES's first steps reach 1-3).
SLACK_SCALE = 5.0


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
    t.add_argument("--processes", type=int, default=None, help="worker processes "
                                                               "(default: every CPU available)")
    t.add_argument("--seed", type=int, default=0, help="CMA-ES and bootstrap seed")
    t.add_argument("--keep", type=int, default=5, help="searched policies taken to validation")
    t.add_argument("--with-submit-time", action="store_true",
                   help="also search the log submit time weight (F1's second term); off by "
                        "default: absolute time is not stationary, so a weight learned on the "
                        "past means another policy on the future")
    t.add_argument("--user-features", action="store_true",
                   help="also search the user-history features (log of the mean run time of "
                        "the user's last two completed jobs, capped by the request, and the "
                        "user's recent run/request ratio; Tsafrir et al. 2007), computed on the "
                        "whole workload's recorded history before it is cut")
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
    t.add_argument("--selection", choices=("interval", "mean"), default="interval",
                   help="interval (default): a searched policy replaces the best heuristic only "
                        "when the 95 %% bootstrap interval of its mean bsld ratio to it on "
                        "validation lies below 1; mean: the lowest validation mean wins")
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
    t.add_argument("--warmup", type=int, default=0, metavar="JOBS",
                   help="jobs simulated before each window (train, validation and test; from "
                        "the window's own span) and not measured, so windows start on a busy "
                        "machine as on a running cluster (default 0: from an empty machine)")
    t.add_argument("--train-batch", type=int, default=0, metavar="K",
                   help="each generation scores its candidates on K training windows drawn "
                        "afresh (the same K for every candidate of the generation), so the "
                        "search cannot fit a fixed few windows (default 0: all, every "
                        "generation)")
    t.add_argument("--slack", choices=("searched", "off"), default="off",
                   help="searched: also search relaxed EASY's slack, the head promised its "
                        "shadow time plus slack x its estimate, so backfilling may delay it by "
                        "that much (Ward, Mahood and West, JSSPP 2002; seeded at 0, textbook "
                        "EASY); off (default): textbook EASY only (relaxed EASY's window gains "
                        "on Lublin came from the empty start and reversed with a backlog)")
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
    if ns.warmup < 0:
        raise InputError("--warmup", repr(ns.warmup), "0 or more jobs")
    if ns.train_batch < 0:
        raise InputError("--train-batch", repr(ns.train_batch), "0 (all) or more windows")
    if ns.generations is not None and ns.generations < 1:
        raise InputError("--generations", repr(ns.generations), "at least 1")
    if not 0 < ns.sigma <= 2 or not math.isfinite(ns.sigma):
        raise InputError("--sigma", repr(ns.sigma), "a step size in (0, 2]")
    tune(ns.scenario, ns.overrides, ns.minutes, ns.out, window_jobs=ns.window_jobs,
         train_windows=ns.train_windows, count=ns.windows, split=tuple(ns.split),
         processes=ns.processes, seed=ns.seed, keep=ns.keep, generations=ns.generations,
         submit_time=ns.with_submit_time, backfill_order=ns.backfill_order,
         fitness=ns.fitness, sigma=ns.sigma, selection=ns.selection,
         user_features=ns.user_features, train_filter=ns.train_filter,
         train_pool=ns.train_pool, snapshots=ns.snapshots, warmup=ns.warmup,
         train_batch=ns.train_batch, folds=ns.folds, slack=ns.slack,
         evaluation=ns.evaluation)
    return 0


def _fitness(res: np.ndarray, ref: np.ndarray, kind: str,
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


def _span_replay(scenario, workload, span, sources, processes: int) -> dict[str, float]:
    """Mean bsld of each source over one run through the whole ``span``.

    Windows start from an empty machine, where a policy can gain by draining
    the window's first burst in a way that costs it once a backlog stands (on
    Lublin, relaxed EASY gains 18-42 % on some spans of cold windows and loses
    28-42 % on the same span with 512 warm-up jobs). A cluster runs its policy
    continuously, so the span replayed whole (one run, no interval) is the
    check that a window gain is not an artefact of the empty start.
    """
    window = window_at(workload, span.start, span.stop - span.start)
    with Evaluator(scenario, [window], min(processes, len(sources))) as ev:
        r = ev.evaluate(sources)[:, 0, _BSLD]
    return {(s.name if isinstance(s, PriorityWeights) else s): float(v)
            for s, v in zip(sources, r)}


def _split_whole(res: np.ndarray, running: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Running evaluation: the per-window results and, from the last slice, each source's
    mean bsld over its whole span; windows: the results as they are."""
    if not running:
        return res, None
    return res[:, :-1], res[:, -1, _BSLD]


def _checkpoints(upto: int) -> set[int]:
    """Generations at which ``--snapshots`` keeps candidates: 5, 10, 20, 40, ... up to ``upto``."""
    out, g = set(), 5
    while g <= upto:
        out.add(g)
        g *= 2
    return out


def _same(a: PriorityWeights, b: PriorityWeights) -> bool:
    """The same policy under two names."""
    return replace(a, name="") == replace(b, name="")


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the workers, once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _unit(x: np.ndarray) -> tuple[float, ...]:
    n = float(np.linalg.norm(x))
    return tuple(float(v) for v in (x / n if n > 0 else x))


def tune(scenario_path: str, overrides: list[str], minutes: float, out: str | Path, *,
         window_jobs: int = 256, train_windows: int | None = None, count: int = 100,
         split: tuple[float, float] = (0.5, 0.7), processes: int | None = None, seed: int = 0,
         keep: int = 5, generations: int | None = None, submit_time: bool = False,
         backfill_order: str = "searched", fitness: str = "ratio", sigma: float = 0.3,
         selection: str = "interval", user_features: bool = False,
         train_filter: str = TRAIN_FILTER, train_pool: int = TRAIN_POOL,
         snapshots: bool = False, warmup: int = 0, train_batch: int = 0,
         folds: int = FOLDS, slack: str = "off", evaluation: str = EVALUATION,
         echo=print) -> dict:
    """Search, select on validation, test once; write the policy folder. Returns the results."""
    import cma

    t_start = time.perf_counter()
    scenario = load_scenario(scenario_path, overrides)
    base_dir = Path(scenario_path).parent
    workload = load_workload(scenario, base_dir=base_dir)
    scenario = resolve_machine(scenario, workload)
    capacity = capacity_of(scenario)
    if user_features:
        # Once, on the whole trace, so a window's first jobs see the user's history
        # from before the window (recorded completions only: causal by construction).
        workload.features.update(user_history(workload))
    running = evaluation == "running"
    if train_windows is None:
        train_windows = TRAIN_CHUNKS if running else TRAIN_WINDOWS
    # Running: the training chunks are long runs of the past as it came, not windows
    # picked for contention.
    filtered = train_filter != "none" and not running
    sp = chronological_split(workload, size=window_jobs, train_count=train_windows,
                             count=count, train=split[0], validation=split[1], warmup=warmup,
                             evaluation=evaluation)
    val_slices = [sp.slices["validation"]] if running else None
    processes = processes or default_processes()
    filter_info = None
    if filtered:
        # Contention filtering: windows where every heuristic is near-optimal
        # carry no signal for the search (on RICC most 2,048-job windows from an
        # empty machine give bsld ~1 to every policy), so the search trains on
        # windows of a larger pool where the heuristics differ. Training span
        # only: validation and test windows stay as they are.
        stop = sp.spans["train"].stop
        base = window_starts(window_jobs, train_windows, 0, stop)
        starts = window_starts(window_jobs, train_windows * train_pool, 0, stop)
        if train_filter == "skip":      # the unfiltered windows are in the pool
            starts = sorted(set(starts) | set(base))
        pool = [window_at(workload, a, window_jobs, 0, warmup) for a in starts]
        with Evaluator(scenario, pool, processes) as pool_eval:
            pool_bsld = pool_eval.evaluate(CLASSIC)[:, :, _BSLD]
        if train_filter == "skip":
            kept = replace_near_optimal(pool_bsld, [starts.index(a) for a in base],
                                        SKIP_TOLERANCE)
        else:
            kept = most_contended(pool_bsld, train_windows, train_filter)
        score = contention_scores(pool_bsld, train_filter)
        filter_info = {"rule": train_filter, "pool": len(pool), "kept": len(kept),
                       "kept_windows": kept, "kept_starts": [starts[i] for i in kept],
                       "unchanged": sum(starts[i] in base for i in kept),
                       "near_optimal_in_pool": int(np.sum(score <= np.log1p(SKIP_TOLERANCE))),
                       "score_kept_min": float(score[kept].min()),
                       "score_pool_median": float(np.median(score)),
                       "pool_best_heuristic_bsld": float(pool_bsld.mean(axis=1).min()),
                       "kept_best_heuristic_bsld": float(pool_bsld[:, kept].mean(axis=1).min())}
        sp.train = [pool[i] for i in kept]
    echo(f"tune: {len(workload)} jobs on {capacity} units; windows of {window_jobs} jobs: "
         + (f"{len(sp.train)} training chunks of {len(sp.train[0])} jobs run whole, "
            f"{len(sp.slices['validation']) - 1} validation and "
            f"{len(sp.slices['test']) - 1} test windows measured inside one run of their span"
            f"; {processes} processes" if running else
            f"{len(sp.train)} train"
         + ("" if not filtered else
            f" ({filter_info['kept'] - filter_info['unchanged']} near-optimal replaced from a "
            f"pool of {filter_info['pool']})" if train_filter == "skip" else
            f" (the most contended of {filter_info['pool']} by {train_filter})")
         + f", {len(sp.validation)} validation, {sp.test.count} test; {processes} processes"))

    with Evaluator(scenario, sp.validation, processes, slices=val_slices) as val_eval:
        val_classic, val_whole = _split_whole(val_eval.evaluate(CLASSIC), running)
        val_bsld = {h: val_classic[i, :, _BSLD] for i, h in enumerate(CLASSIC)}
        best = best_heuristic(val_bsld)
        echo("validation mean bsld: " + ", ".join(f"{h} {np.mean(v):.2f}"
                                                  for h, v in val_bsld.items()) + f"; best {best}")

        # -- search on training windows ---------------------------------------------------
        base = best.partition("+")[0]
        x0 = np.array(heuristic_weights(base, capacity) or heuristic_weights("f1", capacity))
        searched_features = [i for i, f in enumerate(FEATURES)
                             if (submit_time or f != "log_submit")
                             and (user_features or f not in USER_FEATURES)]
        x0 = x0[searched_features]
        if not np.any(x0):          # FCFS without submit time: oldest first is -log wait
            x0[searched_features.index(FEATURES.index("log_wait"))] = -1.0
        x0 = np.array(_unit(x0))
        k = len(searched_features)
        two = backfill_order == "searched"
        if two:     # seeded at the same order for both: the best heuristic's own schedule
            x0 = np.concatenate([x0, x0])
        relaxed = slack == "searched"
        if relaxed:     # seeded at slack 0: textbook EASY
            x0 = np.concatenate([x0, [0.0]])

        def spec_of(x, name: str = "priority") -> PriorityWeights:
            w = np.zeros(len(FEATURES))
            w[searched_features] = _unit(np.asarray(x[:k]))
            b = None
            if two:
                b = np.zeros(len(FEATURES))
                b[searched_features] = _unit(np.asarray(x[k:2 * k]))
                b = tuple(float(v) for v in b)
            return PriorityWeights(tuple(float(v) for v in w), capacity, name=name,
                                   backfill_weights=b,
                                   slack=SLACK_SCALE * max(0.0, float(x[-1])) if relaxed else 0.0)
        searched: list[tuple[float, PriorityWeights]] = []
        snaps: list[PriorityWeights] = []
        max_generations, generations, evaluations, restarts = generations, 0, 0, 0
        deadline = t_start + 60.0 * minutes
        with Evaluator(scenario, sp.train, processes) as train_eval:
            n_train = len(sp.train)
            fold_info = None
            if fitness == "folds":
                # Every heuristic on the training windows, cut in time order into
                # folds: the past's periods each have their own best heuristic (on
                # Lublin the best changes from span to span), and the candidate is
                # scored on the period where it does worst against that one.
                ref_all = train_eval.evaluate(CLASSIC)[:, :, _BSLD]
                ref = ref_all[CLASSIC.index(best)]
                fold_of = np.zeros(n_train, dtype=int)
                for f, part in enumerate(np.array_split(np.arange(n_train), folds)):
                    fold_of[part] = f
                fold_info = [{"windows": int(np.sum(fold_of == f)),
                              "best_heuristic": CLASSIC[int(np.argmin(
                                  ref_all[:, fold_of == f].mean(axis=1)))],
                              "ratio_of_best": float(ref[fold_of == f].mean()
                                                     / ref_all[:, fold_of == f].mean(axis=1).min())}
                             for f in np.unique(fold_of)]
                echo("training folds (best heuristic, the validation best's ratio to it): "
                     + ", ".join(f"{d['best_heuristic']} {d['ratio_of_best']:.3f}"
                                 for d in fold_info))
            else:
                ref = train_eval.evaluate([best])[0, :, _BSLD]
            batch = train_batch if 0 < train_batch < n_train else n_train
            draw = np.random.default_rng(seed + 2)
            popsize = max(6, 2 * processes)
            es = cma.CMAEvolutionStrategy(x0, sigma, {"seed": seed + 1, "verbose": -9,
                                                      "popsize": popsize})
            while (time.perf_counter() < deadline
                   and (max_generations is None or generations < max_generations)):
                if es.stop():
                    # Converged early: restart from the best point so far with a
                    # doubled population (IPOP), so the budget is not left unused.
                    restarts += 1
                    popsize *= 2
                    es = cma.CMAEvolutionStrategy(es.result.xbest, sigma,
                                                  {"seed": seed + 1 + restarts, "verbose": -9,
                                                   "popsize": popsize})
                xs = es.ask()
                specs = [spec_of(x) for x in xs]
                # Paired within the generation; a fresh draw each generation is
                # minibatch noise that a fit to a fixed few windows cannot survive.
                idx = (np.arange(n_train) if batch == n_train
                       else np.sort(draw.choice(n_train, batch, replace=False)))
                res = train_eval.evaluate(specs, only=idx)[:, :, _BSLD]
                fit = (_fitness(res, ref_all[:, idx], fitness, fold_of[idx])
                       if fitness == "folds" else _fitness(res, ref[idx], fitness))
                es.tell(xs, fit.tolist())
                searched += [(float(f), sp_) for f, sp_ in zip(fit, specs)]
                generations += 1
                if snapshots and generations in _checkpoints(generations):
                    # Early stopping, decided on validation: the best point so far
                    # and the search mean at doubling checkpoints (a long search
                    # fits the training windows ever closer and can drift away
                    # from what holds on validation).
                    f0, w0 = min(searched, key=lambda fw: fw[0])
                    snaps.append(replace(w0, name=f"best@g{generations}"))
                    snaps.append(spec_of(es.result.xfavorite, f"mean@g{generations}"))
                evaluations += len(xs) * batch
                echo(f"generation {generations}: best train {fitness} {fit.min():.4f} "
                     f"(overall {min(f for f, _ in searched):.4f}), "
                     f"{time.perf_counter() - t_start:.0f} s")
        search_s = time.perf_counter() - t_start

        # -- selection on validation only ---------------------------------------------------
        searched.sort(key=lambda fw: fw[0])
        top: list[tuple[float, PriorityWeights]] = []
        for f, w in searched:
            if all(w != t[1] for t in top):
                top.append((f, w))
            if len(top) == keep:
                break
        cand = [replace(w, name=f"searched{i + 1}") for i, (_, w) in enumerate(top)]
        if generations:
            # The search distribution's mean: averaged over many noisy samples, it
            # is often better off the training windows than the luckiest sample.
            cand.append(spec_of(es.result.xfavorite, "cma-mean"))
        for w in snaps:     # a snapshot already among the candidates is not run twice
            if not any(_same(w, c) for c in cand):
                cand.append(w)
        val_cand, val_cand_whole = _split_whole(val_eval.evaluate(cand), running)
        val_cand = val_cand[:, :, _BSLD]
    val_means = {h: float(np.mean(v)) for h, v in val_bsld.items()}
    val_ci: dict[str, list[float]] = {}
    for c, v in zip(cand, val_cand):
        val_means[c.name] = float(np.mean(v))
        val_ci[c.name] = list(compare(v, val_bsld[best], seed=seed,
                                      block=sp.blocks.get("validation", 1)).mean_ratio_ci)
    # The validation span replayed whole: a searched policy must not lose there to
    # the best heuristic (a window gain from the empty start would not hold on a
    # running cluster).
    if running:     # the windows' own run: the span's whole figure comes with them
        val_replay = {s if isinstance(s, str) else s.name: float(v) for s, v in
                      zip(list(CLASSIC) + cand, np.concatenate([val_whole, val_cand_whole]))}
    else:
        val_replay = _span_replay(scenario, workload, sp.spans["validation"],
                                  list(CLASSIC) + cand, processes)
    eligible = [k for k in val_means
                if k in CLASSIC or selection == "mean"
                or (val_ci[k][1] < 1.0 and val_replay[k] <= val_replay[best])]
    chosen_name = min(eligible, key=lambda k: (val_means[k], k not in CLASSIC))
    chosen = next((c for c in cand if c.name == chosen_name), chosen_name)
    echo(f"selected on validation: {chosen_name} (mean bsld {val_means[chosen_name]:.2f}; best "
         f"heuristic {best} {val_means[best]:.2f})")

    # -- the test set, read once ----------------------------------------------------------
    test_windows = sp.test.read()
    sources = list(CLASSIC) + ([chosen] if chosen_name not in CLASSIC else [])
    with Evaluator(scenario, test_windows, processes,
                   slices=[sp.slices["test"]] if running else None) as test_eval:
        test, test_whole = _split_whole(test_eval.evaluate(sources), running)
    if running:
        test_replay = {s if isinstance(s, str) else s.name: float(v)
                       for s, v in zip(sources, test_whole)}
    else:
        test_replay = _span_replay(scenario, workload, sp.spans["test"], sources, processes)
    col = {(s.name if isinstance(s, PriorityWeights) else s): i for i, s in enumerate(sources)}
    ti = col[chosen_name]
    vs = {h: compare(test[ti, :, _BSLD], test[col[h], :, _BSLD], policy=chosen_name,
                     reference_name=h, seed=seed, block=sp.blocks.get("test", 1)).as_dict()
          for h in CLASSIC}
    fcfs = col["fcfs+easy"]
    maxwait = {"ratio_of_max": float(test[ti, :, _MAXWAIT].max() / test[fcfs, :, _MAXWAIT].max()),
               "mean_window_ratio": float(np.mean(test[ti, :, _MAXWAIT]
                                                  / np.maximum(test[fcfs, :, _MAXWAIT], 1.0)))}
    headline = vs[best]
    # Room in hindsight, against the best heuristic on validation: the heuristic
    # best on the test span itself, and the per-window oracle over the heuristics
    # (each window scheduled by whichever heuristic does best on it). Neither
    # can be chosen beforehand; they bound what choosing among them could give.
    ref_mean = float(test[col[best], :, _BSLD].mean())
    heur_test = np.array([test[col[h], :, _BSLD] for h in CLASSIC])
    hind = CLASSIC[int(np.argmin(heur_test.mean(axis=1)))]
    hindsight = {"best_heuristic": hind,
                 "best_heuristic_ratio": float(heur_test.mean(axis=1).min() / ref_mean),
                 "per_window_oracle_ratio": float(heur_test.min(axis=0).mean() / ref_mean),
                 "validation_per_window_oracle_ratio": float(
                     np.array([val_bsld[h] for h in CLASSIC]).min(axis=0).mean()
                     / np.mean(val_bsld[best]))}
    echo(f"test: {chosen_name} vs {best}: mean bsld ratio {headline['mean_ratio']:.3f} "
         f"[{headline['mean_ratio_ci'][0]:.3f}, {headline['mean_ratio_ci'][1]:.3f}], median "
         f"{headline['median_ratio']:.3f}, wins {headline['wins']}, losses {headline['losses']}; "
         f"max wait {maxwait['ratio_of_max']:.2f}x FCFS+EASY's")
    echo(f"test span replayed whole: {chosen_name} {test_replay[chosen_name]:.2f}, {best} "
         f"{test_replay[best]:.2f} (mean bsld, one run)")
    echo(f"room in hindsight: {hind} on the test span {hindsight['best_heuristic_ratio']:.3f}, "
         f"the per-window best heuristic {hindsight['per_window_oracle_ratio']:.3f} of {best}")

    results = {
        "scenario": str(scenario_path), "overrides": list(overrides),
        "workload": {"jobs": len(workload), "source": workload.source, "capacity": capacity,
                     "estimates": f"{scenario.workload.estimates.model} (estimate = run time "
                                  f"for {100 * float(np.mean(workload.req_time == workload.run)):.0f} % "
                                  "of jobs)"},
        "split": list(split), "window_jobs": window_jobs, "warmup_jobs": warmup,
        "evaluation": evaluation,
        "train_chunk_jobs": len(sp.train[0]) if running else None,
        "spans": {k: {"start": s.start, "stop": s.stop, "first_submit": s.first_submit,
                      "last_submit": s.last_submit} for k, s in sp.spans.items()},
        "windows": {"train": len(sp.train), "validation": len(val_classic[0]),
                    "test": len(test[0])},
        "note": sp.note, "bootstrap_blocks": sp.blocks, "train_filter": filter_info,
        "budget": {"minutes": minutes, "search_seconds": round(search_s, 1),
                   "generations": generations, "restarts": restarts,
                   "window_evaluations": evaluations, "cpu_seconds": round(_cpu_seconds(), 1),
                   "processes": processes, "cpus": os.cpu_count()},
        "search_space": {"features": [FEATURES[i] for i in searched_features],
                         "backfill": "easy", "backfill_order": backfill_order,
                         "slack": slack, "slack_scale": SLACK_SCALE,
                         "fitness": fitness,
                         "folds": fold_info,
                         "train_batch": (f"{batch} of {n_train} training windows, drawn "
                                         "afresh each generation" if generations and
                                         batch < n_train else None),
                         "user_history": (
                             "log_user_pred: log10 of the mean run time of the user's last two "
                             "jobs completed before the job's submit (as recorded: submit + "
                             + ("recorded wait" if "wait" in workload.features else "no wait")
                             + " + run), capped by its request; log_user_accuracy: log10 of "
                             "their mean min(run/request, 1); unknown users or no completed "
                             "job: the request, accuracy 1 (Tsafrir, Etsion and Feitelson, "
                             "TPDS 2007); computed on the whole workload before the split"
                             if user_features else None),
                         "method":
                         f"CMA-ES on unit-norm weights, sigma0 {sigma}, population "
                         f"max(6, 2 x processes), doubled at each restart, seeded at the best "
                         "heuristic", "classics_included": list(CLASSIC)},
        "snapshots": [w.name for w in snaps], "best_heuristic": best, "chosen": chosen_name,
        "validation_mean_bsld": val_means, "selection": selection,
        "validation_ratio_ci": val_ci,
        # each policy through the whole validation span in one run (mean bsld)
        "validation_replay": val_replay,
        # every searched candidate that went to validation, as it would run
        "candidates": {c.name: c.as_dict() for c in cand},
        "train_ratio_of_searched": [f for f, _ in top],
        "test": {"mean_bsld": {s: float(test[i, :, _BSLD].mean()) for s, i in col.items()},
                 "max_wait": {s: float(test[i, :, _MAXWAIT].max()) for s, i in col.items()},
                 "against": vs, "max_wait_vs_fcfs_easy": maxwait, "hindsight": hindsight,
                 "replay": test_replay,
                 # per window, for "by how much, and where": the chosen policy's and
                 # the best heuristic's mean bsld (test windows in time order)
                 "per_window_bsld": {s: [round(float(v), 4) for v in test[col[s], :, _BSLD]]
                                     for s in dict.fromkeys((chosen_name, best))}},
    }
    policy = (chosen.as_dict() if isinstance(chosen, PriorityWeights)
              else {"kind": "heuristic", "name": chosen_name})
    write_folder(Path(out), policy, results)
    echo(f"wrote {out} (run it with --policy learned:{out})")
    return results
