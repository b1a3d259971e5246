"""Action models: what the agent decides at a decision point, and how it becomes decisions.

Every model uses one flat ``Discrete`` space with a documented index map
(masks stay 1-D, ``int8``, 1 = legal, never all zero) and is chosen by name
(``actions=`` in the environment, recorded in checkpoints):

``start`` (DBF split window, seed 000)
    ``0 .. M-1``: start the job in window slot i (``M_head`` slots from the
    head of the queue, oldest first, then ``M_tail`` from its tail, newest
    first: DBF's indices L, L-1, ...); ``M``: Fwd (wait for the next arrival or
    end); ``M+1 .. M+K``: kill running slot k and requeue it (RLSchert).
    A start is legal when the job fits now. As in DBF's schedule cycling the
    agent is asked at every decision point while jobs wait (each arrival and
    completion) and keeps placing jobs until it chooses Fwd; an illegal
    action is taken as Fwd. Nothing is reserved unless the starvation guard
    is on.

``select`` (RLScheduler, the Cunha thesis)
    ``0 .. N-1``: the job, among the first N queued (arrival order), to run
    next. If it fits, it starts and the agent chooses again; if not, it is
    reserved at its EASY shadow time and the scheduler backfills around the
    reservation with a named rule (``backfill="easy"``, candidates in
    ``backfill_order``, FCFS by default; or ``"none"``). The next decision
    comes at the next event: with ``reserve="easy"`` (default) the agent
    chooses again then, like EASY's head, and choosing another job that does
    not fit withdraws the previous reservation (a withdrawal, not a broken
    promise); with ``reserve="sticky"`` (RLScheduler) the reservation holds
    until the job starts and the agent is next asked then. Every present job
    is legal; an illegal index is taken as the first legal one.

``dras`` (DRAS, seed 004, two levels)
    ``0 .. W-1``. Level 1 scores the first W queued jobs (every present job
    legal): one that fits starts (mode ready) and level 1 repeats; one that
    does not is reserved at its shadow time and keeps the reservation until
    it starts (mode reserved); level 1 stops. Level 2 fills the same W slots
    with backfill candidates, the queued jobs EASY admits around the
    reservation (:func:`cosim.policies.easy_admits`), and the agent starts
    one (mode backfilled); candidates are recomputed and level 2 repeats
    until none remain. Level 2 has no stop action.

``inspect`` (SchedInspector's accept/skip, over a base policy)
    ``0``: accept the base policy's next start; ``1``: skip it (nothing more
    starts until the next event). The base (a heuristic with its
    backfilling, or ``learned:DIR``) runs its own pass and proposes each
    start; skip is legal for at most ``max_skips`` proposals in a row, not
    for a job that has waited ``guard_wait``, and not when no event is left
    to come; otherwise the proposal is accepted without asking. Accepting
    every proposal is the base's schedule exactly.

``backfill`` (RLBackfilling's learned backfilling order, over an EASY base)
    ``0 .. N-1``: start the backfill candidate in slot i; ``N``: stop
    backfilling this pass. The base (a heuristic with EASY, or
    ``learned:DIR``) starts its head jobs and reserves for the first that
    does not fit; the slots hold the jobs EASY may start around that
    reservation (recomputed after each start), in the base's backfill order.
    Always picking slot 0 and never stopping is the base's schedule exactly.

A kill (``start`` model) is legal only for a job that has run for some
time: a job cannot be killed in the instant it started (that loop would
freeze simulated time). With ``guard_wait`` set, a starvation guard bounds
waits in every model: once the queue's oldest job has waited that long, it
holds an EASY reservation (``start``: a real one, which the scheduler records
and checks; only window jobs EASY would backfill around it stay legal, and
it alone while it fits) or is the only legal choice (``select``, ``dras``
level 1).

:class:`AgentPolicy` is the scheduler-side base: it posts each decision point
as a SimPy event that the Gym environment answers (:meth:`AgentPolicy.answer`),
or, for a trained agent run as a plain policy, asks an ``act(observation,
mask)`` function in process (:meth:`AgentPolicy.acting`).
"""

from __future__ import annotations

from cosim.env.actions.backfill import DEFAULT_CANDIDATES, BackfillActions, make_backfill_model
from cosim.env.actions.base import ActionMap, AgentPolicy
from cosim.env.actions.dras import DrasActions
from cosim.env.actions.inspect import InspectActions, make_inspect_model
from cosim.env.actions.kill import KillActions
from cosim.env.actions.select import SelectActions
from cosim.env.actions.start import StartActions
from cosim.errors import ScenarioError
from cosim.policies.heuristics import HEURISTICS

