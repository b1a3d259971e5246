"""Transfer across cluster sizes (seed 003): a 256-core agent evaluated on 128 and 1,024 cores."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agents.__main__ import main
from agents.rl_policy import load_rl_policy
from cosim.compose import make_env, run_policy

torch.set_num_threads(1)
SCENARIO = "scenarios/lublin256.yaml"
TINY = ["--steps", "128", "--arg", "num_steps=64", "--episode-jobs", "32", "--quiet"]


@pytest.fixture(scope="module")
def agents_256(tmp_path_factory):
    root = tmp_path_factory.mktemp("transfer")
    kernel, dras = root / "kernel", root / "dras"
    assert main(["train", SCENARIO, "--out", str(kernel), "--actions", "select", "--window", "16",
                 *TINY]) == 0
    assert main(["train", SCENARIO, "--out", str(dras), "--actions", "dras", "--window", "8",
                 "--algo", "pg", *TINY]) == 0
    return {"kernel": kernel, "dras": dras}


@pytest.mark.parametrize("kind", ["kernel", "dras"])
@pytest.mark.parametrize("nodes", [128, 1024])
def test_evaluate_on_another_cluster_size(agents_256, kind, nodes, capsys):
    code = main(["evaluate", SCENARIO, "--checkpoint", str(agents_256[kind]), "--episodes", "1",
                 "--episode-jobs", "48", "--set", f"cluster.nodes={nodes}",
                 "--baseline", "fcfs+easy", "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    agent, fcfs = rows["agent"], rows["fcfs+easy"]
    assert agent["bsld_mean"] >= 1 and 0 < agent["utilization"] <= 1
    # The heuristic ran on the same jobs, on the target machine.
    policy = load_rl_policy(agents_256[kind])
    env = make_env(policy.env_config, scenario=SCENARIO, scenario_set=[f"cluster.nodes={nodes}"],
                   teacher=None, episode_jobs=48)
    env.reset(seed=1000)
    assert env.capacity == nodes and int(env.simulation.workload.procs.max()) <= nodes
    direct = run_policy(env.scenario, "fcfs+easy", None, workload=env.simulation.workload)
    assert fcfs["bsld_mean"] == direct["bsld_mean"]


def test_the_observation_keeps_its_shape_and_scales_sizes_by_the_machine(agents_256):
    policy = load_rl_policy(agents_256["dras"])
    trained_shape = tuple(policy.meta["network"]["obs_shape"])
    assert policy.env_config["node_rows"] == 256          # pinned at training time
    for nodes in (128, 1024):
        env = make_env(policy.env_config, scenario_set=[f"cluster.nodes={nodes}"], teacher=None)
        obs, info = env.reset(seed=0)
        assert obs.shape == trained_shape
        assert info["action_mask"][policy.act(obs, info["action_mask"])] == 1
    # Kernel rows: a job's size is its share of the machine it runs on.
    kernel = load_rl_policy(agents_256["kernel"])
    for nodes in (128, 1024):
        env = make_env(kernel.env_config, scenario_set=[f"cluster.nodes={nodes}"], teacher=None)
        obs, _ = env.reset(seed=0)
        window = env.unwrapped._agent.window
        present = [i for i, job in enumerate(window) if job is not None]
        procs = np.array([window[i].procs for i in present])
        assert obs[present, 5] == pytest.approx(np.minimum(1.0, procs / nodes))


def test_evaluate_says_which_machine_it_ran_on(agents_256, capsys):
    assert main(["evaluate", SCENARIO, "--checkpoint", str(agents_256["kernel"]), "--episodes",
                 "1", "--episode-jobs", "32", "--set", "cluster.nodes=128",
                 "--baseline", "none"]) == 0
    assert "on 128 units; trained on 256" in capsys.readouterr().out
