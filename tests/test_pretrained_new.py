"""Issue 22's shipped agents (agents/pretrained/lublin256, lublin256-tsafrir).

From ``benchmarks/train_agents.py --recipe shipped``: lublin256 is an
``inspect`` agent over SAF+EASY, lublin256-tsafrir a ``select`` agent cloned
from F1+EASY. Each loads, runs as ``rl:DIR`` in a scenario run with the
estimate model it was trained for, gives the same schedule there as its
greedy episode in its own environment, and stays near its base heuristic on
a few hundred unseen jobs of other Lublin parameters. The inspector accepts
every proposal, so its schedule is its base's exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.rl_policy import load_rl_policy
from cosim.compose import make_env, run_policy
from cosim.workloads.estimates import apply_estimates
from cosim.workloads.lublin import lublin

ROOT = Path(__file__).resolve().parents[1]
AGENTS = {"lublin256": "exact", "lublin256-tsafrir": "tsafrir"}

torch.set_num_threads(1)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_shipped_agent_runs_as_a_policy_and_as_an_env_episode_alike(name, monkeypatch):
    monkeypatch.chdir(ROOT)     # the base policy's folder is named from the repository root
    folder = Path("agents") / "pretrained" / name
    assert (folder / "LATEST").exists(), f"{folder} is missing"
    assert (folder / "card.md").exists(), f"{folder} has no model card"
    policy = load_rl_policy(folder)
    env_config = policy.env_config
    assert env_config["actions"] in ("inspect", "select")
    assert f"workload.estimates.model={AGENTS[name]}" in env_config["scenario_set"]
    jobs = lublin(300, procs=256, seed=4243, kind="batch", load=0.9)  # not a training stream
    if AGENTS[name] != "exact":
        jobs = apply_estimates(jobs, AGENTS[name], seed=4244)
    env = make_env(env_config, teacher=None, episode_jobs=300, episode_end="completed")
    episode = policy.play(env, jobs)
    run = run_policy(env.scenario, f"rl:{folder}", None, workload=jobs)
    assert run["jobs_finished"] == 300
    assert np.isclose(run["bsld_mean"], episode["bsld_mean"], rtol=1e-9)
    assert np.isclose(run["wait_mean"], episode["wait_mean"], rtol=1e-9)
    base_name = env_config.get("base_policy") or f"{env_config['backfill_order']}+easy"
    base = run_policy(env.scenario, base_name, None, workload=jobs)
    fcfs = run_policy(env.scenario, "fcfs+easy", None, workload=jobs)
    assert run["bsld_mean"] <= fcfs["bsld_mean"]
    assert run["bsld_mean"] <= 1.5 * base["bsld_mean"]
    if env_config["actions"] == "inspect":
        assert run["bsld_mean"] == base["bsld_mean"]
        assert run["wait_max"] == base["wait_max"]


def _other_lublin(*argv: str) -> subprocess.CompletedProcess:
    """``python benchmarks/other_lublin.py ARGV`` (a script, run as its users run it)."""
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "other_lublin.py"), *argv],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)


def test_other_lublin_refuses_a_missing_checkpoint_in_one_line(tmp_path):
    out = _other_lublin("--agent", f"exact={tmp_path / 'nothing'}")
    assert out.returncode == 2
    assert out.stderr.strip() == (f"error: --agent exact={tmp_path / 'nothing'}: no checkpoint "
                                  f"folder at {tmp_path / 'nothing'}")
    out = _other_lublin("--estimates", "exact", "--agent",
                        f"tsafrir={ROOT / 'agents/pretrained/lublin256'}")
    assert out.returncode == 2
    assert "estimate model 'tsafrir' is not one of --estimates (exact)" in out.stderr
