"""One ``agents tune``: the protocol built, the search, the selection, the test read once, the
folder written whole (:func:`tune`)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.tuning.beliefs import (
    belief_rows,
    beliefs_of,
    policy_beliefs,
    refuse_beliefs,
    with_beliefs,
)
from agents.tuning.card import write_folder
from agents.tuning.options import TRAIN_CHUNKS, TRAIN_WINDOWS, Options
from agents.tuning.report import results_of
from agents.tuning.search import filter_training, search
from agents.tuning.select import candidates, choose
from agents.tuning.slurm import tune_slurm
from agents.tuning.space import user_features_choice
from cosim.cli import put_in_place, staged_folder
from cosim.config import Scenario, load_scenario
from cosim.errors import InputError
from cosim.evaluation import (
    CLASSIC,
    Corrected,
    Protocol,
    Scores,
    capacity_of,
    default_processes,
    source_name,
)
from cosim.policies.priority import POLICY_FILE, PriorityWeights, user_history
from cosim.workloads.base import Workload
from cosim.workloads.loading import load_workload

__all__ = ["tune", "prepare", "Run", "Reference"]


def tune(scenario_path: str, overrides: list[str], minutes: float, out: str | Path, *,
         echo=print, **options) -> dict:
    """Search, select on validation, test once; write the policy folder. Returns the results.

    ``options``: the fields of :class:`agents.tuning.options.Options`. The folder is
    written whole or not at all (staged beside ``out``, renamed in:
    :func:`cosim.cli.staged_folder`); an ``out`` that cannot be written is refused
    (:class:`InputError`) before any work.
    """
    out, opts = Path(out), Options(**options)
    stage = staged_folder(out, markers=(POLICY_FILE, "results.json"),
                          kind="a tuned policy folder", writer="'agents tune'")
    try:
        results = _tune(scenario_path, overrides, minutes, stage, opts, echo)
        put_in_place(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    echo(f"wrote {out} (run it with --policy learned:{out})")
    return results


def prepare(scenario_path: str, overrides: list[str], minutes: float, *, echo=print,
            **options) -> Run:
    """The :class:`Run` a tune works on (the scenario and workload loaded, the protocol's
    split built), for a caller that runs a search and selection itself: the experiment
    definitions of ``benchmarks/`` call :func:`agents.tuning.slurm.select_slurm` on it.
    ``options``: the fields of :class:`agents.tuning.options.Options`."""
    return _prepare(scenario_path, overrides, minutes, Options(**options), echo)


@dataclass
class Reference:
    """The heuristics on validation and the reference chosen there."""

    scores: Scores
    lead: str                   # the best by bsld alone: the search starts there
    best: str                   # the reference: the best within the max-wait bound
    bound: float | None         # --max-wait x FCFS+EASY's max wait on validation
    bsld: dict = field(default_factory=dict)    # heuristic -> mean bsld per window
    mw: dict = field(default_factory=dict)      # policy -> max wait over the windows


@dataclass
class Run:
    """What one tune works on: the options, the scenario and workload, the protocol."""

    options: Options
    scenario: Scenario
    workload: Workload
    protocol: Protocol
    minutes: float
    echo: Any
    t_start: float
    user_features: bool = False
    user_features_why: str = ""
    warmup_rows: int = 0
    filter_info: dict | None = None
    val: Reference | None = None

    @property
    def capacity(self) -> int:
        return capacity_of(self.scenario)

    @property
    def processes(self) -> int:
        return self.protocol.processes


def _prepare(scenario_path: str, overrides: list[str], minutes: float, o: Options,
             echo) -> Run:
    """The scenario and workload loaded, the user-history features, the protocol's split."""
    t_start = time.perf_counter()
    if o.minimax and o.evaluation != "running":
        raise InputError("--selection", "minimax with --evaluation windows",
                         "--evaluation running (the past's periods are runs of its spans)")
    scenario = load_scenario(scenario_path, overrides)
    workload = load_workload(scenario, base_dir=Path(scenario_path).parent)
    refuse_beliefs(o.beliefs, scenario, workload)
    user_features, why = user_features_choice(o.user_features, workload)
    if user_features:
        # Once, on the whole trace, so a window's first jobs see the user's history from
        # before the window (recorded completions only: causal by construction).
        workload.features.update(user_history(workload))
    if o.train_windows is None:
        o.train_windows = TRAIN_CHUNKS if o.running else TRAIN_WINDOWS
    # ``all``: every run starts at the trace's first job (split caps it at each span's start).
    warmup_rows = len(workload) if o.warmup == "all" else int(o.warmup)
    protocol = Protocol.chronological(
        scenario, workload, processes=o.processes or default_processes(), seed=o.seed,
        size=o.window_jobs, train_count=o.train_windows, count=o.count, train=o.split[0],
        validation=o.split[1], warmup=warmup_rows, evaluation=o.evaluation)
    run = Run(o, protocol.scenario, workload, protocol, minutes, echo, t_start, user_features,
              why, warmup_rows)
    run.filter_info = filter_training(run)
    sp, f = protocol.split, run.filter_info
    echo(f"tune: {len(workload)} jobs on {run.capacity} units; windows of {o.window_jobs} jobs: "
         + (f"{len(sp.train)} training chunks of {len(sp.train[0])} jobs run whole, "
            f"{len(sp.slices['validation']) - 1} validation and "
            f"{len(sp.slices['test']) - 1} test windows measured inside one run of their span"
            f"; {run.processes} processes" if o.running else
            f"{len(sp.train)} train"
            + ("" if f is None else
               f" ({f['kept'] - f['unchanged']} near-optimal replaced from a "
               f"pool of {f['pool']})" if o.train_filter == "skip" else
               f" (the most contended of {f['pool']} by {o.train_filter})")
            + f", {len(sp.validation)} validation, {sp.test.count} test; "
              f"{run.processes} processes"))
    echo(f"user-history features: {why}")
    return run


