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


@pytest.mark.parametrize("chunk", [1, 3, 5, 64])
@pytest.mark.parametrize("stale", [False, True])
def test_the_chunked_loss_on_reply_positions_equals_the_full_loss(chunk, stale):
    """The same loss and gradients (on the hidden states and the head) as `pear_loss` over the whole
    [B, T, V] logits, whatever the chunk, with and without the score-centering correction."""
    from pear_agent.train.loss import chunked_terms

    g = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(8, 11, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(11, 8, generator=g))
    hidden = torch.randn(2, 6, 8, generator=g, requires_grad=True)
    targets = torch.randint(0, 11, (2, 6), generator=g)
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 0, 1, 1, 1, 1]], dtype=torch.float)
    adv = torch.tensor([0.7, -0.7])
    bh = (hidden.detach() + 0.3 * torch.randn(2, 6, 8, generator=g)) if stale else None
    n = 9  # the whole batch's generated tokens
    full = pear_loss(head(hidden), targets, mask, adv, n, head(bh).detach() if stale else None, 0.8)
    full.backward()
    want_h, want_w = hidden.grad.clone(), head.weight.grad.clone()
    hidden.grad, head.weight.grad = None, None
    sel = mask > 0
    # the trainer's loss on reply positions: -(A * score).sum() / N over `chunked_terms`' scores
    score, lp = chunked_terms(
        head,
        hidden[sel],
        targets[sel],
        temperature=0.8,
        behaviour_hidden=bh[sel] if stale else None,
        chunk=chunk,
    )
    loss = -(adv[:, None].expand_as(mask)[sel] * score).sum() / n
    loss.backward()
    assert float(loss) == pytest.approx(float(full), abs=1e-6)
    assert torch.allclose(hidden.grad, want_h, atol=1e-6) and torch.allclose(
        head.weight.grad, want_w, atol=1e-6
    )
    want_lp = torch.log_softmax(head(hidden).detach() / 0.8, -1).gather(-1, targets[..., None])[..., 0]
    assert torch.allclose(lp, want_lp[sel], atol=1e-6)


# -- the study's objective (SkyRL's): PPO clipping and a k3 KL term ----------------------


@pytest.mark.parametrize(
    ("ratio", "adv", "moves"),
    [
        (1.5, 1.0, False),  # beyond 1 + eps in the direction the advantage pushes: no gradient
        (1.1, 1.0, True),  # inside the trust region: the policy gradient
        (1.5, -1.0, True),  # beyond 1 + eps but the advantage pulls back: the unclipped term
        (0.5, -1.0, False),  # below 1 - eps with a negative advantage: no gradient
    ],
)
def test_the_clipped_surrogate_stops_the_gradient_outside_the_trust_region(ratio, adv, moves):
    from pear_agent.train.loss import clipped_surrogate

    old = torch.tensor([-1.0])
    lp = (old + torch.log(torch.tensor([ratio]))).requires_grad_(True)
    obj = clipped_surrogate(lp, old, torch.tensor([adv]), 0.2)
    obj.sum().backward()
    if moves:
        assert lp.grad.abs().item() == pytest.approx(abs(adv) * ratio, rel=1e-5)  # d(r A)/d log pi = r A
    else:
        assert lp.grad.abs().item() == 0.0


def test_the_k3_kl_is_zero_at_the_initial_policy_and_positive_away_from_it():
    from pear_agent.train.loss import k3_kl

    ref = torch.log_softmax(torch.randn(6, generator=torch.Generator().manual_seed(1)), -1)
    assert torch.equal(k3_kl(ref, ref), torch.zeros(6))
    away = ref + torch.tensor([0.3, -0.2, 0.1, -0.4, 0.05, 0.0])
    kl = k3_kl(away, ref)
    assert bool((kl[:5] > 0).all()) and kl[5].item() == 0.0
    # over the whole vocabulary, E_pi[k3] is KL(pi || ref)
    logits = torch.randn(50, generator=torch.Generator().manual_seed(2))
    pi, ref_all = torch.log_softmax(logits, -1), torch.log_softmax(logits * 0.5, -1)
    exact = (pi.exp() * (pi - ref_all)).sum()
    assert (pi.exp() * k3_kl(pi, ref_all)).sum().item() == pytest.approx(exact.item(), rel=1e-5)