__all__ = ["ActionMap", "AgentPolicy", "StartActions", "SelectActions", "DrasActions",
           "KillActions", "InspectActions", "BackfillActions", "ACTION_MODELS", "make_action_model"]

#: Action models by the name the environment's ``actions=`` takes.
ACTION_MODELS: dict[str, type[AgentPolicy]] = {
    "start": StartActions, "select": SelectActions, "dras": DrasActions, "kill": KillActions,
    "inspect": InspectActions, "backfill": BackfillActions}

#: Default window per model: ``(M_head, M_tail)`` for start, N for select, W for dras.
DEFAULT_WINDOWS = {"start": (10, 0), "select": 128, "dras": 50, "kill": 0, "inspect": 0,
                   "backfill": DEFAULT_CANDIDATES}


def make_action_model(name: str, window, kill_slots: int = 0, *, on_post=None,
                      guard_wait: float | None = None, backfill: str = "easy",
                      backfill_order: str = "fcfs", reserve: str = "easy", base=None,
                      rule=None, max_skips: int | None = None) -> AgentPolicy:
    """The action model ``name`` (see the module docstring), validating its options.

    ``base`` (the scheduling policy) and ``rule`` (the teacher's kill rule)
    are for ``kill``; ``base`` and ``max_skips`` (consecutive skips) for ``inspect``.

    Raises:
        ScenarioError: an unknown model, a window or option the model cannot take.
    """
    if name not in ACTION_MODELS:
        raise ScenarioError("actions", repr(name), f"one of {', '.join(ACTION_MODELS)}")
    if name == "inspect":
        return make_inspect_model(window, kill_slots, base, on_post, guard_wait, max_skips)
    if max_skips is not None:
        raise ScenarioError("max_skips", repr(max_skips), f"nothing for actions={name!r} "
                            "(consecutive skips belong to the 'inspect' model)")
    if name == "backfill":
        return make_backfill_model(window, kill_slots, base, on_post, guard_wait)
    if name == "kill":
        if window not in (None, 0):
            raise ScenarioError("window", repr(window), "no window for actions='kill'")
        k = int(kill_slots) or 4
        if k < 1:
            raise ScenarioError("kill_slots", repr(kill_slots), "at least 1 for actions='kill'")
        if base is None:
            raise ScenarioError("base_policy", "nothing", "the policy that schedules under "
                                "actions='kill' (e.g. sjf+easy)")
        return KillActions(ActionMap(0, 0, k, has_wait=True), base, rule=rule, on_post=on_post,
                           max_kills=rule.max_kills if rule is not None and rule.max_kills else 1)
    if window is None:
        window = DEFAULT_WINDOWS[name]
    if name == "start":
        if isinstance(window, int) or len(window) != 2:
            raise ScenarioError("window", repr(window), "(M_head, M_tail) for actions='start'")
        m_head, m_tail = int(window[0]), int(window[1])
        if m_head < 0 or m_tail < 0 or m_head + m_tail < 1:
            raise ScenarioError("window", repr(window), "(M_head, M_tail) with M_head + M_tail >= 1")
        if guard_wait is not None and m_head < 1:
            raise ScenarioError("guard_wait", repr(guard_wait), "a head window (M_head >= 1)")
        return StartActions(ActionMap(m_head, m_tail, int(kill_slots)), on_post, guard_wait)
    if not isinstance(window, int):
        if len(window) == 2 and int(window[1]) == 0:
            window = int(window[0])
        else:
            raise ScenarioError("window", repr(window),
                                f"a number of job slots for actions={name!r}")
    if window < 1:
        raise ScenarioError("window", repr(window), "at least 1 job slot")
    if kill_slots:
        raise ScenarioError("kill_slots", repr(kill_slots), f"0 for actions={name!r} "
                            "(kill slots belong to the 'start' model)")
    amap = ActionMap(int(window), 0, 0, has_wait=False)
    if name == "select":
        if backfill not in ("easy", "none"):
            raise ScenarioError("backfill", repr(backfill), "easy or none")
        heuristic = HEURISTICS.get(backfill_order)
        if heuristic is None or heuristic.static is None:
            statics = [h.name for h in HEURISTICS.values() if h.static is not None]
            raise ScenarioError("backfill_order", repr(backfill_order),
                                f"a static order among {', '.join(statics)}")
        if reserve not in ("easy", "sticky"):
            raise ScenarioError("reserve", repr(reserve), "easy or sticky")
        return SelectActions(amap, on_post, guard_wait, backfill, backfill_order, reserve)
    return DrasActions(amap, on_post, guard_wait)

