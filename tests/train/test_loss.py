"""PEAR's estimator on hand-made logits: the gradient is the formula, token-averaged over the batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pear_agent.rl.advantages import group_advantages  # noqa: E402
from pear_agent.train.loss import pear_loss  # noqa: E402


def _case():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g, requires_grad=True)
    targets = torch.tensor([[1, 4, 0], [2, 2, 3]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    adv = torch.tensor(group_advantages([1.0, 0.0]), dtype=torch.float)
    return logits, targets, mask, adv


def test_on_policy_gradient_is_reinforce_with_the_group_advantage():
    logits, targets, mask, adv = _case()
    n = int(mask.sum())
    pear_loss(logits, targets, mask, adv, n).backward()
    pi = torch.softmax(logits.detach(), -1)
    onehot = torch.nn.functional.one_hot(targets, 5).float()
    # d(-loss)/dz = A * (e_y - pi) / N on generated tokens, 0 elsewhere
    want = adv[:, None, None] * (onehot - pi) * mask[..., None] / n
    assert torch.allclose(-logits.grad, want, atol=1e-6)
    # the advantages are (r - mean) / (std + eps): +-0.707 for one success and one failure
    assert adv.tolist() == pytest.approx([0.70710, -0.70710], abs=1e-4)


def test_score_centering_uses_the_sampling_policy_distribution():
    logits, targets, mask, adv = _case()
    behaviour = logits.detach() + torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(1))
    n = 7  # the whole batch's generated tokens (this micro-batch holds 4 of them)
    pear_loss(logits, targets, mask, adv, n, behaviour_logits=behaviour).backward()
    mu = torch.softmax(behaviour, -1)
    onehot = torch.nn.functional.one_hot(targets, 5).float()
    want = adv[:, None, None] * (onehot - mu) * mask[..., None] / n
    assert torch.allclose(-logits.grad, want, atol=1e-6)


def test_with_mu_equal_to_pi_the_correction_vanishes():
    logits, targets, mask, adv = _case()
    pear_loss(logits, targets, mask, adv, 4).backward()
    plain = logits.grad.clone()
    logits.grad = None
    pear_loss(logits, targets, mask, adv, 4, behaviour_logits=logits.detach()).backward()
    assert torch.allclose(logits.grad, plain, atol=1e-7)


def test_temperature_scales_the_distribution():
    logits, targets, mask, adv = _case()
    pear_loss(logits, targets, mask, adv, 4, temperature=0.5).backward()
    pi = torch.softmax(logits.detach() / 0.5, -1)
    onehot = torch.nn.functional.one_hot(targets, 5).float()
    want = adv[:, None, None] * (onehot - pi) * mask[..., None] / 4 / 0.5
    assert torch.allclose(-logits.grad, want, atol=1e-6)