def _reference(run: Run, val_eval) -> Reference:
    """The heuristics on validation; the reference chosen there (within the bound)."""
    o = run.options
    scores = run.protocol.score("validation", CLASSIC, val_eval)
    # ``lead``: the best heuristic by bsld alone, where the search starts and what its
    # fitness is measured against; ``best``: the reference selection must beat, the best
    # of the heuristics within the max-wait bound (FCFS+EASY always is).
    lead, best, bound = run.protocol.reference(scores, CLASSIC, o.max_wait)
    ref = Reference(scores, lead, best, bound, {h: scores.bsld(h) for h in CLASSIC},
                    {h: scores.max_wait(h) for h in CLASSIC})
    run.echo("validation mean bsld: " + ", ".join(
        f"{h} {np.mean(v):.2f}" + ("" if bound is None else
                                   f" (max wait {ref.mw[h] / ref.mw['fcfs+easy']:.2f}x)")
        for h, v in ref.bsld.items()) + f"; best {lead}"
        + ("" if best == lead else f"; best within {o.max_wait:g}x FCFS+EASY's max wait {best}"))
    return ref


def _tune(scenario_path: str, overrides: list[str], minutes: float, stage: Path, o: Options,
          echo) -> dict:
    """:func:`tune` with the folder written into ``stage``."""
    run = _prepare(scenario_path, overrides, minutes, o, echo)
    if o.space == "slurm":
        return tune_slurm(run, stage, o.baseline, scenario_path, overrides, cpu_seconds)
    with run.protocol.evaluator("validation") as val_eval:
        run.val = _reference(run, val_eval)
        found = search(run, val_eval)
        choice = candidates(run, found, val_eval)
        rows = belief_rows(run, val_eval)
    choice = with_beliefs(run, choose(run, found, choice), rows)
    # -- the test set, read once -------------------------------------------------------------
    sources = list(CLASSIC) + ([choice.chosen] if choice.chosen_name not in CLASSIC else [])
    test = run.protocol.test(sources)
    results = results_of(run, found, choice, test, scenario_path, overrides, cpu_seconds())
    results["beliefs"] = beliefs_of(run, choice, rows)
    chosen = choice.chosen
    policy = (chosen.as_dict() if isinstance(chosen, PriorityWeights) else
              {"kind": "heuristic", "name": chosen.policy.partition("@")[0],
               **policy_beliefs(chosen)} if isinstance(chosen, Corrected) else
              {"kind": "heuristic", "name": source_name(chosen)})
    write_folder(stage, policy, results)
    return results


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the workers, once joined)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
