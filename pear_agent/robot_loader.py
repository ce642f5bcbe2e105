"""Loading a robot: its YAML read and checked (`robot_config`, the schema at the bottom of the
house), then every home given as a tool pose solved into joint values (`kinematics`). It stands
above both, so the schema never imports the solver."""

from __future__ import annotations

from pathlib import Path

from pear_agent.robot_config import ROBOTS_DIR, RobotConfig, read_robot


def load_robot(name_or_path: str | Path, robots_dir: Path = ROBOTS_DIR) -> RobotConfig:
    """`robots/<name>.yaml` (or a YAML anywhere, by path), checked, with its homes in joint values;
    every error names the file, the key and the problem."""
    cfg = read_robot(name_or_path, robots_dir)
    if any(p.home.joints_rad is None for p in cfg.parts.values()):
        from pear_agent.kinematics import solve_homes  # Pinocchio and MuJoCo only when needed

        cfg = solve_homes(cfg)
    return cfg


def list_robots(robots_dir: Path = ROBOTS_DIR) -> list[Path]:
    return sorted(robots_dir.glob("*.yaml"))
