"""Every task's scripted expert, asked of the task's family: a MuJoCo task names its own
(`MujocoTask.expert`, beside the class), LIBERO's lives beside its adapter (`ArmFamily.expert`).
Nothing here is keyed by task name: `EXPERTS` is a read-only view for code that looks experts up."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pear_agent.policies.experts import Expert


def find_expert(task: Any) -> Expert | None:
    """The scripted expert of `task` (a perturbed `pick_cube~camera` has its base task's), or None
    when the task is unknown or has none."""
    if not isinstance(task, str):
        return None
    from pear_agent.registry import UnknownNameError, family_of

    try:
        family = family_of(task)
    except UnknownNameError:
        return None
    find = getattr(family, "expert", None)
    return find(task) if callable(find) else None


class _Experts(Mapping[str, Expert]):
    """By task name, derived from the families; lists the tasks whose family lists its experts
    (`expert_tasks`: the MuJoCo family; LIBERO's 10,030 names are looked up, not listed)."""

    def __getitem__(self, task: str) -> Expert:
        expert = find_expert(task)
        if expert is None:
            raise KeyError(task)
        return expert

    def __contains__(self, task: object) -> bool:
        return find_expert(task) is not None

    def __iter__(self) -> Iterator[str]:
        from pear_agent.registry import families

        for family in families().values():
            listed = getattr(family, "expert_tasks", None)
            if callable(listed):
                yield from listed()

    def __len__(self) -> int:
        return sum(1 for _ in self)


EXPERTS: Mapping[str, Expert] = _Experts()
