"""The model card and output folder of ``python -m agents tune`` (:mod:`agents.tuning`).

``card.md`` says what a tuned policy is and what it was selected and tested
on: data and spans, the training-window filter, budget, search space,
validation and test figures against every heuristic, the spans run through
whole and the room in hindsight. The folder is written file by file through
temporary names, ``policy.json`` last, so a folder with ``policy.json`` is
complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cosim.policies.priority import POLICY_FILE

__all__ = ["model_card", "write_folder"]


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_folder(out: Path, policy: dict, results: dict) -> None:
    """Write ``results.json``, ``card.md`` and, last, ``policy.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    _atomic(out / "results.json", json.dumps(results, indent=2) + "\n")
    _atomic(out / "card.md", model_card(policy, results))
    _atomic(out / POLICY_FILE, json.dumps(policy, indent=2) + "\n")   # last: marks it complete


def model_card(policy: dict, r: dict) -> str:
    """The model card (markdown) of a tuned policy."""
    return "\n".join(_data_lines(r) + _search_lines(policy, r) + _validation_lines(r)
                     + _test_lines(r))


def _data_lines(r: dict) -> list[str]:
    """The title and the data: the windows, spans, the training filter."""
    chosen = r["chosen"]
    lines = [f"# Tuned policy: {chosen}", "",
             "## Data", "",
             f"- scenario `{r['scenario']}` {' '.join('--set ' + o for o in r['overrides'])}",
             f"- {r['workload']['jobs']} jobs on {r['workload']['capacity']} units; "
             f"estimates: {r['workload']['estimates'] or 'as the workload gives them'}",
             (f"- windows of {r['window_jobs']} jobs measured inside one run of their span "
              "(validation, test), the way a cluster runs its policy"
              + (", after every job of the past (each run starts at the trace's first job: "
                 "the policy has run all along; not measured)" if r.get("warmup_jobs") == "all"
                 else f", after up to {r['warmup_jobs']} jobs of the past (scheduled by the same "
                 "policy, not measured)" if r.get("warmup_jobs") else "")
              + f"; training on {r['windows']['train']} chunks of {r['train_chunk_jobs']} "
              "jobs of the training span, each run whole; the same jobs for every policy "
              "(paired)" if r.get("evaluation") == "running" else
              f"- windows of {r['window_jobs']} jobs, each simulated from an empty machine"
              + (" after every earlier job of its span (warm-up, scheduled by the same policy "
                 "and not measured)" if r.get("warmup_jobs") == "all"
                 else f" after up to {r['warmup_jobs']} warm-up jobs (the jobs just before it in its "
                 "span, scheduled by the same policy and not measured)"
                 if r.get("warmup_jobs") else "")
              + "; the same windows for every policy (paired)")]
    beliefs = r.get("beliefs")
    if beliefs and beliefs["predictor"] != "estimate":
        lines.append("- plans with: " + ("the last-two user history" if beliefs["predictor"]
                                         == "history" else "the trace model")
                     + f" (`@{beliefs['predictor']}`, learnt from the jobs finished so far, "
                     "capped at the request); "
                     "a job that outlives it is re-estimated by `scheduler.correction: "
                     f"{beliefs['correction']}` (chosen on validation among "
                     f"{', '.join(beliefs['searched']['beliefs'])} x "
                     f"{', '.join(beliefs['searched']['corrections'])})")
    elif beliefs:
        lines.append(f"- plans with: each job's request (`@{beliefs['predictor']}`), the searched "
                     "and the classic policies alike (run times are not predicted); a job that "
                     f"outlives it is re-estimated by `scheduler.correction: "
                     f"{beliefs['correction']}`"
                     + (f" (requests kept on validation against "
                        f"{', '.join(beliefs['searched']['beliefs'][1:])} x "
                        f"{', '.join(beliefs['searched']['corrections'])})"
                        if beliefs.get("searched") else ""))
    for k, s in r["spans"].items():
        lines.append(f"- {k}: jobs {s['start']}..{s['stop'] - 1} (submit {s['first_submit']:.0f}"
                     f"..{s['last_submit']:.0f} s), {r['windows'][k]} "
                     + ("chunks" if k == "train" and r.get("evaluation") == "running"
                        else "windows"))
    f = r.get("train_filter")
    if f:
        lines.append(
            f"- training windows filtered by contention: {f['kept']} kept of a pool of "
            f"{f['pool']} evenly spaced over the training span, "
            + ({"spread": "those of highest log(worst / best heuristic mean bsld)",
                "excess": "those of highest log(best heuristic mean bsld)"}.get(f["rule"])
               or (f"the evenly spaced windows where the heuristics differ by more than 5 % "
                   f"({f.get('unchanged', '?')} of them), the others, near-optimal for every "
                   "heuristic, replaced by the pool's windows of widest worst/best spread "
                   f"({f.get('near_optimal_in_pool', '?')} of the pool's windows are "
                   "near-optimal)"))
            + f" (rule `{f['rule']}`; the kept windows score at least {f['score_kept_min']:.3f}, "
            f"the pool's median {f['score_pool_median']:.3f}; the best heuristic's mean bsld "
            f"{f['kept_best_heuristic_bsld']:.2f} on the kept windows, "
            f"{f['pool_best_heuristic_bsld']:.2f} on the pool); validation and test windows "
            "are not filtered")
    if r["note"]:
        lines.append(f"- note: {r['note']}")
    return lines


