"""MuJoCo tasks by name."""

from sim_adapters.mujoco.tasks.base import MujocoTask
from sim_adapters.mujoco.tasks.bimanual import AlignBlocks, BimanualPickup
from sim_adapters.mujoco.tasks.conveyor import ConveyorPick
from sim_adapters.mujoco.tasks.pick_place import PickCube, PlaceInBowl, PushToTarget

TASKS: dict[str, type[MujocoTask]] = {
    t.name: t for t in (PickCube, PlaceInBowl, PushToTarget, ConveyorPick, BimanualPickup, AlignBlocks)
}
OBJECT_TASK_PREFIX = "pick_up_object/"


def make_task(name: str) -> MujocoTask:
    """A new task by name: a class of `TASKS`, or `pick_up_object/<object>` (one per object YAML)."""
    if name.startswith(OBJECT_TASK_PREFIX):
        from sim_adapters.mujoco.tasks.objects import PickUpObject

        return PickUpObject(name[len(OBJECT_TASK_PREFIX) :])
    if name == "align_with_ruler":
        from sim_adapters.mujoco.tasks.ruler import AlignWithRuler

        return AlignWithRuler()
    return TASKS[name]()


__all__ = ["OBJECT_TASK_PREFIX", "TASKS", "MujocoTask", "make_task"]
