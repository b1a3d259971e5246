"""Checkpoints: atomic layout, weights_only loading, and exact resume (in and across processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from test_ppo import PickEnv

from agents.a2c import A2CArgs
from agents.a2c import train as a2c_train
from agents.checkpoint import (
    capture_rng,
    latest_checkpoint,
    load_checkpoint,
    read_meta,
    restore_rng,
    save_checkpoint,
)
from agents.ppo import Args, train
from cosim.errors import InputError

torch.set_num_threads(1)
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

# Rollouts of 5 steps against episodes of 8: checkpoints fall in mid-episode.
ARGS = dict(seed=4, total_steps=60, num_envs=2, num_steps=5, num_minibatches=2, update_epochs=2,
            lr=1e-2)


def env_fn():
    return PickEnv(horizon=8)


def same_state_dicts(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def curve_without_timing(curve):
    # As text, so that NaN (no episode ended in an update) compares equal to NaN.
    return json.dumps([{k: v for k, v in row.items() if k not in ("fps", "elapsed_s")}
                       for row in curve])


def test_save_load_round_trip_with_weights_only(tmp_path):
    rng = np.random.default_rng(5)
    gen = torch.Generator().manual_seed(9)
    state = {"update": 3, "model": {"w": torch.arange(4.0)}, "rng": capture_rng(rng, gen),
             "curve": [{"a": 1.0, "b": float("nan")}], "names": ["x", "y"]}
    path = save_checkpoint(tmp_path, state, {"algo": "ppo", "args": {"lr": 0.1}})
    assert path == tmp_path / "ckpt-000003"
    assert (tmp_path / "LATEST").read_text().strip() == "ckpt-000003"
    # Loadable by torch's restricted unpickler, with no help from us.
    raw = torch.load(path / "state.pt", weights_only=True)
    assert torch.equal(raw["model"]["w"], torch.arange(4.0))
    loaded, meta = load_checkpoint(tmp_path)
    assert meta["algo"] == "ppo" and meta["args"] == {"lr": 0.1}
    expected = (rng.random(3), torch.rand(3, generator=gen))
    rng2, gen2 = np.random.default_rng(0), torch.Generator()
    restore_rng(loaded["rng"], rng2, gen2)
    assert np.array_equal(rng2.random(3), expected[0])
    assert torch.equal(torch.rand(3, generator=gen2), expected[1])


def test_keeps_the_newest_two_and_ignores_half_written_ones(tmp_path):
    for update in (1, 2, 3):
        save_checkpoint(tmp_path, {"update": update}, {"algo": "ppo"})
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == ["ckpt-000002", "ckpt-000003"]
    # A crash while writing leaves a temporary directory: not a checkpoint.
    stale = tmp_path / ".tmp-ckpt-dead"
    stale.mkdir()
    (stale / "state.pt").write_bytes(b"partial")
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000003"
    save_checkpoint(tmp_path, {"update": 3}, {"algo": "ppo"})    # same update again
    assert not stale.exists()
    assert (tmp_path / "LATEST").read_text().strip() == "ckpt-000003-1"
    # Without the pointer the newest complete checkpoint is used.
    (tmp_path / "LATEST").unlink()
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt-000003-1"


def test_bad_checkpoints_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="expected a training output or checkpoint directory"):
        load_checkpoint(tmp_path)
    ckpt = tmp_path / "ckpt-000001"
    ckpt.mkdir()
    (ckpt / "meta.json").write_text('{"format": "other/9"}')
    (ckpt / "state.pt").write_bytes(b"")
    with pytest.raises(InputError, match="expected format 'hpc-cosim-agent/1', got format 'other/9'"):
        read_meta(tmp_path)
    (ckpt / "meta.json").write_text('{"format": \n oops')
    with pytest.raises(InputError, match="meta.json:2: expected a meta.json written by agents.checkpoint, got invalid JSON"):
        read_meta(tmp_path)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_resume_in_process_gives_identical_results(tmp_path, algo):
    trainer, cls = (train, Args) if algo == "ppo" else (a2c_train, A2CArgs)
    full = trainer(env_fn, cls(**ARGS), out_dir=tmp_path / "full")
    half = trainer(env_fn, cls(**ARGS), out_dir=tmp_path / "split", stop_after_updates=3)
    assert half.update == 3 and not half.finished
    rest = trainer(env_fn, cls(**ARGS), out_dir=tmp_path / "split", resume=True)
    assert rest.update == full.update == 6 and rest.finished
    assert same_state_dicts(full.net.state_dict(), rest.net.state_dict())
    assert curve_without_timing(full.curve) == curve_without_timing(rest.curve)
    s_full, _ = load_checkpoint(tmp_path / "full")
    s_rest, _ = load_checkpoint(tmp_path / "split")
    assert torch.equal(s_full["optimizer"]["state"][0]["exp_avg_sq" if algo == "ppo"
                                                      else "square_avg"],
                       s_rest["optimizer"]["state"][0]["exp_avg_sq" if algo == "ppo"
                                                      else "square_avg"])
    # The curve file was rewritten from the checkpoint, then appended: one row per update.
    lines = (tmp_path / "split" / "curve.csv").read_text().splitlines()
    assert len(lines) == 1 + 6 and lines[-1].startswith("6,60,")


def test_resume_refuses_other_args_and_fresh_runs_refuse_old_outputs(tmp_path):
    train(env_fn, Args(**ARGS), out_dir=tmp_path, stop_after_updates=1)
    with pytest.raises(InputError, match="expected a new directory, or resume=True"):
        train(env_fn, Args(**ARGS), out_dir=tmp_path)
    with pytest.raises(InputError, match="args.lr: expected 0.01 as in the checkpoint"):
        train(env_fn, Args(**{**ARGS, "lr": 0.02}), out_dir=tmp_path, resume=True)
    with pytest.raises(InputError, match="expected a a2c checkpoint, got a ppo checkpoint"):
        a2c_train(env_fn, A2CArgs(**ARGS), out_dir=tmp_path, resume=True)


def test_async_envs_and_sync_envs_give_the_same_run(tmp_path):
    sync = train(env_fn, Args(**ARGS))
    both = train(env_fn, Args(**ARGS, async_envs=True), out_dir=tmp_path, stop_after_updates=2)
    assert both.update == 2
    # The resumed envs are rebuilt (seeded reset + replayed actions) in the subprocesses.
    rest = train(env_fn, Args(**ARGS, async_envs=True), out_dir=tmp_path, resume=True)
    assert same_state_dicts(sync.net.state_dict(), rest.net.state_dict())


SCRIPT = """
import json, sys, time
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
from test_ppo import PickEnv
from agents.ppo import Args, train