def _search_lines(policy: dict, r: dict) -> list[str]:
    """The budget and the search space, the selection rule, the result."""
    best = r["best_heuristic"]
    trained_on = "training chunks" if r.get("evaluation") == "running" else "training windows"
    lines: list[str] = []
    b = r["budget"]
    lines += ["", "## Budget", "",
              f"- {b['minutes']} minutes of search ({b['search_seconds']} s measured), "
              f"{b['generations']} CMA-ES generations ({b.get('restarts', 0)} restarts), "
              f"{b['window_evaluations']} (policy, window) evaluations, {b['processes']} worker "
              f"processes on a machine with {b['cpus']} CPUs, {b.get('cpu_seconds', '?')} CPU "
              "seconds in all (this process and its workers)",
              "", "## Search space", "",
              f"- key = weights . ({', '.join(r['search_space']['features'])}), smaller first, "
              + ("EASY backfill candidates tried in the order of a second, searched weight "
                 "vector over the same features" if r['search_space'].get('backfill_order')
                 == "searched" else "EASY backfilling in the same order")
              + (f"; relaxed EASY's slack searched (the head promised its shadow time plus "
                 f"slack x its estimate; slack = {r['search_space'].get('slack_scale', 5):g} x "
                 "max(0, a search coordinate) "
                 "seeded at 0, textbook EASY)" if r['search_space'].get('slack') == "searched"
                 else "")
              + (" and a starvation guard, its threshold searched (a job that has waited "
                 "that long goes ahead of the rest, oldest first)"
                 if r['search_space'].get('guard') == "searched" else "")
              + ("; a drain-aware reservation, D and G searched (a head whose shadow time is "
                 "more than D x its estimate away gets none until it has waited G), started "
                 "from the best of " + ", ".join(f"{n} {f:.3f}" for n, f in r.get('drain_grid', []))
                 + " (training fitness)" if r['search_space'].get('drain') == "searched" else "")
              + ("; the backlog products searched (B = log10(1 + the queued jobs' estimated "
                 "core-hours / N) times log estimate, log cores and log wait: the order may "
                 "change with the queue)" if r['search_space'].get('backlog') == "searched"
                 else "")
              + " (`cosim/policies/priority.py`)"
              + (f"; log_submit searched: {r['search_space']['submit_time']}"
                 if r['search_space'].get('submit_time') else ""),
              *([f"- fairness bound: max wait at most {mb['ratio']:g}x FCFS+EASY's "
                 f"({mb['validation_fcfs_easy_max_wait']:.0f} s on validation); the reference "
                 f"is the best heuristic within it, {best} ({mb['lead_heuristic']} is best by "
                 "bsld alone and seeds the search); every classic order with the guard at "
                 "thresholds spread over the bound was scored on the training data first "
                 f"(best: {', '.join(n for n, _ in r.get('guard_grid_best') or [])}), the "
                 "search starts from the best of them, and a candidate over the bound there "
                 f"pays {mb['penalty']:g} x its relative excess in fitness; on validation only "
                 "policies within the bound can be chosen"]
                if (mb := r.get("max_wait_bound")) else []),
              *([f"- user-history features ({r['search_space'].get('user_features', 'on')}): "
                 f"{r['search_space']['user_history']}; they order "
                 "the queue only (EASY's reservations and the kill limit use the request)"]
                if r['search_space'].get('user_history') else
                [f"- user-history features: {r['search_space']['user_features']}"]
                if r['search_space'].get('user_features') else []),
              f"- {r['search_space']['method']}; fitness on the {trained_on}: "
              + ("the mean of per-window ratios of mean bsld to the best heuristic's"
                 if r['search_space'].get('fitness') == "windows" else
                 f"the worst, over {len(r['search_space']['folds'])} chronological folds of "
                 f"the {trained_on}, of mean bsld over the mean bsld of the heuristic best "
                 "on that fold (the folds' best: "
                 + ", ".join(f"{d['best_heuristic']}, where {best} is {d['ratio_of_best']:.3f}x"
                             for d in r['search_space']['folds']) + ")"
                 if r['search_space'].get('fitness') == "folds"
                 else "mean bsld over the best heuristic's")
              + (f" ({r['search_space']['train_batch']})"
                 if r['search_space'].get('train_batch') else ""),
              *([f"- selection on the whole past (minimax): the fitness is the worst ratio "
                 f"of mean bsld to {mm['reference']}'s over the training chunks and the "
                 f"validation span, so validation is fitted, not held out; "
                 + ("the smallest step from the heuristic's point toward the best point "
                    f"({', '.join(f'{a:g}' for a in mm['shrink'])} or all of the way) "
                    if mm.get("shrink") else "the best point ")
                 + f"ships only if its worst ratio is below {mm['margin']:g}, else the "
                 "heuristic stays (candidates' worst ratios: " + ", ".join(
                     f"{k} {v:.3f}" for k, v in mm['worst'].items()) + ")"]
                if (mm := r.get("minimax")) else
                [f"- selection on validation among the {len(r['train_ratio_of_searched'])} best "
              "searched weights (by training fitness), the search distribution's final mean "
              f"(cma-mean)"
              + (f", the snapshots {', '.join(r['snapshots'])} (best so far and search mean "
                 "at doubling generations)" if r.get("snapshots") else "")
              + f" and the heuristics {', '.join(r['search_space']['classics_included'])}"
              + ("; a searched policy qualifies only when the 95 % bootstrap interval of its "
                 "validation mean-bsld ratio to the best heuristic lies below 1"
                 + (" and, run through the whole validation span at once, it does no worse "
                    "than the best heuristic" if r.get("validation_replay") else "")
                 + ("; and in every one of the "
                    f"{(r.get('past_check') or {}).get('periods', '--')} periods of the training "
                    "span its mean bsld is no higher than the best heuristic's"
                    + (" (worst period ratio to it: " + ", ".join(
                        f"{k} {max(v):.3f}" for k, v in r['past_check']['fold_ratios'].items())
                       + ")" if (r.get('past_check') or {}).get('fold_ratios') else "")
                    if r.get("selection") == "past" else "")
                 if r.get("selection", "mean") in ("interval", "past") else
                 "; the lowest validation mean wins")]),
              *([f"- the heuristic kept when no searched policy qualifies: "
                 f"{fb['heuristic']}, the lowest median, over {fb['periods']} periods (the "
                 "training span's, then validation), of its mean bsld over the period's best "
                 "heuristic's (" + ", ".join(f"{k} {v:.3f}" for k, v in sorted(
                     fb['median_ratio'].items(), key=lambda kv: kv[1])[:3]) + ")"
                 + (f"; {best} is the best on validation and the reference of every ratio "
                    "here" if fb['heuristic'] != best else "")]
                if (fb := r.get("fallback") or {}).get("rule") == "median" else []),
              f"- result: `{json.dumps(policy)}`",
              "", "## Validation (selection)", ""]
    return lines


