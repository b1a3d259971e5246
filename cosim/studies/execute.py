"""Running a study: one run, and every pending run serially or on Ray (through the one
engine, :mod:`cosim.engine`), resumable.

Each run writes ``run.json`` (``pending``, then ``ok`` or ``error``) beside
its results, with the digest of what it ran; running the study again skips
finished runs of the same digest. See :mod:`cosim.studies` for the folder.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from agents.registry import learner
from cosim import records
from cosim.config import scenario_from_dict
from cosim.engine import Engine, Lost, one_line
from cosim.errors import CosimError, InputError
from cosim.studies.plan import _resolved_study, _scenario_set, _shape, plan_study
from cosim.studies.report import _stats_table, study_rows, write_study_report, write_study_table
from cosim.studies.schema import RunSpec, StudyPlan
from cosim.studies.stats import summarize_study

__all__ = ["run_study", "execute_run"]

# -----------------------------------------------------------------------------------
# One run (in a Ray worker, or in this process)
# -----------------------------------------------------------------------------------
def execute_run(spec: RunSpec, driver_node: str | None = None) -> dict[str, Any]:
    """Run one study run and return its record; never raises for a failing run.

    A policy run is :func:`cosim.compose.run_policy` (the same folder as
    ``python -m cosim run`` writes per policy). A training run is
    :func:`agents.ppo.train` (or A2C) with ``resume=True``, so an
    interrupted training run continues from its last checkpoint; its summary
    holds the learning curve's columns averaged over the last 10 % of updates
    (at least one), plus ``updates``, ``global_step`` and ``train_seconds``.

    On a Ray node other than ``driver_node`` the run writes to a temporary
    folder and returns the files' bytes, so a cluster needs no shared file
    system for results.

    Returns:
        ``{"status": "ok" | "error", "summary", "error", "traceback", "seconds",
        "host", "files"}``.
    """
    t0 = time.perf_counter()
    record: dict[str, Any] = {"status": "ok", "summary": None, "error": "", "traceback": "",
                              "host": socket.gethostname(), "files": None}
    try:
        remote = driver_node is not None and _node_id() != driver_node
        target = Path(tempfile.mkdtemp(prefix="cosim-run-")) if remote else Path(spec.out_dir)
        try:
            run = _train_run if spec.kind == "train" else _policy_run
            record["summary"] = run(spec, target)
            if remote:
                record["files"] = {str(p.relative_to(target)): p.read_bytes()
                                   for p in sorted(target.rglob("*")) if p.is_file()}
        finally:
            if remote:
                shutil.rmtree(target, ignore_errors=True)
    except CosimError as exc:
        record.update(status="error", error=str(exc))
    except Exception as exc:   # a bug or a broken input: keep the traceback for run.json
        record.update(status="error", error=one_line(exc), traceback=traceback.format_exc())
    record["seconds"] = time.perf_counter() - t0
    return record


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _policy_run(spec: RunSpec, target: Path) -> dict[str, Any]:
    from cosim.compose import run_policy

    scenario = scenario_from_dict(spec.scenario, spec.scenario_path)
    return run_policy(scenario, spec.policy, target, base_dir=spec.base_dir)


def _train_run(spec: RunSpec, target: Path) -> dict[str, Any]:
    import functools

    from cosim.compose import make_env, pin_scales

    cfg = spec.train
    scen_values = {k: v for k, v in spec.values.items() if not k.startswith("train.")}
    env_config = {"scenario": spec.scenario_path, "scenario_set": _scenario_set(scen_values, spec.seed),
                  **cfg["env"]}
    # As `python -m agents train`: pin the scales of the training workload.
    pin_scales(env_config).close()
    algo = learner(cfg["algo"], where="train.algo")
    args = algo.args_class()(**{**cfg["args"], "seed": spec.seed})
    result = algo.train(functools.partial(make_env, env_config), args, out_dir=target,
                        resume=True, env_config=env_config)
    curve = result.curve
    tail = curve[-max(1, math.ceil(len(curve) / 10)):] if curve else []
    summary: dict[str, Any] = {}
    skip = {"update", "global_step", "lr", "fps", "elapsed_s", "epochs"}
    for key in (curve[0] if curve else {}):
        if key in skip:
            continue
        vals = np.array([row[key] for row in tail], dtype=float)
        vals = vals[np.isfinite(vals)]
        summary[key] = float(vals.mean()) if len(vals) else None
    summary.update(updates=result.update, global_step=result.global_step,
                   train_seconds=curve[-1]["elapsed_s"] if curve else 0.0,
                   finished=bool(result.finished))
    return summary


# -----------------------------------------------------------------------------------
# Executing a plan: skip what is done, run the rest, record every run
# -----------------------------------------------------------------------------------
def _read_record(spec: RunSpec) -> dict[str, Any] | None:
    path = Path(spec.out_dir) / "run.json"
    if not path.is_file():
        return None
    try:
        doc = records.read_json(path)
    except InputError:
        return None
    return doc if isinstance(doc, dict) else None


def _finished(spec: RunSpec) -> dict[str, Any] | None:
    doc = _read_record(spec)
    if doc and doc.get("status") == "ok" and doc.get("digest") == spec.digest:
        return doc
    return None


def _prepare(spec: RunSpec) -> None:
    """Make the run's folder ready: a training run of the same digest keeps its checkpoints."""
    out = Path(spec.out_dir)
    doc = _read_record(spec)
    keep = spec.kind == "train" and doc is not None and doc.get("digest") == spec.digest
    if out.exists() and not keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    records.write_json_atomic(out / "run.json", _record_doc(spec, {"status": "pending"}))


