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

import os
import shutil
from pathlib import Path

from cosim.config import Scenario
from cosim.errors import InputError

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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(out: Path) -> list[tuple[Path, str, int]]:
    """(path, kind, pid) of staging and set-aside folders of runs into ``out``."""
    found = []
    for kind in ("partial", "old"):
        for p in out.parent.glob(f".{out.name}.{kind}-*"):
            pid = p.name.rsplit("-", 1)[-1]
            if pid.isdigit():
                found.append((p, kind, int(pid)))
    return found


def prepare_out(out: Path) -> Path:
    """Check that ``out`` may be replaced, clean up after killed runs, make the staging folder.

    Raises:
        InputError: ``out`` is a file, a folder that holds something other
            than a results folder, or cannot be made (its parent is a file,
            read-only, ...).
    """
    for path, kind, pid in _leftovers(out):
        if pid == os.getpid() or _pid_alive(pid):
            continue   # another run in progress (or this one)
        if kind == "old" and not out.exists():
            os.replace(path, out)   # killed between its two renames: put the results back
        else:
            shutil.rmtree(path, ignore_errors=True)
    if out.exists():
        if not out.is_dir():
            raise InputError(str(out), "a file", "a results folder (--out DIR)")
        if any(out.iterdir()) and not ((out / "comparison.json").exists()
                                       or (out / "scenario.yaml").exists()):
            raise InputError(str(out), "a folder that is not a results folder (no "
                             "comparison.json or scenario.yaml)",
                             "a new or empty folder, or one written by 'cosim run' (it is "
                             "replaced as a whole)", "choose another --out")
    stage = out.parent / f".{out.name}.partial-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir()
    except OSError as err:   # a parent that is a file, read-only or a pseudo file system
        raise InputError.from_os_error(err, out, "a results folder this user can write "
                                       "(--out DIR)") from None
    return stage


def put_in_place(stage: Path, out: Path) -> None:
    """Replace ``out`` by ``stage``: the old folder is set aside, the new renamed in, the old deleted."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    os.replace(stage, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
