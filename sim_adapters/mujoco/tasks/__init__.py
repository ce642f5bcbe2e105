"""MuJoCo tasks by name."""

from sim_adapters.mujoco.tasks.base import MujocoTask
from sim_adapters.mujoco.tasks.pick_place import PickCube, PlaceInBowl, PushToTarget

TASKS: dict[str, type[MujocoTask]] = {t.name: t for t in (PickCube, PlaceInBowl, PushToTarget)}

__all__ = ["TASKS", "MujocoTask"]