def _validation_lines(r: dict) -> list[str]:
    """The validation table: every policy taken there."""
    best, chosen = r["best_heuristic"], r["chosen"]
    running = r.get("evaluation") == "running"
    lines: list[str] = []
    ci = r.get("validation_ratio_ci", {})
    fallback = (r.get("fallback") or {}).get("heuristic", best)
    replay = r.get("validation_replay") or {}
    mws = r.get("validation_max_wait") or {}
    fcfs_mw = max(mws.get("fcfs+easy", 0.0), 1.0)
    lines += ["| policy | mean bsld over the windows | "
              + ("the span as a whole (the windows' run) |" if running else
                 "the span replayed whole |")
              + (" max wait / FCFS+EASY's |" if mws else ""),
              "|---|---|---|" + ("---|" if mws else "")]
    for name, v in sorted(r["validation_mean_bsld"].items(), key=lambda kv: kv[1]):
        iv = (f" (ratio to {best} [{ci[name][0]:.3f}, {ci[name][1]:.3f}])" if name in ci
              else "")
        rp = f"{replay[name]:.2f}" if name in replay else "--"
        lines.append(f"| {name}{' (best heuristic)' if name == best else ''}"
                     f"{' (fallback)' if name == fallback != best else ''}"
                     f"{' (chosen)' if name == chosen else ''} | {v:.2f}{iv} | {rp} |"
                     + (f" {mws[name] / fcfs_mw:.2f} |" if name in mws else ""))
    return lines


