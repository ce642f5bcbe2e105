"""`pear-agent robots --check` in MuJoCo: a robot description's scene for one task, built and tried.

The MuJoCo family's `RobotCheck` part (`pear_agent.loop.family_parts`): the gripper closes and opens,
each gripper part grasps the task's 4 cm cube and carries it, every camera renders something
sensible. `pear_agent.cli.robots_check` asks for it through the registry (it imports no adapter).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from pear_agent.loop.registry import make_backend
from pear_agent.robot.backend import PartCommand
from pear_agent.robot.config import RobotConfig, task_point_cm
from pear_agent.robot.kinematics import Kinematics, rpy_to_matrix
from sim_adapters.mujoco.scene import camera_name, ee_site_name
from sim_adapters.mujoco.tasks.base import finger_geoms, set_free_pose
from sim_adapters.mujoco.tasks.pick_place import CUBE_HALF_M


def check_scene(task: str, robot: RobotConfig) -> tuple[list[str], list[str]]:
    """(problems, notes) of `robot` in `task`'s MuJoCo scene: gripper, grasp and carry, cameras."""
    problems: list[str] = []
    notes: list[str] = []
    backend = make_backend(task, robot, render=True)
    try:
        backend.reset(0)
        for name, io in backend.parts.items():
            if io.gripper is None:
                continue
            backend.execute({name: PartCommand(gripper=0.0)})
            closed = io.gripper_opening(backend.data)
            backend.execute({name: PartCommand(gripper=1.0)})
            opened = io.gripper_opening(backend.data)
            if closed > 0.2 or opened < 0.8:
                problems.append(
                    f"{name}: gripper measured {closed:.2f} when closed and {opened:.2f} when open "
                    "(want < 0.2 and > 0.8: check its actuators, joints and closed/open positions)"
                )
            else:
                notes.append(f"{name}: gripper closes ({closed:.2f}) and opens ({opened:.2f})")
        for name in robot.gripper_parts():
            problem, note = _grasp_and_carry(backend, robot, name)
            if problem:
                problems.append(f"{name}: {problem}")
            else:
                notes.append(f"{name}: {note}")
        backend.reset(0)
        for cam_name, cam in robot.cameras.items():
            if cam.sim is None:
                continue
            cam_problems, cam_notes = _check_camera(backend, robot, cam_name)
            problems += [f"camera {cam_name}: {p}" for p in cam_problems]
            notes.append(f"camera {cam_name}: {', '.join(cam_notes) or 'ok'}")
    finally:
        backend.close()
    return problems, notes


CARRY_CM = 15.0
LIFT_CM = 12.0