class SlowPickEnv(PickEnv):
    def step(self, action):
        time.sleep(float(sys.argv[3]))
        return super().step(action)

stop = int(sys.argv[4]) if len(sys.argv) > 4 else None
train(lambda: SlowPickEnv(horizon=8), Args(**json.loads(sys.argv[2])), out_dir=sys.argv[1],
      resume=True, stop_after_updates=stop)
"""


def run_script(out, args, delay=0.0, stop=None, wait=True):
    cmd = [sys.executable, "-c", SCRIPT.format(tests=str(TESTS)), str(out), json.dumps(args),
           str(delay)] + ([str(stop)] if stop is not None else [])
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    if wait:
        out_, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    return proc


def test_resume_in_a_fresh_process_gives_identical_weights(tmp_path):
    full = train(env_fn, Args(**ARGS))
    train(env_fn, Args(**ARGS), out_dir=tmp_path, stop_after_updates=3)
    run_script(tmp_path, ARGS)
    state, meta = load_checkpoint(tmp_path)
    assert state["update"] == 6 and meta["algo"] == "ppo"
    assert same_state_dicts(full.net.state_dict(), state["model"])


@pytest.mark.slow
def test_resume_after_kill_9_gives_identical_weights(tmp_path):
    args = {**ARGS, "total_steps": 400, "checkpoint_every_updates": 1}   # 40 updates
    full = train(env_fn, Args(**args))
    proc = run_script(tmp_path, args, delay=0.01, wait=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ckpt = latest_checkpoint(tmp_path)
        if ckpt is not None and int(ckpt.name.split("-")[1]) >= 8:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = load_checkpoint(tmp_path)[0]["update"]
    assert 8 <= killed_at < 40
    run_script(tmp_path, args)
    state, _ = load_checkpoint(tmp_path)
    assert state["update"] == 40
    assert same_state_dicts(full.net.state_dict(), state["model"])


def test_resume_mid_episode_in_the_scheduling_env(tmp_path):
    import functools

    from cosim.compose import make_env

    config = {"scenario": str(REPO / "scenarios" / "lublin256.yaml"), "observation": "compact",
              "window": [6, 2], "kill_slots": 2, "episode_jobs": 64, "reward": "bsld"}
    fn = functools.partial(make_env, config)
    args = dict(seed=2, total_steps=256, num_envs=2, num_steps=32, num_minibatches=2,
                update_epochs=2)
    full = train(fn, Args(**args))
    train(fn, Args(**args), out_dir=tmp_path, stop_after_updates=2, env_config=config)
    state, _ = load_checkpoint(tmp_path)
    assert all(len(a) > 0 for a in state["runner"]["episode_actions"])   # mid-episode
    rest = train(fn, Args(**args), out_dir=tmp_path, resume=True, env_config=config)
    assert same_state_dicts(full.net.state_dict(), rest.net.state_dict())
    assert curve_without_timing(full.curve) == curve_without_timing(rest.curve)


def test_loading_a_policy_to_act_uses_one_torch_thread(monkeypatch):
    from agents.rl_policy import load_rl_policy

    shipped = Path(__file__).resolve().parents[1] / "agents" / "pretrained" / "lublin256-select"
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        load_rl_policy(shipped)
        assert torch.get_num_threads() == 1
        # A thread count the user set for OpenMP wins.
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        torch.set_num_threads(2)
        load_rl_policy(shipped)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
