"""`pear-agent train sft`: warm start on recorded episodes with TRL's SFTTrainer.

Each episode is ONE training sequence in the model's own chat template (`sequences.episode_tokens`,
the builder the in-process generator uses), the loss only on the model's replies: the dataset is
pre-tokenised with an `assistant_masks` column, TRL turns it into labels (-100 elsewhere), and we
check after TRL's preparation that the tokens it trains on are exactly the replies' tokens.
"""

from __future__ import annotations

import json
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from pear_agent.train.config import Recipe
from pear_agent.train.data import Example, load_examples
from pear_agent.train.loss import causal_parts, chunked_terms, reply_hidden
from pear_agent.train.models import save_checkpoint, trainable_model
from pear_agent.train.sequences import episode_tokens

MIN_TRL = "1.7"
"""TRL builds the `labels` column (-100 off the assistant mask) in the prepared dataset from 1.7 on:
the mask check below reads it. setup.cfg's train extra pins at least this (a test holds them equal)."""


def check_trl_version(version: str | None = None) -> None:
    """One line naming the fix when the installed TRL is older than the mask check needs."""
    if version is None:
        import trl  # optional: trl

        version = trl.__version__
    if Version(version) < Version(MIN_TRL):
        raise ValueError(
            f"train sft needs trl>={MIN_TRL} (installed: {version}): pip install 'trl>={MIN_TRL}'"
        )


@dataclass
class SFTResult:
    out: Path
    episodes: int
    tokens: int
    reply_tokens: int
    losses: list[float]
    seconds: float
    peak_rss_mb: float


def tokenize_examples(tokenizer: Any, examples: list[Example], max_tokens: int | None) -> dict[str, list]:
    """Columns for TRL: input_ids and assistant_masks (1 on reply tokens), plus the replies' counts."""
    cols: dict[str, list] = {"input_ids": [], "assistant_masks": [], "reply_tokens": []}
    for ex in examples:
        seq = episode_tokens(tokenizer, ex.messages, ex.traces or None, max_tokens)
        cols["input_ids"].append(seq.input_ids)
        cols["assistant_masks"].append(seq.mask)
        cols["reply_tokens"].append(seq.reply_tokens)
    return cols


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def select(examples: list[Example], min_reward: float) -> list[Example]:
    """The episodes worth imitating: they succeeded, or reached `min_reward`."""
    return [e for e in examples if e.success or e.reward >= min_reward]


MODEL_INPUTS = ("input_ids", "attention_mask", "position_ids")
"""What the body takes from a batch; a vision-language batch adds its pixel inputs (`PIXEL_INPUTS`)."""
PIXEL_INPUTS = ("pixel_values", "pixel_attention_mask", "image_grid_thw", "image_sizes")


def reply_loss(model: Any, inputs: dict[str, Any], num_items: Any = None, chunk: int = 512) -> Any:
    """Cross-entropy on the reply tokens only (labels other than -100), the output head applied in
    chunks at those positions (`loss.chunked_terms`): never the whole episode's [T, V] logits.
    Averaged over `num_items` (the accumulation's reply tokens) when given, else this batch's."""
    labels = inputs["labels"]
    fwd = {k: inputs[k] for k in (*MODEL_INPUTS, *PIXEL_INPUTS) if inputs.get(k) is not None}
    hidden, targets = reply_hidden(model, fwd, labels != -100)
    _, head, softcap = causal_parts(model)
    _, lp = chunked_terms(head, hidden, targets, softcap=softcap, chunk=chunk)
    n = int(num_items) if num_items is not None else int(targets.numel())
    return -lp.sum() / max(1, n)


def _reply_only_trainer(base: Any) -> Any:
    """TRL's SFTTrainer with the loss on reply positions, in chunks (`reply_loss`); TRL's own
    compute_loss builds the whole sequence's logits (and its entropy and accuracy over them)."""

    class ReplyOnlySFTTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None) -> Any:  # noqa: ANN001
            loss = reply_loss(model, inputs, num_items_in_batch, chunk=self.reply_chunk)
            return (loss, None) if return_outputs else loss

    return ReplyOnlySFTTrainer


