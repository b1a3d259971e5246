"""The ``inspect`` action model (accept or skip the base policy's start); see :mod:`cosim.env.actions`.

SchedInspector's idea (Zhang, Dai and Xie, HPDC'22, as summarized in seed
000): a heuristic scheduler with backfilling proposes each placement and a
learned inspector accepts it or ignores it; an ignored placement waits for
the next scheduling point. The gain must come from what the heuristic cannot
do by itself: delaying a start so that a better one can happen later. Seed
000 also reports the failure mode, an inspector that skips most proposals
and leaves cores idle, so here skips are bounded.
"""

from __future__ import annotations

from collections.abc import Iterator

import simpy

from cosim.decisions import START, Decision, SchedulerView
from cosim.env.actions.base import ActionMap, AgentPolicy
from cosim.errors import ScenarioError
from cosim.job import Mode

#: Index of the two actions.
ACCEPT, SKIP = 0, 1

#: Consecutive skips allowed by default before a proposal must be accepted.
DEFAULT_MAX_SKIPS = 4


class InspectActions(AgentPolicy):
    """``inspect``: the base policy proposes each start; the agent accepts or skips it.

    At every decision point the base policy (a heuristic with its
    backfilling, or a ``learned:DIR`` priority policy) runs its pass as it
    would alone. Before each start it yields, the agent is asked:

    - ``0`` accept: the start is applied and the base's pass goes on
      (further starts, its reservation, its backfilling), each start asked
      about in turn;
    - ``1`` skip: the pass ends there, so nothing more starts until the next
      event (an arrival or an end). The next pass is a full one (the base
      re-examines the whole queue, not only the jobs that arrived).

    The window holds the proposed job (``window[0]``); :attr:`level` is 2
    when the base proposes it as a backfill (the compact observation's phase
    feature), 1 for a start at the head of its order.

    Skip is legal only while it cannot starve or stall anything: fewer than
    ``max_skips`` skips in a row so far (an accept resets the count), the
    proposed job has waited less than ``guard_wait`` seconds (when set), and
    some event is still to come (a running job or a pending arrival), since
    a skip with neither would freeze the queue. When skip is not legal the
    proposal is accepted without asking. Accepting every proposal gives the
    base policy's schedule exactly.

    Args:
        amap: one job slot, then Skip (the Wait index).
        base: the policy that proposes (it keeps its own queue order).
        on_post: see :class:`AgentPolicy`.
        guard_wait: a proposed job that has waited this long (s) cannot be skipped.
        max_skips: consecutive skips allowed (at least 1).
    """

    kind = "inspect"

    def __init__(self, amap: ActionMap, base, on_post=None, guard_wait: float | None = None,
                 max_skips: int = DEFAULT_MAX_SKIPS):
        super().__init__(amap, on_post, guard_wait)
        self.base = base
        self.max_skips = int(max_skips)
        # The scheduler keeps the queue in the base's order.
        self.static_key = getattr(base, "static_key", None)
        # A base that binds to the run (user-history features of learned:DIR) binds here too.
        attach = getattr(base, "attach_model", None)
        if attach is not None:
            self.attach_model = attach
        # A pass the base would spend deciding nothing proposes nothing to
        # inspect: the scheduler may skip it too, unless a skip cut the last
        # pass short (the base's memory of it is stale).
        base_idle = getattr(base, "pass_is_idle", None)
        if base_idle is not None:
            self.pass_is_idle = lambda view: not self._full_pass and base_idle(view)
        self.proposal: Decision | None = None
        self.consecutive = 0          # skips in a row so far
        self.skips = 0                # skips in the run
        self.accepts = 0              # proposals accepted (asked or not)
        self._full_pass = False       # the next pass must re-examine the whole queue

    def decide(self, view: SchedulerView) -> Iterator[Decision | simpy.Event]:
        """The base's pass, each start inspected (see the class docstring)."""
        if self._full_pass:
            # The skipped pass was cut short: the base's memory of it (EASY's
            # arrival-only shortcut) no longer describes the queue.
            view.released = view.surprise = True
            self._full_pass = False
        proposals = iter(self.base.decide(view))
        for decision in proposals:
            if type(decision) is Decision and decision.action == START:
                self.proposal = decision
                if self.refresh(view):
                    action = yield from self._ask(view)
                    if action == SKIP:
                        self.consecutive += 1
                        self.skips += 1
                        self._full_pass = True
                        self.proposal = None
                        close = getattr(proposals, "close", None)
                        if close is not None:
                            close()
                        return
                self.consecutive = 0
                self.accepts += 1
                self.proposal = None
            yield decision

    def refresh(self, view: SchedulerView) -> bool:
        """Window = the proposed job; whether skip is legal (the agent is asked only then)."""
        job = self.proposal.job
        self.window[0] = job
        self.level = 2 if self.proposal.mode == Mode.BACKFILLED else 1
        now = view.now
        can_skip = (self.consecutive < self.max_skips
                    and (self.guard_wait is None or now - job.submit < self.guard_wait)
                    and (bool(view.ends()) or view.arrivals_pending()))
        m = self.mask
        m[ACCEPT] = 1
        m[SKIP] = 1 if can_skip else 0
        return can_skip

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Not used: :meth:`decide` applies accept and skip itself."""
        raise NotImplementedError("InspectActions.decide applies its actions")

    def kind_of(self, action: int) -> str:
        """``start`` (accept) or ``wait`` (skip)."""
        return "start" if action == ACCEPT else "wait"


def make_inspect_model(window, kill_slots, base, on_post=None, guard_wait=None,
                       max_skips=None) -> InspectActions:
    """The ``inspect`` model, its options checked (``make_action_model("inspect", ...)``).

    Raises:
        ScenarioError: a window or kill slots (the model has neither), no base
            policy, or ``max_skips`` not an integer >= 1.
    """
    if window not in (None, 0, 1, (1, 0)):
        raise ScenarioError("window", repr(window), "no window for actions='inspect' "
                            "(the agent sees the one proposed job)")
    if kill_slots:
        raise ScenarioError("kill_slots", repr(kill_slots), "0 for actions='inspect'")
    if base is None:
        raise ScenarioError("base_policy", "nothing", "the policy that proposes under "
                            "actions='inspect' (e.g. f1+easy or learned:DIR)")
    k = DEFAULT_MAX_SKIPS if max_skips is None else max_skips
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ScenarioError("max_skips", repr(max_skips), "an integer >= 1")
    return InspectActions(ActionMap(1, 0, 0, has_wait=True), base, on_post, guard_wait, k)
