"""PEAR's policy-gradient estimator over whole episodes (section 3.2 of the paper).

For a batch of kept groups, every generated token k of turn t of episode i gets its episode's
group-relative advantage A_i (`pear_agent.rl.advantages.group_advantages`: group-mean baseline,
over the group's std + eps), and the gradient is the token-level average over all N generated
tokens of the batch, with no PPO clipping and no importance ratio:

    g = 1/N sum_{i,t,k} A_i * ( grad log pi(y | c) - E_{y' ~ mu(.|c)}[ grad log pi(y' | c) ] )

The first term is REINFORCE. The second is the score-centering correction for rollouts sampled by
a policy mu one or two versions behind pi: under mu the score grad log pi is not centred (its mean
is zero only under pi itself), so a baseline (or any shift of A) would bias the update; centring
the score under mu removes that. In logit space the centred score is simply e_y - mu(.|c) (where
plain REINFORCE has e_y - pi(.|c)), so the correction needs mu's distribution at each generated
position: the trainer gets it from a snapshot of the weights that sampled (a LoRA adapter is a few
MB). For on-policy tokens mu = pi and the correction is exactly zero (it is skipped).
Our reading of the paper: its formula is not legible in our copy; the text names the two terms.
"""

from __future__ import annotations

from typing import Any


def token_logprobs(logits: Any, targets: Any, temperature: float = 1.0) -> tuple[Any, Any]:
    """(log pi(target), log pi(.) over the vocabulary) at each position; logits [B, T, V] predict
    targets [B, T] (already shifted)."""
    import torch

    t = temperature if temperature > 0 else 1.0
    logp_all = torch.log_softmax(logits.float() / t, dim=-1)
    return logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1), logp_all


def pear_loss(
    logits: Any,
    targets: Any,
    mask: Any,
    advantages: Any,
    n_tokens: int,
    behaviour_logits: Any | None = None,
    temperature: float = 1.0,
) -> Any:
    """Surrogate whose gradient is the estimator above (minimised, so the sign is flipped).

    logits [B, T, V] of the policy being trained; targets [B, T] the sampled tokens; mask [B, T] 1 on
    generated tokens; advantages [B] one per episode; n_tokens the generated tokens of the WHOLE
    batch (token-level average across micro-batches); behaviour_logits [B, T, V] of the sampling
    policy where it is older than pi (None: on-policy, no correction).
    """
    import torch

    lp, logp_all = token_logprobs(logits, targets, temperature)
    score = lp
    if behaviour_logits is not None:
        t = temperature if temperature > 0 else 1.0
        mu = torch.softmax(behaviour_logits.float() / t, dim=-1).detach()
        score = lp - (mu * logp_all).sum(-1)
    weighted = advantages.unsqueeze(-1) * score * mask
    return -weighted.sum() / max(1, int(n_tokens))
