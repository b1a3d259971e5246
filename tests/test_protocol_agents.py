"""The protocol scores trained agents (rl:DIR, through the loader agents installs) and tuned
policies (learned:DIR) like heuristics, in this process and in worker processes."""

from __future__ import annotations

import numpy as np
import pytest

import agents  # noqa: F401  (installs the rl: loader)
from agents.acting import ActingAgent
from agents.evaluation import greedy_episode
from agents.rl_policy import load_rl_policy
from cosim.compose import make_env
from cosim.config import load_scenario
from cosim.errors import ScenarioError
from cosim.evaluation import Protocol, ProtocolError, checked_source, windows
from cosim.policies.loaders import POLICY_LOADERS
from cosim.workloads.loading import load_workload

AGENT = "agents/pretrained/lublin256"
TUNED = "agents/pretrained/ricc-tuned"
SCENARIO = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=200"])


def _windows():
    return windows(load_workload(SCENARIO, base_dir="scenarios"), 50, 3)


@pytest.mark.parametrize("processes", [1, 2])
def test_agents_and_tuned_policies_are_scored_like_heuristics(processes):
    names = ["sjf+easy", f"rl:{AGENT}", f"learned:{TUNED}"]
    scores = Protocol.given(SCENARIO, _windows(), processes=processes).test(names, whole=False)
    assert scores.names == names and scores.windows.shape == (3, 3, 3)
    assert np.all(scores.windows[:, :, 0] >= 1.0)
    # the same agent as a policy source: the same figures
    again = Protocol.given(SCENARIO, _windows()).test([ActingAgent(AGENT)], whole=False)
    assert again.names == [f"rl:{AGENT}"]
    np.testing.assert_array_equal(again.windows[0], scores.windows[1])


def test_the_agent_scores_as_it_played_its_episodes():
    policy = load_rl_policy(AGENT)
    env = make_env(policy.env_config, teacher=None, episode_jobs=40)
    played, episodes = [], []
    for seed in (3, 4):
        info = greedy_episode(policy, env, seed=seed).info
        episodes.append(env.unwrapped.simulation.workload)
        played.append([info["episode_metrics"][k] for k in ("bsld_mean", "utilization")])
    scores = Protocol.given(env.unwrapped.scenario, episodes).test(
        [ActingAgent(AGENT, agent=policy)], whole=False, keys=["utilization"])
    assert scores.keys == ("bsld_mean", "wait_mean", "wait_max", "utilization")
    got = np.stack([scores.column(f"rl:{AGENT}", k) for k in ("bsld_mean", "utilization")], 1)
    np.testing.assert_allclose(got, np.array(played), rtol=1e-12)


def test_a_protocol_over_given_windows_reads_them_once():
    protocol = Protocol.given(SCENARIO, _windows())
    protocol.test(["sjf+easy"], whole=False)
    with pytest.raises(ProtocolError, match="read"):
        protocol.test(["sjf+easy"], whole=False)


def test_an_agent_without_its_loader_is_one_clear_line(monkeypatch):
    monkeypatch.delitem(POLICY_LOADERS, "rl")
    with pytest.raises(ScenarioError, match=r"rl:DIR, needs its loader: import agents"):
        checked_source(f"rl:{AGENT}", SCENARIO)
