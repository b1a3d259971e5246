"""The reproductions table: intervals over seeds and the benchmarks' rows.

Each reproduction benchmark (``benchmarks/dras.py``, ``dbf_split.py``,
``deeprm_a2c.py``, ``transfer.py``, ``rlschert.py``, ``learners_vs_clone.py``)
trains over several seeds, reports the mean and a 95 % interval over them
(:func:`cosim.paired.mean_interval`, the one interval method), and replaces
its own row of ``docs/reproductions.md`` (found by the seed number in the
row's first cell), so the table always shows the last run of each benchmark
with the budget it used. :class:`CloneKeeper` keeps the behaviour clone a
reproduction compares its trained agent with. The held-out windows are scored
once, after every selection, by the evaluation protocol
(:func:`held_out_scores`, :class:`cosim.evaluation.Protocol`).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from cosim.errors import InputError
from cosim.evaluation import Protocol
from cosim.paired import mean_interval
from cosim.workloads.estimates import apply_estimates
from cosim.workloads.lublin import lublin
from cosim.workloads.windows import window

#: The repository's root (the benchmarks and the table live there).
ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ROOT", "TABLE", "mean_ci", "fmt_ci", "fmt_pct_ci", "write_row", "row_cells",
           "command_cell", "CloneKeeper", "relative_differences", "HELDOUT_SEED", "heldout",
           "validation", "command_line", "write_section", "paired_stats", "clone_env_config",
           "play_against_clone", "held_out_scores", "paired_windows"]

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


def command_line(script: str, argv: list[str]) -> str:
    """The command line of a run of ``benchmarks/SCRIPT``, without ``--out DIR`` and
    ``--no-table`` (what reproduces its figures, wherever they are written).

    Examples:
        >>> command_line("x.py", ["--seeds", "5", "--out", "/tmp/x", "--no-table"])
        'python benchmarks/x.py --seeds 5'
    """
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--out", "--no-table"):
            skip = arg == "--out"
            continue
        kept.append(arg)
    return " ".join([f"python benchmarks/{script}", *kept])


def command_cell(script: str, minutes: float) -> str:
    """The command that reproduced this run (without ``--out``), and the full-budget one."""
    ran = command_line(script, sys.argv[1:])
    return f"`{ran}`" + ("" if minutes >= 30 else f" (full budget: `python benchmarks/{script}`)")


def write_section(text: str, begin: str, end: str, table: Path = TABLE) -> None:
    """Put ``text`` between a benchmark's markers ``begin`` and ``end`` in ``table``
    (appended the first time), atomically."""
    old = table.read_text(encoding="utf-8")
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-repro-", dir=table.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(new)
    os.replace(tmp, table)


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


def held_out_scores(scenario, windows, sources, keys=("bsld_mean",), *,
                    note: str = "held-out windows"):
    """``sources`` (heuristic names, ``rl:DIR``) on the held-out ``windows``, read once.

    Through the evaluation protocol (:meth:`cosim.evaluation.Protocol.given` and
    :meth:`~cosim.evaluation.Protocol.test`): every source runs on the same windows from an
    empty machine, scored by ``summary.json``'s definitions, ``keys`` per window
    (:meth:`cosim.evaluation.Scores.column`). A reproduction calls it once, after every
    selection, with the heuristics and each seed's agent (and clone) together.

    Returns:
        ``(protocol, scores)``: the protocol (its ``compare`` pairs two sources' windows)
        and the :class:`cosim.evaluation.Scores` of the test windows.
    """
    protocol = Protocol.given(scenario, list(windows), note=note)
    return protocol, protocol.test(list(sources), whole=False, keys=tuple(keys))


def paired_windows(protocol, scores, key: str, policy: str, reference: str) -> dict:
    """``policy`` against ``reference`` window by window on ``key`` (a name of
    ``scores.keys``): the protocol's paired comparison (:meth:`cosim.evaluation.Protocol.compare`:
    ratio of means, median of the per-window ratios, wins and losses, with bootstrap
    intervals over the windows), as plain data for a results file."""
    return protocol.compare("test", scores.column(policy, key), scores.column(reference, key),
                            policy=policy, reference_name=reference).as_dict()


def validation(env, n: int = 4, size: int = 1024):
    """Validation windows of an env's training workload: its last ``n`` windows of ``size``
    jobs (late in the trace)."""
    w = env.workload
    return [window(w, size, start=len(w) - (k + 1) * size) for k in range(n)]


# -- a learner against its own clone (benchmarks/learners_vs_clone.py) -------------------
def paired_stats(agent, clone, *, seed: int = 0) -> dict:
    """Agent against its clone on the same test windows, per seed and over seeds.

    Args:
        agent, clone: mean bsld per window, shape ``[seeds, windows]``, the
            same windows in the same order for both.

    Returns:
        ``per_seed``: ``mean(agent) / mean(clone) - 1`` of each seed;
        ``mean``, ``low``, ``high``: their mean and 95 % bootstrap interval;
        ``window_wins``/``window_losses``: windows (all seeds) where the agent's
        bsld is lower/higher; ``seed_wins``/``seed_losses``: the same per seed;
        ``beats``: the interval lies below zero.

    Examples:
        >>> s = paired_stats([[1.0, 3.0], [2.0, 2.0]], [[2.0, 2.0], [2.0, 2.0]])
        >>> s["per_seed"], s["window_wins"], s["window_losses"], s["seed_wins"]
        ([0.0, 0.0], 1, 1, 0)
    """
    a, c = np.asarray(agent, dtype=float), np.asarray(clone, dtype=float)
    if a.shape != c.shape or a.ndim != 2 or a.size == 0:
        raise InputError("paired_stats", f"shapes {a.shape} and {c.shape}",
                         "the same [seeds, windows] for agent and clone")
    per_seed = a.mean(axis=1) / c.mean(axis=1) - 1.0
    m, lo, hi = mean_interval(per_seed, seed=seed)
    return {"per_seed": [float(x) for x in per_seed], "mean": m, "low": lo, "high": hi,
            "window_wins": int(np.sum(a < c)), "window_losses": int(np.sum(a > c)),
            "seed_wins": int(np.sum(per_seed < 0)), "seed_losses": int(np.sum(per_seed > 0)),
            "beats": bool(math.isfinite(hi) and hi < 0)}


def clone_env_config(teacher: str, window: int, episode_jobs: int,
                     scenario: str = str(ROOT / "scenarios" / "lublin256.yaml")) -> dict:
    """The env a learner is cloned and trained in: the shipped agent's action model
    (``select`` over a per-job ``kernel`` network), the teacher's backfill order."""
    return {"scenario": scenario, "actions": "select", "observation": "kernel",
            "window": window, "reward": "slowdown", "episode_jobs": episode_jobs,
            "backfill_order": teacher.split("+")[0]}


