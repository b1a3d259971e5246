"""Generalized advantage estimation with truncation bootstrapping and SMDP discounting.

Two ways an episode can stop are treated differently (STYLE.md, "Gym
boundary"):

- ``terminated``: the MDP reached a terminal state, whose value is 0.
- ``truncated``: the episode was cut (a job count, a time limit). The state
  reached is not terminal, so the return is bootstrapped with the value of
  the *final* observation, which the caller evaluated before the vector env
  reset that slot (see :mod:`agents.ppo`, which resets by hand so the final
  observation is never lost).

In both cases the advantage recursion is cut, because the next row of the
rollout belongs to a new episode.

SMDP option (thesis, seed 003, eq. 2.18): decisions are separated by variable
amounts of simulated time, so the discount of one decision step is
``gamma ** (dt / time_scale)`` where ``dt`` is the simulated time until the
next decision (``info["dt"]`` of the environment).
"""

from __future__ import annotations

import numpy as np

__all__ = ["compute_gae", "step_discounts"]


def step_discounts(gamma: float, dt: np.ndarray | None = None, time_scale: float = 1.0,
                   shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Discount applied to the value one decision later.

    Args:
        gamma: discount per step, or per ``time_scale`` seconds when ``dt`` is given.
        dt: simulated seconds from each decision to the next, or None for a plain MDP.
        time_scale: seconds that one factor ``gamma`` stands for.
        shape: shape of the result when ``dt`` is None.

    Returns:
        ``gamma`` broadcast to ``shape``, or ``gamma ** (dt / time_scale)``.
    """
    if dt is None:
        return np.full(shape if shape is not None else (), gamma, dtype=np.float64)
    dt = np.asarray(dt, dtype=np.float64)
    if np.any(dt < 0):
        raise ValueError("dt must be non-negative")
    return np.power(gamma, dt / float(time_scale))


def compute_gae(rewards: np.ndarray, values: np.ndarray, terminated: np.ndarray,
                truncated: np.ndarray, final_values: np.ndarray, last_values: np.ndarray, *,
                gamma: float, lam: float, dt: np.ndarray | None = None,
                time_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns of a rollout of ``T`` steps from ``N`` environments.

    Row ``t`` holds the transition from the observation at ``t`` under the
    action at ``t``; ``values[t]`` is the critic's value of that observation.

    With ``g_t`` the step discount and ``v'_t`` the value of what follows step ``t``:

    - ``v'_t = 0`` if ``terminated[t]``,
    - ``v'_t = final_values[t]`` if ``truncated[t]`` (value of the final observation),
    - ``v'_t = values[t + 1]`` otherwise (``last_values`` after the last row),

    ``delta_t = r_t + g_t v'_t - V_t`` and
    ``A_t = delta_t + g_t lam (1 - done_t) A_{t+1}``; returns are ``A_t + V_t``.
    With ``lam = 1`` this is the n-step return advantage of A2C.

    Args:
        rewards, values, terminated, truncated, final_values: arrays of shape ``(T, N)``.
        last_values: ``(N,)`` values of the observations after the last row.
        gamma: discount factor (per step, or per ``time_scale`` seconds with ``dt``).
        lam: GAE lambda.
        dt: optional ``(T, N)`` simulated time to the next decision (SMDP discount).
        time_scale: seconds per factor ``gamma`` when ``dt`` is given.

    Returns:
        ``(advantages, returns)``, float64 arrays of shape ``(T, N)``.

    Examples:
        >>> import numpy as np
        >>> z = np.zeros((2, 1))
        >>> adv, ret = compute_gae(np.ones((2, 1)), z, z, z, z, np.zeros(1), gamma=0.5, lam=1.0)
        >>> ret.ravel().tolist()
        [1.5, 1.0]
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    terminated = np.asarray(terminated, dtype=bool)
    truncated = np.asarray(truncated, dtype=bool)
    final_values = np.asarray(final_values, dtype=np.float64)
    last_values = np.asarray(last_values, dtype=np.float64)
    t_len = rewards.shape[0]
    for name, arr in (("values", values), ("terminated", terminated),
                      ("truncated", truncated), ("final_values", final_values)):
        if arr.shape != rewards.shape:
            raise ValueError(f"{name} has shape {arr.shape}, expected {rewards.shape}")
    if last_values.shape != rewards.shape[1:]:
        raise ValueError(f"last_values has shape {last_values.shape}, expected {rewards.shape[1:]}")
    disc = step_discounts(gamma, dt, time_scale, rewards.shape)
    if disc.shape != rewards.shape:
        raise ValueError(f"dt has shape {disc.shape}, expected {rewards.shape}")

    next_values = np.empty_like(values)
    next_values[:-1] = values[1:]
    next_values[-1] = last_values
    next_values = np.where(truncated, final_values, next_values)
    next_values = np.where(terminated, 0.0, next_values)
    done = terminated | truncated

    deltas = rewards + disc * next_values - values
    advantages = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[1:], dtype=np.float64)
    for t in range(t_len - 1, -1, -1):
        running = deltas[t] + disc[t] * lam * np.where(done[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values
