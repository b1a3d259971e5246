"""``python -m agents train|evaluate`` on tiny budgets, and the RLPolicy loader."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from agents.__main__ import main
from agents.checkpoint import load_checkpoint
from agents.rl_policy import load_rl_policy, make_env
from cosim.errors import InputError

torch.set_num_threads(1)
SCENARIO = "scenarios/lublin256.yaml"
TINY = ["--steps", "256", "--envs", "2", "--arg", "num_steps=64", "--arg", "num_minibatches=2",
        "--episode-jobs", "32", "--quiet"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    code = main(["train", SCENARIO, "--out", str(out), "--observation", "kernel",
                 "--window", "6", "2", "--teacher", "sjf", "--bc-steps", "200", "--seed", "3",
                 *TINY])
    assert code == 0
    return out


def test_train_writes_curve_and_checkpoint(trained, capsys):
    rows = (trained / "curve.csv").read_text().splitlines()
    assert rows[0].startswith("update,global_step,episodes,mean_return")
    assert [r.split(",")[:2] for r in rows[1:]] == [["1", "128"], ["2", "256"]]
    state, meta = load_checkpoint(trained)
    assert state["update"] == 2 and meta["algo"] == "ppo"
    assert meta["args"]["mimic_coef"] == 0.5 and meta["args"]["num_steps"] == 64
    assert meta["env"]["window"] == [6, 2] and meta["env"]["teacher"] == "sjf"
    assert meta["network"]["kind"] == "kernel"


def test_rl_policy_acts_legally_and_reports_its_env(trained):
    policy = load_rl_policy(trained)
    assert policy.env_kwargs["window"] == (6, 2)
    assert "scenario" not in policy.env_kwargs and "teacher" not in policy.env_kwargs
    env = make_env(policy.env_config, teacher=None)
    obs, info = env.reset(seed=0)
    for _ in range(50):
        action = policy.act(obs, info["action_mask"])
        assert info["action_mask"][action] == 1
        obs, _, term, trunc, info = env.step(action)
        if term or trunc:
            obs, info = env.reset()
    p = policy.action_probabilities(obs, info["action_mask"])
    assert p.sum() == pytest.approx(1.0) and np.all(p[info["action_mask"] == 0] == 0)
    # A kernel network transfers to another window size.
    other = make_env(policy.env_config, teacher=None, window=(10, 0))
    obs, info = other.reset(seed=0)
    assert obs.shape == (11, 14)
    assert info["action_mask"][policy.act(obs, info["action_mask"])] == 1
    assert math.isfinite(policy.value(obs))


def test_evaluate_prints_metrics_and_baselines(trained, capsys):
    code = main(["evaluate", SCENARIO, "--checkpoint", str(trained), "--episodes", "2",
                 "--episode-jobs", "32", "--baseline", "sjf", "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert set(rows) == {"agent", "sjf"}
    for row in rows.values():
        assert row["episodes"] == 2.0
        assert row["mean_bsld"] >= 1.0 and 0 < row["utilization"] <= 1.0
        assert row["mean_return"] < 0 and row["max_wait"] >= row["mean_wait"] >= 0
    code = main(["evaluate", SCENARIO, "--checkpoint", str(trained), "--episodes", "1",
                 "--episode-jobs", "32"])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[0].split() == ["policy", "mean_return", "mean_bsld",
                                                         "mean_wait", "utilization", "max_wait"]
    assert out.splitlines()[1].startswith("agent")


def test_resume_continues_to_the_same_result(tmp_path, capsys):
    full, split = tmp_path / "full", tmp_path / "split"
    assert main(["train", SCENARIO, "--out", str(full), "--algo", "a2c", *TINY]) == 0
    # A zero time budget stops before the first update (as if killed right after starting).
    assert main(["train", SCENARIO, "--out", str(split), "--algo", "a2c", "--time-budget", "0",
                 *TINY]) == 0
    assert load_checkpoint(split)[0]["update"] == 0
    assert main(["train", SCENARIO, "--out", str(split), "--algo", "a2c", "--resume",
                 "--quiet"]) == 0
    a, b = load_checkpoint(full)[0], load_checkpoint(split)[0]
    assert b["update"] == a["update"] > 0
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert "resuming" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["evaluate", SCENARIO, "--checkpoint", "/nonexistent/run"], "expected a training output"),
    (["train", "scenarios/none.yaml", "--quiet"], "expected a scenario YAML file"),
    (["train", SCENARIO, "--arg", "ent_coeff=0.1"], "did you mean 'ent_coef'"),
    (["train", SCENARIO, "--arg", "num_steps=many"], "--arg num_steps: expected an integer"),
    (["train", SCENARIO, "--bc-steps", "10"], "--bc-steps: expected a --teacher"),
    (["train", SCENARIO, "--reward", "fast", "--quiet"], "reward: expected one of"),
    (["train", SCENARIO, "--teacher", "best", "--quiet"], "teacher: expected one of"),
    (["train", SCENARIO, "--ray", "--async", "--quiet"], "--ray: expected one of them"),
])
def test_user_errors_print_one_line_and_exit_2(tmp_path, capsys, argv, message):
    if argv[0] == "train":
        argv = [*argv, "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("error: ")


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", SCENARIO, "--algo", "dqn"])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_make_env_needs_a_scenario():
    with pytest.raises(InputError, match="env.scenario: expected a scenario path"):
        make_env({"observation": "compact"})


def test_trains_through_gymnasium_make():
    import gymnasium as gym

    from agents.ppo import Args, train
    from cosim.env import ENV_ID

    result = train(lambda: gym.make(ENV_ID, scenario=SCENARIO, episode_jobs=16),
                   Args(total_steps=64, num_steps=32, num_minibatches=2, update_epochs=1))
    assert result.update == 2 and result.curve[-1]["global_step"] == 64
