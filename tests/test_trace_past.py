"""A window of a trace starts from the trace model of its past: fitted only on jobs finished
before the window's first submit, cached by trace hash, read back by the next run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cosim.compose import run_policy
from cosim.compose.predictions import TraceModels
from cosim.config import load_scenario
from cosim.workloads.base import Workload
from cosim.workloads.windows import window
from predictors.trace_past import past_of_window

ROOT = Path(__file__).resolve().parents[1]


def _swf(path: Path, jobs: int = 700, seed: int = 3, changed: dict[int, int] | None = None):
    """Jobs every 600 s, runs up to 3,000 s (so some overlap), requests 3x the run."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(1, jobs + 1):
        run = int(rng.integers(30, 3000))
        run = (changed or {}).get(i, run)
        lines.append(f"{i} {i * 600} 0 {run} {int(rng.integers(1, 5))} -1 -1 -1 {run * 3} -1 1 "
                     f"{i % 7 + 1} -1 -1 -1 -1 -1 -1")
    path.write_text("; MaxProcs: 16\n" + "\n".join(lines) + "\n")
    return path


def _scenario(trace: Path, cache: Path, offset: int = 500):
    return load_scenario(ROOT / "scenarios" / "swf.yaml", [
        f"workload.path={trace}", f"workload.offset={offset}", "workload.jobs=150",
        f"predictor.cache={cache}"])


def test_the_past_is_exactly_the_jobs_finished_by_the_windows_first_submit():
    submit = np.arange(10) * 100.0
    run = np.array([50, 500, 50, 120, 50, 900, 50, 50, 50, 50], dtype=float)
    whole = Workload.from_columns(submit=submit, run=run, procs=[1] * 10, req_time=run * 2,
                                  user=[1] * 10, features={"wait": np.full(10, 30.0)})
    past = past_of_window(whole, window(whole, 4, start=6))
    # ends: 80, 630, 280, 450, 480, 1430, ...; the window's first submit is 600
    assert past.jobs.job_id.tolist() == [1, 3, 4, 5] and past.start == 600.0
    assert past_of_window(whole, window(whole, 4, start=0)) is None


def test_a_window_starts_on_its_past_model_and_a_second_run_reads_it_from_the_cache(tmp_path):
    trace, cache = _swf(tmp_path / "t.swf"), tmp_path / "cache"
    heard: list[str] = []
    first = TraceModels.for_scenario(_scenario(trace, cache), echo=heard.append)
    stored = list(cache.glob("trace-*"))
    assert len(stored) == 1 and (stored[0] / "model.ubj").is_file() and \
        (stored[0] / "meta.json").is_file()
    assert first.model is not None and "fitting" in heard[-1]
    second = TraceModels.for_scenario(_scenario(trace, cache), echo=heard.append)
    assert heard[-1].endswith("(cached)") and list(cache.glob("trace-*")) == stored
    X = first.model.matrix({n: np.linspace(1, 100, 9) for n in first.model.feature_names})
    assert np.array_equal(first.model.predict(X), second.model.predict(X))
    summary = run_policy(_scenario(trace, cache), "sjf+easy@xgboost", None)
    assert summary["model_versions"] == ["trace-model"]   # from the window's first job on
    assert summary["jobs_finished"] == 150


def test_a_job_still_running_at_the_windows_start_never_reaches_the_past_model(tmp_path):
    """Job 499 (submitted at 299,400) runs past the window's first submit (job 501 at
    300,600) with a 2,000 s run; making it 2,900 s changes the trace (and its hash) but
    not the model: only jobs finished by then are learnt from."""
    base = TraceModels.for_scenario(_scenario(_swf(tmp_path / "a.swf", changed={499: 2000}),
                                              tmp_path / "c1"))
    other = TraceModels.for_scenario(_scenario(_swf(tmp_path / "b.swf", changed={499: 2900}),
                                               tmp_path / "c2"))
    X = base.model.matrix({n: np.linspace(1, 3000, 25) for n in base.model.feature_names})
    assert np.array_equal(base.model.predict(X), other.model.predict(X))
    # a job that had finished does count: the same change to job 400 changes the model
    moved = TraceModels.for_scenario(_scenario(_swf(tmp_path / "d.swf", changed={
        499: 2000, 400: 2900}), tmp_path / "c3"))
    assert not np.array_equal(base.model.predict(X), moved.model.predict(X))
