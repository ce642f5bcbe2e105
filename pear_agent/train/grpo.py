"""`pear-agent train grpo`: multi-turn GRPO over whole episodes, every rollout through the ONE loop.

A step: draw `groups_per_step` (task, initial state) pairs from the recipe's mix (curriculum-
weighted), fly `group_size` episodes of each with the current policy (in-process generator,
sampling at `temperature`; `rollout.run_episodes`), score them (binary: success; shaped: the
task's shaped reward), drop groups whose rewards are all equal and draw new ones in their place
(DAPO-style, up to `max_attempts_factor` x the groups wanted), then ONE optimizer update with PEAR's
estimator (`loss.pear_loss`): group-relative advantages, every generated token of an episode with
its episode's advantage, the token-level average over the batch, no clipping, and the
score-centering correction for tokens a version or two behind (`rollout_lag`).

The optimiser, device placement and mixed precision come from accelerate and torch; LoRA from
PEFT. TRL's GRPOTrainer is not used: its loss clips ratios and offers truncated importance
sampling, where PEAR uses neither, and it has no group resampling.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.rl.advantages import FilterCounts, classify_group, group_advantages
from pear_agent.train.config import Recipe
from pear_agent.train.mix import Draw, TaskMix
from pear_agent.train.rollout import EpisodeJob, LoopOptions, run_episodes


@dataclass
class Group:
    draw: Draw
    records: list[dict[str, Any]]
    rewards: list[float]
    verdict: str
    advantages: list[float] = field(default_factory=list)


@dataclass
class StepReport:
    step: int
    version: int
    stage: str
    groups_sampled: int
    groups_kept: int
    dropped: dict[str, int]
    mean_reward: float
    """Over every episode the step flew (kept and dropped groups): the policy's own groups."""
    success_rate: float
    loss: float
    generated_tokens: int
    trained_tokens: int
    logprob_drift: float
    """max |log pi - log mu| on on-policy tokens: 0 up to float noise when the trainer sees exactly
    the tokens and distribution that sampled them."""
    rollout_s: float
    update_s: float
    step_s: float
    tokens_per_s: float
    """Generated tokens per second of rollout."""
    peak_rss_mb: float
    checkpoint: str | None = None


def reward_of(record: dict[str, Any], kind: str) -> float:
    if kind == "shaped" and record.get("shaped_reward") is not None:
        return float(record["shaped_reward"])
    return 1.0 if record["success"] else 0.0


def warm_start_note(recipe: Recipe, init: str | None) -> str | None:
    """The line `train grpo` prints when a recipe that has a warm start (`sft.data`) is started from
    the base model: the study's GRPO starts from its warm start, so that is rarely what was meant."""
    if init is not None or not recipe.sft.data:
        return None
    return (
        f"note: recipe {recipe.name} has a warm start (sft.data: {', '.join(recipe.sft.data)}) but no "
        "--init was given: GRPO starts from the base model "
        f"(train sft --recipe {recipe.name}, then train grpo --init RUN/checkpoint-sft)"
    )


