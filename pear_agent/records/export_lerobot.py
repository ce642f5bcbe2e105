"""Episodes as a LeRobot dataset (format v3.0, written by LeRobot's own `LeRobotDataset` writer).

**At the control rate** (the default): episodes run with `--record-fps R` carry, per turn, the
simulation recorded every 1/R s during the move (`control/turn_NNN.npz`, `ArmEnvironment.
take_recording`); the export samples them at `--fps F` (R a multiple of F; default 30, the rate of
LeRobot's SO-100/SO-101 and Koch recordings and the camera default of its recorder), one frame per
sample:

- `observation.images.<camera>`: the camera at that instant (a video per camera)
- `observation.state`: per part the measured joint angles (rad) and the gripper opening (0..1)
- `observation.velocity`: the measured joint velocities (rad/s)
- `observation.tool_pose`: per part tool x y z (cm), roll pitch yaw (rad): the protocol's state
- `action`: per part the controller's setpoint at that instant (absolute joint targets, rad: the
  trajectory's point, as LeRobot's arms record the commanded positions) and the gripper command
- `turn.ee_delta`: the protocol action of the turn the frame belongs to (dx dy dz cm, droll
  dpitch dyaw rad, absolute gripper; zeros and the gripper in force on a turn without an action):
  constant over a turn's frames, so outside LeRobot's `action*` namespace, which its policy factory
  (`dataset_to_policy_features`) and lerobot-doctor read as per-frame commands
- `sim_time_s`: the simulated instant of the sample (not under `observation.`, which LeRobot's
  policies would take as an input); `next.reward`, `next.done`, `next.success` as below
- language: the instruction is the frame's `task`; the turn's reasoning is its `subtask`
  (`subtask_index` into `meta/subtasks.parquet`, the per-frame language LeRobot 0.4.4 loads as
  `item["subtask"]`); `turn_index` (the episode's turn) keys `meta/pear_agent_turns.jsonl`, which
  holds each turn's reasoning, parsed action (wire JSON) and outcome

**Per turn** (`--per-turn`): one frame per turn that had a parsed action (an (observation, action)
pair; correction turns with no valid action have no action to learn and are left out):

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
`pear_agent.records.log` (itself stdlib and numpy) only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.records.log import read_log

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


def _camera_features(layout: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A video feature for each of the layout's cameras (`observation.images.<camera>`)."""
    names = ("height", "width", "channels")
    return {
        f"observation.images.{cam}": {"dtype": "video", "shape": shape, "names": list(names)}
        for cam, shape in layout["cameras"].items()
    }


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
    feats = _camera_features(layout)
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


def reasoning_of(reply: str) -> str:
    """The reasoning of a reply: its text before the action's JSON (think tags dropped)."""
    text = reply.replace("<think>", "").replace("</think>", "")
    for mark in ("```", "{"):
        if mark in text:
            text = text.split(mark, 1)[0]
    return text.strip()


def _control_layout(ep: dict[str, Any]) -> dict[str, Any]:
    """Parts, joints, grippers and cameras of an episode's control recording ({} if none)."""
    turn = next((t for t in ep["turns"] if t.get("control")), None)
    if turn is None:
        return {}
    arrays = _load_control(ep, turn)
    cams = {
        k.split(".", 1)[1]: tuple(_jpeg(arrays, k.split(".", 1)[1], 0).shape)
        for k in arrays
        if k.startswith("jpeg.")
    }
    return arrays_layout(arrays) | {
        "cameras": dict(sorted(cams.items())),
        "robot": ep["header"].get("robot"),
        "record_fps": float(ep["header"].get("record_fps") or 0),
    }


def arrays_layout(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Parts (sorted: the order of every vector), joints per part and which parts have a gripper,
    from a control recording's arrays (`ArmEnvironment.take_recording`'s layout)."""
    parts = sorted({k.split(".", 1)[0] for k in arrays if k.endswith(".joints_rad")})
    return {
        "parts": parts,
        "joints": {p: int(arrays[f"{p}.joints_rad"].shape[1]) for p in parts},
        "gripper": {p: f"{p}.gripper" in arrays for p in parts},
    }


def _load_control(ep: dict[str, Any], turn: dict[str, Any]) -> dict[str, np.ndarray]:
    path = ep["path"].parent / turn["control"]
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise ExportError(f"{path}: missing or unreadable control recording ({exc})") from exc


def jpeg_bytes(arrays: dict[str, np.ndarray], cam: str, i: int) -> bytes:
    """Camera `cam`'s JPEG of recorded frame i, as recorded (quality 95)."""
    ends = arrays[f"jpeg_end.{cam}"]
    start = int(ends[i - 1]) if i > 0 else 0
    return arrays[f"jpeg.{cam}"][start : int(ends[i])].tobytes()


