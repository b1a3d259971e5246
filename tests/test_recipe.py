"""The training recipe: selection on validation only, the env factory, scales, intervals."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.checkpoint import load_checkpoint, read_meta
from agents.loop import Args
from agents.recipe import Selection, select_then_test, train
from cosim.compose import EnvFactory, pin_scales
from cosim.env.wrappers import VariableLengthEpisodes
from cosim.errors import InputError

torch.set_num_threads(1)
SCENARIO = "scenarios/lublin256.yaml"
SMALL = {"scenario": SCENARIO, "actions": "select", "window": 16, "episode_jobs": 32}


class Window:
    """A data window that says which split it belongs to."""

    def __init__(self, split: str, k: int):
        self.split, self.k = split, k


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.data())
def test_selection_is_the_validation_best_whatever_the_test_data(n_cand, n_val, n_test, data):
    cands = [f"c{i}" for i in range(n_cand)]
    floats = st.floats(0, 100, allow_nan=False)
    val = {(c, k): data.draw(floats) for c in cands for k in range(n_val)}
    test = {(c, k): data.draw(floats) for c in cands for k in range(n_test)}
    calls = []

    def score(c, w):
        calls.append(w.split)
        return (val if w.split == "val" else test)[c, w.k]

    chosen, v, t = select_then_test(cands, [Window("val", k) for k in range(n_val)],
                                    [Window("test", k) for k in range(n_test)], score)
    means = [np.mean([val[c, k] for k in range(n_val)]) for c in cands]
    assert chosen == cands[int(np.argmin(means))]
    # Every validation window is read before the first test window.
    assert calls == ["val"] * (n_cand * n_val) + ["test"] * (n_cand * n_test)
    assert t == {c: [test[c, k] for k in range(n_test)] for c in cands}


def test_selection_never_reads_test_data_before_choosing():
    class Untouchable(list):
        """A test set that fails the run if read before the choice is made."""

        def __iter__(self):
            raise AssertionError("test data read")

    seen = []
    with pytest.raises(AssertionError, match="test data read"):
        select_then_test(["a", "b"], [Window("val", 0)], Untouchable([Window("test", 0)]),
                         lambda c, w: seen.append((c, w.split)) or (c == "b"))
    # Both candidates were scored on validation, none on test.
    assert seen == [("a", "val"), ("b", "val")]


def test_selection_needs_candidates():
    with pytest.raises(InputError, match="candidates: expected at least one"):
        select_then_test([], [], [], lambda c, w: 0.0)


def test_the_kept_snapshot_is_the_best_scored_one(tmp_path):
    scores = iter([5.0, 1.0, 7.0, 7.0, 7.0, 7.0])
    config = dict(SMALL, teacher=None)
    pin_scales(config).close()
    kept = train(EnvFactory(config), "ppo", Args(seed=1, total_steps=128, num_steps=32,
                                                  num_minibatches=2, update_epochs=1),
                 selection=Selection(lambda policy: (next(scores), "x"), every_s=None,
                                     every_updates=1),
                 out=tmp_path / "kept", env_config=config)
    assert (kept.update, kept.step, kept.score) == (1, 32, 1.0)
    meta = read_meta(tmp_path / "kept")
    assert meta["update"] == 1 and meta["validation_score"] == 1.0
    assert meta["env"]["max_time"] == config["max_time"]
    state, _ = load_checkpoint(tmp_path / "kept")
    assert state["update"] == 1


def test_selection_refuses_resume_and_needs_an_output(tmp_path):
    sel = Selection(lambda p: (0.0, ""))
    with pytest.raises(InputError, match="resume"):
        train(EnvFactory(SMALL), "ppo", Args(), selection=sel, out=tmp_path, resume=True)
    with pytest.raises(InputError, match="out: expected a folder"):
        train(EnvFactory(SMALL), "ppo", Args(), selection=sel)
    with pytest.raises(InputError, match="algo: expected one of ppo, a2c, pg, dql"):
        train(EnvFactory(SMALL), "sac", Args())


def test_env_factory_is_picklable_and_draws_episode_lengths():
    factory = pickle.loads(pickle.dumps(EnvFactory(SMALL, ("sjf", "sjf"), episode_range=(8, 12))))
    env = factory()
    assert isinstance(env, VariableLengthEpisodes)
    assert env.unwrapped.teacher_name == ("sjf", "sjf")   # the levels are the env's own setting
    lengths = set()
    for seed in range(6):
        env.reset(seed=seed)
        lengths.add(env.unwrapped.episode_jobs)
        _, info = env.reset(seed=seed)
        assert "teacher_action" in info
    assert lengths <= set(range(8, 13)) and len(lengths) > 1


def test_pin_scales_pins_the_probe_scales_and_keeps_given_ones():
    config = dict(SMALL)
    probe = pin_scales(config)
    assert config["max_time"] == float(probe.unwrapped.max_time)
    probe.close()
    config = dict(SMALL, max_time=123.0)
    pin_scales(config).close()
    assert config["max_time"] == 123.0