def _grasp_and_carry(backend, robot: RobotConfig, part: str) -> tuple[str | None, str]:  # noqa: ANN001
    """Close on the task's 4 cm cube in the middle of the part's task area, lift it, carry it
    sideways and back at the part's joint speed cap, hold: the cube must stay between the fingers.
    (A gripper that closes but cannot hold what the tasks carry passed --check before.)"""
    kin = Kinematics(robot)
    m, d = backend.model, backend.data
    spec = robot.parts[part]
    g = spec.gripper
    assert g is not None
    point = task_point_cm(robot, part)
    if point is None:
        return "workspace_cm does not overlap the table's task area", ""
    table_z = float(robot.table_or_default().surface_z_cm)
    backend.reset(0)
    cube = np.array([point[0] / 100, point[1] / 100, table_z / 100 + CUBE_HALF_M])
    set_free_pose(m, d, "cube", cube, 0.0)
    mujoco.mj_forward(m, d)
    backend.advance(0.3)
    cube_cm = d.body("cube").xpos * 100
    # as low as the fingertips may go (0.5 cm above the table): the most pad on the cube
    grasp_z = table_z + g.fingertip_below_tcp_cm + 0.5
    io = backend.parts[part]
    yaw = float(kin.fk(part, io.home).rpy[2])
    yaw = round(yaw / (np.pi / 2)) * (np.pi / 2)  # square with the cube's faces
    rot = rpy_to_matrix(np.array([np.pi, 0.0, yaw]))
    # sideways: towards the middle of the part's workspace box in y
    box = spec.limits.workspace_cm
    side = CARRY_CM if (box["y"][0] + box["y"][1]) / 2 >= cube_cm[1] else -CARRY_CM
    lift_z = grasp_z + LIFT_CM
    steps = [
        ("above the cube", [cube_cm[0], cube_cm[1], lift_z], 1.0),
        ("around the cube", [cube_cm[0], cube_cm[1], grasp_z], 1.0),
        ("closed on the cube", None, 0.0),
        ("lifted", [cube_cm[0], cube_cm[1], lift_z], 0.0),
        ("carried sideways", [cube_cm[0], cube_cm[1] + side, lift_z], 0.0),
        ("carried back", [cube_cm[0], cube_cm[1], lift_z], 0.0),
    ]
    q = io.home.copy()
    here = kin.fk(part, q).position_m * 100
    cap = spec.limits.max_position_step_cm
    squeeze: Squeeze | None = None
    for what, target, grip in steps:
        if target is None:
            before = d.body("cube").xpos * 100
            backend.execute({part: PartCommand(gripper=grip)})
            squeeze = _squeeze(m, d, list(g.joints) + list(g.mimic_joints), before, ee_site_name(part))
            continue
        # no move longer than the part's per-turn cap, as a policy would move
        n = max(1, int(np.ceil(np.linalg.norm(np.array(target) - here) / cap)))
        for point in np.linspace(here, target, n + 1)[1:]:
            res = kin.ik(part, point / 100, rot, q)
            if not res.success:
                return f"grasp-and-carry: IK fails {what} at {np.round(point, 1).tolist()} cm", ""
            q = res.joints_rad
            out = backend.execute({part: PartCommand(joints_rad=q)})
            if out.status == "blocked" and what in ("above the cube", "around the cube"):
                return f"grasp-and-carry: blocked moving {what} ({out.detail})", ""
        here = np.array(target, dtype=float)
        if what in ("lifted", "carried sideways", "carried back"):
            held = _holds(d, part, table_z, ee_site_name(part))
            if not held:
                drop = "could not lift" if what == "lifted" else f"dropped it when {what}"
                why = squeeze.why() if squeeze is not None else Squeeze.WEAK
                return (
                    f"grasp-and-carry: closed on the {2 * CUBE_HALF_M * 100:.0f} cm cube but {drop} ({why})",
                    "",
                )
    backend.advance(1.0)
    if not _holds(d, part, table_z, ee_site_name(part)):
        return "grasp-and-carry: the cube slipped out while held still after the carry", ""
    return None, f"grasp-and-carry ok (held the cube through a {CARRY_CM:.0f} cm carry sideways and back)"


SINK_MM = 2.0
"""Fingers sunk deeper than this into the cube squeeze it (MuJoCo's contacts are soft)."""
SQUEEZED_OUT_CM = 1.0
"""A cube that the closing fingers moved more than this (up or sideways off the tool point) was
pressed out of the grip."""


@dataclass
class Squeeze:
    """What the fingers did to the cube as they closed: how deep they sank into it, with how much
    force, and how far the close moved it (cm) up and sideways away from the tool point."""

    sink_mm: float
    force_n: float
    rise_cm: float
    off_tool_cm: float

    WEAK = (
        "a gripper too weak or slippery for what the tasks carry: a larger gripper.sim.force_limit "
        "or kp, more finger friction (gripper.sim.friction) or stiffer finger contacts "
        "(gripper.sim.contact_time_s)"
    )

    @property
    def too_hard(self) -> bool:
        return self.sink_mm > SINK_MM or self.rise_cm > SQUEEZED_OUT_CM or self.off_tool_cm > SQUEEZED_OUT_CM

    def why(self) -> str:
        if not self.too_hard:
            return self.WEAK
        what = (
            f"the fingers sank {self.sink_mm:.1f} mm into it at {self.force_n:.0f} N"
            if self.sink_mm > SINK_MM
            else f"closing pressed it {max(self.rise_cm, self.off_tool_cm):.1f} cm out of the grip "
            f"at {self.force_n:.0f} N"
        )
        return (
            f"squeezed too hard for its contacts: {what}; stiffer finger contacts "
            "(gripper.sim.contact_time_s) or a smaller gripper.sim.force_limit or kp"
        )


