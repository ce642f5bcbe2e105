"""A real-robot episode replayed in its simulated twin, turn by turn, and the two side by side.

    pear-agent ros replay runs/<run>/episode.jsonl [--twin-task bimanual_pickup] [--view]

The replay policy answers each turn with the reply the model gave on the robot; the twin (the
robot YAML's MuJoCo model in `twin_task`'s scene) starts from the joints and grippers the real
episode started from, so the operator sees afterwards what the model asked for, in the simulator
and in the viewer (`--view`: episode.rrd), and where the robot and the twin parted ways. No ROS:
it reads the log only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.policies.replay import ReplayPolicy
from pear_agent.records.log import RunWriter, new_run_dir
from pear_agent.records.view import RRD_NAME, EpisodeView
from pear_agent.robot.backend import Observation
from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.loader import load_robot

REPORT_NAME = "real_vs_twin.json"


def read_episode(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, the turns that were answered) of an episode.jsonl; ValueError naming what is missing."""
    try:
        lines = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not an episode log (line {exc.lineno} is not JSON)") from None
    header = next((x for x in lines if x.get("kind") == "header"), None)
    turns = [x for x in lines if x.get("kind") == "turn" and "outcome" in x]
    if header is None or not turns or "joints_rad" not in turns[0]:
        raise ValueError(f"{path}: no header or no turn with the robot's joints: not a recorded episode")
    return header, turns


class StartedAt:
    """A simulated backend that resets to its task's scene with the arms where a real episode
    started (its first turn's joints and grippers), everything else delegated."""

    def __init__(self, backend: Any, joints_rad: dict[str, list[float]], gripper: dict[str, float]) -> None:
        self.backend = backend
        self.joints = {k: np.asarray(v, float) for k, v in joints_rad.items()}
        self.gripper = gripper

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def reset(self, seed: int) -> Observation:
        self.backend.reset(seed)
        self.backend.set_joints(self.joints, self.gripper)
        return self.backend.observe()


def side_by_side(real: list[dict[str, Any]], twin: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per turn: the model's reply, the real outcome and the twin's."""
    rows = []
    for i in range(max(len(real), len(twin))):
        r = real[i] if i < len(real) else {}
        t = twin[i] if i < len(twin) else {}
        ro, to = r.get("outcome") or {}, t.get("outcome") or {}
        rows.append(
            {
                "turn": i + 1,
                "reply": r.get("reply", t.get("reply")),
                "real": {"status": ro.get("status"), "detail": ro.get("detail")},
                "twin": {"status": to.get("status"), "detail": to.get("detail")},
                "same": ro.get("status") == to.get("status"),
            }
        )
    return rows


def replay_in_twin(
    log_path: Path, twin_task: str, runs_dir: Path, view: bool = False, robot: str | None = None
) -> tuple[Path, list[dict[str, Any]]]:
    """Replay the episode at `log_path` in the twin; (the twin's run folder, the side-by-side rows,
    also written to its REPORT_NAME)."""
    header, turns = read_episode(log_path)
    config = load_robot(robot or str(header.get("robot") or ""))
    kin = Kinematics(config)
    first = turns[0]
    gripper = {k: float(v["gripper"]) for k, v in (first.get("state") or {}).items() if "gripper" in v}
    twin = StartedAt(make_backend(twin_task, config, render=True), first["joints_rad"], gripper)
    seed = int(header.get("seed") or 0)
    writer = RunWriter(new_run_dir(runs_dir, f"{twin_task}-replay", seed))
    if view:
        writer.observers.append(
            EpisodeView(writer.run_dir / RRD_NAME, run_dir=writer.run_dir, kinematics=kin)
        )
    cfg = EpisodeConfig(max_turns=len(turns), observation=str(header.get("observation") or "both"))
    try:
        arm_episode(twin, kin, ReplayPolicy(Path(log_path)), cfg, writer).run(seed)
    finally:
        twin.close()
    _, twin_turns = read_episode(writer.log_path)
    rows = side_by_side(turns, twin_turns)
    (writer.run_dir / REPORT_NAME).write_text(json.dumps({"real": str(log_path), "turns": rows}, indent=2))
    return writer.run_dir, rows
