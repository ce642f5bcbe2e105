"""What every family of arm tasks shares: a robot from `robots/` (or any YAML), what a task needs
of it, a simulator backend, clip + IK through `ArmEnvironment`, and the scripted expert.

A family of arm tasks (MuJoCo, LIBERO) subclasses `ArmFamily`, lists its `entries` and builds its
`backend(task, robot, render)`; the registry (`pear_agent.loop.registry`) does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pear_agent.loop.arm_environment import ArmEnvironment
from pear_agent.loop.arm_options import ArmOptions
from pear_agent.loop.environment import environment_options
from pear_agent.loop.family_parts import PromptSchema, RlRewards
from pear_agent.loop.registry import NO_ASK, EnvSpec, Family, PolicyAsk, UnknownNameError
from pear_agent.policies.scripted import ScriptedPolicy
from pear_agent.robot.backend import ShapedReward
from pear_agent.robot.config import Requirement, RobotConfig
from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.loader import load_robot

if TYPE_CHECKING:
    from pear_agent.loop.environment import Environment
    from pear_agent.loop.episode import EpisodeResult
    from pear_agent.policies.base import Policy
    from pear_agent.policies.experts import Expert
    from pear_agent.robot.backend import Backend


@dataclass(frozen=True)
class TaskEntry:
    """A task: its backend, what it needs of a robot, and the robot it runs on by default.

    MuJoCo tasks run on any description that has what they need (`requires`); LIBERO tasks only on
    the robot LIBERO mounts (`robots`)."""

    backend: str
    default_robot: str
    requires: Requirement | None = None
    robots: tuple[str, ...] = ()

    def refusal(self, task: str, robot: RobotConfig) -> str | None:
        """Why `robot` cannot do `task`, or None."""
        if self.requires is not None:
            missing = self.requires.missing(robot)
            return f"robot {robot.label} cannot do task {task!r}: {missing}" if missing else None
        if self.robots and robot.name not in {Path(r).stem for r in self.robots}:
            return f"task {task!r} runs only on {[Path(r).stem for r in self.robots]}, not {robot.label}"
        return None


class ArmFamily(Family, RlRewards, PromptSchema):
    """Arm tasks on robots described in YAML: `--robot`, the task's refusal, the scripted expert;
    of the optional parts (`pear_agent.loop.family_parts`), the shaped reward and the action schema."""

    @property
    def entries(self) -> dict[str, TaskEntry]:
        raise NotImplementedError

    def entry(self, task: str) -> TaskEntry:
        """The entry of a task name as the family resolves it (a family may decorate names)."""
        return self.entries[task]

    def task_names(self) -> list[str]:
        return list(self.entries)

    def owns(self, task: str) -> bool:
        return task in self.entries

    options_type: type = ArmOptions

    def options(self, args: Any) -> dict[str, Any]:
        robot = self.parse(args).robot
        return {"robot": robot} if robot else {}

    def bench_options(self, args: Any) -> dict[str, Any]:
        return {}  # the robot travels as the bench's own `robot` field

    def backend(self, task: str, robot: RobotConfig, render: bool = True, *, pooled: bool = False) -> Backend:
        """The simulator backend of `task` on `robot`; refused (UnknownNameError) when the robot
        lacks what the task needs. `pooled`: one of many in this process (episodes in flight
        together), so it may share what the family shares between them (MuJoCo: a renderer)."""
        refusal = self.entry(task).refusal(task, robot)
        if refusal:
            raise UnknownNameError(refusal)
        return self.build_backend(task, robot, render, pooled)

    def build_backend(self, task: str, robot: RobotConfig, render: bool, pooled: bool = False) -> Backend:
        raise NotImplementedError

    def make(self, spec: EnvSpec) -> Environment:
        robot = load_robot(spec.option("robot") or self.entry(spec.task).default_robot)
        # cameras are rendered only when the model is sent images (video frames render anyway)
        backend = self.backend(
            spec.task, robot, spec.render and spec.loop.observation in ("both", "images"), pooled=True
        )
        try:
            kin = Kinematics(robot)
        except BaseException:
            backend.close()
            raise
        return ArmEnvironment(backend, kin, **environment_options(spec.loop))

    def expert(self, task: str) -> Expert | None:
        """The task's scripted expert, or None: a family names its own experts (MuJoCo's task
        classes point at theirs, LIBERO's lives beside its adapter)."""
        return None

    def has_default_policy(self, task: str) -> bool:
        return self.expert(task) is not None

    def default_policy(self, task: str, ask: PolicyAsk = NO_ASK) -> Policy:
        return ScriptedPolicy(
            task, action_noise_cm=ask.action_noise_cm, seed=ask.seed, expert=self.expert(task)
        )

    def rewards(self, env: Environment, result: EpisodeResult) -> tuple[float, float | None]:
        backend = getattr(env, "backend", None)  # an arm environment's
        value = backend.shaped_reward() if isinstance(backend, ShapedReward) else None  # or none defined
        return (1.0 if result.success else 0.0), (None if value is None else float(value))

    def prompt_schema(self, env: Environment) -> tuple[str, dict[str, Any]]:
        return "action schema", env.response_schema()