def run_sft(
    recipe: Recipe,
    out: Path,
    data: list[str] | None = None,
    init: str | None = None,
    max_steps: int | None = None,
    merge: bool = False,
    log: Any = print,
    resume: bool = False,
    callbacks: list[Any] | None = None,
) -> SFTResult:
    """`resume`: continue the run in `out` from its newest RUN/trainer/checkpoint-N (the optimizer,
    scheduler, RNG and the data order as they were; the run's own data and --init). `callbacks`:
    transformers `TrainerCallback`s (the tests stop a run midway with one)."""
    import torch  # optional: torch
    from datasets import Dataset  # optional: datasets
    from trl import SFTConfig, SFTTrainer  # optional: trl

    check_trl_version()
    cfg = recipe.sft
    t0 = time.perf_counter()
    out = Path(out)
    run_file = out / "sft_run.json"
    if resume:
        if not run_file.is_file() or not any((out / "trainer").glob("checkpoint-*")):
            raise ValueError(f"{out}: no sft checkpoint to resume from (RUN/trainer/checkpoint-N)")
        started = json.loads(run_file.read_text(encoding="utf-8"))
        data, init = started["data"], started["init"]
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "recipe.json").write_text(recipe.model_dump_json(indent=2), encoding="utf-8")
        run_file.write_text(json.dumps({"data": data or cfg.data, "init": init}), encoding="utf-8")
    examples = select(load_examples(data or cfg.data, cfg.executed_actions), cfg.min_reward)
    if not examples:
        raise ValueError("no episode to learn from: none succeeded (or reached sft.min_reward)")
    from transformers import set_seed  # optional: transformers

    set_seed(cfg.seed)  # the adapter's initial weights: the same run twice is the same run
    model, tok, base = trainable_model(recipe.model, init)
    cols = tokenize_examples(tok, examples, cfg.max_tokens)
    reply_tokens = sum(cols.pop("reply_tokens"))
    dataset = Dataset.from_dict(cols)
    report_to = [r for r in recipe.logging.report_to if r in ("tensorboard", "wandb")]
    if "tensorboard" in report_to:
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(out / "tensorboard")
    if "wandb" in report_to:
        os.environ.setdefault("WANDB_MODE", "offline")  # nothing leaves the machine
        os.environ.setdefault("WANDB_DIR", str(out))
    args = SFTConfig(
        output_dir=str(out / "trainer"),
        num_train_epochs=cfg.epochs,
        max_steps=max_steps if max_steps is not None else -1,
        learning_rate=cfg.learning_rate,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_length=None,  # never truncate an episode: a long one is refused when tokenised
        logging_steps=1,
        save_strategy="steps",
        save_steps=cfg.checkpoint_every,
        save_total_limit=2,
        report_to=report_to,
        seed=cfg.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=recipe.model.dtype == "bfloat16" and torch.cuda.is_available(),
        dataset_num_proc=None,
        lr_scheduler_type=(
            "constant_with_warmup"
            if cfg.lr_scheduler == "constant" and cfg.warmup_steps
            else cfg.lr_scheduler
        ),
        warmup_steps=cfg.warmup_steps,
        gradient_checkpointing=recipe.model.gradient_checkpointing,
    )
    trainer_cls = _reply_only_trainer(SFTTrainer) if cfg.chunked_loss else SFTTrainer
    trainer = trainer_cls(
        model=model, args=args, train_dataset=dataset, processing_class=tok, callbacks=callbacks
    )
    trainer.reply_chunk = cfg.reply_chunk
    trained = sum(sum(1 for x in row if x != -100) for row in trainer.train_dataset["labels"])
    # TRL's labels are shifted inside the model; the unshifted labels count each reply token once
    if trained != reply_tokens:
        raise AssertionError(f"the loss covers {trained} tokens but the replies hold {reply_tokens}")
    log(
        f"sft: {len(examples)} episodes, {sum(map(len, cols['input_ids']))} tokens, {reply_tokens} in replies"
    )
    trainer.train(resume_from_checkpoint=True if resume else None)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    ckpt = save_checkpoint(
        trainer.model,
        tok,
        out / "checkpoint-sft",
        base,
        step=trainer.state.global_step,
        merge=merge,
        kind="sft",
    )
    result = SFTResult(
        ckpt,
        len(examples),
        sum(map(len, cols["input_ids"])),
        reply_tokens,
        losses,
        time.perf_counter() - t0,
        peak_rss_mb(),
    )
    summary = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(result).items()}
    (out / "sft_summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return result
