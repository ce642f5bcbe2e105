"""Trajectory records a trainer loads: one JSONL line per episode plus the JPEGs it was sent.

Layout of a rollout folder:

    trajectories.jsonl          one `TrajectoryRecord` per line (schema "pear-agent/trajectory/v1")
    images/<id>/msg_MMM_KK.jpg  every image of the conversation (message MMM, image KK): the exact
                                bytes the model received
    summary.json                counts (groups sampled / kept / dropped, per-task success)

In a record's `messages` (OpenAI chat format) each image part
`{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..."}}` is stored as
`{"type": "image_url", "image_url": {"path": "images/<id>/msg_001_00.jpg", "mime": "image/jpeg"}}`;
`TrajectoryRecord.chat_messages(root)` turns it back into the identical data URL. JSONL + JPEG
files rather than a columnar format: the conversation is nested and ragged, trainers (TRL, verl)
read chat JSONL directly, and the images stay viewable and are not base64-inflated by a third.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pear_agent.protocol.prompts import Message

SCHEMA = "pear-agent/trajectory/v1"
DATA_URL_RE = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)
EXT = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp"}


class TrajectoryRecord(BaseModel):
    """One episode: the whole conversation and what a trainer needs to weigh it."""

    model_config = ConfigDict(extra="allow")

    schema_: str = Field(SCHEMA, alias="schema")
    id: str
    group_id: str | None = None
    index_in_group: int = 0
    task: str
    robot: str = ""
    seed: int
    """The episode seed: the initial state (shared by every rollout of a group)."""
    policy: str = ""
    policy_seed: int | None = None
    mode: str = "paused"
    reward: float
    """1.0 when the task's success check passed, else 0.0 (roadster tasks: the shaped reward in [0, 1])."""
    shaped_reward: float | None = None
    """A task-defined dense reward, when the task defines one (recorded separately)."""
    advantage: float | None = None
    group_kept: bool | None = None
    """False for a group written with --keep-dropped (no learning signal: advantage 0)."""
    success: bool
    end_reason: str
    turns: int
    latencies_s: list[float] = Field(default_factory=list)
    """Decision latency of each turn, in seconds."""
    sim_time_s: float = 0.0
    detail: str = ""
    """Why the episode ended, in words."""
    worker: str | None = None
    """host:pid of the process that ran it."""
    messages: list[dict[str, Any]]
    """OpenAI chat messages with image parts stored as file paths (see the module docstring)."""
    turn_tokens: list[dict[str, Any] | None] | None = None
    """Per assistant message: the sampled token ids, their log-probabilities under the sampling
    policy and its version (`TokenTrace.to_json()`), where the policy knew them: what a trainer
    trains on (re-tokenising the text is not the same sequence)."""

    def to_line(self) -> str:
        return self.model_dump_json(by_alias=True)

    def chat_messages(self, root: Path) -> list[Message]:
        """The conversation exactly as the model saw it (images back to data URLs)."""
        return restore_images(self.messages, Path(root))

    def image_paths(self) -> list[str]:
        return [c["image_url"]["path"] for c in _image_parts(self.messages) if "path" in c["image_url"]]


