"""The MuJoCo arm tasks' scripted experts by task name (single-arm and dual-arm); other families
name their own experts (`ArmFamily.expert`: LIBERO's lives beside its adapter)."""

from __future__ import annotations

from typing import Any

from pear_agent.policies.experts import SINGLE_ARM_EXPERTS, Expert
from pear_agent.policies.experts_bimanual import align_blocks, bimanual_pickup
from pear_agent.policies.experts_ruler import ALIGN_WITH_RULER

OBJECT_TASK_PREFIX = "pick_up_object/"


class _Experts(dict):
    """By name; every `pick_up_object/<object>` (one task per object YAML) shares one expert."""

    def _object(self, task: Any) -> Expert | None:
        if isinstance(task, str) and task.startswith(OBJECT_TASK_PREFIX):
            from pear_agent.policies.experts_objects import OBJECT_EXPERT

            return OBJECT_EXPERT
        return None

    def __contains__(self, task: object) -> bool:
        return super().__contains__(task) or self._object(task) is not None

    def __missing__(self, task: Any) -> Expert:
        expert = self._object(task)
        if expert is None:
            raise KeyError(task)
        return expert

    def get(self, task: Any, default: Any = None) -> Any:
        if task in self:
            return self[task]
        return default


EXPERTS: dict[str, Expert] = _Experts(
    {
        **SINGLE_ARM_EXPERTS,
        "bimanual_pickup": bimanual_pickup,
        "align_blocks": align_blocks,
        "align_with_ruler": ALIGN_WITH_RULER,
    }
)
