"""A categorical distribution over the legal actions only (maskable PPO).

Invalid-action masking (Huang & Ontañón 2022, used by the thesis in seed 003,
section 2.5.3) replaces the logits of illegal actions by a very negative
constant before the softmax. The probabilities of illegal actions are then
exactly zero, they are never sampled, and, because the replacement is a
``torch.where``, their logits receive no gradient. The mask used at
collection time is stored with the rollout and applied again in the update,
so the ratio ``pi_new / pi_old`` compares the same renormalized distributions.
"""

from __future__ import annotations

import torch

__all__ = ["MaskedCategorical", "masked_fill_value"]


def masked_fill_value(dtype: torch.dtype) -> float:
    """The logit given to illegal actions: very negative but finite for ``dtype``.

    A quarter of the dtype's most negative value stays finite after the
    ``logits - max(logits)`` shift inside ``log_softmax`` for any realistic
    logit, where ``-inf`` would produce ``nan`` in ``0 * log 0`` terms and a
    fixed ``-1e9`` would overflow half precision.
    """
    return float(torch.finfo(dtype).min) / 4.0


class MaskedCategorical:
    """Categorical distribution whose illegal actions have probability zero.

    Args:
        logits: unnormalized log-probabilities, shape ``(..., n)``.
        mask: ``(..., n)`` legality (bool or 0/1 integers), or None for all legal.
            Every row must have at least one legal action.

    Raises:
        ValueError: shapes differ or a row has no legal action.

    Examples:
        >>> import torch
        >>> d = MaskedCategorical(torch.zeros(1, 3), torch.tensor([[1, 0, 1]]))
        >>> d.probs
        tensor([[0.5000, 0.0000, 0.5000]])
        >>> int(d.mode()[0]) in (0, 2)
        True
    """

    def __init__(self, logits: torch.Tensor, mask: torch.Tensor | None = None):
        if mask is None:
            mask = torch.ones_like(logits, dtype=torch.bool)
        else:
            mask = torch.as_tensor(mask, device=logits.device).to(torch.bool)
        if mask.shape != logits.shape:
            raise ValueError(f"mask shape {tuple(mask.shape)} differs from logits shape "
                             f"{tuple(logits.shape)}")
        if mask.numel() and not bool(mask.any(dim=-1).all()):
            raise ValueError("every mask row needs at least one legal action")
        self.mask = mask
        fill = torch.tensor(masked_fill_value(logits.dtype), dtype=logits.dtype,
                            device=logits.device)
        masked = torch.where(mask, logits, fill)
        self.logits = masked - torch.logsumexp(masked, dim=-1, keepdim=True)

    @property
    def probs(self) -> torch.Tensor:
        """Action probabilities, exactly zero where the mask is 0."""
        return torch.where(self.mask, self.logits.exp(), torch.zeros_like(self.logits))

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of integer ``actions`` of shape ``(...)``."""
        return self.logits.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy over the legal actions only (illegal terms are left out, not 0 * -huge)."""
        p_logp = torch.where(self.mask, self.probs * self.logits, torch.zeros_like(self.logits))
        return -p_logp.sum(-1)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw one action per row (illegal actions are never drawn)."""
        probs = self.probs
        flat = probs.reshape(-1, probs.shape[-1])
        draws = torch.multinomial(flat, 1, generator=generator).squeeze(-1)
        return draws.reshape(probs.shape[:-1])

    def mode(self) -> torch.Tensor:
        """The most probable legal action of each row (greedy acting)."""
        return self.logits.argmax(-1)
