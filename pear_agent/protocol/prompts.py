"""Prompt rendering from `prompts/` templates and the robot description, and image encoding.

Messages are OpenAI chat messages; a turn's text and images never change once sent, so a growing
conversation is an exact prefix of the next request (the server's prefix cache keeps working).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from string import Template
from typing import Any, Literal

from pear_agent.protocol.actions import wire_action
from pear_agent.robot.backend import TaskInfo
from pear_agent.robot.config import REPO_ROOT, RobotConfig

PROMPTS_DIR = REPO_ROOT / "prompts"

Message = dict[str, Any]


def _template(name: str, prompts_dir: Path) -> Template:
    return Template((prompts_dir / f"{name}.md").read_text())


def _fmt_range(r: list[float]) -> str:
    return f"[{r[0]:g}, {r[1]:g}]"


ObservationMode = Literal["images", "state", "both", "compact"]
OBSERVATION_MODES: tuple[str, ...] = ("images", "state", "both", "compact")
"""compact: a short briefing, the state as a few integer fields in one line, no echo of the last
command, bare-JSON replies (text only: for small text models; `compact_system_prompt`)."""


def _inputs(observation: str, scene_facts: bool, scene_relative: bool = False) -> str:
    what = {
        "both": "the robot's current state as JSON, one image from each camera",
        "images": "one image from each camera (no state JSON)",
        "state": "the robot's current state as JSON (no images)",
    }[observation]
    what += ", the positions of the objects in the scene" if scene_facts else ""
    return what + (" and relative to the tool point" if scene_relative else "")


RELATIVE_HELP = (
    "the object's position minus the part's tool point, cm: the move that reaches it; dyaw: the "
    "yaw turn, rad, that lines the gripper up with it"
)
"""What `--scene-relative`'s numbers are, as both briefings say it."""


def _observation_section(
    robot: RobotConfig, observation: str, scene_facts: bool, scene_relative: bool = False
) -> str:
    lines = []
    if observation in ("state", "both"):
        lines.append(
            "- `State`: where each part is now, absolute: `position` [x, y, z] of the tool point in cm, "
            "`orientation` [roll, pitch, yaw] in rad, `gripper` opening (0 closed .. 1 open)."
        )
    if scene_facts:
        lines.append(
            "- `Scene`: positions (cm) and orientations (rad) of the objects, exact, from the simulator."
        )
    if scene_relative:
        lines.append(
            f"- `Relative`: object -> part -> `move_cm` [dx, dy, dz] and `turn_rad` (dyaw), {RELATIVE_HELP}."
        )
    if observation in ("images", "both"):
        cams = [f"  - `{n}` ({c.width}x{c.height}): {c.description}" for n, c in robot.cameras.items()]
        lines.append("- One image from each camera:\n" + ("\n".join(cams) or "  - none"))
    else:
        lines.append("- No camera images: you see the scene only through the text above.")
    return "\n".join(lines)


def system_prompt(
    robot: RobotConfig,
    task: TaskInfo,
    prompts_dir: Path = PROMPTS_DIR,
    *,
    observation: str = "both",
    scene_facts: bool = False,
    scene_relative: bool = False,
    max_invalid: int = 3,
    max_chunk: int = 1,
    press: bool = False,
    max_turns: int | None = None,
) -> str:
    """`max_turns`: the episode's turn limit where it overrides the task's."""
    if observation not in OBSERVATION_MODES:
        raise ValueError(f"observation must be one of {OBSERVATION_MODES}, not {observation!r}")
    if observation == "compact":
        return compact_system_prompt(
            robot,
            task,
            prompts_dir,
            scene_facts=scene_facts,
            scene_relative=scene_relative,
            max_invalid=max_invalid,
            max_chunk=max_chunk,
            press=press,
            max_turns=max_turns,
        )
    parts, example = [], {}
    for name, part in robot.parts.items():
        qty = ["`position` [x, y, z] of the tool point in cm", "`orientation` [roll, pitch, yaw] in rad"]
        if part.gripper is not None:
            qty.append(f"`gripper` ({part.gripper.description})")
        parts.append(f"- `{name}`: {part.description.strip()}\n  State: {'; '.join(qty)}.")
    first_name, first = next(iter(robot.parts.items()))
    example[first_name] = {"position": [0.0, 0.0, -2.0]}
    if first.gripper is not None:
        example[first_name]["gripper"] = 0.0
    ws = first.limits.workspace_cm
    return _template("system", prompts_dir).substitute(
        inputs=_inputs(observation, scene_facts, scene_relative),
        robot_name=robot.name,
        robot_description=robot.description.strip(),
        parts="\n".join(parts),
        frame_origin=robot.frame.origin,
        frame_x=robot.frame.x,
        frame_y=robot.frame.y,
        frame_z=robot.frame.z,
        frame_orientation=robot.frame.orientation,
        observation=_observation_section(robot, observation, scene_facts, scene_relative),
        example=json.dumps(wire_action(example)),
        max_step_cm=f"{first.limits.max_position_step_cm:g}",
        max_rot_rad=f"{first.limits.max_rotation_step_rad:g}",
        workspace=f"x {_fmt_range(ws['x'])}, y {_fmt_range(ws['y'])}, z {_fmt_range(ws['z'])} cm",
        max_invalid=max_invalid,
        chunk=chunk_rules(first_name, max_chunk, first.gripper is not None)
        + (f"\n{PRESS_RULE}" if press else ""),
        instruction=task.instruction,
        max_turns=max_turns or task.max_turns,
    )


