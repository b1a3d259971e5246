"""What the tuned policy plans with, as dimensions of ``agents tune``: the run-time beliefs
(``--beliefs``: the request, the user's last-two history, the trace model) and the correction of a job
that outlives its belief (``--corrections``), chosen on validation like the rest.

The search and the reference heuristics plan on requests; each other belief and
correction scores the classic heuristics on the same validation windows
(``saf+easy@history/stepup``: :class:`cosim.evaluation.Corrected`), and one of those
rows replaces the choice only with a lower validation mean bsld within the max-wait
bound. The test span is read once, after, as for every choice.
"""

from __future__ import annotations

import numpy as np

from agents.beliefs import TRACE_KINDS
from cosim.actors.corrections import CORRECTIONS
from cosim.errors import InputError
from cosim.evaluation import CLASSIC, Corrected
from cosim.prediction_hub import check_history_inputs

__all__ = ["BELIEFS", "DEFAULT_BELIEFS", "checked_beliefs", "checked_corrections",
           "refuse_beliefs", "add_belief_arguments", "belief_rows", "with_beliefs", "beliefs_of", "policy_beliefs"]

#: ``--beliefs``: the name of each belief and the ``@PREDICTOR`` it plans with.
BELIEFS = {"requests": "estimate", "history": "history", "xgboost": "xgboost"}
#: Planning on requests only: what every tune did before beliefs were a dimension.
DEFAULT_BELIEFS = ("requests",)


def add_belief_arguments(t) -> None:
    """``--beliefs`` and ``--corrections`` of ``agents tune`` (checked by :func:`checked_beliefs`
    and :func:`checked_corrections`)."""
    t.add_argument("--beliefs", nargs="+", default=list(DEFAULT_BELIEFS), metavar="BELIEF",
                   help="what the classic heuristics may plan with, each scored on validation "
                        f"and the best kept like the rest: {', '.join(BELIEFS)} (history: the "
                        "user's last-two run times, @history; xgboost: on a trace, the trace "
                        "model fitted on the past before each span and refitted in it); the "
                        "search and the reference plan on requests (default: requests only)")
    t.add_argument("--corrections", nargs="+", default=[], metavar="CORRECTION",
                   help="with --beliefs: the scheduler.correction values each belief is "
                        f"scored under ({', '.join(CORRECTIONS)}; default: the scenario's)")


def checked_beliefs(names) -> tuple[str, ...]:
    """``--beliefs``, each known, requests first (the search and the reference plan on it).

    Raises:
        InputError: an unknown belief.
    """
    out = ["requests"]
    for name in names:
        if name not in BELIEFS:
            raise InputError("--beliefs", repr(name), f"one of {', '.join(BELIEFS)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def checked_corrections(names) -> tuple[str, ...]:
    """``--corrections``, each a ``scheduler.correction`` (empty: the scenario's).

    Raises:
        InputError: an unknown correction.
    """
    for name in names:
        if name not in CORRECTIONS:
            raise InputError("--corrections", repr(name), f"one of {', '.join(CORRECTIONS)}")
    return tuple(dict.fromkeys(names))


def refuse_beliefs(beliefs, scenario, workload) -> None:
    """Before any search: refuse a belief the workload cannot give, in one line: ``@history``
    without users or requests (:func:`cosim.prediction_hub.check_history_inputs`), the
    trace model on a workload that is not a trace or with ``predictor.models``."""
    for name in beliefs:
        check_history_inputs(BELIEFS[name], scenario, workload)
    if "xgboost" in beliefs and (scenario.workload.kind not in TRACE_KINDS
                                 or scenario.predictor.models):
        raise InputError("--beliefs", "xgboost on a " + scenario.workload.kind + " workload"
                         + (" with predictor.models" if scenario.predictor.models else ""),
                         "a trace (swf, slurm) without predictor.models: the trace model "
                         "learnt from its past (python -m cosim run compares the others)")


def belief_rows(run, val_eval) -> dict:
    """The classic heuristics under each belief other than requests and each correction, on
    the validation windows: per row its belief, correction, mean bsld and max wait, and
    whether it keeps the max-wait bound (empty: requests only)."""
    o, val = run.options, run.val
    corrections = o.corrections or (run.scenario.scheduler.correction,)
    sources = [Corrected(f"{h}@{BELIEFS[b]}", c) for b in o.beliefs if b != "requests"
               for c in corrections for h in CLASSIC]
    if not sources:
        return {}
    scores = run.protocol.score("validation", sources, val_eval)
    rows = {}
    for s in sources:
        mean, max_wait = float(np.mean(scores.bsld(s.name))), scores.max_wait(s.name)
        rows[s.name] = {"policy": s.policy.partition("@")[0],
                        "belief": next(b for b, p in BELIEFS.items()
                                       if s.policy.endswith("@" + p)),
                        "correction": s.correction, "mean_bsld": mean, "max_wait": max_wait,
                        "within_bound": val.bound is None or max_wait <= val.bound}
    run.echo("validation mean bsld under the beliefs: " + ", ".join(
        f"{k} {r['mean_bsld']:.2f}" + ("" if r["within_bound"] else " (over the max-wait bound)")
        for k, r in rows.items()))
    return rows


def with_beliefs(run, choice, rows: dict):
    """The choice, replaced by the row of lowest validation mean bsld within the bound
    where that is lower than the choice's own (planned on requests)."""
    eligible = [k for k, r in rows.items() if r["within_bound"]]
    if not eligible:
        return choice
    best = min(eligible, key=lambda k: rows[k]["mean_bsld"])
    if rows[best]["mean_bsld"] >= choice.val_means[choice.chosen_name]:
        run.echo(f"beliefs: {choice.chosen_name} on requests kept (validation mean bsld "
                 f"{choice.val_means[choice.chosen_name]:.2f}; the best under the beliefs "
                 f"{best} {rows[best]['mean_bsld']:.2f})")
        return choice
    run.echo(f"beliefs: {best} chosen on validation (mean bsld {rows[best]['mean_bsld']:.2f}, "
             f"against {choice.chosen_name} on requests "
             f"{choice.val_means[choice.chosen_name]:.2f})")
    r = rows[best]
    choice.val_means[best] = r["mean_bsld"]
    run.val.mw[best] = r["max_wait"]
    choice.chosen_name = best
    choice.chosen = Corrected(f"{r['policy']}@{BELIEFS[r['belief']]}", r["correction"])
    return choice


def beliefs_of(run, choice, rows: dict) -> dict:
    """``results.json``'s ``beliefs``: what the chosen policy plans with, and the rows."""
    chosen = choice.chosen
    predictor = (chosen.policy.partition("@")[2] if isinstance(chosen, Corrected)
                 else "estimate")
    correction = (chosen.correction if isinstance(chosen, Corrected)
                  else run.scenario.scheduler.correction)
    return {"predictor": predictor, "correction": correction,
            "searched": {"beliefs": list(run.options.beliefs),
                         "corrections": list(run.options.corrections)
                         or [run.scenario.scheduler.correction]} if rows else None,
            "validation": rows or None}


def policy_beliefs(chosen) -> dict:
    """The keys ``policy.json`` adds for a choice planned on a belief other than requests."""
    if not isinstance(chosen, Corrected):
        return {}
    return {"predictor": chosen.policy.partition("@")[2], "correction": chosen.correction}