class GRPOTrainer:
    def __init__(
        self,
        recipe: Recipe,
        out: Path,
        init: str | None = None,
        log: Callable[[str], None] = print,
        run_fn: Callable[..., list[dict[str, Any]]] = run_episodes,
    ) -> None:
        import torch
        from accelerate import Accelerator

        from pear_agent.train.models import snapshot, trainable_model
        from pear_agent.train.vision import make_local_policy

        self.recipe, self.cfg, self.out, self.log = recipe, recipe.grpo, Path(out), log
        self.out.mkdir(parents=True, exist_ok=True)
        self.run_fn = run_fn
        note = warm_start_note(recipe, init)
        if note:
            log(note)
        torch.manual_seed(self.cfg.seed)
        model, self.tokenizer, self.base = trainable_model(recipe.model, init)
        if recipe.model.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.config.use_cache = False  # the generator passes its own cache
        self.accelerator = Accelerator(cpu=not torch.cuda.is_available())
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable weights")
        optimizer = torch.optim.AdamW(params, lr=self.cfg.learning_rate)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.version = 0
        self.snapshots = {0: snapshot(self.model)}
        self.mixes = [
            TaskMix(st.mix, "train", seed=self.cfg.seed + i, curriculum=self.cfg.curriculum)
            for i, st in enumerate(self.cfg.stages)
        ]
        self.policy = make_local_policy(  # a vision-language model's processor: images in the sequence
            self.model,
            self.tokenizer,
            temperature=self.cfg.temperature,
            max_new_tokens=recipe.model.max_new_tokens,
            name=f"local:{self.base}",
        )
        self.opts = LoopOptions(
            mode=self.cfg.mode,
            max_turns=self.cfg.max_turns,
            observation=recipe.observation,
            scene_facts=recipe.scene_facts,
        )
        self.counts = FilterCounts()
        self.sync = None
        if self.cfg.generator == "vllm":
            from pear_agent.train.vllm_sync import VLLMAdapterSync

            if not self.cfg.vllm_url or recipe.model.lora is None:
                raise ValueError("grpo.generator vllm needs grpo.vllm_url and a LoRA adapter (model.lora)")
            self.sync = VLLMAdapterSync(
                self.cfg.vllm_url, keep=self.cfg.rollout_lag + self.cfg.max_staleness + 1
            )
            self._publish()

    def _publish(self) -> None:
        """The current version's adapter to the vLLM server (a shared folder it can read)."""
        from pear_agent.train.models import save_checkpoint

        folder = self.out / "versions" / f"v{self.version:04d}"
        model = self.accelerator.unwrap_model(self.model)
        save_checkpoint(model, self.tokenizer, folder, self.base, self.version, kind="version")
        self.sync.publish(self.version, folder)  # type: ignore[union-attr]

    # -- which stage --------------------------------------------------------------------------
    def stage(self, step: int) -> int:
        done = 0
        for i, st in enumerate(self.cfg.stages):
            if st.steps is None or step < done + st.steps:
                return i
            done += st.steps
        return len(self.cfg.stages) - 1

    # -- rollouts -----------------------------------------------------------------------------
    def _make_policy(self, job: EpisodeJob) -> Any:
        if self.sync is not None:
            return _Versioned(self._server_policy(job), self.policy.policy_version)
        self.policy.seed = job.policy_seed
        return self.policy

    def _server_policy(self, job: EpisodeJob) -> Any:
        from pear_agent.policies.openai_client import ModelSettings, OpenAIPolicy

        settings = ModelSettings(
            model=self.sync.name(self.policy.policy_version),  # type: ignore[union-attr]
            base_url=self.cfg.vllm_url,
            temperature=self.cfg.temperature,
            max_tokens=self.recipe.model.max_new_tokens,
            logprobs=True,
            extra_body={
                "return_tokens_as_token_ids": True,
                "seed": job.policy_seed,
                "top_p": 1.0,
                "top_k": -1,
            },
        )
        return OpenAIPolicy(settings)

    def rollouts(self, draws: list[Draw], step: int, first_group: int) -> list[Group]:
        """Fly every draw `group_size` times with the sampling weights (`rollout_lag` versions back)."""
        from pear_agent.train.models import load_snapshot

        g = self.cfg
        jobs = [
            EpisodeJob(
                d.task,
                d.seed,
                policy_seed=hash((g.seed, step, first_group + j, i)) % 2**31,
                group_id=f"s{step:04d}g{first_group + j:03d}",
                index_in_group=i,
            )
            for j, d in enumerate(draws)
            for i in range(g.group_size)
        ]
        sampler_version = max(0, self.version - g.rollout_lag)
        swapped = None
        if sampler_version != self.version:
            swapped = load_snapshot(self.model, self.snapshots[sampler_version])
        self.policy.policy_version = sampler_version
        self.model.eval()
        try:
            records = self.run_fn(jobs, self._make_policy, self.opts)
        finally:
            if swapped is not None:
                load_snapshot(self.model, swapped)
        groups = []
        for j, d in enumerate(draws):
            recs = records[j * g.group_size : (j + 1) * g.group_size]
            rewards = [reward_of(r, g.reward) for r in recs]
            verdict = classify_group(rewards)
            if any(r["end_reason"] == "policy_error" for r in recs):
                verdict = "policy_error"
                why = next(r.get("detail") for r in recs if r["end_reason"] == "policy_error")
                self.log(f"step {step}: group {d.task} s{d.seed} dropped: policy_error: {why}")
            groups.append(Group(d, recs, rewards, verdict))
        return groups

    def collect(self, step: int) -> tuple[list[Group], list[Group]]:
        """(kept groups, every group sampled): all-equal groups are dropped and new ones drawn."""
        g = self.cfg
        mix = self.mixes[self.stage(step)]
        kept: list[Group] = []
        sampled: list[Group] = []
        limit = g.max_attempts_factor * g.groups_per_step
        while len(kept) < g.groups_per_step and len(sampled) < limit:
            need = min(g.groups_per_step - len(kept), limit - len(sampled))
            draws = [mix.draw() for _ in range(need)]
            for grp in self.rollouts(draws, step, len(sampled)):
                sampled.append(grp)
                self.counts.add(grp.verdict)  # type: ignore[arg-type]
                mix.update(grp.draw, [r["success"] for r in grp.records])
                if grp.verdict == "kept":
                    grp.advantages = [float(a) for a in group_advantages(grp.rewards, g.eps)]
                    kept.append(grp)
            dropped = sum(1 for x in sampled if x.verdict != "kept")
            if dropped and len(kept) < g.groups_per_step:
                self.log(f"step {step}: {dropped} group(s) without a learning signal dropped; resampling")
        return kept, sampled

    # -- the update ---------------------------------------------------------------------------
    def update(self, groups: list[Group]) -> tuple[float, int, float]:
        """One optimizer step on the kept groups: (loss, trained tokens, on-policy logprob drift)."""
        import torch

        from pear_agent.train.loss import causal_parts, pear_loss_chunked, reply_hidden
        from pear_agent.train.models import load_snapshot, snapshot
        from pear_agent.train.sequences import episode_tokens
        from pear_agent.train.vision import image_token_ids, text_tokenizer

        g = self.cfg
        items = []
        for grp in groups:
            for rec, adv in zip(grp.records, grp.advantages, strict=True):
                seq = episode_tokens(self.tokenizer, rec["messages"], rec.get("turn_tokens"))
                if seq.reply_tokens:
                    items.append((seq, adv))
        n_tokens = sum(s.reply_tokens for s, _ in items)
        if not items or n_tokens == 0:
            return 0.0, 0, 0.0
        device = self.accelerator.device
        self.model.train()
        self.optimizer.zero_grad()
        total, drift = 0.0, 0.0
        pad = text_tokenizer(self.tokenizer).pad_token_id or 0
        model = self.accelerator.unwrap_model(self.model)
        _, head, softcap = causal_parts(model)
        # a trainable head (full fine-tuning) differs between versions: the snapshot holds its weight
        head_name = next(
            (n for n, p in model.named_parameters() if p is head.weight and p.requires_grad), None
        )
        banned_ids = image_token_ids(self.tokenizer)  # a vision-language policy never samples these
        banned = torch.tensor(banned_ids, dtype=torch.long, device=device) if banned_ids else None
        for k in range(0, len(items), g.micro_batch):
            batch = items[k : k + g.micro_batch]
            width = max(len(s.input_ids) for s, _ in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width))
            vers = torch.full((len(batch), width), -1, dtype=torch.long)
            old = torch.zeros((len(batch), width))
            for b, (s, _) in enumerate(batch):
                n = len(s.input_ids)
                ids[b, :n] = torch.tensor(s.input_ids)
                mask[b, :n] = torch.tensor(s.mask, dtype=torch.float)
                vers[b, :n] = torch.tensor(s.versions or [-1] * n)
                if s.old_logprobs is not None:
                    old[b, :n] = torch.tensor(s.old_logprobs)
            adv = torch.tensor([a for _, a in batch], dtype=torch.float, device=device)
            ids, mask, vers, old = ids.to(device), mask.to(device), vers.to(device), old.to(device)
            attn = torch.ones_like(ids)
            for b, (s, _) in enumerate(batch):
                attn[b, len(s.input_ids) :] = 0
            fwd = {"input_ids": ids, "attention_mask": attn}
            pixels = [s.vision for s, _ in batch if s.vision]  # a vision-language model's images
            if pixels:
                fwd |= {k: torch.cat([p[k] for p in pixels]).to(device) for k in pixels[0]}
            # the model's body over the sequence; the head, the log-softmax and the estimator only at
            # the positions that predict a generated token, in chunks (`loss.pear_loss_chunked`)
            sel = mask[:, 1:] > 0
            tvers, told = vers[:, 1:][sel], old[:, 1:][sel]
            tadv = adv.unsqueeze(-1).expand_as(mask[:, 1:])[sel]
            hidden, targets = reply_hidden(model, fwd, mask)
            loss = hidden.new_zeros((), dtype=torch.float32)
            for v in sorted({int(x) for x in torch.unique(tvers).tolist()}):
                rows = tvers == v
                behaviour, weight = None, None
                if v != self.version:
                    # the sampling policy's hidden states: its weights swapped in, no graph
                    if v not in self.snapshots:
                        raise ValueError(f"tokens of policy version {v} are older than max_staleness")
                    with torch.no_grad():
                        current = load_snapshot(self.model, self.snapshots[v])
                        behaviour = reply_hidden(model, fwd, mask)[0][rows]
                        load_snapshot(self.model, current)
                    weight = self.snapshots[v].get(head_name) if head_name else None
                part, lp = pear_loss_chunked(
                    head,
                    hidden[rows],
                    targets[rows],
                    tadv[rows],
                    n_tokens,
                    g.temperature,
                    softcap,
                    behaviour,
                    weight,
                    g.reply_chunk,
                    banned,
                )
                loss = loss + part
                if v == self.version and bool(rows.any()):
                    drift = max(drift, float((lp - told[rows]).abs().max().item()))
            self.accelerator.backward(loss)
            total += float(loss.item())
        if g.max_grad_norm:
            self.accelerator.clip_grad_norm_(
                [p for p in self.model.parameters() if p.requires_grad], g.max_grad_norm
            )
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.version += 1
        self.snapshots[self.version] = snapshot(self.model)
        if self.sync is not None:
            self._publish()
        keep = g.rollout_lag + g.max_staleness
        for v in [v for v in self.snapshots if v < self.version - keep]:
            del self.snapshots[v]
        return total, n_tokens, drift

    # -- the run ------------------------------------------------------------------------------
    def checkpoint(self, step: int, merge: bool = False) -> Path:
        from pear_agent.train.models import save_checkpoint

        model = self.accelerator.unwrap_model(self.model)
        return save_checkpoint(
            model,
            self.tokenizer,
            self.out / f"checkpoint-{step:04d}",
            self.base,
            step,
            merge=merge,
            kind="grpo",
            version=self.version,
        )

    def step(self, step: int) -> StepReport:
        from pear_agent.train.sft import peak_rss_mb

        t0 = time.perf_counter()
        kept, sampled = self.collect(step)
        t1 = time.perf_counter()
        loss, trained, drift = self.update(kept)
        t2 = time.perf_counter()
        recs = [r for grp in sampled for r in grp.records]
        rewards = [x for grp in sampled for x in grp.rewards]
        generated = sum(len(t["ids"]) for r in recs for t in r.get("turn_tokens") or [] if t)
        dropped: dict[str, int] = {}
        for grp in sampled:
            if grp.verdict != "kept":
                dropped[grp.verdict] = dropped.get(grp.verdict, 0) + 1
        return StepReport(
            step=step,
            version=self.version,
            stage=self.cfg.stages[self.stage(step)].name,
            groups_sampled=len(sampled),
            groups_kept=len(kept),
            dropped=dropped,
            mean_reward=float(np.mean(rewards)) if rewards else 0.0,
            success_rate=float(np.mean([r["success"] for r in recs])) if recs else 0.0,
            loss=loss,
            generated_tokens=generated,
            trained_tokens=trained,
            logprob_drift=drift,
            rollout_s=t1 - t0,
            update_s=t2 - t1,
            step_s=t2 - t0,
            tokens_per_s=generated / (t1 - t0) if t1 > t0 else 0.0,
            peak_rss_mb=peak_rss_mb(),
        )

    def train(self, steps: int | None = None, merge: bool = False) -> list[StepReport]:
        reports = []
        n = steps if steps is not None else self.cfg.steps
        with (self.out / "metrics.jsonl").open("a", encoding="utf-8") as f:
            for s in range(n):
                rep = self.step(s)
                if (s + 1) % self.cfg.checkpoint_every == 0 or s == n - 1:
                    rep.checkpoint = str(self.checkpoint(s + 1, merge=merge))
                f.write(json.dumps(asdict(rep)) + "\n")
                f.flush()
                self.log(
                    f"step {s + 1}/{n} [{rep.stage}]: groups {rep.groups_kept} kept of {rep.groups_sampled}, "
                    f"mean reward {rep.mean_reward:.3f}, success {rep.success_rate:.2f}, "
                    f"loss {rep.loss:+.4f}, "
                    f"{rep.trained_tokens} tokens trained, {rep.step_s:.0f} s"
                    + (f"; {rep.checkpoint}" if rep.checkpoint else "")
                )
                reports.append(rep)
        (self.out / "filter_counts.json").write_text(json.dumps(self.counts.to_json(), indent=2))
        return reports


class _Versioned:
    """Stamps the sampling version on a server policy's token traces."""

    def __init__(self, policy: Any, version: int) -> None:
        self.policy, self.version, self.name = policy, version, policy.name

    def reset(self, seed: int) -> None:
        self.policy.reset(seed)

    def act(self, messages: Any, ctx: Any) -> Any:
        reply = self.policy.act(messages, ctx)
        if reply.tokens is not None:
            reply.tokens.policy_version = self.version
        return reply
