"""The ROS 2 backend's parameters (the agent node's ROS parameters, same names), one typed
definition, and the limits it works within."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pear_agent.kinematics import Kinematics
from pear_agent.robot_config import RobotConfig
from pear_agent.ros2.graph import trajectory_topic

START_LATENESS_S = 0.25
"""A controller may start a trajectory this much after it was sent (DDS and a busy machine)
before falling behind the reference counts as a stall."""


LIMIT_SLACK_RAD = 1e-3
"""An arm joint this far outside its limits still counts as inside (encoder noise at a stop)."""


class RosSettings(BaseModel):
    """Backend parameters (ROS parameters of the agent node, same names)."""

    model_config = ConfigDict(extra="forbid")

    joint_states_topic: str = "/joint_states"
    joint_state_max_age_s: float = Field(
        0.1, gt=0, description="plan, hold and judge only from joint states younger than this (50 Hz: 0.1)"
    )
    wait_for_fresh_state_s: float = Field(
        0.3, ge=0, description="wait this long for a fresh one, else refuse"
    )
    wait_for_joint_states_s: float = Field(5.0, ge=0, description="stack check: wait this long for them")
    wait_for_controllers_s: float = Field(3.0, ge=0, description="stack check: wait for controller topics")
    controller_manager: str = Field(
        "/controller_manager",
        description="list_controllers is asked here where controller_manager_msgs exists",
    )
    reach_tolerance_rad: float = Field(0.01, gt=0)
    still_velocity_rad_s: float = Field(0.03, gt=0)
    gripper_still_velocity: float = Field(0.004, gt=0, description="gripper joint units per second")
    stall_tracking_error_rad: float = Field(0.3, gt=0, description="tracking error that means a stall")
    settle_timeout_s: float = Field(3.0, gt=0)
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
    estop_topic: str = "/pear/estop"
    estop_service: str = "/pear/stop"
    operator_service: str = "/pear/operator/judge"
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


DRIVER_STATUS_MAX_AGE_S = 3.0
"""A driver republishes its status every second; an older one tells nothing (the joint-state check
speaks for a driver that is gone)."""


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
