"""Episodes as a LeRobot dataset (format v3.0, written by LeRobot's own `LeRobotDataset` writer).

One frame per turn that had a parsed action (an (observation, action) pair; correction turns with
no valid action have no action to learn and are left out):

- `observation.images.<camera>`: the image the model got that turn (a video per camera)
- `observation.state`: per part, tool position (cm), orientation (rad, roll pitch yaw), gripper
- `observation.joints_rad`: the measured joint angles (rad)
- `action`: per part, the end-effector change the model asked for (dx dy dz in cm, droll dpitch
  dyaw in rad) and the absolute gripper command: the protocol's action
- `action.joints_rad`: the joint targets the runtime commanded for it (IK), the measured angles where
  a part did not move
- `observation.sim_time_s`: the simulated time of the observation (turns are not evenly spaced;
  `timestamp` is frame_index / fps as LeRobot requires)
- `next.reward`, `next.done`, `next.success`: the last frame carries the episode's outcome

The instruction is the frame's task; `meta/pear_agent_episodes.jsonl` has each episode's source log,
success and end reason.

Runs under `.venv-lerobot` (`scripts/setup_lerobot.sh`): lerobot pins torch<2.11 and more, which
the core environment does not. `pear-agent export` calls this module there when lerobot is not
importable in its own environment. Imports here: stdlib, numpy, cv2, lerobot and
`pear_agent.records` (itself stdlib and numpy) only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.records import read_log

FORMAT = "lerobot"


class ExportError(ValueError):
    """Input the user can fix (printed as one line)."""


def find_logs(paths: list[Path]) -> list[Path]:
    """Every episode.jsonl under the given run, bench, rollout or teacher folders, in order."""
    logs: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_file() and p.name.endswith(".jsonl") and p.name != "results.jsonl":
            logs.append(p)
        elif (p / "episode.jsonl").is_file():
            logs.append(p / "episode.jsonl")
        elif p.is_dir():
            found = sorted(p.rglob("episode.jsonl"))
            if not found:
                raise ExportError(f"{p}: no episode.jsonl in it (give run, bench or rollout folders)")
            logs.extend(found)
        else:
            raise ExportError(f"{p}: no such run folder or episode.jsonl")
    return logs


def read_episode(log_path: Path) -> dict[str, Any]:
    """Header, turns and summary of one logged episode."""
    header: dict[str, Any] | None = None
    turns: list[dict[str, Any]] = []
    for rec in read_log(log_path, ExportError):
        if rec.get("kind") == "header":
            header = rec
        elif rec.get("kind") == "turn":
            turns.append(rec)
    if header is None:
        raise ExportError(f"{log_path}: no header line (not a pear-agent episode log)")
    summary_path = log_path.parent / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else {}
    return {"path": log_path, "header": header, "turns": turns, "summary": summary}


def usable_turns(ep: dict[str, Any]) -> list[dict[str, Any]]:
    """The turns that are (observation, action) pairs: a parsed action and the state it acted on."""
    return [t for t in ep["turns"] if t.get("action") is not None and t.get("state") and t.get("joints_rad")]


def _layout(ep: dict[str, Any]) -> dict[str, Any]:
    """Parts, joints per part, cameras and image shapes of an episode (must match across episodes)."""
    turns = usable_turns(ep)
    if not turns:
        return {}
    if "telemetry" in turns[0]:
        raise ExportError(f"{ep['path']}: a roadster flight; the LeRobot export takes arm episodes only")
    t0 = turns[0]
    parts = sorted(t0["state"])
    joints = {p: len(t0["joints_rad"][p]) for p in sorted(t0["joints_rad"])}
    cams = {}
    for cam, rel in sorted((t0.get("images") or {}).items()):
        img = _image(ep["path"].parent / rel)
        cams[cam] = tuple(img.shape)
    grip = {p: "gripper" in t0["state"][p] for p in parts}
    return {
        "parts": parts,
        "joints": joints,
        "cameras": cams,
        "gripper": grip,
        "robot": ep["header"].get("robot"),
    }


def _image(path: Path) -> np.ndarray:
    import cv2  # heavy: cv2

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ExportError(f"{path}: missing or unreadable image")
    return np.ascontiguousarray(bgr[..., ::-1])


def features_for(layout: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """LeRobot features (dtype, shape, names) for a layout."""
    state_names, action_names, joint_names = [], [], []
    for p in layout["parts"]:
        state_names += [f"{p}.{q}" for q in ("x_cm", "y_cm", "z_cm", "roll_rad", "pitch_rad", "yaw_rad")]
        action_names += [
            f"{p}.{q}" for q in ("dx_cm", "dy_cm", "dz_cm", "droll_rad", "dpitch_rad", "dyaw_rad")
        ]
        if layout["gripper"][p]:
            state_names.append(f"{p}.gripper")
            action_names.append(f"{p}.gripper")
    for p, n in layout["joints"].items():
        joint_names += [f"{p}.joint{i + 1}" for i in range(n)]
    feats: dict[str, dict[str, Any]] = {}
    for cam, shape in layout["cameras"].items():
        feats[f"observation.images.{cam}"] = {
            "dtype": "video",
            "shape": shape,
            "names": ["height", "width", "channels"],
        }
    feats["observation.state"] = {"dtype": "float32", "shape": (len(state_names),), "names": state_names}
    feats["observation.joints_rad"] = {"dtype": "float32", "shape": (len(joint_names),), "names": joint_names}
    feats["observation.sim_time_s"] = {"dtype": "float32", "shape": (1,), "names": None}
    feats["action"] = {"dtype": "float32", "shape": (len(action_names),), "names": action_names}
    feats["action.joints_rad"] = {"dtype": "float32", "shape": (len(joint_names),), "names": joint_names}
    feats["next.reward"] = {"dtype": "float32", "shape": (1,), "names": None}
    feats["next.done"] = {"dtype": "bool", "shape": (1,), "names": None}
    feats["next.success"] = {"dtype": "bool", "shape": (1,), "names": None}
    return feats


def frame_vectors(turn: dict[str, Any], layout: dict[str, Any]) -> dict[str, np.ndarray]:
    """State, joints, action and joint targets of one turn, in the layout's order."""
    state, action, joints, targets = [], [], [], []
    act = turn["action"]
    act_parts = act.get("action", {}) if isinstance(act, dict) else {}  # the wire form
    for p in layout["parts"]:
        st = turn["state"][p]
        state += list(st["position"]) + list(st["orientation"])
        a = act_parts.get(p) or {}
        action += list(a.get("move_cm") or [0.0, 0.0, 0.0]) + list(a.get("turn_rad") or [0.0, 0.0, 0.0])
        if layout["gripper"][p]:
            state.append(st.get("gripper", 0.0))
            g = a.get("gripper")
            action.append(st.get("gripper", 0.0) if g is None else g)  # unchanged: the measured opening
    ik = (turn.get("plan") or {}).get("ik") or {}
    for p in layout["joints"]:
        q = list(turn["joints_rad"][p])
        joints += q
        tgt = (ik.get(p) or {}).get("target_joints_rad")
        targets += list(tgt) if tgt is not None else q
    return {
        "observation.state": np.asarray(state, dtype=np.float32),
        "observation.joints_rad": np.asarray(joints, dtype=np.float32),
        "action": np.asarray(action, dtype=np.float32),
        "action.joints_rad": np.asarray(targets, dtype=np.float32),
    }