def decode_jpeg(data: bytes) -> np.ndarray:
    """A recorded JPEG as H x W x 3 uint8 RGB (what the dataset's frames hold): the export and the
    LeRobot policy server (`pear_agent.policies.lerobot.server`) decode alike. ValueError if unreadable."""
    import cv2  # heavy: cv2

    bgr = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError("not a readable JPEG image")
    return np.ascontiguousarray(bgr[..., ::-1])


def _jpeg(arrays: dict[str, np.ndarray], cam: str, i: int) -> np.ndarray:
    return decode_jpeg(jpeg_bytes(arrays, cam, i))


def control_vectors(arrays: dict[str, np.ndarray], layout: dict[str, Any], i: int) -> dict[str, np.ndarray]:
    """The vector features of recorded frame i: `observation.state` (per part the joints, then the
    gripper opening), `observation.velocity`, `observation.tool_pose` and `action` (the setpoint:
    joint targets, then the gripper command). One mapping for the export and for a LeRobot policy
    run through pear-agent's tasks (`pear_agent.policies.lerobot.client`), so a policy is fed what it was
    trained on; `split_action` is its inverse for `action`."""
    state, vel, act, pose = [], [], [], []
    for p in layout["parts"]:
        state += list(arrays[f"{p}.joints_rad"][i])
        act += list(arrays[f"{p}.command_joints_rad"][i])
        if layout["gripper"][p]:
            state.append(float(arrays[f"{p}.gripper"][i]))
            act.append(float(arrays[f"{p}.command_gripper"][i]))
        vel += list(arrays[f"{p}.velocity_rad_s"][i])
        pose += list(arrays[f"{p}.tool_pose"][i])
    return {
        "observation.state": np.asarray(state, dtype=np.float32),
        "observation.velocity": np.asarray(vel, dtype=np.float32),
        "observation.tool_pose": np.asarray(pose, dtype=np.float32),
        "action": np.asarray(act, dtype=np.float32),
    }


def action_size(layout: dict[str, Any]) -> int:
    """Values in an `action` vector of this layout: per part its joints, then its gripper."""
    return sum(layout["joints"][p] + int(layout["gripper"][p]) for p in layout["parts"])


def split_action(action: Any, layout: dict[str, Any]) -> dict[str, tuple[np.ndarray, float | None]]:
    """An `action` vector back into per part (joint targets, gripper command or None): the inverse
    of `control_vectors`' `action`. ValueError when its length does not fit the layout."""
    vec = np.asarray(action, dtype=float).reshape(-1)
    need = action_size(layout)
    if vec.size != need:
        raise ValueError(f"an action of {vec.size} values; this robot's has {need}")
    out: dict[str, tuple[np.ndarray, float | None]] = {}
    k = 0
    for p in layout["parts"]:
        n = layout["joints"][p]
        joints, k = vec[k : k + n], k + n
        grip = None
        if layout["gripper"][p]:
            grip, k = float(vec[k]), k + 1
        out[p] = (joints, grip)
    return out


