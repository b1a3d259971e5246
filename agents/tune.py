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
   user-history prediction and accuracy of Tsafrir et al. where the trace
   names its users and their requests are loose, ``--user-features auto``,
   computed once on the whole workload; with ``--backlog searched`` three
   products of the queue's backlog with log estimate, cores and wait), with
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
   F1+EASY's mean bsld over its validation span run whole. With
   ``--selection past`` (the default) it must also do no worse than the
   best heuristic in every one of ``--folds`` periods of the training span:
   a policy fitted to the past that still loses somewhere in it is a
   validation fluke more often than not (:func:`agents.tune_select.past_check`).
   Where none qualifies, the best heuristic on validation is kept; with
   ``--fallback median`` the heuristic kept is chosen on the whole past
   instead: the lowest median, over the training periods and validation,
   of its ratio to each period's best heuristic
   (:func:`agents.tune_select.fallback_heuristic`).
   ``--selection minimax`` instead fits the whole past: the search's fitness
   is a candidate's worst ratio to the best heuristic over the training
   chunks and the validation span (every one run for every candidate,
   the heuristic's own point first; where F1+EASY leads, F1's submit-time
   term joins the space so that point is F1+EASY itself), and the best
   point ships only if that ratio is below ``--margin``, or rather the
   smallest step toward it from the heuristic's point (a quarter, half,
   three quarters of the way) whose ratio is; validation is then fitted,
   not held out, and only the margin stands between a fluke and the future.
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

Options beyond the defaults: ``python -m agents tune --help``; measured in docs/tuning.md.
The output folder runs as ``--policy learned:DIR``: ``policy.json``, ``card.md`` (the
model card: data, spans, budget, search space, validation and test figures against every
heuristic) and ``results.json``, written whole or not at all.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from agents.tune_card import write_folder
from agents.tune_select import (
    FALLBACK,
    MINIMAX_MARGIN,
    SHRINK,
    cpu_seconds,
    fallback_heuristic,
    past_check,
    shrunk_points,
    span_replay,
    split_whole,
)
from agents.tune_space import (
    DAY,
    FITNESS,
    FOLDS,
    SLACK_SCALE,
    WAIT_PENALTY,
    SearchSpace,
    checkpoints,
    drain_coordinates,
    drain_grid,
    fitness_of,
    fold_index,
    guard_grid,
    same_policy,
    user_features_choice,
    user_history_note,
    wait_penalty,
)
from cosim.cli import put_in_place, staged_folder
from cosim.config import load_scenario
from cosim.errors import InputError
from cosim.evaluation import (
    CLASSIC,
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
    POLICY_FILE,
    PriorityWeights,
    heuristic_weights,
    user_history,
)
from cosim.workloads.loading import load_workload, resolve_machine

__all__ = ["tune", "EVALUATION", "FITNESS", "FOLDS", "TRAIN_CHUNKS", "TRAIN_FILTER",
           "TRAIN_POOL", "TRAIN_WINDOWS", "SELECTION", "SELECTIONS"]

_BSLD, _WAIT, _MAXWAIT = 0, 1, 2
#: Contention filtering of the training windows (``--train-filter``, ``--train-pool``).
TRAIN_FILTER, TRAIN_POOL = "skip", 4
#: How validation selects (``--selection``): ``past`` (the default) is ``interval`` with
#: the training check of :func:`agents.tune_select.past_check`; ``interval``: validation
#: alone; ``mean``: the lowest validation mean; ``minimax``: the search's fitness is the
#: worst ratio over the whole past (training chunks and validation) and the best point
#: ships only below ``--margin`` (:data:`agents.tune_select.MINIMAX_MARGIN`).
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


