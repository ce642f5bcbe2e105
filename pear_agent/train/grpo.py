"""`pear-agent train grpo`: multi-turn GRPO over whole episodes, every rollout through the ONE loop.

A step: draw `groups_per_step` (task, initial state) pairs from the recipe's mix (curriculum-
weighted), fly `group_size` episodes of each with the current policy, all of them in flight at
once (`grpo.episodes_in_flight` limits it) through the one episode runner (`rollout.run_episodes`),
their generation batched across the episodes (in process: `train.batched.BatchedGenerator`; on
a GPU: a vLLM server with many requests open, token-in token-out), score them (binary: success; shaped: the
task's shaped reward), drop groups whose rewards are all equal and draw new ones in their place
(DAPO-style, up to `max_attempts_factor` x the groups wanted), then ONE optimizer update with PEAR's
estimator (`loss.pear_loss`): group-relative advantages, every generated token of an episode with
its episode's advantage, the token-level average over the batch, no clipping, and the
score-centering correction for tokens a version or two behind (`rollout_lag`: a producer thread
flies the next steps' rollouts while the trainer updates, truly overlapping).

The optimiser, device placement and mixed precision come from accelerate and torch; LoRA from
PEFT. TRL's GRPOTrainer is not used: its loss clips ratios and offers truncated importance
sampling, where PEAR uses neither, and it has no group resampling.
"""

from __future__ import annotations

import copy
import json
import pickle
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.loop.episode import NO_REPLY_ENDINGS
from pear_agent.records.log import RunWriter
from pear_agent.rl.advantages import FilterCounts, classify_group, group_advantages
from pear_agent.train.batched import BatchedGenerator
from pear_agent.train.chat_template import turn_end_ids
from pear_agent.train.config import Recipe
from pear_agent.train.episodes import TrainJob, run_episodes
from pear_agent.train.evaluate import eval_draws, evaluate, summarize
from pear_agent.train.grpo_steps import Collected, StepReport, TrainingGroup, reward_of
from pear_agent.train.grpo_update import (
    UpdateContext,
    UpdateSums,
    behaviour_hiddens,
    hidden_under,
    keep_snapshots,
    micro_batch,
    micro_batch_loss,
    optimizer_step,
    step_sequences,
)
from pear_agent.train.local_model import make_local_policy
from pear_agent.train.metrics_log import MetricsLog
from pear_agent.train.mix import Draw, TaskMix
from pear_agent.train.models import load_snapshot, save_checkpoint, snapshot, trainable_model
from pear_agent.train.sft import peak_rss_mb
from pear_agent.train.token_server import TokenServerPolicy, check_processed_logprobs
from pear_agent.train.vision import text_tokenizer
from pear_agent.train.vllm_sync import VLLMAdapterSync, cap_trainer_memory

TRAINER_STATE = "trainer_state.pt"
"""In each GRPO checkpoint: what `train grpo --resume` restores (not needed to fly the checkpoint)."""


def latest_checkpoint(run: Path) -> Path | None:
    """The newest `checkpoint-NNNN` of a run that holds a trainer state."""
    found = sorted(p for p in Path(run).glob("checkpoint-*") if (p / TRAINER_STATE).is_file())
    return found[-1] if found else None