def _record_doc(spec: RunSpec, result: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "run/1", "status": result.get("status"), "digest": spec.digest,
            "kind": spec.kind, "setting": spec.setting, "seed": spec.seed, "policy": spec.policy,
            "values": spec.values, "error": result.get("error", ""),
            "traceback": result.get("traceback", ""), "seconds": result.get("seconds"),
            "host": result.get("host"), "finished_at": time.time(),
            "summary": result.get("summary")}


def _store(spec: RunSpec, result: dict[str, Any]) -> dict[str, Any]:
    """Write a finished run's files (from a remote node) and its ``run.json``."""
    out = Path(spec.out_dir)
    for rel, data in (result.get("files") or {}).items():
        records.write_bytes_atomic(out / rel, data)
    doc = _record_doc(spec, result)
    records.write_json_atomic(out / "run.json", doc)
    return doc


@dataclass
class _Progress:
    """Runs done, running and failed, on a tqdm bar (stderr)."""

    total: int
    quiet: bool
    done: int = 0
    failed: int = 0
    running: int = 0
    bar: Any = None

    def __post_init__(self):
        if not self.quiet and self.total:
            from cosim.cli import progress_bar as tqdm  # no \r frames in logs

            self.bar = tqdm(total=self.total, unit="run", desc="runs", file=sys.stderr,
                            dynamic_ncols=True)
            self._show()

    def _show(self):
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.running} running, {self.failed} failed",
                                     refresh=False)

    def set_running(self, n: int) -> None:
        """Runs in flight now."""
        self.running = n
        self._show()

    def finished(self, ok: bool) -> None:
        """One more run finished (``ok`` or failed)."""
        self.done += 1
        self.failed += not ok
        if self.bar is not None:
            self.bar.update(1)
        self._show()

    def close(self) -> None:
        """Remove the bar."""
        if self.bar is not None:
            self.bar.close()


def _execute_run(driver_node: str | None, spec: RunSpec) -> dict[str, Any]:
    """:func:`execute_run` as the engine's task (``driver_node``: the state every run shares)."""
    return execute_run(spec, driver_node)


