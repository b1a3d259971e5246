"""``slurm``: Slurm's multifactor priority with Slurm-style backfill, as one policy.

Priority (priority/multifactor, https://slurm.schedmd.com/priority_multifactor.html)::

    priority = PriorityWeightAge * age + PriorityWeightJobSize * size
             + PriorityWeightFairshare * fairshare
             + PriorityWeightPartition * partition + PriorityWeightQOS * qos

every factor in [0, 1]: ``age = min(wait / PriorityMaxAge, 1)``; ``size`` the
job's share of the machine ``p / N``, or with ``PriorityFavorSmall=YES``
``1 - (p - 1) / N`` (a one-unit job gets 1); with
``PriorityFlags=SMALL_RELATIVE_TO_TIME`` ``min(1, (p / N) / minutes)`` over its
estimate in minutes (at least 1), or 1 minus that with ``PriorityFavorSmall``; ``fairshare`` the classic
``2^(-UE/S)`` of :mod:`cosim.policies.fairshare` (shares equal, or a
scenario's ``shares``: sacctmgr's ``Fairshare=`` per account or user); ``partition`` and ``qos``
the job's label's factor over the largest (:mod:`cosim.policies.slurm_params`;
1 for every job without a mapping, so no effect). Higher runs first; ties go
by submit time, then arrival (Slurm: submit time, then job id). With every
weight 0 (Slurm's default) the order is first in, first out.

Each pass, where some queued job could start at all (else it is skipped):

1. the main scheduler: jobs start in priority order while the first fits;
2. the backfill scheduler (sched/backfill; slurm.conf(5) ``SchedulerParameters``),
   in cycles at most every ``bf_interval`` seconds, and only when something
   changed since the last cycle (a pass sooner asks to be woken when the next
   is due): in priority order, each of the next ``bf_max_job_test`` jobs starts now if
   it fits now for its whole estimate around the plans already made, else is
   planned at the earliest start that delays no plan made before it
   (higher priority), provided that start is within ``bf_window`` minutes;
   a job whose earliest start is beyond the window gets no plan. Jobs past
   ``bf_max_job_test`` start only now and only where they delay no plan.
   Times are planned in whole ``bf_resolution`` seconds from the pass's
   start (running jobs' expected ends and estimates rounded up).

``bf_max_job_test=1`` is EASY backfilling (one reservation, for the first
job that does not fit) and an unlimited depth with a window longer than any
wait is conservative backfilling (every job planned), with
``bf_resolution=1`` and ``bf_interval=0`` (a cycle at every pass) on
whole-second times (``tests/test_slurm_policy.py`` compares whole schedules).
Plans are made afresh at every cycle, as Slurm's backfill cycle does; they are the policy's own and are not promised to the
scheduler (no reservation decisions).

Speed: a cycle plans only as far as a start now depends on it (see
:func:`_backfill`): a job can start now only if it fits now, for its
estimate, in the profile with the plans made so far, and every plan only
takes room, so one vectorized test over the rest of the queue finds the next
job that may start; the jobs before it are planned lazily, in order, only
until it is blocked or provably is not, and once no later job passes the
test the cycle ends without planning the rest (their plans could change no
start now). The cycle's starts are exactly those of the full plan
(:func:`slurm_plan`; the property tests check every cycle against it).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from operator import attrgetter, itemgetter

import numpy as np

from cosim.decisions import START, Decision, SchedulerView
from cosim.job import Mode
from cosim.kernel import timer
from cosim.policies.fairshare import FairShare
from cosim.policies.profile import Profile
from cosim.policies.slurm_params import RESET_PERIODS, SlurmParams, parse_slurm_params

__all__ = ["SlurmPolicy", "make_slurm_policy", "slurm_plan"]

_READY, _BACKFILLED = Mode.READY, Mode.BACKFILLED
_NAN = math.nan
_new = tuple.__new__     # a start Decision without the NamedTuple constructor's frame
_first, _job, _procs = itemgetter(0), itemgetter(2), attrgetter("procs")
#: Up to this many running jobs the cycle's profile is built in plain Python.
_FEW_ENDS = 64
#: Up to this many pending jobs a candidate's safety is summed in plain Python.
_FEW_PENDING = 16
#: Workload feature columns read for the partition and QOS factors, first found wins.
PARTITION_COLUMNS = ("partition", "queue")
QOS_COLUMNS = ("qos",)


def _label_factors(workload, columns: tuple[str, ...], mapping) -> np.ndarray | None:
    """Per workload row, its label's factor over the largest; None without a
    column or a mapping (then every job's factor is 1)."""
    if not mapping:
        return None
    column = next((workload.features[c] for c in columns if c in workload.features), None)
    if column is None:
        return None
    table = dict(mapping)
    top = max(table.values()) or 1.0
    labels = np.asarray(column).astype(str)
    uniq, inv = np.unique(labels, return_inverse=True)
    per = np.array([table.get(u, 0.0) / top for u in uniq.tolist()])
    return per[inv] if len(per) else np.zeros(len(labels))


class _RowsBySlot:
    """The workload row of each queue slot, filled once per job (the queue's job
    list only grows until compaction replaces it)."""

    def __init__(self):
        self.jobs, self.filled = None, 0
        self.rows = np.empty(0, dtype=np.int64)

    def of(self, q, slots: np.ndarray) -> np.ndarray:
        jobs = q.jobs
        if jobs is not self.jobs:
            self.jobs, self.filled = jobs, 0
        n = len(jobs)
        if n > self.filled:
            if n > len(self.rows):
                grown = np.empty(max(2 * n, 256), dtype=np.int64)
                grown[:self.filled] = self.rows[:self.filled]
                self.rows = grown
            self.rows[self.filled:n] = [-1 if j is None else j.index
                                        for j in jobs[self.filled:n]]
            self.filled = n
        return self.rows[slots]


def _gather(values: np.ndarray | None, rows: np.ndarray) -> np.ndarray | float:
    if values is None:
        return 1.0
    ok = (rows >= 0) & (rows < len(values))
    out = np.ones(len(rows))
    out[ok] = values[rows[ok]]
    return out


def _fits_now(profile: Profile, procs: np.ndarray, mem: np.ndarray | None,
              dur: np.ndarray) -> np.ndarray:
    """Which jobs fit at the profile's start for their whole (rounded) duration."""
    times = np.asarray(profile.times)
    idx = np.searchsorted(times, dur, "left") - 1     # the last segment a job overlaps
    np.maximum(idx, 0, out=idx)
    ok = procs <= np.minimum.accumulate(np.asarray(profile.units))[idx]
    if mem is not None:
        ok &= mem <= np.minimum.accumulate(np.asarray(profile.mem))[idx]
    return ok


class _Units:
    """Free units over time, without memory: :class:`Profile`'s ``earliest`` and
    ``take`` for a cycle's plans, with nothing to do for memory (half the work
    of the profile where the cluster does not model it)."""

    __slots__ = ("times", "units")

    def __init__(self, times: list[float], units: list[int]):
        self.times, self.units = times, units

    def earliest(self, procs: int, mem: float, duration: float,
                 after: float | None = None) -> float:
        """Earliest start (not before ``after``) with ``procs`` free for ``duration``."""
        times, units = self.times, self.units
        n = len(times)
        if after is not None and after > times[0]:
            k = bisect_right(times, after) - 1
        else:
            k, after = 0, times[0]
        while k < n:
            if units[k] >= procs:
                t0 = times[k] if times[k] > after else after
                end = t0 + duration
                m = k + 1
                while m < n and times[m] < end:
                    if units[m] < procs:
                        break
                    m += 1
                else:
                    return t0
                k = m + 1
            else:
                k += 1
        return math.inf

    def _split(self, t: float, lo: int = 0) -> int:
        times = self.times
        k = bisect_left(times, t, lo)
        if k == len(times) or times[k] != t:
            times.insert(k, t)
            self.units.insert(k, self.units[k - 1])
        return k

    def take(self, t: float, duration: float, procs: int, mem: float = 0.0) -> None:
        """Occupy ``procs`` over ``[t, t + duration)``."""
        if t == math.inf or duration <= 0:
            return
        a = self._split(t)
        b = self._split(t + duration, a)
        units = self.units
        units[a:b] = [u - procs for u in units[a:b]]


class _Base:
    """The running jobs' profile in time relative to now, ends rounded up to ``res``:
    free units (and memory) only grow in it, so the first segment with enough
    free is a lower bound on any job's start once plans are added (the scans
    start there). Built with numpy from the sorted ends."""

    __slots__ = ("times", "units", "mem", "profile")

    def __init__(self, view: SchedulerView, res: float):
        now = view.now
        cl = view.cluster
        with_mem = cl.free_mem != math.inf and not cl.node_granular
        ends = view.ends()
        times, units, mem = [0.0], [cl.free], [cl.free_mem]
        if len(ends) > _FEW_ENDS:
            # The ends' offsets from now, rounded up (0 for those due already),
            # and the free units after each group of equal offsets.
            rel = np.ceil((np.fromiter(map(_first, ends), np.float64, len(ends)) - now)
                          / res) * res
            np.maximum(rel, 0.0, out=rel)
            last = np.flatnonzero(np.append(rel[1:] != rel[:-1], True))
            cum = np.cumsum(np.fromiter(map(_procs, map(_job, ends)), np.int64,
                                        len(ends)))[last] + cl.free
            first = 1 if rel[0] == 0.0 else 0      # jobs due now free units at once
            if first:
                units[0] = int(cum[0])
            times += rel[last[first:]].tolist()
            units += cum[first:].tolist()
            if with_mem:
                cm = np.cumsum([e[2].mem for e in ends])[last] + cl.free_mem
                if first:
                    mem[0] = float(cm[0])
                mem += cm[first:].tolist()
            else:
                mem *= len(times)
        else:                      # the same, one by one (numpy's calls cost more here)
            ceil = math.ceil
            last_t = 0.0
            for t, _, job in ends:
                t = ceil((t - now) / res) * res if t > now else 0.0
                if t == last_t:
                    units[-1] += job.procs
                    if with_mem:
                        mem[-1] += job.mem
                else:
                    times.append(t)
                    units.append(units[-1] + job.procs)
                    mem.append(mem[-1] + job.mem if with_mem else mem[-1])
                    last_t = t
        self.times, self.units = times, units
        self.mem = mem if with_mem else None
        if cl.free_mem != math.inf:
            profile = Profile.__new__(Profile)
            profile.times, profile.units, profile.mem = times[:], units[:], mem[:]
        else:
            profile = _Units(times[:], units[:])
        self.profile = profile

    def lower_bound(self, procs: int, mem: float) -> float:
        """The earliest time the running jobs alone leave ``procs`` (and ``mem``) free."""
        k = bisect_left(self.units, procs)
        if self.mem is not None:
            k = max(k, bisect_left(self.mem, mem))
        return self.times[k] if k < len(self.times) else math.inf


def _earliest(base: _Base, profile: Profile, procs: int, mem: float, d: float,
              seen: dict | None = None) -> float:
    """The earliest start of a job in ``profile`` (the running jobs' lower bound first).

    ``seen``: the last start found in this pass per job shape (units, memory,
    duration): the profile only loses room as the pass goes, so a job of a
    shape met before starts no earlier (job arrays: runs of equal jobs)."""
    after = base.lower_bound(procs, mem)
    if after == math.inf:
        return math.inf
    if seen is not None:
        key = (procs, mem, d)
        before = seen.get(key, 0.0)
        if before > after:
            after = before
        t = profile.earliest(procs, mem, d, after=after if after > 0.0 else None)
        seen[key] = t
        return t
    return profile.earliest(procs, mem, d, after=after if after > 0.0 else None)


def _still_fits(profile: Profile, procs: int, mem: float, a: float, b: float) -> bool:
    """Whether ``procs`` (and ``mem``) stay free in ``profile`` over ``[a, b)``
    (a job that fitted over a longer span before a plan took ``[a, b)`` of it)."""
    times = profile.times
    i, k = bisect_left(times, a), bisect_left(times, b)
    return min(profile.units[i:k]) >= procs and (mem <= 0 or min(profile.mem[i:k]) >= mem)


def _backfill(view: SchedulerView, rest: np.ndarray, p: SlurmParams) -> Iterator[Decision]:
    """Backfill over ``rest`` (slots in priority order, the first does not fit now).

    Plans are made lazily, always in priority order (so each is the plan the
    order gives), and only as far as a start now depends on them. A job that
    cannot start now waits, unplanned, in ``pending``. For the next job that
    fits now around the plans made (a candidate):

    - it is blocked as soon as the plans made block it (plans only take room,
      so the rest cannot unblock it); it joins the pending jobs;
    - it starts without any plan made (without memory) when the room it
      leaves over its duration holds every pending job whose lower bound (when
      the running jobs alone leave it room: no plan starts earlier) comes
      before its end: only those can overlap it, and each then finds the same
      room with it started as without, so their plans do not change;
    - else the pending jobs are planned one by one until it is blocked or
      they all are (then it starts).

    The pass ends when no job fits now around the plans made; the plans left
    pending could change no start now.
    """
    q, cl = view.queue, view.cluster
    res = float(p.bf_resolution)
    window = p.bf_window * 60.0
    depth = p.bf_max_job_test
    base = _Base(view, res)
    profile = base.profile
    procs = q.procs[rest]
    with_mem = cl.free_mem != math.inf
    mem = q.mem[rest] if with_mem else None
    dur = np.ceil(q.estimate[rest] / res) * res
    jobs = q.jobs
    n = len(rest)
    slots, durs = rest.tolist(), dur.tolist()      # read one by one below: lists are faster
    slot_procs = procs.tolist()
    lower = None                      # the pending jobs' lower bounds, once needed
    pending: list[int] = []           # positions in rest within the depth, in order
    done = 0                          # pending[:done] are planned
    seen: dict = {}                   # the last start found per job shape
    pos = 0
    while pos < n and profile.units[0] > 0:
        ok = _fits_now(profile, procs[pos:], None if mem is None else mem[pos:], dur[pos:])
        hits = ok.nonzero()[0]
        if not len(hits):
            return
        c = pos + int(hits[0])
        stop = min(c, depth)
        if stop > pos:                      # they cannot start now: to be planned
            pending.extend(range(pos, stop))
        job = jobs[slots[c]]
        job_mem = 0.0 if mem is None else job.mem
        d = durs[c]
        pos = c + 1
        if done < len(pending):
            safe = False
            if mem is None:
                room = min(profile.units[:bisect_left(profile.times, d)]) - job.procs
                if len(pending) - done <= _FEW_PENDING:      # one by one: cheaper
                    sizes = [slot_procs[k] for k in pending[done:]]
                    need = sum(x for x in sizes if base.lower_bound(x, 0.0) < d)
                else:
                    if lower is None:
                        ends = np.append(base.times, math.inf)
                        lower = ends[np.searchsorted(np.asarray(base.units), procs, "left")]
                    waiting = np.array(pending[done:])
                    need = int(procs[waiting][lower[waiting] < d].sum())
                safe = need <= room
            if not safe:
                blocked = False
                while done < len(pending):
                    k = pending[done]
                    done += 1
                    other = jobs[slots[k]]
                    dk = durs[k]
                    t = _earliest(base, profile, other.procs, other.mem, dk, seen)
                    if t <= window:
                        profile.take(t, dk, other.procs, other.mem)
                        if t < d and not _still_fits(profile, job.procs, job_mem, t,
                                                     min(t + dk, d)):
                            blocked = True
                            break
                if blocked:
                    if c < depth:
                        pending.append(c)
                    continue
        profile.take(0.0, d, job.procs, job.mem)
        yield _new(Decision, (START, job, _BACKFILLED, "backfill: delays no plan", _NAN, True))


def slurm_plan(now: float, free: int, ends: list, jobs: list, params: SlurmParams,
               free_mem: float = math.inf, node_granular: bool = False) -> list[float | None]:
    """The full backfill plan of one pass, for reading and testing: per job of
    ``jobs`` (in priority order), its planned start (absolute time; ``now``: it
    starts now) or None (no plan: beyond ``bf_window``, or past
    ``bf_max_job_test`` and not starting now). ``ends``: ``(expected_end, _,
    job)`` of running jobs, sorted. The policy's passes start exactly the jobs
    planned at ``now`` here, with the main scheduler's starts counted in.
    """
    res = float(params.bf_resolution)
    window = params.bf_window * 60.0
    rel = [(math.ceil((t - now) / res) * res if t > now else 0.0, 0, j) for t, _, j in ends]
    profile = Profile(0.0, free, free_mem, rel, node_granular)
    out: list[float | None] = []
    blocked = False
    tested = 0
    for job in jobs:
        d = math.ceil(job.estimate / res) * res
        t = profile.earliest(job.procs, job.mem, d)
        if not blocked and t == 0.0:
            profile.take(0.0, d, job.procs, job.mem)    # the main scheduler's start
            out.append(now)
            continue
        blocked = True
        within = tested < params.bf_max_job_test
        tested += 1
        if t == 0.0 or (within and t <= window):
            profile.take(t, d, job.procs, job.mem)
            out.append(now + t)
        else:
            out.append(None)
    return out


class SlurmPolicy:
    """Slurm's multifactor priority with its backfill (see the module docstring).

    Args:
        params: the knobs (:class:`cosim.policies.slurm_params.SlurmParams`).
    """

    yields_events = False
    static_key = None

    def __init__(self, params: SlurmParams | None = None):
        self.params = params or SlurmParams()
        self.name = self.params.policy_name()
        w = self.params.weights
        self._ordered = any(w)
        self._rows = _RowsBySlot()
        self._fairshare: FairShare | None = None
        self._partition = self._qos = None
        self._started: list = []
        self._reset_cycles(None)

    def _reset_cycles(self, scheduler) -> None:
        """Backfill cycles (``bf_interval``): none yet. Without a scheduler to
        wake (a policy used outside a model) every pass is a cycle."""
        self._scheduler = scheduler
        self._interval = float(self.params.bf_interval) if scheduler is not None else 0.0
        self._last_cycle = -math.inf
        self._pending = False        # something changed since the last cycle
        self._armed = math.nan       # the time of the wake-up asked for the next cycle

    def attach_model(self, scheduler, workload) -> None:
        """Bind to the workload a model runs: fair-share associations, partition
        and QOS labels (called by :func:`cosim.model.build`)."""
        p = self.params
        self._rows = _RowsBySlot()
        self._started = []
        self._reset_cycles(scheduler)
        self._fairshare = None
        if p.PriorityWeightFairshare or p.shares:     # shares are checked even unweighted
            fairshare = FairShare(workload.user, workload.features.get("account"),
                                  p.PriorityDecayHalfLife,
                                  RESET_PERIODS[p.PriorityUsageResetPeriod], dict(p.shares))
            self._fairshare = fairshare if p.PriorityWeightFairshare else None
        self._partition = _label_factors(workload, PARTITION_COLUMNS, p.partitions) \
            if p.PriorityWeightPartition else None
        self._qos = _label_factors(workload, QOS_COLUMNS, p.qos) if p.PriorityWeightQOS else None

    def priority(self, view: SchedulerView, slots: np.ndarray) -> np.ndarray:
        """Slurm's priority of the jobs in ``slots`` now (higher runs first)."""
        q = view.queue
        p = self.params
        now = view.now
        wa, wj, wf, wp, wq = p.weights
        out = np.zeros(len(slots))
        if wa:
            out += wa * np.minimum(np.maximum(now - q.submit[slots], 0.0) / p.PriorityMaxAge, 1.0)
        if wj:
            n = float(view.cluster.capacity)
            procs = q.procs[slots].astype(np.float64)
            if p.PriorityFlags == "SMALL_RELATIVE_TO_TIME":
                minutes = np.maximum(q.estimate[slots] / 60.0, 1.0)
                size = np.minimum(procs / n / minutes, 1.0)
                out += wj * ((1.0 - size) if p.PriorityFavorSmall else size)
            else:
                out += wj * ((1.0 - (procs - 1.0) / n) if p.PriorityFavorSmall else procs / n)
        if wf or wp or wq:
            rows = self._rows.of(q, slots)
            if wf:
                fs = self._fairshare
                if fs is None:        # not attached to a model: no usage known
                    out += wf
                else:
                    fs.observe(view.running, now, self._started)
                    self._started = []
                    out += wf * fs.factor_of_rows(rows, now)
            if wp:
                out += wp * _gather(self._partition, rows)
            if wq:
                out += wq * _gather(self._qos, rows)
        return out

    def order(self, view: SchedulerView) -> np.ndarray:
        """Queue slots in Slurm's evaluation order: priority, submit time, arrival."""
        q = view.queue
        slots = q.slots()
        if not self._ordered:
            return slots[np.lexsort((slots, q.submit[slots]))]
        return slots[np.lexsort((slots, q.submit[slots], -self.priority(view, slots)))]

    def _is_cycle(self, now: float) -> bool:
        """Whether the backfill scheduler runs a cycle at this pass (an event).

        sched/backfill's agent sleeps ``bf_interval`` between cycles and skips
        one when nothing changed since the last: a cycle runs at an event once
        ``bf_interval`` has passed since the last cycle; an event sooner waits
        for the cycle due then (a wake-up is asked for where it could start a
        job, see :meth:`_decide`; where it could not, the cycle that ran for it
        is only counted, here, at the next event).
        """
        if not self._interval:
            return True
        if self._cycle_due(now):
            self._last_cycle = now
            self._pending = False
            return True
        self._pending = True
        return False

    def _cycle_due(self, now: float) -> bool:
        """Whether a backfill cycle is due now (first counting the cycle that
        pending changes had, unseen, once its time passed)."""
        interval = self._interval
        due = self._last_cycle + interval
        if self._pending and now > due + 1e-9:
            self._last_cycle = due       # the cycle the changes waited for ran then
            self._pending = False
            due += interval
        return now + 1e-9 >= due

    def pass_is_idle(self, view: SchedulerView) -> bool:
        """Whether a pass now would decide nothing (the scheduler then skips it).

        Asked only for an arrival that does not fit now or an end after which
        no queued job fits: between backfill cycles, in submit order (every
        weight 0), the main scheduler's head still does not fit, so the pass
        would only note the change and ask for the cycle due, as done here.
        """
        if not self._interval or self._ordered or self._cycle_due(view.now):
            return False
        self._pending = True
        cl = view.cluster
        if view.queue.count and cl.free > 0 and (cl.free_mem != math.inf
                                                 or view.queue.smallest <= cl.free):
            self._wake_for_cycle()
        return True

    def _wake_for_cycle(self) -> None:
        """Ask the scheduler for a pass when the next backfill cycle is due."""
        due = self._last_cycle + self._interval
        if self._armed != due:
            self._armed = due
            scheduler = self._scheduler
            timer(scheduler.env, max(due - scheduler.env.now, 0.0), lambda _c: scheduler.wake())

    def decide(self, view: SchedulerView) -> Iterator[Decision]:
        """Decisions for this pass (a generator: each is applied before the next)."""
        q, cl = view.queue, view.cluster
        cycle = self._is_cycle(view.now)
        if not q.count or cl.free <= 0 or (cl.free_mem == math.inf and q.smallest > cl.free):
            return ()       # no queued job fits in what is free: nothing can start
        return self._decide(view, cycle)

    def _decide(self, view: SchedulerView, cycle: bool) -> Iterator[Decision]:
        q, cl = view.queue, view.cluster
        order = self.order(view)
        jobs = q.jobs
        track = self._fairshare is not None
        i, n = 0, len(order)
        while i < n:          # the main scheduler: strict priority order
            job = jobs[order[i]]
            if job.procs > cl.free or job.mem > cl.free_mem:
                break
            yield _new(Decision, (START, job, _READY, "fits at head", _NAN, True))
            if track:
                self._started.append(job)
            i += 1
        if i == n or cl.free <= 0 or (cl.free_mem == math.inf and q.smallest > cl.free):
            return
        if not cycle:
            self._wake_for_cycle()
            return
        for d in _backfill(view, order[i:], self.params):
            yield d
            if track:
                self._started.append(d.job)


def make_slurm_policy(text: str = "", scenario: Mapping | None = None, *,
                      where: str = "policy") -> SlurmPolicy:
    """The ``slurm`` policy of a name's parameters (``text``, after ``slurm:``)
    over a scenario's ``scheduler.slurm`` mapping (Slurm's defaults under both)."""
    base = parse_slurm_params(scenario, where="scheduler.slurm") if scenario else None
    return SlurmPolicy(parse_slurm_params(text, base=base, where=where, name=True))
