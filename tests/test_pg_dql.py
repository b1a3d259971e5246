"""DRAS's learners: REINFORCE with the average-return baseline (PG) and deep Q-learning (DQL)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_checkpoint import curve_without_timing, same_state_dicts
from test_ppo import PickEnv, greedy_return, pair_env

from agents.checkpoint import load_checkpoint
from agents.dql import DQLArgs, DQLLearner, ReplayBuffer, masked_max
from agents.dql import train as dql_train
from agents.networks import MLPPolicy
from agents.pg import PGArgs, PGLearner, update_returns
from agents.pg import train as pg_train
from agents.rollout import EnvRunner, collect_rollout
from cosim.errors import InputError

torch.set_num_threads(1)


# -- PG ----------------------------------------------------------------------------------
def test_update_returns_stop_at_the_update_and_at_episode_ends():
    r = np.array([[1.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    term = np.array([[False, False], [False, True], [False, False]])
    trunc = np.zeros((3, 2), bool)
    g = update_returns(r, term, trunc, np.full((3, 2), 0.5))
    # env 0: 4; 2 + 0.5*4 = 4; 1 + 0.5*4 = 3. env 1: ends at row 1: 1 + 0.5*1 = 1.5, 1, then 1.
    assert g[:, 0].tolist() == [3.0, 4.0, 4.0]
    assert g[:, 1].tolist() == [1.5, 1.0, 1.0]


def test_pg_baseline_is_the_average_return_per_position_over_past_updates():
    runner = EnvRunner([lambda: PickEnv()] * 2, np.random.default_rng(0))
    torch.manual_seed(0)
    net = MLPPolicy(12, 6)
    args = PGArgs(num_envs=2, num_steps=4, lr=1e-2)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    learner = PGLearner()
    gen = torch.Generator().manual_seed(0)
    seen = []
    for _ in range(3):
        roll = collect_rollout(runner, net, 4, gen).finish(args)
        g = update_returns(roll.rewards, roll.terminated, roll.truncated, np.ones((4, 2)))
        expected_b = np.mean(seen, axis=0) if seen else np.zeros(4)
        assert learner.baseline(4) == pytest.approx(expected_b)
        # The loss is minus the mean of log pi(a|s) (G_k - b_k) with the pre-update policy.
        with torch.no_grad():
            from agents.distributions import MaskedCategorical
            logits, _ = net(torch.as_tensor(roll.obs.reshape(8, 12)))
            logp = MaskedCategorical(logits, torch.as_tensor(roll.masks.reshape(8, 6))) \
                .log_prob(torch.as_tensor(roll.actions.reshape(8))).numpy()
        adv = (g - expected_b[:, None]).reshape(8)
        stats = learner.update(net, opt, roll, args, 0.0, np.random.default_rng(0))
        assert stats["policy_loss"] == pytest.approx(-(logp * adv).mean(), rel=1e-5)
        seen += [g[:, 0], g[:, 1]]
    assert learner.baseline_count == 6


def test_pg_solves_the_pick_task():
    result = pg_train(lambda: PickEnv(), PGArgs(seed=2, total_steps=6144, num_envs=4,
                                                num_steps=32, lr=1e-2))
    assert greedy_return(result.net, PickEnv()) >= 7.5
    assert result.curve[0]["mean_return"] < 4.5


# -- DQL ---------------------------------------------------------------------------------
def test_masked_max_ignores_illegal_actions_and_empty_rows():
    q = torch.tensor([[5.0, -1.0, 2.0], [0.0, 0.0, 9.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 0], [0, 0, 0]])
    best, arg = masked_max(q, mask)
    assert best.tolist() == [2.0, 0.0, 0.0] and arg.tolist()[:2] == [2, 0]


def test_replay_buffer_wraps_and_round_trips():
    buf = ReplayBuffer(5)

    def batch(start, n):
        k = np.arange(start, start + n)
        return dict(obs=k[:, None].astype(np.float32), mask=np.ones((n, 2), np.int8), action=k % 2,
                    reward=k.astype(np.float32), next_obs=k[:, None].astype(np.float32) + 1,
                    next_mask=np.ones((n, 2), np.int8), terminal=np.zeros(n, np.float32),
                    discount=np.ones(n, np.float32))
    buf.add(**batch(0, 3))
    buf.add(**batch(3, 4))     # 7 transitions in a ring of 5: 5 and 6 overwrite 0 and 1
    assert len(buf) == 5 and buf.pos == 2
    assert sorted(buf.data["reward"].tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]
    copy = ReplayBuffer(5)
    copy.load_state_dict(buf.state_dict())
    assert copy.pos == 2 and all(np.array_equal(copy.data[k], buf.data[k]) for k in buf.FIELDS)
    with pytest.raises(InputError, match="args.buffer_size"):
        ReplayBuffer(6).load_state_dict(buf.state_dict())


def test_dql_stores_next_states_with_final_observations_and_terminal_flags():
    # CountEnv-like episodes of 3 in PickEnv terms: a truncated episode's next
    # state is its final observation (bootstrapped), not the reset one.
    runner = EnvRunner([lambda: PickEnv(horizon=3)], np.random.default_rng(0))
    torch.manual_seed(0)
    net = MLPPolicy(12, 6)
    learner = DQLLearner()
    args = DQLArgs(num_steps=5, learning_starts=10**6, gamma=0.9)
    learner.bind(net, args)
    roll = collect_rollout(runner, net, 5, torch.Generator().manual_seed(0), learner.act)
    learner.update(net, None, roll, args, 0.0, np.random.default_rng(0))
    d = learner.replay.data
    assert len(learner.replay) == 5
    # Row 2 ended the episode (truncated at 3 steps): its next state is the final obs.
    assert roll.truncated[2, 0]
    assert np.array_equal(d["next_obs"][2], roll.final_obs[2, 0])
    assert not np.array_equal(d["next_obs"][2], roll.obs[3, 0])
    assert np.array_equal(d["next_obs"][0], roll.obs[1, 0])
    assert np.array_equal(d["next_obs"][4], roll.next_obs[0])
    assert d["terminal"][:5].tolist() == [0.0] * 5      # truncation is not terminal
    assert d["discount"][:5].tolist() == pytest.approx([0.9] * 5)


def test_dql_epsilon_decays_per_update_and_acts_greedily_at_zero():
    runner = EnvRunner([lambda: PickEnv()] * 4, np.random.default_rng(0))
    net = MLPPolicy(12, 6)
    learner = DQLLearner()
    args = DQLArgs(eps_start=1.0, eps_decay=0.5, eps_min=0.0, learning_starts=10**6)
    learner.bind(net, args)
    eps = []
    for _ in range(3):
        roll = collect_rollout(runner, net, 2, torch.Generator().manual_seed(0), learner.act)
        eps.append(learner.update(net, None, roll, args, 0.0, np.random.default_rng(0))["epsilon"])
    assert eps == [1.0, 0.5, 0.25]
    learner.updates = 10**4       # epsilon 0: always the best legal Q
    q, _ = net(torch.as_tensor(runner.obs))
    _, greedy = masked_max(q, torch.as_tensor(runner.mask))
    action, _, _ = learner.act(net, torch.as_tensor(runner.obs), torch.as_tensor(runner.mask),
                               torch.Generator().manual_seed(1))
    assert torch.equal(action, greedy)


def test_dql_solves_the_pick_task():
    result = dql_train(lambda: PickEnv(), DQLArgs(seed=1, total_steps=4096, num_envs=4,
                                                  num_steps=8, lr=3e-3, eps_decay=0.97,
                                                  learning_starts=64, target_every=10, gamma=0.5))
    assert greedy_return(result.net, PickEnv()) >= 7.5
    assert result.curve[-1]["epsilon"] == pytest.approx(0.05)


def test_dql_refuses_the_imitation_term():
    with pytest.raises(InputError, match="args.mimic_coef"):
        DQLArgs(mimic_coef=0.5).validate()


# -- checkpoints and exact resume --------------------------------------------------------
@pytest.mark.parametrize("algo", ["pg", "dql"])
def test_resume_gives_the_same_run(tmp_path, algo):
    if algo == "pg":
        trainer, args = pg_train, dict(seed=4, total_steps=60, num_envs=2, num_steps=5, lr=1e-2)
        cls = PGArgs
    else:
        trainer, cls = dql_train, DQLArgs
        args = dict(seed=4, total_steps=60, num_envs=2, num_steps=5, lr=1e-2, learning_starts=8,
                    minibatch_size=4, target_every=2, buffer_size=16)
    full = trainer(lambda: PickEnv(horizon=8), cls(**args), out_dir=tmp_path / "full")
    half = trainer(lambda: PickEnv(horizon=8), cls(**args), out_dir=tmp_path / "split",
                   stop_after_updates=3)
    assert half.update == 3
    rest = trainer(lambda: PickEnv(horizon=8), cls(**args), out_dir=tmp_path / "split",
                   resume=True)
    assert rest.update == full.update == 6
    assert same_state_dicts(full.net.state_dict(), rest.net.state_dict())
    assert curve_without_timing(full.curve) == curve_without_timing(rest.curve)
    a, meta = load_checkpoint(tmp_path / "full")      # weights_only=True
    b, _ = load_checkpoint(tmp_path / "split")
    assert meta["algo"] == algo
    if algo == "pg":
        assert a["learner"]["baseline_count"] == b["learner"]["baseline_count"] == 12
        assert torch.equal(a["learner"]["baseline_sum"], b["learner"]["baseline_sum"])
    else:
        assert a["learner"]["updates"] == 6 and a["learner"]["replay"]["size"] == 16
        assert same_state_dicts(a["learner"]["target"], b["learner"]["target"])
        assert torch.equal(a["learner"]["replay"]["obs"], b["learner"]["replay"]["obs"])


@pytest.mark.parametrize("algo", ["pg", "dql"])
def test_learners_run_in_the_scheduling_env_with_the_dras_network(algo):
    trainer, cls = (pg_train, PGArgs) if algo == "pg" else (dql_train, DQLArgs)
    extra = {} if algo == "pg" else {"learning_starts": 16, "minibatch_size": 8}
    result = trainer(lambda: pair_env(observation="dras", actions="dras", window=4, teacher=None),
                     cls(seed=1, total_steps=64, num_steps=16, **extra))
    assert result.update == 4 and result.net.spec["kind"] == "dras"
