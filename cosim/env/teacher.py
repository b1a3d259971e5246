"""What a heuristic would do at the agent's decision point (imitation targets).

The teacher is an ordinary policy from :mod:`cosim.policies`, asked on the
agent's own scheduler view and mapped onto the agent's action indices.
"""

from __future__ import annotations

import numpy as np

from cosim.env.actions import AgentPolicy
from cosim.policies import make_policy
from cosim.policy import KILL, START, SchedulerView

__all__ = ["teacher_action"]


def teacher_action(name: str, view: SchedulerView, agent: AgentPolicy) -> int:
    """The action heuristic ``name`` would take now.

    Its first start when that job is in the window and legal; otherwise (a
    split window hides part of the queue, or the starvation guard forbids
    it) the window job it ranks best among the legal ones, so the agent learns
    the teacher's order rather than to wait. Wait when the teacher starts
    nothing (it would wait for an event).
    """
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
        for decision in teacher.decide(view):
            if decision.action == START:
                window = agent.window
                mask = agent.mask
                for i, job in enumerate(window):
                    if job is decision.job and mask[i]:
                        return i
                # The queue's key column now holds the teacher's keys.
                legal = [(float(q.key[job.queue_slot]), i) for i, job in enumerate(window)
                         if job is not None and mask[i]]
                return min(legal)[1] if legal else agent.amap.wait
            if decision.action == KILL:
                break
    finally:
        view.released, view.surprise, q.key_monotone = saved
        q.key[slots] = saved_keys
    return agent.amap.wait
