"""``python -m agents train|evaluate`` on tiny budgets, and the RLPolicy loader."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from agents.__main__ import main
from agents.checkpoint import load_checkpoint
from agents.evaluation import greedy_episode
from agents.rl_policy import load_rl_policy
from cosim.compose import make_env
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
    assert obs.shape == (11, 18)
    assert info["action_mask"][policy.act(obs, info["action_mask"])] == 1
    assert math.isfinite(policy.value(obs))


def test_evaluate_prints_metrics_and_baselines(trained, capsys):
    code = main(["evaluate", SCENARIO, "--checkpoint", str(trained), "--episodes", "2",
                 "--episode-jobs", "32", "--baseline", "sjf+easy", "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert set(rows) == {"agent", "sjf+easy"}
    for row in rows.values():
        assert row["episodes"] == 2.0 and len(row["per_episode"]) == 2
        assert row["bsld_mean"] >= 1.0 and 0 < row["utilization"] <= 1.0
        assert row["wait_max"] >= row["wait_mean"] >= 0
    assert rows["agent"]["mean_return"] < 0
    # paired by episode: the agent's ratio to the heuristic on the same jobs, as compare gives it
    paired = rows["agent"]["paired"]["sjf+easy"]
    per = [[e["bsld_mean"] for e in rows[k]["per_episode"]] for k in ("agent", "sjf+easy")]
    assert paired["windows"] == 2 and paired["reference"] == "sjf+easy"
    assert paired["mean_ratio"] == pytest.approx(np.mean(per[0]) / np.mean(per[1]))
    assert paired["wins"] + paired["losses"] <= 2


def test_evaluate_runs_the_heuristics_on_the_same_jobs(trained):
    # The heuristic row is the real policy (with its backfilling) run by the
    # runner on each episode's workload: equal to running it directly.
    from agents.__main__ import evaluate_episodes
    from cosim.compose import run_policy

    policy = load_rl_policy(trained)
    env = make_env(policy.env_config, teacher=None, episode_jobs=40)
    rows = evaluate_episodes(policy, env, 2, 7, heuristics=["f1+easy"])
    env.reset(seed=8)
    direct = run_policy(env.scenario, "f1+easy", None, workload=env.simulation.workload)
    assert rows["f1+easy"]["per_episode"][1]["bsld_mean"] == direct["bsld_mean"]


def test_evaluate_shows_the_default_baselines(trained, capsys):
    from agents.__main__ import DEFAULT_BASELINES

    code = main(["evaluate", SCENARIO, "--checkpoint", str(trained), "--episodes", "1",
                 "--episode-jobs", "32"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0].split() == ["policy", "bsld_mean", "wait_mean", "wait_max",
                                              "utilization", "queue_len_mean", "mean_return"]
    assert [line.split()[0] for line in lines[1:-1 - len(DEFAULT_BASELINES)]] == [
        "agent", *DEFAULT_BASELINES]
    # then, per heuristic, the agent against it paired by episode
    assert [line.split(" on ")[0] for line in lines[-1 - len(DEFAULT_BASELINES):-1]] == [
        f"agent vs {h}" for h in DEFAULT_BASELINES]
    assert all("1 episodes: mean bsld" in line for line in lines[-1 - len(DEFAULT_BASELINES):-1])


def test_resume_without_a_checkpoint_says_so(tmp_path, capsys):
    assert main(["train", SCENARIO, "--out", str(tmp_path / "none"), "--resume", *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --resume ") and "no checkpoint there" in err


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


def test_resume_extends_to_a_new_step_budget_and_says_when_nothing_is_left(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", SCENARIO, "--out", str(out), "--algo", "a2c", "--quiet", *TINY]) == 0
    assert load_checkpoint(out)[0]["update"] == 2            # 256 steps of 2 x 64
    # A larger --steps continues the run: two more updates, the curve goes on.
    assert main(["train", SCENARIO, "--out", str(out), "--algo", "a2c", "--resume", "--quiet",
                 "--steps", "512"]) == 0
    assert load_checkpoint(out)[0]["update"] == 4
    assert len((out / "curve.csv").read_text().strip().splitlines()) == 1 + 4
    capsys.readouterr()
    # Nothing left to train: one line, exit 0, and no new checkpoint written.
    before = sorted(p.name for p in out.iterdir())
    assert main(["train", SCENARIO, "--out", str(out), "--algo", "a2c", "--resume",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "already at update 4 of 4" in err and "nothing to train" in err
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize("argv, message", [
    (["evaluate", SCENARIO, "--checkpoint", "/nonexistent/run"], "expected a training output"),
    (["train", "scenarios/none.yaml", "--quiet"], "expected a scenario YAML file"),
    (["train", SCENARIO, "--arg", "ent_coeff=0.1"], "did you mean 'ent_coef'"),
    (["train", SCENARIO, "--arg", "num_steps=many"], "--arg num_steps: expected an integer"),
    (["train", SCENARIO, "--bc-steps", "10"], "--bc-steps: expected a --teacher"),
    (["train", SCENARIO, "--reward", "fast", "--quiet"], "reward: expected one of"),
    (["train", SCENARIO, "--teacher", "best", "--quiet"], "teacher: expected one of"),
    (["train", SCENARIO, "--env", "imgae_slots=3", "--quiet"], "did you mean 'image_slots'"),
    (["train", SCENARIO, "--env", "tau=5", "--tau", "4", "--quiet"], "--env tau: expected one of"),
    (["train", SCENARIO, "--algo", "dql", "--arg", "eps_decay=1.5", "--quiet"],
     "args.eps_start/eps_decay/eps_min"),
    (["train", SCENARIO, "--env", "smdp_gamma=0.9", "--quiet"],
     "args.smdp: expected args.smdp=true"),
    (["train", SCENARIO, "--smdp-gamma", "0.9", "--arg", "gamma=0.99", "--quiet"],
     "two different time discounts"),
    (["train", SCENARIO, "--image-slot-s", "0", "--quiet"], "image_slot_s: expected seconds > 0"),
    (["train", SCENARIO, "--ray", "--async", "--quiet"], "--ray: expected one of them"),
    # NaN passed "mimic_coef < 0" and trained; infinity trained on an infinite loss
    (["train", SCENARIO, "--mimic-coef", "nan", "--quiet"], "a finite mimic_coef >= 0"),
    (["train", SCENARIO, "--mimic-coef", "inf", "--quiet"], "a finite mimic_coef >= 0"),
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


@pytest.mark.parametrize("command, option, value, expected", [
    # numpy and Gymnasium take only seeds of 0 or more: these raised a traceback
    (["tune", SCENARIO, "--minutes", "1"], "--seed", "-1", "a whole number of 0 or more"),
    (["train", SCENARIO, "--steps", "64"], "--seed", "-1", "a whole number of 0 or more"),
    (["evaluate", "--checkpoint", "agents/pretrained/lublin256", SCENARIO], "--seed", "-1",
     "a whole number of 0 or more"),
    # asked to clone with no epoch (or fewer), the run trained without a word
    (["train", SCENARIO, "--teacher", "sjf+easy", "--bc-steps", "100"], "--bc-epochs", "0",
     "a whole number above 0"),
    (["train", SCENARIO, "--teacher", "sjf+easy"], "--bc-steps", "-3",
     "a whole number of 0 or more"),
])
def test_an_out_of_range_number_is_one_clear_line(command, option, value, expected, tmp_path,
                                                   capsys):
    out = [] if command[0] == "evaluate" else ["--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exit_:
        main([*command, *out, option, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2
    assert err == [f"python -m agents {command[0]}: error: argument {option}: expected "
                   f"{expected}, got {value}"]
    assert not (tmp_path / "o").exists()


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


@pytest.mark.parametrize("algo", ["ppo", "a2c", "pg", "dql"])
@pytest.mark.parametrize("actions,window", [("select", "16"), ("dras", "8")])
def test_every_action_model_trains_and_runs_as_a_policy(tmp_path, algo, actions, window):
    out = tmp_path / "run"
    assert main(["train", SCENARIO, "--out", str(out), "--algo", algo, "--actions", actions,
                 "--window", window, "--steps", "128", "--arg", "num_steps=64",
                 "--episode-jobs", "32", "--quiet"]) == 0
    policy = load_rl_policy(out)
    assert policy.env_config["actions"] == actions and policy.algo == algo
    env = make_env(policy.env_config, teacher=None)
    obs, info = env.reset(seed=0)
    action = policy.act(obs, info["action_mask"])
    assert info["action_mask"][action] == 1
    # Greedy: the best legal logit (or Q-value, for DQL).
    logits = policy.net(torch.as_tensor(obs)[None])[0][0].detach().numpy()
    assert logits[action] == logits[info["action_mask"] == 1].max()


def test_the_discount_is_applied_once(tmp_path):
    # --smdp-gamma: the env discounts within each step and the agent between
    # decisions, by the same gamma per time scale (thesis eq. 2.18).
    out = tmp_path / "run"
    assert main(["train", SCENARIO, "--out", str(out), "--smdp-gamma", "0.9",
                 "--time-scale", "600", *TINY]) == 0
    _, meta = load_checkpoint(out)
    assert meta["env"]["smdp_gamma"] == 0.9 and meta["env"]["time_scale"] == 600.0
    assert meta["args"]["smdp"] is True and meta["args"]["gamma"] == 0.9
    assert meta["args"]["time_scale"] == 600.0


def test_every_env_parameter_can_be_set_and_is_saved(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "scenarios/deeprm.yaml", "--out", str(out), "--algo", "a2c",
                 "--observation", "image", "--window", "5", "0", "--image-slots", "12",
                 "--tau", "2", "--time-scale", "1", "--horizon", "4",
                 "--reward-weights", "0.5", "0.25", "0.25", "--queue-norm", "100",
                 "--env", "max_time=500", *TINY]) == 0
    _, meta = load_checkpoint(out)
    env = meta["env"]
    assert (env["image_slots"], env["tau"], env["time_scale"], env["horizon"]) == (12, 2.0, 1.0, 4)
    assert env["reward_weights"] == [0.5, 0.25, 0.25] and env["queue_norm"] == 100.0
    assert env["max_time"] == 500
    # The image slot length was sized to the workload (longest request 15 s over
    # 3/4 of 12 rows) and pinned, so evaluation elsewhere sees the same scale.
    assert env["image_slot_s"] == pytest.approx(15 / 9)
    built = make_env(env, teacher=None)
    assert built.observation_space.shape == (2, 12, 7) and built.tau == 2.0


def test_rl_policy_in_cosim_run_schedules_as_its_env_episode(trained, tmp_path):
    # rl:DIR is a plain policy in the runner: same window, mask, observation
    # and greedy choices as the env's own episode on the same jobs.
    import numpy as np

    from cosim import records
    from cosim.compose import run_policy
    from cosim.config import load_scenario
    from cosim.workloads.windows import window

    policy = load_rl_policy(trained)
    scenario = load_scenario(SCENARIO)
    env = make_env(policy.env_config, teacher=None, episode_jobs=60)
    w = window(env.workload, 60, start=500)
    info = greedy_episode(policy, env, seed=0, options={"jobs": w}).info
    in_env = records.jobs_table(env.simulation.scheduler.jobs)
    summary = run_policy(scenario, f"rl:{trained}", tmp_path / "rl", workload=w)
    assert summary["bsld_mean"] == info["episode_metrics"]["bsld_mean"]
    assert summary["wait_max"] == info["episode_metrics"]["wait_max"]
    run = records.read_jobs(tmp_path / "rl" / "jobs.parquet")
    assert np.array_equal(np.asarray(run["start"]), in_env["start"])
    assert list(run["mode"]) == in_env["mode"]
