"""Co-simulation through the prediction service: in process, over HTTP, and failing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from predictors.bundle import ensure_models
from predictors.server import ServerProcess

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    cache = tmp_path_factory.mktemp("models")
    return ensure_models(cache, jobs=600, seed=3, remaining=True, epochs=2,
                         generator_params={"population_seed": 5, "mean_interarrival": 200},
                         echo=None)


def cosim_run(out, models, *sets, policy="sjf+easy@rnn", jobs=200):
    args = [sys.executable, "-m", "cosim", "run", "scenarios/vasp.yaml", "--policy", policy,
            "--set", f"workload.jobs={jobs}", "--set", f"predictor.models={models}",
            "--set", "predictor.update_interval=200", "--out", str(out), "--no-plots", "--quiet"]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def summary(out, policy="sjf+easy@rnn"):
    return json.loads((out / policy / "summary.json").read_text())["metrics"]


def test_inprocess_and_http_give_identical_jobs_parquet(models, tmp_path):
    outs = {}
    with ServerProcess(models) as server:
        # The three runs are independent processes: run them side by side.
        procs = {backend: cosim_run(tmp_path / backend, models,
                                    f"prediction_service.backend={backend}",
                                    f"prediction_service.url={server.url}")
                 for backend in ("none", "inprocess", "http")}
        for backend, proc in procs.items():
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            outs[backend] = (tmp_path / backend / "sjf+easy@rnn" / "jobs.parquet").read_bytes()
    assert outs["none"] == outs["inprocess"] == outs["http"]
    s = summary(tmp_path / "http")
    assert s["prediction_fallbacks"] == 0 and s["remaining_predictions"] > 0
    assert s["prediction_service_seconds"] > 0


def served(url):
    with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
        return json.loads(r.read())["served"]


def test_server_killed_mid_run_falls_back_and_the_run_completes(models, tmp_path):
    out = tmp_path / "killed"
    server = ServerProcess(models)
    proc = cosim_run(out, models, "prediction_service.backend=http",
                     f"prediction_service.url={server.url}", "prediction_service.timeout_s=2",
                     jobs=400)
    deadline = time.monotonic() + 120
    while served(server.url) < 30 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.proc.kill()                      # no goodbye: connections just drop
    server.proc.wait()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    s = summary(out)
    assert s["prediction_fallbacks"] > 0
    assert set(s["prediction_fallback_reasons"]) <= {"unavailable", "timeout", "ServiceUnavailable",
                                                     "circuit open"}
    assert s["runtime_predictions"] + s["remaining_predictions"] > 0
    assert s["jobs_finished"] == 400
    from cosim.records import read_jobs
    assert len(read_jobs(out / "sjf+easy@rnn" / "jobs.parquet")["job_id"]) == 400
    assert not list(out.rglob("*.tmp"))


def test_simulated_latency_delays_decisions(models, tmp_path):
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    for out, lat in ((fast, 0), (slow, 600)):
        proc = cosim_run(out, models, "prediction_service.backend=inprocess",
                         f"prediction_service.simulated_latency={lat}", policy="sjf+easy@xgboost")
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    # Every decision point waits 10 simulated minutes for its predictions.
    assert summary(slow, "sjf+easy@xgboost")["wait_mean"] > \
        summary(fast, "sjf+easy@xgboost")["wait_mean"] + 300


def test_unreachable_server_is_one_clear_line(models, tmp_path):
    proc = cosim_run(tmp_path / "o", models, "prediction_service.backend=http",
                     "prediction_service.url=http://127.0.0.1:9", "prediction_service.timeout_s=1")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err.strip().count("\n") == 0 and "prediction_service.url" in err


def test_server_dead_between_two_policies_falls_back_and_the_run_completes(models, tmp_path,
                                                                          monkeypatch, capsys):
    from cosim.__main__ import main
    from cosim.compose import run as runner

    server = ServerProcess(models)
    real = runner.run_policy
    done = []

    def then_kill_the_server(*args, **kwargs):
        summary = real(*args, **kwargs)
        if not done:
            server.proc.kill()               # between the first and the second policy
            server.proc.wait()
        done.append(summary)
        return summary

    monkeypatch.setattr(runner, "run_policy", then_kill_the_server)
    out = tmp_path / "between"
    code = main(["run", "scenarios/vasp.yaml", "--policy", "sjf+easy@xgboost", "--policy",
                 "saf+easy@xgboost", "--set", "workload.jobs=150", "--set",
                 f"predictor.models={models}", "--set", "prediction_service.backend=http",
                 "--set", f"prediction_service.url={server.url}", "--set",
                 "prediction_service.timeout_s=2", "--out", str(out), "--no-plots", "--quiet"])
    server.stop()
    captured = capsys.readouterr()
    assert code == 0, captured.err
    table = captured.out.splitlines()
    assert [ln.split()[0] for ln in table[2:4]] == ["sjf+easy@xgboost", "saf+easy@xgboost"]
    first, second = summary(out, "sjf+easy@xgboost"), summary(out, "saf+easy@xgboost")
    assert first["prediction_fallbacks"] == 0 and first["runtime_predictions"] == 150
    assert second["prediction_fallbacks"] == second["prediction_batches"] > 0
    # three refused connections open the client's breaker; the rest fall back at once
    assert second["prediction_fallback_reasons"] == {
        "unavailable": 3, "circuit open": second["prediction_batches"] - 3}
    assert second["runtime_predictions"] == 0 and second["jobs_finished"] == 150


@pytest.fixture
def hung_server(models):
    """A server that lists its models, then never answers a prediction (connection open)."""
    import asyncio
    import threading

    from aiohttp import web

    from predictors.bundle import ModelBundle
    from predictors.service import describe_models

    info = describe_models(ModelBundle.load(models))
    ready, stop, where = threading.Event(), [], []

    def serve():
        async def listing(request):
            return web.json_response(info)

        async def hang(request):
            await asyncio.sleep(3600)

        async def main():
            app = web.Application()
            app.router.add_get("/models", listing)
            app.router.add_post("/v1/runtime", hang)
            app.router.add_post("/v1/remaining", hang)
            runner = web.AppRunner(app, shutdown_timeout=0.1)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            where.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
            done = asyncio.Event()
            stop.append((asyncio.get_running_loop(), done))
            ready.set()
            await done.wait()
            await runner.cleanup()

        asyncio.run(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30)
    yield where[0]
    loop, done = stop[0]
    loop.call_soon_threadsafe(done.set)
    thread.join(10)


def test_hung_server_costs_three_timeouts_not_the_run(models, hung_server, tmp_path, capsys):
    """Connection open, no answer: the breaker opens after 3 timeouts and the run of
    hundreds of decision points ends at once, every batch on user estimates.
    (Without the breaker each batch would wait the 0.5 s timeout.)"""
    from cosim.__main__ import main

    out = tmp_path / "hung"
    code = main(["run", "scenarios/vasp.yaml", "--policy", "sjf+easy@rnn", "--set",
                 "workload.jobs=200", "--set", f"predictor.models={models}", "--set",
                 "predictor.update_interval=200", "--set", "prediction_service.backend=http",
                 "--set", f"prediction_service.url={hung_server}", "--set",
                 "prediction_service.timeout_s=0.5", "--out", str(out), "--no-plots", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    s = summary(out)
    assert s["jobs_finished"] == 200 and s["prediction_batches"] > 100
    assert s["prediction_fallbacks"] == s["prediction_batches"]
    assert s["prediction_fallback_reasons"] == {"timeout": 3,
                                                "circuit open": s["prediction_batches"] - 3}
    assert s["runtime_predictions"] == s["remaining_predictions"] == 0
