"""The GRPO path on a CUDA GPU, end to end: vLLM serves a small instruct model with runtime LoRA
and prefix caching, the trainer (this process, same GPU, the recipe's memory split) runs a few
GRPO steps of the roadster recipe with 64+ flights in flight, token-in token-out, publishing each
version's adapter to vLLM. Prints and writes step time, rollout tokens/s, GPU memory and the
logprob drift (vLLM's log mu against the trainer's log pi on the same tokens).

    PEAR_BENCH_TAG=gpu nice -n 10 python benchmarks/gpu_grpo_check.py            # installs vllm
    python benchmarks/gpu_grpo_check.py --model Qwen/Qwen3-4B-Instruct-2507 --groups 16 --steps 3

Needs: an NVIDIA GPU (CUDA), network access for `pip install vllm` (skip with --no-install) and for
the model (or the model in the Hugging Face cache). Not run in CI (no GPU there); the CPU parts
(token-in token-out, adapter sync, the update) are tested against `pear-agent train serve`
(tests/train/test_token_server.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path

from _common import REPO_ROOT, emit, machine


def sh(cmd: list[str]) -> None:
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)


def gpu_memory() -> list[dict]:
    """Per GPU: used and total MiB (nvidia-smi), whoever holds it (vLLM and the trainer)."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for line in out.strip().splitlines():
        i, name, used, total = [x.strip() for x in line.split(",")]
        rows.append({"index": int(i), "name": name, "used_mib": int(used), "total_mib": int(total)})
    return rows


def wait_for(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 1200) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"vllm exited ({proc.returncode}): {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return
        except OSError:
            time.sleep(2)
    raise SystemExit(f"vllm did not answer within {timeout_s:.0f} s; log: {log}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="Qwen/Qwen3-0.6B", help="a Qwen3 0.6B-4B instruct model")
    ap.add_argument("--recipe", default="roadster_study")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--groups", type=int, default=8, help="groups per step (x group size = flights)")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--lora-rank", type=int, default=64)
    ap.add_argument("--gpu-split", type=float, default=0.5, help="vLLM's share of GPU memory")
    ap.add_argument("--max-turns", type=int, default=None)
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--out", default="runs/gpu-grpo-check")
    ap.add_argument("--no-install", action="store_true", help="vllm is installed already")
    args = ap.parse_args()
    if args.groups * args.group_size < 64:
        print(
            f"note: {args.groups * args.group_size} flights per step (the check asks for 64+)",
            file=sys.stderr,
        )

    import importlib.util

    if not args.no_install and importlib.util.find_spec("vllm") is None:
        sh([sys.executable, "-m", "pip", "install", "vllm"])
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: this check runs on a GPU machine (see docs/training.md)")

    from pear_agent.train.config import load_recipe
    from pear_agent.train.vllm_sync import serve_command

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{args.port}/v1"
    sets = [
        f"model.name={args.model}",
        f"model.lora.r={args.lora_rank}",
        f"model.lora.alpha={2 * args.lora_rank}",
        f"grpo.groups_per_step={args.groups}",
        f"grpo.group_size={args.group_size}",
        "grpo.generator=vllm",
        f"grpo.vllm_url={url}",
        f"grpo.vllm_gpu_memory_utilization={args.gpu_split}",
        "grpo.max_attempts_factor=1",
        "grpo.checkpoint_every=1000",
    ]
    if args.max_turns:
        sets.append(f"grpo.max_turns={args.max_turns}")
    recipe = load_recipe(args.recipe, None, sets)
    exe = Path(sys.executable).parent / "vllm"  # the console script pip installed beside python
    cmd = [str(exe) if exe.exists() else "vllm", *serve_command(recipe, port=args.port)[1:]]
    env = os.environ | {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    log = out / "vllm.log"
    print("+", " ".join(cmd), file=sys.stderr)
    vllm = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
    try:
        wait_for(url, vllm, log)
        memory_vllm = gpu_memory()
        from pear_agent.train.grpo import GRPOTrainer

        trainer = GRPOTrainer(recipe, out / "grpo", log=lambda m: print(m, file=sys.stderr))
        reports = []
        for s in range(args.steps):
            rep = trainer.step(s)
            reports.append(
                asdict(rep)
                | {"gpu_memory": gpu_memory(), "torch_peak_mib": torch.cuda.max_memory_allocated() / 2**20}
            )
            print(json.dumps(reports[-1]), file=sys.stderr)
    finally:
        vllm.terminate()
        try:
            vllm.wait(timeout=60)
        except subprocess.TimeoutExpired:
            vllm.kill()
    rows = [
        [r["step"], r["step_s"], r["rollout_s"], r["update_s"], r["generated_tokens"], r["tokens_per_s"],
         r["logprob_drift"], r["drift_tokens"], max(g["used_mib"] for g in r["gpu_memory"]),
         r["torch_peak_mib"]]
        for r in reports
    ]  # fmt: skip
    emit(
        "gpu_grpo_check",
        {
            "machine": machine(),
            "model": args.model,
            "flights_per_step": args.groups * args.group_size,
            "lora_rank": args.lora_rank,
            "gpu_split": args.gpu_split,
            "gpu_memory_after_vllm_start": memory_vllm,
            "reports": reports,
        },
        rows,
        [
            "step",
            "step s",
            "rollout s",
            "update s",
            "gen tokens",
            "tok/s",
            "drift",
            "drift tokens",
            "GPU MiB",
            "torch MiB",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
