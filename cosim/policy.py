"""The interface between the scheduler and whatever decides: heuristics or agents.

A policy is any object with ``decide(view)`` returning an iterable of
:class:`Decision`. The scheduler applies each decision as soon as it is
produced, so a generator policy sees the cluster and queue as its earlier
decisions left them. The scheduler validates every decision (a start must
fit now, a kill must name a running job); refused decisions are counted and
recorded, never applied.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from cosim.actors.scheduler import SchedulerView
    from cosim.job import Job

__all__ = ["Decision", "Policy", "START", "RESERVE", "KILL", "WAIT",
           "start", "reserve", "kill"]

START, RESERVE, KILL, WAIT = "start", "reserve", "kill", "wait"


class Decision(NamedTuple):
    """One scheduling decision.

    Attributes:
        action: ``"start"``, ``"reserve"``, ``"kill"`` or ``"wait"``.
        job: the job it concerns (None for wait).
        mode: execution mode for a start (``ready``/``reserved``/``backfilled``).
        reason: why, in a few words (recorded in ``decisions.parquet``).
        time: the promised start time for a reservation.
        requeue: for a kill, whether the job goes back to the queue.
    """

    action: str
    job: Job | None
    mode: str = ""
    reason: str = ""
    time: float = math.nan
    requeue: bool = True


def start(job: Job, mode: str, reason: str) -> Decision:
    """Start ``job`` now."""
    return Decision(START, job, mode, reason)


def reserve(job: Job, time: float, reason: str = "") -> Decision:
    """Promise ``job`` a start no later than ``time``."""
    return Decision(RESERVE, job, "", reason, time)


def kill(job: Job, reason: str, requeue: bool = True) -> Decision:
    """Kill a running job; requeue it or drop it."""
    return Decision(KILL, job, "", reason, math.nan, requeue)


class Policy(Protocol):
    """What the scheduler asks at every decision point."""

    name: str

    def decide(self, view: SchedulerView) -> Iterable[Decision]:
        """Decisions for now, applied in order as they are produced."""
        ...
