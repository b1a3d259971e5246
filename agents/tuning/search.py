"""The search of ``agents tune``: CMA-ES over :mod:`cosim.policies.priority` on the training
span of the protocol, started from the best heuristic's own point.

:func:`filter_training` replaces near-optimal training windows by contended ones;
:func:`search` scores the heuristics on the training windows, runs the starting grids
(the starvation guard with ``--max-wait``, the drain rule with ``--drain searched``),
then CMA-ES until the budget or ``--generations`` is spent (IPOP restarts), and, with
``--selection minimax``, the point found shrunk toward the heuristic.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from agents.tuning.options import SKIP_TOLERANCE
from agents.tuning.select import shrunk_points
from agents.tuning.space import (
    DAY,
    SearchSpace,
    checkpoints,
    drain_coordinates,
    drain_grid,
    fitness_of,
    fold_index,
    guard_grid,
    wait_penalty,
)
from cosim.evaluation import (
    CLASSIC,
    Evaluator,
    contention_scores,
    most_contended,
    replace_near_optimal,
    window_at,
    window_starts,
)
from cosim.evaluation import COL_BSLD as _BSLD
from cosim.evaluation import COL_MAX_WAIT as _MAXWAIT
from cosim.policies.priority import FEATURES, PriorityWeights, heuristic_weights

__all__ = ["filter_training", "Found", "search"]



def filter_training(run) -> dict | None:
    """Contention filtering (``--train-filter``): the protocol's training windows replaced
    by windows of a larger pool where the heuristics differ; what was kept, or None.

    Windows where every heuristic is near-optimal carry no signal for the search (on
    RICC most 2,048-job windows from an empty machine give bsld ~1 to every policy).
    Training span only: validation and test windows stay as they are.
    """
    o, sp, workload = run.options, run.protocol.split, run.workload
    if o.train_filter == "none" or o.running:   # running: long runs of the past as it came
        return None
    stop = sp.spans["train"].stop
    base = window_starts(o.window_jobs, o.train_windows, 0, stop)
    starts = window_starts(o.window_jobs, o.train_windows * o.train_pool, 0, stop)
    if o.train_filter == "skip":      # the unfiltered windows are in the pool
        starts = sorted(set(starts) | set(base))
    pool = [window_at(workload, a, o.window_jobs, 0, run.warmup_rows) for a in starts]
    with Evaluator(run.scenario, pool, run.processes) as pool_eval:
        pool_bsld = pool_eval.evaluate(CLASSIC)[:, :, _BSLD]
    if o.train_filter == "skip":
        kept = replace_near_optimal(pool_bsld, [starts.index(a) for a in base], SKIP_TOLERANCE)
    else:
        kept = most_contended(pool_bsld, o.train_windows, o.train_filter)
    score = contention_scores(pool_bsld, o.train_filter)
    sp.train = [pool[i] for i in kept]
    return {"rule": o.train_filter, "pool": len(pool), "kept": len(kept),
            "kept_windows": kept, "kept_starts": [starts[i] for i in kept],
            "unchanged": sum(starts[i] in base for i in kept),
            "near_optimal_in_pool": int(np.sum(score <= np.log1p(SKIP_TOLERANCE))),
            "score_kept_min": float(score[kept].min()),
            "score_pool_median": float(np.median(score)),
            "pool_best_heuristic_bsld": float(pool_bsld.mean(axis=1).min()),
            "kept_best_heuristic_bsld": float(pool_bsld[:, kept].mean(axis=1).min())}


@dataclass
class Found:
    """What the search found and spent (read by the selection and the model card)."""

    space: SearchSpace
    f1_term: bool
    guarded: bool
    searched: list = field(default_factory=list)        # (training fitness, policy), all
    snaps: list = field(default_factory=list)           # --snapshots
    grid: list = field(default_factory=list)            # --max-wait: the guard grid, sorted
    drain_seen: list = field(default_factory=list)      # --drain searched: its grid, sorted
    drain_extra: list = field(default_factory=list)     # the runner-up with the drain rule
    shrunk: list = field(default_factory=list)          # minimax: steps toward the point
    shrunk_fit: list = field(default_factory=list)
    period_ratios: dict = field(default_factory=dict)   # minimax: id(policy) -> ratios
    fold_info: list | None = None
    ref_all: np.ndarray | None = None                   # every heuristic, training windows
    mean: PriorityWeights | None = None                 # the search distribution's mean
    generations: int = 0
    evaluations: int = 0
    restarts: int = 0
    seconds: float = 0.0


class _Fitness:
    """Training fitness of candidates, and the whole past's worst ratio (minimax)."""

    def __init__(self, run, ref_info, train_eval: Evaluator, val_eval: Evaluator, found: Found):
        self.run, self.o, self.found = run, run.options, found
        self.train_eval, self.val_eval = train_eval, val_eval
        self.ref, self.ref_all, self.fcfs_mw, self.fold_of = ref_info
        self.val_ref = float(np.mean(run.val.bsld[run.val.lead]))

    def score(self, full: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Training fitness of candidates' results ``full`` on windows ``idx``."""
        res, o = full[:, :, _BSLD], self.o
        fit = (fitness_of(res, self.ref_all[:, idx], o.fitness, self.fold_of[idx])
               if o.fitness == "folds" else fitness_of(res, self.ref[idx], o.fitness))
        if self.found.guarded:
            fit = fit + wait_penalty(full[:, :, _MAXWAIT], self.fcfs_mw[idx], o.max_wait)
        return fit

    def minimax(self, specs) -> np.ndarray:
        """``--selection minimax``: each candidate's worst ratio to ``lead`` over the
        training chunks and the validation span (the whole past), every one run."""
        full = self.train_eval.evaluate(specs)
        val = self.run.protocol.score("validation", specs, self.val_eval).windows[:, :, _BSLD]
        ratios = np.column_stack([full[:, :, _BSLD] / self.ref[None, :],
                                  val.mean(axis=1) / self.val_ref])
        for w, r in zip(specs, ratios):
            self.found.period_ratios[id(w)] = r.tolist()
        fit = np.where(np.isfinite(ratios).all(axis=1), ratios.max(axis=1), 1e9)
        if self.found.guarded:
            fit = fit + wait_penalty(full[:, :, _MAXWAIT], self.fcfs_mw, self.o.max_wait)
        return fit


def _training_references(run, train_eval: Evaluator, found: Found):
    """The lead heuristic on the training windows (and, where needed, every heuristic and
    FCFS+EASY's max waits); with ``--fitness folds``, the folds' own best heuristics."""
    o, lead, n_train = run.options, run.val.lead, len(run.protocol.split.train)
    fcfs_mw = ref_all = fold_of = None
    if o.fitness == "folds" or found.guarded or o.fallback != "validation":
        train_classic = train_eval.evaluate(CLASSIC)
        ref_all = train_classic[:, :, _BSLD]
        fcfs_mw = np.maximum(train_classic[CLASSIC.index("fcfs+easy"), :, _MAXWAIT], 1.0)
    if o.fitness == "folds":
        # Every heuristic on the training windows, cut in time order into folds: the
        # past's periods each have their own best heuristic (on Lublin the best changes
        # from span to span), and the candidate is scored on the period where it does
        # worst against that one.
        ref = ref_all[CLASSIC.index(lead)]
        fold_of = fold_index(n_train, o.folds)
        found.fold_info = [{"windows": int(np.sum(fold_of == f)),
                            "best_heuristic": CLASSIC[int(np.argmin(
                                ref_all[:, fold_of == f].mean(axis=1)))],
                            "ratio_of_best": float(ref[fold_of == f].mean()
                                                   / ref_all[:, fold_of == f].mean(axis=1).min())}
                           for f in np.unique(fold_of)]
        run.echo("training folds (best heuristic, the validation best's ratio to it): "
                 + ", ".join(f"{d['best_heuristic']} {d['ratio_of_best']:.3f}"
                             for d in found.fold_info))
    else:
        ref = (ref_all[CLASSIC.index(lead)] if ref_all is not None
               else train_eval.evaluate([lead])[0, :, _BSLD])
    found.ref_all = ref_all
    return ref, ref_all, fcfs_mw, fold_of


def _guard_start(run, fit: _Fitness, found: Found, deadline: float):
    """``--max-wait``: every heuristic with the guard at thresholds spread over the bound
    (a job promoted at T still waits for its reservation), scored on every training
    chunk; the search starts from the best of them. One heuristic at a time, the lead
    and the in-bound best first, within half the time left: a guard makes keys dynamic,
    and on RICC's long chunks a heuristic's 12 points take minutes."""
    o, n_train = run.options, len(run.protocol.split.train)
    rows = guard_grid(run.capacity, o.max_wait * float(fit.fcfs_mw.max()),
                      (run.val.lead, run.val.best))
    t_grid = time.perf_counter()
    grid_until = t_grid + 0.5 * max(deadline - t_grid, 0.0)
    for r, row in enumerate(rows):
        t_row = time.perf_counter()
        gfit = fit.score(fit.train_eval.evaluate(row), np.arange(n_train))
        found.grid += zip(gfit.tolist(), row)
        found.evaluations += len(row) * n_train
        now = time.perf_counter()
        if now + (now - t_row) > grid_until and r + 1 < len(rows):
            run.echo(f"guard grid: stopped after {r + 1} of {len(rows)} orders "
                     "(half the time left)")
            break
    found.grid.sort(key=lambda fw: fw[0])
    f0, g0 = found.grid[0]
    run.echo(f"guard grid: {len(found.grid)} heuristic x threshold points; best {g0.name} "
             f"(train {o.fitness} with the max-wait penalty {f0:.4f})")
    return g0, np.concatenate([found.space.seed(g0.weights), [math.log10(g0.promote_after / DAY)]])


def _drain_start(run, fit: _Fitness, found: Found, x0, g0, base: str):
    """``--drain searched``: the seed without and with the drain rule at a few points, on
    every training chunk; the search starts from the best (off included)."""
    space, n_train, relaxed = found.space, len(run.protocol.split.train), space_relaxed(run)
    off = drain_coordinates(PriorityWeights((0.0,) * len(FEATURES), run.capacity))
    row = drain_grid(g0 if found.guarded else space.spec(
        np.concatenate([x0, off, [0.0] if relaxed else []]), base))
    dfit = fit.score(fit.train_eval.evaluate(row), np.arange(n_train))
    found.evaluations += len(row) * n_train
    found.drain_seen = sorted(zip(dfit.tolist(), row), key=lambda fw: fw[0])
    d0 = found.drain_seen[0][1]
    run.echo("drain grid: " + ", ".join(f"{w.name} {f:.4f}" for f, w in found.drain_seen)
             + f"; the search starts from {d0.name}")
    # The runner-up heuristic on validation with the drain rule too, as validation
    # candidates (not searched from): the drain mends a heuristic's worst backlogs, and
    # the heuristic that starves wide jobs most (SAF) may not lead where the span starts
    # (RICC after the whole past: F1+EASY leads validation at 10.02, SAF with the drain 7.50).
    val_bsld = run.val.bsld
    runner = sorted(val_bsld, key=lambda h: float(np.mean(val_bsld[h])))[1].partition("+")[0]
    if not found.guarded and runner != base:
        found.drain_extra = drain_grid(space.spec(np.concatenate(
            [space.seed(heuristic_weights(runner, run.capacity)
                        or heuristic_weights("f1", run.capacity)),
             off, [0.0] if relaxed else []]), runner))[1:]
    return np.concatenate([x0, drain_coordinates(d0)])


def space_relaxed(run) -> bool:
    """Relaxed EASY's slack is searched (``--slack searched``)."""
    return run.options.slack == "searched"


def search(run, val_eval: Evaluator) -> Found:
    """CMA-ES on the protocol's training windows from the lead heuristic's point."""
    o, split = run.options, run.protocol.split
    base = run.val.lead.partition("+")[0]
    # minimax where F1+EASY leads: F1's own submit-time term joins the space, so the seed
    # point is F1+EASY itself (without it, 1.02-1.60x F1+EASY in some past period on 24
    # of 26 F1-led traces probed, and the search starts behind its reference)
    f1_term = o.minimax and base == "f1" and not o.submit_time
    space = SearchSpace.of(run.capacity, submit_time=o.submit_time or f1_term,
                           user_features=run.user_features, backlog=o.backlog == "searched",
                           backfill_order=o.backfill_order == "searched",
                           guarded=o.max_wait is not None, drained=o.drain == "searched",
                           relaxed=space_relaxed(run))
    found = Found(space, f1_term, o.max_wait is not None)
    x0 = space.seed(heuristic_weights(base, run.capacity) or heuristic_weights("f1", run.capacity))
    deadline = run.t_start + 60.0 * run.minutes
    with Evaluator(run.scenario, split.train, run.processes) as train_eval:
        fit = _Fitness(run, _training_references(run, train_eval, found), train_eval, val_eval,
                       found)
        g0 = None
        if found.guarded:
            g0, x0 = _guard_start(run, fit, found, deadline)
        if o.drain == "searched":
            x0 = _drain_start(run, fit, found, x0, g0, base)
        if space_relaxed(run):     # seeded at slack 0: textbook EASY
            x0 = np.concatenate([x0, [0.0]])
        x_best = _cma(run, fit, found, x0, deadline)
        # minimax: the point found shrunk toward the heuristic, scored on the past too
        found.shrunk = (shrunk_points(space.spec, x0, x_best)
                        if o.minimax and found.generations else [])
        found.shrunk_fit = fit.minimax(found.shrunk) if found.shrunk else []
        found.evaluations += len(found.shrunk) * (len(split.train) + len(split.validation))
    found.seconds = time.perf_counter() - run.t_start
    return found


def _cma(run, fit: _Fitness, found: Found, x0, deadline: float):
    """The CMA-ES loop (IPOP restarts); the best point (minimax) or None."""
    import cma

    o, split, spec_of = run.options, run.protocol.split, found.space.spec
    n_train, searched = len(split.train), found.searched
    x_best = f_best = None
    if o.minimax:
        # The seed point is measured, not assumed: it may break ties otherwise than its
        # heuristic (SAF) or lack a term (F1 without submit time).
        s0 = spec_of(x0, "seed-point")
        searched.append((float(fit.minimax([s0])[0]), s0))
        x_best, f_best = x0, searched[0][0]
        found.evaluations += n_train + len(split.validation)
    batch = o.train_batch if 0 < o.train_batch < n_train and not o.minimax else n_train
    draw = np.random.default_rng(o.seed + 2)
    popsize = max(6, 2 * run.processes)
    es = cma.CMAEvolutionStrategy(x0, o.sigma, {"seed": o.seed + 1, "verbose": -9,
                                                "popsize": popsize})
    while (time.perf_counter() < deadline
           and (o.generations is None or found.generations < o.generations)):
        if es.stop():
            # Converged early: restart from the best point so far with a doubled
            # population (IPOP), so the budget is not left unused.
            found.restarts += 1
            popsize *= 2
            es = cma.CMAEvolutionStrategy(es.result.xbest, o.sigma,
                                          {"seed": o.seed + 1 + found.restarts, "verbose": -9,
                                           "popsize": popsize})
        xs = es.ask()
        specs = [spec_of(x) for x in xs]
        # Paired within the generation; a fresh draw each generation is minibatch noise
        # that a fit to a fixed few windows cannot survive.
        idx = (np.arange(n_train) if batch == n_train
               else np.sort(draw.choice(n_train, batch, replace=False)))
        f = (fit.minimax(specs) if o.minimax else
             fit.score(fit.train_eval.evaluate(specs, only=idx), idx))
        es.tell(xs, f.tolist())
        searched += [(float(v), s) for v, s in zip(f, specs)]
        if o.minimax and f.min() < f_best:
            x_best, f_best = xs[int(np.argmin(f))], float(f.min())
        found.generations += 1
        if o.snapshots and found.generations in checkpoints(found.generations):
            # Early stopping, decided on validation: the best point so far and the search
            # mean at doubling checkpoints (a long search fits the training windows ever
            # closer and can drift away from what holds on validation).
            w0 = min(searched, key=lambda fw: fw[0])[1]
            found.snaps.append(replace(w0, name=f"best@g{found.generations}"))
            found.snaps.append(spec_of(es.result.xfavorite, f"mean@g{found.generations}"))
        found.evaluations += len(xs) * (batch + (len(split.validation) if o.minimax else 0))
        run.echo(f"generation {found.generations}: best "
                 f"{'past minimax' if o.minimax else 'train ' + o.fitness} {f.min():.4f} "
                 f"(overall {min(v for v, _ in searched):.4f}), "
                 f"{time.perf_counter() - run.t_start:.0f} s")
    if found.generations and not o.minimax:
        # The search distribution's mean: averaged over many noisy samples, it is often
        # better off the training windows than the luckiest sample.
        found.mean = spec_of(es.result.xfavorite, "cma-mean")
    return x_best
