"""The options every arm family takes, apart from the families (`pear_agent.loop.arm_family`), so
the commands that declare them load neither OpenCV nor Pinocchio."""

from __future__ import annotations

from dataclasses import dataclass

from pear_agent.settings import setting

ROBOT_HELP = "robot name in robots/ or a path to a robot YAML anywhere (default: the task's robot)"


@dataclass
class ArmOptions:
    """The options every arm family takes: `--robot` (every command), `--preset` (bench)."""

    robot: str | None = setting(None, help=ROBOT_HELP)
    preset: str | None = setting(
        None,
        commands=("bench",),
        help="the PEAR paper's protocols: pear_real (its 30 real-robot trials, in simulation); "
        "(.venv-libero only) libero (40 tasks x 50 init states), libero_pro[/TYPE], "
        "libero_plus[/DIMENSION]; (.venv-metaworld only) metaworld_mt10, metaworld_mt50; NAME@K runs K "
        "episodes per task and perturbation. Prints and writes "
        "(libero_summary.json) success per suite and perturbation, Wilson intervals and the paired "
        "drop against LIBERO",
    )