def _image_parts(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            for c in content:
                if isinstance(c, dict) and c.get("type") == "image_url":
                    yield c


def externalize_images(messages: list[Message], root: Path, prefix: str) -> list[dict[str, Any]]:
    """A copy of `messages` whose data-URL images are written to `root/images/<prefix>/`."""
    out = copy.deepcopy(messages)
    folder = Path("images") / prefix
    n = 0
    for turn, m in enumerate(out):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for c in content:
            if not (isinstance(c, dict) and c.get("type") == "image_url"):
                continue
            url = c["image_url"].get("url", "")
            match = DATA_URL_RE.match(url)
            if match is None:
                continue  # a plain URL stays as it is
            mime = match["mime"]
            rel = folder / f"msg_{turn:03d}_{n:02d}.{EXT.get(mime, 'bin')}"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(base64.b64decode(match["data"], validate=True))
            c["image_url"] = {k: v for k, v in c["image_url"].items() if k != "url"}
            c["image_url"].update(path=rel.as_posix(), mime=mime)
            n += 1
    return out


def restore_images(messages: list[dict[str, Any]], root: Path) -> list[Message]:
    out = copy.deepcopy(messages)
    for c in _image_parts(out):
        ref = c["image_url"]
        if "path" not in ref:
            continue
        path = root / ref.pop("path")
        if not path.is_file():
            raise FileNotFoundError(f"trajectory image {path} is missing")
        mime = ref.pop("mime", "image/jpeg")
        c["image_url"] = {"url": f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")}
        c["image_url"].update(ref)
    return out


class TrajectoryWriter:
    """Appends records to `root/trajectories.jsonl`, flushed per episode."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = self.root / "trajectories.jsonl"
        self._f = self.path.open("a", encoding="utf-8")
        self.count = 0

    def write(self, record: dict[str, Any]) -> TrajectoryRecord:
        """`record` holds the fields of `TrajectoryRecord`, its messages with data-URL images."""
        fields = dict(record)
        fields["messages"] = externalize_images(record["messages"], self.root, _safe(record["id"]))
        rec = TrajectoryRecord.model_validate(fields)
        self._f.write(rec.to_line() + "\n")
        self._f.flush()
        self.count += 1
        return rec

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def load_trajectories(path: Path) -> list[TrajectoryRecord]:
    """Records from a rollout folder or its `trajectories.jsonl`; errors name the line."""
    path = Path(path)
    if path.is_dir():
        path = path / "trajectories.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no trajectories at {path}")
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(TrajectoryRecord.model_validate_json(line))
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            raise ValueError(f"{path}:{i}: not a trajectory record ({first})") from None
    return out


def export_sft(
    src: Path,
    out: Path,
    fmt: Literal["trl", "openai"] = "trl",
    min_reward: float = 1.0,
) -> int:
    """Write the successful episodes (reward >= min_reward) as chat JSONL for supervised warm-start.

    - "trl": `{"messages": [...], "images": ["images/...jpg", ...]}` with each image part as
      `{"type": "image"}` in order: the layout TRL's SFTTrainer and verl's multi-turn SFT dataset
      read for vision-language models (image paths are relative to the export file's folder, which
      must be the rollout folder or a copy of its `images/`).
    - "openai": `{"messages": [...]}` with inline data-URL images, self-contained.
    Returns the number of episodes written.
    """
    src = Path(src)
    root = src if src.is_dir() else src.parent
    records = load_trajectories(src)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rel_root = Path(_relpath(root, out.parent))
    n = 0
    with out.open("w", encoding="utf-8") as f:
        for rec in records:
            if rec.reward < min_reward and not rec.success:  # (a landed roadster flight: shaped reward < 1)
                continue
            if fmt == "openai":
                row: dict[str, Any] = {"messages": rec.chat_messages(root)}
            elif fmt == "trl":
                msgs = copy.deepcopy(rec.messages)
                images = []
                for m in msgs:
                    if isinstance(m.get("content"), list):
                        parts = []
                        for c in m["content"]:
                            if (
                                isinstance(c, dict)
                                and c.get("type") == "image_url"
                                and "path" in c["image_url"]
                            ):
                                images.append((rel_root / c["image_url"]["path"]).as_posix())
                                parts.append({"type": "image"})
                            else:
                                parts.append(c)
                        m["content"] = parts
                row = {"messages": msgs, "images": images}
            else:
                raise ValueError(f"unknown SFT format {fmt!r}; formats are trl, openai")
            row.update(id=rec.id, task=rec.task, seed=rec.seed, reward=rec.reward)
            f.write(json.dumps(row) + "\n")
            n += 1
    return n


def _relpath(target: Path, start: Path) -> str:
    return os.path.relpath(target.resolve(), start.resolve())
