"""The parametric priority policy: classic orders are points of its space; learned:DIR runs."""

from __future__ import annotations

import json

import pytest
import simpy

from cosim.config import load_scenario
from cosim.errors import InputError
from cosim.model import build
from cosim.policies import make_policy
from cosim.policies.names import grammar_help, parse_policy
from cosim.policies.priority import (
    FEATURES,
    PriorityWeights,
    heuristic_weights,
    make_priority_policy,
)
from cosim.workloads.loading import load_workload

SCENARIO = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=600"])


def starts(policy, workload):
    env = simpy.Environment()
    sim = build(env, SCENARIO, policy, workload=workload, record=False)
    env.run(until=sim.finished)
    return [(j.start, j.mode) for j in sim.scheduler.jobs]


@pytest.fixture(scope="module")
def lublin():
    return load_workload(SCENARIO)


@pytest.mark.parametrize("name", ["sjf", "saf", "f1", "fcfs"])
def test_exact_instances_give_the_heuristics_schedule(name, lublin):
    # The same order, so the same EASY schedule, job for job (600 Lublin jobs).
    w = PriorityWeights(heuristic_weights(name, 256), 256, "easy")
    assert starts(make_priority_policy(w), lublin) == starts(make_policy(f"{name}+easy"), lublin)


def test_scaling_the_weights_keeps_the_policy(lublin):
    w = heuristic_weights("saf", 256)
    a = PriorityWeights(tuple(0.37 * x for x in w), 256)
    b = PriorityWeights(tuple(5.0 * x for x in w), 256)
    assert starts(make_priority_policy(a), lublin) == starts(make_priority_policy(b), lublin)


def test_a_wait_weight_makes_the_key_dynamic():
    w = [0.0] * len(FEATURES)
    w[FEATURES.index("wait_per_est")] = -1.0
    spec = PriorityWeights(tuple(w), 256)
    assert spec.dynamic and make_priority_policy(spec).static_key is None
    assert not PriorityWeights(heuristic_weights("sjf", 256), 256).dynamic


def test_learned_folder_runs_through_the_grammar(tmp_path, lublin):
    spec = PriorityWeights(heuristic_weights("saf", 256), 256, "easy")
    (tmp_path / "policy.json").write_text(json.dumps(spec.as_dict()))
    parsed = parse_policy(f"learned:{tmp_path}")
    assert (parsed.kind, parsed.checkpoint, parsed.order) == ("learned", str(tmp_path),
                                                              f"learned:{tmp_path}")
    policy = make_policy(f"learned:{tmp_path}")
    assert starts(policy, lublin) == starts(make_policy("saf+easy"), lublin)
    (tmp_path / "policy.json").write_text(json.dumps({"kind": "heuristic", "name": "f1+easy"}))
    assert make_policy(f"learned:{tmp_path}").name == "f1+easy"
    assert "learned:DIR" in grammar_help()


def test_bad_learned_folders_are_clear(tmp_path):
    with pytest.raises(InputError, match="learned:DIR with DIR a folder holding policy.json"):
        make_policy(f"learned:{tmp_path / 'missing'}")
    (tmp_path / "policy.json").write_text('{"kind": "priority", "weights": [1, 2]}')
    with pytest.raises(InputError, match="features"):
        make_policy(f"learned:{tmp_path}")
    (tmp_path / "policy.json").write_text(json.dumps(
        {"kind": "priority", "features": list(FEATURES), "weights": [1, 2], "capacity": 8}))
    with pytest.raises(InputError, match="7 numbers"):
        make_policy(f"learned:{tmp_path}")
    (tmp_path / "policy.json").write_text('{"kind": "heuristic", "name": "nope+easy"}')
    with pytest.raises(InputError, match="saf\\+easy"):
        make_policy(f"learned:{tmp_path}")