def _results(specs: Sequence[RunSpec], session, workers: int | None, progress: _Progress
             ) -> Iterator[tuple[RunSpec, dict[str, Any]]]:
    """Each pending run on the engine (:mod:`cosim.engine`), in this process or, with a
    Ray ``session``, one Ray task each; a run whose worker died is an error record."""
    driver = None if session is None else session.ray.get_runtime_context().get_node_id()
    with Engine(driver, ray=session, workers=workers) as engine:
        for spec, result in engine.stream(_execute_run, specs, before=_prepare,
                                          running=progress.set_running):
            if isinstance(result, Lost):
                result = {"status": "error", "seconds": None, "host": None,
                          "error": result.error}
            yield spec, result


def _prepare_models(plan: StudyPlan, pending: Sequence[RunSpec]) -> None:
    """Train (or find in the cache) the predictors pending runs need, once, here."""
    from cosim.compose import prepare_models
    from cosim.policies import parse_policy

    seen = set()
    for spec in pending:
        if spec.kind != "policy":
            continue
        scenario = scenario_from_dict(spec.scenario, spec.scenario_path)
        pred = parse_policy(spec.policy).resolved(scenario.predictor.runtime,
                                                 scenario.predictor.kill.enabled).predictor
        key = json.dumps(spec.scenario.get("predictor"), sort_keys=True) + json.dumps(
            spec.scenario.get("workload"), sort_keys=True)
        if pred in ("xgboost", "rnn") and (key, pred) not in seen:
            seen.add((key, pred))
            if scenario.prediction_service.backend != "http":
                prepare_models(scenario, [spec.policy], spec.base_dir,
                               echo=lambda m: print(m, file=sys.stderr))


