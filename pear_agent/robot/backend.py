"""What a robot must offer the turn loop, in simulation or on hardware.

The loop speaks joint targets and observations; a backend owns physics, rendering, controllers and
task success. Simulators implement it in `sim_adapters/`, the real robot in `pear_agent.ros2`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from pear_agent.robot.config import RobotConfig

OutcomeStatus = Literal["reached", "blocked", "timeout", "stopped", "ik_failed", "refused"]


@dataclass
class Observation:
    joints_rad: dict[str, np.ndarray]
    gripper: dict[str, float]
    """Measured opening per part, 0 = closed .. 1 = open."""
    images: dict[str, np.ndarray]
    """Camera name -> H x W x 3 uint8 RGB."""
    time_s: float
    success: bool = False
    privileged: dict[str, Any] = field(default_factory=dict)
    """Simulator-only facts for scripted experts; never shown to a model."""


@dataclass
class ControlFrame:
    """What the simulation holds at one instant of a move, recorded at the control rate when an
    episode asks for it (`--record-fps`): the measured and the commanded joints, the cameras."""

    time_s: float
    joints_rad: dict[str, np.ndarray]
    joint_velocity_rad_s: dict[str, np.ndarray]
    gripper: dict[str, float]
    """Measured opening per part with a gripper, 0 = closed .. 1 = open."""
    command_joints_rad: dict[str, np.ndarray]
    """The controller's setpoint at this instant (absolute joint targets, the trajectory's point)."""
    command_gripper: dict[str, float]
    """The gripper command (0..1) in force, per part with a gripper."""
    images: dict[str, np.ndarray]
    """Camera name -> H x W x 3 uint8 RGB."""


@dataclass
class PartCommand:
    joints_rad: np.ndarray | None = None
    gripper: float | None = None
    press: bool = False
    """Keep driving toward the target through contact for the move's time budget instead of
    ending `blocked` on a stall (only a backend whose `honours_press` is true is given it)."""


@dataclass
class Outcome:
    status: OutcomeStatus
    detail: str = ""
    duration_s: float = 0.0
    blocked_joints: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.status}: {self.detail}" if self.detail else self.status


TASK_SUCCESS = "task_success"
"""The privileged fact a simulator adds beside its task's facts: whether the task's own success
check holds now (a scripted expert claims done only when it does)."""


@dataclass(frozen=True)
class TaskInfo:
    name: str
    instruction: str
    max_turns: int


FrameSink = Callable[[np.ndarray], None]


class EpisodeAborted(Exception):
    """Raised by `Backend.reset` when the episode ends before the first decision (e.g. a stack check
    failed or the home move was e-stopped). The loop ends the episode with end_reason `status`
    ("stopped" or "refused") and `detail`, without calling the policy."""

    def __init__(self, status: str, detail: str = "") -> None:
        super().__init__(f"{status}: {detail}" if detail else status)
        self.status = status
        self.detail = detail


class Backend(Protocol):
    robot: RobotConfig
    task: TaskInfo

    def reset(self, seed: int) -> Observation: ...

    def observe(self, render: bool = True) -> Observation: ...

    def execute(self, commands: dict[str, PartCommand]) -> Outcome: ...

    def advance(self, duration_s: float) -> None:
        """Let time pass with the last command still in force (realtime mode: the world moves
        while the model thinks). A real robot's clock advances by itself: a no-op there."""
        ...

    def set_frame_sink(self, sink: FrameSink | None, fps: float = 10.0) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


# -- optional abilities: a backend that has one offers it; the arm environment asks with isinstance.
# (Python 3.11 finds a member as getattr does, so a wrapper delegating by __getattr__, such as the
# twin replay's StartedAt, offers what it wraps; from 3.12 isinstance reads members statically.)
@runtime_checkable
class PressAware(Protocol):
    """A move may carry `press` (the gripper keeps squeezing, ending `blocked` on a stall) when
    `honours_press` is true; the parser refuses it otherwise."""

    honours_press: bool


@runtime_checkable
class RunHeaderSource(Protocol):
    """Adds to a run's header (a real robot: its arm mode and speed scale)."""

    def run_header(self) -> dict[str, Any]: ...


@runtime_checkable
class ActionPreview(Protocol):
    """Shown each motion before it moves (a real robot's step mode): what the model asked, what is
    left of it after clipping, and the clipping's notes."""

    def preview_action(self, asked: str, clipped: str, notes: list[str]) -> None: ...


@runtime_checkable
class Perturbed(Protocol):
    """The perturbation the episode's reset drew (None or empty: none), recorded in its results."""

    perturbation: dict[str, Any] | None


@runtime_checkable
class SetpointControl(Protocol):
    """Runs joint setpoints at the control rate (a LeRobot policy's actions) and reports the frame
    a policy sees between them."""

    def control_frame(self) -> ControlFrame: ...

    def execute_setpoint(self, commands: dict[str, PartCommand], duration_s: float) -> Outcome: ...


@runtime_checkable
class ChunkExecution(Protocol):
    """Runs a reply's steps as one motion: (the outcome, the steps reached). Without it the loop
    runs them one `execute` after another, stopping at the first miss."""

    def execute_chunk(self, steps: list[dict[str, PartCommand]]) -> tuple[Outcome, int]: ...


@runtime_checkable
class SimulationClock(Protocol):
    """A simulator's state whose `time` is the simulation's clock now (MuJoCo's `MjData`)."""

    data: Any


@runtime_checkable
class ControlRecording(Protocol):
    """Records the simulation at `fps` during every move (`--record-fps`); None stops."""

    def start_recording(self, fps: float | None) -> None: ...


@runtime_checkable
class SuccessJudge(Protocol):
    """Judges an ended episode itself (hardware: the operator); None: no verdict."""

    def judge_success(self, end_reason: str, detail: str) -> bool | None: ...


@runtime_checkable
class ShapedReward(Protocol):
    """A dense reward beside success (None: the task defines none)."""

    def shaped_reward(self) -> float | None: ...
