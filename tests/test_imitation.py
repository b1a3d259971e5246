"""Behaviour cloning: near-100 % teacher agreement on the toy and the real task."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_ppo import PickEnv, pair_env

from agents.imitation import Demonstrations, agreement, behaviour_cloning, collect_demonstrations
from agents.networks import make_network
from cosim.errors import InputError

torch.set_num_threads(1)


def test_collect_records_what_the_teacher_saw_and_did():
    demos = collect_demonstrations(lambda: PickEnv(horizon=8), 40, seed=0)
    assert len(demos) == 40 and demos.episodes == 5 and demos.skipped == 0
    # In PickEnv the observation's first n entries one-hot encode the target = teacher action.
    assert np.array_equal(demos.obs[:, :6].argmax(1), demos.actions)
    assert np.all(demos.masks[np.arange(40), demos.actions] == 1)
    again = collect_demonstrations(lambda: PickEnv(horizon=8), 40, seed=0)
    assert np.array_equal(again.obs, demos.obs)


@pytest.mark.parametrize("observation", ["compact", "kernel"])
def test_cloning_reaches_near_full_agreement_on_the_toy_task(observation):
    env_fn = lambda: PickEnv(observation=observation)  # noqa: E731
    train = collect_demonstrations(env_fn, 1500, seed=0)
    held_out = collect_demonstrations(env_fn, 500, seed=1)
    env = env_fn()
    torch.manual_seed(0)
    net = make_network(env.observation_space, env.action_space)
    before = agreement(net, held_out)
    losses = behaviour_cloning(net, train, epochs=10)
    assert losses[-1] < losses[0]
    assert before < 0.6
    assert agreement(net, held_out) >= 0.98


def test_cloning_sjf_in_the_real_env():
    train = collect_demonstrations(pair_env, 1000, seed=0)
    held_out = collect_demonstrations(pair_env, 400, seed=1)
    env = pair_env()
    torch.manual_seed(0)
    net = make_network(env.observation_space, env.action_space)
    behaviour_cloning(net, train, epochs=10)
    assert agreement(net, held_out) >= 0.98


def test_callable_teacher_and_skipped_illegal_actions():
    # A teacher that always names slot 0: legal only when the mask allows it.
    demos = collect_demonstrations(lambda: PickEnv(), 200, seed=3, teacher=lambda obs, info: 0)
    assert len(demos) + demos.skipped == 200
    assert 0 < demos.skipped < 200
    assert set(demos.actions.tolist()) == {0}


def test_errors():
    class NoTeacher(PickEnv):
        def _info(self):
            return {"action_mask": self.mask.copy()}
    with pytest.raises(InputError, match="teacher: expected a teacher callable"):
        collect_demonstrations(lambda: NoTeacher(), 5)
    with pytest.raises(InputError, match="steps: expected a positive number"):
        collect_demonstrations(lambda: PickEnv(), 0)
    empty = Demonstrations(np.zeros((0, 12), np.float32), np.zeros((0, 6), np.int8),
                           np.zeros(0, np.int64))
    with pytest.raises(InputError, match="demonstrations"):
        behaviour_cloning(make_network(PickEnv().observation_space, PickEnv().action_space), empty)


def test_balanced_cloning_learns_a_rare_choice():
    # 2 actions; the teacher picks 1 only when feature 0 is set (2 % of the
    # decisions). Plain cloning may ignore it; balanced cloning learns it.
    import torch

    from agents.imitation import Demonstrations, agreement, behaviour_cloning
    from agents.networks import MLPPolicy

    rng = np.random.default_rng(0)
    x = rng.random((2000, 3)).astype(np.float32)
    x[:, 0] = (rng.random(2000) < 0.02).astype(np.float32)
    actions = x[:, 0].astype(np.int64)
    demos = Demonstrations(obs=x, masks=np.ones((2000, 2), np.int8), actions=actions)
    torch.manual_seed(0)
    net = MLPPolicy(3, 2)
    behaviour_cloning(net, demos, epochs=15, batch_size=128, balance=True)
    rare = Demonstrations(obs=x[actions == 1], masks=np.ones((int(actions.sum()), 2), np.int8),
                          actions=actions[actions == 1])
    assert agreement(net, rare) > 0.9 and agreement(net, demos) > 0.9
