"""Convert an `episode.jsonl` recorded with protocol v1 to v2, for replay.

v1 actions had the state's shape (`{"arm": {"position": [dx, dy, dz], "orientation": [...],
"gripper": g}}`, changes in cm / rad); v2 wraps them (`{"action": {"arm": {"move_cm": ...,
"turn_rad": ..., "gripper": g}}}`). Each reply's last v1 action object becomes a fenced v2 action
after the same reasoning; replies without one are kept as they were (they were invalid then too).

    .venv/bin/python -m pear_agent.protocol.convert_v1 OLD/episode.jsonl NEW/episode.jsonl
    .venv/bin/pear-agent run --policy replay --replay NEW/episode.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pear_agent.protocol.actions import PROTOCOL_VERSION, reply_text, wire_action

_V1_KEYS = {"position", "orientation", "gripper"}


def _is_v1_action(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and "action" not in obj
        and all(isinstance(v, dict) and set(v) <= _V1_KEYS for v in obj.values())
    )


def convert_reply(text: str) -> str | None:
    """The v2 reply for a v1 one (reasoning kept), or None when it holds no v1 action."""
    decoder = json.JSONDecoder()
    last: tuple[int, Any] | None = None
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        if _is_v1_action(obj):
            last = (i, obj)
        i = text.find("{", end)
    if last is None:
        return None
    reasoning = text[: last[0]].replace("```json", "").replace("```", "").strip()
    return reply_text(reasoning, wire_action(last[1]))


def is_v1_log(lines: list[dict[str, Any]]) -> bool:
    """A log without a protocol version whose replies hold v1 actions and no v2 one."""
    header = next((x for x in lines if x.get("kind") == "header"), {})
    if int(header.get("protocol", 1)) >= PROTOCOL_VERSION:
        return False
    replies = [str(x.get("reply") or "") for x in lines if x.get("kind") == "turn"]
    return not any('"action"' in r for r in replies) and any(convert_reply(r) is not None for r in replies)


def convert_log(src: Path, dst: Path) -> int:
    """Writes the converted log; returns how many replies were converted."""
    n = 0
    out = []
    for raw in Path(src).read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        rec = json.loads(raw)
        if rec.get("kind") == "header":
            rec["protocol"] = PROTOCOL_VERSION
            rec["converted_from_protocol"] = 1
        elif rec.get("kind") == "turn" and rec.get("reply"):
            new = convert_reply(rec["reply"])
            if new is not None:
                rec["reply"], n = new, n + 1
        out.append(json.dumps(rec))
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    Path(dst).write_text("\n".join(out) + "\n", encoding="utf-8")
    return n


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(
            "usage: python -m pear_agent.protocol.convert_v1 OLD/episode.jsonl NEW/episode.jsonl",
            file=sys.stderr,
        )
        return 2
    try:
        n = convert_log(Path(args[0]), Path(args[1]))
    except (OSError, ValueError) as exc:
        print(f"convert_v1: error: {exc}", file=sys.stderr)
        return 2
    print(f"{n} replies converted to protocol v{PROTOCOL_VERSION}: {args[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
