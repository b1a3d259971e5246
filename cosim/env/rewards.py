"""Rewards, one class each, chosen by name (``reward=`` in the environment).

Integral rewards are normalized by ``time_scale`` seconds:

- ``slowdown``: minus the integral over time of sum over jobs in the system
  of 1/max(estimate, tau): the episode return is minus the sum of estimated
  slowdowns (online slowdown over all jobs, thesis 4.1 and 4.6.3).
- ``slowdown_window``: the same over queued jobs only.
- ``bsld``: sparse, minus each job's bounded slowdown when it ends.
- ``completion``: minus the integral of the number of jobs in the system
  (sum of completion times, RLSchert eq. 10).
- ``dbf``: seed 000 eq. 2, ``-w1(1 - util) - w2 L/Lmax - w3 W/Wmax`` with
  running maxima, on each Wait or illegal action; 0 for a placement.
- ``capability`` (DRAS eq. 1) on each placement:
  ``w1 wait_i/max_wait + w2 procs_i/N + w3 used/N``; ``capacity`` (DRAS eq.
  2) each step: ``sum over queued jobs of -1/wait_j, divided by their count``.

With ``smdp_gamma`` set, integral rewards between decisions are discounted
by elapsed simulated time, ``gamma ** (dt / time_scale)`` (thesis eq. 2.18).

A reward is a :class:`cosim.actors.scheduler.SchedulerHooks` (it follows
jobs between decisions) with two more moments: :meth:`Reward.on_decision`,
when the agent's decision is about to be applied, and :meth:`Reward.collect`,
when the next decision point is reached. The step's reward is their sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.job import Job
from cosim.policy import START, Decision

__all__ = ["RewardParams", "Reward", "REWARDS", "make_reward"]


@dataclass(frozen=True)
class RewardParams:
    """Parameters every reward may read.

    Attributes:
        tau: bounded-slowdown bound (s).
        time_scale: seconds that normalize integral rewards (and the SMDP discount).
        smdp_gamma: discount per ``time_scale`` seconds, or None.
        weights: w1, w2, w3 of ``dbf`` and ``capability``.
    """

    tau: float = 10.0
    time_scale: float = 3600.0
    smdp_gamma: float | None = None
    weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)


class Reward(SchedulerHooks):
    """Base class: no reward. Subclasses override what they need."""

    name = ""

    def __init__(self, params: RewardParams):
        self.params = params
        self.scheduler: Scheduler | None = None

    def attach(self, scheduler: Scheduler) -> None:
        """Follow ``scheduler`` for one episode."""
        self.scheduler = scheduler

    def on_decision(self, decision: Decision) -> float:
        """Reward for the agent's decision, before it is applied."""
        return 0.0

    def collect(self, now: float) -> float:
        """Reward accumulated since the previous decision point."""
        return 0.0


class _IntegralReward(Reward):
    """Minus the integral over time of a rate that changes when jobs come and go."""

    queued_only = False

    def __init__(self, params: RewardParams):
        super().__init__(params)
        self.rate = 0.0
        self.acc = 0.0
        self.last = 0.0
        self.t0 = 0.0

    def weight(self, job: Job) -> float:
        """A job's contribution to the rate while it counts."""
        raise NotImplementedError

    def _advance(self, now: float) -> None:
        if now > self.last and self.rate:
            gamma = self.params.smdp_gamma
            if gamma is None:
                self.acc += self.rate * (now - self.last)
            else:
                # Exact integral of rate * gamma**((t - t0)/scale) over [last, now].
                k = -math.log(gamma) / self.params.time_scale
                self.acc += self.rate * (math.exp(-k * (self.last - self.t0))
                                         - math.exp(-k * (now - self.t0))) / k
        self.last = now

    def job_queued(self, job: Job) -> None:
        """A job joined the queue: it counts from now."""
        self._advance(self.scheduler.env.now)
        self.rate += self.weight(job)

    def job_started(self, job: Job) -> None:
        """A job started: it stops counting if only queued jobs count."""
        self._advance(self.scheduler.env.now)
        if self.queued_only:
            self.rate -= self.weight(job)

    def job_left(self, job: Job, completed: bool) -> None:
        """A job left the machine: it stops counting if running jobs count."""
        self._advance(self.scheduler.env.now)
        if not self.queued_only:
            self.rate -= self.weight(job)

    def collect(self, now: float) -> float:
        """Minus the integral since the previous decision point, in ``time_scale`` units."""
        self._advance(now)
        value, self.acc, self.t0 = self.acc, 0.0, now
        return -value / self.params.time_scale