def compact_system_prompt(
    robot: RobotConfig,
    task: TaskInfo,
    prompts_dir: Path = PROMPTS_DIR,
    *,
    scene_facts: bool = False,
    scene_relative: bool = False,
    max_invalid: int = 3,
    max_chunk: int = 1,
    press: bool = False,
    max_turns: int | None = None,
) -> str:
    """The short briefing of `--observation compact` (`prompts/system_compact.md`)."""
    first_name, first = next(iter(robot.parts.items()))
    example: dict[str, Any] = {first_name: {"position": [0.0, 0.0, -2.0]}}
    if first.gripper is not None:
        example[first_name]["gripper"] = 0.0
    chunk = ""
    if max_chunk > 1:
        chunk = (
            f' `"action"` may be a list of up to {max_chunk} such steps, each a change from the previous '
            "step's target, run as one motion."
        )
    if press:
        chunk += " " + PRESS_RULE
    return _template("system_compact", prompts_dir).substitute(
        robot_name=robot.name,
        instruction=task.instruction.strip(),
        max_turns=max_turns or task.max_turns,
        frame_x=robot.frame.x,
        frame_y=robot.frame.y,
        frame_z=robot.frame.z,
        scene=(", then one line `<object> x= y= z=` per object (cm)" if scene_facts else "")
        + (
            f", then one line `<object> from <part> dx= dy= dz= dyaw=` ({RELATIVE_HELP})"
            if scene_relative
            else ""
        ),
        example=json.dumps(wire_action(example), separators=(",", ":")),
        max_step_cm=f"{first.limits.max_position_step_cm:g}",
        max_rot_rad=f"{first.limits.max_rotation_step_rad:g}",
        max_invalid=max_invalid,
        chunk=chunk,
    )


def compact_turn_text(
    state_line: str, outcome: str | None, scene: str | None = None, relative: str | None = None
) -> str:
    """A compact turn: `last: <outcome>` unless the last action was simply reached (or on turn 1),
    the state line, the objects' line with --scene-facts, their line relative to the tool point with
    --scene-relative. No turn counter, no echo of the command."""
    lines = []
    if outcome and not outcome.startswith("reached"):
        lines.append(f"last: {outcome}")
    lines.append(state_line)
    if scene:
        lines.append(scene)
    if relative:
        lines.append(relative)
    return "\n".join(lines)


PRESS_RULE = (
    'Add "press":true to a move that must push into contact (press a handle, drag a plate): the hand '
    "keeps pushing toward the target until it gets there or the move's time runs out, instead of "
    "stopping `blocked` when it stalls."
)
"""The briefing's one line on `press`, where the backend honours it."""


def chunk_rules(part: str, max_chunk: int, has_gripper: bool) -> str:
    """The prompt's paragraph on chunks: how many steps one reply may carry, and how they run."""
    if max_chunk <= 1:
        return 'Send one action per reply (this robot takes no chunks: `"action"` is one object).'
    second: dict[str, Any] = {"move_cm": [0.0, 0.0, -3.0]}
    third: dict[str, Any] = {"gripper": 0.0} if has_gripper else {"move_cm": [0.0, 0.0, -1.0]}
    example = {"action": [{part: {"move_cm": [2.0, 0.0, 0.0]}}, {part: second}, {part: third}]}
    return (
        f'Chunks: `"action"` may also be a list of up to {max_chunk} steps, run in order as one '
        "smooth motion. Each step is a change from the previous step's target (not from where the "
        "robot is now), with the same per-step limits. The whole chunk is checked before anything "
        "moves: if any step is refused, nothing moves and the reply names the step. A step that "
        "changes the gripper is reached and the gripper settles before the next step starts. Contact "
        "or a blocked motion ends the chunk early; the next turn says which step was reached. A list "
        f"longer than {max_chunk} steps is refused (not shortened). Example:\n```json\n"
        f"{json.dumps(example)}\n```"
    )


def data_url(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def turn_text(
    turn: int,
    max_turns: int,
    state: str,
    outcome: str | None,
    camera_names: list[str],
    prompts_dir: Path = PROMPTS_DIR,
    *,
    observation: str = "both",
    scene: str | None = None,
    relative: str | None = None,
) -> str:
    """One user turn's text. `state` is the state JSON; `scene` the scene facts text, `relative` the
    objects relative to the tool point (`--scene-relative`), if any."""
    lines = []
    if observation in ("state", "both"):
        lines.append(f"State: {state}")
    if scene is not None:
        lines.append(f"Scene: {scene}")
    if relative is not None:
        lines.append(f"Relative: {relative}")
    if observation in ("images", "both"):
        lines.append(f"Camera images follow ({', '.join(camera_names) or 'none'}).")
    name = "first_turn" if outcome is None else "turn"
    return _template(name, prompts_dir).substitute(
        turn=turn, max_turns=max_turns, outcome=outcome or "", observation="\n".join(lines)
    )


def user_message(text: str, jpegs: dict[str, bytes], as_string: bool = False) -> Message:
    """A user message; `as_string` (no images) sends the content as a plain string, for servers
    whose chat template drops list content."""
    if as_string:
        if jpegs:
            raise ValueError("a plain-string user message cannot carry images")
        return {"role": "user", "content": text}
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for name, jpeg in jpegs.items():
        content.append({"type": "text", "text": f"Camera `{name}`:"})
        content.append({"type": "image_url", "image_url": {"url": data_url(jpeg)}})
    return {"role": "user", "content": content}
