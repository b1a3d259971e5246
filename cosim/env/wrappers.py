"""Env wrappers that training and benchmarks put around :class:`cosim.env.SchedulingEnv`.

:class:`LevelTeacher` puts a heuristic's action in ``info["teacher_action"]``
(per DRAS level); :class:`VariableLengthEpisodes` draws each episode's job
count from its reset seed, so training stays exactly resumable.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

__all__ = ["LevelTeacher", "VariableLengthEpisodes"]


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


class VariableLengthEpisodes(gym.Wrapper):
    """Draw each episode's job count uniformly in ``[low, high]`` from its reset seed.

    Deterministic given the seed, so training runs stay exactly resumable.
    """

    def __init__(self, env: gym.Env, low: int, high: int):
        super().__init__(env)
        self.low, self.high = int(low), int(high)
        self._rng = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        """Reset with a job count drawn from ``seed``."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.env.unwrapped.episode_jobs = int(self._rng.integers(self.low, self.high + 1))
        return self.env.reset(seed=seed, options=options)

    def action_masks(self):
        """The wrapped env's mask."""
        return self.env.unwrapped.action_masks()
