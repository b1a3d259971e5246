"""A trained select agent acting in process scores the legal rows alone, the same numbers.

:meth:`KernelEncoder.legal_rows` gives the observation's rows of a
``select`` agent's legal actions without building the others (issue 20,
item 3); :meth:`RLPolicy.chooser` scores them. These tests compare the rows
with ``encode``'s bit for bit over random episodes (estimate changes and
queue compaction included) and the shortcut's decisions with ``act``'s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agents.rl_policy import load_rl_policy
from cosim.env import SchedulingEnv

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "agents" / "pretrained" / "lublin256-select"


def _env(**kw) -> SchedulingEnv:
    return SchedulingEnv(ROOT / "scenarios/lublin256.yaml", actions="select", observation="kernel",
                         episode_jobs=256, **kw)


def _play(env: SchedulingEnv, steps: int, seed: int, check) -> int:
    """Random legal actions; ``check(obs, mask)`` at each decision; the decisions checked."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    episode = 0
    for _ in range(steps):
        check(obs, info["action_mask"])
        legal = np.flatnonzero(info["action_mask"])
        obs, _, term, trunc, info = env.step(int(legal[rng.integers(len(legal))]))
        if term or trunc:
            episode += 1
            obs, info = env.reset(seed=seed + episode)
    return steps


@pytest.mark.parametrize("kw", [dict(window=128), dict(window=16),
                                dict(window=128, guard_wait=3600.0)],
                         ids=["w128", "w16", "w128-guard"])
def test_legal_rows_are_the_observation_s_rows(kw):
    env = _env(**kw)
    sizes, heads = [], []

    def check(obs, mask):
        rows = env._encoder.legal_rows(env._sim.scheduler.view, env._agent)
        k = int(mask.sum())
        assert np.array_equal(mask[:k], np.ones(k, dtype=np.int8))   # a legal prefix
        assert rows is not None and rows.dtype == np.float32 and rows.shape == (k, obs.shape[1])
        assert rows.tobytes() == obs[:k].tobytes()
        sizes.append(k)
        heads.append(len(env._agent.slots))

    _play(env, 1500, 3, check)
    if kw["window"] > 24:
        assert max(heads) > 24 and min(heads) <= 24     # both of encode's paths were compared
    if "guard_wait" in kw:
        assert sizes.count(1) > 10


def test_legal_rows_follow_changed_estimates():
    # A prediction changes queued jobs' estimates (the scheduler flags the pass): the
    # kept per-slot rows are recomputed.
    env = _env(window=128)
    changed = []

    def check(obs, mask):
        view, agent = env._sim.scheduler.view, env._agent
        rows = env._encoder.legal_rows(view, agent)
        assert rows.tobytes() == obs[:int(mask.sum())].tobytes()
        q = view.queue
        if q.count > 3 and len(changed) < 40:
            # Change estimates between decisions, as a prediction hook does.
            job = q.jobs[int(q.slots()[1])]
            env._sim.scheduler.set_queued_estimate(job, job.estimate * 0.5)
            changed.append(job)
            after = env._encoder.legal_rows(view, agent)
            assert after.tobytes() == env._encoder.encode(view, agent)[:len(after)].tobytes()
            assert not np.array_equal(after, rows)

    _play(env, 600, 11, check)
    assert len(changed) == 40


def test_legal_rows_only_for_head_windows():
    env = SchedulingEnv(ROOT / "scenarios/lublin256.yaml", actions="dras", observation="kernel",
                        window=20, episode_jobs=64)
    env.reset(seed=1)
    env._agent.slots = None       # not a head window (dras's level 2 keeps no slots)
    assert env._encoder.legal_rows(env._sim.scheduler.view, env._agent) is None


def test_the_shortcut_decides_as_act():
    policy = load_rl_policy(AGENT)
    env = _env(window=128)
    choose = policy.chooser(env._encoder)
    assert choose is not None
    answered = []

    def check(obs, mask):
        got = choose(env._sim.scheduler.view, env._agent)
        want = policy.act(obs, mask)
        if got is not None:
            answered.append(got)
            assert got == want

    _play(env, 800, 5, check)
    assert len(answered) > 700
    assert load_rl_policy(AGENT, backend="torch").chooser(env._encoder) is None
