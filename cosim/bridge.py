"""Co-simulation: the SimPy model under an asyncio loop, predictions from a service.

The bridge is the prediction backend (:class:`cosim.prediction_hub.PredictionBackend`)
of a :class:`cosim.prediction_hub.PredictionHub` when predictions come from an
asyncio service. When the scheduler reaches a decision point, the hub gathers
every prediction it needs into one batch and hands it to the bridge; the
bridge stops the simulation, awaits the service (in process or over HTTP),
and resumes the simulation with the answer. Simulated time does
not advance while the service answers. A scenario may add *simulated*
decision latency to study slow predictors: the decision point then takes
effect that much later in simulated time (the service's measured wall time,
a fixed delay, or a lognormal draw), while the rest of the model goes on.

Timeouts and service errors are not fatal: the scheduler keeps the user
estimates for that decision point, and the fallback is counted (by reason)
in ``summary.json``.

Examples:
    >>> import asyncio  # doctest: +SKIP
    >>> bridge = Bridge(env, service, timeout_s=2.0)  # doctest: +SKIP
    >>> hub = PredictionHub(workload, bridge)  # doctest: +SKIP
    >>> sim = build(env, scenario, policy, hooks=[hub])  # doctest: +SKIP
    >>> asyncio.run(bridge.run(sim.finished))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

__all__ = ["Bridge", "ServiceFailure"]


class ServiceFailure(Exception):
    """A prediction call failed or timed out (the hub falls back to estimates)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Bridge:
    """Drives one simulation, answering its prediction batches from an async service.

    Args:
        env: the simulation's environment.
        service: an object with ``async runtime(batch)`` and ``async
            remaining(batch)`` returning a result with ``values``,
            ``model_version`` and ``seconds`` (``predictors.service``).
        timeout_s: wall seconds a call may take before it counts as failed.
        simulated_latency: ``0`` (none), a number of seconds, ``"measured"``
            (the call's wall time), or ``{"median": s, "sigma": x}`` for a
            lognormal draw per call.
        rng: random stream for sampled latency.
    """

    def __init__(self, env: simpy.Environment, service, *, timeout_s: float = 5.0,
                 simulated_latency: Any = 0.0, rng: np.random.Generator | None = None):
        self.env = env
        self.service = service
        self.timeout_s = timeout_s
        self.latency = simulated_latency
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self._pending: tuple[str, dict, simpy.Event] | None = None
        self._signal: simpy.Event | None = None
        self.calls = 0
        self.wall_seconds = 0.0
        self.simulated_delay = 0.0

    # -- the backend the hub calls (runs inside SimPy) -----------------------------
    def runtime(self, batch: dict) -> Generator:
        """Pre-run predictions from the service (a generator the scheduler runs)."""
        return self._request("runtime", batch)

    def remaining(self, batch: dict) -> Generator:
        """Remaining-time predictions from the service (a generator the scheduler runs)."""
        return self._request("remaining", batch)

    def _request(self, kind: str, batch: dict) -> Generator:
        event = self.env.event()
        self._pending = (kind, batch, event)
        if self._signal is not None and not self._signal.triggered:
            self._signal.succeed()
        result = yield event
        if isinstance(result, ServiceFailure):
            raise result
        values, version, seconds = result
        delay = self._delay(seconds)
        if delay > 0:
            self.simulated_delay += delay
            yield self.env.timeout(delay)
        return values, version

    def _delay(self, seconds: float) -> float:
        lat = self.latency
        if lat in (None, 0, 0.0):
            return 0.0
        if lat == "measured":
            return float(seconds)
        if isinstance(lat, dict):
            median, sigma = float(lat.get("median", 0.0)), float(lat.get("sigma", 0.0))
            return float(median * math.exp(sigma * self.rng.standard_normal())) if median > 0 else 0.0
        return float(lat)

    # -- the asyncio side ------------------------------------------------------------
    async def _answer(self, kind: str, batch: dict):
        t0 = time.perf_counter()
        try:
            result = await asyncio.wait_for(getattr(self.service, kind)(batch), self.timeout_s)
        except TimeoutError:
            return ServiceFailure("timeout")
        except Exception as exc:   # any service failure becomes a counted fallback
            return ServiceFailure(str(getattr(exc, "reason", "") or type(exc).__name__))
        finally:
            self.calls += 1
            self.wall_seconds += time.perf_counter() - t0
        values = np.asarray(result.values, dtype=np.float64)
        return values, str(result.model_version), float(getattr(result, "seconds", 0.0))

    async def run(self, finished: simpy.Event, until: float | None = None,
                  on_advance: Callable[[], None] | None = None) -> None:
        """Run the simulation until ``finished`` fires (or ``until``), serving its batches.

        ``on_advance`` is called each time the simulation has advanced (a
        progress bar's update).
        """
        env = self.env
        while True:
            if self._pending is None:
                if finished.triggered or (until is not None and env.now >= until):
                    break
                self._signal = env.event()
                stop = [self._signal, finished]
                if until is not None:
                    stop.append(env.timeout(max(0.0, until - env.now)))
                env.run(until=simpy.AnyOf(env, stop))
                self._signal = None
                if on_advance is not None:
                    on_advance()
                continue
            kind, batch, event = self._pending
            self._pending = None
            event.succeed(await self._answer(kind, batch))