def play_against_clone(agent, clone, env, windows) -> dict:
    """``agent`` and its ``clone`` (policies) on every window of ``env``; at each of the
    agent's decisions, whether the clone would have chosen otherwise.

    Returns:
        ``agent_bsld``, ``clone_bsld``: mean bsld per window; ``decisions`` and
        ``differ``: the agent's decisions and those where the clone differs;
        ``choices`` and ``differ_choices``: the same where more than one action was legal.
    """
    a_bsld, c_bsld = [], []
    decisions = differ = choices = differ_choices = 0
    for w in windows:
        obs, info = env.reset(seed=0, options={"jobs": w})
        done = False
        while not done:
            mask = info["action_mask"]
            act = agent.act(obs, mask)
            other = clone.act(obs, mask)
            decisions += 1
            differ += act != other
            if int(np.sum(np.asarray(mask) > 0)) > 1:
                choices += 1
                differ_choices += act != other
            obs, _, term, trunc, info = env.step(act)
            done = term or trunc
        a_bsld.append(float(info["episode_metrics"]["bsld_mean"]))
        c_bsld.append(float(clone.play(env, w)["bsld_mean"]))
    return {"agent_bsld": a_bsld, "clone_bsld": c_bsld, "decisions": decisions,
            "differ": int(differ), "choices": choices, "differ_choices": int(differ_choices)}