def control_features(layout: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """LeRobot features of a control-rate dataset."""
    state, vel, act, pose, delta = [], [], [], [], []
    for p in layout["parts"]:
        joints = [f"{p}.joint{i + 1}" for i in range(layout["joints"][p])]
        grip = [f"{p}.gripper"] if layout["gripper"][p] else []
        state += joints + grip
        act += joints + grip
        vel += joints
        pose += [f"{p}.{q}" for q in ("x_cm", "y_cm", "z_cm", "roll_rad", "pitch_rad", "yaw_rad")]
        delta += [
            f"{p}.{q}" for q in ("dx_cm", "dy_cm", "dz_cm", "droll_rad", "dpitch_rad", "dyaw_rad")
        ] + grip
    feats = _camera_features(layout)
    for key, names in (
        ("observation.state", state),
        ("observation.velocity", vel),
        ("observation.tool_pose", pose),
        ("action", act),
        ("turn.ee_delta", delta),
    ):
        feats[key] = {"dtype": "float32", "shape": (len(names),), "names": names}
    feats["sim_time_s"] = {"dtype": "float32", "shape": (1,), "names": None}
    feats["next.reward"] = {"dtype": "float32", "shape": (1,), "names": None}
    feats["next.done"] = {"dtype": "bool", "shape": (1,), "names": None}
    feats["next.success"] = {"dtype": "bool", "shape": (1,), "names": None}
    feats["subtask_index"] = {"dtype": "int64", "shape": (1,), "names": None}
    feats["turn_index"] = {"dtype": "int64", "shape": (1,), "names": None}
    return feats


def _ee_delta(
    turn: dict[str, Any], layout: dict[str, Any], arrays: dict[str, np.ndarray], i: int
) -> list[float]:
    """The turn's protocol action in the `turn.ee_delta` layout (no action: zeros, the gripper
    command in force)."""
    act = turn.get("action")
    act_parts = act.get("action", {}) if isinstance(act, dict) else {}
    if isinstance(act_parts, list):  # a chunk: its first step
        act_parts = act_parts[0] if act_parts else {}
    out: list[float] = []
    for p in layout["parts"]:
        a = act_parts.get(p) or {}
        out += list(a.get("move_cm") or [0.0, 0.0, 0.0]) + list(a.get("turn_rad") or [0.0, 0.0, 0.0])
        if layout["gripper"][p]:
            g = a.get("gripper")
            out.append(float(arrays[f"{p}.command_gripper"][i]) if g is None else float(g))
    return out


def control_frames(ep: dict[str, Any], layout: dict[str, Any], stride: int) -> list[dict[str, Any]]:
    """The episode's frames at the export rate: every `stride`-th recorded frame, in time order,
    with the turn each belongs to."""
    frames: list[dict[str, Any]] = []
    k = 0
    for turn in ep["turns"]:
        if not turn.get("control"):
            continue
        arrays = _load_control(ep, turn)
        for i in range(len(arrays["time_s"])):
            k += 1
            if (k - 1) % stride:
                continue
            frame: dict[str, Any] = control_vectors(arrays, layout, i) | {
                "turn.ee_delta": np.asarray(_ee_delta(turn, layout, arrays, i), dtype=np.float32),
                "sim_time_s": np.asarray([arrays["time_s"][i]], dtype=np.float32),
            }
            for cam in layout["cameras"]:
                frame[f"observation.images.{cam}"] = _jpeg(arrays, cam, i)
            frames.append({"frame": frame, "turn": turn})
    return frames


def _outcome(ep: dict[str, Any]) -> tuple[str, bool, float | None]:
    """An episode's instruction (else its task name), success and reward (None: not logged)."""
    task = str(ep["header"].get("instruction") or ep["header"].get("task"))
    return task, bool(ep["summary"].get("success", False)), ep["summary"].get("reward")


def _episode_row(ep: dict[str, Any], index: int, success: bool, frames: int) -> dict[str, Any]:
    """An exported episode's row of meta/pear_agent_episodes.jsonl: where it came from, how it ended."""
    return {
        "episode_index": index,
        "source": str(ep["path"]),
        "task": ep["header"].get("task"),
        "seed": ep["header"].get("seed"),
        "policy": ep["header"].get("policy"),
        "success": success,
        "end_reason": ep["summary"].get("end_reason"),
        "frames": frames,
    }


def _add_frame(
    ds: Any, frame: dict[str, Any], task: str, success: bool, reward: float | None, *, last: bool
) -> None:
    """Add one frame with the episode's ending fields: its reward (else its success as 0/1) and
    done/success on the last frame only."""
    frame["next.reward"] = np.asarray(
        [float(reward if reward is not None else success) if last else 0.0], dtype=np.float32
    )
    frame["next.done"] = np.asarray([last], dtype=bool)
    frame["next.success"] = np.asarray([success and last], dtype=bool)
    frame["task"] = task
    ds.add_frame(frame)


def export(
    logs: list[Path],
    out: Path,
    *,
    fps: int | None = None,
    repo_id: str = "pear-agent/episodes",
    per_turn: bool = False,
) -> dict[str, Any]:
    """Write the episodes as one LeRobot dataset at `out`: at the control rate (fps default 30),
    or one frame per turn (`per_turn`, fps default 10); returns what was written."""
    if not per_turn:
        return export_control(logs, out, fps=fps or 30, repo_id=repo_id)
    fps = fps or 10
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
            task, success, reward = _outcome(ep)
            prev_t = 0.0
            for i, t in enumerate(turns):
                last = i == len(turns) - 1
                frame: dict[str, Any] = dict(frame_vectors(t, layout))
                for cam in layout["cameras"]:
                    frame[f"observation.images.{cam}"] = _image(ep["path"].parent / t["images"][cam])
                frame["observation.sim_time_s"] = np.asarray([prev_t], dtype=np.float32)
                prev_t = float(t.get("sim_time_s") or prev_t)
                _add_frame(ds, frame, task, success, reward, last=last)
            ds.save_episode()
            row = _episode_row(ep, len(meta_rows), success, len(turns))
            meta_rows.append({**row, "turns_logged": len(ep["turns"])})
    finally:
        ds.finalize()
    _write_jsonl(out / "meta" / "pear_agent_episodes.jsonl", meta_rows)
    return {
        "out": str(out),
        "format": f"lerobot {CODEBASE_VERSION}",
        "episodes": len(meta_rows),
        "frames": sum(r["frames"] for r in meta_rows),
        "fps": fps,
        "cameras": list(layout["cameras"]),
        "skipped_without_actions": skipped,
    }


def export_control(logs: list[Path], out: Path, *, fps: int, repo_id: str) -> dict[str, Any]:
    """The control-rate dataset (see the module's docstring)."""
    from lerobot.datasets.lerobot_dataset import CODEBASE_VERSION, LeRobotDataset  # optional: lerobot

    if fps <= 0:
        raise ExportError(f"--fps must be > 0, not {fps}")
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty; give a new --out folder")
    episodes = [read_episode(p) for p in logs]
    layout: dict[str, Any] = {}
    for ep in episodes:
        lay = _control_layout(ep)
        if not lay:
            if any(t.get("action") is not None for t in ep["turns"]):
                raise ExportError(
                    f"{ep['path']}: no control-rate recording (run it with --record-fps {fps}), "
                    "or export every episode per turn with --per-turn"
                )
            continue
        if lay["record_fps"] <= 0:
            raise ExportError(f"{ep['path']}: the header has no record_fps")
        if not layout:
            layout = lay
        elif lay != layout:
            raise ExportError(
                f"{ep['path']}: robot parts, joints, cameras or recording rate differ from the first "
                f"episode's ({lay} vs {layout}); export each to its own dataset"
            )
    if not layout:
        raise ExportError("no episode has a control-rate recording to export")
    stride = layout["record_fps"] / fps
    if stride < 1 - 1e-9 or abs(stride - round(stride)) > 1e-6:
        raise ExportError(
            f"--fps {fps}: the episodes were recorded at {layout['record_fps']:g} Hz; give a rate that "
            f"divides it (e.g. {layout['record_fps']:g})"
        )
    if out.exists():
        out.rmdir()  # LeRobot creates the folder itself
    ds = LeRobotDataset.create(
        repo_id, fps, control_features(layout), root=out, robot_type=layout["robot"], use_videos=True
    )
    subtasks: dict[str, int] = {}
    meta_rows: list[dict[str, Any]] = []
    turn_rows: list[dict[str, Any]] = []
    try:
        for ep in episodes:
            frames = control_frames(ep, layout, round(stride))
            if not frames:
                continue
            k = len(meta_rows)
            task, success, reward = _outcome(ep)
            seen: set[int] = set()
            for i, item in enumerate(frames):
                last = i == len(frames) - 1
                turn = item["turn"]
                reasoning = reasoning_of(str(turn.get("reply") or ""))
                frame = item["frame"]
                frame["subtask_index"] = np.asarray(
                    [subtasks.setdefault(reasoning, len(subtasks))], dtype=np.int64
                )
                frame["turn_index"] = np.asarray([int(turn["turn"])], dtype=np.int64)
                _add_frame(ds, frame, task, success, reward, last=last)
                if int(turn["turn"]) not in seen:
                    seen.add(int(turn["turn"]))
                    turn_rows.append(
                        {
                            "episode_index": k,
                            "turn_index": int(turn["turn"]),
                            "reasoning": reasoning,
                            "action": turn.get("action"),
                            "outcome": (turn.get("outcome") or {}).get("status"),
                        }
                    )
            ds.save_episode()
            row = _episode_row(ep, k, success, len(frames))
            row["sim_time_s"] = ep["summary"].get("sim_time_s")
            meta_rows.append({**row, "turns_logged": len(ep["turns"])})
    finally:
        ds.finalize()
    _write_subtasks(out, subtasks)
    _write_jsonl(out / "meta" / "pear_agent_episodes.jsonl", meta_rows)
    _write_jsonl(out / "meta" / "pear_agent_turns.jsonl", turn_rows)
    return {
        "out": str(out),
        "format": f"lerobot {CODEBASE_VERSION}",
        "rate": "control",
        "episodes": len(meta_rows),
        "frames": sum(r["frames"] for r in meta_rows),
        "fps": fps,
        "record_fps": layout["record_fps"],
        "cameras": list(layout["cameras"]),
    }


def _write_subtasks(out: Path, subtasks: dict[str, int]) -> None:
    """meta/subtasks.parquet as LeRobot 0.4.4 reads it (`load_subtasks`: the text is the index)."""
    import pandas as pd  # optional: pandas

    texts = sorted(subtasks, key=subtasks.__getitem__)
    pd.DataFrame({"subtask_index": range(len(texts))}, index=pd.Index(texts, name="subtask")).to_parquet(
        out / "meta" / "subtasks.parquet"
    )


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pear-agent export", description="episodes as a LeRobot dataset")
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--fps", type=int, default=None)
    p.add_argument("--repo-id", default="pear-agent/episodes")
    p.add_argument("--per-turn", action="store_true")
    args = p.parse_args(argv)
    try:
        info = export(
            find_logs([Path(r) for r in args.runs]),
            Path(args.out),
            fps=args.fps,
            repo_id=args.repo_id,
            per_turn=args.per_turn,
        )
    except (ExportError, FileNotFoundError) as exc:
        print(f"pear-agent: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
