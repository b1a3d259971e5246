"""Load on the loopback prediction server: many concurrent clients, no errors.

Each client is an :class:`predictors.service.HttpService` with its own
connection, sending small runtime and remaining batches in turn as fast as
it is answered. Throughput and latency are printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from predictors.server import ServerProcess
from predictors.service import HttpService, ServiceError, dataset_batch

JOBS_PER_REQUEST = 8


@pytest.fixture(scope="module")
def server(service_models):
    with ServerProcess(service_models) as srv:
        yield srv


def run_load(url: str, batches: dict, clients: int, seconds: float) -> dict:
    """Drive ``clients`` concurrent clients for ``seconds``; returns counts and latencies."""
    latencies: list[float] = []
    errors: list[str] = []
    versions: set[str] = set()

    async def client(i: int, stop: float) -> None:
        async with HttpService(url, timeout_s=60.0) as svc:
            k = i   # clients start on different kinds
            while time.monotonic() < stop:
                kind = ("runtime", "remaining")[k % 2]
                k += 1
                t0 = time.perf_counter()
                try:
                    answer = await getattr(svc, kind)(batches[kind])
                except ServiceError as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                latencies.append(time.perf_counter() - t0)
                versions.add(answer.model_version)
                if answer.values.shape != (JOBS_PER_REQUEST,) or not np.all(
                        np.isfinite(answer.values)):
                    errors.append(f"bad answer {answer.values!r}")

    async def main() -> float:
        t0 = time.monotonic()
        await asyncio.gather(*[client(i, t0 + seconds) for i in range(clients)])
        return time.monotonic() - t0

    wall = run_async(main())
    lat = np.asarray(latencies)
    result = {"clients": clients, "requests": len(lat), "errors": errors, "wall_s": wall,
              "versions": versions, "rps": len(lat) / wall,
              "p50_ms": float(np.median(lat) * 1e3) if len(lat) else float("nan"),
              "p99_ms": float(np.quantile(lat, 0.99) * 1e3) if len(lat) else float("nan")}
    print(f"\n{clients} clients x {seconds:g} s, {JOBS_PER_REQUEST} jobs per request: "
          f"{result['requests']} requests, {result['rps']:.0f} req/s "
          f"({result['rps'] * JOBS_PER_REQUEST:.0f} predictions/s), "
          f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, "
          f"{len(errors)} errors")
    return result


def run_async(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def batches(service_data):
    return {kind: dataset_batch(service_data, kind=kind, n=JOBS_PER_REQUEST)
            for kind in ("runtime", "remaining")}


def check(result, server):
    assert result["errors"] == [], result["errors"][:5]
    assert result["requests"] >= result["clients"], "not every client was answered once"
    assert len(result["versions"]) == 1
    assert server.proc.poll() is None, server.stderr()


def test_load_50_clients_3_seconds(server, batches):
    check(run_load(server.url, batches, clients=50, seconds=3.0), server)


@pytest.mark.slow
def test_load_200_clients_20_seconds(server, batches):
    check(run_load(server.url, batches, clients=200, seconds=20.0), server)
