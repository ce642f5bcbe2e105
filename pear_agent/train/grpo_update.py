"""One GRPO optimizer step in named pieces; `GRPOTrainer.update` (`pear_agent.train.grpo`) drives them.

- batching: `step_sequences` (a step's episodes as token sequences, each with its episode's
  advantage) and `micro_batch` (a padded micro-batch and its generated tokens' versions, recorded
  log mu and advantages);
- snapshot swaps: `hidden_under` (the reply positions' hidden states under other weights, swapped
  in and back without a graph), `behaviour_hiddens` (the sampling policies of stale tokens);
- the loss, its KL term and the drift: `micro_batch_loss`, one term per sampling version;
- the step itself: `optimizer_step` and `keep_snapshots`.

Imports: torch only inside the functions that build tensors (`# optional: torch`), as the rest of
`pear_agent.train`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from pear_agent.train.config import GRPOConfig
from pear_agent.train.loss import causal_parts, chunked_terms, clipped_surrogate, k3_kl, reply_hidden
from pear_agent.train.models import load_snapshot
from pear_agent.train.sequences import episode_sequences
from pear_agent.train.vision import reply_banned_ids, text_tokenizer


# -- batching ---------------------------------------------------------------------------------
def step_sequences(tokenizer: Any, groups: list[Any]) -> list[tuple[Any, float]]:
    """Every sequence of the kept groups' episodes that holds a generated token, with its episode's
    advantage. ValueError when a reply came back without its sampled token ids."""
    items = []
    for grp in groups:
        for rec, adv in zip(grp.records, grp.advantages, strict=True):
            traces = rec.get("turn_tokens") or []
            replies = sum(1 for m in rec["messages"] if m["role"] == "assistant")
            missing = [k for k in range(replies) if k >= len(traces) or not (traces[k] or {}).get("ids")]
            if missing:
                raise ValueError(
                    f"episode {rec.get('id')}: reply {missing[0] + 1} of {replies} came back without its "
                    "sampled token ids, so the update cannot train on what was sampled; the generator "
                    "must return them (grpo.generator vllm: a vLLM server answering /v1/completions "
                    "with logprobs and return_tokens_as_token_ids; grpo.generator local records them)"
                )
            # with a history window, one sequence per stretch the model saw append-only
            for seq in episode_sequences(
                tokenizer,
                rec["messages"],
                traces,
                rec.get("history"),
                rec.get("history_older", "line"),
            ):
                if seq.reply_tokens:
                    items.append((seq, adv))
    return items


@dataclass
class MicroBatch:
    """A padded micro-batch: the forward pass's inputs and, per generated token (the positions that
    predict one), the policy version that sampled it, its recorded log mu, whether it has one and
    its episode's advantage."""

    fwd: dict[str, Any]
    mask: Any
    tvers: Any
    told: Any
    thas: Any
    tadv: Any
    versions: list[int]


def micro_batch(batch: list[tuple[Any, float]], pad: int, device: Any) -> MicroBatch:
    import torch  # optional: torch

    width = max(len(s.input_ids) for s, _ in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), width))
    vers = torch.full((len(batch), width), -1, dtype=torch.long)
    old = torch.zeros((len(batch), width))
    has_old = torch.zeros((len(batch), width), dtype=torch.bool)
    for b, (s, _) in enumerate(batch):
        n = len(s.input_ids)
        ids[b, :n] = torch.tensor(s.input_ids)
        mask[b, :n] = torch.tensor(s.mask, dtype=torch.float)
        vers[b, :n] = torch.tensor(s.versions or [-1] * n)
        if s.old_logprobs is not None:
            old[b, :n] = torch.tensor(s.old_logprobs)
            has_old[b, :n] = torch.tensor(s.mask, dtype=torch.bool)
    adv = torch.tensor([a for _, a in batch], dtype=torch.float, device=device)
    ids, mask, vers, old = ids.to(device), mask.to(device), vers.to(device), old.to(device)
    has_old = has_old.to(device)
    attn = torch.ones_like(ids)
    for b, (s, _) in enumerate(batch):
        attn[b, len(s.input_ids) :] = 0
    fwd = {"input_ids": ids, "attention_mask": attn}
    pixels = [s.vision for s, _ in batch if s.vision]  # a vision-language model's images
    if pixels:
        fwd |= {k: torch.cat([p[k] for p in pixels]).to(device) for k in pixels[0]}
    # the model's body over the sequence; the head, the log-softmax and the estimator only at
    # the positions that predict a generated token, in chunks (`loss.chunked_terms`)
    sel = mask[:, 1:] > 0
    tvers = vers[:, 1:][sel]
    return MicroBatch(
        fwd=fwd,
        mask=mask,
        tvers=tvers,
        told=old[:, 1:][sel],
        thas=has_old[:, 1:][sel],
        tadv=adv.unsqueeze(-1).expand_as(mask[:, 1:])[sel],
        versions=sorted({int(x) for x in torch.unique(tvers).tolist()}),
    )


