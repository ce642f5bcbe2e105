"""Recorded episodes as training examples: run folders (`episode.jsonl`), bench folders (a run
folder per episode under them), rollout and teacher folders (`trajectories.jsonl`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pear_agent.protocol.actions import ACTION, DONE, reply_text
from pear_agent.rl.trajectories import load_trajectories


@dataclass
class Example:
    """One recorded episode: its conversation, the replies' token traces where recorded, and outcome."""

    messages: list[dict[str, Any]]
    traces: list[dict[str, Any] | None] = field(default_factory=list)
    success: bool = False
    reward: float = 0.0
    task: str = ""
    seed: int = 0
    source: str = ""


def executed_reply(reply: str, executed: dict[str, Any], done: bool) -> str:
    """The reply with its action replaced by what was executed after clipping (within the per-turn
    caps and the workspace): the expert's reasoning, then that action, as the prompt asks."""

    reasoning = reply.split("```", 1)[0].strip()
    wire: dict[str, Any] = {ACTION: executed}
    if done:
        wire[DONE] = True
    return reply_text(reasoning, wire)


def from_run_folder(folder: Path, executed_actions: bool = False) -> Example:
    """Rebuild the conversation the model saw from a run folder's `episode.jsonl` (text turns).
    `executed_actions`: each executed reply's action becomes the executed (clipped) one."""
    lines = [json.loads(x) for x in (folder / "episode.jsonl").read_text(encoding="utf-8").splitlines() if x]
    header = next((x for x in lines if x.get("kind") == "header"), None)
    if header is None or "system_prompt" not in header:
        raise ValueError(f"{folder}: no episode header with a system prompt")
    messages: list[dict[str, Any]] = [{"role": "system", "content": header["system_prompt"]}]
    traces: list[dict[str, Any] | None] = []
    reward = 0.0
    for t in (x for x in lines if x.get("kind") == "turn"):
        if t.get("images"):
            raise ValueError(
                f"{folder}: turns carry camera images; the text trainer needs --observation state"
            )
        user: dict[str, Any] = {"role": "user", "content": t["prompt"]}
        if t.get("line") and header.get("history") is not None:
            user["_line"] = t["line"]  # its one-line form (a history window's older turns)
        messages.append(user)
        answered = "reply" in t and not (t.get("error") and "outcome" not in t)
        if answered:
            reply = t["reply"]
            if executed_actions and t.get("executed"):
                reply = executed_reply(reply, t["executed"], bool((t.get("action") or {}).get("done")))
                traces.append(None)  # a rewritten reply is text, not the sampled tokens
            else:
                traces.append(t.get("tokens"))
            answer: dict[str, Any] = {"role": "assistant", "content": reply}
            if t.get("action") is not None and header.get("history") is not None:
                answer["_line"] = json.dumps(t["action"], separators=(",", ":"))
            messages.append(answer)
        if t.get("reward") is not None:
            reward = float(t["reward"])
    summary_path = folder / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    success = bool(summary.get("success", False))
    if summary.get("reward") is not None:
        reward = float(summary["reward"])
    elif success and not reward:
        reward = 1.0
    return Example(
        messages,
        traces,
        success,
        reward,
        str(header.get("task", "")),
        int(header.get("seed", 0)),
        str(folder),
    )


def load_examples(paths: list[str | Path], executed_actions: bool = False) -> list[Example]:
    """Every episode under the given folders (or trajectories.jsonl files)."""

    out: list[Example] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"no recorded episodes at {path}")
        traj = path if path.is_file() else path / "trajectories.jsonl"
        if traj.is_file():
            root = traj.parent
            for rec in load_trajectories(traj):
                out.append(
                    Example(
                        rec.chat_messages(root),
                        list(getattr(rec, "turn_tokens", None) or []),
                        rec.success,
                        float(rec.reward),
                        rec.task,
                        rec.seed,
                        f"{traj}:{rec.id}",
                    )
                )
            continue
        runs = sorted(p.parent for p in path.rglob("episode.jsonl"))
        if not runs:
            raise ValueError(f"{path}: no episode.jsonl or trajectories.jsonl under it")
        out += [from_run_folder(r, executed_actions) for r in runs]
    return out
