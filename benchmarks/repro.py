"""Shared pieces of the reproduction benchmarks: intervals over seeds and the table's rows.

Each reproduction benchmark (``dras.py``, ``dbf_split.py``, ``deeprm_a2c.py``,
``transfer.py``) trains over several seeds, reports the mean and a 95 %
interval over them, and replaces its own row of ``docs/reproductions.md``
(found by the seed number in the row's first cell), so the table always
shows the last run of each benchmark with the budget it used.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["ROOT", "TABLE", "mean_ci", "fmt_ci", "write_row", "row_cells", "EnvFactory",
           "LevelTeacher", "train_selected", "command_cell"]

#: The reproductions table.
TABLE = ROOT / "docs" / "reproductions.md"

# Two-sided 95 % quantiles of Student's t by degrees of freedom (1..30).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def mean_ci(values) -> tuple[float, float, float]:
    """Mean and 95 % Student-t interval ``(mean, low, high)`` of per-seed values.

    Examples:
        >>> m, lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
        >>> m, round(lo, 3), round(hi, 3)
        (3.0, 1.037, 4.963)
    """
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if len(x) == 1:
        return m, math.nan, math.nan
    t = _T95[min(len(x) - 1, len(_T95)) - 1]
    half = t * float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, m - half, m + half


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


# -- training with model selection ------------------------------------------------------
class EnvFactory:
    """A picklable env factory from a saved env config (worker processes build their own).

    Args:
        env_config: :func:`agents.rl_policy.make_env` config.
        levels: ``(level-1 teacher, level-2 teacher)``: put the action of heuristic
            ``levels[0]`` (at DRAS's level 1) or ``levels[1]`` (level 2, backfill) in
            ``info["teacher_action"]``; None keeps the env's own teacher.
        wrap: an optional ``env -> env`` applied last (for example a variable episode length).
    """

    def __init__(self, env_config: dict, levels: tuple[str, str] | None = None, wrap=None):
        self.env_config, self.levels, self.wrap = env_config, levels, wrap

    def __call__(self):
        from agents.rl_policy import make_env

        env = make_env(self.env_config)
        if self.levels is not None:
            env = LevelTeacher(env, *self.levels)
        return self.wrap(env) if self.wrap is not None else env


class LevelTeacher(gym.Wrapper):
    """``info["teacher_action"]``: heuristic ``level1`` at DRAS's level 1, ``level2`` at level 2.

    With the ``dras`` action model, ``("fcfs", "wfp3")`` is EASY with the
    head reserved in arrival order and WFP3's order among the backfill
    candidates; with the other models level 1 is the only one.
    """

    def __init__(self, env, level1: str, level2: str):
        super().__init__(env)
        self.names = (level1, level2)

    def _teach(self, info):
        base = self.env.unwrapped
        info["teacher_action"] = base.teacher_action(self.names[base.level - 1])
        return info

    def reset(self, **kwargs):
        """Reset, with the teacher's action."""
        obs, info = self.env.reset(**kwargs)
        return obs, self._teach(info)

    def step(self, action):
        """Step, with the teacher's next action."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._teach(info)


def train_selected(algo: str, args, env_fn, env_config: dict, budget_s: float, out: Path,
                   score, *, bc_steps: int = 0, bc_epochs: int = 8, validate_every_s: float = 30.0,
                   log=print, name: str = "agent", bc_balance: bool = False) -> dict:
    """Behaviour cloning (optional), then ``algo`` for ``budget_s``; keeps the best snapshot.

    Every ``validate_every_s`` seconds of training (and at the start and the
    end) the greedy policy is scored by ``score(policy) -> (value, text)``
    (lower is better; validation data of the training distribution only) and
    the best snapshot is saved as a checkpoint in ``out`` (loadable as
    ``rl:OUT``).

    Returns:
        ``{"score", "update", "step", "path", "elapsed_s"}`` of the kept snapshot.
    """
    import copy
    import shutil
    import time

    import torch

    from agents import dql, loop, pg, ppo
    from agents.checkpoint import save_checkpoint
    from agents.imitation import agreement, behaviour_cloning, collect_demonstrations
    from agents.networks import make_network
    from agents.rl_policy import RLPolicy

    t0 = time.monotonic()
    learner = {"ppo": ppo.ppo_update, "pg": pg.PGLearner(), "dql": dql.DQLLearner()}.get(algo)
    if learner is None:
        from agents.a2c import a2c_update
        learner = a2c_update
    probe = env_fn()
    with torch.random.fork_rng():
        torch.manual_seed(args.seed)
        net = make_network(probe.observation_space, probe.action_space, args.network, args.hidden)
    probe.close()
    if bc_steps:
        demos = collect_demonstrations(env_fn, bc_steps, seed=args.seed)
        behaviour_cloning(net, demos, epochs=bc_epochs, batch_size=256, seed=args.seed,
                          balance=bc_balance)
        log(f"  {name}: cloned {len(demos)} teacher decisions, agreement "
            f"{agreement(net, demos):.3f} ({time.monotonic() - t0:.0f} s)")
        del demos
    meta = {"algo": algo, "args": args.to_dict(), "network": net.spec,
            "env": {**env_config, "teacher": None}}
    best: dict = {"score": math.inf}

    def consider(state_dict, update, step):
        policy = RLPolicy(copy.deepcopy(net).eval(), meta)
        policy.net.load_state_dict(state_dict)
        value, text = score(policy)
        if value < best["score"]:
            best.update(score=value, state={k: v.clone() for k, v in state_dict.items()},
                        update=update, step=step)
        log(f"  {name}: update {update:5d} step {step:8d} {text} "
            f"(best {best['score']:.4g} at update {best['update']}) [{time.monotonic() - t0:.0f} s]")

    consider(net.state_dict(), 0, 0)
    args.time_budget_s = max(1.0, budget_s - (time.monotonic() - t0))
    args.total_steps = 10**12
    args.checkpoint_every_s = 1e9
    live = {"net": None, "last": time.monotonic()}

    def on_row(row):
        if time.monotonic() - live["last"] >= validate_every_s:
            consider(live["net"].state_dict(), int(row["update"]), int(row["global_step"]))
            live["last"] = time.monotonic()

    result = loop.run(algo, learner, env_fn, args, init_state_dict=net.state_dict(), log=on_row,
                     on_start=lambda n: live.__setitem__("net", n), env_config=env_config)
    consider(result.net.state_dict(), result.update, result.global_step)
    if out.exists():
        shutil.rmtree(out)
    save_checkpoint(out, {"model": best["state"], "update": best["update"],
                          "global_step": best["step"]},
                    {**meta, "update": best["update"], "global_step": best["step"],
                     "validation_score": best["score"]})
    return {"score": best["score"], "update": best["update"], "step": best["step"],
            "path": str(out), "elapsed_s": time.monotonic() - t0}


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
