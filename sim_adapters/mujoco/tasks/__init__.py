"""MuJoCo tasks by name."""

from sim_adapters.mujoco.tasks.base import MujocoTask
from sim_adapters.mujoco.tasks.bimanual import AlignBlocks, BimanualPickup
from sim_adapters.mujoco.tasks.conveyor import ConveyorPick
from sim_adapters.mujoco.tasks.pick_place import PickCube, PlaceInBowl, PushToTarget

TASKS: dict[str, type[MujocoTask]] = {
    t.name: t for t in (PickCube, PlaceInBowl, PushToTarget, ConveyorPick, BimanualPickup, AlignBlocks)
}

__all__ = ["TASKS", "MujocoTask"]
