"""Results folders: their names, and staging so a folder is replaced whole or not at all.

A run writes into a fresh staging folder beside ``OUT`` (``.OUT.partial-PID``)
and, when everything is written, puts it in place of ``OUT`` in one rename
(the previous ``OUT``, if any, is moved aside first and then deleted). So a
rerun never mixes its files with an earlier run's (no stale policy folders,
plots or report), and an interrupted run leaves ``OUT`` as it was; the staging
folders of killed runs are removed by the next run into the same ``OUT``. A
folder that is not a results folder (no ``scenario.yaml`` or
``comparison.json``, and not empty) is never replaced: the run refuses
before simulating anything.
"""

from __future__ import annotations

from pathlib import Path

from cosim.cli import put_in_place, staged_folder
from cosim.config import Scenario

__all__ = ["policy_dir", "default_out_dir", "prepare_out", "put_in_place"]


def policy_dir(name: str) -> str:
    """The results subfolder of a policy (``rl:runs/a`` -> ``rl_runs_a``)."""
    return name.replace("/", "_").replace(":", "_").strip("._") or "policy"


def default_out_dir(scenario: Scenario) -> Path:
    """``results/<scenario name>``, plus the trace's name for a trace replay.

    ``scenarios/swf.yaml`` on ``RICC-2010-2.swf.gz`` writes
    ``results/swf-RICC-2010-2``, so replays of different traces do not
    overwrite each other.
    """
    wc = scenario.workload
    if wc.kind in ("swf", "slurm") and wc.path:
        name = Path(wc.path).name
        for suffix in (".gz", ".swf", ".txt", ".csv", ".log", ".sacct"):
            name = name.removesuffix(suffix)
        return Path("results") / f"{scenario.name}-{name or wc.kind}"
    return Path("results") / scenario.name


def prepare_out(out: Path) -> Path:
    """Check that ``out`` may be replaced, clean up after killed runs, make the staging folder.

    Raises:
        InputError: ``out`` is a file, a folder that holds something other
            than a results folder, or cannot be made (its parent is a file,
            read-only, ...).
    """
    return staged_folder(out, markers=("comparison.json", "scenario.yaml"),
                         kind="a results folder", writer="'cosim run'")
