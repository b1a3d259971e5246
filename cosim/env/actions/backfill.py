"""The ``backfill`` action model (a learned backfilling order over an EASY base); see :mod:`cosim.env.actions`.

RLBackfilling's idea (the DIR-LAB follow-up to RLScheduler, as summarized in
issue 22): a heuristic orders the queue and keeps EASY's reservation for the
first job that does not fit, and a learned agent decides which of the jobs
EASY may start around that reservation goes first, instead of EASY's fixed
"in the heuristic's order". With inexact user estimates this is where EASY
leaves the most room: a job that ends before the shadow time by its estimate
may be a poor pick when its estimate is far too long, and a job that takes
the extra cores may block a better one.

The agent never changes what EASY protects: every candidate is legal under
EASY's own test (it fits now, and ends before the head's shadow time by its
estimate or uses only the extra units), recomputed after each start, so the
reservation is kept whatever it picks. :class:`BackfillEncoder` is the
observation made for it (one row per candidate slot and one for stop).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import simpy
from gymnasium import spaces

from cosim.decisions import START, Decision, SchedulerView
from cosim.env.actions.base import ActionMap, AgentPolicy
from cosim.errors import ScenarioError
from cosim.job import Job, Mode

__all__ = ["BackfillActions", "BackfillEncoder", "make_backfill_model", "DEFAULT_CANDIDATES",
           "BACKFILL_FEATURES"]

#: Candidate slots by default (most passes have fewer candidates).
DEFAULT_CANDIDATES = 16

_EMPTY = np.empty(0, dtype=np.int64)


class BackfillActions(AgentPolicy):
    """``backfill``: the base policy's head and reservation, the agent's backfilling order.

    At every decision point the base policy (a heuristic with EASY, or a
    ``learned:DIR`` priority with EASY) runs its pass up to its backfilling:
    it starts the jobs at the head of its order that fit and reserves for the
    first that does not (its shadow time and extra units exactly as EASY
    computes them). Then, instead of EASY's fixed order, the agent is asked
    repeatedly:

    - ``0 .. N-1``: start the candidate in slot i. The slots hold the jobs EASY
      may backfill now, in the base's own backfill order (slot 0 is the job
      EASY itself would start next);
    - ``N`` (the Wait index): stop backfilling for this pass; the next pass
      comes at the next arrival or end.

    After each start the candidates are recomputed under EASY's rules (what
    is free and the extra units shrink; the shadow time stands), so a
    reservation is never broken by the agent's choices. The agent is not
    asked when no candidate is legal; when stop is illegal and one candidate
    is left it starts without asking. Stop is illegal when no event is left
    to come (nothing runs, no arrival pending) and, with ``guard_wait``, when
    a candidate has waited that long. Always picking slot 0 and never
    stopping gives the base policy's schedule exactly.

    Each pass of the base is a full one (the view's ``released`` and
    ``surprise`` are set): its memory of the last pass (EASY's arrival-only
    shortcut) would describe EASY's backfilling, not the agent's.

    Args:
        amap: N candidate slots, then stop (the Wait index).
        base: the policy with EASY backfilling (it keeps its own queue order).
        on_post: see :class:`AgentPolicy`.
        guard_wait: a candidate that has waited this long (s) forbids stopping.

    Attributes:
        head, shadow, extra, extra_mem: the reservation of the pass being asked about.
        cand_slots: queue slots of the window's candidates (the encoder reads
            the queue's columns through them).
        n_legal: legal candidates now (may exceed N; only N are shown).
        asks, stops, departures, backfills: choices asked, stops chosen,
            picks other than slot 0, and starts this model made (asked or not).
    """

    kind = "backfill"

    def __init__(self, amap: ActionMap, base, on_post=None, guard_wait: float | None = None):
        super().__init__(amap, on_post, guard_wait)
        self.base = base
        # The scheduler keeps the queue in the base's order.
        self.static_key = getattr(base, "static_key", None)
        # A base that binds to the run (user-history features of learned:DIR) binds here too.
        attach = getattr(base, "attach_model", None)
        if attach is not None:
            self.attach_model = attach
        # A base whose backfill order is its own (a searched backfill key).
        self._backfill_key = getattr(base, "_by_backfill_key", None)
        self.level = 2          # the compact observation's phase feature: backfilling
        self.head: Job | None = None
        self.shadow = math.inf
        self.extra = 0
        self.extra_mem = 0.0
        self.cand_slots = _EMPTY
        self.n_legal = 0
        self._time = 0.0
        self._order = _EMPTY    # the pass's candidates still legal, in the base's order
        self.asks = self.stops = self.departures = self.backfills = 0

    def decide(self, view: SchedulerView) -> Iterator[Decision | simpy.Event]:
        """The base's pass up to its first backfill, then the agent's backfilling."""
        view.released = view.surprise = True
        proposals = iter(self.base.decide(view))
        for decision in proposals:
            if type(decision) is Decision and decision.action == START \
                    and decision.mode == Mode.BACKFILLED:
                close = getattr(proposals, "close", None)
                if close is not None:
                    close()
                break
            yield decision
        yield from self._backfill(view)

    def _backfill(self, view: SchedulerView) -> Iterator[Decision | simpy.Event]:
        q, cl = view.queue, view.cluster
        if not q.count or cl.free <= 0:
            return
        head = q.jobs[q.head()]
        if cl.fits_now(head.procs, head.mem):
            return      # cannot happen after an EASY head phase; nothing to protect then
        now = float(view.now)
        self.head = self.reserved = head
        self.shadow, self.extra, self.extra_mem = view.shadow(head.procs, head.mem)
        self._time = now
        slots = q.slots()
        order = slots[slots != head.queue_slot]
        self._order = order
        order = self._legal(q, cl)
        if len(order) > 1:
            if not q.key_monotone:
                order = order[np.argsort(q.key[order], kind="stable")]   # ties: slot order
            if self._backfill_key is not None:
                order = self._backfill_key(q, order, now, cl)
        self._order = order
        try:
            while self.refresh(view):
                if self.mask[self.amap.wait] or int(self.mask.sum()) > 1:
                    action = yield from self._ask(view)
                    self.asks += 1
                else:
                    action = 0
                if action == self.amap.wait:
                    self.stops += 1
                    return
                if action:
                    self.departures += 1
                job = self.window[action]
                if now + job.estimate <= self.shadow:
                    reason = "ends before shadow time"
                else:
                    self.extra -= job.procs
                    self.extra_mem -= job.mem
                    reason = "uses extra cores"
                self.backfills += 1
                yield Decision(START, job, Mode.BACKFILLED, reason)
        finally:
            self.reserved = None
            self.window[:] = [None] * len(self.window)
            self.cand_slots = _EMPTY

    def _legal(self, q, cl) -> np.ndarray:
        """Keep the pass's candidates EASY still admits (what is free and extra only shrink)."""
        order = self._order
        if not len(order):
            return order
        procs = q.procs[order]                  # a started job's slot holds DEAD_PROCS
        ok = procs <= cl.free
        short = self._time + q.estimate[order] <= self.shadow
        if cl.free_mem == math.inf:
            ok &= short | (procs <= self.extra)
        else:
            mem = q.mem[order]
            ok &= mem <= cl.free_mem
            ok &= short | ((procs <= self.extra) & (mem <= self.extra_mem))
        order = order[ok]
        self._order = order
        return order

    def refresh(self, view: SchedulerView) -> bool:
        """Window = the first N legal candidates; whether any is left (the mask then has them)."""
        q, cl = view.queue, view.cluster
        order = self._legal(q, cl) if cl.free > 0 else _EMPTY
        self.n_legal = k = len(order)
        if not k:
            return False
        n = self.amap.window
        shown = order[:n]
        self.cand_slots = shown
        jobs = q.jobs
        window = self.window
        m = len(shown)
        window[:m] = [jobs[s] for s in shown.tolist()]
        window[m:] = [None] * (n - m)
        mask = self.mask
        mask[:m] = 1
        mask[m:n] = 0
        can_stop = bool(view.ends()) or view.arrivals_pending()
        if can_stop and self.guard_wait is not None:
            can_stop = bool(np.all(self._time - q.submit[shown] < self.guard_wait))
        mask[n] = 1 if can_stop else 0
        return True

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Not used: :meth:`decide` applies starts and stops itself."""
        raise NotImplementedError("BackfillActions.decide applies its actions")

    def kind_of(self, action: int) -> str:
        """``backfill`` (a candidate starts) or ``wait`` (stop)."""
        return "wait" if action == self.amap.wait else "backfill"


def make_backfill_model(window, kill_slots, base, on_post=None, guard_wait=None) -> BackfillActions:
    """The ``backfill`` model, its options checked (``make_action_model("backfill", ...)``).

    Raises:
        ScenarioError: kill slots, a window that is not a candidate count
            >= 1, no base policy, or a base without EASY backfilling.
    """
    if kill_slots:
        raise ScenarioError("kill_slots", repr(kill_slots), "0 for actions='backfill'")
    n = DEFAULT_CANDIDATES if window in (None, 0) else window
    if isinstance(n, tuple | list) and len(n) == 2 and int(n[1]) == 0:
        n = int(n[0])
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ScenarioError("window", repr(window), "a number of candidate slots >= 1 for "
                            "actions='backfill'")
    if base is None:
        raise ScenarioError("base_policy", "nothing", "the policy with EASY that orders the "
                            "queue under actions='backfill' (e.g. saf+easy or learned:DIR)")
    if getattr(base, "backfill", None) != "easy":
        raise ScenarioError("base_policy", repr(getattr(base, "name", base)),
                            "a policy with EASY backfilling under actions='backfill' "
                            "(e.g. saf+easy, f1+easy or learned:DIR tuned with easy)")
    if getattr(base, "slack", 0.0):
        # The candidates are EASY's legal set at the true shadow time; a relaxed
        # base would promise another time, so slot 0 would not be its schedule.
        raise ScenarioError("base_policy", repr(getattr(base, "name", base)),
                            "textbook EASY under actions='backfill' (this learned policy "
                            f"relaxes EASY with slack {base.slack:g}; tune with --slack off)")
    if getattr(base, "drain", (0.0, 0.0))[0]:
        # Likewise a drain-aware base: it withholds the reservation the legal set assumes.
        raise ScenarioError("base_policy", repr(getattr(base, "name", base)),
                            "textbook EASY under actions='backfill' (this policy is "
                            "drain-aware EASY; tune with --drain off)")
    return BackfillActions(ActionMap(n, 0, 0, has_wait=True), base, on_post, guard_wait)


# -- the observation -----------------------------------------------------------------------------
#: Features of a row of :class:`BackfillEncoder`.
BACKFILL_FEATURES = (
    # per candidate (the stop row has is_stop and present)
    "is_job", "is_stop", "present", "first", "rank", "procs", "log2_procs", "mem", "estimate",
    "wait", "shadow_use", "uses_extra", "extra_use", "free_use", "wait_per_estimate",
    # the pass (every row)
    "free", "extra", "to_shadow", "head_procs", "head_wait", "queue", "legal", "running")
_ROW_F = 15
_WAIT_SCALE = math.log1p(1000.0)   # wait / estimate of 1000 maps to 1.0
_TAU = 10.0                         # the bounded-slowdown floor of the wait/estimate feature


class BackfillEncoder:
    """``backfill`` observation, shape ``(N + 1, 23)``: a row per candidate slot, then stop.

    A candidate row (see :data:`BACKFILL_FEATURES`): ``[1, 0, present,
    first (slot 0: EASY's own pick), rank (i / N), procs / capacity, log2
    procs, mem / capacity, estimate, wait, shadow_use (estimate over the
    time left to the shadow, at most 1), uses_extra (it ends after the shadow
    time by its estimate, so it takes extra units), extra_use (procs over the
    extra units, at most 1), free_use (procs over the free units),
    wait_per_estimate (log of wait / max(estimate, 10 s))]``; the stop row is
    ``[0, 1, stop legal, 0, ...]``. Every row ends with the pass's features:
    ``[free, extra, time to the shadow, head procs, head wait, queue length,
    legal candidates, running jobs]``. Times go through
    ``log1p(t) / log1p(max_time)``, counts through ``log1p(n) /
    log1p(queue_norm)`` (legal candidates: ``/ log1p(N)``), as in
    :mod:`cosim.env.observations`. Built from the queue's columns with numpy,
    for the :class:`~agents.networks.KernelPolicy` that scores rows
    independently.

    Args:
        cfg: a :class:`cosim.env.observations.ObservationConfig`.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.amap = cfg.amap
        self._cap = float(cfg.capacity)
        self._inv_l2 = 1.0 / math.log2(cfg.capacity + 1.0)
        self._mcap = float(cfg.mem_capacity or 0.0)
        self._lt = math.log1p(cfg.max_time)
        self._lq = math.log1p(cfg.queue_norm)
        n = self.amap.window
        base = np.zeros(self.shape(), dtype=np.float32)
        base[:n, 0] = 1.0
        base[:n, 4] = np.arange(n) / n
        base[n, 1] = 1.0
        self._base = base
        self.space = spaces.Box(0.0, 1.0, shape=self.shape(), dtype=np.float32)

    def shape(self) -> tuple[int, int]:
        """``(N + 1, 23)``."""
        return (self.amap.n, len(BACKFILL_FEATURES))

    def reset(self) -> None:
        """Nothing is cached between steps."""

    def empty(self) -> np.ndarray:
        """An all-zero observation (before an episode starts)."""
        return np.zeros(self.space.shape, dtype=np.float32)

    def _t(self, seconds):
        return np.clip(np.log1p(np.maximum(seconds, 0.0)) / self._lt, 0.0, 1.0)

    def encode(self, view: SchedulerView, agent: BackfillActions) -> np.ndarray:
        """The rows now (a new array)."""
        obs = self._base.copy()
        n = self.amap.window
        obs[:, 2] = agent.mask
        now = float(view.now)
        q, cl = view.queue, view.cluster
        cap = self._cap
        shadow, extra, free = agent.shadow, agent.extra, cl.free
        slots = agent.cand_slots
        k = len(slots)
        if k:
            procs = q.procs[slots].astype(np.float64)
            est = q.estimate[slots]
            wait = now - q.submit[slots]
            left = shadow - now
            x = obs[:k]
            x[0, 3] = 1.0
            x[:, 5] = np.minimum(procs / cap, 1.0)
            x[:, 6] = np.minimum(np.log2(procs + 1.0) * self._inv_l2, 1.0)
            x[:, 7] = np.minimum(q.mem[slots] / self._mcap, 1.0) if self._mcap else 0.0
            x[:, 8] = self._t(est)
            x[:, 9] = self._t(wait)
            x[:, 10] = np.minimum(est / left, 1.0) if left > 0 else 1.0
            x[:, 11] = now + est > shadow
            x[:, 12] = np.minimum(procs / max(extra, 1), 1.0)
            x[:, 13] = np.minimum(procs / max(free, 1), 1.0)
            x[:, 14] = np.clip(np.log1p(np.maximum(wait, 0.0) / np.maximum(est, _TAU))
                               / _WAIT_SCALE, 0.0, 1.0)
        head = agent.head
        lq = self._lq
        obs[:, _ROW_F:] = (
            min(1.0, free / cap), min(1.0, max(extra, 0) / cap),
            float(self._t(shadow - now)) if shadow != math.inf else 1.0,
            min(1.0, head.procs / cap) if head is not None else 0.0,
            float(self._t(now - head.submit)) if head is not None else 0.0,
            min(1.0, math.log1p(q.count) / lq),
            min(1.0, math.log1p(agent.n_legal) / math.log1p(n)),
            min(1.0, math.log1p(len(view.ends())) / lq))
        return obs
