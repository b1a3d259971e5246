"""Every action/observation pair keeps its observation, mask and reward streams.

The digests below were recorded from the code before the observation
builders were vectorized (issue 20, item 2). Each case plays 1200
random legal actions from a fixed seed over short episodes (resets
included) and hashes the observations, the masks and the rewards
separately, so a failure says which stream moved. A deliberate change
re-records (``python tests/test_obs_digests.py --record``) and says why in
its commit.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
STEPS = 1200

#: key -> SchedulingEnv keyword arguments (scenario lublin256, 256-job episodes).
CASES = {
    "start-compact": dict(actions="start", observation="compact", window=(10, 0)),
    "start-compact-8-2-k2": dict(actions="start", observation="compact", window=(8, 2),
                                 kill_slots=2),
    "start-kernel": dict(actions="start", observation="kernel", window=(10, 0)),
    "start-kernel-6-2-k1": dict(actions="start", observation="kernel", window=(6, 2),
                                kill_slots=1),
    "start-image": dict(actions="start", observation="image", window=(10, 0)),
    "start-dras": dict(actions="start", observation="dras", window=(10, 0)),
    "select-kernel": dict(actions="select", observation="kernel", window=128),
    "select-kernel-sticky": dict(actions="select", observation="kernel", window=16,
                                 reserve="sticky"),
    "select-compact": dict(actions="select", observation="compact", window=32),
    "select-image": dict(actions="select", observation="image", window=16),
    "select-dras": dict(actions="select", observation="dras", window=32),
    "dras-dras": dict(actions="dras", observation="dras", window=50),
    "dras-kernel": dict(actions="dras", observation="kernel", window=50),
    "dras-compact": dict(actions="dras", observation="compact", window=20),
    "dras-image": dict(actions="dras", observation="image", window=20),
    "start-kernel-guard": dict(actions="start", observation="kernel", window=(10, 0),
                               guard_wait=3600.0),
}

#: Recorded digests (obs, mask, reward), first 16 hex digits of SHA-256.
RECORDED: dict[str, tuple[str, str, str]] = {
    'start-compact': ('6770a59b825d4fbd', '998dad49cf45c816', '71b2b4914e399a9f'),
    'start-compact-8-2-k2': ('9b021c66804a4e1e', '6c03c8d19de9f364', 'f8643c4c4bcf72c7'),
    'start-kernel': ('f5fdabd65e4ce8d5', '998dad49cf45c816', '71b2b4914e399a9f'),
    'start-kernel-6-2-k1': ('547517f9bfb554e0', 'd4f4a1afe0d50eb8', '77f81fa9338d66de'),
    'start-image': ('3b4e8faf2e5126ea', '998dad49cf45c816', '71b2b4914e399a9f'),
    'start-dras': ('89208f05292c0b29', '998dad49cf45c816', '71b2b4914e399a9f'),
    'select-kernel': ('22596d17391e14a0', 'afec63fc615364b8', '4ceb4616b041aaa9'),
    'select-kernel-sticky': ('3539f772e7594cc1', '03542db7c0f3225f', '84dd21a124eaf7ef'),
    'select-compact': ('df17541e8a319b1f', 'c41df76137aaa86a', 'e9040a6ca8450070'),
    'select-image': ('b93d91a7eddab95f', '88eb740c18c269ce', 'edac2311d854b80b'),
    'select-dras': ('4e45e8c0781d155f', 'c41df76137aaa86a', 'e9040a6ca8450070'),
    'dras-dras': ('4c16b676347fcf47', 'decc11439190842a', '905b4c5fc48aa5ab'),
    # Re-recorded (issue 20): the kernel encoder read the queue slots of dras's
    # level-1 window at level 2 too, so some backfill-candidate rows showed
    # other jobs' features (72 of 874 level-2 observations in this stream).
    'dras-kernel': ('5ffa179e82a0d9a9', 'decc11439190842a', '905b4c5fc48aa5ab'),
    'dras-compact': ('6e280d7f8901a3ec', '3ac35c9ab510cf8b', 'a33449dffe327b69'),
    'dras-image': ('c83c9ad54c77df9d', '3ac35c9ab510cf8b', 'a33449dffe327b69'),
    'start-kernel-guard': ('8c63bfde5ccf0a83', '11d6fcb8210934fd', '55f316aac84e77f2'),
}


def digests(kwargs: dict, steps: int = STEPS) -> tuple[str, str, str]:
    """Digests of the observation, mask and reward streams over ``steps`` random legal actions."""
    from cosim.env import SchedulingEnv

    env = SchedulingEnv(ROOT / "scenarios/lublin256.yaml", episode_jobs=256, **kwargs)
    rng = np.random.default_rng(11)
    h_obs, h_mask, h_rew = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    obs, info = env.reset(seed=5)
    episode = 0
    for _ in range(steps):
        assert obs.dtype == np.float32 and obs.shape == env.observation_space.shape
        h_obs.update(np.ascontiguousarray(obs).tobytes())
        h_mask.update(info["action_mask"].tobytes())
        legal = np.flatnonzero(info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(int(legal[rng.integers(len(legal))]))
        h_rew.update(np.float64(reward).tobytes())
        if terminated or truncated:
            episode += 1
            obs, info = env.reset(seed=5 + episode)
    return h_obs.hexdigest()[:16], h_mask.hexdigest()[:16], h_rew.hexdigest()[:16]


@pytest.mark.parametrize("key", list(CASES))
def test_observation_mask_and_reward_streams_match_recorded(key):
    obs, mask, reward = digests(CASES[key])
    want = RECORDED[key]
    assert mask == want[1], f"{key}: action masks changed"
    assert obs == want[0], f"{key}: observations changed"
    assert reward == want[2], f"{key}: rewards changed"


if __name__ == "__main__":
    # Record with this checkout's code; prints the RECORDED literal to paste above.
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] != ["--record"]:
        sys.exit("usage: python tests/test_obs_digests.py --record")
    for key, kwargs in CASES.items():
        print(f"    {key!r}: {digests(kwargs)!r},")
