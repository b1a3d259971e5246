"""The seam to SimPy's internals: the only module that touches them.

The model runs on SimPy's event loop but takes three shortcuts its public API
does not offer, each on a path taken once or more per job:

* the clock is read as ``env._now`` (the ``now`` property costs a call);
* an event is triggered by setting ``_ok`` and ``_value`` and scheduling it,
  without ``Event.succeed``'s check that it is still pending (the caller
  knows it is);
* a callback runs "at once" from an *urgent* event at the current time, the
  way SimPy starts a process or delivers an interrupt, so that it comes
  before every normal event already due at this instant.

It also runs a model with the garbage collector held off the objects that
existed before the run (:func:`run`).

Everything else uses the public API (``simpy.Timeout``, ``Event.callbacks``,
``Environment.schedule``). ``tests/test_kernel.py`` fails if a SimPy release
changes any of these internals.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from operator import attrgetter

import simpy
from simpy.events import URGENT

__all__ = ["now", "fire", "call_urgent", "run", "URGENT"]

#: ``now(env)``: the simulation clock, read without the property's call.
now: Callable[[simpy.Environment], float] = attrgetter("_now")


def fire(env: simpy.Environment, event: simpy.Event, value: object = None) -> None:
    """Trigger ``event`` (known to be pending) with ``value``, due now after the
    events already scheduled for this instant."""
    event._ok = True
    event._value = value
    env.schedule(event)


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


def run(env: simpy.Environment, until: simpy.Event | float | None = None) -> None:
    """``env.run(until)`` with the objects that existed before it frozen for the
    garbage collector (``gc.freeze``), unfrozen afterwards, even on an error.

    Why: a run allocates tens of thousands of long-lived containers (jobs,
    event rows, heap entries), so the collector's full collections come
    during it, and each one walks every object of the process as well:
    tens of thousands of module, numpy and SimPy objects that cannot be
    garbage. Frozen, they are skipped; a whole-trace replay spends about an
    eighth less CPU time. The run's own objects are collected as usual (the
    model makes almost no cyclic garbage), and so are the frozen ones once
    they are unfrozen. Left as it is when the caller froze objects of its
    own (unfreezing would release them too) or turned the collector off.
    """
    if gc.get_freeze_count() or not gc.isenabled():
        env.run(until=until)
        return
    gc.freeze()
    try:
        env.run(until=until)
    finally:
        gc.unfreeze()