def _squeeze(m, d, finger_joints: list[str], before_cm: np.ndarray, site: str) -> Squeeze:  # noqa: ANN001
    """The fingers' contacts with the cube right after the close (see `Squeeze`)."""
    fingers = finger_geoms(m, finger_joints)
    cube = {g for g in range(m.ngeom) if int(m.geom_bodyid[g]) == m.body("cube").id}
    sink, force = 0.0, 0.0
    f6 = np.zeros(6)
    for i in range(d.ncon):
        c = d.contact[i]
        if (c.geom1 in fingers and c.geom2 in cube) or (c.geom2 in fingers and c.geom1 in cube):
            sink = max(sink, -float(c.dist) * 1000)
            mujoco.mj_contactForce(m, d, i, f6)
            force += abs(float(f6[0]))
    now, tool = d.body("cube").xpos * 100, d.site(site).xpos * 100
    return Squeeze(
        sink_mm=sink,
        force_n=force,
        rise_cm=float(now[2] - before_cm[2]),
        off_tool_cm=float(np.linalg.norm(now[:2] - tool[:2]) - np.linalg.norm(before_cm[:2] - tool[:2])),
    )


def _holds(d, part: str, table_z_cm: float, site: str) -> bool:  # noqa: ANN001
    """The cube is off the table and within 3 cm (sideways) and 5 cm (height) of the tool point."""
    cube, tool = d.body("cube").xpos * 100, d.site(site).xpos * 100
    return bool(
        cube[2] > table_z_cm + 5.0
        and np.linalg.norm(cube[:2] - tool[:2]) < 3.0
        and abs(cube[2] - tool[2]) < 5.0
    )


def _check_camera(backend, robot: RobotConfig, cam_name: str) -> tuple[list[str], list[str]]:  # noqa: ANN001
    m, d = backend.model, backend.data
    cam = robot.cameras[cam_name]
    problems, notes = [], []
    rgb = backend.render(cam_name).astype(float)
    if rgb.std() < 3.0:
        problems.append(f"the image is blank or uniform (mean {rgb.mean():.0f}, std {rgb.std():.1f})")
    renderer = mujoco.Renderer(m, height=cam.height, width=cam.width)
    try:
        renderer.enable_depth_rendering()
        renderer.update_scene(d, camera=camera_name(cam_name), scene_option=backend._scene_opt)
        depth = renderer.render()
        renderer.disable_depth_rendering()
        near = float(np.mean(depth < 0.01))
        if near > 0.5:
            problems.append(f"inside geometry ({near:.0%} of the image is closer than 1 cm)")
        renderer.enable_segmentation_rendering()
        renderer.update_scene(d, camera=camera_name(cam_name), scene_option=backend._scene_opt)
        seg = renderer.render()
        renderer.disable_segmentation_rendering()
    finally:
        renderer.close()
    cid = m.camera(camera_name(cam_name)).id
    pos, rot = d.cam_xpos[cid], d.cam_xmat[cid].reshape(3, 3)
    up_z = float(rot[2, 1])
    if cam.sim is not None and cam.sim.mount_body is None and up_z < 0:
        problems.append("upside down (its image's up points to the floor)")
    table = robot.table_or_default()
    (x0, x1), (y0, y1) = table.task_area_cm["x"], table.task_area_cm["y"]
    pts = (
        np.array([[x, y, table.surface_z_cm] for x in np.linspace(x0, x1, 5) for y in np.linspace(y0, y1, 5)])
        / 100.0
    )
    v = (pts - pos) @ rot
    tan_y = np.tan(np.radians(m.cam_fovy[cid]) / 2)
    tan_x = tan_y * cam.width / cam.height
    ahead = -v[:, 2]
    seen = (ahead > 0.01) & (np.abs(v[:, 0]) < tan_x * ahead) & (np.abs(v[:, 1]) < tan_y * ahead)
    if not seen.any():
        problems.append("sees no part of the task area")
    if cam.sim is not None and cam.sim.mount_body is not None:
        joints = []
        for part in robot.parts.values():
            if part.gripper is not None:
                joints += list(part.gripper.joints) + list(part.gripper.mimic_joints)
        fingers = finger_geoms(m, joints)
        geom_ids = seg[:, :, 0][seg[:, :, 1] == int(mujoco.mjtObj.mjOBJ_GEOM)]
        share = float(np.isin(geom_ids, list(fingers)).sum()) / seg[:, :, 0].size
        notes.append(f"gripper {'visible' if share > 0.002 else 'NOT visible'} ({share:.1%} of the image)")
    return problems, notes