def load_trainer_state(run: Path) -> dict[str, Any]:
    import torch  # optional: torch

    ckpt = latest_checkpoint(run)
    if ckpt is None:
        raise ValueError(f"{run} has no checkpoint with a {TRAINER_STATE} to resume from")
    return torch.load(ckpt / TRAINER_STATE, weights_only=False)  # our own file: pickled task mixes


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
        resume: bool = False,
    ) -> None:
        """`resume`: continue the run in `out` from its newest checkpoint's trainer state (weights,
        optimizer, scheduler, RNG, the task mix's draws, the step), exactly where it stopped."""
        import torch  # optional: torch
        from accelerate import Accelerator  # optional: accelerate
        from transformers import get_scheduler  # optional: transformers

        self.recipe, self.cfg, self.out, self.log = recipe, recipe.grpo, Path(out), log
        self.out.mkdir(parents=True, exist_ok=True)
        self.run_fn = run_fn
        state = load_trainer_state(self.out) if resume else None
        if state is not None:
            init = state["init"]
        else:
            (self.out / "recipe.json").write_text(recipe.model_dump_json(indent=2), encoding="utf-8")
        self.init = init
        note = warm_start_note(recipe, init) if state is None else None
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
        kind = self.cfg.lr_scheduler
        kind = "constant_with_warmup" if kind == "constant" and self.cfg.warmup_steps else kind
        self.scheduler = get_scheduler(
            kind, self.optimizer, num_warmup_steps=self.cfg.warmup_steps, num_training_steps=self.cfg.steps
        )
        self.version = 0
        self._prefix_version = 0
        """The weights the in-process generator's remembered prompt starts were prefilled with."""
        self.snapshots = {0: snapshot(self.model)}
        self.initial = self.snapshots[0]
        """The weights GRPO started from: the reference policy of the KL term and its logged estimate."""
        self._lock = threading.Condition()
        """Guards `version`, `snapshots` and `_updates_done` between trainer and rollout producer."""
        self.mixes = [
            TaskMix(st.mix, "train", seed=self.cfg.seed + i, curriculum=self.cfg.curriculum)
            for i, st in enumerate(self.cfg.stages)
        ]
        self.counts = FilterCounts()
        self.start_step = 0
        self._mix_states: dict[int, bytes] = {}
        """Step -> the task mixes and filter counts right after that step's draws (what resuming
        after that step restores)."""
        self.last_update: dict[str, Any] = {}
        if state is not None:
            self._restore(state)
        self._updates_done = self.start_step
        self._prefix_version = self.version
        self.stop_ids = turn_end_ids(text_tokenizer(self.tokenizer))
        self._make_local = make_local_policy  # a vision-language model: its processor, images in the sequence
        self.episode_config = recipe.episode_config()
        self.sync = None
        self.server = None
        self.sampler_model = self.model
        self.generator = None
        if self.cfg.generator == "vllm":
            self._start_server_generator()
        else:
            if self.cfg.rollout_lag > 0:
                # the producer samples with its own copy of the weights while the trainer updates
                self.sampler_model = copy.deepcopy(self.accelerator.unwrap_model(self.model))
                self.sampler_model.eval()
            self.generator = BatchedGenerator(
                self.sampler_model, pad_id=text_tokenizer(self.tokenizer).pad_token_id or 0
            )

    def _start_server_generator(self) -> None:
        g, lora = self.cfg, self.recipe.model.lora
        if not g.vllm_url or lora is None:
            raise ValueError("grpo.generator vllm needs grpo.vllm_url and a LoRA adapter (model.lora)")
        cap_trainer_memory(self.recipe)  # the recipe's split of one GPU between vLLM and the trainer
        self.sync = VLLMAdapterSync(g.vllm_url, keep=g.rollout_lag + g.max_staleness + 1)
        self.sync.check_server(lora.r)
        self._publish()

        check_processed_logprobs(g.vllm_url, self.sync.name(self.version), text_tokenizer(self.tokenizer))

    def _publish(self) -> None:
        """The current version's adapter to the vLLM server (a shared folder it can read)."""
        folder = self.out / "versions" / f"v{self.version:04d}"
        model = self.accelerator.unwrap_model(self.model)
        save_checkpoint(model, self.tokenizer, folder, self.base, self.version, kind="version")
        self.sync.publish(self.version, folder)  # type: ignore[union-attr]

    # -- resume -------------------------------------------------------------------------------
    def _restore(self, state: dict[str, Any]) -> None:

        import torch  # optional: torch

        load_snapshot(self.model, state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.version = int(state["version"])
        self.snapshots = dict(state["snapshots"])
        self.initial = state["initial"]
        self.mixes, self.counts = pickle.loads(state["mixes"])
        torch.set_rng_state(state["rng"]["torch"])
        np.random.set_state(state["rng"]["numpy"])
        random.setstate(state["rng"]["python"])
        self.start_step = int(state["step"])

    def _save_state(self, folder: Path, step: int) -> None:
        """What resuming after `step` steps needs, beside the checkpoint's adapter."""

        import torch  # optional: torch

        state = {
            "step": step,
            "version": self.version,
            "init": self.init,
            "weights": snapshot(self.model),
            "initial": self.initial,
            "snapshots": self.snapshots,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "mixes": self._mix_states.get(step - 1) or pickle.dumps((self.mixes, self.counts)),
            "rng": {
                "torch": torch.get_rng_state(),
                "numpy": np.random.get_state(),
                "python": random.getstate(),
            },
        }
        torch.save(state, folder / TRAINER_STATE)

    # -- which stage --------------------------------------------------------------------------
    def stage(self, step: int) -> int:
        done = 0
        for i, st in enumerate(self.cfg.stages):
            if st.steps is None or step < done + st.steps:
                return i
            done += st.steps
        return len(self.cfg.stages) - 1

    # -- rollouts -----------------------------------------------------------------------------
    def _policy_factory(self, version: int) -> Callable[[TrainJob], Any]:
        """A policy per episode (each keeps its own token sequence and cache), all sharing the
        batched generator (in process) or the server (token-in, token-out), sampling `version`."""

        def make(job: TrainJob) -> Any:
            if self.sync is not None:
                return self._server_policy(job, version)
            return self._make_local(
                self.sampler_model,
                self.tokenizer,
                temperature=self.cfg.temperature,
                max_new_tokens=self.recipe.model.max_new_tokens,
                seed=job.policy_seed,
                policy_version=version,
                name=f"local:{self.base}",
                generator=self.generator,
                stop_ids=self.stop_ids,
            )

        return make

    def _server_policy(self, job: TrainJob, version: int) -> Any:
        return TokenServerPolicy(
            self.cfg.vllm_url or "",
            self.sync.name(version),  # type: ignore[union-attr]
            self.tokenizer,
            temperature=self.cfg.temperature,
            max_new_tokens=self.recipe.model.max_new_tokens,
            seed=job.policy_seed,
            policy_version=version,
            stop_ids=self.stop_ids,
        )

    def rollouts(
        self, draws: list[Draw], step: int, first_group: int, version: int | None = None
    ) -> list[TrainingGroup]:
        """Fly every draw `group_size` times, all in flight at once (up to `episodes_in_flight`),
        sampling with the weights of `version` (default: the current ones)."""
        g = self.cfg
        version = self.version if version is None else version
        jobs = [
            TrainJob(
                d.task,
                d.seed,
                policy_seed=hash((g.seed, step, first_group + j, i)) % 2**31,
                group_id=f"s{step:04d}g{first_group + j:03d}",
                index_in_group=i,
            )
            for j, d in enumerate(draws)
            for i in range(g.group_size)
        ]
        if self.sampler_model is self.model:
            self.model.eval()
        in_flight = g.episodes_in_flight or len(jobs)
        ended = [0]

        def live(job: TrainJob | None = None, rec: dict[str, Any] | None = None) -> None:
            """Lockstep: the generator starts a batch once every episode in flight waits on it."""
            ended[0] += job is not None
            if self.generator is not None:
                self.generator.expect(min(in_flight, len(jobs) - ended[0]))

        live()
        keep = g.keep_episodes if first_group == 0 else 0  # the step's first round of groups

        def writer(job: TrainJob) -> Any:

            if jobs.index(job) >= keep:
                return None
            return RunWriter(
                self.episodes_dir(step) / f"{job.group_id}-r{job.index_in_group}", video_fps=None
            )

        try:
            records = self.run_fn(
                jobs,
                self._policy_factory(version),
                self.episode_config,
                on_record=live,
                concurrency=in_flight,
                policy_version=version,
                **({"writer": writer} if keep else {}),
            )
        finally:
            if self.generator is not None:
                self.generator.expect(None)
        groups = []
        for j, d in enumerate(draws):
            recs = records[j * g.group_size : (j + 1) * g.group_size]
            rewards = [reward_of(r, g.reward) for r in recs]
            verdict = classify_group(rewards)
            if any(r["end_reason"] in NO_REPLY_ENDINGS for r in recs):  # no reply: the reward says nothing
                verdict = "policy_error"
                why = next(
                    f"{r['end_reason']}: {r.get('detail')}"
                    for r in recs
                    if r["end_reason"] in NO_REPLY_ENDINGS
                )
                self.log(f"step {step}: group {d.task} s{d.seed} dropped: {why}")
            groups.append(TrainingGroup(d, recs, rewards, verdict))
        return groups

    def collect(
        self, step: int, version: int | None = None
    ) -> tuple[list[TrainingGroup], list[TrainingGroup]]:
        """(kept groups, every group sampled): all-equal groups are dropped and new ones drawn."""
        g = self.cfg
        mix = self.mixes[self.stage(step)]
        v = self.version if version is None else version
        gen = self.generator
        if gen is not None and hasattr(gen, "new_weights") and v != self._prefix_version:
            gen.new_weights()  # its prompt starts were prefilled with other weights
            self._prefix_version = v
        kept: list[TrainingGroup] = []
        sampled: list[TrainingGroup] = []
        limit = g.max_attempts_factor * g.groups_per_step
        while len(kept) < g.groups_per_step and len(sampled) < limit:
            need = min(g.groups_per_step - len(kept), limit - len(sampled))
            draws = [mix.draw() for _ in range(need)]
            for grp in self.rollouts(draws, step, len(sampled), version):
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

    # -- what a step kept and how the policy flies on validation seeds ------------------------
    def episodes_dir(self, step: int) -> Path:
        return self.out / "episodes" / f"step-{step + 1:04d}"

    def keep_episodes(self, c: Collected) -> str | None:
        """The step's kept episode logs (`pear-agent view FOLDER/<id>`) indexed with their rewards
        and advantages in FOLDER/index.jsonl; None when the step kept none."""
        folder = self.episodes_dir(c.step)
        if not folder.is_dir():
            return None
        lines = []
        for grp in c.sampled:
            advs = grp.advantages or [None] * len(grp.records)
            for rec, reward, adv in zip(grp.records, grp.rewards, advs, strict=True):
                name = f"{rec['group_id']}-r{rec['index_in_group']}"
                if (folder / name / "episode.jsonl").is_file():
                    lines.append(
                        {
                            "episode": name,
                            "task": rec["task"],
                            "seed": rec["seed"],
                            "success": rec["success"],
                            "reward": reward,
                            "advantage": adv,
                            "verdict": grp.verdict,
                            "end_reason": rec["end_reason"],
                        }
                    )
        (folder / "index.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        return str(folder)

    def validate(self, step: int) -> dict[str, float]:
        """The current weights on the validation seeds (`train pick`'s), greedy, every flight in
        flight at once through the batched generator; success rate per task."""

        draws = eval_draws(self.recipe, "val", self.cfg.eval_episodes)
        model = self.accelerator.unwrap_model(self.model)
        model.eval()
        lines = evaluate(
            f"step-{step}",
            draws,
            self.recipe,
            self.out / "validation" / f"step-{step:04d}.jsonl",
            log=lambda *_: None,
            loaded=(model, self.tokenizer),
        )
        out = {}
        for task in dict.fromkeys(x["task"] for x in lines):
            out[task] = summarize([x for x in lines if x["task"] == task])["success_rate"]
        self.log(f"validation after step {step}: " + ", ".join(f"{t} {v:.2f}" for t, v in out.items()))
        return out

    # -- the update (its pieces: `pear_agent.train.grpo_update`) ----------------------------------
    def update(self, groups: list[TrainingGroup]) -> tuple[float, int, float | None, int]:
        """One optimizer step on the kept groups: (loss, trained tokens, logprob drift, tokens the
        drift compared). The drift is max |log p - log mu| over every generated token that has a
        recorded log mu: on-policy ones against the weights being trained, stale ones against the
        snapshot that sampled them; None when no token could be compared (never a 0.0 that means
        nothing was looked at)."""
        g = self.cfg
        items = step_sequences(self.tokenizer, groups)
        n_tokens = sum(s.reply_tokens for s, _ in items)
        self.last_update = {}
        if not items or n_tokens == 0:
            return 0.0, 0, None, 0
        device = self.accelerator.device
        self.model.train()
        self.optimizer.zero_grad()
        model = self.accelerator.unwrap_model(self.model)
        ctx = UpdateContext.of(g, model, self.tokenizer, device, n_tokens, self.snapshots, self.initial)
        sums = UpdateSums()
        for k in range(0, len(items), g.micro_batch):
            mb = micro_batch(items[k : k + g.micro_batch], ctx.pad, device)
            # the sampling policies' hidden states first (their weights swapped in, no graph)
            behaviours = behaviour_hiddens(
                self.model, model, self.snapshots, self.version, g.max_staleness, mb
            )
            ref_hidden = None
            if self.version > 0:  # at version 0 the trained policy is the initial one: KL 0
                ref_hidden = hidden_under(self.model, self.initial, model, mb)
            loss = micro_batch_loss(ctx, mb, behaviours, ref_hidden, sums)
            self.accelerator.backward(loss)
            sums.loss += float(loss.item())
        grad_norm, lr = optimizer_step(
            self.accelerator, self.model, self.optimizer, self.scheduler, g.max_grad_norm
        )
        self.last_update = {
            "grad_norm": grad_norm,
            "learning_rate": lr,
            "entropy": sums.entropy / n_tokens,
            "kl": sums.kl / n_tokens,
            "clipped_fraction": sums.clipped / n_tokens if g.clip_eps is not None else None,
        }
        with self._lock:
            self.version += 1
            self.snapshots[self.version] = snapshot(self.model)
            keep_snapshots(self.snapshots, self.version, g.rollout_lag + g.max_staleness)
            self._lock.notify_all()
        if self.sync is not None:
            self._publish()
        return sums.loss, n_tokens, (sums.drift if sums.compared else None), sums.compared

    # -- the run ------------------------------------------------------------------------------
    def checkpoint(self, step: int, merge: bool = False) -> Path:
        model = self.accelerator.unwrap_model(self.model)
        folder = save_checkpoint(
            model,
            self.tokenizer,
            self.out / f"checkpoint-{step:04d}",
            self.base,
            step,
            merge=merge,
            kind="grpo",
            version=self.version,
        )
        self._save_state(folder, step)
        return folder

    def _collect_at(self, step: int) -> Collected:
        """One step's groups, sampled with the newest weights (loaded into the sampler's copy)."""
        with self._lock:
            version = self.version
            if self.sampler_model is not self.model:
                load_snapshot(self.sampler_model, self.snapshots[version])
        t0 = time.perf_counter()
        kept, sampled = self.collect(step, version)
        t1 = time.perf_counter()
        self._mix_states[step] = pickle.dumps((self.mixes, self.counts))
        return Collected(step, version, kept, sampled, t0, t1)

    def _report(
        self, c: Collected, upd: tuple[float, int, float | None, int], u0: float, u1: float, step_s: float,
        overlapped_s: float,
    ) -> StepReport:  # fmt: skip

        loss, trained, drift, compared = upd
        recs = [r for grp in c.sampled for r in grp.records]
        rewards = [x for grp in c.sampled for x in grp.rewards]
        generated = sum(len(t["ids"]) for r in recs for t in r.get("turn_tokens") or [] if t)
        dropped: dict[str, int] = {}
        for grp in c.sampled:
            if grp.verdict != "kept":
                dropped[grp.verdict] = dropped.get(grp.verdict, 0) + 1
        rollout_s = c.t1 - c.t0
        replies = [len(t["ids"]) for r in recs for t in r.get("turn_tokens") or [] if t]
        by_task: dict[str, list[bool]] = {}
        for r in recs:
            by_task.setdefault(r["task"], []).append(bool(r["success"]))
        u = self.last_update
        return StepReport(
            step=c.step,
            version=self.version,
            stage=self.cfg.stages[self.stage(c.step)].name,
            groups_sampled=len(c.sampled),
            groups_kept=len(c.kept),
            dropped=dropped,
            mean_reward=float(np.mean(rewards)) if rewards else 0.0,
            success_rate=float(np.mean([r["success"] for r in recs])) if recs else 0.0,
            loss=loss,
            generated_tokens=generated,
            trained_tokens=trained,
            logprob_drift=drift,
            drift_tokens=compared,
            rollout_s=rollout_s,
            update_s=u1 - u0,
            step_s=step_s,
            tokens_per_s=generated / rollout_s if rollout_s > 0 else 0.0,
            peak_rss_mb=peak_rss_mb(),
            sampler_version=c.version,
            overlapped_s=overlapped_s,
            grad_norm=u.get("grad_norm"),
            learning_rate=u.get("learning_rate"),
            entropy=u.get("entropy"),
            kl=u.get("kl"),
            clipped_fraction=u.get("clipped_fraction"),
            reply_tokens_mean=float(np.mean(replies)) if replies else 0.0,
            reply_tokens_max=max(replies, default=0),
            task_success={t: float(np.mean(v)) for t, v in sorted(by_task.items())},
            episodes=self.keep_episodes(c),
        )

    def _updated(self) -> None:
        with self._lock:
            self._updates_done += 1
            self._lock.notify_all()

    def step(self, step: int) -> StepReport:
        """One step, synchronously: its rollouts with the current weights, then its update."""
        c = self._collect_at(step)
        u0 = time.perf_counter()
        upd = self.update(c.kept)
        u1 = time.perf_counter()
        self._updated()
        return self._report(c, upd, u0, u1, u1 - c.t0, 0.0)

    def _produce(self, n: int, out: queue.Queue, stop: threading.Event) -> None:
        """The rollout producer (rollout_lag > 0): step s's rollouts start once the update of step
        s - 1 - lag is done, so they fly while the trainer updates, at most `lag` versions behind."""
        lag = self.cfg.rollout_lag
        for s in range(self.start_step, n):
            with self._lock:
                while self._updates_done < s - lag and not stop.is_set():
                    self._lock.wait(timeout=0.5)
            if stop.is_set():
                return
            try:
                out.put(self._collect_at(s))
            except BaseException as exc:  # the trainer re-raises it
                out.put(exc)
                return

    def _overlapped(self, n: int) -> Iterator[StepReport]:
        out: queue.Queue = queue.Queue()
        stop = threading.Event()
        producer = threading.Thread(target=self._produce, args=(n, out, stop), daemon=True)
        producer.start()
        updates: list[tuple[float, float]] = []
        last = time.perf_counter()
        try:
            for _ in range(self.start_step, n):
                c = out.get()
                if isinstance(c, BaseException):
                    raise c
                u0 = time.perf_counter()
                upd = self.update(c.kept)
                u1 = time.perf_counter()
                self._updated()
                overlap = sum(max(0.0, min(c.t1, b) - max(c.t0, a)) for a, b in updates)
                updates.append((u0, u1))
                yield self._report(c, upd, u0, u1, u1 - last, overlap)
                last = u1
        finally:
            stop.set()
            with self._lock:
                self._lock.notify_all()
            producer.join(timeout=600)

    def train(self, steps: int | None = None, merge: bool = False) -> list[StepReport]:

        reports = []
        n = steps if steps is not None else self.cfg.steps
        first = self.start_step
        run = self._overlapped(n) if self.cfg.rollout_lag > 0 else (self.step(s) for s in range(first, n))
        metrics = self.out / "metrics.jsonl"
        if metrics.is_file():  # a resumed run: the steps after its checkpoint are flown again
            kept = [ln for ln in metrics.read_text(encoding="utf-8").splitlines() if ln.strip()]
            kept = [ln for ln in kept if json.loads(ln).get("step", -1) < first]
            metrics.write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")
        board = MetricsLog(
            self.out, self.recipe.logging.report_to, config=self.recipe.model_dump(), log=self.log
        )
        with metrics.open("a", encoding="utf-8") as f, board:
            for rep in run:
                s = rep.step
                if (s + 1) % self.cfg.checkpoint_every == 0 or s == n - 1:
                    rep.checkpoint = str(self.checkpoint(s + 1, merge=merge))
                self._mix_states.pop(s, None)
                if self.cfg.eval_every and (s + 1) % self.cfg.eval_every == 0:
                    rep.val_success = self.validate(s + 1)
                f.write(json.dumps(asdict(rep)) + "\n")
                f.flush()
                board.write(s + 1, rep)
                self.log(
                    f"step {s + 1}/{n} [{rep.stage}]: groups {rep.groups_kept} kept of {rep.groups_sampled}, "
                    f"mean reward {rep.mean_reward:.3f}, success {rep.success_rate:.2f}, "
                    f"loss {rep.loss:+.4f}, "
                    f"{rep.trained_tokens} tokens trained, {rep.step_s:.0f} s"
                    + (f", {rep.overlapped_s:.0f} s of rollouts overlapped" if rep.overlapped_s else "")
                    + (f"; {rep.checkpoint}" if rep.checkpoint else "")
                )
                reports.append(rep)
        (self.out / "filter_counts.json").write_text(json.dumps(self.counts.to_json(), indent=2))
        return reports

    def close(self) -> None:
        """Stop the generator's worker thread."""
        if self.generator is not None:
            self.generator.close()
