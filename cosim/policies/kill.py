"""The kill rule: RLSchert's rule-based kill (seed 001) as a policy wrapper.

A kill is a scheduling decision, so it goes through the same seam as every
start: :class:`KillRulePolicy` wraps any base policy and, at each fresh
progress check of the prediction hub, yields :func:`cosim.decisions.kill`
for the running jobs :class:`KillRule` condemns, then lets the base policy
decide. The hub only predicts; it never kills.

What the rule reads, per running job (from the hub, :class:`KillInputs`):
``elapsed`` (how long the job had run at its latest remaining-time
prediction), ``len_param`` (its pre-run prediction, re-estimated after a
requeue: ``prediction.prerun``), ``run_hat`` (its predicted run time,
elapsed + remaining) and its kills so far, :attr:`cosim.job.Job.kills`:
kills the scheduler applied to the job (by this rule or a learned kill),
never node failures. The learned kill model
(:class:`cosim.env.actions.kill.KillActions`) asks the same rule through
:meth:`KillRule.says`, so the teacher and the rule cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from cosim.config import KillConfig
from cosim.decisions import Decision, SchedulerView, kill
from cosim.job import Job, JobState

__all__ = ["KillRule", "KILL_RULES", "KillRulePolicy", "KillInputs", "RunPrediction"]


class RunPrediction(Protocol):
    """What the rule reads of one running job's latest predictions
    (:class:`cosim.prediction_hub.JobPrediction` satisfies it)."""

    prerun: float      # len_param: the run time the job was queued with (s)
    elapsed: float     # how long it had run at its latest remaining-time prediction (s)

    @property
    def run_hat(self) -> float:
        """Predicted run time of the current run: elapsed + remaining (s)."""
        ...


class KillInputs(Protocol):
    """What the kill wrapper reads of the prediction hub (:class:`cosim.prediction_hub.PredictionHub`).

    ``checks`` counts the progress checks whose answers were applied;
    ``checked`` lists the running jobs re-predicted at the latest one, in the
    order they were asked about (the order kills are applied in).
    """

    checks: int
    checked: Sequence[Job]

    def prediction(self, job: Job) -> RunPrediction | None:
        """The latest predictions of ``job``."""
        ...


@dataclass(frozen=True)
class KillRule:
    """A rule that kills and requeues a running job whose run time was badly underestimated.

    RLSchert (seed 001, section 3.3, "Scheduler") kills a running job when
    "the time of the job has been running is less than the predicted time
    before running (``len_param``), and ``len_param`` < 10, the predicted time
    during running (``run_i``) is greater than 10, while the related error
    ``|run_i - len_param|`` > 1", in its 5-minute time units. ``run_i`` is
    compared with ``len_param`` and gives ``finish_time_hat = start_time +
    run_i`` (its equation 6), so it is the predicted run time of the job
    (elapsed plus remaining), not the remaining time alone. In seconds::

        elapsed < len_param  and  len_param < short  and  run_hat > long
        and  |run_hat - len_param| > error

    plus two conditions of this implementation: at most ``max_kills`` kills
    per job, and, if ``need_short_waiting``, a job with an estimate below
    ``short`` waits in the queue (there is someone to give the cores to).

    Named rules (:data:`KILL_RULES`, :meth:`named`):

    - ``rlschert``: ``short = long = 10 x unit``, ``error = 1 x unit``,
      ``unit = 300`` s; no queue condition.
    - ``guarded``: this project's earlier rule: 30 min, 2 h, 10 min, and a
      short job must be waiting.

    Attributes:
        name: the rule's name.
        short, long, error: the thresholds, seconds.
        max_kills: kills per job at most (0: no limit).
        need_short_waiting: also require a short job in the queue.

    Examples:
        >>> rule = KillRule.named("rlschert")
        >>> rule.short, rule.long, rule.error
        (3000.0, 3000.0, 300.0)
        >>> rule.should_kill(elapsed=600, len_param=1200, run_hat=4000)
        True
        >>> rule.should_kill(elapsed=600, len_param=1200, run_hat=2900)  # not long
        False
    """

    name: str = "rlschert"
    short: float = 3000.0
    long: float = 3000.0
    error: float = 300.0
    max_kills: int = 1
    need_short_waiting: bool = False

    @classmethod
    def named(cls, name: str, *, unit: float = 300.0, **overrides: Any) -> KillRule:
        """The rule called ``name`` (``rlschert`` or ``guarded``), thresholds overridden.

        Args:
            name: a key of :data:`KILL_RULES`.
            unit: seconds per RLSchert time unit (``rlschert`` only).
            **overrides: ``short``, ``long``, ``error``, ``max_kills``; None keeps
                the rule's value.

        Raises:
            ValueError: an unknown name.
        """
        if name not in KILL_RULES:
            raise ValueError(f"unknown kill rule {name!r}; expected one of {', '.join(KILL_RULES)}")
        base = KILL_RULES[name]
        if name == "rlschert":
            base = replace(base, short=10.0 * unit, long=10.0 * unit, error=1.0 * unit)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def from_config(cls, cfg: KillConfig) -> KillRule:
        """The rule a scenario's ``predictor.kill`` section asks for."""
        return cls.named(cfg.rule, unit=cfg.unit, short=cfg.short, long=cfg.long,
                         error=cfg.error, max_kills=cfg.max_kills)

    def should_kill(self, elapsed: Any, len_param: Any, run_hat: Any, kills: Any = 0,
                    short_waiting: Any = True) -> Any:
        """Whether the rule kills: scalars give a bool, arrays an array of bools.

        Args:
            elapsed: seconds the job has run in this attempt.
            len_param: its pre-run prediction (re-estimated after a requeue).
            run_hat: its in-run prediction of the run time (elapsed + remaining).
            kills: times it was killed already (:attr:`cosim.job.Job.kills`).
            short_waiting: a job with an estimate below ``short`` waits.
        """
        elapsed, len_param, run_hat = (np.asarray(v, dtype=np.float64)
                                       for v in (elapsed, len_param, run_hat))
        ok = (elapsed < len_param) & (len_param < self.short) & (run_hat > self.long) \
            & (np.abs(run_hat - len_param) > self.error)
        if self.max_kills:
            ok = ok & (np.asarray(kills) < self.max_kills)
        if self.need_short_waiting:
            ok = ok & np.asarray(short_waiting, dtype=bool)
        return bool(ok) if ok.ndim == 0 else ok

    def short_waiting(self, view: SchedulerView) -> bool:
        """Whether a job with an estimate below ``short`` waits (True when the rule
        does not ask, so callers need not know)."""
        if not self.need_short_waiting:
            return True
        q = view.queue
        return bool(q.count and np.any(q.estimate[q.slots()] < self.short))

    def says(self, view: SchedulerView, job: Job, pred: RunPrediction) -> bool:
        """Whether the rule kills running ``job`` now, given its latest predictions.

        The one reading of the rule's inputs, shared by :class:`KillRulePolicy`
        and the learned kill's teacher.
        """
        return bool(self.should_kill(pred.elapsed, pred.prerun, pred.run_hat, job.kills,
                                     self.short_waiting(view)))


