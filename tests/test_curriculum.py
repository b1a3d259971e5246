"""DRAS's curriculum from the command line: played in order across envs, resumed where it stopped."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch
from test_checkpoint import curve_without_timing, same_state_dicts

from agents.__main__ import main
from agents.checkpoint import load_checkpoint
from agents.pg import PGArgs
from agents.pg import train as pg_train
from agents.rollout import EnvRunner
from cosim.compose import make_env
from cosim.env import SchedulingEnv

torch.set_num_threads(1)
SCENARIO = "scenarios/lublin256.yaml"
PHASES = {"sampled": 2, "periods": 2, "synthetic": 2}
CONFIG = {"scenario": SCENARIO, "actions": "dras", "window": 8, "episode_jobs": 12,
          "episode_source": "curriculum", "curriculum": PHASES, "reward": "capacity"}


def source_of(env) -> str:
    return env.unwrapped.simulation.workload.source


def test_env_plays_the_episode_index_it_is_given():
    env = SchedulingEnv(SCENARIO, actions="dras", window=8, episode_jobs=12,
                        episode_source="curriculum", curriculum=PHASES)
    sources = [w.source for w in env.curriculum]
    assert len(sources) == 6 and "jobset" in sources[0] and "synthetic" in sources[5]
    env.reset(seed=0, options={"episode": 4})
    assert source_of(env) == sources[4] and env.curriculum_position == 5
    env.reset(seed=0)                       # no index: the env's own next one
    assert source_of(env) == sources[5]
    env.reset(seed=0, options={"episode": 7})   # past the end: the list cycles
    assert source_of(env) == sources[1]


def test_runner_plays_the_curriculum_in_order_across_envs():
    fn = functools.partial(make_env, CONFIG)
    runner = EnvRunner([fn, fn], np.random.default_rng(0))
    sources = [w.source for w in make_env(CONFIG).curriculum]
    assert runner.episode_index.tolist() == [0, 1] and runner.next_episode == 2
    seen = []
    while runner.next_episode < 8:
        legal = [int(np.flatnonzero(m)[0]) for m in runner.mask]
        out = runner.step(np.array(legal))
        seen += [e["index"] for e in out["episodes"]]
    assert sorted(seen) == list(range(len(seen))) and len(seen) >= 6
    assert [source_of(e) for e in runner.envs.envs] == [sources[k % 6]
                                                        for k in runner.episode_index]


def test_resumed_training_continues_the_curriculum_where_it_stopped(tmp_path):
    fn = functools.partial(make_env, CONFIG)
    args = dict(seed=3, total_steps=192, num_envs=2, num_steps=16)
    full = pg_train(fn, PGArgs(**args), env_config=CONFIG)
    pg_train(fn, PGArgs(**args), out_dir=tmp_path, stop_after_updates=3, env_config=CONFIG)
    state, _ = load_checkpoint(tmp_path)
    stopped_at = state["runner"]["next_episode"]
    assert stopped_at > 2                   # some episodes of the curriculum were played
    rest = pg_train(fn, PGArgs(**args), out_dir=tmp_path, resume=True, env_config=CONFIG)
    assert same_state_dicts(full.net.state_dict(), rest.net.state_dict())
    assert curve_without_timing(full.curve) == curve_without_timing(rest.curve)
    assert rest.curve[3]["episodes_started"] >= stopped_at
    assert [r["episodes_started"] for r in rest.curve] == sorted(r["episodes_started"]
                                                                 for r in rest.curve)


def test_curriculum_flag_is_saved_and_resumed(tmp_path, capsys):
    tiny = ["--actions", "dras", "--window", "8", "--episode-jobs", "12", "--steps", "64",
            "--arg", "num_steps=16", "--algo", "pg", "--quiet"]
    full, split = tmp_path / "full", tmp_path / "split"
    spec = "sampled=2,periods=1,synthetic=3,load_range=0.5:2,seed=4"
    assert main(["train", SCENARIO, "--out", str(full), "--curriculum", spec, *tiny]) == 0
    _, meta = load_checkpoint(full)
    assert meta["env"]["episode_source"] == "curriculum"
    assert meta["env"]["curriculum"] == {"sampled": 2, "periods": 1, "synthetic": 3,
                                         "load_range": [0.5, 2.0], "seed": 4}
    path = tmp_path / "phases.json"
    path.write_text(json.dumps(meta["env"]["curriculum"]))
    assert main(["train", SCENARIO, "--out", str(split), "--curriculum", str(path),
                 "--time-budget", "0", *tiny]) == 0
    assert main(["train", SCENARIO, "--out", str(split), "--algo", "pg", "--resume",
                 "--quiet"]) == 0
    a, b = load_checkpoint(full)[0], load_checkpoint(split)[0]
    assert a["runner"]["next_episode"] == b["runner"]["next_episode"] > 1
    assert same_state_dicts(a["model"], b["model"])


@pytest.mark.parametrize("spec, message", [
    ("sampled=2,phases=3", "--curriculum: phases: expected one of sampled"),
    ("sampled=two", "--curriculum sampled: expected an integer"),
    ("sampled=0", "expected episode counts"),
    ("load_range=1", "--curriculum load_range: expected LOW:HIGH"),
    ("missing.json", "--curriculum missing.json: expected a JSON file"),
])
def test_bad_curricula_are_one_line_errors(tmp_path, capsys, spec, message):
    assert main(["train", SCENARIO, "--out", str(tmp_path / "o"), "--curriculum", spec,
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
