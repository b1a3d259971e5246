"""The reproductions table: intervals over seeds and the benchmarks' rows.

Each reproduction benchmark (``benchmarks/dras.py``, ``dbf_split.py``,
``deeprm_a2c.py``, ``transfer.py``, ``rlschert.py``, ``learners_vs_clone.py``)
trains over several seeds, reports the mean and a 95 % interval over them
(:func:`cosim.paired.mean_interval`, the one interval method), and replaces
its own row of ``docs/reproductions.md`` (found by the seed number in the
row's first cell), so the table always shows the last run of each benchmark
with the budget it used. :class:`CloneKeeper` keeps the behaviour clone a
reproduction compares its trained agent with.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

from cosim.paired import mean_interval
from cosim.workloads.estimates import apply_estimates
from cosim.workloads.lublin import lublin
from cosim.workloads.windows import window

#: The repository's root (the benchmarks and the table live there).
ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ROOT", "TABLE", "mean_ci", "fmt_ci", "fmt_pct_ci", "write_row", "row_cells",
           "command_cell", "CloneKeeper", "relative_differences", "HELDOUT_SEED", "heldout",
           "validation"]

#: The reproductions table.
TABLE = ROOT / "docs" / "reproductions.md"


def mean_ci(values) -> tuple[float, float, float]:
    """Mean and 95 % interval ``(mean, low, high)`` of per-seed values.

    The interval is :func:`cosim.paired.mean_interval` (BCa bootstrap), the
    one method of every table.
    """
    return mean_interval(values)


def fmt_ci(values, fmt: str = "{:.3g}") -> str:
    """``mean [low, high]`` of :func:`mean_ci` as text."""
    m, lo, hi = mean_ci(values)
    if math.isnan(lo):
        return fmt.format(m)
    return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def row_cells(line: str) -> list[str]:
    """The cells of a Markdown table row."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def write_row(seed: str, cells: list[str], table: Path = TABLE) -> None:
    """Replace the row whose first cell starts with ``seed`` (or append it), atomically."""
    text = table.read_text(encoding="utf-8")
    lines = text.splitlines()
    new = "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
    for i, line in enumerate(lines):
        if line.startswith("|") and row_cells(line)[0].split()[:1] == [seed]:
            lines[i] = new
            break
    else:
        last = max(i for i, line in enumerate(lines) if line.startswith("|"))
        lines.insert(last + 1, new)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-repro-", dir=table.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, table)


def command_cell(script: str, minutes: float) -> str:
    """The command that reproduced this run (without ``--out``), and the full-budget one."""
    argv, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if arg in ("--out", "--no-table"):
            skip = arg == "--out"
            continue
        argv.append(arg)
    ran = " ".join([f"python benchmarks/{script}", *argv])
    return f"`{ran}`" + ("" if minutes >= 30 else f" (full budget: `python benchmarks/{script}`)")


def fmt_pct_ci(values) -> str:
    """``+m % [+lo %, +hi %]`` of :func:`mean_ci` for relative differences (0.05 is +5 %)."""
    m, lo, hi = mean_ci(values)
    if math.isnan(lo):
        return f"{100 * m:+.1f} %"
    return f"{100 * m:+.1f} % [{100 * lo:+.1f} %, {100 * hi:+.1f} %]"


def relative_differences(agent, clone) -> list[float]:
    """Per seed, ``mean(agent) / mean(clone) - 1`` over the same test windows (negative:
    the agent's figure is lower). ``agent`` and ``clone`` are ``[seeds][windows]``.

    Examples:
        >>> relative_differences([[1.0, 3.0], [3.0, 3.0]], [[2.0, 2.0], [2.0, 4.0]])
        [0.0, 0.0]
    """
    out = []
    for a, c in zip(agent, clone, strict=True):
        if len(a) != len(c) or not len(a):
            raise ValueError(f"relative_differences: {len(a)} and {len(c)} windows; "
                             "expected the same windows for agent and clone")
        out.append(sum(a) / sum(c) - 1.0)
    return out


class CloneKeeper:
    """A model-selection score that also keeps the warm-start clone.

    :func:`agents.recipe.train` scores the network it starts from (update 0:
    the behaviour clone) before any training, so the first policy this score
    sees is the clone; it is kept, and :meth:`save` writes it as a checkpoint
    that runs as ``rl:DIR``, to be tested beside the agent trained from it.

    Args:
        score: the selection score, ``policy -> (value, text)``.
    """

    def __init__(self, score):
        self.score = score
        self.state = None
        self.meta = None
        self.validation = None

    def __call__(self, policy):
        value, text = self.score(policy)
        if self.state is None:
            self.state = {k: v.clone() for k, v in policy.net.state_dict().items()}
            self.meta, self.validation = dict(policy.meta), value
            text = f"clone: {text}"
        return value, text

    def save(self, folder) -> Path:
        """Write the clone as a checkpoint under ``folder``; the folder."""
        from agents.checkpoint import save_checkpoint

        if self.state is None:
            raise RuntimeError("CloneKeeper.save: no policy was scored yet")
        save_checkpoint(folder, {"model": self.state, "update": 0, "global_step": 0},
                        {**self.meta, "update": 0, "global_step": 0,
                         "validation_score": self.validation})
        return Path(folder)


# -- the Lublin-256 sets the reproductions share ------------------------------------------
#: Generator seed of the held-out Lublin-256 windows (the training workload's is the
#: scenario's, 1): the shipped agents' test set (``benchmarks/train_agents.py``) and
#: the reproductions' (``dras.py``, ``dbf_split.py``, ``transfer.py``).
HELDOUT_SEED = 1001


def heldout(model: str, n: int = 10, size: int = 1024):
    """The held-out windows: ``n`` windows of ``size`` Lublin jobs on 256 cores from
    :data:`HELDOUT_SEED`, with estimates of ``model`` (``trace``: the generator's own)."""
    jobs = lublin(n * size, procs=256, seed=HELDOUT_SEED)
    if model != "trace":
        jobs = apply_estimates(jobs, model, seed=HELDOUT_SEED + 1)
    return [window(jobs, size, start=k * size) for k in range(n)]


def validation(env, n: int = 4, size: int = 1024):
    """Validation windows of an env's training workload: its last ``n`` windows of ``size``
    jobs (late in the trace)."""
    w = env.workload
    return [window(w, size, start=len(w) - (k + 1) * size) for k in range(n)]
