"""The LIBERO expert: one skill per BDDL predicate, a multi-part goal worked through in order."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_adapters.libero.expert.hand import _safe_height, _words
from sim_adapters.libero.expert.joints import _is_open, operate, turn_knob
from sim_adapters.libero.expert.placing import pick_place, recover
from sim_adapters.libero.expert.scene import Arm, Reply, Scene, State, _reply
from sim_adapters.libero.expert.side_openings import _leans_through_side, _side_pending


# -- the plan -----------------------------------------------------------------------------------
def _order(goals: list[list[str]]) -> list[int]:
    """Work order: a container is closed after what goes into it; otherwise the BDDL's order."""
    filled = {g[2] for g in goals if g[0] == "in"}
    parents = {t.rsplit("_", 2)[0] for t in filled}
    first = [i for i, g in enumerate(goals) if not (g[0] == "close" and (g[1] in filled or g[1] in parents))]
    return first + [i for i in range(len(goals)) if i not in first]


def _in_hand(arm: Arm, obj: dict[str, Any]) -> bool:
    """The fingers are closed on this object (the tool inside its bounds, the gripper not shut)."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    p = arm.p
    inside = bool(
        np.all(p[:2] > lo[:2] - 1.0) and np.all(p[:2] < hi[:2] + 1.0) and lo[2] - 1 < p[2] < hi[2] + 1.0
    )
    return inside and 0.012 < arm.g < 0.8


def _closed_drawer(scene: Scene, goal: list[str]) -> bool:
    """An `in` goal whose region is a drawer still to be opened."""
    target = scene.objects.get(goal[2], {}) if len(goal) > 2 else {}
    joints = target.get("articulation") or []
    return goal[0] == "in" and any(j["kind"] == "slide" and not _is_open(j) for j in joints)


def libero_expert(state: State, priv: dict[str, Any]) -> Reply:
    arm, scene = Arm(state), Scene(priv)
    goals = priv["goal"]
    done = [
        bool(d) and not _side_pending(arm, scene, g)
        for d, g in zip(priv.get("goal_done", [False] * len(goals)), goals, strict=True)
    ]
    for i, g in enumerate(goals):  # a part just achieved with the object still in hand: let go first
        if done[i] and g[0] in ("on", "in") and _in_hand(arm, scene.objects[g[1]]):
            return _reply(
                f"The {_words(g[1])} is {g[0]} the {_words(g[2])}; I let go.", [0, 0, 0.5], None, 1.0
            )
    for i in _order(goals):
        if done[i]:
            continue
        g = goals[i]
        kind = g[0]
        level_skill = (
            kind == "open"
            or (kind in ("on", "in") and _closed_drawer(scene, g))
            or _leans_through_side(scene, g)
        )
        if (
            abs(float(arm.approach()[2])) < 0.7
            and not level_skill
            and arm.p[2] < _safe_height(arm, scene) - 1.0
        ):
            return recover(arm, scene)
        if kind in ("on", "in"):
            return pick_place(arm, scene, g)
        facts = scene.objects[g[1]]
        joints = facts.get("articulation") or []
        if not joints:
            break
        if kind in ("turnon", "turnoff"):
            return turn_knob(arm, scene, g[1], joints[0], kind)
        if kind in ("open", "close"):
            return operate(arm, scene, g[1], joints[0], kind)
        break
    if all(done):
        return "Every part of the goal holds; I hold still.", {"arm": {}}
    return "This goal has a part I have no skill for; I hold still.", {"arm": {}}


EXPERT_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
"""Suites the expert solves; it reads each task's BDDL goal, so a LIBERO-Pro or LIBERO-Plus task
built on one of them gets the same expert (whether it succeeds there is what is measured)."""