#: The named kill rules (thresholds in seconds; ``rlschert`` is scaled by its unit).
KILL_RULES: dict[str, KillRule] = {
    "rlschert": KillRule("rlschert", 3000.0, 3000.0, 300.0, 1, False),
    "guarded": KillRule("guarded", 1800.0, 7200.0, 600.0, 1, True),
}


class KillRulePolicy:
    """``POLICY@rnn+kill``: the base policy, plus the kill rule at each progress check.

    At the first decision point after the hub applied a progress check, the
    rule is asked about every job that check re-predicted, in the order they
    were asked about; the condemned ones are killed and requeued (they come
    back re-estimated, see :mod:`cosim.prediction_hub`). Then the base policy
    decides, seeing the cluster as the kills left it (a killed job frees its
    cores only when its interrupt is processed, after this pass).

    Args:
        base: the policy that schedules.
        rule: the :class:`KillRule`.
        hub: the run's prediction hub (:class:`KillInputs`); None until
            :meth:`bind` (then nothing is killed).
        name: the policy's name in results (default: the base policy's).

    Attributes:
        kills: kills this wrapper applied (``rule_kills`` in ``summary.json``).
    """

    def __init__(self, base, rule: KillRule, hub: KillInputs | None = None, *,
                 name: str | None = None):
        self.base = base
        self.rule = rule
        self.hub = hub
        self.name = name if name is not None else getattr(base, "name", "policy")
        # The scheduler reads the queue order once, from the policy it is given.
        self.static_key = getattr(base, "static_key", None)
        attach = getattr(base, "attach_model", None)
        if attach is not None:
            self.attach_model = attach
        self.kills = 0
        self._checks = 0 if hub is None else hub.checks

    def bind(self, hub: KillInputs) -> KillRulePolicy:
        """Read predictions from ``hub`` (the run's prediction hub)."""
        self.hub = hub
        self._checks = hub.checks
        return self

    def condemned(self, view: SchedulerView) -> list[Job]:
        """The running jobs the rule kills now (empty unless a progress check is fresh)."""
        hub = self.hub
        if hub is None or hub.checks == self._checks:
            return []
        self._checks = hub.checks
        rule = self.rule
        out = []
        for job in hub.checked:
            pred = hub.prediction(job)
            if job.state == JobState.RUNNING and pred is not None and rule.says(view, job, pred):
                out.append(job)
        return out

    def decide(self, view: SchedulerView) -> Iterator[Decision]:
        """Kill decisions for a fresh progress check, then the base policy's decisions."""
        # Every verdict first: a kill changes nothing the rule reads before this pass ends.
        victims = self.condemned(view)
        if victims:
            reason = f"kill rule ({self.rule.name}): run time badly underestimated"
            for job in victims:
                before = job.kills
                yield kill(job, reason, requeue=True)
                self.kills += job.kills - before     # the scheduler may refuse a kill
        yield from self.base.decide(view)
