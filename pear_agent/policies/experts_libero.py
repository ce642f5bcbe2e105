"""Scripted expert for LIBERO's four suites (and the LIBERO-Pro / LIBERO-Plus tasks built on them).

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
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pear_agent.policies.side_opening import Opening, side_opening

State = dict[str, dict[str, Any]]
Reply = tuple[str, dict[str, Any]]

MAX_STEP_CM = 9.9
"""Just under the robot's 10 cm per-turn position cap (rounding to 0.01 cm stays under it)."""
MAX_TURN_RAD = 0.49
"""Just under its 0.5 rad per-axis orientation cap."""
GRIPPER_SPAN_CM = 7.0
"""Objects wider than this in both x and y are taken by the rim."""
RIM_OPENING = 0.5
"""Gripper opening (4 cm) for a rim grasp: the outer finger needs little room beside the object
(a drawer's wall, a neighbour), the inner one stays clear of the bowl's inside."""
LEAN_RAD = math.pi / 4
"""How far the gripper leans into a drawer it pushes closed (its wrist then clears the handles
of the drawers above)."""
FLAT_CM = 2.5
"""Objects lower than this (plates) are pushed, not grasped."""
CLEARANCE_CM = 4.0
"""How far a carried object's bottom stays above whatever it passes over."""


def wrap(a: np.ndarray | float) -> np.ndarray:
    return (np.asarray(a, dtype=float) + np.pi) % (2 * np.pi) - np.pi


def _yaw_near(yaw: float, current: float) -> float:
    options = yaw + np.arange(-2, 3) * math.pi  # the fingers are symmetric: period pi
    return float(options[np.argmin(np.abs(wrap(options - current)))])


def _act(pos: np.ndarray | None = None, rot: np.ndarray | None = None, gripper: float | None = None) -> dict:
    """One arm action within the per-turn caps: a longer move is shortened along its direction."""
    out: dict[str, Any] = {}
    if pos is not None:
        pos = np.asarray(pos, dtype=float)
        norm = float(np.linalg.norm(pos))
        if norm > MAX_STEP_CM:
            pos = pos * (MAX_STEP_CM / norm)
        if norm > 0.05:
            out["position"] = [round(float(v), 2) for v in pos]
    if rot is not None and float(np.max(np.abs(rot))) > 0.01:
        out["orientation"] = [round(float(v), 3) for v in np.clip(rot, -MAX_TURN_RAD, MAX_TURN_RAD)]
    if gripper is not None:
        out["gripper"] = gripper
    return out


def _reply(
    text: str, pos: np.ndarray | None = None, rot: np.ndarray | None = None, grip: float | None = None
) -> Reply:
    return text, {"arm": _act(pos, rot, grip)}


class Arm:
    """The arm's state as the protocol gives it: tool position (cm), orientation (rad), opening."""

    def __init__(self, state: State) -> None:
        arm = state["arm"]
        self.p = np.asarray(arm["position"], float)
        self.rpy = np.asarray(arm["orientation"], float)
        self.g = float(arm.get("gripper", 1.0))

    @property
    def down(self) -> bool:
        """The gripper points (about) straight down."""
        return abs(float(wrap(self.rpy[0] - math.pi))) < 0.25 and abs(float(self.rpy[1])) < 0.25

    def approach(self) -> np.ndarray:
        """The direction the fingers point (the tool's z axis), base frame."""
        r, p, y = self.rpy
        return np.array(
            [
                math.cos(y) * math.sin(p) * math.cos(r) + math.sin(y) * math.sin(r),
                math.sin(y) * math.sin(p) * math.cos(r) - math.cos(y) * math.sin(r),
                math.cos(p) * math.cos(r),
            ]
        )

    def turn_level(self, yaw: float) -> np.ndarray:
        """Orientation change towards pointing level (fingers closing vertically) along the
        direction `yaw - pi/2`: first the yaw while still pointing down, then the tilt, so every
        intermediate pose is one the arm can take. Of the two equal poses (the fingers are
        symmetric) the one needing less yaw."""
        r0, _, y0 = self.rpy
        targets = [(math.pi / 2, yaw), (-math.pi / 2, yaw + math.pi)]
        roll, yaw_t = min(targets, key=lambda t: abs(float(wrap(t[1] - y0))))
        dyaw = float(wrap(yaw_t - y0))
        if abs(dyaw) > 0.06 and abs(float(wrap(r0 - math.pi))) < 0.15:
            return np.array([float(wrap(math.pi - r0)), -float(self.rpy[1]), dyaw])
        return wrap(np.array([roll, 0.0, yaw_t]) - self.rpy)

    def lean_to(self, toward: np.ndarray, tilt_rad: float) -> np.ndarray:
        """Orientation change to point the fingers along `toward` (xy), `tilt_rad` below level,
        closing horizontally. Of the two ways to write that pose, the one nearer the orientation
        now (the other swings the hand half a turn round)."""
        yaw = math.atan2(float(toward[1]), float(toward[0]))
        options = [
            np.array([math.pi, -(math.pi / 2 - tilt_rad), yaw]),
            np.array([math.pi, math.pi / 2 - tilt_rad, yaw + math.pi]),
        ]
        return min((wrap(o - self.rpy) for o in options), key=lambda r: float(np.max(np.abs(r))))

    def turn_to(self, yaw: float) -> np.ndarray:
        """Orientation change to point the gripper down at `yaw` (the nearer of the two)."""
        return wrap(np.array([math.pi, 0.0, _yaw_near(yaw, self.rpy[2])]) - self.rpy)