def tune(scenario_path: str, overrides: list[str], minutes: float, out: str | Path,
         **options) -> dict:
    """Search, select on validation, test once; write the policy folder. Returns the results.

    ``options``: those of :func:`_tune`. The folder is written whole or not at all (staged
    beside ``out``, renamed in: :func:`cosim.cli.staged_folder`); an ``out`` that cannot
    be written is refused (:class:`InputError`) before any work."""
    out, echo = Path(out), options.get("echo", print)
    stage = staged_folder(out, markers=(POLICY_FILE, "results.json"),
                          kind="a tuned policy folder", writer="'agents tune'")
    try:
        results = _tune(scenario_path, overrides, minutes, stage, **options)
        put_in_place(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    echo(f"wrote {out} (run it with --policy learned:{out})")
    return results


def _tune(scenario_path: str, overrides: list[str], minutes: float, stage: Path, *,
         window_jobs: int = 256, train_windows: int | None = None, count: int = 100,
         split: tuple[float, float] = (0.5, 0.7), processes: int | None = None, seed: int = 0,
         keep: int = 5, generations: int | None = None, submit_time: bool = False,
         backfill_order: str = "searched", fitness: str = "ratio", sigma: float = 0.3,
         selection: str = SELECTION, user_features: bool | str = "auto",
         train_filter: str = TRAIN_FILTER, train_pool: int = TRAIN_POOL,
         snapshots: bool = False, warmup: int | str = 0, train_batch: int = 0,
         folds: int = FOLDS, slack: str = "off", evaluation: str = EVALUATION,
         max_wait: float | None = None, drain: str = "off", fallback: str = FALLBACK,
         margin: float = MINIMAX_MARGIN, backlog: str = "off", echo=print) -> dict:
    """:func:`tune` with the folder written into ``stage``."""
    import cma

    t_start = time.perf_counter()
    minimax = selection == "minimax"
    if minimax and evaluation != "running":
        raise InputError("--selection", "minimax with --evaluation windows",
                         "--evaluation running (the past's periods are runs of its spans)")
    scenario = load_scenario(scenario_path, overrides)
    base_dir = Path(scenario_path).parent
    workload = load_workload(scenario, base_dir=base_dir)
    scenario = resolve_machine(scenario, workload)
    capacity = capacity_of(scenario)
    user_features, user_features_why = user_features_choice(user_features, workload)
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
    # ``all``: every run starts at the trace's first job (split caps it at each span's start).
    warmup_rows = len(workload) if warmup == "all" else int(warmup)
    sp = chronological_split(workload, size=window_jobs, train_count=train_windows,
                             count=count, train=split[0], validation=split[1], warmup=warmup_rows,
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
        pool = [window_at(workload, a, window_jobs, 0, warmup_rows) for a in starts]
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
    echo(f"user-history features: {user_features_why}")

    with Evaluator(scenario, sp.validation, processes, slices=val_slices) as val_eval:
        val_classic, val_whole = split_whole(val_eval.evaluate(CLASSIC), running)
        val_bsld = {h: val_classic[i, :, _BSLD] for i, h in enumerate(CLASSIC)}
        val_mw = {h: float(val_classic[i, :, _MAXWAIT].max()) for i, h in enumerate(CLASSIC)}
        # ``lead``: the best heuristic by bsld alone, where the search starts and what its
        # fitness is measured against; ``best``: the reference selection must beat, the
        # best of the heuristics within the max-wait bound (FCFS+EASY always is).
        lead = best_heuristic(val_bsld)
        bound = None if max_wait is None else max_wait * val_mw["fcfs+easy"]
        best = lead if bound is None else best_heuristic(
            {h: v for h, v in val_bsld.items() if val_mw[h] <= bound or h == "fcfs+easy"})
        echo("validation mean bsld: " + ", ".join(
            f"{h} {np.mean(v):.2f}" + ("" if bound is None else
                                       f" (max wait {val_mw[h] / val_mw['fcfs+easy']:.2f}x)")
            for h, v in val_bsld.items()) + f"; best {lead}"
            + ("" if best == lead else f"; best within {max_wait:g}x FCFS+EASY's max wait {best}"))

        # -- search on training windows ---------------------------------------------------
        base = lead.partition("+")[0]
        # minimax where F1+EASY leads: F1's own submit-time term joins the space, so the
        # seed point is F1+EASY itself (without it, 1.02-1.60x F1+EASY in some past period
        # on 24 of 26 F1-led traces probed, and the search starts behind its reference)
        f1_term = minimax and base == "f1" and not submit_time
        submit_time = submit_time or f1_term
        guarded = max_wait is not None
        drained = drain == "searched"
        relaxed = slack == "searched"
        space = SearchSpace.of(capacity, submit_time=submit_time, user_features=user_features,
                               backlog=backlog == "searched", backfill_order=backfill_order == "searched", guarded=guarded,
                               drained=drained, relaxed=relaxed)
        seed_of, spec_of = space.seed, space.spec
        x0 = seed_of(heuristic_weights(base, capacity) or heuristic_weights("f1", capacity))
        searched: list[tuple[float, PriorityWeights]] = []
        snaps: list[PriorityWeights] = []
        max_generations, generations, evaluations, restarts = generations, 0, 0, 0
        deadline = t_start + 60.0 * minutes
        with Evaluator(scenario, sp.train, processes) as train_eval:
            n_train = len(sp.train)
            fold_info = None
            fcfs_mw = None
            ref_all = None
            if fitness == "folds" or guarded or fallback != "validation":
                train_classic = train_eval.evaluate(CLASSIC)
                ref_all = train_classic[:, :, _BSLD]
                fcfs_mw = np.maximum(train_classic[CLASSIC.index("fcfs+easy"), :, _MAXWAIT], 1.0)
            if fitness == "folds":
                # Every heuristic on the training windows, cut in time order into
                # folds: the past's periods each have their own best heuristic (on
                # Lublin the best changes from span to span), and the candidate is
                # scored on the period where it does worst against that one.
                ref = ref_all[CLASSIC.index(lead)]
                fold_of = fold_index(n_train, folds)
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
                ref = (ref_all[CLASSIC.index(lead)] if ref_all is not None
                       else train_eval.evaluate([lead])[0, :, _BSLD])

            def score(full: np.ndarray, idx: np.ndarray) -> np.ndarray:
                """Training fitness of candidates' results ``full`` on windows ``idx``."""
                res = full[:, :, _BSLD]
                fit = (fitness_of(res, ref_all[:, idx], fitness, fold_of[idx])
                       if fitness == "folds" else fitness_of(res, ref[idx], fitness))
                if guarded:
                    fit = fit + wait_penalty(full[:, :, _MAXWAIT], fcfs_mw[idx], max_wait)
                return fit

            val_ref = float(np.mean(val_bsld[lead]))
            period_ratios: dict[int, list[float]] = {}

            def minimax_score(specs) -> np.ndarray:
                """``--selection minimax``: each candidate's worst ratio to ``lead`` over the
                training chunks and the validation span (the whole past), every one run."""
                full = train_eval.evaluate(specs)
                val = split_whole(val_eval.evaluate(specs), running)[0][:, :, _BSLD]
                ratios = np.column_stack([full[:, :, _BSLD] / ref[None, :],
                                          val.mean(axis=1) / val_ref])
                for w, r in zip(specs, ratios):
                    period_ratios[id(w)] = r.tolist()
                fit = np.where(np.isfinite(ratios).all(axis=1), ratios.max(axis=1), 1e9)
                if guarded:
                    fit = fit + wait_penalty(full[:, :, _MAXWAIT], fcfs_mw, max_wait)
                return fit
            grid: list[tuple[float, PriorityWeights]] = []
            drain_seen: list[tuple[float, PriorityWeights]] = []
            drain_extra: list[PriorityWeights] = []
            if guarded:
                # Every heuristic with the guard at thresholds spread over the bound
                # (a job promoted at T still waits for its reservation), scored on
                # every training chunk; the search starts from the best of them.
                # One heuristic at a time, the lead and the in-bound best first, within
                # half the time left: a guard makes keys dynamic, and on RICC's long
                # chunks a heuristic's 12 points take minutes.
                rows = guard_grid(capacity, max_wait * float(fcfs_mw.max()), (lead, best))
                t_grid = time.perf_counter()
                grid_until = t_grid + 0.5 * max(deadline - t_grid, 0.0)
                for r, row in enumerate(rows):
                    t_row = time.perf_counter()
                    gfit = score(train_eval.evaluate(row), np.arange(n_train))
                    grid += zip(gfit.tolist(), row)
                    evaluations += len(row) * n_train
                    now = time.perf_counter()
                    if now + (now - t_row) > grid_until and r + 1 < len(rows):
                        echo(f"guard grid: stopped after {r + 1} of {len(rows)} orders "
                             "(half the time left)")
                        break
                grid.sort(key=lambda fw: fw[0])
                f0, g0 = grid[0]
                echo(f"guard grid: {len(grid)} heuristic x threshold points; best {g0.name} "
                     f"(train {fitness} with the max-wait penalty {f0:.4f})")
                x0 = np.concatenate([seed_of(g0.weights),
                                     [math.log10(g0.promote_after / DAY)]])
            if drained:
                # The seed without and with the drain rule at a few points, on every
                # training chunk; the search starts from the best (off included).
                off = drain_coordinates(PriorityWeights((0.0,) * len(FEATURES), capacity))
                row = drain_grid(g0 if guarded else spec_of(
                    np.concatenate([x0, off, [0.0] if relaxed else []]), base))
                dfit = score(train_eval.evaluate(row), np.arange(n_train))
                evaluations += len(row) * n_train
                drain_seen = sorted(zip(dfit.tolist(), row), key=lambda fw: fw[0])
                d0 = drain_seen[0][1]
                echo("drain grid: " + ", ".join(f"{w.name} {f:.4f}" for f, w in drain_seen)
                     + f"; the search starts from {d0.name}")
                x0 = np.concatenate([x0, drain_coordinates(d0)])
                # The runner-up heuristic on validation with the drain rule too, as
                # validation candidates (not searched from): the drain mends a
                # heuristic's worst backlogs, and the heuristic that starves wide jobs
                # most (SAF) may not lead where the span starts (RICC after the whole
                # past: F1+EASY leads validation at 10.02, SAF with the drain 7.50).
                runner = sorted(val_bsld, key=lambda h: float(np.mean(val_bsld[h])))[1]
                runner = runner.partition("+")[0]
                if not guarded and runner != base:
                    drain_extra = drain_grid(spec_of(np.concatenate(
                        [seed_of(heuristic_weights(runner, capacity)
                                 or heuristic_weights("f1", capacity)),
                         off, [0.0] if relaxed else []]), runner))[1:]
            if relaxed:     # seeded at slack 0: textbook EASY
                x0 = np.concatenate([x0, [0.0]])
            if minimax:
                # The seed point is measured, not assumed: it may break ties otherwise than
                # its heuristic (SAF) or lack a term (F1 without submit time).
                s0 = spec_of(x0, "seed-point")
                searched.append((float(minimax_score([s0])[0]), s0))
                x_best, f_best = x0, searched[0][0]
                evaluations += n_train + len(sp.validation)
            batch = train_batch if 0 < train_batch < n_train and not minimax else n_train
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
                fit = (minimax_score(specs) if minimax else
                       score(train_eval.evaluate(specs, only=idx), idx))
                es.tell(xs, fit.tolist())
                searched += [(float(f), sp_) for f, sp_ in zip(fit, specs)]
                if minimax and fit.min() < f_best:
                    x_best, f_best = xs[int(np.argmin(fit))], float(fit.min())
                generations += 1
                if snapshots and generations in checkpoints(generations):
                    # Early stopping, decided on validation: the best point so far
                    # and the search mean at doubling checkpoints (a long search
                    # fits the training windows ever closer and can drift away
                    # from what holds on validation).
                    f0, w0 = min(searched, key=lambda fw: fw[0])
                    snaps.append(replace(w0, name=f"best@g{generations}"))
                    snaps.append(spec_of(es.result.xfavorite, f"mean@g{generations}"))
                evaluations += len(xs) * (batch + (len(sp.validation) if minimax else 0))
                echo(f"generation {generations}: best "
                     f"{'past minimax' if minimax else 'train ' + fitness} {fit.min():.4f} "
                     f"(overall {min(f for f, _ in searched):.4f}), "
                     f"{time.perf_counter() - t_start:.0f} s")
            # minimax: the point found shrunk toward the heuristic, scored on the past too
            shrunk = shrunk_points(spec_of, x0, x_best) if minimax and generations else []
            shrunk_fit = minimax_score(shrunk) if shrunk else []
            evaluations += len(shrunk) * (n_train + len(sp.validation))
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
        # minimax: only points the whole past has scored compete
        worst_past = {c.name: f for c, (f, _) in zip(cand, top)} if minimax else {}
        past_ratios = {c.name: period_ratios[id(w)] for c, (_, w) in zip(cand, top)
                       if id(w) in period_ratios}
        worst_past.update({w.name: float(f) for w, f in zip(shrunk, shrunk_fit)})
        past_ratios.update({w.name: period_ratios[id(w)] for w in shrunk})
        cand = shrunk + cand
        cand += [w for _, w in grid[:keep]]
        cand += [w for _, w in drain_seen if w.drain_factor][:keep]
        cand += drain_extra
        if generations and not minimax:
            # The search distribution's mean: averaged over many noisy samples, it
            # is often better off the training windows than the luckiest sample.
            cand.append(spec_of(es.result.xfavorite, "cma-mean"))
        for w in snaps if not minimax else ():  # one already among them is not run twice
            if not any(same_policy(w, c) for c in cand):
                cand.append(w)
        val_cand, val_cand_whole = split_whole(val_eval.evaluate(cand), running)
        val_mw.update({c.name: float(val_cand[i, :, _MAXWAIT].max()) for i, c in enumerate(cand)})
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
        val_replay = span_replay(scenario, workload, sp.spans["validation"],
                                 list(CLASSIC) + cand, processes)
    # The heuristic shipped when no searched policy qualifies: chosen on the training
    # periods and validation together (``--fallback``; ``validation``: ``best`` itself).
    in_bound = [h for h in CLASSIC if bound is None or val_mw[h] <= bound or h == "fcfs+easy"]
    fb = ({"rule": fallback, "heuristic": best} if fallback == "validation" else
          fallback_heuristic(in_bound, ref_all[[CLASSIC.index(h) for h in in_bound]],
                             [val_means[h] for h in in_bound], folds, fallback))
    if fb["heuristic"] != best:
        echo(f"fallback heuristic: {fb['heuristic']} (median ratio to each period's best "
             f"{fb['median_ratio'][fb['heuristic']]:.3f} over {fb['periods']} periods, training "
             f"and validation; {best}, the best on validation, "
             f"{fb['median_ratio'][best]:.3f})")
    eligible = [k for k in val_means
                if (bound is None or val_mw[k] <= bound or k == "fcfs+easy")
                and (k == fb["heuristic"] if k in CLASSIC else
                     selection == "mean"
                     or (val_ci[k][1] < 1.0 and val_replay[k] <= val_replay[best]))]
    checked = None
    if minimax:
        # The whole past scored the search, so nothing is left to check it on: a point
        # ships only with a clear lead over the reference in every period of it.
        eligible = [k for k in worst_past if worst_past[k] < margin
                    and (bound is None or val_mw[k] <= bound)] or [fb["heuristic"]]
        echo(f"minimax selection: the best point's worst ratio to {lead} over the past "
             f"{min(worst_past.values(), default=float('nan')):.3f} (ships below {margin:g})")
    elif selection == "past":
        checked = past_check(scenario, sp.train, best,
                             [c for c in cand if c.name in eligible], folds, processes)
        eligible = [k for k in eligible if k in CLASSIC or checked["passed"][k]]
        if checked["passed"]:
            echo(f"training check: {sum(checked['passed'].values())} of "
                 f"{len(checked['passed'])} validation passes no worse than {best} in every "
                 f"one of {checked['periods']} training periods: "
                 + ", ".join(f"{k} (worst {max(v):.3f})"
                             for k, v in checked["fold_ratios"].items()))
    # minimax: the smallest step from the heuristic toward the point found that clears
    # the margin (``shrunkA``; ``searched1``, the point, is the whole step)
    step = dict(zip((w.name for w in shrunk), SHRINK))
    chosen_name = min(eligible, key=lambda k: (step.get(k, 1.0), worst_past.get(k, 0.0),
                                               val_means[k], k not in CLASSIC))
    chosen = next((c for c in cand if c.name == chosen_name), chosen_name)
    how = ("on the whole past" if minimax or chosen_name == fb["heuristic"] != best
           else "on validation")
    echo(f"selected {how}: {chosen_name} (validation mean bsld {val_means[chosen_name]:.2f}; "
         f"best heuristic there {best} {val_means[best]:.2f})")

    # -- the test set, read once ----------------------------------------------------------
    test_windows = sp.test.read()
    sources = list(CLASSIC) + ([chosen] if chosen_name not in CLASSIC else [])
    with Evaluator(scenario, test_windows, processes,
                   slices=[sp.slices["test"]] if running else None) as test_eval:
        test, test_whole = split_whole(test_eval.evaluate(sources), running)
    if running:
        test_replay = {s if isinstance(s, str) else s.name: float(v)
                       for s, v in zip(sources, test_whole)}
    else:
        test_replay = span_replay(scenario, workload, sp.spans["test"], sources, processes)
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
    if bound is not None:
        # Which heuristics kept the bound on the test span itself, and the best of them:
        # the reference a choice made with hindsight would have had.
        test_mw = {h: float(test[col[h], :, _MAXWAIT].max()) for h in CLASSIC}
        kept = [h for h in CLASSIC if test_mw[h] <= max_wait * test_mw["fcfs+easy"]]
        hb = min(kept, key=lambda h: float(test[col[h], :, _BSLD].mean()))
        hindsight["best_within_bound"] = hb
        hindsight["best_within_bound_ratio"] = float(test[col[hb], :, _BSLD].mean() / ref_mean)
    echo(f"test: {chosen_name} vs {best}: mean bsld ratio {headline['mean_ratio']:.3f} "
         f"[{headline['mean_ratio_ci'][0]:.3f}, {headline['mean_ratio_ci'][1]:.3f}], median "
         f"{headline['median_ratio']:.3f}, wins {headline['wins']}, losses {headline['losses']}; "
         f"max wait {maxwait['ratio_of_max']:.2f}x FCFS+EASY's")
    if best != lead:
        c = vs[lead]
        echo(f"test: {chosen_name} vs {lead} (best by bsld alone): mean bsld ratio "
             f"{c['mean_ratio']:.3f} [{c['mean_ratio_ci'][0]:.3f}, {c['mean_ratio_ci'][1]:.3f}]; "
             f"its max wait {test[col[lead], :, _MAXWAIT].max() / test[fcfs, :, _MAXWAIT].max():.2f}x "
             "FCFS+EASY's")
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
                   "window_evaluations": evaluations, "cpu_seconds": round(cpu_seconds(), 1),
                   "processes": processes, "cpus": os.cpu_count()},
        "search_space": {"features": [FEATURES[i] for i in space.features],
                         "submit_time": ("F1+EASY leads validation: its submit-time term "
                                         "(minimax)" if f1_term else
                                         "--with-submit-time" if submit_time else None),
                         "backfill": "easy", "backfill_order": backfill_order,
                         "slack": slack, "slack_scale": SLACK_SCALE,
                         "guard": "searched" if guarded else None,
                         "drain": drain, "backlog": backlog,
                         "fitness": "minimax" if minimax else fitness,
                         "folds": fold_info,
                         "train_batch": (f"{batch} of {n_train} training windows, drawn "
                                         "afresh each generation" if generations and
                                         batch < n_train else None),
                         "user_history": (user_history_note("wait" in workload.features)
                                          if user_features else None),
                         "user_features": user_features_why,
                         "method":
                         f"CMA-ES on unit-norm weights, sigma0 {sigma}, population "
                         f"max(6, 2 x processes), doubled at each restart, seeded at the best "
                         "heuristic", "classics_included": list(CLASSIC)},
        "snapshots": [w.name for w in snaps], "best_heuristic": best, "chosen": chosen_name,
        # --max-wait: the bound, and the best heuristic by bsld alone (``lead``), which
        # the search started from; ``best_heuristic`` is then the best within the bound
        "max_wait_bound": None if bound is None else {
            "ratio": max_wait, "validation_fcfs_easy_max_wait": val_mw["fcfs+easy"],
            "lead_heuristic": lead, "penalty": WAIT_PENALTY},
        "validation_max_wait": val_mw,
        # --max-wait: the heuristic x guard grid's best points by training fitness
        "guard_grid_best": [[g.name, f] for f, g in grid[:keep]],
        "guard_grid_points": len(grid),
        # --drain searched: the seed without and with the drain rule, by training fitness
        "drain_grid": [[w.name, f] for f, w in drain_seen],
        "validation_mean_bsld": val_means, "selection": selection, "past_check": checked,
        # minimax: the margin, and each candidate's ratio to the lead heuristic on every
        # training chunk and on validation
        "minimax": {"margin": margin, "reference": lead, "period_ratios": past_ratios,
                    "worst": worst_past, "shrink": list(step.values())} if minimax else None,
        # the heuristic shipped when no searched policy qualifies, and why
        "fallback": fb,
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
    write_folder(stage, policy, results)
    return results
