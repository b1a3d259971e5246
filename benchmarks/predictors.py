"""Benchmark of the predictors: training time, batched inference latency, evaluation table.

Run from the repository root::

    python benchmarks/predictors.py                 # 20k training jobs, 5k held out
    python benchmarks/predictors.py --train 5000 --test 2000 --epochs 4   # quicker

One generated VASP data set (``predictors.dataset.generate_dataset``) is
split by submit order: the first ``--train`` jobs train the models, the
next ``--test`` jobs are held out (same centre, later jobs: what a site
that trains on its own history sees). Prints:

* training time of the XGBoost pre-run model and of the RNN remaining-time
  model (which includes its out-of-fold pre-run predictions);
* latency of one batched remaining-time call for ``--running`` running jobs
  cut at random points of their runs: with cached pre-run predictions (how a
  prediction service calls it; pre-run predictions do not change while a job
  runs), given completed ionic steps only or SCF progress too, and with the
  XGBoost pre-run prediction recomputed in the call;
* the evaluation table (:func:`predictors.evaluate.format_table`) on the
  held-out jobs, and the quality targets checked against it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.dataset import generate_dataset  # noqa: E402
from predictors.evaluate import evaluate, format_table, read_data  # noqa: E402
from predictors.history import UserHistoryRegressor  # noqa: E402
from predictors.remaining import RemainingTimeRegressor, scf_done_at  # noqa: E402
from predictors.runtime import RuntimeRegressor  # noqa: E402


def _latency(fn, repeats: int) -> tuple[float, float]:
    fn()  # warm-up: first calls pay for thread pools and allocations
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(np.min(times))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=20000, help="training jobs")
    ap.add_argument("--test", type=int, default=5000, help="held-out jobs")
    ap.add_argument("--running", type=int, default=10000, help="jobs per inference batch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=None, help="RNN epochs (default: model's)")
    ap.add_argument("--threads", type=int, default=1, help="training threads")
    ap.add_argument("--no-progress", default="prerun", choices=("prerun", "network"))
    ap.add_argument("--json", type=Path, default=None, help="write figures here")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = generate_dataset(args.train + args.test, args.seed, Path(tmp) / "data")
        data = read_data(folder)
        gen_s = time.perf_counter() - t0
    order = np.argsort(np.asarray(data.jobs["submit"]), kind="stable")
    train, test = data.take(order[:args.train]), data.take(order[args.train:])
    X, y = train.matrix(), train.runtime
    print(f"data: {args.train} training + {args.test} held-out jobs generated in {gen_s:.1f} s "
          f"({train.progress.values.shape[0]} training progress rows)")

    t0 = time.perf_counter()
    rt = RuntimeRegressor(n_jobs=args.threads, random_state=args.seed).fit(X, y)
    rt_s = time.perf_counter() - t0
    params = {"no_progress": args.no_progress, "num_threads": args.threads,
              "random_state": args.seed, "runtime_model": rt,
              "categorical_columns": train.spec.categorical_columns}
    if args.epochs is not None:
        params["epochs"] = args.epochs
    t0 = time.perf_counter()
    rem = RemainingTimeRegressor(**params).fit(X, train.progress, y)
    rem_s = time.perf_counter() - t0
    hist = UserHistoryRegressor().fit(train.jobs)
    p = rem.get_params()
    print(f"train runtime (XGBoost, {rt.n_estimators} trees, depth {rt.max_depth}, "
          f"{args.threads} thread): {rt_s:.1f} s")
    print(f"train remaining ({p['rnn'].upper()} {p['hidden_size']} + MLP {p['mlp_hidden']}, "
          f"window {p['window']}, {p['epochs']} epochs, {args.threads} thread): {rem_s:.1f} s; "
          f"final loss {rem.loss_curve_[-1]:.4f}")

    # one batched call for N running jobs at random points of their runs
    rng = np.random.default_rng(args.seed)
    pool = test if len(test.runtime) >= args.running else train
    idx = rng.choice(len(pool.runtime), args.running, replace=len(pool.runtime) < args.running)
    Xr, pr, yr = pool.matrix()[idx], pool.progress.take(idx), pool.runtime[idx]
    now = rng.uniform(0.0, 1.0, args.running) * yr
    running = pr.prefix(now)
    cached = rem.predict_runtime(Xr)
    n_prog = int((running.lengths() > 0).sum())
    lat = {}
    scf = scf_done_at(pr, now)
    n_scf = int(((running.lengths() > 0) | (scf > 0)).sum())
    for threads in (1, 2):
        rem.set_params(num_threads=threads)
        lat[f"cached_{threads}"] = _latency(lambda: rem.predict(Xr, running, now, prerun=cached), 9)
        lat[f"scf_{threads}"] = _latency(
            lambda: rem.predict(Xr, running, now, prerun=cached, scf_done=scf), 9)
        lat[f"full_{threads}"] = _latency(lambda: rem.predict(Xr, running, now, scf_done=scf), 5)
    rem.set_params(num_threads=1)
    print(f"\ninference: {args.running} running jobs in one call; median / best of repeated "
          f"calls. Through the RNN: {n_prog} jobs with a completed ionic step, {n_scf} when "
          "SCF progress is given too")
    whats = {"cached": "ionic only", "scf": "with SCF", "full": "SCF + XGBoost"}
    for key, (med, best) in lat.items():
        kind, threads = key.split("_")
        what = whats[kind]
        print(f"  {what:<15} torch threads {threads}: {1000 * med:7.1f} ms / {1000 * best:6.1f} ms")

    result = evaluate(test, runtime_model=rt, remaining_model=rem, history_model=hist)
    print()
    print(format_table(result))
    checks = _targets(result)
    print("\nquality targets:")
    for name, ok in checks.items():
        print(f"  [{'x' if ok else ' '}] {name}")
    figures = {"train_runtime_s": rt_s, "train_remaining_s": rem_s,
               "latency_ms": {k: 1000 * v[0] for k, v in lat.items()},
               "params": {k: v for k, v in p.items() if k != "runtime_model"},
               "evaluation": result, "targets": checks}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return figures


def _targets(result: dict) -> dict[str, bool]:
    rt, rem = result["runtime"], result["remaining"]
    half = rem["fractions"].index(0.5)
    out = {}
    for model, label in (("rnn_scf", "in-run with SCF progress"), ("rnn", "in-run, ionic steps only")):
        tot = rem[model]["by_fraction"]["total"]
        pre = rem["prerun"]["by_fraction"]["total"]
        mapes = [r["mape"] for r in tot["overall"]]
        out[f"{label}: MAPE of implied run time, all fractions <= 10.3 % (RLSchert Table 5)"] = \
            rem[model]["pooled"]["total"]["overall"]["mape"] <= 0.103
        out[f"{label}: MAPE falls with elapsed fraction"] = all(
            b <= a for a, b in zip(mapes, mapes[1:], strict=False))
        out[f"{label}: >= 3x better than pre-run at 50 % elapsed"] = \
            3 * tot["overall"][half]["mape"] <= pre["overall"][half]["mape"]
        out[f"{label}: >= 3x better than pre-run at 50 % elapsed, multi-ionic"] = \
            3 * tot["multi"][half]["mape"] <= pre["multi"][half]["mape"]
    out["pre-run (XGBoost) MAPE < user history MAPE"] = \
        rt["xgboost"]["overall"]["mape"] < rt["user_history"]["overall"]["mape"]
    out["user history MAPE < user estimate MAPE"] = \
        rt["user_history"]["overall"]["mape"] < rt["user_estimate"]["overall"]["mape"]
    return out


if __name__ == "__main__":
    main()