def export(
    logs: list[Path], out: Path, *, fps: int = 10, repo_id: str = "pear-agent/episodes"
) -> dict[str, Any]:
    """Write the episodes as one LeRobot dataset at `out`; returns what was written."""
    from lerobot.datasets.lerobot_dataset import CODEBASE_VERSION, LeRobotDataset  # optional: lerobot

    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty; give a new --out folder")
    if out.exists():
        out.rmdir()  # LeRobot creates the folder itself
    episodes = [read_episode(p) for p in logs]
    layout: dict[str, Any] = {}
    for ep in episodes:
        lay = _layout(ep)
        if not lay:
            continue
        if not layout:
            layout = lay
        elif lay != layout:
            raise ExportError(
                f"{ep['path']}: robot parts, joints or cameras differ from the first episode's "
                f"({lay} vs {layout}); export each robot to its own dataset"
            )
    if not layout:
        raise ExportError("no episode has a turn with an action to export")
    ds = LeRobotDataset.create(
        repo_id, fps, features_for(layout), root=out, robot_type=layout["robot"], use_videos=True
    )
    meta_rows, skipped = [], []
    try:
        for ep in episodes:
            turns = usable_turns(ep)
            if not turns:
                skipped.append(str(ep["path"]))
                continue
            task = str(ep["header"].get("instruction") or ep["header"].get("task"))
            success = bool(ep["summary"].get("success", False))
            reward = ep["summary"].get("reward")
            prev_t = 0.0
            for i, t in enumerate(turns):
                last = i == len(turns) - 1
                frame: dict[str, Any] = dict(frame_vectors(t, layout))
                for cam in layout["cameras"]:
                    frame[f"observation.images.{cam}"] = _image(ep["path"].parent / t["images"][cam])
                frame["observation.sim_time_s"] = np.asarray([prev_t], dtype=np.float32)
                prev_t = float(t.get("sim_time_s") or prev_t)
                frame["next.reward"] = np.asarray(
                    [float(reward if reward is not None else success) if last else 0.0], dtype=np.float32
                )
                frame["next.done"] = np.asarray([last], dtype=bool)
                frame["next.success"] = np.asarray([success and last], dtype=bool)
                frame["task"] = task
                ds.add_frame(frame)
            ds.save_episode()
            meta_rows.append(
                {
                    "episode_index": len(meta_rows),
                    "source": str(ep["path"]),
                    "task": ep["header"].get("task"),
                    "seed": ep["header"].get("seed"),
                    "policy": ep["header"].get("policy"),
                    "success": success,
                    "end_reason": ep["summary"].get("end_reason"),
                    "frames": len(turns),
                    "turns_logged": len(ep["turns"]),
                }
            )
    finally:
        ds.finalize()
    with (out / "meta" / "pear_agent_episodes.jsonl").open("w", encoding="utf-8") as f:
        for row in meta_rows:
            f.write(json.dumps(row) + "\n")
    return {
        "out": str(out),
        "format": f"lerobot {CODEBASE_VERSION}",
        "episodes": len(meta_rows),
        "frames": sum(r["frames"] for r in meta_rows),
        "fps": fps,
        "cameras": list(layout["cameras"]),
        "skipped_without_actions": skipped,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pear-agent export", description="episodes as a LeRobot dataset")
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--fps", type=int, default=10)
    p.add_argument("--repo-id", default="pear-agent/episodes")
    args = p.parse_args(argv)
    try:
        info = export(
            find_logs([Path(r) for r in args.runs]), Path(args.out), fps=args.fps, repo_id=args.repo_id
        )
    except (ExportError, FileNotFoundError) as exc:
        print(f"pear-agent: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
