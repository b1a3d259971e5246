"""Benchmark of the prediction service: predictions per second, in process and over HTTP.

Run from the repository root::

    python benchmarks/service.py                       # trains a small bundle first (cached)
    python benchmarks/service.py --models models/vasp --seconds 3 --json service.json

For the pre-run (``runtime``) and the remaining-time (``remaining``) call,
measures the wall time of one call and the predictions per second it gives:

* ``inprocess``: :class:`predictors.service.InProcessService`, the model in
  the caller's thread; batch size 1 is the unbatched case (one job per call,
  as a scheduler that asked per job would);
* ``inprocess+thread``: the same with ``offload=True`` (one worker thread,
  as the server runs it), to show what the thread hop costs;
* ``http``: :class:`predictors.service.HttpService` against ``python -m
  predictors serve`` on loopback (a separate process), which adds JSON
  encoding, the request, parsing and validation on the server, and the
  answer's JSON.

Batches come from a generated VASP data set (``dataset_batch``); remaining
batches see each job at half its run time. Every figure is the median over
repeated calls for about ``--seconds`` each (at least three calls).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from predictors.bundle import ModelBundle, ensure_models  # noqa: E402
from predictors.dataset import generate_dataset  # noqa: E402
from predictors.server import ServerProcess  # noqa: E402
from predictors.service import (  # noqa: E402
    HttpService,
    InProcessService,
    dataset_batch,
    encode_batch,
)


async def _time_calls(call, seconds: float, min_calls: int = 3) -> list[float]:
    await call()   # warm-up: first calls pay for allocations and connections
    times: list[float] = []
    stop = time.perf_counter() + seconds
    while len(times) < min_calls or time.perf_counter() < stop:
        t0 = time.perf_counter()
        await call()
        times.append(time.perf_counter() - t0)
    return times


async def _measure(service, kind: str, batch: dict, seconds: float) -> dict:
    fn = getattr(service, kind)
    n = len(batch["job_id"])
    times = await _time_calls(lambda: fn(batch), seconds)
    med = float(np.median(times))
    return {"kind": kind, "n": n, "calls": len(times), "ms_per_call": med * 1e3,
            "predictions_per_s": n / med}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=None,
                    help="models folder (default: train a small one, cached in --cache)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "cosim-models",
                    help="cache folder for the trained bundle")
    ap.add_argument("--train-jobs", type=int, default=2000, help="jobs to train on")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 10000],
                    help="batch sizes (jobs per call)")
    ap.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)

    models = args.models or ensure_models(args.cache, jobs=args.train_jobs, seed=1,
                                          remaining=True)
    bundle = ModelBundle.load(models)
    with tempfile.TemporaryDirectory() as tmp:
        data = generate_dataset(2000, 7, Path(tmp) / "data")
        batches = {(kind, n): dataset_batch(data, kind=kind, n=n)
                   for kind in ("runtime", "remaining") for n in args.sizes}
    print(f"models {models} (version {bundle.version}); "
          f"threads: XGBoost/torch as trained, one per call")
    for (kind, n), batch in batches.items():
        print(f"  {kind:9s} batch of {n:>6d} jobs: {len(encode_batch(batch)) / 1e3:10.1f} kB JSON")

    rows: list[dict] = []

    async def run_inprocess() -> None:
        for backend, offload in (("inprocess", False), ("inprocess+thread", True)):
            async with InProcessService(bundle, offload=offload) as svc:
                for (kind, n), batch in batches.items():
                    if offload and n > 100:
                        continue
                    rows.append({"backend": backend,
                                 **await _measure(svc, kind, batch, args.seconds)})

    asyncio.run(run_inprocess())

    with ServerProcess(models) as server:
        async def run_http() -> None:
            async with HttpService(server.url, timeout_s=300.0) as svc:
                for (kind, _n), batch in batches.items():
                    rows.append({"backend": "http",
                                 **await _measure(svc, kind, batch, args.seconds)})

        asyncio.run(run_http())

    print(f"\n{'backend':18s} {'call':10s} {'jobs/call':>9s} {'calls':>6s} "
          f"{'ms/call':>10s} {'predictions/s':>14s}")
    for r in sorted(rows, key=lambda r: (r["kind"], r["n"], r["backend"])):
        print(f"{r['backend']:18s} {r['kind']:10s} {r['n']:9d} {r['calls']:6d} "
              f"{r['ms_per_call']:10.2f} {r['predictions_per_s']:14,.0f}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
        print(f"\nwrote {args.json}")
    return rows


if __name__ == "__main__":
    main()
