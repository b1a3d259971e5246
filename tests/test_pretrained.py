"""The shipped agent (agents/pretrained/lublin256, from benchmarks/train_agents.py).

It is a policy like any other: ``rl:agents/pretrained/lublin256`` in a
scenario run gives the same schedule as the agent's greedy episode in the
environment it was trained in, on the same jobs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from agents.rl_policy import load_rl_policy
from cosim.compose import make_env, run_policy
from cosim.workloads.lublin import lublin

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "agents" / "pretrained" / "lublin256"

torch.set_num_threads(1)


def test_the_shipped_agent_runs_as_a_policy_and_as_an_env_episode_alike():
    assert (AGENT / "LATEST").exists(), f"{AGENT} is missing"
    policy = load_rl_policy(AGENT)
    jobs = lublin(300, procs=256, seed=4242)   # not the training stream (seed 1)
    env = make_env(policy.env_config, teacher=None, episode_jobs=300)
    episode = policy.play(env, jobs)
    run = run_policy(env.scenario, f"rl:{AGENT}", None, workload=jobs)
    assert run["jobs_finished"] == 300
    assert np.isclose(run["bsld_mean"], episode["bsld_mean"], rtol=1e-9)
    assert np.isclose(run["wait_mean"], episode["wait_mean"], rtol=1e-9)
    fcfs = run_policy(env.scenario, "fcfs+easy", None, workload=jobs)
    # A trained agent, not a random one: no worse than FCFS with EASY here.
    assert run["bsld_mean"] <= fcfs["bsld_mean"]
