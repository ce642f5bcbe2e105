"""Robot descriptions: one YAML file per robot in `robots/`, loaded into typed models.

A description is the single place where frames, units, limits and model files are stated; the
prompt, the kinematics, the simulator and the ROS 2 backend all read it from here. This module is
the schema only: reading a file (its errors naming the file and key, homes solved) is
`pear_agent.robot.loader`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

from pydantic import (
    Discriminator,
    Field,
    StrictInt,
    Tag,
    field_validator,
    model_validator,
)

from pear_agent.robot.description_files import Quat, Range, Vec3, resolve_model_path
from pear_agent.robot.description_files import StrictModel as _Strict

REPO_ROOT = Path(__file__).resolve().parents[2]
ROBOTS_DIR = REPO_ROOT / "robots"


class RobotConfigError(ValueError):
    """A robot description that cannot be used; the message names the file, the key and why."""


class FrameConvention(_Strict):
    origin: str = Field(description="where the base frame is, in words (the prompt quotes it)")
    x: str = Field(description="where +x points, in words")
    y: str = Field(description="where +y points, in words")
    z: str = Field(description="where +z points, in words")
    orientation: str = Field(
        "roll, pitch, yaw in radians: extrinsic rotations about the fixed x, then y, then z axes "
        "(R = Rz(yaw) Ry(pitch) Rx(roll)); reported angles wrap to (-pi, pi]",
        description="the orientation convention, in words (the prompt quotes it)",
    )


class Attachment(_Strict):
    """A second model file attached to a body of the main one (e.g. a gripper on a flange)."""

    file: str = Field(
        description="the attached MJCF file: pkg://<distribution>/<path> or a path beside the YAML"
    )
    body: str = Field(description="the body of that file to attach (with everything below it)")
    parent_body: str = Field(description="the body of the main model it is fixed to")
    prefix: str = Field("", description="put before every name of the attached file (e.g. `gripper_`)")
    pos_m: Vec3 = Field([0.0, 0.0, 0.0], description="its position in the parent body's frame")
    quat_wxyz: Quat = Field([1.0, 0.0, 0.0, 0.0], description="its orientation in the parent body's frame")
    angle_unit: Literal["file", "radian", "degree"] = Field(
        "file",
        description="angle unit of the attached file's numbers; 'file' = what its <compiler> says "
        "(MJCF default: degree). robosuite's grippers state none but are written in radians.",
    )


class ModelFiles(_Strict):
    mjcf: str = Field(
        description="MJCF file; pkg://<distribution>/<path> or a path relative to the YAML's own folder "
        "(robots/ for the shipped ones) that stays inside it"
    )
    attachments: list[Attachment] = Field(
        [], description="more files fixed to bodies of the main one, in order"
    )
    remove_bodies: list[str] = Field(
        [],
        description="bodies of the model (after the attachments) removed with everything below "
        "them: a maker's scene's own task objects (gym-aloha's red transfer cube), which would "
        "otherwise stay in every task's scene beside the task's objects",
        examples=[["box"]],
    )


class EndEffector(_Strict):
    name: str = Field(description="a name for the tool point")
    parent_body: str = Field(description="the body it is fixed to (of the main file or an attachment)")
    pos_m: Vec3 = Field([0.0, 0.0, 0.0], description="its position in the parent body's frame")
    quat_wxyz: Quat = Field(
        [1.0, 0.0, 0.0, 0.0],
        description="its orientation: z out of the fingers, y along their closing (for a thumb closing "
        "against fingers, y from the thumb towards the fingers)",
    )
    description: str = Field("the tool point between the gripper fingers", description="for the prompt")


class ActuatorTarget(_Strict):
    """An actuator of the model named by what it drives (makers' files often leave actuators unnamed)."""

    joint: str | None = Field(None, description="the joint the actuator drives", examples=["elbow_joint"])
    tendon: str | None = Field(None, description="the tendon the actuator pulls", examples=["split"])

    @model_validator(mode="after")
    def _one(self) -> ActuatorTarget:
        if (self.joint is None) == (self.tendon is None):
            raise ValueError("give exactly one of joint or tendon")
        return self


def _actuator_ref_kind(v: object) -> str:
    if isinstance(v, dict | ActuatorTarget):
        return "<target>"
    return "<index>" if isinstance(v, int) and not isinstance(v, bool) else "<name>"


ActuatorRef = Annotated[
    Annotated[StrictInt, Tag("<index>")]
    | Annotated[str, Tag("<name>")]
    | Annotated[ActuatorTarget, Tag("<target>")],
    Discriminator(_actuator_ref_kind),
    Field(
        description="an actuator of the model file: its name, its index (0-based, in the order "
        "MuJoCo compiles them: the main file's, then each attachment's), or {joint: <name>} / "
        "{tendon: <name>} for the one that drives it"
    ),
]


class GripperActuator(_Strict):
    """One actuator of the model file that drives the gripper, with its ctrl at closed and open."""

    name: ActuatorRef
    ctrl_closed: float = Field(description="its ctrl when the gripper is closed")
    ctrl_open: float = Field(description="its ctrl when the gripper is open")

    @model_validator(mode="after")
    def _distinct(self) -> GripperActuator:
        if self.ctrl_closed == self.ctrl_open:
            raise ValueError(f"actuator {self.name}: ctrl_closed equals ctrl_open ({self.ctrl_open})")
        return self


class Pad(_Strict):
    """A box a finger collides through, in place of the finger body's own collision geoms."""

    body: str = Field(description="the finger body the box is fixed to")
    pos_m: Vec3 = Field(description="the box's centre in the body's frame")
    half_size_m: Vec3 = Field(description="half the box's extent along the body's x, y, z")
    friction: float = Field(1.5, gt=0, description="sliding friction coefficient", examples=[1.0])


class GripperSim(_Strict):
    """Overrides of the gripper's drive and contacts in simulation; unset keeps the file's values
    (or, for an actuator the simulator creates, its defaults: kp 3000, kv 150, force limit 60)."""

    kp: float | None = Field(
        None,
        gt=0,
        description="position gain (force per unit of ctrl): for a servo whose ctrl is in joint units",
        examples=[4.0],
    )
    kv: float | None = Field(None, ge=0, description="velocity damping of the servo", examples=[20.0])
    force_limit: float | None = Field(
        None,
        gt=0,
        description="the most force (N, or N m for a hinge) each actuator may apply",
        examples=[20.0],
    )
    pads: list[Pad] = Field(
        default_factory=list,
        description="finger collision boxes: each named body collides through its box only (MuJoCo "
        "collides a mesh by its convex hull, which can fill the gap between L-shaped fingers)",
    )
    armature: float | None = Field(
        None,
        ge=0,
        description="the finger drive's rotor inertia as seen by each finger joint and mimic joint "
        "(kg m^2 for a hinge, kg for a slide); unset: the file's. Makers' files often leave it out: "
        "fingers of a few grams held by soft couplings then flutter as they close and knock the "
        "object away",
        examples=[0.002],
    )
    contact_time_s: float | None = Field(
        None,
        gt=0,
        description="time constant of the fingers' contacts (MuJoCo's solref, damping ratio 1; it "
        "outweighs the touched object's): smaller is stiffer, down to two physics steps; unset: "
        "MuJoCo's 0.02 s, under which fingers squeezing at tens of N sink millimetres into the "
        "object and it rolls out of the grip when carried",
        examples=[0.004],
    )
    friction: float | None = Field(
        None,
        gt=0,
        description="sliding friction coefficient of the fingers' contacts (every colliding geom the "
        "finger and mimic joints move, pads included); it wins over the touched object's (MuJoCo "
        "otherwise takes the larger of the two); unset: the file's (pads: their own `friction`)",
        examples=[1.0],
    )
    frictionloss: float | None = Field(
        None,
        ge=0,
        description="dry friction of each finger and mimic joint (N for a slide, N m for a hinge); "
        "unset: the file's",
        examples=[0.1],
    )


class JointRange(_Strict):
    closed: float = Field(description="the joint's position when closed")
    open: float = Field(description="the joint's position when open")


class Gripper(_Strict):
    """A gripper as built: the finger joints whose positions define the measured opening, the
    linkage (mimic) joints the model couples to them, and the actuators that drive it.

    The common case stays short: one actuator (`actuator` + `ctrl_closed`/`ctrl_open`) and one
    closed/open position for every finger joint. Grippers with one actuator per finger (the
    Robotiq 2F-85/140 and Franka hand in robosuite) list `actuators`; fingers that move the
    opposite way give their own positions in `joint_positions`. A model that ships no actuator
    (the i2rt YAM) says `create_actuator: true` and the simulator adds one (a tendon averaging the
    finger joints); otherwise every named actuator must exist in the model file."""

    description: str = Field(
        "0 = closed, 1 = open; the value you give is the absolute command", description="for the prompt"
    )
    joints: list[str] = Field(min_length=1, description="finger joints: their positions give the opening")
    mimic_joints: list[str] = Field(
        default_factory=list, description="linkage joints the model's own couplings move (not measured)"
    )
    actuator: ActuatorRef | None = Field(
        None, description="the one sim actuator (name, index or {joint:}), driven with ctrl in [closed, open]"
    )
    ctrl_closed: float = Field(0.0, description="`actuator`'s ctrl when closed")
    ctrl_open: float = Field(1.0, description="`actuator`'s ctrl when open")
    actuators: list[GripperActuator] = Field(
        default_factory=list,
        description="several actuators, each with its own ctrl range (instead of `actuator`)",
    )
    create_actuator: bool = Field(
        False, description="the model has no gripper actuator: the simulator adds `actuator` itself"
    )
    closed_joint_pos: float = Field(0.0, description="finger joint position when fully closed")
    open_joint_pos: float = Field(description="finger joint position when fully open")
    joint_positions: dict[str, JointRange] = Field(
        default_factory=dict, description="per-joint closed/open positions, overriding the two above"
    )
    fingertip_below_tcp_cm: float = Field(
        1.0, ge=0.0, description="how far the fingertips reach below the tool point (experts keep clear)"
    )
    max_opening_cm: float | None = Field(
        None,
        gt=0,
        description="distance between the pads when open (experts do not try what is wider; one "
        "that opens wide enough to straddle a cube along the conveyor belt catches it that way)",
    )
    move_time_s: float = Field(
        0.0,
        ge=0.0,
        le=10.0,
        description="the sim ramps the actuators' ctrl from open to closed over this time (0 = a step); "
        "robosuite's Robotiq fingers snap unevenly on a step and knock the object away",
        examples=[0.8],
    )
    still_velocity: float = Field(
        0.004,
        gt=0.0,
        description="finger joint speed (m/s or rad/s) under which the gripper is at rest",
        examples=[0.01],
    )
    controller: str | None = Field(None, description="ROS 2 trajectory controller for the gripper")
    sim: GripperSim | None = Field(
        None, description="the simulator's gripper drive and contacts: gains, force limit, pads, inertia"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Gripper:
        if self.actuator is not None and self.actuators:
            raise ValueError("give either actuator (one) or actuators (a list), not both")
        if self.create_actuator and not isinstance(self.actuator, str):
            raise ValueError("create_actuator needs the name of the actuator to create in `actuator`")
        if self.actuator is not None and self.ctrl_closed == self.ctrl_open:
            raise ValueError(f"ctrl_closed equals ctrl_open ({self.ctrl_open}): the gripper could not move")
        names = [a.name for a in self.actuators]
        if len(set(names)) != len(names):
            raise ValueError(f"actuators lists a name twice: {names}")
        unknown = set(self.joint_positions) - set(self.joints)
        if unknown:
            raise ValueError(f"joint_positions names joints not in gripper.joints: {sorted(unknown)}")
        both = set(self.joints) & set(self.mimic_joints)
        if both:
            raise ValueError(f"joints {sorted(both)} are both finger joints and mimic_joints")
        if len(set(self.joints)) != len(self.joints):
            raise ValueError(f"joints lists a joint twice: {self.joints}")
        for j in self.joints:
            closed, opened = self.joint_range(j)
            if closed == opened:
                raise ValueError(f"joint {j}: open position equals closed position ({opened})")
        return self

    def joint_range(self, joint: str) -> tuple[float, float]:
        """(closed, open) position of a finger joint."""
        if joint in self.joint_positions:
            r = self.joint_positions[joint]
            return r.closed, r.open
        return self.closed_joint_pos, self.open_joint_pos

    @property
    def drives(self) -> list[GripperActuator]:
        """Every actuator that drives the gripper, with its ctrl range."""
        if self.actuators:
            return list(self.actuators)
        if self.actuator is not None:
            return [
                GripperActuator(name=self.actuator, ctrl_closed=self.ctrl_closed, ctrl_open=self.ctrl_open)
            ]
        return []


class StepLimits(_Strict):
    workspace_cm: dict[Literal["x", "y", "z"], Range] = Field(
        description="the box the tool point must stay in (targets outside are clipped into it)"
    )
    max_position_step_cm: float = Field(gt=0, description="the most the tool point moves in one turn")
    max_rotation_step_rad: float = Field(gt=0, description="the most it turns in one turn, per axis")
    joint_velocity_rad_s: float = Field(gt=0, description="joint speed cap of every motion")
    joint_limits_rad: dict[str, Range] = Field(
        default_factory=dict,
        description="tighter joint limits than the model's, by joint name",
        examples=[{"Actuator1": [-3.14, 3.14]}],
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


class ToolPose(_Strict):
    """A pose of a part's tool point in the base frame, in the protocol's units."""

    position_cm: Vec3 = Field(description="x, y, z of the tool point", examples=[[42.0, 0.0, 25.0]])
    orientation_rad: Vec3 = Field(
        [math.pi, 0.0, 0.0],
        description="roll, pitch, yaw (default: pointing straight down)",
        examples=[[3.14159, 0.0, 1.5708]],
    )


class Home(_Strict):
    """Where a part starts each episode: joint values, or a tool pose that IK solves when the file
    is loaded (`pear-agent robots FILE --suggest-home` prints the joint values to paste instead)."""

    joints_rad: list[float] | None = Field(None, description="one value per joint, in the joints' order")
    tool_pose: ToolPose | None = Field(None, description="the tool point's pose, solved by IK at load")
    gripper: float = Field(1.0, ge=0.0, le=1.0, description="0 = closed .. 1 = open")

    @model_validator(mode="after")
    def _one(self) -> Home:
        if (self.joints_rad is None) == (self.tool_pose is None):
            raise ValueError("give exactly one of joints_rad or tool_pose")
        return self


PerJoint = float | list[float]


class ArmSim(_Strict):
    """The simulator's joint position servos and joint dynamics.

    Three ways to drive the joints: `actuators` lists the model's own position actuators (in joint
    order; each by name, index or {joint: ...}) and the sim drives those, with `kp`/`kv` as their
    gains if given; without `actuators`, `kp` and `kv` make the sim add a servo per joint; with
    neither, the sim drives the model's own position servo of each joint (found by its joint).
    `frictionloss`, `damping`, `armature` override the file's joint values (one number for every
    joint, or one per joint): a maker's file tuned for torque control may carry joint friction that
    the servos cannot overcome."""

    kp: list[float] | None = Field(None, description="position gain per joint (N m/rad)")
    kv: list[float] | None = Field(None, description="velocity gain per joint (N m s/rad)")
    actuators: list[ActuatorRef] = Field(
        default_factory=list, description="the model's own position actuators of the joints, in order"
    )
    frictionloss: PerJoint | None = Field(
        None, description="joint dry friction (N m); unset: the file's", examples=[0.5]
    )
    damping: PerJoint | None = Field(
        None, description="joint damping (N m s/rad); unset: the file's", examples=[[2.0, 2.0, 1.0, 0.5]]
    )
    armature: PerJoint | None = Field(
        None, description="joint armature (kg m^2); unset: the file's", examples=[0.01]
    )

    @model_validator(mode="after")
    def _gains(self) -> ArmSim:
        if (self.kp is None) != (self.kv is None):
            raise ValueError("give kp and kv together")
        for attr in ("frictionloss", "damping", "armature"):
            v = getattr(self, attr)
            if v is not None and min(v if isinstance(v, list) else [v]) < 0:
                raise ValueError(f"{attr} must not be negative")
        return self

    def per_joint(self, attr: str, n: int) -> list[float] | None:
        """`frictionloss`/`damping`/`armature` as one value per joint (None: keep the file's)."""
        v = getattr(self, attr)
        if v is None:
            return None
        return [float(v)] * n if not isinstance(v, list) else [float(x) for x in v]


class SimOptions(_Strict):
    """The few MuJoCo options a robot may need; unset keeps the runtime's defaults (timestep
    0.002 s, implicitfast, 2 noslip iterations) or, for cone and impratio, the robot files' own."""

    timestep_s: float | None = Field(None, gt=0, le=0.01, description="physics step", examples=[0.001])
    integrator: Literal["Euler", "RK4", "implicit", "implicitfast"] | None = Field(
        None, description="MuJoCo's integrator", examples=["implicitfast"]
    )
    cone: Literal["pyramidal", "elliptic"] | None = Field(None, description="friction cone")
    impratio: float | None = Field(None, ge=1, description="frictional-to-normal constraint impedance ratio")
    noslip_iterations: int | None = Field(
        None, ge=0, le=100, description="noslip solver iterations", examples=[5]
    )
    iterations: int | None = Field(None, ge=1, le=1000, description="main solver iterations", examples=[100])
    exclude_contacts: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list,
        description="pairs of bodies that never collide (e.g. a base welded to the world and its first "
        "link, whose meshes overlap at every pose: MuJoCo filters only parent-child pairs)",
    )


class Part(_Strict):
    kind: Literal["arm"] = Field("arm", description="what the part is (arms only, so far)")
    description: str = Field(description="for the prompt: what `position` and `orientation` mean for it")
    joints: list[str] = Field(
        min_length=1, description="the arm's joints from the base out (the model's names)"
    )
    end_effector: EndEffector = Field(description="the tool point whose pose the protocol moves")
    gripper: Gripper | None = Field(None, description="its gripper, if it has one")
    home: Home = Field(description="where it starts each episode")
    limits: StepLimits = Field(description="safety limits, applied on every backend")
    sim: ArmSim | None = Field(None, description="how the simulator drives the joints")
    controller: str | None = Field(None, description="ROS 2 joint_trajectory_controller name")

    @model_validator(mode="after")
    def _shapes(self) -> Part:
        n = len(self.joints)
        if self.home.joints_rad is not None and len(self.home.joints_rad) != n:
            raise ValueError(f"home.joints_rad has {len(self.home.joints_rad)} values for {n} joints")
        if self.sim and self.sim.kp is not None and (len(self.sim.kp) != n or len(self.sim.kv or []) != n):
            raise ValueError(f"sim.kp and sim.kv need one gain per joint ({n})")
        if self.sim and self.sim.actuators and len(self.sim.actuators) != n:
            raise ValueError(f"sim.actuators needs one actuator per joint ({n}), or none")
        for attr in ("frictionloss", "damping", "armature"):
            v = getattr(self.sim, attr, None)
            if isinstance(v, list) and len(v) != n:
                raise ValueError(f"sim.{attr} needs one value per joint ({n}), or one number for all")
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

    pos_m: Vec3 = Field(description="its position: in the base frame, or in `mount_body`'s frame")
    look_at_m: Vec3 | None = Field(None, description="a point it looks at, +z up (fixed cameras)")
    mount_body: str | None = Field(None, description="the body it rides on (e.g. a wrist camera)")
    quat_wxyz: Quat | None = Field(
        None, description="its orientation (MuJoCo camera: looks along -z, image up is +y)"
    )
    fovy_deg: float = Field(45.0, gt=0.0, lt=180.0, description="vertical field of view")

    @model_validator(mode="after")
    def _placement(self) -> CameraSim:
        if (self.look_at_m is None) == (self.quat_wxyz is None):
            raise ValueError("give exactly one of look_at_m or quat_wxyz")
        if self.look_at_m is not None and math.dist(self.look_at_m, self.pos_m) < 1e-3:
            raise ValueError("look_at_m is the camera's own position: it would look nowhere")
        if self.quat_wxyz is not None and math.hypot(*self.quat_wxyz) < 1e-6:
            raise ValueError("quat_wxyz is zero: not a rotation")
        return self


class Camera(_Strict):
    description: str = Field(description="for the prompt: where it looks from, what is left and right")
    width: int = Field(256, gt=0, le=4096, description="image width (px)")
    height: int = Field(256, gt=0, le=4096, description="image height (px)")
    sim: CameraSim | None = Field(None, description="where the simulator puts it (none: not simulated)")
    topic: str | None = Field(None, description="ROS 2 image topic on the real robot")


class Table(_Strict):
    """The table the tasks use, in the base frame. Tasks place their objects inside `task_area_cm`
    (scaled from the Panda numbers they were written for) at `surface_z_cm`. Every key defaults
    from the arm parts' workspace boxes (see `RobotConfig.table_or_default`)."""

    surface_z_cm: float | None = Field(None, description="height of the table top in the base frame")
    task_area_cm: dict[Literal["x", "y"], Range] | None = Field(
        None, description="where tasks put objects (default: the middle of the workspace boxes)"
    )
    center_cm: Annotated[list[float], Field(min_length=2, max_length=2)] | None = Field(
        None, description="x, y of the table's centre (default: the workspace boxes' centre)"
    )
    half_size_cm: Annotated[list[float], Field(min_length=2, max_length=2)] | None = Field(
        None, description="half its extent in x, y (default: the workspace boxes + 10 cm)"
    )

    @field_validator("task_area_cm")
    @classmethod
    def _ordered(cls, v: dict[str, list[float]] | None) -> dict[str, list[float]] | None:
        if v is None:
            return v
        missing = {"x", "y"} - set(v)
        if missing:
            raise ValueError(f"task_area_cm needs x and y; missing {sorted(missing)}")
        for axis, (lo, hi) in v.items():
            if not lo < hi:
                raise ValueError(f"task_area_cm.{axis}: lower bound {lo} is not below upper {hi}")
        return v

    @field_validator("half_size_cm")
    @classmethod
    def _positive(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and min(v) <= 0:
            raise ValueError("half_size_cm must be positive")
        return v


class Render(_Strict):
    """What the cameras do not show: e.g. robosuite's visual markers (site group 1)."""

    hide_geom_groups: list[Annotated[int, Field(ge=0, le=5)]] = Field(
        [], description="geom groups not rendered", examples=[[3]]
    )
    hide_site_groups: list[Annotated[int, Field(ge=0, le=5)]] = Field(
        [], description="site groups not rendered"
    )


class RobotConfig(_Strict):
    name: str = Field(description="the robot's name (logs, reports)")
    description: str = Field(description="for the prompt: what the robot is and how it stands")
    frame: FrameConvention = Field(description="the base frame every pose is given in")
    model: ModelFiles = Field(description="the model files MuJoCo and the kinematics load")
    parts: dict[str, Part] = Field(min_length=1, description="the parts the protocol moves, by name")
    cameras: dict[str, Camera] = Field({}, description="the cameras the model sees, by name")
    table: Table = Field(Table(), description="where the tasks put their objects")
    render: Render = Field(Render(), description="what the cameras do not show")
    sim: SimOptions = Field(SimOptions(), description="simulator options for this robot")
    max_chunk: int = Field(
        1,
        ge=1,
        le=16,
        description="the most steps one reply's action may carry (a chunk; `--max-chunk` overrides); "
        "1: one action per reply",
        examples=[4],
    )
    source: Path | None = Field(None, exclude=True)

    @field_validator("parts", "cameras")
    @classmethod
    def _identifiers(cls, v: dict) -> dict:
        for key in v:
            if not key.isidentifier():
                raise ValueError(f"name {key!r} must be an identifier (letters, digits, _)")
        return v

    def resolve(self, ref: str, key: str = "model.mjcf") -> Path:
        """A model file named in the description, checked to stay where it may (see
        `resolve_model_path`); errors name this file and `key`."""
        base = self.source.parent if self.source else ROBOTS_DIR
        try:
            return resolve_model_path(ref, base, RobotConfigError)
        except RobotConfigError as exc:
            raise RobotConfigError(f"{self.label}: key {key}: {exc}") from None

    def model_files(self) -> list[tuple[str, str]]:
        """(key, reference) of every model file the description names."""
        out = [("model.mjcf", self.model.mjcf)]
        out += [(f"model.attachments.{i}.file", a.file) for i, a in enumerate(self.model.attachments)]
        return out

    @property
    def all_arm_joints(self) -> list[str]:
        return [j for p in self.parts.values() for j in p.joints]

    @property
    def label(self) -> str:
        """The file the description came from (or its name): what every error names."""
        return str(self.source) if self.source else self.name

    def gripper_parts(self) -> list[str]:
        return [n for n, p in self.parts.items() if p.kind == "arm" and p.gripper is not None]

    def table_or_default(self) -> Table:
        """The `table` section with every missing key derived from the workspace boxes: the task
        area is the middle of the union box in x (its outer 60%) and y (the middle 55%), the
        surface is at the lowest workspace height minus 0.5 cm, the table covers the box + 10 cm."""
        boxes = [p.limits.workspace_cm for p in self.parts.values()]
        x = (min(b["x"][0] for b in boxes), max(b["x"][1] for b in boxes))
        y = (min(b["y"][0] for b in boxes), max(b["y"][1] for b in boxes))
        z0 = min(b["z"][0] for b in boxes)
        t = self.table
        area = t.task_area_cm or {
            "x": [x[0] + 0.35 * (x[1] - x[0]), x[0] + 0.75 * (x[1] - x[0])],
            "y": [y[0] + 0.225 * (y[1] - y[0]), y[1] - 0.225 * (y[1] - y[0])],
        }
        return Table(
            surface_z_cm=t.surface_z_cm if t.surface_z_cm is not None else z0 - 0.5,
            task_area_cm=area,
            center_cm=t.center_cm or [(x[0] + x[1]) / 2, (y[0] + y[1]) / 2],
            half_size_cm=t.half_size_cm or [(x[1] - x[0]) / 2 + 10.0, (y[1] - y[0]) / 2 + 10.0],
        )


class Requirement(NamedTuple):
    """What a task needs of a robot description: `arms_with_gripper` arm parts with a gripper."""

    arms_with_gripper: int

    def describe(self) -> str:
        n = self.arms_with_gripper
        return "one arm part with a gripper" if n == 1 else f"{n} arm parts with grippers"

    def missing(self, robot: RobotConfig) -> str | None:
        """None if the robot has what the task needs, else what it lacks (one phrase)."""
        have = robot.gripper_parts()
        if len(have) >= self.arms_with_gripper:
            return None
        parts = ", ".join(
            f"{n} ({'arm with gripper' if n in have else 'arm without gripper'})" for n in robot.parts
        )
        return f"it needs {self.describe()}; {robot.label} has {len(have)}: {parts}"


ONE_ARM = Requirement(1)
TWO_ARMS = Requirement(2)


def task_point_cm(robot: RobotConfig, part: str) -> tuple[float, float] | None:
    """The middle of the task area's part inside the part's workspace box (None: they miss)."""
    table, box = robot.table_or_default(), robot.parts[part].limits.workspace_cm
    x0, x1 = max(table.task_area_cm["x"][0], box["x"][0]), min(table.task_area_cm["x"][1], box["x"][1])
    y0, y1 = max(table.task_area_cm["y"][0], box["y"][0]), min(table.task_area_cm["y"][1], box["y"][1])
    return None if x0 >= x1 or y0 >= y1 else ((x0 + x1) / 2, (y0 + y1) / 2)
