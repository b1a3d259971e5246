"""What a heuristic would do at the agent's decision point (imitation targets).

The teacher is an ordinary policy from :mod:`cosim.policies`, asked on the
agent's own scheduler view and mapped onto the agent's action indices.
"""

from __future__ import annotations

import numpy as np

from cosim.decisions import KILL, RESERVE, START, SchedulerView
from cosim.env.actions import AgentPolicy
from cosim.policies import make_policy

__all__ = ["teacher_action"]


def teacher_action(name: str, view: SchedulerView, agent: AgentPolicy) -> int:
    """The action heuristic ``name`` would take now.

    Its first start (for models that choose a job to reserve, ``select`` and
    ``dras``'s level 1, also its first reservation: its head job) when that job
    is in the window and legal; otherwise (a split window hides part of the
    queue, or the starvation guard forbids it) the window job it ranks best
    among the legal ones, so the agent learns the teacher's order rather than
    to wait. Wait when the teacher starts nothing (it would wait for an event)
    and the model has Wait; otherwise its best-ranked legal job.
    """
    if agent.kind == "kill":    # the kill rule is the only teacher of kill decisions
        return agent.rule_action(view)
    teacher = make_policy(name, rng=np.random.default_rng(0))
    q = view.queue
    saved = (view.released, view.surprise, q.key_monotone)
    slots = q.slots()
    saved_keys = q.key[slots].copy()
    if teacher.static_key is not None:
        # The queue holds the agent's (empty) keys: give the teacher its own order.
        q.key[slots] = [teacher.static_key(q.jobs[s]) for s in slots.tolist()]
        q.key_monotone = False
    view.released = view.surprise = True   # a fresh policy must see the whole state
    try:
        # Only the first decision is usable: policies assume each one is
        # applied before they yield the next.
        reserving = not agent.amap.has_wait and agent.level == 1
        for decision in teacher.decide(view):
            if decision.action == START or (decision.action == RESERVE and reserving):
                for i, job in enumerate(agent.window):
                    if job is decision.job and agent.mask[i]:
                        return i
                return _best_legal(agent, q)
            if decision.action == KILL:
                break
        if not agent.amap.has_wait:
            return _best_legal(agent, q)
    finally:
        view.released, view.surprise, q.key_monotone = saved
        q.key[slots] = saved_keys
    return agent.amap.wait


def _best_legal(agent: AgentPolicy, q) -> int:
    """The legal window job the teacher ranks first (the queue's key column holds its keys)."""
    legal = [(float(q.key[job.queue_slot]), i) for i, job in enumerate(agent.window)
             if job is not None and agent.mask[i]]
    return min(legal)[1] if legal else agent.amap.wait