# -- snapshot swaps ---------------------------------------------------------------------------
def hidden_under(trained: Any, weights: dict[str, Any], model: Any, mb: MicroBatch) -> Any:
    """The reply positions' hidden states under `weights`, swapped into the `trained` module and
    back, with no graph."""
    import torch  # optional: torch

    with torch.no_grad():
        current = load_snapshot(trained, weights)
        hidden = reply_hidden(model, mb.fwd, mb.mask)[0]
        load_snapshot(trained, current)
    return hidden


def behaviour_hiddens(
    trained: Any, model: Any, snapshots: dict[int, Any], version: int, max_staleness: int, mb: MicroBatch
) -> dict[int, Any]:
    """Per stale version of the micro-batch, the hidden states of the tokens it sampled under its
    snapshot's weights. They come first: the swap writes the live weights in place, so it must not
    happen once the graph of the trained forward pass holds them (without gradient checkpointing
    backward would fail)."""
    out: dict[int, Any] = {}
    for v in mb.versions:
        if v == version:
            continue
        if v not in snapshots:
            raise ValueError(
                f"tokens sampled by policy version {v} are more than grpo.max_staleness="
                f"{max_staleness} versions behind the trained version {version}"
            )
        out[v] = hidden_under(trained, snapshots[v], model, mb)[mb.tvers == v]
    return out


# -- the loss, the KL term and the drift -------------------------------------------------------
@dataclass
class UpdateSums:
    """What one update adds up over its micro-batches (the token sums are divided by the step's
    token count at the end)."""

    loss: float = 0.0
    drift: float = 0.0
    compared: int = 0
    entropy: float = 0.0
    kl: float = 0.0
    clipped: int = 0


@dataclass
class UpdateContext:
    """What every micro-batch of one update shares."""

    cfg: GRPOConfig
    model: Any
    """The unwrapped model (its body and head)."""
    head: Any
    softcap: Any
    head_name: str | None
    """A trainable head's parameter name (full fine-tuning): the snapshots hold its weight."""
    banned: Any
    pad: int
    n_tokens: int
    snapshots: dict[int, Any]
    initial: dict[str, Any]

    @classmethod
    def of(
        cls,
        cfg: GRPOConfig,
        model: Any,
        tokenizer: Any,
        device: Any,
        n_tokens: int,
        snapshots: dict[int, Any],
        initial: dict[str, Any],
    ) -> UpdateContext:
        import torch  # optional: torch

        pad = text_tokenizer(tokenizer).pad_token_id or 0
        _, head, softcap = causal_parts(model)
        head_name = next(
            (n for n, p in model.named_parameters() if p is head.weight and p.requires_grad), None
        )
        banned_ids = reply_banned_ids(tokenizer)  # no policy samples these (its samplers ban them)
        banned = torch.tensor(banned_ids, dtype=torch.long, device=device) if banned_ids else None
        return cls(cfg, model, head, softcap, head_name, banned, pad, n_tokens, snapshots, initial)

    def head_with(self, weight: Any) -> Any:
        """The head with another version's weight (the same head without one)."""
        return self.head if weight is None else SimpleNamespace(weight=weight, bias=self.head.bias)


