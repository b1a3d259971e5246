"""The policy-name grammar: one parser for every place a policy is named.

::

    POLICY    = ORDER [ "@" PREDICTOR [ "+kill" [ "=" DIR ] ] ]
    ORDER     = HEURISTIC [ "+" BACKFILL ] | SELECTOR | SLURM | "rl:" DIR | "learned:" DIR
    SLURM     = "slurm" [ ":" KEY "=" VALUE { "," KEY "=" VALUE } ]
    BACKFILL  = none | greedy | easy | conservative | relaxed [ "=" SLACK ]
              | drain [ "=" D [ ":" DAYS ] ]
    PREDICTOR = estimate | history | xgboost | rnn

Examples: ``fcfs+easy``, ``f1`` (its default backfilling), ``saf+relaxed=2``
(relaxed EASY: the head promised its shadow time plus twice its estimate;
``+relaxed`` alone is slack 1), ``saf+drain=100:30`` (drain-aware EASY: a head
more than 100 times its estimate from its shadow time gets no reservation until
it has waited 30 days; ``+drain`` alone is 100:30), ``sjf+easy@xgboost``
(order by XGBoost's pre-run predictions), ``fcfs+easy@rnn+kill`` (remaining-time
predictions from progress logs and RLSchert's kill rule), ``sjf+easy@rnn+kill=DIR``
(kills decided by a trained kill agent instead of the rule), ``slurm`` (Slurm's
multifactor priority and backfill at Slurm's defaults; knobs by their
slurm.conf names: ``slurm:PriorityWeightAge=1000,bf_max_job_test=100``, see
:mod:`cosim.policies.slurm`), ``knapsack``,
``rl:runs/ppo`` (a trained agent's checkpoint folder), ``learned:runs/tuned`` (a
policy folder of ``python -m agents tune``). A name without
``@PREDICTOR`` takes the scenario's ``predictor.runtime`` (and its
``predictor.kill.enabled``).

:func:`parse_policy` turns a name into a :class:`PolicySpec`;
:func:`make_policy` builds the heuristic or selector policy of a spec (a
trained agent needs torch, so :mod:`cosim.compose` loads those). The CLI's
``run``, ``validate`` and ``policies``, the Gym environment's teacher and the
learners all go through here.

Examples:
    >>> spec = parse_policy("sjf+easy@rnn+kill")
    >>> spec.order, spec.heuristic, spec.backfill, spec.predictor, spec.kill
    ('sjf+easy', 'sjf', 'easy', 'rnn', True)
    >>> parse_policy("f1").order
    'f1+none'
    >>> parse_policy("rl:runs/ppo").checkpoint
    'runs/ppo'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from cosim import limits
from cosim.errors import ScenarioError
from cosim.policies.backfill import BACKFILLS, QueuePolicy
from cosim.policies.heuristics import HEURISTICS
from cosim.policies.knapsack import KnapsackPolicy
from cosim.policies.recorded import RecordedPolicy
from cosim.policies.slurm import make_slurm_policy
from cosim.policies.slurm_params import SLURM_PREFIX, parse_slurm_params

__all__ = ["PolicySpec", "parse_policy", "make_policy", "policy_names", "grammar_help",
           "PREDICTORS", "SELECTORS"]

#: Where a policy's run-time beliefs come from (``@PREDICTOR``).
PREDICTORS: dict[str, str] = {
    "estimate": "user estimates (requested times)",
    "history": "per-user mean of the last two run times (EASY++)",
    "xgboost": "XGBoost pre-run predictions from job inputs (RLSchert)",
    "rnn": "pre-run predictions, then remaining-time predictions from progress logs",
}

#: Policies that choose a set of jobs rather than an order (no ``+BACKFILL``).
SELECTORS: dict[str, str] = {
    "knapsack": "0-1 knapsack (dynamic programming) over the first 50 queued jobs that fit, "
                "value from DRAS's capability reward (DRAS's Optimization baseline)",
    "recorded": "as recorded: every job starts at its recorded start (submit + the trace's "
                "wait: sacct Start, SWF field 3), or as soon after as it fits; the production "
                "scheduler's row beside the simulated ones",
}

_AGENT = "rl:"
_LEARNED = "learned:"
#: ``+relaxed`` without ``=SLACK``: the head may wait one more of its own estimates
#: (its bounded slowdown grows by at most 1 with exact estimates).
RELAXED_SLACK = 1.0
_RELAXED = "relaxed"
#: ``+drain`` without ``=D:DAYS``: the factor and grace (days) that took SAF+EASY's worst
#: RICC training chunk from 538.77 to 12.28 mean bsld (docs/guide/policies.md, drain).
DRAIN_DEFAULT = (100.0, 30.0)
_DRAIN = "drain"


@dataclass(frozen=True)
class PolicySpec:
    """A parsed policy name.

    Attributes:
        name: the name as written (whitespace stripped).
        kind: ``queue`` (heuristic + backfilling), ``selector``, ``slurm``,
            ``agent`` or ``learned`` (a tuned policy folder,
            :mod:`cosim.policies.priority`).
        heuristic, backfill: for ``queue``: the order and the backfilling variant
            (the heuristic's default when the name has none).
        selector: for ``selector``: its name.
        checkpoint: for ``agent`` and ``learned``: the folder.
        slack: for ``+relaxed[=SLACK]``: relaxed EASY's slack (``backfill`` is
            then ``relaxed=SLACK``; see :class:`cosim.policies.backfill.QueuePolicy`).
        drain: for ``+drain[=D[:DAYS]]``: drain-aware EASY's ``(D, grace seconds)``
            (``backfill`` is then ``drain=D:DAYS``; (0, 0) otherwise).
        slurm: for ``slurm``: the knobs the name sets, ``KEY=VALUE,...`` in
            slurm.conf spelling, those at Slurm's defaults left out.
        predictor: ``@PREDICTOR``, or None when the name has none (the
            scenario's default applies; see :meth:`resolved`).
        kill: ``+kill`` was given (needs ``@rnn``).
        kill_agent: with ``+kill=DIR``: the checkpoint folder of the trained
            kill agent that decides kills instead of RLSchert's rule.
        correction: for ``learned``: the ``scheduler.correction`` its folder plans
            with (``""``: the scenario's); its ``predictor`` too, where the name has none.
    """

    name: str
    kind: str
    heuristic: str = ""
    backfill: str = ""
    selector: str = ""
    checkpoint: str = ""
    predictor: str | None = None
    kill: bool = False
    kill_agent: str = ""
    slack: float = 0.0
    drain: tuple[float, float] = (0.0, 0.0)
    slurm: str = ""
    correction: str = ""

    @property
    def order(self) -> str:
        """The part before ``@``, normalized (``f1`` -> ``f1+none``)."""
        if self.kind == "queue":
            return f"{self.heuristic}+{self.backfill}"
        if self.kind == "selector":
            return self.selector
        if self.kind == "slurm":
            return SLURM_PREFIX + (f":{self.slurm}" if self.slurm else "")
        return (_LEARNED if self.kind == "learned" else _AGENT) + self.checkpoint

    def resolved(self, predictor: str = "estimate", kill: bool = False, *,
                 where: str = "policy") -> PolicySpec:
        """The spec with the scenario's defaults where the name says nothing.

        Raises:
            ScenarioError: the defaults ask for a kill without ``rnn`` (see :meth:`checked`).
        """
        if self.predictor is not None:
            return self
        return replace(self, predictor=predictor, kill=self.kill or kill).checked(where)

    def checked(self, where: str = "policy") -> PolicySpec:
        """The spec itself, if what it asks for fits together.

        The one place that checks that a kill (``+kill``, ``+kill=DIR``, or
        ``predictor.kill.enabled``) comes with ``@rnn``: killing needs in-run
        predictions.

        Raises:
            ScenarioError: a kill without ``@rnn``.
        """
        if self.kill and self.predictor != "rnn":
            asked = "+kill" in self.name.lower()
            found = repr(self.name) if asked else \
                f"{self.name!r} with predictor.kill.enabled (+kill) and @{self.predictor}"
            raise ScenarioError(where, found, "+kill only with @rnn (it needs in-run predictions)")
        return self


def _fail(where: str, name: str, expected: str) -> ScenarioError:
    return ScenarioError(where, repr(name), expected)


def _parse_order(order: str, name: str, where: str) -> dict:
    if order.startswith(_LEARNED):
        folder = order[len(_LEARNED):]
        if not folder:
            raise _fail(where, name, "learned:DIR with DIR a policy folder written by "
                                     "'python -m agents tune'")
        return {"kind": "learned", "checkpoint": folder}
    if order.startswith(_AGENT):
        folder = order[len(_AGENT):]
        if not folder:
            raise _fail(where, name, "rl:DIR with DIR a checkpoint folder written by "
                                     "'python -m agents train'")
        return {"kind": "agent", "checkpoint": folder}
    base, plus, backfill = order.lower().partition("+")
    if base == SLURM_PREFIX or base.startswith(SLURM_PREFIX + ":"):
        return _parse_slurm(order, name, where)
    if base in SELECTORS:
        if backfill not in ("", "none"):
            raise _fail(where, name, f"{base} alone (it selects a set of jobs; "
                                     "no backfilling variant applies)")
        return {"kind": "selector", "selector": base}
    if base not in HEURISTICS:
        raise _fail(where, name, f"one of {', '.join(HEURISTICS)} (optionally +BACKFILL and "
                                 f"@PREDICTOR[+kill]), or {', '.join(SELECTORS)}, or rl:DIR "
                                 "(see 'python -m cosim policies')")
    if backfill.startswith(_RELAXED):
        word, eq, value = backfill.partition("=")
        try:
            slack = float(value) if eq else RELAXED_SLACK
        except ValueError:
            slack = math.nan
        if word != _RELAXED or not 0.0 <= slack <= limits.MAX_RELAXED_SLACK:
            raise _fail(where, name, "+relaxed or +relaxed=SLACK with SLACK a number from 0 "
                                     f"to {limits.MAX_RELAXED_SLACK:g} (the head may wait "
                                     "SLACK times its estimate more)")
        return {"kind": "queue", "heuristic": base, "backfill": f"{_RELAXED}={slack:g}",
                "slack": slack}
    if backfill.startswith(_DRAIN):
        word, eq, value = backfill.partition("=")
        factor_s, colon, days_s = value.partition(":")
        try:
            factor = float(factor_s) if eq else DRAIN_DEFAULT[0]
            days = float(days_s) if colon else DRAIN_DEFAULT[1]
        except ValueError:
            factor = days = math.nan
        if word != _DRAIN or not (factor > 0.0 and days >= 0.0 and math.isfinite(factor + days)):
            raise _fail(where, name, "+drain, +drain=D or +drain=D:DAYS with D > 0 and DAYS >= 0 "
                                     "(no reservation for a head more than D x its estimate "
                                     "from its shadow time until it has waited DAYS days)")
        return {"kind": "queue", "heuristic": base, "backfill": f"{_DRAIN}={factor:g}:{days:g}",
                "drain": (factor, days * 86400.0)}
    if plus and backfill not in BACKFILLS:
        raise _fail(where, name, f"a backfilling variant among {', '.join(BACKFILLS)}, "
                                 "relaxed[=SLACK], or drain[=D[:DAYS]]")
    return {"kind": "queue", "heuristic": base,
            "backfill": backfill or HEURISTICS[base].default_backfill}


def _parse_slurm(order: str, name: str, where: str) -> dict:
    word, colon, text = order.partition(":")
    if "+" in word or (colon and not text):
        raise _fail(where, name, "slurm or slurm:KEY=VALUE,... (slurm backfills as Slurm does, "
                                 "by its bf_* knobs; no +BACKFILL)")
    params = parse_slurm_params(text, where=f"{where}: {name!r}", name=True)
    canonical = params.policy_name()
    return {"kind": "slurm", "slurm": canonical.partition(":")[2]}


def parse_policy(name: str, *, where: str = "policy") -> PolicySpec:
    """Parse a policy name (see the module docstring).

    Args:
        name: the policy name.
        where: the file and key path or flag it came from, for error messages
            (``"scenarios/vasp.yaml: scheduler.policies[2]"``, ``"--policy"``).

    Raises:
        ScenarioError: the name does not follow the grammar; the message says
            what was expected.
    """
    if not isinstance(name, str) or not name.strip():
        raise _fail(where, str(name), "a policy name such as fcfs+easy")
    text = name.strip()
    order, at, suffix = text.rpartition("@")
    if not at:
        order, suffix = text, ""
    elif text.startswith((_AGENT, _LEARNED)) and suffix.partition("+")[0] not in PREDICTORS:
        order, at, suffix = text, "", ""     # an '@' inside a checkpoint path
    parts = _parse_order(order, text, where)
    predictor, kill, kill_agent = None, False, ""
    if at:
        pred, plus, extra = suffix.partition("+")
        pred = pred.lower()
        word, eq, folder = extra.partition("=")
        if pred not in PREDICTORS or (plus and word.lower() != "kill") or (eq and not folder):
            raise _fail(where, text, "POLICY[@PREDICTOR[+kill[=DIR]]] with PREDICTOR one of "
                                     f"{', '.join(PREDICTORS)}")
        kill, kill_agent = bool(plus), folder
        predictor = pred
    if parts["kind"] == "learned":      # what the tuned folder plans with (agents tune --beliefs)
        from cosim.policies.priority import learned_beliefs

        planned, parts["correction"] = learned_beliefs(parts["checkpoint"], where=where)
        if planned is not None and planned not in PREDICTORS:
            raise _fail(f"{where}: {parts['checkpoint']}/policy.json: predictor", str(planned),
                        f"one of {', '.join(PREDICTORS)}")
        predictor = predictor if at else planned
    return PolicySpec(name=text, predictor=predictor, kill=kill, kill_agent=kill_agent,
                      **parts).checked(where)


def make_policy(name: str | PolicySpec, *, rng: np.random.Generator | None = None,
                where: str = "policy", slurm=None):
    """Build the heuristic or selector policy a name stands for.

    The ``@PREDICTOR`` part is not the policy's business (the runner attaches
    predictions to the scheduler), so ``sjf+easy@xgboost`` gives the same
    policy object as ``sjf+easy``.

    Args:
        name: a policy name or a parsed :class:`PolicySpec`.
        rng: random stream for randomized heuristics.
        where: key path used in error messages.
        slurm: a scenario's ``scheduler.slurm`` mapping, the knobs of a
            ``slurm`` policy under those its name sets.

    Raises:
        ScenarioError: an invalid name, or ``rl:DIR`` (trained agents need
            torch; :func:`cosim.compose.load_policy` builds them).

    Examples:
        >>> make_policy("sjf+easy").name
        'sjf+easy'
    """
    spec = name if isinstance(name, PolicySpec) else parse_policy(name, where=where)
    if spec.kind == "agent":
        raise _fail(where, spec.name, "a heuristic or selector here (a trained agent, "
                                      "rl:DIR, is loaded by cosim.compose.load_policy)")
    if spec.kind == "selector":
        return RecordedPolicy() if spec.selector == "recorded" else KnapsackPolicy()
    if spec.kind == "slurm":
        return make_slurm_policy(spec.slurm, slurm, where=where)
    if spec.kind == "learned":
        from cosim.policies.priority import load_learned

        return load_learned(spec.checkpoint, where=where)
    if spec.backfill.startswith(_RELAXED):
        policy = QueuePolicy(HEURISTICS[spec.heuristic], "easy", rng=rng, slack=spec.slack)
        policy.name = spec.order
        return policy
    if spec.backfill.startswith(_DRAIN):
        policy = QueuePolicy(HEURISTICS[spec.heuristic], "easy", rng=rng, drain=spec.drain)
        policy.name = spec.order
        return policy
    return QueuePolicy(HEURISTICS[spec.heuristic], spec.backfill, rng=rng)


def policy_names() -> list[tuple[str, str]]:
    """``(name, description)`` of every heuristic, selector and backfilling variant."""
    rows = [(h.name, f"{h.doc}; default backfilling: {h.default_backfill}")
            for h in HEURISTICS.values()]
    rows += list(SELECTORS.items())
    rows += [(f"{SLURM_PREFIX}[:KEY=VALUE,...]",
              "Slurm's multifactor priority (PriorityWeightAge, ...JobSize, ...Fairshare, "
              "...Partition, ...QOS; PriorityMaxAge, PriorityFavorSmall, PriorityDecayHalfLife, "
              "PriorityUsageResetPeriod) with Slurm-style backfill (bf_window, bf_max_job_test, "
              "bf_resolution, bf_interval); slurm alone is Slurm's defaults (every weight 0: "
              "first in, first out, bf_window=1440, bf_max_job_test=500, bf_resolution=60, "
              "bf_interval=30)")]
    rows += [(f"+{b}", doc) for b, doc in BACKFILLS.items()]
    rows += [(f"+{_RELAXED}[=SLACK]",
              "relaxed EASY (Ward, Mahood and West 2002): the head is promised its shadow time "
              f"plus SLACK x its estimate (default {RELAXED_SLACK:g}); jobs that end by then "
              "or use the extra cores backfill; 0 is easy"),
             (f"+{_DRAIN}[=D[:DAYS]]",
              "drain-aware EASY: a head more than D x its estimate from its shadow time gets no "
              "reservation (every job that fits may start) until it has waited DAYS days "
              f"(default {DRAIN_DEFAULT[0]:g}:{DRAIN_DEFAULT[1]:g})")]
    rows += [(f"@{p}", doc) for p, doc in PREDICTORS.items()]
    rows += [("+kill", "after @rnn: RLSchert's rule kills and requeues a running job whose "
                       "in-run prediction says it is long although its pre-run one said short"),
             ("+kill=DIR", "after @rnn: a trained kill agent (python -m agents train --actions "
                           "kill) decides the kills instead of the rule"),
             ("rl:DIR", "a trained agent (a checkpoint folder of 'python -m agents train'), "
                        "acting greedily"),
             ("learned:DIR", "a tuned priority policy with backfilling (a folder of "
                             "'python -m agents tune', with its model card)")]
    return rows


def grammar_help() -> str:
    """The grammar and every name, as ``python -m cosim policies`` prints it."""
    rows = policy_names()
    width = max(len(n) for n, _ in rows)
    lines = ["Policy names: HEURISTIC[+BACKFILL][@PREDICTOR[+kill[=DIR]]], a SELECTOR, "
             "slurm[:KEY=VALUE,...], rl:DIR or learned:DIR",
             "(e.g. fcfs+easy, f1, saf+relaxed=2, sjf+easy@xgboost, fcfs+easy@rnn+kill, knapsack, "
             "slurm:PriorityWeightAge=1000, rl:runs/ppo).",
             "Without @PREDICTOR a policy sees the scenario's predictor.runtime.", ""]
    lines += [f"  {n.ljust(width)}  {doc}" for n, doc in rows]
    return "\n".join(lines)
