"""The agent node's ROS parameters, each written once: the node's own (`AgentSettings`), the
backend's (`RosSettings`, grouped as the backend reads them), and the turn loop's and model
client's that a ROS run shares with `pear-agent run` (read from `EpisodeConfig` and
`ModelSettings`, so their defaults and help are theirs). `agent_parameters()` lists them all: the
node declares them from it and `scripts/settings_reference.py` writes the reference page from it.
Also the limits the backend works within."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pear_agent.loop.config import EpisodeConfig
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.robot.config import RobotConfig
from pear_agent.robot.kinematics import Kinematics
from pear_agent.ros2 import stack
from pear_agent.ros2.graph import trajectory_topic
from pear_agent.ros2.modes import ArmModeSettings
from pear_agent.settings import type_of

START_LATENESS_S = 0.25
"""A controller may start a trajectory this much after it was sent (DDS and a busy machine)
before falling behind the reference counts as a stall."""


LIMIT_SLACK_RAD = 1e-3
"""An arm joint this far outside its limits still counts as inside (encoder noise at a stop)."""


class RosSettings(BaseModel):
    """Backend parameters (ROS parameters of the agent node, same names)."""

    model_config = ConfigDict(extra="forbid")

    joint_states_topic: str = stack.JOINT_STATES_TOPIC
    joint_state_max_age_s: float = Field(
        0.1, gt=0, description="plan, hold and judge only from joint states younger than this (50 Hz: 0.1)"
    )
    wait_for_fresh_state_s: float = Field(
        0.3, ge=0, description="wait this long for a fresh one, else refuse"
    )
    wait_for_joint_states_s: float = Field(5.0, ge=0, description="stack check: wait this long for them")
    wait_for_controllers_s: float = Field(
        5.0,
        ge=0,
        description="stack check: wait for each controller's own subscription (over DDS's 3 s heartbeat "
        "period: its discovery record can come that much after the robot's joint states)",
    )
    controller_manager: str = Field(
        "/controller_manager",
        description="list_controllers is asked here where controller_manager_msgs exists",
    )
    reach_tolerance_rad: float = Field(
        0.01,
        gt=0,
        description="a joint within this of its target has reached it (MuJoCo: 0.006; looser here, for "
        "joint states sampled at 50 Hz from a real controller)",
    )
    still_velocity_rad_s: float = Field(0.03, gt=0, description="a joint slower than this is still")
    gripper_still_velocity: float = Field(0.004, gt=0, description="gripper joint units per second")
    stall_tracking_error_rad: float = Field(
        0.3,
        gt=0,
        description="tracking error that means a stall (MuJoCo: 0.25; the measured state lags the command "
        "by the transport's delay here)",
    )
    settle_timeout_s: float = Field(
        3.0,
        gt=0,
        description="time after the planned duration to settle before the move is judged not reached "
        "(MuJoCo: 2.0; a real controller settles more slowly)",
    )
    gripper_speed: float = Field(0.1, gt=0, description="gripper joint units per second (m/s: YAM)")
    joint_acceleration_rad_s2: float = Field(4.0, gt=0, description="acceleration limit of every move")
    joint_jerk_rad_s3: float = Field(40.0, gt=0, description="jerk limit of every move")
    trajectory_dt_s: float = Field(0.05, gt=0, description="spacing of trajectory points")
    hold_time_s: float = Field(0.1, gt=0, description="shortest time_from_start of a one-point hold")
    stop_deceleration_rad_s2: float = Field(
        8.0, gt=0, description="deceleration limit of every stop (e-stop, stall, stale state mid-motion)"
    )
    stop_jerk_rad_s3: float = Field(100.0, gt=0, description="jerk limit of every stop")
    command_latency_s: float = Field(
        0.005,
        ge=0,
        le=0.1,
        description="send -> the controller acting on it (DDS + half an update period): a stop starts "
        "from the state predicted that far ahead",
    )
    go_home_on_reset: bool = Field(False, description="drive to the home pose before the first turn")
    confirm_home: bool = Field(True, description="ask the operator before the home move")
    wait_for_images_s: float = Field(3.0, ge=0, description="stack check: wait this long for every camera")
    image_max_age_s: float = Field(1.0, gt=0, description="an older camera image ends the episode (refused)")
    disabled_cameras: str = Field(
        "", description="comma-separated cameras of the robot YAML not to use ('all' = none)"
    )
    video_camera: str = Field(
        "", description="camera recorded to episode.mp4 ('' = the first, 'none' = no video)"
    )
    estop_topic: str = stack.ESTOP_TOPIC
    estop_service: str = "/pear/stop"
    operator_service: str = "/pear/operator/judge"
    operator_answer_topic: str = Field(
        "/pear/operator/answer",
        description="JSON answers with a reason (`pear-agent ros reject [reason]`): std_msgs/String",
    )
    operator_terminal: bool = Field(True, description="also ask on the terminal when stdin is one")
    operator_timeout_s: float = Field(120.0, gt=0, description="wait this long for the operator's answer")
    task_status_topic: str = Field(
        "", description="sim-only task status (success, privileged facts): '' on a real robot"
    )
    driver_status_topic: str = Field(
        "/pear/driver/{part}/status",
        description="a driver's JSON status per part (yam_driver_node): a latched or faulted driver is "
        "refused by name; '' = none (a ros2_control stack)",
    )


class AgentSettings(BaseModel):
    """The agent node's own parameters: what to run and where to talk (same names as parameters)."""

    model_config = ConfigDict(extra="forbid")

    robot: str = Field(stack.ROBOT, description="robot name in robots/ or a path to a robot YAML")
    task: str = Field("", description="task name ('' = the simulator's task status, else 'ros2')")
    instruction: str = Field("", description="the instruction ('' = the task's, else instruction_topic)")
    instruction_topic: str = Field(
        "/pear/instruction", description="std_msgs/String read when there is no instruction"
    )
    instruction_timeout_s: float = Field(30.0, description="wait this long for an instruction")
    task_status_timeout_s: float = Field(30.0, description="wait this long for a simulator's task status")
    seed: int = Field(0, description="the episode's seed (the scripted policy's noise)")
    policy: str = Field("scripted", description="scripted, bringup, replay or openai")
    action_noise_cm: float = Field(0.0, description="scripted: noise added to each target")
    bringup_height_cm: float = Field(3.0, description="bringup: how high each part lifts")
    replay_path: str = Field("", description="replay: an episode.jsonl recorded with `pear-agent run`")
    replay_delay_s: float = Field(0.0, description="replay: wait this long per decision (a model's pace)")
    video_fps: float = Field(10.0, description="episode.mp4 frames per second (0 = no video)")
    view: bool = Field(False, description="also write episode.rrd, a Rerun recording (the view extra)")
    runs_dir: str = Field("runs", description="the run folders go here")
    status_topic: str = Field("/pear/agent/status", description="progress as JSON (pear-agent ros status)")