def micro_batch_loss(
    ctx: UpdateContext,
    mb: MicroBatch,
    behaviours: dict[int, Any],
    ref_hidden: Any,
    sums: UpdateSums,
) -> Any:
    """The micro-batch's loss (a graph to backward): per sampling version, PEAR's estimator (or the
    clipped surrogate with `clip_eps`), plus the KL term against the initial policy; the entropy,
    KL, clipped count and drift go into `sums`."""
    import torch  # optional: torch

    g = ctx.cfg
    hidden, targets = reply_hidden(ctx.model, mb.fwd, mb.mask)
    loss = hidden.new_zeros((), dtype=torch.float32)
    for v in mb.versions:
        rows = mb.tvers == v
        # PPO clipping corrects for the lag with the ratio pi / mu (no score-centring)
        behaviour = behaviours.get(v) if g.clip_eps is None else None
        weight = ctx.snapshots[v].get(ctx.head_name) if ctx.head_name and v in behaviours else None
        ents: list[Any] = []
        score, lp_g = chunked_terms(
            ctx.head,
            hidden[rows],
            targets[rows],
            g.temperature,
            ctx.softcap,
            behaviour_hidden=behaviour,
            behaviour_weight=weight,
            chunk=g.reply_chunk,
            banned=ctx.banned,
            entropy=ents,
        )
        lp = lp_g.detach()
        seen = mb.thas[rows]
        if g.clip_eps is not None:
            old_lp = torch.where(seen, mb.told[rows], lp)  # no recorded log mu: ratio 1
            obj = clipped_surrogate(lp_g, old_lp, mb.tadv[rows], g.clip_eps)
            ratio = torch.exp(lp - old_lp)
            sums.clipped += int(((ratio - 1).abs() > g.clip_eps).sum().item())
        else:
            obj = mb.tadv[rows] * score
        part = -obj.sum() / ctx.n_tokens
        if ref_hidden is not None:
            kl = _kl_term(ctx, ref_hidden[rows], targets[rows], lp_g, sums)
            if kl is not None:
                part = part + kl
        sums.entropy += float(ents[0].sum().item()) if ents else 0.0
        loss = loss + part
        if bool(seen.any()):
            _drift(ctx, behaviours.get(v), weight, targets[rows], lp, mb.told[rows], seen, sums)
    return loss


def _kl_term(ctx: UpdateContext, ref_hidden: Any, targets: Any, lp_g: Any, sums: UpdateSums) -> Any | None:
    """k3 KL against the initial policy (its head where the head is trained): logged always; the
    loss's term with `kl_coef` > 0, else None."""
    import torch  # optional: torch

    g = ctx.cfg
    ref_head = ctx.head_with(ctx.initial.get(ctx.head_name) if ctx.head_name else None)
    with torch.no_grad():
        _, ref_lp = chunked_terms(
            ref_head, ref_hidden, targets, g.temperature, ctx.softcap, chunk=g.reply_chunk, banned=ctx.banned
        )
    kl = k3_kl(lp_g, ref_lp)
    sums.kl += float(kl.detach().sum().item())
    return g.kl_coef * kl.sum() / ctx.n_tokens if g.kl_coef > 0 else None


def _drift(
    ctx: UpdateContext,
    behaviour: Any,
    weight: Any,
    targets: Any,
    lp: Any,
    told: Any,
    seen: Any,
    sums: UpdateSums,
) -> None:
    """The drift: every token with a recorded log mu, stale ones against the snapshot that sampled
    them (its hidden states and head), on-policy ones against pi."""
    import torch  # optional: torch

    g = ctx.cfg
    ref = lp
    if behaviour is not None:
        with torch.no_grad():
            _, ref = chunked_terms(
                ctx.head_with(weight),
                behaviour,
                targets,
                g.temperature,
                ctx.softcap,
                chunk=g.reply_chunk,
                banned=ctx.banned,
            )
    sums.drift = max(sums.drift, float((ref - told)[seen].abs().max().item()))
    sums.compared += int(seen.sum().item())


# -- the step ---------------------------------------------------------------------------------
def optimizer_step(
    accelerator: Any, model: Any, optimizer: Any, scheduler: Any, max_grad_norm: float | None
) -> tuple[float, float]:
    """Clip, step the optimizer and the schedule: (the gradient norm before clipping, the learning
    rate the step used)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    grad_norm = float(accelerator.clip_grad_norm_(trainable, max_grad_norm or float("inf")))
    lr = float(optimizer.param_groups[0]["lr"])
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return grad_norm, lr


def keep_snapshots(snapshots: dict[int, Any], version: int, keep_n: int) -> None:
    """Drop the snapshots more than `keep_n` versions behind `version` (no token can still need them)."""
    for v in [v for v in snapshots if v < version - keep_n]:
        del snapshots[v]
