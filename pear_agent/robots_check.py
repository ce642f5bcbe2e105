"""`pear-agent robots --check`: build everything `run` builds from a robot description and try it.

For each file: load the YAML, build the kinematics (Pinocchio) and a MuJoCo scene for one task the
robot can do (attachments, gripper drive, cameras, table), then check the home pose against the
joint limits and its FK against the workspace box, solve IK from home to points of the task area,
close and open the gripper in simulation, and render every camera once (a blank or uniform image,
a camera inside geometry, one that sees no part of the task area, a fixed camera upside down, and
whether each mounted camera sees the gripper). MuJoCo is imported lazily (only here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pear_agent.robot_config import RobotConfig, RobotConfigError, load_robot


@dataclass
class CheckReport:
    path: Path
    name: str = ""
    config_error: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.config_error is None and not self.problems

    def line(self) -> str:
        if self.config_error is not None:
            return f"{self.path}  ERROR  {' | '.join(self.config_error.splitlines())}"
        if self.problems:
            return f"{self.path}  FAIL  {self.name}: " + "; ".join(self.problems)
        return f"{self.path}  ok  {self.name}: " + "; ".join(self.notes)


def _task_for(robot: RobotConfig) -> str | None:
    from pear_agent.registry import TASKS

    for task in ("pick_cube", "bimanual_pickup"):
        if TASKS[task].refusal(task, robot) is None:
            return task
    return None


def check_robot(path: Path) -> CheckReport:
    report = CheckReport(path)
    try:
        robot = load_robot(path)
        report.name = robot.name
        _check(robot, report)
    except RobotConfigError as exc:
        report.config_error = str(exc)
    except Exception as exc:  # a failure we did not foresee must still be one line, naming the file
        report.config_error = f"{path}: {type(exc).__name__}: {' '.join(str(exc).split())}"
    return report


def _check(robot: RobotConfig, report: CheckReport) -> None:
    from pear_agent.kinematics import Kinematics, rpy_to_matrix

    kin = Kinematics(robot)
    task = _task_for(robot)
    for name, part in robot.parts.items():
        lo, hi = kin.joint_limits(name)
        home = np.array(part.home.joints_rad)
        bad = [
            f"{j}={q:g} not in [{a:.3g}, {b:.3g}]"
            for j, q, a, b in zip(part.joints, home, lo, hi, strict=True)
            if not a - 1e-9 <= q <= b + 1e-9
        ]
        if bad:
            report.problems.append(f"{name}: home outside the joint limits ({', '.join(bad)})")
            continue
        pose = kin.fk(name, home)
        pos_cm = pose.position_m * 100
        box = part.limits.workspace_cm
        if not all(box[a][0] <= v <= box[a][1] for a, v in zip("xyz", pos_cm, strict=True)):
            report.problems.append(
                f"{name}: home tool point {np.round(pos_cm, 1).tolist()} cm is outside workspace_cm"
            )
        failed = []
        table = robot.table_or_default()
        # the middle of the part of the task area inside this part's workspace box, and 4 cm around it
        x0, x1 = max(table.task_area_cm["x"][0], box["x"][0]), min(table.task_area_cm["x"][1], box["x"][1])
        y0, y1 = max(table.task_area_cm["y"][0], box["y"][0]), min(table.task_area_cm["y"][1], box["y"][1])
        if x0 >= x1 or y0 >= y1:
            report.problems.append(f"{name}: workspace_cm does not overlap the table's task area")
            continue
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        x0, x1, y0, y1 = cx - 4.0, cx + 4.0, cy - 4.0, cy + 4.0
        z = min(max(table.surface_z_cm + 10.0, box["z"][0]), box["z"][1])
        yaw = float(pose.rpy[2])
        for x, y in ((x0, y0), (x0, y1), (x1, y0), (x1, y1), ((x0 + x1) / 2, (y0 + y1) / 2)):
            p = [x, y, z]
            res = kin.ik(name, np.array(p) / 100, rpy_to_matrix(np.array([np.pi, 0.0, yaw])), home)
            if not res.success:
                failed.append(np.round(p, 1).tolist())
        if failed:
            report.problems.append(f"{name}: IK from home fails (gripper down) at {failed} cm")
        else:
            report.notes.append(f"{name}: home, FK, IK ok")
    if task is None:
        report.problems.append("no task fits it (tasks need one or two arm parts with grippers)")
        return
    _check_sim(robot, task, report)


def _check_sim(robot: RobotConfig, task: str, report: CheckReport) -> None:
    from pear_agent.backend import PartCommand
    from pear_agent.registry import make_backend

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
                report.problems.append(
                    f"{name}: gripper measured {closed:.2f} when closed and {opened:.2f} when open "
                    "(want < 0.2 and > 0.8: check its actuators, joints and closed/open positions)"
                )
            else:
                report.notes.append(f"{name}: gripper closes ({closed:.2f}) and opens ({opened:.2f})")
        backend.reset(0)
        for cam_name, cam in robot.cameras.items():
            if cam.sim is None:
                continue
            problems, notes = _check_camera(backend, robot, cam_name)
            report.problems += [f"camera {cam_name}: {p}" for p in problems]
            report.notes.append(f"camera {cam_name}: {', '.join(notes) or 'ok'}")
    finally:
        backend.close()


def _check_camera(backend, robot: RobotConfig, cam_name: str) -> tuple[list[str], list[str]]:  # noqa: ANN001
    import mujoco

    from sim_adapters.mujoco.scene import camera_name
    from sim_adapters.mujoco.tasks.base import finger_geoms

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


def check_files(paths: list[Path]) -> list[CheckReport]:
    return [check_robot(p) for p in paths]
