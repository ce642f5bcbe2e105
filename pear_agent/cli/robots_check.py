"""`pear-agent robots --check`: build everything `run` builds from a robot description and try it.

For each file: load the YAML, build the kinematics (Pinocchio) and a MuJoCo scene for one task the
robot can do (attachments, gripper drive, cameras, table), then check the home pose against the
joint limits and its FK against the workspace box, solve IK from home to points of the task area,
close and open the gripper in simulation, and render every camera once (a blank or uniform image,
a camera inside geometry, one that sees no part of the task area, a fixed camera upside down, and
whether each mounted camera sees the gripper). The simulator part is the task's family's
(`family_parts.RobotCheck`: MuJoCo's is `sim_adapters/mujoco/robot_check.py`); nothing here imports
an adapter or a simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pear_agent.loop import family_parts
from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.registry import arm_tasks, family_of, make_backend, task_entry
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.robot.config import RobotConfig, RobotConfigError, task_point_cm
from pear_agent.robot.kinematics import Kinematics, rpy_to_matrix
from pear_agent.robot.loader import load_robot


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
    for task in ("pick_cube", "bimanual_pickup"):
        if task_entry(task).refusal(task, robot) is None:
            return task
    return None


def describe(path: Path) -> str:
    """`pear-agent robots`' line for one description: loaded, its kinematics built (RobotConfigError
    or ValueError where either fails)."""
    robot = load_robot(path)
    Kinematics(robot)
    parts = ", ".join(
        f"{n} ({len(p.joints)} joints{' + gripper' if p.gripper else ''})" for n, p in robot.parts.items()
    )
    cams = ", ".join(robot.cameras) or "none"
    return f"{robot.name}: parts: {parts}; cameras: {cams}"


def check_robot(path: Path, tasks: bool = False, seeds: int = 5, min_success: float = 0.8) -> CheckReport:
    """Everything `run` builds, tried; with `tasks`, each task the robot can do run by its scripted
    expert on seeds 0..seeds-1 (a task below `min_success` is a problem)."""
    report = CheckReport(path)
    try:
        robot = load_robot(path)
        report.name = robot.name
        _check(robot, report)
        if tasks:
            _check_tasks(robot, report, seeds, min_success)
    except RobotConfigError as exc:
        report.config_error = str(exc)
    except Exception as exc:  # a failure we did not foresee must still be one line, naming the file
        report.config_error = f"{path}: {type(exc).__name__}: {' '.join(str(exc).split())}"
    return report


def _check(robot: RobotConfig, report: CheckReport) -> None:
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
        middle = task_point_cm(robot, name)
        if middle is None:
            report.problems.append(f"{name}: workspace_cm does not overlap the table's task area")
            continue
        cx, cy = middle
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
    """The task's family tries the robot in its simulator (`family_parts.RobotCheck`)."""
    problems, notes = family_parts.check_robot(family_of(task), task, robot)
    report.problems += problems
    report.notes += notes


def _check_tasks(robot: RobotConfig, report: CheckReport, seeds: int, min_success: float) -> None:
    """Each MuJoCo task the robot can do, run by its scripted expert on seeds 0..seeds-1."""
    kin = Kinematics(robot)
    results = []
    for task, entry in arm_tasks().items():
        if entry.backend != "mujoco" or entry.refusal(task, robot) is not None:
            continue
        try:
            policy = scripted_policy(task)
        except ValueError:  # no expert for this task
            continue
        backend = make_backend(task, robot, render=False)
        try:
            wins = sum(bool(arm_episode(backend, kin, policy).run(seed).success) for seed in range(seeds))
        finally:
            backend.close()
        results.append(f"{task} {wins}/{seeds}")
        if wins < min_success * seeds:
            report.problems.append(
                f"task {task}: its expert succeeds {wins}/{seeds} (want >= {min_success:.0%})"
            )
    if not results:
        report.problems.append("no task with a scripted expert fits it")
    report.notes.append("tasks: " + ", ".join(results))


def suggest_home_lines(
    robot: RobotConfig,
    part: str | None,
    position_cm: list[float] | None,
    orientation_rad: list[float] | None,
) -> tuple[list[str], bool]:
    """`home.joints_rad` for a tool pose per part, to paste into the YAML (and whether all solved).
    Without a position: above the middle of the part's task area, 15 cm over the table."""
    kin = Kinematics(robot)
    names = [part] if part else list(robot.parts)
    unknown = [n for n in names if n not in robot.parts]
    if unknown:
        raise RobotConfigError(f"{robot.label}: no part {unknown[0]!r} (its parts: {', '.join(robot.parts)})")
    if position_cm is not None and len(names) > 1:
        raise RobotConfigError(f"{robot.label} has {len(names)} parts: say which with --part")
    lines, ok = [], True
    for name in names:
        chain_home = kin.chains[name].home + kin.chains[name].ref
        # default: pointing down, turned about the vertical as the current home turns it
        yaw = float(kin.fk(name, chain_home).rpy[2])
        rpy = np.array(orientation_rad if orientation_rad is not None else [np.pi, 0.0, yaw], dtype=float)
        pos = position_cm
        if pos is None:
            point = task_point_cm(robot, name)
            if point is None:
                lines.append(f"parts.{name}: workspace_cm does not overlap the task area; give X Y Z")
                ok = False
                continue
            pos = [point[0], point[1], float(robot.table_or_default().surface_z_cm) + 15.0]
        res = kin.ik(name, np.array(pos) / 100.0, rpy_to_matrix(rpy), chain_home)
        where = f"tool at {np.round(pos, 1).tolist()} cm, orientation {np.round(rpy, 3).tolist()} rad"
        if not res.success:
            lines.append(f"parts.{name}.home: {where}: {res.reason}")
            ok = False
            continue
        joints = ", ".join(f"{q:.4f}" for q in res.joints_rad)
        lines.append(f"parts.{name}.home.joints_rad: [{joints}]  # {where}")
    return lines, ok


def check_files(paths: list[Path]) -> list[CheckReport]:
    return [check_robot(p) for p in paths]