def _test_lines(r: dict) -> list[str]:
    """The test figures: paired against each heuristic, max wait, the span whole, hindsight."""
    best, chosen = r["best_heuristic"], r["chosen"]
    t = r["test"]
    lines: list[str] = []
    lines += ["", "## Test (read once, after selection)", "",
              f"{chosen} against each heuristic on the same {r['windows']['test']} windows; 95 % "
              "bootstrap intervals over windows"
              + (f" (resampled in blocks of {blk} consecutive windows: windows that share jobs)"
                 if (blk := r.get("bootstrap_blocks", {}).get("test", 1)) > 1 else "") + ".", "",
              "| heuristic | its mean bsld | ratio of means | median ratio | wins | losses |",
              "|---|---|---|---|---|---|"]
    for h, c in t["against"].items():
        lines.append(f"| {h}{' (best on validation)' if h == best else ''} | "
                     f"{c['reference_mean']:.2f} | {c['mean_ratio']:.3f} [{c['mean_ratio_ci'][0]:.3f}, "
                     f"{c['mean_ratio_ci'][1]:.3f}] | {c['median_ratio']:.3f} "
                     f"[{c['median_ratio_ci'][0]:.3f}, {c['median_ratio_ci'][1]:.3f}] | "
                     f"{c['wins']} | {c['losses']} |")
    mw = t["max_wait_vs_fcfs_easy"]
    lines += ["", f"{chosen}: mean bsld {t['mean_bsld'][chosen]:.2f}; max wait over the test "
              f"windows {t['max_wait'][chosen]:.0f} s, {mw['ratio_of_max']:.2f}x FCFS+EASY's "
              f"(per-window mean ratio {mw['mean_window_ratio']:.2f}).", ""]
    if st := t.get("starvation"):
        bound = (f"{st['bound_ratio']:g}x FCFS+EASY's max wait on the same windows "
                 f"({st['bound_ratio'] * st['fcfs_easy_max_wait']:.0f} s)"
                 if st["bound_ratio"] is not None else "no bound (--max-wait none)")
        lines += [(f"**Starvation: {chosen} starves on the test span**: a job "
                   + st["why"].removeprefix("waited ") + "." if st["starves"] else
                   f"Starvation: none on the test span; {chosen}'s longest wait "
                   f"{st['max_wait']:.0f} s is within the bound and under a week.")
                  + f" The bound: {bound}.", ""]
    if rows := t.get("span_rows"):
        lines += ["Over the test span as a whole (one run per policy; waits in s):", "",
                  "| policy | mean bsld | mean wait | max wait | p99 wait | waited > 1 day | "
                  "> 1 week |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {_num(row['bsld_mean'], '.2f')} | {_num(row['wait_mean'], '.0f')} | "
                  f"{_num(row['wait_max'], '.0f')} | {_num(row['wait_p99'], '.0f')} | "
                  f"{row['starved_1d']} | {row['starved_1w']} |" for name, row in rows.items()]
        lines.append("")
    if t.get("replay"):
        lines += [("The test span as a whole (the windows' one run, every job measured; no "
                   "interval): " if r.get("evaluation") == "running" else
                   "The test span replayed whole (one run from an empty machine, every job "
                   "measured; no interval): ") + ", ".join(
                      f"{k} {v:.2f}" for k, v in sorted(t["replay"].items(), key=lambda kv: kv[1]))
                  + ".", ""]
    h = t.get("hindsight")
    # In one run a window's figure depends on the state the earlier windows left.
    running_caveat = (" (as measured in each heuristic's own run, so not a schedule any "
                      "one run could give)" if r.get("evaluation") == "running" else "")
    if h:
        lines += [f"Room in hindsight (not choosable beforehand), as ratios to {best}'s mean "
                  f"bsld: the best heuristic on the test span, {h['best_heuristic']}, "
                  f"{h['best_heuristic_ratio']:.3f}; each test window scheduled by whichever "
                  f"heuristic does best on it{running_caveat}, {h['per_window_oracle_ratio']:.3f} (on "
                  f"validation {h['validation_per_window_oracle_ratio']:.3f})"
                  + (f"; the best heuristic within the max-wait bound on the test span, "
                     f"{h['best_within_bound']}, {h['best_within_bound_ratio']:.3f}"
                     if "best_within_bound" in h else "") + ".", ""]
    return lines


def _num(value, fmt: str) -> str:
    return "--" if value is None else format(value, fmt)