class SlowdownReward(_IntegralReward):
    """``slowdown``: every job in the system weighs 1/max(estimate, tau)."""

    name = "slowdown"

    def weight(self, job: Job) -> float:
        """1 / max(estimate, tau)."""
        return 1.0 / max(job.estimate, self.params.tau)


class SlowdownWindowReward(SlowdownReward):
    """``slowdown_window``: as ``slowdown``, over queued jobs only."""

    name = "slowdown_window"
    queued_only = True


class CompletionReward(_IntegralReward):
    """``completion``: every job in the system weighs 1 (sum of completion times)."""

    name = "completion"

    def weight(self, job: Job) -> float:
        """1."""
        return 1.0


class BsldReward(Reward):
    """``bsld``: minus each job's bounded slowdown when it leaves the machine."""

    name = "bsld"

    def __init__(self, params: RewardParams):
        super().__init__(params)
        self.pending = 0.0

    def job_left(self, job: Job, completed: bool) -> None:
        """Charge the job's bounded slowdown."""
        now = self.scheduler.env.now
        run = now - job.start
        self.pending -= max(1.0, (now - job.submit) / max(self.params.tau, run))

    def collect(self, now: float) -> float:
        """What was charged since the previous decision point."""
        value, self.pending = self.pending, 0.0
        return value


class DbfReward(Reward):
    """``dbf`` (seed 000 eq. 2): utilization, queue length and waiting, on Wait."""

    name = "dbf"

    def __init__(self, params: RewardParams):
        super().__init__(params)
        self._lmax = 1.0
        self._wmax = 1.0

    def on_decision(self, decision: Decision) -> float:
        """0 for a placement; otherwise the penalty of the state now."""
        if decision.action == START:
            return 0.0
        sched = self.scheduler
        now = sched.env.now
        q = sched.queue
        cl = sched.cluster
        util = (cl.up_units - cl.free) / max(1, cl.up_units)
        length = q.count
        wait = float(np.sum(now - q.submit[q.slots()])) if q.count else 0.0
        self._lmax = max(self._lmax, length)
        self._wmax = max(self._wmax, wait)
        w1, w2, w3 = self.params.weights
        return -w1 * (1 - util) - w2 * length / self._lmax - w3 * wait / self._wmax


class CapabilityReward(Reward):
    """``capability`` (DRAS eq. 1): the placed job's wait and size, and utilization."""

    name = "capability"

    def on_decision(self, decision: Decision) -> float:
        """Reward of a placement (or of utilization alone for any other action)."""
        sched = self.scheduler
        now = sched.env.now
        cl = sched.cluster
        used = (cl.up_units - cl.free) / max(1, cl.capacity)
        w1, w2, w3 = self.params.weights
        if decision.action != START:
            return w3 * used
        q = sched.queue
        waits = now - q.submit[q.slots()]
        tmax = max(1.0, float(waits.max()))
        job = decision.job
        return (w1 * (now - job.submit) / tmax + w2 * job.procs / cl.capacity
                + w3 * (used + job.procs / cl.capacity))


class CapacityReward(Reward):
    """``capacity`` (DRAS eq. 2): minus the mean inverse wait of queued jobs."""

    name = "capacity"

    def on_decision(self, decision: Decision) -> float:
        """Reward of the state at the decision."""
        sched = self.scheduler
        q = sched.queue
        if not q.count:
            return 0.0
        waits = np.maximum(sched.env.now - q.submit[q.slots()], 1.0)
        return float(np.sum(-1.0 / waits) / q.count)


#: Reward classes by the name the environment's ``reward=`` takes.
REWARDS: dict[str, type[Reward]] = {cls.name: cls for cls in (
    SlowdownReward, SlowdownWindowReward, BsldReward, CompletionReward, DbfReward,
    CapabilityReward, CapacityReward)}


def make_reward(name: str, params: RewardParams) -> Reward:
    """A fresh reward called ``name`` (one of :data:`REWARDS`) for one episode."""
    return REWARDS[name](params)
