"""Workload mixtures (cosim/workloads/mixture.py, episode_source="mixture"): reproducible
episodes, parameters inside their ranges, one-line errors, and a training run that saves
the mixture in its checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.__main__ import main
from agents.checkpoint import load_checkpoint
from cosim.env import SchedulingEnv
from cosim.env.episodes import MixtureEpisodes, make_episode_source
from cosim.env.spec import EnvSpec
from cosim.errors import ScenarioError
from cosim.workloads.base import Workload
from cosim.workloads.lublin import LUBLIN_PARAMS, lublin
from cosim.workloads.mixture import DEFAULT_RANGES, draw_params, normalise_mixture
from cosim.workloads.windows import window

torch.set_num_threads(1)
SCENARIO = "scenarios/lublin256.yaml"
TRACE = lublin(200, procs=64, seed=3)


def columns(w: Workload) -> tuple:
    return (w.submit.tolist(), w.run.tolist(), w.procs.tolist(), w.req_time.tolist())


def test_default_ranges_span_the_three_published_fits():
    # Hand-checked against LUBLIN_PARAMS (batch, interactive, typeless).
    assert DEFAULT_RANGES["serial_prob"] == (0.1541, 0.2927)
    assert DEFAULT_RANGES["uprob"] == (0.705, 0.875)
    assert DEFAULT_RANGES["pb"] == (0.6986, 0.9156)
    assert DEFAULT_RANGES["a1"] == (3.8351, 6.57)
    assert "a2" not in DEFAULT_RANGES and "aarr" not in DEFAULT_RANGES


def test_default_lublin_is_unchanged_by_the_params_argument():
    a = lublin(300, procs=128, seed=5, load=0.8)
    b = lublin(300, procs=128, seed=5, load=0.8, params=LUBLIN_PARAMS["typeless"])
    assert columns(a) == columns(b)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), mix_seed=st.integers(0, 1000),
       trace=st.sampled_from([0.0, 0.5, 1.0]))
def test_same_seeds_give_identical_episodes(seed, mix_seed, trace):
    mixture = {"trace": trace, "seed": mix_seed, "load": [0.4, 1.2]}
    a = MixtureEpisodes(TRACE, 32, mixture)
    b = MixtureEpisodes(TRACE, 32, dict(mixture))
    ra, rb = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(3):
        assert columns(a.next(ra)) == columns(b.next(rb))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31),
       lo=st.floats(0.05, 0.3), width=st.floats(0.0, 0.3),
       load_lo=st.floats(0.2, 1.0), load_width=st.floats(0.0, 0.8))
def test_drawn_parameters_and_loads_stay_in_their_ranges(seed, lo, width, load_lo, load_width):
    mixture = normalise_mixture({"params": {"serial_prob": [lo, lo + width]},
                                 "load": [load_lo, load_lo + load_width], "procs": 64})
    source = MixtureEpisodes(TRACE, 48, mixture)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        jobs = source.next(rng)
        draw = source.last
        assert draw.component == "lublin"
        for name, (low, high) in mixture["params"].items():
            assert low <= getattr(draw.params, name) <= high, name
        assert load_lo <= draw.load <= load_lo + load_width
        assert len(jobs) == 48 and 1 <= jobs.procs.min() and jobs.procs.max() <= 64
        # The load is reached (Lublin's own definition, from time 0; whole seconds).
        offered = float((jobs.run * jobs.procs).sum()) / (64 * float(jobs.submit.max()))
        assert offered == pytest.approx(draw.load, rel=0.02)
    # Parameters outside the ranges are the published typeless ones.
    assert draw.params.a2 == LUBLIN_PARAMS["typeless"].a2
    pinned = draw_params(normalise_mixture({"params": {"uprob": [0.8, 0.8]}}), rng)
    assert pinned.uprob == 0.8


def test_the_mixture_seed_changes_the_episodes():
    firsts = [columns(MixtureEpisodes(TRACE, 32, {"seed": s}).next(np.random.default_rng(0)))
              for s in (0, 1)]
    assert firsts[0] != firsts[1]


def test_weights_choose_the_component():
    rng = np.random.default_rng(0)
    trace_only = MixtureEpisodes(TRACE, 20, {"lublin": 0, "trace": 1})
    for _ in range(5):
        jobs = trace_only.next(rng)
        assert columns(jobs) == columns(window(TRACE, 20, start=trace_only.last.start))
    half = MixtureEpisodes(TRACE, 20, {"trace": 1})
    picked = []
    for _ in range(200):
        half.next(rng)
        picked.append(half.last.component)
    assert 60 < picked.count("trace") < 140      # about half (binomial, sd 7)


def test_spec_saves_the_whole_mixture_and_reads_it_back():
    spec = EnvSpec(episode_source="mixture")
    assert spec.mixture == normalise_mixture({})
    assert spec.mixture["load"] == [0.5, 1.0] and spec.mixture["seed"] == 0
    data = spec.to_dict()
    assert EnvSpec.from_dict(data) == spec
    assert EnvSpec(episode_source="window").mixture is None


@settings(max_examples=30, deadline=None)
@given(trace=st.floats(0, 5), lublin_w=st.floats(0.01, 5), seed=st.integers(0, 10**6),
       lo=st.floats(0.05, 2.0), width=st.floats(0, 1.0),
       kind=st.sampled_from(["typeless", "batch", "interactive"]))
def test_mixture_specs_survive_json(trace, lublin_w, seed, lo, width, kind):
    spec = EnvSpec(episode_source="mixture",
                   mixture={"trace": trace, "lublin": lublin_w, "seed": seed,
                            "load": (lo, lo + width), "kind": kind,
                            "params": {"pb": (0.7, 0.8)}})
    text = json.dumps(spec.to_dict())
    back = EnvSpec.from_dict(json.loads(text))
    assert back == spec and back.mixture["params"]["pb"] == [0.7, 0.8]


@pytest.mark.parametrize("settings_, message", [
    ({"episode_source": "mixtures"},
     "episode_source: expected window, jobsets, curriculum or mixture, got 'mixtures'"),
    ({"mixture": {"trace": 1}},
     "mixture: expected a mixture exactly when episode_source is 'mixture', got given"),
    ({"episode_source": "mixture", "mixture": [1]},
     "mixture: expected a mapping with keys among lublin, trace, load, params, kind, procs, "
     "seed, got [1]"),
    ({"episode_source": "mixture", "mixture": {"trac": 1}},
     "mixture.trac: expected keys among lublin, trace, load, params, kind, procs, seed, "
     "got an unknown key; did you mean 'trace'?"),
    ({"episode_source": "mixture", "mixture": {"trace": -1}},
     "mixture.trace: expected a weight >= 0, got -1"),
    ({"episode_source": "mixture", "mixture": {"lublin": 0}},
     "mixture: expected a positive total weight, got weights lublin=0, trace=0"),
    ({"episode_source": "mixture", "mixture": {"load": [1.0, 0.5]}},
     "mixture.load: expected [LOW, HIGH] offered loads with 0 < LOW <= HIGH, got [1.0, 0.5]"),
    ({"episode_source": "mixture", "mixture": {"load": [0, 0.5]}},
     "mixture.load: expected [LOW, HIGH] offered loads with 0 < LOW <= HIGH, got [0, 0.5]"),
    ({"episode_source": "mixture", "mixture": {"params": {"serial": [0, 1]}}},
     "mixture.params.serial: expected a field of cosim.workloads.lublin.LublinParams, "
     "got an unknown parameter; did you mean 'serial_prob'?"),
    ({"episode_source": "mixture", "mixture": {"params": {"uprob": [0.5, 1.5]}}},
     "mixture.params.uprob: expected a probability range within [0, 1], got [0.5, 1.5]"),
    ({"episode_source": "mixture", "mixture": {"params": {"b1": [0.0, 1.0]}}},
     "mixture.params.b1: expected a Gamma shape or scale range above 0, got [0.0, 1.0]"),
    ({"episode_source": "mixture", "mixture": {"params": {"a2": [300, 640]}}},
     "mixture.params: expected a mean log run time below 12 (narrow a2 or b2), "
     "got a2 * b2 up to 19.2"),
    ({"episode_source": "mixture", "mixture": {"kind": "both"}},
     "mixture.kind: expected one of typeless, batch, interactive, got 'both'"),
    ({"episode_source": "mixture", "mixture": {"seed": -2}},
     "mixture.seed: expected an integer >= 0, got -2"),
    ({"episode_source": "mixture", "mixture": {"procs": 0}},
     "mixture.procs: expected a machine size >= 1 (or null), got 0"),
])
def test_bad_mixtures_are_exact_one_line_errors(settings_, message):
    with pytest.raises(ScenarioError) as err:
        EnvSpec(**settings_)
    assert str(err.value) == message


def test_trace_windows_longer_than_the_trace_are_refused():
    with pytest.raises(ScenarioError, match=r"^mixture.trace: expected at most the workload's "
                                            r"200 jobs, got windows of 300 jobs$"):
        make_episode_source("mixture", TRACE, 300, mixture={"trace": 1})
    assert isinstance(make_episode_source("mixture", TRACE, 300), MixtureEpisodes)


def test_env_plays_mixture_episodes_reproducibly():
    def first_jobs(seed):
        env = SchedulingEnv(SCENARIO, actions="select", episode_jobs=24,
                            episode_source="mixture", mixture={"trace": 1, "seed": 7})
        env.reset(seed=seed)
        return columns(env.simulation.workload), env._episodes.procs

    assert first_jobs(3) == first_jobs(3)
    assert first_jobs(3)[1] == 256       # the trace's machine


def test_short_training_run_saves_the_mixture(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", SCENARIO, "--out", str(out), "--actions", "select",
                 "--episode-jobs", "16", "--steps", "64", "--arg", "num_steps=16",
                 "--algo", "pg", "--quiet", "--episode-source", "mixture",
                 "--env", "mixture={trace: 0.5, load: [0.6, 0.9], seed: 2}"]) == 0
    _, meta = load_checkpoint(out)
    saved = meta["env"]["mixture"]
    assert meta["env"]["episode_source"] == "mixture"
    assert saved == normalise_mixture({"trace": 0.5, "load": [0.6, 0.9], "seed": 2})


def test_bad_mixture_flag_is_a_one_line_error(tmp_path, capsys):
    assert main(["train", SCENARIO, "--out", str(tmp_path / "o"), "--quiet",
                 "--episode-source", "mixture", "--env", "mixture={load: [2, 1]}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "mixture.load: expected [LOW, HIGH] offered loads with 0 < LOW <= HIGH, got [2, 1]" in err
