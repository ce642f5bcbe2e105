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
    import torch  # optional: torch

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
    import torch  # optional: torch

    lp, logp_all = token_logprobs(logits, targets, temperature)
    score = lp
    if behaviour_logits is not None:
        t = temperature if temperature > 0 else 1.0
        mu = torch.softmax(behaviour_logits.float() / t, dim=-1).detach()
        score = lp - (mu * logp_all).sum(-1)
    weighted = advantages.unsqueeze(-1) * score * mask
    return -weighted.sum() / max(1, int(n_tokens))


# -- the loss where it is needed, in chunks ------------------------------------------------------
# A whole episode's vocabulary-wide logits ([T, V] floats: 4,300 x 49,152 for SmolLM2, and the
# log-softmax, its gradient and TRL's metrics over them) were most of a warm start's 9.7 GB. The
# model's body runs over the whole sequence (its hidden states [T, H] are small); the output head,
# the log-softmax and the estimator run only on the positions that predict a reply token, CHUNK
# positions at a time, each chunk recomputed in the backward pass (activation checkpointing), so the
# vocabulary-wide tensors alive at once are one chunk's, whatever the episode's length.

BANNED_LOGIT = -1.0e4
"""Logit given to tokens a policy may not sample (a vision-language model's image tokens): the same
in sampling and in the loss, so the trained distribution is the sampled one."""

REPLY_CHUNK = 512
"""Reply positions per chunk: [512, V] float32 logits are 100 MB for SmolLM2, 310 MB for Qwen3."""


def causal_parts(model: Any) -> tuple[Any, Any, float | None]:
    """(the model's body, its output head, the final logit soft-cap or None) of a causal LM or an
    image-text-to-text model (transformers names the body `base_model_prefix`, usually `model`), under
    a PEFT wrapper (LoRA layers sit inside the body: calling it directly trains them)."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = lm.get_output_embeddings()
    body = getattr(lm, getattr(lm, "base_model_prefix", "model"), None)
    if head is None or body is None or body is lm:
        raise ValueError(f"{type(lm).__name__}: cannot find its body and output head for the chunked loss")
    cfg = getattr(lm.config, "get_text_config", lambda: lm.config)()
    return body, head, getattr(cfg, "final_logit_softcapping", None)


def reply_hidden(model: Any, inputs: dict[str, Any], mask: Any) -> tuple[Any, Any]:
    """(hidden states [N, H] at the N positions that predict a reply token, those tokens [N]).

    inputs: the model's inputs (input_ids [B, T], attention_mask, and for a vision-language model its
    pixel inputs); mask [B, T] 1 on reply tokens. The state at position t predicts token t + 1."""
    body, _, _ = causal_parts(model)
    out = body(**inputs, use_cache=False)
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    ids = inputs["input_ids"]
    sel = mask[:, 1:] > 0
    return hidden[:, :-1][sel], ids[:, 1:][sel]


def _terms(
    hidden: Any,
    targets: Any,
    weight: Any,
    bias: Any,
    temperature: float,
    softcap: float | None,
    behaviour_hidden: Any,
    behaviour_weight: Any,
    banned: Any = None,
) -> tuple[Any, Any]:
    """(score, log pi(target)) of one chunk; score = log pi(y) - E_mu[log pi] where mu is given."""
    import torch  # optional: torch
    import torch.nn.functional as F  # optional: torch

    def logits_of(h: Any, w: Any) -> Any:
        z = F.linear(h, w, bias).float()
        if softcap:
            z = torch.tanh(z / softcap) * softcap
        z = z / temperature
        if banned is not None:
            z = z.index_fill(-1, banned, BANNED_LOGIT)
        return z

    logp_all = torch.log_softmax(logits_of(hidden, weight), dim=-1)
    lp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():  # the policy's entropy at each position (logged, never trained on)
        ent = -(logp_all.exp() * logp_all).sum(-1)
    if behaviour_hidden is None:
        return lp, lp, ent
    with torch.no_grad():
        mu = torch.softmax(logits_of(behaviour_hidden, behaviour_weight), dim=-1)
    return lp - (mu * logp_all).sum(-1), lp, ent


def chunked_terms(
    head: Any,
    hidden: Any,
    targets: Any,
    temperature: float = 1.0,
    softcap: float | None = None,
    behaviour_hidden: Any | None = None,
    behaviour_weight: Any | None = None,
    chunk: int = REPLY_CHUNK,
    banned: Any | None = None,
    entropy: list[Any] | None = None,
) -> tuple[Any, Any]:
    """(score [N], log pi [N]) at N reply positions, the output head applied `chunk` rows at a time
    and recomputed in the backward pass (only one chunk's [chunk, V] tensors are alive at once).
    `entropy`, when given, receives the policy's entropy at the N positions (detached).

    behaviour_hidden [N, H] and behaviour_weight: the sampling policy's hidden states and head weight
    where it is older than pi (None: on-policy, score = log pi)."""
    import torch  # optional: torch
    from torch.utils.checkpoint import checkpoint  # optional: torch

    t = temperature if temperature > 0 else 1.0
    weight, bias = head.weight, getattr(head, "bias", None)
    if behaviour_hidden is not None and behaviour_weight is None:
        behaviour_weight = weight.detach()
    scores, lps, ents = [], [], []
    for s in range(0, hidden.shape[0], max(1, chunk)):
        args = (
            hidden[s : s + chunk],
            targets[s : s + chunk],
            weight,
            bias,
            t,
            softcap,
            None if behaviour_hidden is None else behaviour_hidden[s : s + chunk],
            behaviour_weight,
            banned,
        )
        if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad):
            sc, lp, ent = checkpoint(_terms, *args, use_reentrant=False)
        else:
            sc, lp, ent = _terms(*args)
        scores.append(sc)
        lps.append(lp)
        ents.append(ent)
    if not scores:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    if entropy is not None:
        entropy.append(torch.cat(ents).detach())
    return torch.cat(scores), torch.cat(lps)


def clipped_surrogate(lp: Any, old_lp: Any, advantages: Any, clip_eps: float) -> Any:
    """PPO's clipped surrogate per token (SkyRL's and TRL's GRPO objective), to maximise:
    min(r A, clip(r, 1 - eps, 1 + eps) A) with r = pi(y) / mu(y) = exp(log pi - log mu). Where the
    ratio has left the trust region in the direction the advantage pushes, the gradient is zero."""
    import torch  # optional: torch

    ratio = torch.exp(lp - old_lp)
    return torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages)


def k3_kl(lp: Any, ref_lp: Any) -> Any:
    """Schulman's k3 estimator of KL(pi || pi_ref) per sampled token: r - log r - 1 with
    r = pi_ref(y) / pi(y); >= 0, zero where pi = pi_ref, unbiased for tokens sampled from pi."""
    import torch  # optional: torch

    log_r = ref_lp - lp
    return torch.exp(log_r) - log_r - 1
