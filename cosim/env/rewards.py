"""Rewards, one class each, chosen by name (``reward=`` in the environment).

Integral rewards are normalized by ``time_scale`` seconds. Every reward
also charges the work an attempt loses when it does not complete (a kill, a
walltime kill, a node failure): minus its core-seconds over ``capacity x
time_scale``, so killing is never free.

- ``slowdown``: minus the integral over time of sum over jobs in the system
  of 1/max(estimate, tau): the episode return is minus the sum of estimated
  slowdowns (online slowdown over all jobs, thesis 4.1 and 4.6.3). With
  predictions on, the estimate is the prediction from the moment it is set
  (RLSchert eq. 9), not the request the job was queued with.
- ``slowdown_queued``: the same over queued jobs only (waiting time weighted
  by 1/max(estimate, tau)). ``slowdown_window``, its earlier name, still
  works: it always summed over the whole queue, not the agent's window.
- ``bsld``: sparse, minus each job's bounded slowdown when it finishes
  (completed or timed out; not when an attempt is killed and requeued).
- ``completion``: minus the integral of the number of jobs in the system
  (sum of completion times, RLSchert eq. 10).
- ``dbf``: seed 000 eq. 2, ``-w1(1 - util) - w2 L/Lmax - w3 W/Wmax`` with
  running maxima, charged on every Fwd (DBF's schedule cycling); 0 for a
  placement. It does not rank schedules by slowdown (see below).
- ``capability`` (DRAS eq. 1, made time-consistent): its three aims as
  rewards over time. Size: each job's first start earns ``w2 procs_i/N``
  (earlier is worth more once discounted). Starvation: minus w1 times the
  integral of the oldest queued job's wait (hours, over hours). Utilization:
  minus w3 times the integral of the idle fraction while jobs wait (hours).
  DRAS's per-instance form, ``w1 wait_i/max_wait + w2 n_i/N + w3
  N_used/N``, pays in an environment where the agent may wait: the
  relative wait ``wait_i/max_wait`` is largest when everyone has waited
  (always-Wait collected 45.6 in wait and size shares on a 128-job episode
  against 7.0 for SJF with EASY), and ``N_used/N`` is paid again at every
  extra instance.
- ``capacity`` (DRAS eq. 2's objective): minus the integral of the number of
  queued jobs (minus the total wait, in ``time_scale`` units). DRAS's
  per-instance ``sum over queued jobs of -1/wait_j, divided by their count``
  grows as jobs wait longer, so with a Wait action always-Wait scored best
  (issue 10: -6.3 against -58.8 for first-legal, with a mean bsld of 18,467).

Which rank schedules as bounded slowdown does: ``bsld``, ``slowdown``,
``slowdown_queued``, ``completion`` and ``capacity`` order SAF+EASY, SJF+EASY,
random, largest-first, FCFS+EASY and always-Wait as their mean bsld does
(``tests/test_rewards.py``). ``dbf`` and ``capability`` rank otherwise by
design: ``dbf`` is charged per Fwd, not per second, and normalized by
running maxima, so a policy that lets the queue grow early pays less later
(largest-first and FCFS score above SJF and SAF); ``capability`` values
starvation and size, so FCFS scores best. Use them to reproduce their
papers, not to learn low slowdown.

With ``smdp_gamma`` set, integral rewards between decisions are discounted
by elapsed simulated time, ``gamma ** (dt / time_scale)`` (thesis eq. 2.18).

A reward is a :class:`cosim.actors.scheduler.SchedulerHooks` (it follows
jobs between decisions) with two more moments: :meth:`Reward.on_action`,
when the agent has chosen (before the choice is applied), and
:meth:`Reward.collect`, when the next decision point is reached. The step's
reward is their sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosim import metrics
from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.job import Job, Outcome

__all__ = ["RewardParams", "Reward", "REWARDS", "make_reward"]


@dataclass(frozen=True)
class RewardParams:
    """Parameters every reward may read.

    Attributes:
        tau: bounded-slowdown bound (s).
        time_scale: seconds that normalize integral rewards (and the SMDP discount).
        smdp_gamma: discount per ``time_scale`` seconds, or None.
        weights: w1, w2, w3 of ``dbf`` and ``capability``.
        capacity: schedulable units N.
        waste_weight: weight of the lost-work charge of attempts that do not complete.
    """

    tau: float = 10.0
    time_scale: float = 3600.0
    smdp_gamma: float | None = None
    weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    capacity: int = 1
    waste_weight: float = 1.0


class Reward(SchedulerHooks):
    """Base class: only the lost-work charge. Subclasses add their objective."""

    name = ""

    def __init__(self, params: RewardParams):
        self.params = params
        self.scheduler: Scheduler | None = None
        self.pending = 0.0

    def attach(self, scheduler: Scheduler) -> None:
        """Follow ``scheduler`` for one episode."""
        self.scheduler = scheduler

    def job_left(self, job: Job, completed: bool) -> None:
        """Charge the work of an attempt that did not complete."""
        if not completed and self.params.waste_weight:
            p = self.params
            lost = (self.scheduler.env.now - job.start) * job.procs
            self.pending -= p.waste_weight * lost / (p.capacity * p.time_scale)

    def on_action(self, kind: str) -> float:
        """Reward for the agent's choice (``start``, ``wait``, ``kill``, ``select``, ...)."""
        return 0.0

    def accrued(self, now: float) -> float:
        """Reward accumulated over time since the previous decision point."""
        return 0.0

    def collect(self, now: float) -> float:
        """Everything earned since the previous decision point."""
        value = self.accrued(now) + self.pending
        self.pending = 0.0
        return value


