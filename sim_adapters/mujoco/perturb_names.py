"""The names of the MuJoCo tasks' perturbations (`pick_cube~camera`), importable without MuJoCo:
the family lists and checks task names before any simulator is built (`perturb` applies them)."""

from __future__ import annotations

DIMENSIONS: tuple[str, ...] = ("camera", "lighting", "table", "noise", "instruction", "layout", "physics")
"""The perturbation dimensions, in the order their seeds are derived."""

VISUAL_ONLY = frozenset({"camera", "lighting", "table", "noise"})
"""Dimensions a privileged scripted expert cannot see (its facts come from the simulator)."""


def split_task(task: str) -> tuple[str, str | None]:
    """'pick_cube~camera' -> ('pick_cube', 'camera'); 'pick_cube' -> ('pick_cube', None)."""
    base, sep, dim = task.partition("~")
    if not sep:
        return task, None
    if dim not in DIMENSIONS:
        raise ValueError(
            f"unknown perturbation {dim!r} in task {task!r}; perturbations are: {', '.join(DIMENSIONS)}"
        )
    return base, dim