def shared_parameters() -> dict[str, tuple[str, str]]:
    """Parameter -> (definition, field) of the settings a ROS run shares with `pear-agent run`: every
    `EpisodeConfig`, `ModelSettings` and `ArmModeSettings` field that names its parameter
    (`setting(ros=...)`), so a setting is declared in one place whatever reads it (the command
    line, the node)."""
    out: dict[str, tuple[str, str]] = {}
    for name, cls in _definitions().items():
        for f in dataclasses.fields(cls):
            if f.metadata.get("ros"):
                out[f.metadata["ros"]] = (name, f.name)
    return out


UNSET: dict[type, Any] = {int: 0, float: -1.0, str: ""}
"""A ROS parameter cannot be None: a setting whose default is None ("decided later") is this value
of its type (an int's 0, a float's negative, a str's empty) and reads back as None."""


class Parameter(NamedTuple):
    name: str
    type: type
    default: Any
    description: str
    source: str
    """Where it is defined: `AgentSettings`, `RosSettings`, `EpisodeConfig.max_turns`, ..."""


def _definitions() -> dict[str, type]:

    return {
        "EpisodeConfig": EpisodeConfig,
        "ModelSettings": ModelSettings,
        "ArmModeSettings": ArmModeSettings,
    }


def _pydantic_rows(model: type[BaseModel]) -> list[Parameter]:
    return [
        Parameter(name, type(f.default), f.default, f.description or "", model.__name__)
        for name, f in model.model_fields.items()
    ]


