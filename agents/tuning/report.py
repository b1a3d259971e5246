"""What ``agents tune`` reports: the test figures (read once, after selection) and the
``results.json`` of the folder (the model card, :mod:`agents.tuning.card`, is written from it)."""

from __future__ import annotations

import os

import numpy as np

from agents.tuning.space import SLACK_SCALE, WAIT_PENALTY, user_history_note
from cosim.evaluation import CLASSIC, Scores
from cosim.evaluation import COL_BSLD as _BSLD
from cosim.evaluation import COL_MAX_WAIT as _MAXWAIT
from cosim.metrics import STARVATION_THRESHOLDS
from cosim.policies.priority import FEATURES

__all__ = ["span_figures", "results_of", "starvation_of"]



def span_figures(run, choice, scores: Scores) -> dict:
    """The chosen policy against every heuristic on the test windows: paired ratios with
    intervals, max wait against FCFS+EASY's, the span as a whole, the room in hindsight."""
    o, val, echo = run.options, run.val, run.echo
    best, lead, bound, chosen_name = val.best, val.lead, val.bound, choice.chosen_name
    test, test_whole, max_wait = scores.windows, scores.whole, o.max_wait
    val_bsld = val.bsld
    test_replay = {s: float(v) for s, v in zip(scores.names, test_whole)}
    col = {s: i for i, s in enumerate(scores.names)}
    ti = col[chosen_name]
    vs = {h: run.protocol.compare("test", test[ti, :, _BSLD], test[col[h], :, _BSLD],
                                  policy=chosen_name, reference_name=h).as_dict()
          for h in CLASSIC}
    fcfs = col["fcfs+easy"]
    maxwait = {"ratio_of_max": float(test[ti, :, _MAXWAIT].max() / test[fcfs, :, _MAXWAIT].max()),
               "mean_window_ratio": float(np.mean(test[ti, :, _MAXWAIT]
                                                  / np.maximum(test[fcfs, :, _MAXWAIT], 1.0)))}
    headline = vs[best]
    starvation = starvation_of(float(test[ti, :, _MAXWAIT].max()),
                               float(test[fcfs, :, _MAXWAIT].max()), max_wait)
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

    if starvation["starves"]:
        echo(f"starvation: {chosen_name} " + starvation["why"] + " on the test span")
    return {"col": col, "against": vs, "max_wait_vs_fcfs_easy": maxwait,
            "hindsight": hindsight, "replay": test_replay, "starvation": starvation}


def starvation_of(max_wait: float, fcfs_max_wait: float, bound: float | None) -> dict:
    """Whether the chosen policy starves on the test span: its max wait over the bound
    (``bound`` x FCFS+EASY's on the same windows) or a job that waited over a week.

    Examples:
        >>> print(starvation_of(700_000.0, 100_000.0, 2.0)["why"])
        waited 700000 s (8.1 days) at most: over the bound of 2x FCFS+EASY's 100000 s, and over a week
        >>> starvation_of(150_000.0, 100_000.0, 2.0)["starves"]
        False
    """
    week = dict(STARVATION_THRESHOLDS)["1w"]
    over_bound = bound is not None and max_wait > bound * fcfs_max_wait
    over_week = max_wait > week
    why = [f"over the bound of {bound:g}x FCFS+EASY's {fcfs_max_wait:.0f} s"] if over_bound else []
    why += ["over a week"] if over_week else []
    return {"max_wait": max_wait, "fcfs_easy_max_wait": fcfs_max_wait, "bound_ratio": bound,
            "over_bound": over_bound, "over_a_week": over_week, "starves": bool(why),
            "why": (f"waited {max_wait:.0f} s ({max_wait / 86400:.1f} days) at most: "
                    + ", and ".join(why)) if why else ""}


def results_of(run, found, choice, scores: Scores, scenario_path: str, overrides: list[str],
               cpu_seconds: float) -> dict:
    """``results.json``: data, spans, budget, search space, validation and test figures."""
    o, val, sp, workload = run.options, run.val, run.protocol.split, run.workload
    t = span_figures(run, choice, scores)
    col, vs, maxwait, hindsight, test_replay = (t["col"], t["against"], t["max_wait_vs_fcfs_easy"],
                                                t["hindsight"], t["replay"])
    test, val_mw, top, step = scores.windows, val.mw, choice.top, choice.step
    chosen_name, best, lead, bound = choice.chosen_name, val.best, val.lead, val.bound
    space, running, minimax = found.space, o.running, o.minimax
    n_train, batch = len(sp.train), (o.train_batch if 0 < o.train_batch < len(sp.train)
                                     and not minimax else len(sp.train))
    scenario, capacity, processes, minutes = run.scenario, run.capacity, run.processes, run.minutes
    user_features, user_features_why, filter_info = (run.user_features, run.user_features_why,
                                                     run.filter_info)
    window_jobs, split, warmup, evaluation, selection = (o.window_jobs, o.split, o.warmup,
                                                         o.evaluation, o.selection)
    keep, margin, max_wait, sigma, fitness = o.keep, o.margin, o.max_wait, o.sigma, o.fitness
    submit_time, backfill_order, slack, drain, backlog = (o.submit_time, o.backfill_order,
                                                          o.slack, o.drain, o.backlog)
    generations, restarts, evaluations, search_s = (found.generations, found.restarts,
                                                    found.evaluations, found.seconds)
    grid, drain_seen, snaps, fold_info = found.grid, found.drain_seen, found.snaps, found.fold_info
    f1_term, guarded = found.f1_term, found.guarded
    cand, val_means, val_ci, val_replay = (choice.cand, choice.val_means, choice.val_ci,
                                           choice.val_replay)
    worst_past, past_ratios, fb, checked = (choice.worst_past, choice.past_ratios,
                                            choice.fallback, choice.checked)
    val_classic = val.scores.windows
    return {
        "scenario": str(scenario_path), "overrides": list(overrides),
        "workload": {"jobs": len(workload), "source": workload.source, "capacity": capacity,
                     "estimates": f"{scenario.workload.estimates.model} (estimate = run time "
                                  f"for {100 * float(np.mean(workload.req_time == workload.run)):.0f} % "
                                  "of jobs)"},
        "beliefs": {"predictor": "estimate", "correction": scenario.scheduler.correction},
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
                   "window_evaluations": evaluations, "cpu_seconds": round(cpu_seconds, 1),
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
                 "starvation": t["starvation"],
                 # each policy over the test span as a whole, starvation beside the mean
                 "span_rows": scores.rows,
                 "replay": test_replay,
                 # per window, for "by how much, and where": the chosen policy's and
                 # the best heuristic's mean bsld (test windows in time order)
                 "per_window_bsld": {s: [round(float(v), 4) for v in test[col[s], :, _BSLD]]
                                     for s in dict.fromkeys((chosen_name, best))}},
    }
