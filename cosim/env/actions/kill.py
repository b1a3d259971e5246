"""The ``kill`` action model (RLSchert's kill decision, learned); see :mod:`cosim.env.actions`."""

from __future__ import annotations

from collections.abc import Iterator

import simpy

from cosim.decisions import Decision, SchedulerView, kill
from cosim.env.actions.base import ActionMap, AgentPolicy
from cosim.job import Job


class KillActions(AgentPolicy):
    """``kill``: a base policy schedules; at each prediction round the agent may kill a job.

    RLSchert's kill decision, learned: when the prediction hub has new
    remaining-time predictions for running jobs, the agent sees the K
    candidates whose predicted run time most exceeds their pre-run prediction
    and kills one of them (it is requeued and re-estimated) or keeps them
    all. After a kill it is asked again. The base policy (a heuristic, or a
    trained ``rl:DIR`` agent) makes every start.

    Index map: ``0``: keep; ``1 .. K``: kill candidate k-1. A candidate must
    have run for some time and have been killed fewer than ``max_kills``
    times (:attr:`cosim.job.Job.kills`, the rule's count: node failures are
    not kills).

    Args:
        amap: no job slots, Keep, ``K`` kill slots.
        base: the policy that schedules.
        hub: the :class:`cosim.prediction_hub.PredictionHub` whose predictions the
            agent reads (given by :meth:`bind`).
        rule: the kill rule (:class:`cosim.policies.kill.KillRule`), the teacher
            the agent imitates first.
        on_post: see :class:`AgentPolicy`.
        max_kills: kills per job at most.
    """

    kind = "kill"

    def __init__(self, amap: ActionMap, base, hub=None, rule=None, on_post=None,
                 max_kills: int = 1):
        super().__init__(amap, on_post, None)
        self.base = base
        self.hub = hub
        self.rule = rule
        self.max_kills = max_kills
        self.static_key = getattr(base, "static_key", None)
        # A base that binds to the run (user-history features of learned:DIR) binds here too.
        attach = getattr(base, "attach_model", None)
        if attach is not None:
            self.attach_model = attach
        self.preds: list = [None] * amap.kill_slots   # JobPrediction of each candidate
        self._round = -1.0
        self._doomed: set[Job] = set()

    def bind(self, hub) -> KillActions:
        """Read predictions from ``hub`` (the run's prediction hub)."""
        self.hub = hub
        return self

    def decide(self, view: SchedulerView) -> Iterator[Decision | simpy.Event]:
        """Kill decisions on a fresh prediction round, then the base policy's decisions."""
        now = view.now
        if self.hub is not None and now != self._round and self._fresh(now):
            self._round = now
            self._doomed = set()
            yield from super().decide(view)
        yield from self.base.decide(view)

    def _fresh(self, now: float) -> bool:
        return any(p.remaining_at == now for _, p in self.hub.running_predictions())

    def refresh(self, view: SchedulerView) -> bool:
        """The K running jobs predicted to overrun their pre-run prediction the most."""
        now = view.now
        cands = []
        for job, pred in self.hub.running_predictions():
            if (pred.remaining_at == now and now > job.start and job.process is not None
                    and job.kills < self.max_kills and pred.prerun > 0
                    and job not in self._doomed):
                cands.append((-(pred.run_hat / pred.prerun), job.id, job, pred))
        cands.sort(key=lambda c: (c[0], c[1]))
        m = [0] * self.amap.n
        m[0] = 1
        for k in range(self.amap.kill_slots):
            if k < len(cands):
                self.kill_jobs[k], self.preds[k] = cands[k][2], cands[k][3]
                m[1 + k] = 1
            else:
                self.kill_jobs[k], self.preds[k] = None, None
        self.mask[:] = m
        return bool(cands)

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Keep (end the round) or kill a candidate (and ask again)."""
        if action == 0:
            return True
        job = self.kill_jobs[action - 1]
        self._doomed.add(job)     # its interrupt is processed after this pass
        yield kill(job, "learned kill: run time badly underestimated", requeue=True)
        return False

    def kind_of(self, action: int) -> str:
        """``wait`` (keep) or ``kill``."""
        return "wait" if action == 0 else "kill"

    def rule_says(self, view: SchedulerView) -> list[bool]:
        """Per kill slot: whether the kill rule would kill that candidate now
        (:meth:`cosim.policies.kill.KillRule.says`, as ``POLICY@rnn+kill`` asks it)."""
        rule = self.rule
        return [job is not None and rule is not None and rule.says(view, job, pred)
                for job, pred in zip(self.kill_jobs, self.preds)]

    def rule_action(self, view: SchedulerView) -> int:
        """The rule's choice: the first candidate it would kill, else keep."""
        for k, yes in enumerate(self.rule_says(view)):
            if yes:
                return 1 + k
        return 0