def _shared_row(name: str, cls: type, field: str) -> Parameter:
    f = next(x for x in dataclasses.fields(cls) if x.name == field)
    kind = type_of(f)
    if kind is None:
        raise TypeError(f"{cls.__name__}.{field} has no ROS parameter type (int, float or str)")
    default = f.default if f.default is not None else UNSET[kind]
    unset = "" if f.default is not None else f" (unset: {UNSET[kind]!r})"
    return Parameter(name, kind, default, f.metadata["help"] + unset, f"{cls.__name__}.{field}")


def agent_parameters() -> list[Parameter]:
    """Every parameter of the agent node, each from the one place it is defined."""
    defs = _definitions()
    shared = [_shared_row(n, defs[c], f) for n, (c, f) in shared_parameters().items()]
    return [*_pydantic_rows(AgentSettings), *shared, *_pydantic_rows(RosSettings)]


def agent_defaults() -> dict[str, Any]:
    """Parameter -> default, in the order of `agent_parameters` (what the node declares)."""
    return {p.name: p.default for p in agent_parameters()}


def shared_values(params: dict[str, Any], definition: str) -> dict[str, Any]:
    """The shared settings of `definition` (`ModelSettings`, `EpisodeConfig`) from the node's
    parameters, by their field names; a setting whose default is None reads its `UNSET` value (or
    any negative float) back as None."""
    cls = _definitions()[definition]
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for name, (owner, field) in shared_parameters().items():
        if owner != definition or name not in params:
            continue
        value = params[name]
        if defaults[field] is None:
            unset = value < 0 if isinstance(value, float) else value == UNSET.get(type(value))
            value = None if unset else value
        out[field] = value
    return out


DRIVER_STATUS_MAX_AGE_S = 3.0
"""A driver republishes its status every second; an older one tells nothing (the joint-state check
speaks for a driver that is gone)."""

STOP_CONFIRM_S = 1.0
"""A driver that reports the trajectories it takes and rejects (its status: yam_driver_node) says
within milliseconds (its next control tick, then DDS) whether it took a stop; one that has said
nothing after this long is treated as one that rejected it."""


class _PartSpec:
    def __init__(self, robot: RobotConfig, kin: Kinematics, name: str) -> None:
        part = robot.parts[name]
        self.name = name
        self.joints = list(part.joints)
        self.lower, self.upper = kin.joint_limits(name)
        self.vmax = part.limits.joint_velocity_rad_s
        self.home = np.array(part.home.joints_rad, dtype=float)
        self.home_gripper = part.home.gripper
        self.gripper_vmax = 0.1
        if part.controller is None:
            raise ValueError(
                f"robot {robot.name}: part {name} has no `controller` (ROS 2 trajectory controller)"
            )
        self.topic = trajectory_topic(part.controller)
        g = part.gripper
        self.gripper = g
        self.gripper_topic = trajectory_topic(g.controller) if g is not None and g.controller else None
        if g is not None:
            self.g_joint = g.joints[0]  # the driving joint; the controller couples the others
            self.g_lo = min(g.closed_joint_pos, g.open_joint_pos)
            self.g_hi = max(g.closed_joint_pos, g.open_joint_pos)

    def gripper_position(self, command: float) -> float:
        g = self.gripper
        assert g is not None
        return g.closed_joint_pos + float(np.clip(command, 0, 1)) * (g.open_joint_pos - g.closed_joint_pos)

    def gripper_opening(self, position: float) -> float:
        g = self.gripper
        assert g is not None
        return float(np.clip((position - g.closed_joint_pos) / (g.open_joint_pos - g.closed_joint_pos), 0, 1))
