"""ShardedVectorEnv and RayVectorEnv: the same results as gymnasium's SyncVectorEnv,
from worker processes or Ray actors."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from cosim.env import SchedulingEnv
from cosim.vector import RayVectorEnv, ShardedVectorEnv

SCENARIO = "scenarios/lublin256.yaml"


def make_env():
    return SchedulingEnv(SCENARIO, window=(4, 1), episode_jobs=12, episode_end="placed",
                         teacher="sjf")


def assert_same_info(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], dict):
            assert_same_info(a[key], b[key])
        elif a[key].dtype == object:
            for x, y in zip(a[key], b[key]):
                assert (x is None and y is None) or np.array_equal(x, y)
        else:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def sharded_env(kind, fns, request, **kwargs):
    """A ShardedVectorEnv (``processes``) or a RayVectorEnv on the test run's Ray (``ray``)."""
    if kind == "ray":
        request.getfixturevalue("ray_cluster")
        return RayVectorEnv(fns, **kwargs)
    return ShardedVectorEnv(fns, **kwargs)


# The shards' code is the same for both transports, so every mode runs over
# processes and the default mode over Ray (PPO's DISABLED runs over Ray in
# test_ppo); the other Ray modes are slow-marked (they add an actor start each).
# ON_RAY: with the other tests on the run's Ray, on one xdist worker (tests/conftest.py).
ON_RAY = pytest.mark.xdist_group("ray")
CASES = [(mode, "processes") for mode in AutoresetMode] + [
    pytest.param(mode, "ray", marks=ON_RAY) if mode == AutoresetMode.NEXT_STEP
    else pytest.param(mode, "ray", marks=[pytest.mark.slow, ON_RAY]) for mode in AutoresetMode]


@pytest.mark.parametrize("mode,kind", CASES)
def test_sharded_matches_sync_step_for_step(mode, kind, request):
    # 5 envs over 2 workers (shards of 3 and 2), short episodes so that every
    # autoreset path runs; actions: the first legal index, then random legal.
    fns = [make_env] * 5
    sync = SyncVectorEnv(fns, autoreset_mode=mode)
    sharded = sharded_env(kind, fns, request, workers=2, autoreset_mode=mode)
    try:
        assert sharded.observation_space == sync.observation_space
        assert sharded.action_space == sync.action_space
        obs_a, info_a = sync.reset(seed=7)
        obs_b, info_b = sharded.reset(seed=7)
        np.testing.assert_array_equal(obs_a, obs_b)
        assert_same_info(info_a, info_b)
        rng = np.random.default_rng(0)
        masks = info_a["action_mask"].copy()
        ends = 0
        for _ in range(80):
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
            out_a = sync.step(actions)
            out_b = sharded.step(actions)
            for x, y in zip(out_a[:4], out_b[:4]):
                np.testing.assert_array_equal(x, y)
            assert_same_info(out_a[4], out_b[4])
            masks = out_a[4]["action_mask"].copy()
            done = out_a[2] | out_a[3]
            ends += int(done.sum())
            if mode == AutoresetMode.DISABLED and done.any():
                seeds = rng.integers(0, 2**31, size=5).tolist()
                obs_a, info_a = sync.reset(seed=seeds, options={"reset_mask": done})
                obs_b, info_b = sharded.reset(seed=seeds, options={"reset_mask": done})
                np.testing.assert_array_equal(obs_a, obs_b)
                assert_same_info(info_a, info_b)
                masks[done] = info_a["action_mask"][done]
        assert ends > 5
        assert sharded.call("episode_jobs") == (12,) * 5
    finally:
        sync.close()
        sharded.close()


def broken_env():
    raise OSError("no such trace: missing.swf")


@pytest.mark.parametrize("kind", ["processes", pytest.param("ray", marks=ON_RAY)])
def test_worker_errors_surface_with_their_message(kind, request):
    # Three envs in two workers; the third cannot be built in its worker (the
    # probe, the first factory, builds here), so its worker reports that.
    envs = sharded_env(kind, [make_env, make_env, broken_env], request, workers=2,
                       autoreset_mode=AutoresetMode.DISABLED)
    try:
        with pytest.raises(ValueError, match="reset_mask"):
            envs.reset(options={"reset_mask": np.zeros(3, dtype=bool)})
        with pytest.raises(RuntimeError, match="no such trace: missing.swf"):
            envs.reset(seed=0)
    finally:
        envs.close()
    envs = sharded_env(kind, [make_env] * 2, request, workers=2,
                       autoreset_mode=AutoresetMode.DISABLED)
    try:
        with pytest.raises(RuntimeError, match="step\\(\\) called after the episode ended|reset"):
            envs.step(np.zeros(2, dtype=np.int64))   # never reset
    finally:
        envs.close()
