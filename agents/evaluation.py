"""``python -m agents evaluate`` as a library: a trained agent's greedy episodes scored, with
the heuristics on the same jobs, by the evaluation protocol (:class:`cosim.evaluation.Protocol`)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

__all__ = ["evaluate_policy", "evaluate_episodes", "EVALUATE_COLUMNS", "greedy_episode",
           "Episode"]


class Episode(NamedTuple):
    """One episode played to its end: its return, its steps and the last step's ``info``
    (``info["episode_metrics"]``: the env's measure of the episode)."""

    total: float
    steps: int
    info: dict[str, Any]


def greedy_episode(policy, env, *, seed: int | None = None, options: dict | None = None,
                   teacher: bool = False) -> Episode:
    """Reset ``env`` (``seed``, ``options``: ``{"jobs": workload}`` plays those jobs) and
    play one episode to its end with ``policy.act(obs, mask)`` at every decision, or with
    the env's ``teacher_action`` when ``teacher``."""
    obs, info = env.reset(seed=seed, options=options)
    total, steps, done = 0.0, 0, False
    while not done:
        action = info["teacher_action"] if teacher else policy.act(obs, info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps += 1
        done = terminated or truncated
    return Episode(total, steps, info)


def evaluate_policy(policy, env, episodes: int, seed: int, baseline: str | None = None
                    ) -> dict[str, float]:
    """Mean return and episode metrics of greedy episodes ``seed .. seed+episodes-1``.

    With ``baseline``, the env's ``teacher_action`` (heuristic ``baseline``,
    played through the agent's action model) acts instead of the policy.
    """
    return evaluate_episodes(policy, env, episodes, seed, baseline=baseline)["agent"]


#: ``agents evaluate``'s columns: :data:`agents.loop.METRIC_KEYS` in the table's order.
EVALUATE_COLUMNS = ("bsld_mean", "wait_mean", "wait_max", "utilization", "queue_len_mean")


def evaluate_episodes(policy, env, episodes: int, seed: int, *, baseline: str | None = None,
                      heuristics: tuple[str, ...] | list[str] = (),
                      settings: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The agent's greedy episodes, and each heuristic on exactly the same jobs.

    Episode ``k`` is the env's episode for seed ``seed + k``, played greedily for its
    return; its workload is a window of the evaluation protocol
    (:meth:`cosim.evaluation.Protocol.given`), which runs the agent (acting as in its
    env, :class:`agents.acting.ActingAgent`) and each heuristic in ``heuristics`` (the
    real policy with its backfilling, not its imitation through the agent's actions) on
    it, so every row is measured on the same jobs by the same metric definitions.
    With ``baseline``, the env's ``teacher_action`` (heuristic ``baseline``, played
    through the agent's action model) acts instead of the agent, and the agent's row
    is the env's measure of those episodes.

    Args:
        settings: env settings the agent acts with over its checkpoint's (``window``).

    Returns:
        ``{"agent": row, name: row, ...}``; a row holds the means
        (``mean_return`` for the agent, and :data:`agents.loop.METRIC_KEYS`,
        the names of ``summary.json``) and ``per_episode`` (the same per episode).
    """
    import numpy as np

    from agents.acting import ActingAgent
    from cosim.evaluation import Protocol

    keys = EVALUATE_COLUMNS
    played: list[dict[str, float]] = []
    returns, lengths, windows = [], [], []
    for k in range(episodes):
        total, steps, info = greedy_episode(policy, env, seed=seed + k,
                                            teacher=baseline is not None)
        windows.append(env.unwrapped.simulation.workload)
        returns.append(total)
        lengths.append(steps)
        m = info.get("episode_metrics", {})
        played.append({key: float(m.get(key, math.nan)) for key in keys})
    agent = ActingAgent(policy.meta["_path"], settings or {}, name="agent", agent=policy)
    sources = list(heuristics) if baseline is not None else [agent, *heuristics]
    protocol = Protocol.given(env.unwrapped.scenario, windows, seed=seed,
                              note=f"episodes of seeds {seed}..{seed + episodes - 1}")
    scores = protocol.test(sources, whole=False, keys=keys)
    per = {"agent": played} if baseline is not None else {}
    for name in scores.names:
        per[name] = [{key: float(scores.column(name, key)[k]) for key in keys}
                     for k in range(episodes)]
    rows: dict[str, dict[str, Any]] = {}
    for name, eps in per.items():
        row: dict[str, Any] = {"episodes": float(episodes)}
        if name == "agent":
            row.update(mean_return=float(np.mean(returns)), mean_length=float(np.mean(lengths)))
        for key in keys:
            vals = np.array([e[key] for e in eps], dtype=float)
            row[key] = float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan
        row["per_episode"] = eps
        rows[name] = row
    rows["agent"]["paired"] = {name: protocol.compare(
        "test", scores.column("agent", "bsld_mean") if baseline is None else
        [e["bsld_mean"] for e in played], scores.column(name, "bsld_mean"),
        policy="agent", reference_name=name) for name in heuristics}
    return rows