def run_study(path: str | os.PathLike, *, out: str | os.PathLike | None = None,
              address: str | None = None, workers: int | None = None, serial: bool = False,
              dry_run: bool = False, quiet: bool = False,
              echo: Callable[[str], None] | None = print) -> int:
    """Run a study: every missing run on Ray, then ``study.parquet`` and the report.

    Args:
        path: the study file.
        out: the results folder (default ``results/<name>``).
        address: None (a local Ray in this process), ``"auto"`` or ``"HOST:PORT"``.
            A Ray that is already initialized (a notebook, the tests) is used as it is.
        workers: runs at once (default: the CPUs of the Ray cluster; of a local
            Ray, the machine's cores).
        serial: run in this process, one run after another, without Ray (also what
            happens, with a note, when Ray is not installed and no address is given).
        dry_run: check the study and say what would run; run and write nothing.
        quiet: no progress bar.
        echo: where the summary lines go (None: nowhere).

    Returns:
        0 when every run succeeded, 1 when some failed (they are in the table
        and the report with their errors).

    Raises:
        InputError: a bad study (nothing is run or written).
        KeyboardInterrupt: interrupted; finished runs are kept for the next run.
    """
    say = echo or (lambda _m: None)
    if workers is not None and workers < 1:
        raise InputError("--workers", str(workers), "a positive number of runs at once")
    plan = plan_study(path, out)
    out_dir = plan.out
    done: dict[str, dict[str, Any]] = {}
    pending = []
    for spec in plan.runs:
        doc = _finished(spec)
        if doc is not None:
            done[spec.out_dir] = doc
        else:
            pending.append(spec)
    shape = _shape(plan)
    if dry_run:
        say(f"study {plan.name}: {len(plan.runs)} runs ({shape}); {len(done)} finished earlier, "
            f"{len(pending)} to run; results in {out_dir}/")
        for label, values in plan.settings:
            say(f"  setting {label}: " + (", ".join(f"{k}={v}" for k, v in values.items())
                                         or "no grid"))
        return 0
    # Connect first, then write: a wrong address leaves nothing behind.
    session = None
    how = "in this process"
    if pending and not serial and address is None and importlib.util.find_spec("ray") is None:
        print("note: Ray is not installed (pip install -e \".[ray]\"); running the runs one "
              "after another in this process", file=sys.stderr)
        serial = True
    if pending and not serial:
        from cosim.distributed import ray_session

        session = ray_session(address, num_cpus=workers, what="python -m cosim sweep")
        workers = workers or session.cpus
        how = (f"on {'a local Ray' if session.address is None else 'Ray at ' + session.address}"
               f" ({session.cpus} CPUs, {workers} at once)")
    say(f"study {plan.name}: {len(plan.runs)} runs ({shape}); {len(done)} finished earlier, "
        f"{len(pending)} to run{' ' + how if pending else ''}")
    try:
        if pending and plan.kind == "policy":
            _prepare_models(plan, pending)
        out_dir.mkdir(parents=True, exist_ok=True)
        records.write_bytes_atomic(out_dir / "study.yaml", yaml.safe_dump(
            _resolved_study(plan), sort_keys=False))
        for spec in plan.runs:
            scen = spec.group_dir / "scenario.yaml"
            if spec.kind == "policy" and not scen.exists():
                records.write_bytes_atomic(scen, yaml.safe_dump(spec.scenario, sort_keys=False))
    except BaseException:
        if session is not None:
            session.close()
        raise
    progress = _Progress(len(pending), quiet)
    t0 = time.perf_counter()
    try:
        for spec, result in _results(pending, session, workers, progress):
            done[spec.out_dir] = _store(spec, result)
            progress.finished(result["status"] == "ok")
    except KeyboardInterrupt:
        progress.close()
        # Count from the run records: the interrupt may have come after a record was written.
        finished = sum(1 for r in plan.runs if _finished(r) is not None)
        print(f"interrupted: {finished} of {len(plan.runs)} runs finished; run the same command "
              "again to finish the rest", file=sys.stderr)
        raise
    finally:
        progress.close()
        if session is not None:
            session.close()
    wall = time.perf_counter() - t0
    _write_comparisons(plan, done)
    rows = study_rows(plan, done)
    stats = summarize_study(plan, rows)    # checks the metric names before writing
    write_study_table(out_dir / "study.parquet", plan, rows)
    records.write_json_atomic(out_dir / "report.json", {
        "schema": "study-report/1", "study": plan.name, "confidence": plan.study.confidence,
        "bootstrap": plan.study.bootstrap, "method": "BCa", "metrics": list(plan.metrics),
        "rows": stats})
    failed = [r for r in rows if r["status"] != "ok"]
    if pending:
        say(f"{len(pending)} runs in {wall:.1f} s ({wall / len(pending):.2f} s a run)")
    say(_stats_table(plan, stats))
    for r in failed[:5]:
        say(f"failed: {r['dir']}: {r['error']}")
    if len(failed) > 5:
        say(f"... and {len(failed) - 5} more failed runs (study.parquet, column error)")
    report = write_study_report(out_dir, plan, rows, stats) if plan.study.plots else None
    say(f"results: {out_dir}/  table: {out_dir / 'study.parquet'}"
        + (f"  report: {report}" if report else ""))
    return 1 if failed else 0


def _write_comparisons(plan: StudyPlan, done: dict[str, dict[str, Any]]) -> None:
    """``comparison.json`` in every (setting, seed) folder whose policy runs all succeeded,
    so that ``python -m cosim report`` works on it as on a ``cosim run`` folder."""
    if plan.kind != "policy":
        return
    groups: dict[Path, list[RunSpec]] = {}
    for spec in plan.runs:
        groups.setdefault(spec.group_dir, []).append(spec)
    for group, specs in groups.items():
        docs = [done.get(s.out_dir) for s in specs]
        if not all(d is not None and d["status"] == "ok" for d in docs):
            continue
        records.write_json_atomic(group / "comparison.json", {
            "schema": "comparison/1", "scenario": specs[0].scenario.get("name"),
            "policies": [{"policy": s.policy, "dir": Path(s.out_dir).name} for s in specs],
            "summaries": {s.policy: d["summary"] for s, d in zip(specs, docs)}})
