"""Prefix reuse (measure 5): how much of each turn's request, as sent, is an exact prefix of the
next turn's, so a server's prefix (KV) cache keeps working. Requests are serialized the way the
`openai` client sends them (JSON body, `messages` first) from the conversations of recorded
scripted episodes, via `pear_agent.policies.openai_client.strip_images` when it is present.

    .venv/bin/python benchmarks/prefix_reuse.py [--tasks pick_cube,place_in_bowl] [--seeds 2]
"""

from __future__ import annotations

import argparse
import itertools
import json

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
import numpy as np
from _common import emit, machine, record_episode, verdict

TARGET = 0.95


def _request_copy(messages: list, keep_images: int | None) -> tuple[list, str]:
    try:
        from pear_agent.policies.openai_client import strip_images

        return strip_images(messages, keep_images), "openai_client.strip_images"
    except ImportError:  # the model client is not there: the conversation is sent as it is
        return messages, "messages as kept by the episode"


def body(messages: list, keep_images: int | None = None) -> bytes:
    """The HTTP body the openai client sends: {"messages": [...], "model": ..., <options>}."""
    msgs, _ = _request_copy(messages, keep_images)
    return json.dumps({"messages": msgs, "model": "model", "max_tokens": 1024, "temperature": 0.0}).encode()


def text_only(messages: list) -> list:
    """The conversation with every image's data replaced by a fixed tag (text prefix only)."""
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            c = [x if x.get("type") != "image_url" else {"type": "image_url", "image_url": "IMG"} for x in c]
        out.append({"role": m["role"], "content": c})
    return out


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    x = np.frombuffer(a, np.uint8, n) != np.frombuffer(b, np.uint8, n)
    return int(np.argmax(x)) if x.any() else n


def shares(bodies: list[bytes]) -> list[float]:
    return [common_prefix(a, b) / len(a) for a, b in itertools.pairwise(bodies)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", default="pick_cube,place_in_bowl,push_to_target")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per task")
    ap.add_argument("--keep-images", type=int, default=3, help="also report the sliding image window")
    args = ap.parse_args()

    full, texts, window = [], [], []
    per_episode = []
    how = _request_copy([], None)[1]
    total_turns = 0
    for task in args.tasks.split(","):
        for seed in range(args.seeds):
            rec = record_episode(task, seed)
            rec["backend"].close()
            convs = [t["messages"] for t in rec["turns"]]
            total_turns += len(convs)
            s_full = shares([body(m) for m in convs])
            s_text = shares([json.dumps(text_only(m)).encode() for m in convs])
            s_win = shares([body(m, args.keep_images) for m in convs])
            full += s_full
            texts += s_text
            window += s_win
            per_episode.append(
                {
                    "task": task,
                    "seed": seed,
                    "turns": len(convs),
                    "min_share": min(s_full) if s_full else None,
                    "last_request_bytes": len(body(convs[-1])),
                }
            )

    def summary(v: list[float]) -> dict:
        return {
            "n": len(v),
            "min": float(np.min(v)),
            "median": float(np.median(v)),
            "mean": float(np.mean(v)),
        }

    out = {
        "machine": machine(),
        "request_serialization": how,
        "turn_pairs": len(full),
        "turns": total_turns,
        "as_sent": summary(full),
        "text_only": summary(texts),
        f"keep_images_{args.keep_images}": summary(window),
        "episodes": per_episode,
        "target": "every turn after the first: share of its request that prefixes the next >= 95%",
        "pass": bool(np.min(full) >= TARGET),
    }
    rows = [
        (
            "as sent (images inline, append-only)",
            summary(full)["min"],
            summary(full)["median"],
            verdict(out["pass"]),
        ),
        ("text only (images as a tag)", summary(texts)["min"], summary(texts)["median"], ""),
        (
            f"keep_images={args.keep_images} (sliding window)",
            summary(window)["min"],
            summary(window)["median"],
            "",
        ),
    ]
    emit("prefix_reuse", out, rows, ("request", "min share", "median share", "target >= 0.95"))


if __name__ == "__main__":
    main()
