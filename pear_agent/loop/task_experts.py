"""Every task's scripted expert by name, asked of the task's family: a MuJoCo task names its own
(`MujocoTask.expert`, beside the class), LIBERO's lives beside its adapter (`ArmFamily.expert`).
Nothing here is keyed by task name: `EXPERTS` is a read-only view for code that looks experts up.

It sits above the registry (it asks it), so a policy never looks a task up itself: `ScriptedPolicy`
is given its expert, and `scripted_policy(task)` here is the one-call way to build it by name."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pear_agent.loop.registry import UnknownNameError, families, family_of
from pear_agent.policies.experts import Expert
from pear_agent.policies.scripted import ScriptedPolicy


def find_expert(task: Any) -> Expert | None:
    """The scripted expert of `task` (a perturbed `pick_cube~camera` has its base task's), or None
    when the task is unknown or has none."""
    if not isinstance(task, str):
        return None
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
        for family in families().values():
            listed = getattr(family, "expert_tasks", None)
            if callable(listed):
                yield from listed()

    def __len__(self) -> int:
        return sum(1 for _ in self)


EXPERTS: Mapping[str, Expert] = _Experts()


def scripted_policy(task: str, action_noise_cm: float = 0.0, seed: int = 0) -> ScriptedPolicy:
    """The scripted policy of `task` with the expert its family names; ValueError when it has none."""
    expert = find_expert(task)
    if expert is None:
        raise ValueError(f"no scripted expert for task {task!r}; experts exist for {sorted(EXPERTS)}")
    return ScriptedPolicy(task, action_noise_cm=action_noise_cm, seed=seed, expert=expert)