class Scene:
    """The privileged facts, with the geometry the skills ask about."""

    def __init__(self, priv: dict[str, Any]) -> None:
        self.priv = priv
        self.objects: dict[str, dict[str, Any]] = priv["objects"]
        self.others: dict[str, dict[str, Any]] = priv.get("others", {})

    def boxes(self, skip: set[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for name, f in [*self.objects.items(), *self.others.items()]:
            if name in skip or "min_cm" not in f:
                continue
            out.append((np.asarray(f["min_cm"], float), np.asarray(f["max_cm"], float)))
        return out

    def moved(self, label: str, delta_cm: np.ndarray) -> Scene:
        """This scene with one of its parts (an obstacle's box) shifted: a drawer as it will be."""
        priv = dict(self.priv)
        others = dict(self.others)
        if label in others:
            box = others[label]
            others[label] = {
                "min_cm": (np.asarray(box["min_cm"], float) + delta_cm).tolist(),
                "max_cm": (np.asarray(box["max_cm"], float) + delta_cm).tolist(),
            }
        priv["others"] = others
        return Scene(priv)

    def needed_z(self, xy: np.ndarray, skip: set[str], margin_cm: float) -> float:
        """The highest top of anything whose footprint (grown by `margin_cm`) covers xy; 0 (the
        table) when nothing does."""
        top = 0.0
        for lo, hi in self.boxes(skip):
            if np.all(xy > lo[:2] - margin_cm) and np.all(xy < hi[:2] + margin_cm):
                top = max(top, float(hi[2]))
        return top

    def top_along(self, a: np.ndarray, b: np.ndarray, skip: set[str], margin_cm: float) -> float:
        """The highest top of anything whose footprint (grown by `margin_cm`) the straight path
        from a to b (xy) passes over; the table (0) when nothing is in the way."""
        top = 0.0
        for lo, hi in self.boxes(skip):
            for t in np.linspace(0.0, 1.0, 12):
                q = a[:2] + t * (b[:2] - a[:2])
                if np.all(q > lo[:2] - margin_cm) and np.all(q < hi[:2] + margin_cm):
                    top = max(top, float(hi[2]))
                    break
        return top


# -- picking and placing ------------------------------------------------------------------------
HAND_HALF_CM = (10.6, 4.3)
"""The Panda hand's half extent along the finger axis and across it (robosuite's collision box)."""
FINGERTIP_BELOW_TCP_CM = 1.3
"""How far the fingertips reach below the tool point."""
HAND_ABOVE_TCP_CM = 2.4
"""Its lowest point above the tool point."""
HAND_SLACK_CM = 1.5
"""How far something may reach up past the hand's box and still pass (its box is the corners of
a rounded mesh)."""
HAND_TOP_CM = 12.7
"""The top of the hand above the tool point."""
LIFT_CM = 12.0
"""How far a grasped object is lifted straight up before it is carried."""


def hand_hits(
    scene: Scene, tool: np.ndarray, yaw: float, skip: set[str], rise_cm: float = 0.0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """What the hand, pointing down at `tool` with its fingers closing at `yaw`, touches there or
    on its way up by `rise_cm`: everything whose bounds meet the hand's (turned) box."""
    bottom, top = float(tool[2]) + HAND_ABOVE_TCP_CM, float(tool[2]) + HAND_TOP_CM + rise_cm
    return [
        (lo, hi)
        for lo, hi in scene.boxes(skip)
        if hi[2] > bottom + HAND_SLACK_CM and lo[2] < top and _under_hand(tool, yaw, lo, hi)
    ]


def _under_hand(tool: np.ndarray, yaw: float, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether a box's footprint meets that of the hand pointing down at `tool` with its fingers
    closing at `yaw` (separating axes of a turned rectangle and an axis-aligned one)."""
    along = np.array([-math.sin(yaw), math.cos(yaw)])  # the fingers close along the tool's y axis
    across = np.array([along[1], -along[0]])
    c_box, h_box = (lo[:2] + hi[:2]) / 2, (hi[:2] - lo[:2]) / 2
    d = c_box - np.asarray(tool[:2], float)
    for axis in (np.array([1.0, 0.0]), np.array([0.0, 1.0]), along, across):
        r_hand = HAND_HALF_CM[0] * abs(float(along @ axis)) + HAND_HALF_CM[1] * abs(float(across @ axis))
        r_box = h_box[0] * abs(float(axis[0])) + h_box[1] * abs(float(axis[1]))
        if abs(float(d @ axis)) > r_hand + r_box:
            return False
    return True


HAND_CLEARANCE_CM = 1.0
"""How far the hand's box stays above whatever its footprint passes over."""


def hand_need(scene: Scene, xy: np.ndarray, yaws: tuple[float, ...], skip: set[str]) -> float:
    """The lowest tool height at which the hand, pointing down at xy with its fingers at any of
    `yaws`, passes over everything under its footprint (it reaches 10.6 cm along the fingers, far
    past the margin kept round the tool point: an open drawer beside the path)."""
    tops = [
        float(hi[2])
        for lo, hi in scene.boxes(skip)
        for yaw in yaws
        if _under_hand(np.asarray(xy, float), yaw, lo, hi)
    ]
    return max(tops, default=-np.inf) - HAND_ABOVE_TCP_CM + HAND_CLEARANCE_CM


def fingers_hit(scene: Scene, tool: np.ndarray, yaw: float, opening: float, skip: set[str]) -> bool:
    """Whether the open fingers, lowered to `tool`, would land on something beside the object
    (a neighbour a rim grasp's outer finger would clamp along with it)."""
    along = np.array([-math.sin(yaw), math.cos(yaw)])
    reach = opening * 4.0 + 1.2  # half the opening (8 cm at 1.0) plus a finger's thickness
    pts = [tool[:2] + t * along for t in np.linspace(-reach, reach, 9)]
    low, high = float(tool[2]) - FINGERTIP_BELOW_TCP_CM, float(tool[2]) + 4.9
    for lo, hi in scene.boxes(skip):
        if hi[2] < low or lo[2] > high:
            continue
        for q in pts:
            if np.all(q > lo[:2] - 0.8) and np.all(q < hi[:2] + 0.8):
                return True
    return False


def hand_clear(scene: Scene, tool: np.ndarray, yaw: float, skip: set[str]) -> bool:
    return not hand_hits(scene, tool, yaw, skip)


TOP_KNOB = ("moka_pot",)
"""Objects taken by the knob on their lid, from above (a moka pot: too wide to span, no rim)."""


def grasp_options(obj: dict[str, Any], name: str = "") -> list[tuple[np.ndarray, float, float]]:
    """Tool point, yaw and gripper opening for grasping, best first: a wide object (bowl, mug) by
    its rim, fingers across the wall, the rim nearest the robot first and then round the object,
    away from a mug's handle; a lidded one (moka pot) by the knob on its lid; a narrow one from
    the top, fingers across its narrow side, or across the other where they span that too (a can
    with a tall neighbour beside it)."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    c = (lo + hi) / 2
    ext = hi - lo
    ring = np.asarray(obj.get("rim_center_cm", c[:2]), float)
    half = obj.get("box_half_cm")
    if half is not None and 2 * half[0] < GRIPPER_SPAN_CM:  # a thin box (a book): across its thin side
        z = max(hi[2] - min(3.0, ext[2] / 2), lo[2] + FINGERTIP_BELOW_TCP_CM + 0.3)
        return [(np.array([ring[0], ring[1], z]), float(obj["thin_yaw_rad"]) - math.pi / 2, 1.0)]
    if any(k in name for k in TOP_KNOB):
        return [
            (np.array([ring[0], ring[1], hi[2] - 1.0]), a, 0.4)
            for a in (0.0, math.pi / 2, math.pi / 4, -math.pi / 4)
        ]
    if ext[0] > GRIPPER_SPAN_CM and ext[1] > GRIPPER_SPAN_CM:
        radius = float(obj.get("rim_radius_cm") or 0.0)
        handle = c[:2] - ring  # a handle pulls the bounds' centre off the rim's: grasp away from it
        phis = [math.pi + k * math.pi / 6 for k in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6)]
        if float(np.linalg.norm(handle)) > 1.0:
            toward = math.atan2(handle[1], handle[0])
            phis = [p for p in phis if abs(float(wrap(p - toward))) > math.pi / 3]
        out = []
        for phi in phis:
            radial = np.array([math.cos(phi), math.sin(phi)])
            if radius > 1.0:
                xy = ring + radial * radius
            else:
                reach = 1.0 / max(abs(radial[0]) / (ext[0] / 2), abs(radial[1]) / (ext[1] / 2))
                xy = c[:2] + radial * (reach - 0.6)
            tool = np.array([*xy, max(hi[2] - 1.2, lo[2] + FINGERTIP_BELOW_TCP_CM + 0.2)])
            out.append((tool, phi - math.pi / 2, RIM_OPENING))  # fingers close along the radius
        return out
    yaw = math.pi / 2 if ext[0] <= ext[1] else 0.0
    z = max(hi[2] - min(3.0, ext[2] / 2), lo[2] + FINGERTIP_BELOW_TCP_CM + 0.3)  # fingertips off the table
    top = np.array([c[0], c[1], z])
    if max(ext[0], ext[1]) < GRIPPER_SPAN_CM:  # the fingers span it either way (a can): square to that too
        return [(top, yaw, 1.0), (top, yaw - math.pi / 2, 1.0)]
    return [(top, yaw, 1.0)]


def grasp_plan(
    obj: dict[str, Any], scene: Scene | None = None, name: str = ""
) -> tuple[np.ndarray, float, float]:
    """The first grasp option whose hand clears its neighbours there and on the way up; else the
    first that clears them there (the object is then slid clear before it is lifted); else the
    first."""
    options = grasp_options(obj, name)
    if scene is None:
        return options[0]
    free = [
        o for o in options if not hand_hits(scene, o[0], o[1], {name}) and not fingers_hit(scene, *o, {name})
    ]
    lifts = [o for o in free if not hand_hits(scene, o[0], o[1], {name}, LIFT_CM)]
    return (lifts or free or options)[0]


def graspable(scene: Scene, obj: dict[str, Any], name: str) -> bool:
    """Some grasp of the object leaves the hand clear there and all the way up."""
    return any(not hand_hits(scene, o[0], o[1], {name}, LIFT_CM) for o in grasp_options(obj, name))


def _shifted(obj: dict[str, Any], delta: np.ndarray) -> dict[str, Any]:
    """The object's facts as they will be after it is slid by `delta`: every position moves, the rim's
    centre (what a rim grasp is planned from) included."""
    out = dict(obj)
    for key in ("min_cm", "max_cm", "position_cm", "body_cm", "rim_center_cm"):
        if key in out:
            v = np.asarray(out[key], float)
            out[key] = (v + delta[: len(v)]).tolist()
    return out


def clearing_shove(scene: Scene, later: Scene, obj: dict[str, Any], name: str) -> np.ndarray | None:
    """The shortest push along the table (8 directions, robot side first) after which the object
    can be grasped in the scene as it will be (`later`), pushed from a side the hand can reach now."""
    for dist in (4.0, 6.0, 8.0, 10.0, 13.0, 16.0):
        for k in range(8):
            a = math.pi + k * math.pi / 4
            unit = np.array([math.cos(a), math.sin(a), 0.0])
            if all(graspable(later, _shifted(obj, unit * x), name) for x in (dist, dist + 2.0, dist + 4.0)):
                return unit * (dist + 2.0)  # the middle of a range that works: a push is not exact
    return None


def shove_object(
    arm: Arm, scene: Scene, name: str, obj: dict[str, Any], delta: np.ndarray, why: str
) -> Reply:
    """Push an object along the table by `delta` with the closed fingertips against its far side."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    dist = float(np.linalg.norm(delta[:2]))
    v = delta[:2] / max(dist, 1e-6)
    reach = 1.0 / max(abs(v[0]) / ((hi[0] - lo[0]) / 2), abs(v[1]) / ((hi[1] - lo[1]) / 2), 1e-6)
    contact = (lo[:2] + hi[:2]) / 2 - v * (reach + 1.2)
    z = float(lo[2]) + FINGERTIP_BELOW_TCP_CM + 0.5
    yaw = math.atan2(v[1], v[0])  # fingers side by side across the push
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    what = _words(name)
    rel = p[:2] - (lo[:2] + hi[:2]) / 2
    behind = -reach - 3.0 < float(rel @ v) < -reach + 1.0 and abs(float(rel @ np.array([-v[1], v[0]]))) < 2.5
    if behind and abs(p[2] - z) < 1.2 and g < 0.2:
        return _reply(
            f"{why}I push the {what} {dist + 1.2:.1f} cm aside.",
            np.append(v * min(dist + 1.2, MAX_STEP_CM), 0.0),
            None,
            None,
        )
    if g > 0.2:
        return _reply(
            f"{why}I close the gripper to push the {what} aside.",
            [0, 0, max(0.0, hi[2] + 6 - p[2])],
            None,
            0.0,
        )
    dxy = float(np.linalg.norm(contact - p[:2]))
    if dxy < 0.8 and float(np.max(np.abs(rot))) > 0.05:
        return _reply(f"{why}I square the gripper behind the {what}.", None, rot, None)
    if dxy < 0.8:
        return _reply(
            f"{why}I lower the fingertips beside the {what}.", np.append(contact - p[:2], z - p[2]), rot, None
        )
    step = travel(arm, scene, np.append(contact, hi[2] + 4.0), {name})
    return _reply(f"{why}I move behind the {what} to push it aside.", step, rot, None)


def escape(scene: Scene, tool: np.ndarray, yaw: float, skip: set[str]) -> np.ndarray | None:
    """A short horizontal slide after which the hand can rise LIFT_CM without touching anything
    (something overhangs the grasp: an open drawer); None when it can rise where it is."""
    if not hand_hits(scene, tool, yaw, skip, LIFT_CM):
        return None
    for dist in (3.0, 5.0, 7.0, 9.0, 12.0):
        for k in range(8):
            a = math.pi + k * math.pi / 4  # towards the robot first
            d = np.array([math.cos(a), math.sin(a), 0.0]) * dist
            if not hand_hits(scene, tool + d, yaw, skip, LIFT_CM) and not hand_hits(
                scene, tool + d / 2, yaw, skip
            ):
                return d
    return None


def _placement(scene: Scene, goal: list[str], obj: dict[str, Any]) -> tuple[np.ndarray, float]:
    """Where the object's body origin goes (xy) and the height its bottom must just clear."""
    target = scene.objects[goal[2]]
    if not target.get("site"):  # onto / into an object: LIBERO compares body origins (3 cm)
        xy = np.asarray(target.get("body_cm", target["position_cm"]), float)[:2]
        return xy, float(target["max_cm"][2])
    xy = np.asarray(target["position_cm"], float)[:2]
    half = np.asarray(target.get("half_size_cm", [0, 0, 0]), float)
    site_z = float(target["position_cm"][2])
    joints = target.get("articulation") or []
    if goal[0] == "in" and joints and joints[0]["kind"] == "slide":  # a drawer: the part pulled out
        j = joints[0]
        hmin, hmax = np.asarray(j["handle_min_cm"]), np.asarray(j["handle_max_cm"])
        u = _open_direction(j)
        size = np.asarray(obj["max_cm"], float)[:2] - np.asarray(obj["min_cm"], float)[:2]
        front = float(((hmin + hmax) / 2)[:2] @ u[:2])
        inset = float(abs(size @ u[:2])) / 2 + 3.8  # behind the drawer's front panel
        along = front - inset
        xy = xy + (along - float(xy @ u[:2])) * u[:2]
        return xy, site_z - half[2]
    if goal[0] == "in":  # a container's region (basket, caddy, microwave): its floor
        parent = target.get("parent")
        floor = site_z - half[2]
        if parent is not None:
            return xy, max(floor, float(parent["min_cm"][2]) + 0.5)
        return xy, floor
    xy = _free_spot(scene, goal, obj, xy, half)
    parent = target.get("parent")
    if parent is not None:  # a region on a fixture (stove burner, cabinet top): its top
        return xy, max(site_z, float(parent["max_cm"][2]) if half[2] > 0.5 else site_z)
    return xy, site_z  # a region of the table


def _free_spot(
    scene: Scene, goal: list[str], obj: dict[str, Any], center: np.ndarray, half: np.ndarray
) -> np.ndarray:
    """The point of a region (its middle first) where the object's footprint overlaps least with
    what already stands there (a second moka pot beside the first on the burner)."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    size = (hi[:2] - lo[:2]) / 2
    parent = scene.objects[goal[2]].get("parent_name", "")
    skip = {goal[1], goal[2], parent}
    boxes = [
        (np.asarray(f["min_cm"], float), np.asarray(f["max_cm"], float))
        for n, f in [*scene.objects.items(), *scene.others.items()]
        if "min_cm" in f and n not in skip and not (parent and n.startswith(parent + "/"))
    ]

    def overlap(xy: np.ndarray) -> float:
        total = 0.0
        for a, b in boxes:
            w = np.minimum(xy + size, b[:2]) - np.maximum(xy - size, a[:2])
            total += float(max(w[0], 0.0) * max(w[1], 0.0))
        return total

    reach = np.maximum(np.asarray(half[:2], float) * 0.8, 0.0)
    grid = [
        center + np.array([dx, dy])
        for dx in np.linspace(-reach[0], reach[0], 7)
        for dy in np.linspace(-reach[1], reach[1], 7)
    ]
    return min(grid, key=lambda xy: (round(overlap(xy), 0), float(np.linalg.norm(xy - center))))


def recover(arm: Arm, scene: Scene) -> Reply:
    """Back to pointing down after working level (a drawer handle): let go and back off the way
    the fingers point, then rise clear of everything near, turning down once above it."""
    p = arm.p
    level = abs(float(arm.approach()[2])) < 0.7
    if level and arm.g < 0.85:
        back = -arm.approach()
        back[2] = 0.0
        return _reply("I let go and back away before turning the gripper down.", back * 6.0, None, 1.0)
    safe_z = _safe_height(arm, scene)
    return _reply(
        "I rise clear of everything near, turning the gripper down.",
        [0, 0, max(0.0, safe_z - p[2])],
        arm.turn_to(arm.rpy[2]),  # backed off: free space to turn in
        None,
    )


def _safe_height(arm: Arm, scene: Scene) -> float:
    """Where a level gripper can turn down: 10 cm above everything within 15 cm."""
    p = arm.p
    near = [
        hi for lo, hi in scene.boxes(set()) if np.all(p[:2] > lo[:2] - 15) and np.all(p[:2] < hi[:2] + 15)
    ]
    return max([float(h[2]) for h in near] + [0.0]) + 10.0


def travel(
    arm: Arm,
    scene: Scene,
    goal: np.ndarray,
    skip: set[str],
    below_cm: float = 0.0,
    margin_cm: float = 4.0,
    yaw: float | None = None,
) -> np.ndarray:
    """The next position change of the tool on its way to `goal`, carrying something that hangs
    `below_cm` under it: straight there when nothing is in the way, else up to a height clear of
    everything under the path, across, and straight down onto the goal. With the gripper pointing
    down, the hand's footprint (at its yaw now and at `yaw`, where it is turning to) is kept clear
    too."""
    a, b = arm.p, np.asarray(goal, float)
    yaws = ((float(arm.rpy[2]),) if arm.down else ()) + ((yaw,) if yaw is not None else ())

    def need(xy: np.ndarray) -> float:
        tool = scene.needed_z(xy, skip, margin_cm) + CLEARANCE_CM + below_cm
        return max(tool, hand_need(scene, xy, yaws, skip)) if yaws else tool

    def clear(s: np.ndarray, e: np.ndarray) -> bool:
        for t in np.linspace(0.0, 1.0, 16):
            q = s + t * (e - s)
            if float(np.linalg.norm(q[:2] - b[:2])) < 2.0:
                continue  # the last bit above the goal: straight down onto it is the approach
            if q[2] < need(q[:2]) - 0.5:
                return False
        return True

    if float(np.linalg.norm(a[:2] - b[:2])) < 1.0 or clear(a, b):
        return b - a
    hover = np.array([b[0], b[1], max(b[2], need(b[:2]))])
    if clear(a, hover):
        return hover - a
    cruise = max(need(a[:2] + t * (b[:2] - a[:2])) for t in np.linspace(0.0, 1.0, 16))
    cruise = max(cruise, float(b[2]))
    if a[2] < cruise - 0.5:
        return np.array([0.0, 0.0, cruise - a[2]])
    d = b[:2] - a[:2]
    return np.array([d[0], d[1], cruise - a[2]])


def pick_place(arm: Arm, scene: Scene, goal: list[str]) -> Reply:
    name, target_name = goal[1], goal[2]
    obj = scene.objects[name]
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    if float(obj.get("rest_height_cm", hi[2] - lo[2])) < FLAT_CM and _on_table(scene, goal):
        return push(arm, scene, goal)
    target = scene.objects[target_name]
    for j in target.get("articulation") or []:
        if goal[0] == "in" and j["kind"] == "slide" and not _is_open(j):
            why = f"The {_words(target_name)} is closed; "
            opened = scene.moved(
                f"{target.get('parent_name', '')}/{j['joint']}",
                _open_direction(j) * _opened_cm(j),
            )
            if not graspable(opened, obj, name):  # the open drawer would hang over it: move it away first
                shove = clearing_shove(scene, opened, obj, name)
                if shove is not None:
                    return shove_object(
                        arm,
                        scene,
                        name,
                        obj,
                        shove,
                        why + "once open it would hang over the " + _words(name) + "; ",
                    )
            return operate(arm, scene, target_name, j, "open", why)
    op = side_opening_of(scene, goal)
    if op is not None:
        reply = through_side(arm, scene, goal, op)
        if reply is not None:
            return reply
    center = (lo + hi) / 2
    body = np.asarray(obj.get("body_cm", center), float)
    grasp, yaw, opening = grasp_plan(obj, scene, name)
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    near = bool(
        np.all(p[:2] > lo[:2] - 1.5) and np.all(p[:2] < hi[:2] + 1.5) and lo[2] - 1 < p[2] < hi[2] + 1.5
    )
    rest = float(obj.get("rest_bottom_cm", lo[2]))
    # closed on something (a bowl's wall is ~3 mm: g ~0.03), or the object has left where it rested
    holding = near and g < opening - 0.15 and (g > 0.012 or lo[2] > rest + 1.0)
    what, where = _words(name), _words(target_name)
    if holding:
        place_xy, surface = _placement(scene, goal, obj)
        below = p[2] - lo[2]  # the tool's height above the object's bottom
        # into a region: its middle takes the object's middle (the bounds' or rim's centre); onto an
        # object: LIBERO compares body origins
        ref = (
            np.asarray(obj.get("rim_center_cm", body[:2]), float)
            if goal[0] == "in" and target.get("site")
            else body[:2]
        )
        release = np.array([*(place_xy + (p[:2] - ref[:2])), surface + 1.0 + below])
        if float(np.linalg.norm(release[:2] - p[:2])) < 1.0 and p[2] < release[2] + 0.8:
            return _reply(f"The {what} is just above the {where}; I let go.", None, None, 1.0)
        turn = _slot_turn(arm, obj, target) if goal[0] == "in" else None
        skip = {name, target_name}
        if lo[2] < rest + 3.0:  # just picked up: out from under anything overhanging, then up
            slide = escape(scene, p, float(arm.rpy[2]), {name})
            if slide is not None:
                return _reply(f"I slide the {what} out from under what overhangs it.", slide, None, 0.0)
        step = travel(arm, scene, release, skip, below)
        if turn is not None and float(np.max(np.abs(turn))) > 0.05:
            if float(np.linalg.norm(release[:2] - p[:2])) < 1.0:
                return _reply(f"I turn the {what} to fit the {where}.", None, turn, 0.0)
            return _reply(f"I carry the {what} towards the {where}, turning it to fit.", step, turn, 0.0)
        if float(np.linalg.norm(release[:2] - p[:2])) < 1.0:
            return _reply(f"The {what} is above the {where}; I lower it.", step, None, 0.0)
        return _reply(f"I carry the {what} towards the {where}.", step, None, 0.0)
    if g < opening - 0.15 or (g < 0.85 and not near and abs(g - opening) > 0.05):
        return _reply("The gripper holds nothing I need; I open it and move up.", [0, 0, 6.0], None, opening)
    grip = opening if abs(g - opening) > 0.1 else None
    squared = float(np.max(np.abs(rot))) < 0.04
    dxy = float(np.linalg.norm(grasp[:2] - p[:2]))
    if dxy < 0.8 and abs(p[2] - grasp[2]) < 0.6 and squared:
        return _reply(f"The {what} is between the fingers; I close the gripper.", None, None, 0.0)
    side = escape(scene, grasp, yaw, {name})  # something overhangs the grasp: come in from the side
    if side is not None:
        start = grasp + side
        rel = p - grasp
        along = float(rel[:2] @ side[:2]) / float(side[:2] @ side[:2])
        if (
            abs(p[2] - grasp[2]) < 1.0
            and -0.1 < along < 1.1
            and float(np.linalg.norm(rel - along * side)) < 1.0
        ):
            if not squared:
                return _reply("I square the gripper beside the grasp point.", None, rot, grip)
            return _reply(
                f"I slide the open gripper in under the overhang to the {what}.", grasp - p, None, grip
            )
        if float(np.linalg.norm(p[:2] - start[:2])) < 0.8 and not squared:
            return _reply("I square the gripper beside the grasp point.", None, rot, grip)
        step = travel(arm, scene, start, {name}, yaw=yaw)
        return _reply(f"I move the open gripper down beside the {what}.", step, rot, grip)
    above = np.array([grasp[0], grasp[1], max(grasp[2], float(hi[2]) + 3.0)])
    if dxy < 0.8 and not squared and p[2] >= above[2] - 0.5:
        return _reply("I am above the grasp point; I square the gripper.", None, rot, grip)
    step = travel(arm, scene, grasp if dxy < 0.8 else above, {name}, yaw=yaw)
    if dxy < 0.8:
        return _reply(f"I lower the open gripper to the {what}.", step, rot, grip)
    return _reply(f"I move the open gripper above the {what}.", step, rot, grip)


def _words(name: str) -> str:
    """A BDDL name as words: `akita_black_bowl_1` -> `akita black bowl`."""
    parts = name.split("_")
    if parts and parts[-1].isdigit():
        parts = parts[:-1]
    return " ".join(parts)


def _slot_turn(arm: Arm, obj: dict[str, Any], target: dict[str, Any]) -> np.ndarray | None:
    """For a thin box going into a narrow region (a book into a caddy's compartment): the wrist
    turn that lines its thin side up with the region's narrow side; None for anything else."""
    if "thin_yaw_rad" not in obj or "half_size_cm" not in target:
        return None
    half = np.asarray(target["half_size_cm"], float)
    narrow = 0.0 if half[0] <= half[1] else math.pi / 2  # the region's narrow axis (x or y)
    off = float(wrap(narrow - float(obj["thin_yaw_rad"])))
    off = off - math.pi * round(off / math.pi)  # the thin side has no front: period pi
    return np.array([0.0, 0.0, off])


def _on_table(scene: Scene, goal: list[str]) -> bool:
    """The goal puts the object on a region of the table itself (where it can be slid to)."""
    target = scene.objects.get(goal[2], {})
    return bool(target.get("site")) and "parent" not in target


def push(arm: Arm, scene: Scene, goal: list[str]) -> Reply:
    """Slide a flat object (a plate) over the table: closed fingertips pressed onto its floor, then
    moved towards the target in short steps, so they stay inside it and it comes along (from
    inside, the hand stays over the plate, clear of whatever stands behind it)."""
    name = goal[1]
    obj = scene.objects[name]
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    body = np.asarray(obj.get("body_cm", (lo + hi) / 2), float)
    place_xy, _ = _placement(scene, goal, obj)
    d = place_xy - body[:2]
    dist = float(np.linalg.norm(d))
    u = d / max(dist, 1e-6)
    radius = float(np.min(hi[:2] - lo[:2])) / 2
    start = body[:2] - u * min(2.0, radius / 3)
    z = float(lo[2]) + FINGERTIP_BELOW_TCP_CM + 0.2  # the fingertips on the plate's floor
    # fingers side by side across the push, else square to it, else whatever way (in eighths of a
    # half turn) keeps the hand clear of what stands beside the plate (a cabinet's handles)
    yaws = [math.atan2(u[1], u[0]) + k * math.pi / 8 for k in (0, 4, 2, 6, 1, 7, 3, 5)]
    yaw = next((y for y in yaws if not hand_hits(scene, np.append(start, z), y, {name})), yaws[0])
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    what, where = _words(name), _words(goal[2])
    ahead = float((p[:2] - body[:2]) @ u)
    inside = (
        float(np.linalg.norm(p[:2] - body[:2])) < radius - 1.0 and ahead < radius - 3.0 and p[2] < z + 1.0
    )
    if inside and g < 0.2:
        step = min(dist + 0.5, 6.0)
        return _reply(
            f"My fingertips press on the {what}; I slide it {step:.1f} cm towards the {where}.",
            np.append(u * step, -0.4),
            None,
            None,
        )
    if g > 0.2:
        return _reply(
            "I close the gripper to push with the fingertips.", [0, 0, max(0.0, hi[2] + 6 - p[2])], None, 0.0
        )
    dxy = float(np.linalg.norm(start - p[:2]))
    squared = float(np.max(np.abs(rot))) < 0.05
    if dxy < 0.8 and not squared:
        return _reply(f"I am above the {what}; I square the gripper.", None, rot, None)
    if dxy < 0.8:
        return _reply(
            f"I lower the closed fingertips onto the {what}.", np.append(start - p[:2], z - p[2]), rot, None
        )
    if float(np.linalg.norm(p[:2] - body[:2])) < radius + 5.0 and p[2] < hi[2] + 4.0:  # back over the rim
        return _reply(
            f"I lift the fingertips over the rim and back into the {what}.",
            np.append(start - p[:2], z + 2.5 - p[2]),
            rot,
            None,
        )
    step = travel(arm, scene, np.append(start, hi[2] + 4.0), {name})
    return _reply(f"I move above the {what}.", step, rot, None)


# -- through a side opening (a microwave) -------------------------------------------------------
SIDE_TILT_RAD = 0.2
"""How far below level the fingers point when pushing something further into a side opening: off
the pitch of exactly level (where roll and yaw become one), the hand's front edge still behind the
fingertips (outside the opening)."""
HANDLE_OPENING = 0.45
"""Gripper opening (3.6 cm) round a mug's handle bar (1.75 cm wide)."""
HANDLE_GRASP_FRACTION = 0.78
"""Where a mug's handle is pinched from above, as a fraction of its height (the handle's top bar
is at about 0.85; the hand then clears the rim)."""
HANDLE_PUSH_FRACTION = 0.4
"""Where a mug standing in an opening is pushed by its handle, as a fraction of its height: low,
so it slides rather than tips."""
HANDLE_CLEAR_CM = 1.0
"""How far inside the face a handle's end must be for the door to close past it."""


def side_opening_of(scene: Scene, goal: list[str]) -> Opening | None:
    """The side opening an `in` goal's region is reached through (a microwave's), or None: a
    region without a ceiling is reached from above, a drawer by its own skill."""
    if goal[0] != "in" or len(goal) < 3:
        return None
    target = scene.objects.get(goal[2], {})
    if not target.get("site") or target.get("articulation") or not target.get("parent_parts"):
        return None
    parts = [(np.asarray(p["min_cm"], float), np.asarray(p["max_cm"], float)) for p in target["parent_parts"]]
    return side_opening(
        np.asarray(target["position_cm"], float),
        np.asarray(target.get("half_size_cm", [0, 0, 0]), float),
        parts,
    )


def _handle(obj: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """A mug's handle from its bounds and rim (a handle pulls the bounds' centre off the rim's): the
    unit xy direction it points and the xy of its outer bar's middle; None without one."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    if "rim_center_cm" not in obj:
        return None
    ring = np.asarray(obj["rim_center_cm"], float)
    off = (lo[:2] + hi[:2]) / 2 - ring
    if float(np.linalg.norm(off)) < 1.0:
        return None
    h = off / float(np.linalg.norm(off))
    if "yaw_rad" in obj:  # a handle lies along one of the object's own axes: turned with it, exactly
        yaw = float(obj["yaw_rad"])
        local = math.atan2(float(h[1]), float(h[0])) - yaw
        snapped = yaw + round(local / (math.pi / 2)) * (math.pi / 2)
        h = np.array([math.cos(snapped), math.sin(snapped)])
    half = (hi[:2] - lo[:2]) / 2
    reach = float(np.abs(h) @ half + off @ h)  # the bounds' furthest point along h, from the rim centre
    return h, ring + h * (reach - 0.6)  # the bar's middle (it is 0.8 cm thick)


DOOR_FRONT_CM = 30.0
"""How far out in front of a side opening the arm works: a door swung open less than that keeps
out of the way."""
DOOR_WRIST_CM = 2.5
"""How far beside the opening's width the wrist reaches while the hand works in front of it (the
Panda's sixth link passes a door standing there)."""
DOOR_SLACK_RAD = 0.15
"""How far short of its stop a door is swung wide."""


def _door_in_front(scene: Scene, goal: list[str], op: Opening) -> tuple[str, dict[str, Any]] | None:
    """The container's door, when it stands in front of the opening (within its width, widened by
    DOOR_WRIST_CM, and DOOR_FRONT_CM out of it), where the hand and wrist work: (the container,
    its hinge)."""
    target = scene.objects[goal[2]]
    parent = target.get("parent_name", "")
    joints = scene.objects.get(parent, {}).get("articulation") or target.get("parent_articulation") or []
    for j in joints:
        if j["kind"] != "hinge" or "part_min_cm" not in j:
            continue
        lo, hi = np.asarray(j["part_min_cm"], float), np.asarray(j["part_max_cm"], float)
        out = sorted((op.out_cm(lo[:2]), op.out_cm(hi[:2])))
        side = (float(lo[1 - op.axis]), float(hi[1 - op.axis]))
        if (
            out[1] > op.face
            and out[0] < op.face + DOOR_FRONT_CM
            and side[1] > op.side_lo - DOOR_WRIST_CM
            and side[0] < op.side_hi + DOOR_WRIST_CM
        ):
            return parent, j
    return None


def _wide_open(j: dict[str, Any]) -> float | None:
    """The angle a door is swung to, out of the way: DOOR_SLACK_RAD short of its open stop; None
    when it is already about that far open."""
    r = j["ranges"]
    closed = float(np.mean(r.get("close", [0.0])))
    far = float(max(r["open"], key=lambda v: abs(float(v) - closed)))
    wide = far - math.copysign(DOOR_SLACK_RAD, far - closed)
    return None if abs(float(j["value"]) - closed) > abs(wide - closed) - 0.1 else wide


def _leans_through_side(scene: Scene, goal: list[str]) -> bool:
    """The goal is worked with the gripper leaning through a side opening (not to be turned down)."""
    op = side_opening_of(scene, goal)
    found = _handle(scene.objects[goal[1]]) if op is not None else None
    return found is not None and op is not None and float(found[0] @ op.outward) >= 0.7


def _side_pending(arm: Arm, scene: Scene, goal: list[str]) -> bool:
    """An `in` goal through a side opening that LIBERO already counts (the body's origin is inside)
    but whose object is still held, or sticks out where the door would close on it."""
    op = side_opening_of(scene, goal)
    if op is None or not _leans_through_side(scene, goal):
        return False
    obj = scene.objects[goal[1]]
    return _handle_held(arm, obj) or _outmost(op, obj) > op.face - HANDLE_CLEAR_CM


def _outmost(op: Opening, obj: dict[str, Any]) -> float:
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    return max(op.sign * float(lo[op.axis]), op.sign * float(hi[op.axis]))


def _inmost(op: Opening, obj: dict[str, Any]) -> float:
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    return min(op.sign * float(lo[op.axis]), op.sign * float(hi[op.axis]))


def _handle_held(arm: Arm, obj: dict[str, Any]) -> bool:
    """The fingers are closed on the object's handle bar."""
    found = _handle(obj)
    if found is None:
        return False
    _, bar = found
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    p = arm.p
    return (
        float(np.linalg.norm(p[:2] - bar)) < 2.5
        and lo[2] - 1.0 < p[2] < hi[2] + 1.0
        and 0.08 < arm.g < HANDLE_OPENING - 0.1
    )


def through_side(arm: Arm, scene: Scene, goal: list[str], op: Opening) -> Reply | None:
    """Put a mug into a roofed container through its side opening. A hand pointing down fits only
    in front of the opening, so: the handle (pointing out of the opening) pinched from above, the
    mug carried in at a height between floor and ceiling until the hand reaches the face, set on
    the floor and let go; then, the gripper closed and leaning almost level (the hand stays
    outside, below the roof's height), the handle's end pushed in until the door can close past
    it. None when the object has no handle pointing out (the caller's skills then try)."""
    name, where = goal[1], _words(goal[2])
    obj = scene.objects[name]
    found = _handle(obj)
    if found is None or float(found[0] @ op.outward) < 0.7:
        return None
    h, bar = found
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    what = _words(name)
    p, g = arm.p, arm.g
    height = float(hi[2] - lo[2])
    yaw = math.atan2(h[1], h[0])  # fingers closing across the handle
    if _handle_held(arm, obj):
        lift = max(0.5, min(1.5, (op.ceiling_z - op.floor_z - height) / 2))
        carry_z = p[2] + (op.floor_z + lift - lo[2])
        side_goal = op.middle_cm + (op.side_cm(p[:2]) - op.side_cm((lo[:2] + hi[:2]) / 2))
        deep = op.face + HAND_HALF_CM[1] + HAND_SLACK_CM  # the hand's side still outside the face
        if _inmost(op, obj) > op.face + 0.5 and lo[2] < op.floor_z + lift - 1.0:
            return _reply(
                f"I lift the {what} by its handle to above the {where}'s floor.",
                [0, 0, carry_z - p[2]],
                None,
                0.0,
            )
        if op.out_cm(p[:2]) > deep + 0.5:
            target = op.point(max(deep, op.out_cm(p[:2]) - MAX_STEP_CM), side_goal)
            return _reply(
                f"I carry the {what} into the {where} through its opening.",
                np.append(target - p[:2], carry_z - p[2]),
                None,
                0.0,
            )
        if lo[2] > op.floor_z + 0.8:
            return _reply(
                f"The {what} is inside the {where}; I set it on its floor.",
                [0, 0, op.floor_z + 0.05 - lo[2]],
                None,
                0.0,
            )
        return _reply(f"The {what} stands on the floor of the {where}; I let go.", None, None, 1.0)
    if _inmost(op, obj) < op.face:  # set inside with its handle sticking out: pushed in by the handle
        return _push_handle_in(arm, obj, what, where, op, bar)
    door = _door_in_front(scene, goal, op)
    wide = _wide_open(door[1]) if door is not None else None
    if door is not None and wide is not None:  # a door half open stands where the arm will work
        parent, j = door
        why = f"The door of the {_words(parent)} is in the way of my arm; "
        anchor = np.asarray(j["anchor_cm"], float)
        along = math.copysign(1.0, op.middle_cm - op.side_cm(anchor[:2]))  # closed: across the opening
        closed_dir = op.point(0.0, along) - op.point(0.0, 0.0)
        turn = float(j["value"]) * float(np.asarray(j["axis"])[2])
        plane = math.atan2(closed_dir[1], closed_dir[0]) + turn
        return _door(arm, scene, parent, j, "open", why, goal_rad=wide, plane_rad=plane)
    grasp = np.append(bar, lo[2] + HANDLE_GRASP_FRACTION * height)
    rot = arm.turn_to(yaw)
    squared = float(np.max(np.abs(rot))) < 0.04
    dxy = float(np.linalg.norm(grasp[:2] - p[:2]))
    if g < HANDLE_OPENING - 0.1:
        return _reply(
            "The gripper holds nothing I need; I open it and move up.", [0, 0, 6.0], None, HANDLE_OPENING
        )
    grip = HANDLE_OPENING if abs(g - HANDLE_OPENING) > 0.1 else None
    if dxy < 0.8 and abs(p[2] - grasp[2]) < 0.6 and squared:
        return _reply(f"The handle of the {what} is between the fingers; I close them.", None, None, 0.0)
    above = np.array([grasp[0], grasp[1], float(hi[2]) + 3.0])
    if dxy < 0.8 and not squared:
        return _reply(
            f"I am above the handle of the {what}; I square the gripper across it.", None, rot, grip
        )
    step = travel(arm, scene, grasp if dxy < 0.8 else above, {name}, yaw=yaw)
    if dxy < 0.8:
        return _reply(f"I lower the open gripper round the handle of the {what}.", step, rot, grip)
    return _reply(f"I move the open gripper above the handle of the {what}.", step, rot, grip)


def _push_handle_in(
    arm: Arm, obj: dict[str, Any], what: str, where: str, op: Opening, bar: np.ndarray
) -> Reply:
    """Push an object standing in a side opening further in by the end of its handle: closed
    fingertips, the gripper leaning almost level towards it (its hand behind the fingertips, out of
    the opening), low on the handle so the object slides rather than tips."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    p, g = arm.p, arm.g
    rot = arm.lean_to(-op.outward, SIDE_TILT_RAD)  # square to the opening, whichever way the handle turned
    leaning = float(np.max(np.abs(rot))) < 0.06
    z = float(lo[2]) + HANDLE_PUSH_FRACTION * float(hi[2] - lo[2])
    end = _outmost(op, obj)
    side = op.side_cm(bar)
    togo = end - (op.face - HANDLE_CLEAR_CM - 0.5)
    touch = op.point(end + FINGERTIP_BELOW_TCP_CM + 0.3, side)  # the tool point with fingertips on the end
    stand = op.point(end + 8.0, side)
    if g > 0.2:
        near = float(np.linalg.norm(p[:2] - bar)) < 4.0 and p[2] < hi[2] + 3.0
        if near:
            return _reply(f"I lift the open fingers off the handle of the {what}.", [0, 0, 6.0], None, None)
        return _reply(f"I close the gripper to push the {what} further into the {where}.", None, None, 0.0)
    if not leaning:
        high = np.append(stand, z + 6.0)
        if float(np.linalg.norm(p - high)) > 1.5:
            close = float(np.linalg.norm(p[:2] - high[:2])) < 12.0 and p[2] > z + 3.0
            return _reply(
                f"I move out in front of the {what}, turning the gripper to lean towards it.",
                high - p,
                rot if close else None,
            )
        return _reply(f"I lean the gripper towards the handle of the {what}.", None, rot)
    off_line = abs(op.side_cm(p[:2]) - side)
    if (
        off_line < 1.0
        and abs(p[2] - z) < 1.0
        and -0.8 < op.out_cm(p[:2]) - op.out_cm(touch) < 1.0
        and togo > 0
    ):
        step = op.point(op.out_cm(p[:2]) - min(togo + 0.5, MAX_STEP_CM), side) - p[:2]
        return _reply(
            f"I push the {what} {togo + 0.5:.1f} cm further into the {where}.", np.append(step, 0.0)
        )
    if off_line < 1.0 and abs(p[2] - z) < 1.0 and op.out_cm(p[:2]) > op.out_cm(touch):
        return _reply(
            f"I bring the fingertips against the end of the {what}'s handle.", np.append(touch - p[:2], 0.0)
        )
    return _reply(
        f"I lower the leaning gripper in line with the {what}'s handle.", np.append(stand - p[:2], z - p[2])
    )


# -- joints: drawers, doors, knobs --------------------------------------------------------------
def _open_direction(j: dict[str, Any]) -> np.ndarray:
    """The way a slide joint's handle moves as it opens (base frame, unit)."""
    axis = np.asarray(j["axis"], float)
    r = j["ranges"]
    sign = np.sign(np.mean(r.get("open", [1.0])) - np.mean(r.get("close", [0.0])))
    return axis * sign


def _is_open(j: dict[str, Any]) -> bool:
    """LIBERO's own test: past the edge of the open range that faces the closed one."""
    r, closed = j["ranges"]["open"], float(np.mean(j["ranges"].get("close", [0.0])))
    return bool(j["value"] < max(r)) if np.mean(r) < closed else bool(j["value"] > min(r))


def _remaining(j: dict[str, Any], how: str) -> float:
    """How far (joint units) the joint still has to go to be open / closed (with a margin)."""
    r = j["ranges"]
    closed, opened = float(np.mean(r.get("close", [0.0]))), float(np.mean(r.get("open", [1.0])))
    goal = opened if how == "open" else closed
    return goal - float(j["value"])


def _opened_cm(j: dict[str, Any]) -> float:
    """How far (cm) a slide's part will have moved once pulled open: to the far edge of its open
    range (the pull overshoots the middle of the range by 1.5 cm and stops at the joint's end)."""
    r = j["ranges"]
    closed = float(np.mean(r.get("close", [0.0])))
    far = max(r["open"], key=lambda v: abs(float(v) - closed))
    return abs(float(far) - float(j["value"])) * 100.0


def operate(arm: Arm, scene: Scene, name: str, j: dict[str, Any], how: str, why: str = "") -> Reply:
    """Open or close what a joint moves: a drawer by its handle, a door by its edge."""
    if j["kind"] == "slide":
        return _slide(arm, scene, name, j, how, why)
    return _door(arm, scene, name, j, how, why)


def _slide(arm: Arm, scene: Scene, name: str, j: dict[str, Any], how: str, why: str) -> Reply:
    hmin, hmax = np.asarray(j["handle_min_cm"], float), np.asarray(j["handle_max_cm"], float)
    u = _open_direction(j)
    travel_cm = abs(_remaining(j, how)) * 100.0
    if how == "close":
        return _push_drawer(arm, name, hmin, hmax, u, travel_cm, why)
    parent = scene.objects.get(name, {}).get("parent")
    top = float(parent["max_cm"][2]) if parent is not None else float(hmax[2])
    return _pull_from_front(arm, name, hmin, hmax, u, travel_cm, why, top)


def _pull_from_front(
    arm: Arm,
    name: str,
    hmin: np.ndarray,
    hmax: np.ndarray,
    u: np.ndarray,
    travel_cm: float,
    why: str,
    clear_z: float,
) -> Reply:
    """Open a drawer by its handle: the gripper turned level high in front of it (clear of the
    cabinet while it turns), pointing into the drawer's front with the fingers above and below
    the bar, brought onto the handle, closed, and pulled."""
    grip = (hmin + hmax) / 2
    u = np.array([u[0], u[1], 0.0]) / max(float(np.linalg.norm(u[:2])), 1e-6)
    rot = arm.turn_level(math.atan2(-u[1], -u[0]) + math.pi / 2)
    level = float(np.max(np.abs(rot))) < 0.06
    p, g = arm.p, arm.g
    what = _words(name)
    rel = p - grip
    along = float(rel @ u)
    on_line = float(np.linalg.norm(rel - along * u)) < 1.2 and -1.0 < along < 12.0
    if level and float(np.linalg.norm(rel)) < 2.0 and 0.02 < g < 0.45:
        step = min(travel_cm + 1.5, MAX_STEP_CM)
        return _reply(
            f"{why}I hold the handle of the {what}; I pull it {step:.1f} cm open.", u * step, None, 0.0
        )
    if level and float(np.linalg.norm(rel)) < 1.2:
        return _reply(f"The handle of the {what} is between the fingers; I close them.", None, None, 0.0)
    grip_cmd = 0.7 if g < 0.45 else None
    if g < 0.45 and on_line:
        return _reply(
            f"{why}I back away from the handle of the {what} and open the gripper.", u * 6.0, None, 0.7
        )
    high = np.append(grip[:2] + u[:2] * 9.0, max(float(grip[2]), clear_z + 8.0))
    if not level:
        turn = rot if p[2] > clear_z - 6.0 else None  # turn only once up near the cabinet's top
        if float(np.linalg.norm(p - high)) > 1.5:
            return _reply(
                f"{why}I move high in front of the {what}, turning the gripper level.",
                high - p,
                turn,
                grip_cmd,
            )
        return _reply(
            f"{why}I turn the gripper level, pointing at the front of the {what}.", None, rot, grip_cmd
        )
    if on_line:
        return _reply(
            f"{why}I move the level gripper straight onto the handle of the {what}.", grip - p, None, grip_cmd
        )
    stand = grip + u * 9.0
    return _reply(
        f"{why}I lower the level gripper in front of the handle of the {what}.", stand - p, None, grip_cmd
    )


def _push_drawer(
    arm: Arm, name: str, hmin: np.ndarray, hmax: np.ndarray, u: np.ndarray, travel_cm: float, why: str
) -> Reply:
    """Close a drawer: closed fingertips against the outside of its handle, the gripper leaning 45
    degrees into the push so the wrist and hand stay clear of the handles above, pushed in."""
    u = np.array([u[0], u[1], 0.0]) / max(float(np.linalg.norm(u[:2])), 1e-6)
    handle = (hmin + hmax) / 2
    contact = handle + u * 1.6  # the fingertips against the outside of the handle bar
    z = float(handle[2])  # low: the hand's corner then passes under the handle above
    p, g = arm.p, arm.g
    push_dir = -u
    lean = np.array([math.pi, -LEAN_RAD, math.atan2(push_dir[1], push_dir[0])])
    rot = wrap(lean - arm.rpy)
    leaning = float(np.max(np.abs(rot))) < 0.06
    what = _words(name)
    rel = p[:2] - contact[:2]
    along = float(rel @ u[:2])
    off_line = abs(float(rel @ np.array([-u[1], u[0]])))
    if leaning and off_line < 1.5 and along < 1.5 and abs(p[2] - z) < 1.5 and g < 0.2:
        step = min(travel_cm + 1.5, MAX_STEP_CM)
        return _reply(
            f"{why}I push the {what} {step:.1f} cm closed.", np.append(push_dir[:2] * step, 0.0), None, None
        )
    hover_z = float(hmax[2]) + 8.0
    grip = 0.0 if g > 0.2 else None
    dxy = contact[:2] - p[:2]
    if np.linalg.norm(dxy) > 1.0:
        step = np.array([dxy[0], dxy[1], hover_z - p[2]])
        if p[2] < hover_z - 1.0 and np.linalg.norm(dxy) > 3.0:
            step = np.array([0.0, 0.0, hover_z - p[2]])
        return _reply(
            f"{why}I move above the front of the {what}, leaning the gripper into the push.", step, rot, grip
        )
    if not leaning:
        return _reply(f"{why}I lean the gripper into the push.", None, rot, grip)
    return _reply(
        f"{why}I lower the fingertips against the front of the {what}.",
        [dxy[0], dxy[1], z - p[2]],
        None,
        grip,
    )


DOOR_STANDOFF_CM = 4.0
"""How far off the line from the hinge to the door's handle the tool point stands to push: the hand,
its thin side to the door, lowers beside it rather than onto its top edge."""


def _door(
    arm: Arm,
    scene: Scene,
    name: str,
    j: dict[str, Any],
    how: str,
    why: str,
    goal_rad: float | None = None,
    plane_rad: float | None = None,
) -> Reply:
    """Swing a door about its hinge by pushing its face near the free edge: the gripper pointing
    down with its fingers along the door (the hand's thin side towards it), lowered beside the face
    and carried round the hinge, turning with the door. The door's line is the hinge's to its handle
    unless `plane_rad` gives the panel's own direction (from the inner side the handle's line
    lies beyond the panel); it swings to `goal_rad` when given."""
    anchor = np.asarray(j["anchor_cm"], float)
    hmin, hmax = np.asarray(j["handle_min_cm"], float), np.asarray(j["handle_max_cm"], float)
    edge = (hmin + hmax) / 2
    r_vec = edge[:2] - anchor[:2]
    radius = float(np.linalg.norm(r_vec))
    theta = math.atan2(r_vec[1], r_vec[0]) if plane_rad is None else plane_rad
    # radians, + = counter-clockwise about the (vertical) axis; to `goal_rad` when given
    togo = goal_rad - float(j["value"]) if goal_rad is not None else _remaining(j, how)
    axis_z = float(np.asarray(j["axis"])[2])
    sense = math.copysign(1.0, togo * axis_z)
    rho = 0.75 * radius  # push on the face, three quarters out
    # stand on the side of the face the push comes from, off the door
    normal = sense * np.array([-math.sin(theta), math.cos(theta)])
    contact = anchor[:2] + rho * np.array([math.cos(theta), math.sin(theta)]) - normal * DOOR_STANDOFF_CM
    z = float((hmin[2] + hmax[2]) / 2)
    p, g = arm.p, arm.g
    rot = arm.turn_to(theta - math.pi / 2)  # the fingers close along the door
    squared = float(np.max(np.abs(rot))) < 0.06
    if g > 0.2:
        return _reply(
            "I close the gripper to push with the fingertips.",
            [0, 0, max(0.0, hmax[2] + 5 - p[2])],
            None,
            0.0,
        )
    rel = p[:2] - anchor[:2]
    at_face = (
        abs(float(np.linalg.norm(rel)) - rho) < 3.0 and abs(wrap(math.atan2(rel[1], rel[0]) - theta)) < 0.4
    )
    if at_face and abs(p[2] - z) < 2.0:
        step_rad = sense * min(abs(togo) + 0.15, MAX_STEP_CM / rho * 0.95, MAX_TURN_RAD)
        ang = math.atan2(rel[1], rel[0]) + step_rad
        target = anchor[:2] + float(np.linalg.norm(rel)) * np.array([math.cos(ang), math.sin(ang)])
        return _reply(
            f"{why}I push the door of the {name} {'closed' if how == 'close' else 'open'}.",
            np.append(target - p[:2], 0.0),
            np.array([0.0, 0.0, step_rad * axis_z]),  # the hand turns with the door
            None,
        )
    hover = hmax[2] + 5.0
    dxy = contact - p[:2]
    if np.linalg.norm(dxy) > 1.0:
        if p[2] < hover - 1.0:
            return _reply(
                f"{why}I rise before going to the door of the {name}.", [0, 0, hover - p[2]], None, None
            )
        return _reply(
            f"{why}I move beside the door of the {name}, my fingers along it.",
            [dxy[0], dxy[1], hover - p[2]],
            rot,
            None,
        )
    if not squared:
        return _reply(f"{why}I turn my fingers along the door of the {name}.", None, rot, None)
    return _reply(f"{why}I lower the fingertips beside the door.", [dxy[0], dxy[1], z - p[2]], None, None)


def turn_knob(arm: Arm, scene: Scene, name: str, j: dict[str, Any], how: str) -> Reply:
    """Turn a knob (a hinge about the vertical) by its grip bar: fingers across the bar, centred on
    the axis, then the wrist turned."""
    anchor = np.asarray(j["anchor_cm"], float)
    top = float(np.asarray(j.get("part_max_cm", j["anchor_cm"]))[2])
    r = j["ranges"]
    goal = float(np.mean(r["turnon"] if how == "turnon" else r["turnoff"]))
    togo = goal - float(j["value"])
    base_yaw = float(scene.objects.get(name, {}).get("yaw_rad", 0.0))
    yaw = base_yaw + float(j["value"])  # the bar lies along the knob's x axis: close across it
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    grip = np.array([anchor[0], anchor[1], top - 1.5])
    on_knob = float(np.linalg.norm(p - grip)) < 1.5
    what = _words(name)
    if on_knob and 0.02 < g < 0.6:
        turn = float(np.clip(togo + math.copysign(0.2, togo), -MAX_TURN_RAD, MAX_TURN_RAD))
        return _reply(
            f"I hold the knob of the {what}; I turn it {turn:+.2f} rad.",
            None,
            np.array([0.0, 0.0, turn]),
            None,
        )
    squared = float(np.max(np.abs(rot))) < 0.05
    if on_knob and squared:
        return _reply(f"The knob of the {what} is between the fingers; I close them.", None, None, 0.0)
    if g < 0.85:
        return _reply("I open the gripper to take the knob.", [0, 0, max(0.0, top + 6 - p[2])], None, 1.0)
    dxy = float(np.linalg.norm(grip[:2] - p[:2]))
    above = np.array([grip[0], grip[1], top + 4.0])
    if dxy < 0.8 and not squared:
        return _reply(f"I am above the knob of the {what}; I square the gripper to its bar.", None, rot, None)
    step = travel(arm, scene, grip if dxy < 0.8 else above, {name})
    if dxy < 0.8:
        return _reply(f"I lower the open gripper onto the knob of the {what}.", step, rot, None)
    return _reply(f"I move above the knob of the {what}.", step, rot, None)


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


def _libero_experts() -> dict[str, Any]:
    """Every task of the LIBERO family (through the registry) whose LIBERO suite the expert solves:
    a name's path holds its suite (`libero_goal/3`, `libero_pro/swap/libero_goal/3`, ...)."""
    from pear_agent.registry import families

    fam = families().get("libero")
    names = fam.task_names() if fam is not None else []
    return {name: libero_expert for name in names if set(name.split("/")) & set(EXPERT_SUITES)}


LIBERO_EXPERTS = _libero_experts()