class _IntegralReward(Reward):
    """Minus the integral over time of a rate that changes when jobs come and go."""

    queued_only = False
    estimate_weighted = False   # whether :meth:`weight` reads the job's estimate

    def __init__(self, params: RewardParams):
        super().__init__(params)
        self.rate = 0.0
        self.acc = 0.0
        self.last = 0.0
        self.t0 = 0.0
        self._w: dict[Job, float] = {}   # each counted job's weight, as it was added

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
        w = self._w[job] = self.weight(job)
        self.rate += w

    def prepare(self, view):
        """Re-weigh queued jobs whose estimate a prediction just changed (RLSchert eq. 9).

        Hooks prepare in the order they were added and the prediction hub is
        added first, so this runs after it, at the same simulated time: the
        new weight counts from the moment the prediction is known. A changed
        estimate always sets ``view.surprise``; without one nothing is scanned.
        """
        if self.estimate_weighted and view.surprise:
            q = view.queue
            if q.count:
                w_of = self._w
                now = self.scheduler.env.now
                for job in q.live_jobs():
                    old = w_of.get(job)
                    if old is not None:
                        w = self.weight(job)
                        if w != old:
                            self._advance(now)
                            w_of[job] = w
                            self.rate += w - old
        yield from ()

    def job_started(self, job: Job) -> None:
        """A job started: it stops counting if only queued jobs count."""
        self._advance(self.scheduler.env.now)
        if self.queued_only:
            # The weight it was added with: estimates may change meanwhile (predictions).
            self.rate -= self._w.pop(job)

    def job_left(self, job: Job, completed: bool) -> None:
        """A job left the machine: it stops counting if running jobs count."""
        super().job_left(job, completed)
        self._advance(self.scheduler.env.now)
        if not self.queued_only:
            self.rate -= self._w.pop(job)

    def accrued(self, now: float) -> float:
        """Minus the integral since the previous decision point, in ``time_scale`` units."""
        self._advance(now)
        value, self.acc, self.t0 = self.acc, 0.0, now
        return -value / self.params.time_scale


class SlowdownReward(_IntegralReward):
    """``slowdown``: every job in the system weighs 1/max(estimate, tau)."""

    name = "slowdown"
    estimate_weighted = True

    def weight(self, job: Job) -> float:
        """1 / max(estimate, tau)."""
        return 1.0 / max(job.estimate, self.params.tau)


class SlowdownQueuedReward(SlowdownReward):
    """``slowdown_queued``: as ``slowdown``, over queued jobs only."""

    name = "slowdown_queued"
    queued_only = True


