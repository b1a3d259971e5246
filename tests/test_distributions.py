"""MaskedCategorical: exact probabilities, no gradient through masked logits, entropy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.distributions import MaskedCategorical, masked_fill_value

torch.set_num_threads(1)


def test_probabilities_exact_on_a_hand_example():
    d = MaskedCategorical(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[1, 0, 1]]))
    # Legal: exp(1), exp(3) -> 1 / (1 + e^2) and e^2 / (1 + e^2).
    expected = [1 / (1 + math.e ** 2), 0.0, math.e ** 2 / (1 + math.e ** 2)]
    assert d.probs[0].tolist() == pytest.approx(expected, abs=1e-7)
    assert d.probs[0, 1].item() == 0.0                      # exactly zero, not tiny
    assert d.log_prob(torch.tensor([2])).item() == pytest.approx(math.log(expected[2]), abs=1e-6)


def test_masked_logits_receive_no_gradient():
    logits = torch.tensor([[0.3, 5.0, -1.0, 2.0]], requires_grad=True)
    d = MaskedCategorical(logits, torch.tensor([[1, 0, 1, 0]], dtype=torch.bool))
    (d.log_prob(torch.tensor([0])) + d.entropy()).sum().backward()
    assert logits.grad[0, 1].item() == 0.0 and logits.grad[0, 3].item() == 0.0
    assert logits.grad[0, 0].item() != 0.0 and logits.grad[0, 2].item() != 0.0
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("legal", [1, 2, 3, 7])
def test_exp_entropy_equals_the_number_of_legal_actions_for_uniform_logits(legal):
    mask = torch.zeros(1, 7, dtype=torch.bool)
    mask[0, :legal] = True
    d = MaskedCategorical(torch.full((1, 7), 0.7), mask)
    assert math.exp(d.entropy().item()) == pytest.approx(legal, rel=1e-6)


def test_all_but_one_masked_gives_entropy_zero_and_always_that_action():
    mask = torch.tensor([[0, 0, 1, 0]])
    d = MaskedCategorical(torch.tensor([[9.0, 8.0, -3.0, 7.0]]), mask)
    assert d.entropy().item() == 0.0
    assert d.log_prob(torch.tensor([2])).item() == 0.0
    assert d.mode().item() == 2
    g = torch.Generator().manual_seed(0)
    assert {int(d.sample(g)) for _ in range(50)} == {2}


def test_samples_never_illegal_and_reproducible_with_a_generator():
    logits = torch.randn(64, 5, generator=torch.Generator().manual_seed(1))
    mask = torch.rand(64, 5, generator=torch.Generator().manual_seed(2)) < 0.5
    mask[:, 4] = True
    d = MaskedCategorical(logits, mask)
    a = d.sample(torch.Generator().manual_seed(3))
    b = d.sample(torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert bool(mask.gather(1, a[:, None]).all())
    assert bool(mask.gather(1, d.mode()[:, None]).all())


def test_frequencies_match_probabilities():
    d = MaskedCategorical(torch.log(torch.tensor([[0.2, 0.5, 0.3]])).repeat(20000, 1),
                          torch.tensor([[1, 0, 1]]).repeat(20000, 1))
    a = d.sample(torch.Generator().manual_seed(0))
    freq = torch.bincount(a, minlength=3).float() / len(a)
    assert freq[1].item() == 0.0
    assert freq[0].item() == pytest.approx(0.4, abs=0.015)


def test_fill_value_is_finite_for_half_precision():
    assert math.isfinite(masked_fill_value(torch.float16))
    d = MaskedCategorical(torch.zeros(1, 3, dtype=torch.float16), torch.tensor([[1, 0, 1]]))
    assert torch.isfinite(d.logits).all()
    assert d.probs[0].tolist() == [0.5, 0.0, 0.5]


def test_bad_masks_raise():
    with pytest.raises(ValueError, match="at least one legal action"):
        MaskedCategorical(torch.zeros(2, 3), torch.tensor([[1, 0, 0], [0, 0, 0]]))
    with pytest.raises(ValueError, match="mask shape"):
        MaskedCategorical(torch.zeros(2, 3), torch.ones(2, 4))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.lists(st.floats(-30, 30), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n))))
def test_invariants(case):
    logits, mask = case
    mask[0] = True if not any(mask) else mask[0]
    t_mask = torch.tensor([mask])
    d = MaskedCategorical(torch.tensor([logits], dtype=torch.float32), t_mask)
    p = d.probs[0].numpy()
    legal = np.array(mask)
    assert np.all(p[~legal] == 0.0)
    assert p.sum() == pytest.approx(1.0, abs=1e-5)
    h = d.entropy().item()
    assert -1e-5 <= h <= math.log(legal.sum()) + 1e-5
    assert legal[int(d.mode())]
