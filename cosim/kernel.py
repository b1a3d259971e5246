"""The seam to SimPy's internals: the only module that touches them.

The model runs on SimPy's event loop but takes three shortcuts its public API
does not offer, each on a path taken once or more per job:

* the clock is read as ``env._now`` (the ``now`` property costs a call);
* an event is triggered by setting ``_ok`` and ``_value`` and scheduling it,
  without ``Event.succeed``'s check that it is still pending (the caller
  knows it is);
* a callback runs "at once" from an *urgent* event at the current time, the
  way SimPy starts a process or delivers an interrupt, so that it comes
  before every normal event already due at this instant;
* timers and wake-ups that only run callbacks are bare :class:`Call`
  objects pushed on the event queue as ``simpy.Timeout`` pushes itself
  (same time, priority and sequence number, so the same order), without an
  Event's construction; SimPy's ``step`` reads nothing of an event but its
  ``callbacks`` and ``_ok``.

It also runs a model with the garbage collector's full collections put off
until the run ends (:func:`run`).

Everything else uses the public API (``simpy.Timeout``, ``Event.callbacks``,
``Environment.schedule``). ``tests/test_kernel.py`` and
``tests/test_kernel_run.py`` fail if a SimPy release changes any of these
internals.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from heapq import heappush
from operator import attrgetter

import simpy
from simpy.events import NORMAL, URGENT

__all__ = ["now", "fire", "call_urgent", "Call", "timer", "run",
           "RUN_FULL_THRESHOLD", "URGENT"]

#: ``now(env)``: the simulation clock, read without the property's call.
now: Callable[[simpy.Environment], float] = attrgetter("_now")


def fire(env: simpy.Environment, event: simpy.Event, value: object = None) -> None:
    """Trigger ``event`` (known to be pending) with ``value``, due now after the
    events already scheduled for this instant."""
    event._ok = True
    event._value = value
    env.schedule(event)


class Call:
    """A bare event: ``callbacks(self)`` run when SimPy processes it.

    Made by :func:`timer`. Nothing can wait on it but its callbacks; it has
    none of an Event's properties (``value``, ``triggered``...).
    """

    __slots__ = ("callbacks", "_ok", "_value")


def timer(env: simpy.Environment, delay: float, callback: Callable[[Call], None]) -> Call:
    """Run ``callback(call)`` ``delay`` seconds from now: ``simpy.Timeout(env,
    delay)`` with ``callback`` as its only callback (the same float
    arithmetic, the same place among the events due then), made cheaply.
    ``delay`` must not be negative (not checked)."""
    call = Call()
    call.callbacks = [callback]
    call._ok = True
    call._value = None
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), call))
    return call


def call_urgent(env: simpy.Environment, callback: Callable[[simpy.Event], None],
                value: object = None) -> simpy.Event:
    """Run ``callback(event)`` from a new urgent event at the current time: before
    the normal events due now, as SimPy starts a process or delivers an interrupt.
    The event's value is ``value``."""
    event = simpy.Event(env)
    event._ok = True
    event._value = value
    event.callbacks.append(callback)
    env.schedule(event, URGENT)
    return event


#: The oldest generation's threshold during :func:`run` (Python's default is 10).
RUN_FULL_THRESHOLD = 1000


def run(env: simpy.Environment, until: simpy.Event | float | None = None) -> None:
    """``env.run(until)`` with the garbage collector's full collections put off
    until it returns (even on an error).

    Why: a long run allocates tens of thousands of long-lived containers
    (jobs, event rows, heap entries), so the collector's full collections
    come during it, and each one walks every object of the process: the
    run's own and tens of thousands of module, numpy and SimPy objects
    besides. They find next to nothing there (a replay of 10,000 jobs leaves
    14 objects in reference cycles), yet cost about a tenth of a whole-trace
    replay. The young generations are collected as usual, so cyclic garbage
    a policy or hook makes is still freed during the run. Afterwards the
    threshold is restored and nothing else is touched: the generation
    counts and the collector's own rule decide when the full collection
    that was put off comes, so back-to-back runs (the windows of a search)
    keep no more garbage than plain ``env.run``.
    """
    thresholds = gc.get_threshold()
    if thresholds[2] >= RUN_FULL_THRESHOLD:
        env.run(until=until)   # already put off (a run inside a run, or the caller's choice)
        return
    gc.set_threshold(thresholds[0], thresholds[1], RUN_FULL_THRESHOLD)
    try:
        env.run(until=until)
    finally:
        gc.set_threshold(*thresholds)
