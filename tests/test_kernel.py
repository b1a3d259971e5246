"""cosim.kernel, the seam to SimPy's internals: fails if a SimPy release changes them.

The model reads the clock as ``env._now``, triggers events through ``_ok``
and ``_value``, and schedules urgent events (``simpy.events.URGENT``). These
tests pin each of those internals and the event order the model relies on,
and check that no other module of the package touches them.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import simpy
import simpy.events

from cosim import kernel

ROOT = Path(__file__).resolve().parents[1]


def test_simpy_internals_the_kernel_uses_exist():
    env = simpy.Environment(initial_time=2.5)
    assert env._now == env.now == 2.5
    ev = simpy.Event(env)
    assert ev._value is simpy.events.PENDING and not ev.triggered
    assert simpy.events.URGENT < simpy.events.NORMAL
    params = list(inspect.signature(simpy.Environment.schedule).parameters)
    assert params[:3] == ["self", "event", "priority"]


def test_now_follows_the_clock():
    env = simpy.Environment()
    seen = []
    env.timeout(3.25).callbacks.append(lambda _e: seen.append(kernel.now(env)))
    env.run()
    assert seen == [3.25] and kernel.now(env) == env.now == 3.25


def test_fire_triggers_a_pending_event_after_those_already_due():
    env = simpy.Environment()
    order = []
    env.timeout(0).callbacks.append(lambda _e: order.append("timeout"))
    ev = simpy.Event(env)
    ev.callbacks.append(lambda e: order.append(("fired", e.value)))
    kernel.fire(env, ev, 7)
    assert ev.triggered and ev.ok
    env.run()
    assert order == ["timeout", ("fired", 7)]
    assert ev.processed and ev.value == 7


def test_call_urgent_runs_before_normal_events_due_now():
    env = simpy.Environment()
    order = []

    def at_one(_e):
        env.timeout(0).callbacks.append(lambda _e: order.append("normal"))
        kernel.call_urgent(env, lambda e: order.append(("urgent", e.value, env.now)), "cause")

    env.timeout(1).callbacks.append(at_one)
    env.run()
    assert order == [("urgent", "cause", 1), "normal"]


def test_a_process_waiting_on_a_fired_event_resumes_with_its_value():
    env = simpy.Environment()
    wake = simpy.Event(env)
    got = []

    def proc():
        got.append((yield wake))

    env.process(proc())
    env.timeout(2).callbacks.append(lambda _e: kernel.fire(env, wake, "go"))
    env.run()
    assert got == ["go"]


def test_no_other_module_touches_simpy_internals():
    pattern = re.compile(r"\.(_now|_ok|_value)\b|\bURGENT\b")
    offenders = []
    for package in ("cosim", "agents", "predictors"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "cosim" / "kernel.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
