"""sb3-contrib's MaskablePPO trains on the real env (skipped when sb3-contrib is absent).

An external check that the env's mask contract (``action_masks()``, int8, never
all zero) is what the reference maskable implementation expects.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_ppo import pair_env, random_return

torch.set_num_threads(1)


def masked_greedy_return(model, env, episodes=20, seed=100):
    total = 0.0
    for k in range(episodes):
        obs, info = env.reset(seed=seed + k)
        done = False
        while not done:
            action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
            assert info["action_mask"][int(action)] == 1
            obs, r, term, trunc, info = env.step(int(action))
            total += r
            done = term or trunc
    return total / episodes


def test_maskable_ppo_beats_random_on_the_real_env():
    sb3_contrib = pytest.importorskip(
        "sb3_contrib", reason="sb3-contrib not installed (pip install 'hpc-cosim[rl]')")
    env = pair_env(observation="compact", teacher=None)
    model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=4,
                                    learning_rate=3e-3, seed=0, device="cpu", verbose=0)
    model.learn(total_timesteps=3072)
    trained = masked_greedy_return(model, pair_env(observation="compact", teacher=None))
    baseline = random_return(pair_env(observation="compact", teacher=None))
    # Random: about -14.9; shortest first: about -1.18.
    assert trained > 0.5 * baseline
    assert np.isfinite(trained)
