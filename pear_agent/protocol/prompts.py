"""Prompt rendering from `prompts/` templates and the robot description, and image encoding.

Messages are OpenAI chat messages; a turn's text and images never change once sent, so a growing
conversation is an exact prefix of the next request (the server's prefix cache keeps working).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from string import Template
from typing import Any

import cv2
import numpy as np

from pear_agent.backend import TaskInfo
from pear_agent.robot_config import REPO_ROOT, RobotConfig

PROMPTS_DIR = REPO_ROOT / "prompts"

Message = dict[str, Any]


def _template(name: str, prompts_dir: Path) -> Template:
    return Template((prompts_dir / f"{name}.md").read_text())


def _fmt_range(r: list[float]) -> str:
    return f"[{r[0]:g}, {r[1]:g}]"


def system_prompt(robot: RobotConfig, task: TaskInfo, prompts_dir: Path = PROMPTS_DIR) -> str:
    parts, example = [], {}
    for name, part in robot.parts.items():
        qty = ["`position` [x, y, z] of the tool point in cm", "`orientation` [roll, pitch, yaw] in rad"]
        if part.gripper is not None:
            qty.append(f"`gripper` ({part.gripper.description})")
        parts.append(f"- `{name}`: {part.description.strip()}\n  Quantities: {'; '.join(qty)}.")
        example[name] = {"position": [0.0, 0.0, -2.0]}
    first = next(iter(robot.parts.values()))
    if first.gripper is not None:
        example[next(iter(robot.parts))]["gripper"] = 0.0
    cameras = (
        "\n".join(
            f"- `{name}` ({cam.width}x{cam.height}): {cam.description}" for name, cam in robot.cameras.items()
        )
        or "- none"
    )
    ws = first.limits.workspace_cm
    return _template("system", prompts_dir).substitute(
        robot_name=robot.name,
        robot_description=robot.description.strip(),
        parts="\n".join(parts),
        frame_origin=robot.frame.origin,
        frame_x=robot.frame.x,
        frame_y=robot.frame.y,
        frame_z=robot.frame.z,
        frame_orientation=robot.frame.orientation,
        cameras=cameras,
        example=json.dumps(example),
        max_step_cm=f"{first.limits.max_position_step_cm:g}",
        max_rot_rad=f"{first.limits.max_rotation_step_rad:g}",
        workspace=f"x {_fmt_range(ws['x'])}, y {_fmt_range(ws['y'])}, z {_fmt_range(ws['z'])} cm",
        instruction=task.instruction,
        max_turns=task.max_turns,
    )


def encode_jpeg(image: np.ndarray, quality: int = 85) -> bytes:
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


def data_url(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def turn_text(
    turn: int,
    max_turns: int,
    state: str,
    outcome: str | None,
    camera_names: list[str],
    prompts_dir: Path = PROMPTS_DIR,
) -> str:
    name = "first_turn" if outcome is None else "turn"
    return _template(name, prompts_dir).substitute(
        turn=turn,
        max_turns=max_turns,
        state=state,
        outcome=outcome or "",
        camera_names=", ".join(camera_names) or "none",
    )


def user_message(text: str, jpegs: dict[str, bytes]) -> Message:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for name, jpeg in jpegs.items():
        content.append({"type": "text", "text": f"Camera `{name}`:"})
        content.append({"type": "image_url", "image_url": {"url": data_url(jpeg)}})
    return {"role": "user", "content": content}
