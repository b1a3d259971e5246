"""Actor-critic networks: shapes, the window-size-independent kernel network, the factory."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.networks import CNNPolicy, KernelPolicy, MLPPolicy, make_network, network_from_spec
from cosim.errors import InputError

torch.set_num_threads(1)


def box(*shape):
    return spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)


def test_mlp_shapes():
    logits, value = MLPPolicy(81, 11)(torch.rand(4, 81))
    assert logits.shape == (4, 11) and value.shape == (4,)


def test_cnn_shapes():
    logits, value = CNNPolicy((2, 20, 12), 11)(torch.rand(3, 2, 20, 12))
    assert logits.shape == (3, 11) and value.shape == (3,)


def test_kernel_network_works_on_two_window_sizes_with_the_same_weights():
    torch.manual_seed(0)
    net = KernelPolicy(14)
    small = torch.rand(2, 11, 14)                # window 10 + wait
    large = torch.rand(2, 21, 14)                # window 20 + wait
    large[:, :11] = small
    l_small, v_small = net(small)
    l_large, v_large = net(large)
    assert l_small.shape == (2, 11) and l_large.shape == (2, 21)
    assert v_small.shape == (2,) and v_large.shape == (2,)
    # Each row is scored on its own: the shared rows get the same logits.
    assert torch.allclose(l_small, l_large[:, :11], atol=1e-6)


def test_kernel_network_is_permutation_equivariant():
    torch.manual_seed(0)
    net = KernelPolicy(5)
    obs = torch.rand(1, 6, 5)
    perm = torch.tensor([3, 0, 5, 1, 2, 4])
    logits, value = net(obs)
    logits_p, value_p = net(obs[:, perm])
    assert torch.allclose(logits[:, perm], logits_p, atol=1e-6)
    assert torch.allclose(value, value_p, atol=1e-6)


def test_factory_chooses_by_observation_rank():
    assert isinstance(make_network(box(81), spaces.Discrete(11)), MLPPolicy)
    assert isinstance(make_network(box(11, 14), spaces.Discrete(11)), KernelPolicy)
    assert isinstance(make_network(box(2, 20, 12), spaces.Discrete(11)), CNNPolicy)
    # A kernel observation may still be flattened into an MLP on request.
    net = make_network(box(11, 14), spaces.Discrete(11), kind="mlp", hidden=(8,))
    assert isinstance(net, MLPPolicy) and net(torch.rand(2, 11, 14))[0].shape == (2, 11)


def test_spec_round_trip_rebuilds_the_same_network():
    torch.manual_seed(0)
    net = make_network(box(7, 4), spaces.Discrete(7), hidden=(6, 5))
    clone = network_from_spec(net.spec)
    clone.load_state_dict(net.state_dict())
    obs = torch.rand(3, 7, 4)
    assert torch.equal(net(obs)[0], clone(obs)[0])
    assert net.spec == {"kind": "kernel", "obs_shape": [7, 4], "n_actions": 7, "hidden": [6, 5]}


def test_bad_kinds_are_input_errors():
    with pytest.raises(InputError, match="network: expected one of mlp, kernel, cnn, dras, got 'rnn'"):
        make_network(box(5), spaces.Discrete(3), kind="rnn")
    with pytest.raises(InputError, match="network: expected an observation of shape \\(C, H, W\\)"):
        make_network(box(5), spaces.Discrete(3), kind="cnn")
    with pytest.raises(InputError, match="n_actions=3"):
        make_network(box(4, 2), spaces.Discrete(3), kind="kernel")


def test_initial_policy_is_near_uniform():
    torch.manual_seed(0)
    logits, _ = MLPPolicy(10, 5)(torch.rand(8, 10))
    assert logits.abs().max() < 0.1
