"""Acting through numpy (agents.fast) makes the torch network's decisions, ties included.

A greedy agent's logits are computed in numpy; torch is asked only when the
best legal logit leads the second by less than :data:`agents.fast.MARGIN`.
These tests compare the two paths on random networks of every kind numpy
handles, on hand-made ties, and on the shipped agent's own decisions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from agents.distributions import MaskedCategorical
from agents.fast import NumpyActor, acting_backend
from agents.networks import network_from_spec
from agents.rl_policy import RLPolicy, load_rl_policy
from cosim.compose import make_env, run_policy
from cosim.errors import InputError
from cosim.workloads.lublin import lublin

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "agents" / "pretrained" / "lublin256-select"

torch.set_num_threads(1)

SPECS = {
    "mlp": {"kind": "mlp", "obs_shape": [40], "n_actions": 9, "hidden": None},
    "kernel": {"kind": "kernel", "obs_shape": [16, 18], "n_actions": 16, "hidden": None},
    "dras": {"kind": "dras", "obs_shape": [2 * 6 + 8, 2], "n_actions": 6, "hidden": None},
}


def _net(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    net = network_from_spec(SPECS[kind]).eval()
    # Trained heads are far from the near-zero initial ones: spread the logits.
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "policy_head" in name or "score_head" in name:
                p.mul_(300.0)
    return net


def _torch_greedy(net, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        logits, _ = net(torch.as_tensor(obs))
    return MaskedCategorical(logits, torch.as_tensor(masks)).mode().numpy()


def _samples(kind: str, n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    spec = SPECS[kind]
    obs = rng.random((n, *spec["obs_shape"]), dtype=np.float32)
    masks = (rng.random((n, spec["n_actions"])) < 0.5).astype(np.int8)
    masks[np.arange(n), rng.integers(0, spec["n_actions"], n)] = 1   # at least one legal
    return obs, masks


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_numpy_logits_match_torch(kind):
    net = _net(kind)
    actor = NumpyActor.from_network(SPECS[kind], net.state_dict())
    obs, _ = _samples(kind, 300)
    with torch.no_grad():
        ref = net(torch.as_tensor(obs))[0].numpy()
    mine = np.stack([actor.logits(o) for o in obs])
    assert mine.dtype == np.float32
    np.testing.assert_allclose(mine, ref, rtol=1e-5, atol=1e-5)
    assert np.abs(ref).max() > 1.0   # the comparison is not between near-zero logits


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_numpy_decisions_equal_torch(kind):
    net = _net(kind)
    meta = {"network": SPECS[kind], "algo": "ppo"}
    fast = RLPolicy(net, meta, NumpyActor.from_network(SPECS[kind], net.state_dict()))
    obs, masks = _samples(kind, 400)
    want = _torch_greedy(net, obs, masks)
    got = np.array([fast.act(o, m) for o, m in zip(obs, masks)])
    np.testing.assert_array_equal(got, want)
    assert fast.fallbacks < 40   # numpy answered most of them alone


def test_ties_go_to_torch_and_its_first_index():
    # Identical action rows score identically: torch's argmax takes the first legal one.
    net = _net("kernel")
    meta = {"network": SPECS["kernel"], "algo": "ppo"}
    actor = NumpyActor.from_network(SPECS["kernel"], net.state_dict())
    fast = RLPolicy(net, meta, actor)
    obs = np.tile(np.linspace(0, 1, 18, dtype=np.float32), (16, 1))
    mask = np.zeros(16, dtype=np.int8)
    mask[[3, 7, 12]] = 1
    assert actor.greedy(obs, mask) is None
    assert fast.act(obs, mask) == 3
    assert fast.fallbacks == 1
    # One legal action is the answer without a forward pass, as torch's argmax gives it.
    only = np.zeros(16, dtype=np.int8)
    only[11] = 1
    assert actor.greedy(obs, only) == 11 == int(_torch_greedy(net, obs[None], only[None])[0])


def test_bad_masks_and_shapes_give_torch_s_errors():
    net = _net("kernel")
    fast = RLPolicy(net, {"network": SPECS["kernel"], "algo": "ppo"},
                    NumpyActor.from_network(SPECS["kernel"], net.state_dict()))
    obs = np.zeros((16, 18), dtype=np.float32)
    with pytest.raises(ValueError, match="at least one legal action"):
        fast.act(obs, np.zeros(16, dtype=np.int8))
    with pytest.raises(InputError, match="shape"):
        fast.act(np.zeros((16, 5), dtype=np.float32), np.ones(16, dtype=np.int8))


def test_backend_choice(monkeypatch):
    assert load_rl_policy(AGENT).fast is not None
    assert load_rl_policy(AGENT, backend="torch").fast is None
    monkeypatch.setenv("AGENTS_ACTING", "torch")
    assert acting_backend() == "torch"
    assert load_rl_policy(AGENT).fast is None
    with pytest.raises(InputError, match="numpy or torch"):
        load_rl_policy(AGENT, backend="jax")


def _actions(policy, env, jobs) -> list[int]:
    seen: list[int] = []
    act = policy.act

    def record(obs, mask=None):
        seen.append(act(obs, mask))
        return seen[-1]

    policy.act = record
    policy.play(env, jobs)
    return seen


def test_the_shipped_agent_decides_alike_on_both_paths(monkeypatch):
    fast = load_rl_policy(AGENT)
    ref = load_rl_policy(AGENT, backend="torch")
    assert fast.meta["network"]["kind"] == "kernel"
    jobs = lublin(400, procs=256, seed=777)
    env = make_env(fast.env_config, teacher=None, episode_jobs=400)
    a = _actions(fast, env, jobs)
    b = _actions(ref, env, jobs)
    assert len(a) > 400 and a == b
    # In a scenario run (cosim.compose) too: the same summary either way.
    runs = {}
    for backend in ("numpy", "torch"):
        monkeypatch.setenv("AGENTS_ACTING", backend)
        run = run_policy(env.scenario, f"rl:{AGENT}", None, workload=jobs)
        runs[backend] = {k: v for k, v in run.items()
                         if k not in ("wall_seconds", "jobs_per_second")}   # timings differ
    assert runs["numpy"] == runs["torch"]


@pytest.mark.parametrize("kind", ["mlp", "kernel", "dras", "cnn"])
def test_policy_logits_are_the_forward_pass_s(kind):
    # The critic-free logits that torch acting uses are forward's, bit for bit.
    from agents.networks import policy_logits

    spec = SPECS.get(kind, {"kind": "cnn", "obs_shape": [2, 10, 6], "n_actions": 7,
                            "hidden": None})
    torch.manual_seed(3)
    net = network_from_spec(spec).eval()
    obs = torch.rand(5, *spec["obs_shape"])
    with torch.no_grad():
        assert torch.equal(policy_logits(net, obs), net(obs)[0])


def _biased_net(spec: dict, seed: int):
    """A network of ``spec`` with biases that matter and a spread head, and its numpy actor."""
    torch.manual_seed(seed)
    net = network_from_spec(spec).eval()
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "bias" in name:
                p.add_(0.5)
            if "score_head" in name or "policy_head" in name:
                p.mul_(300.0)
    return net, NumpyActor.from_network(spec, net.state_dict())


@pytest.mark.parametrize("hidden", [None, [8], [16, 8, 4]])
def test_greedy_rows_folds_biases_and_decides_as_torch(hidden):
    # greedy_rows scores legal job rows (is_job = 1) with the biases folded into the
    # weights; its answers are torch's argmax over those rows, for any depth.
    spec = {**SPECS["kernel"], "hidden": hidden}
    net, actor = _biased_net(spec, 5)
    rng = np.random.default_rng(2)
    answered = 0
    for n in (1, 2, 5, 16, 40):
        for _ in range(40):
            rows = rng.random((n, 18), dtype=np.float32)
            rows[:, 0] = 1.0
            got = actor.greedy_rows(rows)
            with torch.no_grad():
                ref = net(torch.as_tensor(rows)[None])[0][0].numpy()
            if got is not None:
                answered += 1
                assert got == int(ref.argmax())
                z = rows
                for w in actor._rows_net():
                    z = np.tanh(z @ w) if w.ndim == 2 else z @ w
                np.testing.assert_allclose(z, ref, rtol=1e-5, atol=1e-4)
    assert answered > 150     # most answered in numpy (near-ties go to torch)


@pytest.mark.parametrize("agent", ["lublin256-select", "lublin256"])
def test_acting_agents_run_callback_passes_with_the_same_schedule(monkeypatch, agent):
    # An agent acting in process never waits on an event, so its passes run as
    # callbacks like a heuristic's; the schedule is the process pass's.
    from cosim.actors.scheduler import Scheduler
    from cosim.env.actions.base import AgentPolicy

    path = ROOT / "agents" / "pretrained" / agent
    policy = load_rl_policy(path)
    jobs = lublin(300, procs=256, seed=778)
    env = make_env(policy.env_config, teacher=None, episode_jobs=300)
    env.reset(seed=0, options={"jobs": jobs})
    assert env.unwrapped._agent.yields_events is True    # the env's agent answers from outside
    seen = []
    pass_ = Scheduler._pass
    monkeypatch.setattr(Scheduler, "_pass", lambda self, e: (seen.append(1), pass_(self, e)))
    runs = {}
    for mode in ("callback", "process"):
        if mode == "process":
            monkeypatch.setattr(AgentPolicy, "yields_events", property(lambda self: True))
        seen.clear()
        run = run_policy(env.scenario, f"rl:{path}", None, workload=jobs)
        assert (len(seen) > 0) == (mode == "callback")
        runs[mode] = {k: v for k, v in run.items() if k not in ("wall_seconds", "jobs_per_second")}
    assert runs["callback"] == runs["process"]


@pytest.mark.parametrize("hidden", [None, [8], [16, 8]])
def test_greedy_vector_folds_biases_and_decides_as_torch(hidden):
    # greedy_vector takes the observation as a list with the mask as a list (the
    # compact encoder's row) and answers as torch's masked argmax, or None.
    spec = {**SPECS["mlp"], "hidden": hidden}
    net, actor = _biased_net(spec, 6)
    obs, masks = _samples("mlp", 400, seed=3)
    want = _torch_greedy(net, obs, masks)
    answered = 0
    for o, m, w in zip(obs, masks, want):
        got = actor.greedy_vector(o.tolist(), m.tolist())
        assert got == actor.greedy(o, m)       # the array path's answer, None included
        if got is not None:
            answered += 1
            assert got == int(w)
    assert answered > 360
    # One legal action is the answer whatever the logits; none legal: no answer.
    only = [0] * 9
    only[4] = 1
    assert actor.greedy_vector(obs[0].tolist(), only) == 4
    assert actor.greedy_vector(obs[0].tolist(), [0] * 9) is None



def test_an_mlp_inspector_decides_alike_through_its_shortcut_and_torch():
    # An inspect agent whose skips matter (a random network with a spread head):
    # acting through the compact row shortcut (RLPolicy.chooser, greedy_vector)
    # gives torch's schedule, skip for skip.
    import simpy

    from cosim.config import scenario_from_dict
    from cosim.env.acting import acting_policy
    from cosim.model import build

    spec = {"kind": "mlp", "obs_shape": [29], "n_actions": 2, "hidden": None}
    torch.manual_seed(11)
    net = network_from_spec(spec).eval()
    with torch.no_grad():
        net.policy_head.weight.mul_(50.0)
    meta = {"network": spec, "algo": "ppo"}
    jobs = lublin(500, procs=64, seed=12)
    scenario = scenario_from_dict({"cluster": {"nodes": 64},
                                   "workload": {"kind": "swf", "path": "unused"}})
    config = {"actions": "inspect", "base_policy": "saf+easy", "horizon": 8}
    runs = {}
    for backend, fast in (("numpy", NumpyActor.from_network(spec, net.state_dict())),
                          ("torch", None)):
        agent = RLPolicy(net, meta, fast)
        policy = acting_policy(config, scenario, jobs, agent.act)
        assert (policy._choose is not None) == (backend == "numpy")
        env = simpy.Environment()
        sim = build(env, scenario, policy, workload=jobs)
        env.run(until=sim.finished)
        runs[backend] = ([j.start for j in sorted(sim.scheduler.jobs, key=lambda j: j.id)],
                         policy.skips)
    assert runs["numpy"] == runs["torch"]
    assert 20 < runs["numpy"][1]
