"""The scripted expert for LIBERO's four suites (and the LIBERO-Pro / LIBERO-Plus tasks built on them).

It reads the BDDL goal and which of its predicates hold (LIBERO's own evaluation), the goal
objects' bounds and body origins, goal regions with their joints, and everything else's bounds,
from the privileged facts the LIBERO adapter provides, and answers through the same text
protocol as a model. One skill per predicate: `on`/`in` pick and place (wide objects such as
bowls and mugs by the near rim, narrow ones from the top; an object too flat to grasp, a plate,
pushed); `open`/`close` a drawer by its handle or a door by its edge; `turnon`/`turnoff` a
stove's knob. A multi-part goal is worked through in order (the drawer a region lies in opened
first, a container closed after what goes in it). Stateless: each turn's phase comes from the
geometry it sees, so a fumbled grasp is simply retried. Every move stays within the per-turn caps
of `libero_panda.yaml` (10 cm, 0.5 rad per axis): its replies are training data.
Units: cm and rad in the robot base frame. Nothing here imports LIBERO.

Rooms: `scene` (what it reads), `hand` (collisions, travel), `grasps`, `joints` (drawers, doors,
knobs), `side_openings` (a microwave), `placing`, `plan` (the expert itself); `opening` finds a
region's one open side.
"""

from __future__ import annotations

from sim_adapters.libero.expert.plan import EXPERT_SUITES, libero_expert

__all__ = ["EXPERT_SUITES", "libero_expert", "solves"]


def solves(task: str) -> bool:
    """Whether the expert takes this LIBERO task: a name's path holds its suite (`libero_goal/3`,
    `libero_pro/swap/libero_goal/3`, ...)."""
    return bool(set(task.split("/")) & set(EXPERT_SUITES))