class CompletionReward(_IntegralReward):
    """``completion``: every job in the system weighs 1 (sum of completion times)."""

    name = "completion"

    def weight(self, job: Job) -> float:
        """1."""
        return 1.0


class CapacityReward(_IntegralReward):
    """``capacity``: every queued job weighs 1 (minus the total wait, DRAS eq. 2's objective)."""

    name = "capacity"
    queued_only = True

    def weight(self, job: Job) -> float:
        """1."""
        return 1.0


class BsldReward(Reward):
    """``bsld``: minus each job's bounded slowdown when it finishes."""

    name = "bsld"

    def job_done(self, job: Job) -> None:
        """Charge the bounded slowdown of a completed or timed-out job."""
        if job.outcome in (Outcome.COMPLETED, Outcome.TIMEOUT):
            self.pending -= float(metrics.bsld(job.end - job.submit, job.end - job.start,
                                               self.params.tau))


class DbfReward(Reward):
    """``dbf`` (seed 000 eq. 2): utilization, queue length and waiting, on each Fwd.

    The paper's own measure, kept as published: charged per Fwd rather than
    per second and normalized by running maxima, it ranks schedules otherwise
    than bounded slowdown does (largest-first above SAF+EASY; see the module
    docstring), by design.
    """

    name = "dbf"

    def __init__(self, params: RewardParams):
        super().__init__(params)
        self._lmax = 1.0
        self._wmax = 1.0

    def on_action(self, kind: str) -> float:
        """The penalty of the state now for a Fwd; 0 for anything else."""
        if kind != "wait":
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
    """``capability`` (DRAS eq. 1, time-consistent; see the module docstring)."""

    name = "capability"

    def __init__(self, params: RewardParams):
        super().__init__(params)
        self.idle_acc = 0.0      # integral of the idle fraction while jobs wait (s)
        self.old_acc = 0.0       # integral of the oldest queued job's wait (s^2)
        self.idle_rate = 0.0     # idle fraction while jobs wait, as of the last change
        self.oldest = math.nan   # submit time of the oldest queued job, as of the last change
        self.last = 0.0

    def _advance(self, now: float) -> None:
        t0 = self.last
        if now > t0:
            self.idle_acc += self.idle_rate * (now - t0)
            s0 = self.oldest
            if s0 == s0:
                # exact integral of (t - s0) over [t0, now]
                self.old_acc += (now - t0) * (0.5 * (t0 + now) - s0)
            self.last = now

    def _change(self) -> None:
        """Account up to now at the old rates, then take the new state."""
        sched = self.scheduler
        self._advance(sched.env.now)
        q = sched.queue
        cl = sched.cluster
        if q.count:
            self.idle_rate = cl.free / max(1, cl.capacity)
            self.oldest = q.first().submit
        else:
            self.idle_rate, self.oldest = 0.0, math.nan

    def job_queued(self, job: Job) -> None:
        """The queue changed."""
        self._change()

    def job_started(self, job: Job) -> None:
        """A first start earns its size share."""
        self._change()
        if job.attempts == 1:    # a restarted job earned its start already
            self.pending += self.params.weights[1] * job.procs / self.scheduler.cluster.capacity

    def job_left(self, job: Job, completed: bool) -> None:
        """Resources came back (and lost work is charged)."""
        super().job_left(job, completed)
        self._change()

    def accrued(self, now: float) -> float:
        """Minus the starvation and idle costs since the previous decision point."""
        self._advance(now)
        w1, _, w3 = self.params.weights
        ts = self.params.time_scale
        value = -(w1 * self.old_acc / (ts * ts) + w3 * self.idle_acc / ts)
        self.old_acc = self.idle_acc = 0.0
        return value


#: Reward classes by the name the environment's ``reward=`` takes.
REWARDS: dict[str, type[Reward]] = {cls.name: cls for cls in (
    SlowdownReward, SlowdownQueuedReward, BsldReward, CompletionReward, DbfReward,
    CapabilityReward, CapacityReward)}


def make_reward(name: str, params: RewardParams) -> Reward:
    """A fresh reward called ``name`` (one of :data:`REWARDS`) for one episode."""
    return REWARDS[name](params)
