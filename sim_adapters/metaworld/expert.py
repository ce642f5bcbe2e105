"""Meta-World's own scripted policies (`metaworld.policies.ENV_POLICY_MAP`) as this family's expert,
planning each turn by looking ahead in a copy of the simulation.

Each turn the backend's privileged facts carry the simulation's exact state (`metaworld_sim`:
MuJoCo's integration state, the task's seed and Meta-World's observation; never shown to a model).
The expert restores it into a private environment of the same task and variation and runs the
task's policy forward there, natively (observation -> `get_action` -> `step()`), for up to
`LOOKAHEAD_STEPS` control steps. The turn ends at the first natural waypoint of that rollout:

- the policy changes its grip effort (the fingers then act on a fresh observation);
- the policy stops commanding motion (it has arrived, or waits);
- the commanded direction turns by more than ~45 degrees from the segment's;
- the task's own success check holds in the copy; the hand would leave the per-turn cap.

Directions are compared over `WINDOW_STEPS` summed commands and a change counts only when it
persists for `CONFIRM_STEPS` steps: a flip that reverses sooner (a policy dithering on a branch
boundary, which averages out at 80 Hz) is not a waypoint. The turn's action is the displacement
the policy drove the hand through up to the waypoint (Meta-World's mocap, which leads the hand and
presses on where contact holds it back) and the segment's grip effort as the protocol's absolute
gripper command (effort e -> (1 - e) / 2), with `press` where the copy's hand was held back by
contact while the policy drove it on (a press into a handle, a plate dragged): the runtime then
keeps pushing instead of reporting `blocked`. A grip change at the start of a leg that the
per-turn cap cuts waits for the leg's last turn (a policy that closes the fingers while
descending times the close by its own speed, which one capped turn cannot keep); the grip a policy
starts with is sent at once (the reset's open fingers were nobody's choice).

A turn is one straight move: where the policy's path bends (its mocap averaged over
`BEND_WINDOW_STEPS`, off the straight line by more than `BEND_CM`: a descent onto a peg, then
away with it) the turn ends at the bend. And a turn that moves an object, or brings the hand near
one, is checked: the copy runs the turn's action through the protocol's own move (the backend's
`execute`, reached and still) and compares where the objects end with where the policy's own steps
put them; where they differ by more than `MATCH_CM` (a ball kicked at the move's speed where the
policy nudges it), the turn is halved until they agree, as a model that predicts its move's effect
would shorten it.

The real simulation is never touched: the copy is a separate environment. Without the state (an
old record, a server told only the observation) the expert cannot plan and says so.
"""

from __future__ import annotations

import functools
import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from pear_agent.robot.backend import PartCommand
from sim_adapters.metaworld import PREFIX
from sim_adapters.metaworld.backend import (
    SIM_STATE,
    MetaWorldBackend,
    load_metaworld_robot,
    restore_state,
    to_ours,
)

LOOKAHEAD_STEPS = 60
"""Control steps (0.75 s) one turn may stand for: a waypoint at the latest after this many."""
CONFIRM_STEPS = 4
"""A change (grip, stop, direction) is a waypoint only when it holds this many steps in a row."""
EFFORT_CHANGE = 0.2
"""A grip effort change larger than this is a grip change."""
WINDOW_STEPS = 8
"""Directions are compared over this many steps' summed commands (a dither's flips cancel)."""
TURN_COS = 0.5
"""Summed commands whose direction is more than 60 degrees from the segment's first turn the path."""
STILL_CM = 0.05
"""A commanded step shorter than this (0.5 mm) asks for no motion: the policy waits or has arrived."""
MAX_MOVE_CM = 9.9
"""The segment ends before the tool point would leave the per-turn cap (10 cm on this robot)."""
CHECK_EVERY = 8
"""The look-ahead checks every this many steps whether its waypoint is already certain."""
PRESS_STEPS = 3
"""Steps in which the hand moved less than `PRESS_RATIO` of what the policy commanded (at least
`PRESS_MIN_CM`): this many make the turn a press (the hand is held back by contact)."""
PRESS_RATIO = 0.15
PRESS_MIN_CM = 0.3
BEND_CM = 1.0
"""A turn is a straight move: where the policy's path (averaged over `BEND_WINDOW_STEPS`, so a
dither shrinks) strays more than this from a straight line, the turn ends at the bend."""
BEND_WINDOW_STEPS = 4
"""The path's points are averaged over this many steps before the bend test (a dither's flips
shrink to a fraction of a cm; a corner of a few steps' descent stays)."""
OBJECT_MOVED_CM = 0.5
"""An object that moves more than this in the look-ahead makes the turn one to check in the copy."""
NEAR_CM = 5.0
"""So does a hand that comes this close to an object in the look-ahead (it may knock it)."""
MATCH_CM = 1.5
"""A checked turn, run through the protocol's own move in the copy, must leave every object within
this of where the policy's own steps leave it; else the turn is shortened (halved) and checked again."""
MIN_CHECKED_STEPS = 4
"""A turn is not shortened below this many of the policy's steps."""
IMPROVES = 0.5
"""Where no shorter turn matches, the closest stands only if it misses by at most this part of
what the whole turn misses by (else the whole turn: shortening that does not help costs turns)."""


@functools.lru_cache(maxsize=64)
def native_policy(name: str) -> Any:
    """Meta-World's scripted policy for a v3 task."""
    from metaworld.policies import ENV_POLICY_MAP  # optional: .venv-metaworld

    return ENV_POLICY_MAP[name]()


class _Copies:
    """One private backend (its own environment) per task, reset to an episode's variation when it
    changes (the variation also moves bodies in the model, so the copy is reset with the same task):
    the look-ahead steps its environment, the check runs the protocol's own move on it."""

    def __init__(self) -> None:
        self._backends: dict[str, tuple[MetaWorldBackend, int]] = {}
        self.lock = threading.Lock()
        """One look-ahead at a time (`pear-agent serve` answers requests on several threads)."""

    def get(self, name: str, seed: int) -> MetaWorldBackend:
        be, loaded = self._backends.get(name, (None, -1))
        if be is None:
            be = MetaWorldBackend(load_metaworld_robot(), PREFIX + name, render=False)
        if loaded != seed:
            be.reset(seed)
        self._backends[name] = (be, seed)
        return be


_COPIES = _Copies()


@dataclass
class Rollout:
    """The policy run forward in the copy: per step its command (cm, Meta-World frame) and grip
    effort; per step boundary the tool point (m), where the policy drove it (`mocap_m`: the start's
    tool point moved as the mocap moved, ahead of the hand where contact holds it back) and
    whether the task's check held."""

    commands_cm: np.ndarray
    efforts: np.ndarray
    tool_m: np.ndarray
    success: np.ndarray
    mocap_m: np.ndarray
    objects_m: np.ndarray | None = None
    """Per step boundary Meta-World's two object positions (observation 4:7 and 11:14), m."""


def rollout(name: str, sim: dict[str, Any], steps: int) -> Rollout:
    """The task's policy for `steps` control steps from the state `sim` (the backend's
    `metaworld_sim` fact), in the private copy of the task."""
    return _run(name, sim, steps, check=False)[0]


def plan(name: str, sim: dict[str, Any]) -> tuple[Rollout, int, str]:
    """(rollout, steps, why): the look-ahead and its first waypoint (`waypoint` over
    `LOOKAHEAD_STEPS`). The rollout stops early once the waypoint is certain: a waypoint found
    `WINDOW_STEPS + CONFIRM_STEPS` or more steps before the rollout's end is the one the whole
    rollout gives (every window and confirmation it rests on is complete)."""
    r, found = _run(name, sim, LOOKAHEAD_STEPS + WINDOW_STEPS, check=True)
    k, why = found if found else waypoint(r, LOOKAHEAD_STEPS)
    bend = unbent(r, k)
    return (r, bend, "the path bends") if bend < k else (r, k, why)


def unbent(r: Rollout, k: int) -> int:
    """The first `k` steps cut where the policy's path (its mocap, each point the mean of the
    `BEND_WINDOW_STEPS` around it, so that a dither shrinks; only points with a whole window) strays more
    than `BEND_CM` from the straight line between that averaged path's ends, at the farthest point,
    until the rest is straight: a turn is one straight move."""
    w = BEND_WINDOW_STEPS
    half = w // 2
    while k >= w + 2:
        c = np.cumsum(np.vstack([np.zeros(3), r.mocap_m[: k + 1]]), axis=0)
        mid = np.arange(half, k + 1 - (w - half))  # points with a whole window
        smooth = (c[mid + w - half] - c[mid - half]) / w
        a, ab = smooth[0], smooth[-1] - smooth[0]  # the averaged path's own ends: a dither's offset cancels
        t = np.clip((smooth - a) @ ab / max(float(ab @ ab), 1e-12), 0.0, 1.0)
        dev = np.linalg.norm(smooth - (a + t[:, None] * ab), axis=1)
        j = int(np.argmax(dev))
        if dev[j] * 100 <= BEND_CM:
            break
        k = int(mid[j])
    return k


def _run(name: str, sim: dict[str, Any], steps: int, check: bool) -> tuple[Rollout, tuple[int, str] | None]:
    with _COPIES.lock:
        return _steps(_COPIES.get(name, int(sim["seed"])).env, name, sim, steps, check)


def _steps(
    env: Any, name: str, sim: dict[str, Any], steps: int, check: bool
) -> tuple[Rollout, tuple[int, str] | None]:
    restore_state(env, sim)
    policy = native_policy(name)
    obs = np.asarray(sim["obs"], dtype=float)
    lead = np.asarray(env.data.mocap_pos[0], float) - np.asarray(env.tcp_center, float)
    cmds, efforts, tools, success = [], [], [np.asarray(env.tcp_center, float).copy()], [False]
    mocaps = [np.asarray(env.data.mocap_pos[0], float) - lead]
    objects = [_objects(obs)]

    def pack() -> Rollout:
        arrays = (cmds, efforts, tools, success, mocaps, objects)
        return Rollout(*(np.array(a) for a in arrays))

    for n in range(1, steps + 1):
        with warnings.catch_warnings():  # "Constant(s) may be too high": Meta-World's own notice
            warnings.simplefilter("ignore")
            # a copy: some policies change the observation they are given in place
            a = np.clip(np.asarray(policy.get_action(obs.copy()), dtype=float), -1.0, 1.0)
        obs, _, _, _, info = env.step(a.astype(np.float32))
        obs = np.asarray(obs, dtype=float)
        cmds.append(a[:3])
        efforts.append(float(a[3]))
        tools.append(np.asarray(env.tcp_center, float).copy())
        mocaps.append(np.asarray(env.data.mocap_pos[0], float) - lead)
        success.append(bool(info.get("success")))
        objects.append(_objects(obs))
        sure = n - WINDOW_STEPS - CONFIRM_STEPS
        if check and n < steps and n % CHECK_EVERY == 0 and sure >= 1:
            k, why = waypoint(pack(), sure)
            if why != "the step budget":
                return pack(), (k, why)
    return pack(), None


def _objects(obs: np.ndarray) -> np.ndarray:
    """Meta-World's two object positions from its observation, (2, 3) m."""
    return np.array([obs[4:7], obs[11:14]], dtype=float)


def _persists(flags: np.ndarray, k: int) -> bool:
    """Whether the change at step `k` holds for `CONFIRM_STEPS` steps (or to the rollout's end)."""
    return bool(np.all(flags[k : k + CONFIRM_STEPS]))


def _windows(commands_cm: np.ndarray) -> np.ndarray:
    """Each step's command summed with the next `WINDOW_STEPS - 1` (a dither's flips cancel)."""
    c = np.cumsum(np.vstack([np.zeros(3), commands_cm]), axis=0)
    ends = np.minimum(np.arange(len(commands_cm)) + WINDOW_STEPS, len(commands_cm))
    return c[ends] - c[: len(commands_cm)]


def waypoint(r: Rollout, horizon: int) -> tuple[int, str]:
    """(steps, why): where the rollout's first waypoint lies within its first `horizon` steps
    (the rest of the rollout only confirms a change)."""
    n = len(r.efforts)
    grip = np.abs(r.efforts - r.efforts[0]) > EFFORT_CHANGE
    win = _windows(r.commands_cm)
    span = np.minimum(WINDOW_STEPS, n - np.arange(n))
    norms = np.linalg.norm(win, axis=1)
    still = norms / span < STILL_CM
    moving = np.nonzero(~still)[0]
    first = int(moving[0]) if moving.size else n
    ref = win[first] / max(float(norms[first]), 1e-12) if moving.size else np.zeros(3)
    turned = ~still & ((win @ ref) / np.maximum(norms, 1e-12) < TURN_COS)
    for k in range(1, min(horizon, n) + 1):
        if r.success[k]:
            return k, "the task's check holds"
        reach = max(np.linalg.norm(r.tool_m[k] - r.tool_m[0]), np.linalg.norm(r.mocap_m[k] - r.tool_m[0]))
        if float(reach) * 100 > MAX_MOVE_CM:
            return k - 1, "a turn's reach"
        if k >= n:
            break
        if grip[k] and _persists(grip, k):
            return k, "the grip changes"
        if k > first and still[k] and _persists(still, k):
            return k, "the policy stops"
        if k == first:  # it waited and now moves: the wait was this turn
            return k, "the policy waits"
        if k > first and turned[k] and _persists(turned, k):
            return k, "the path turns"
    return min(horizon, n), "the step budget"


def pressed(r: Rollout, k: int) -> bool:
    """Whether the hand was held back by contact in the first `k` steps: moved less than
    `PRESS_RATIO` of the policy's command in `PRESS_STEPS` or more of them."""
    moved_cm = np.linalg.norm(np.diff(r.tool_m[: k + 1], axis=0), axis=1) * 100
    asked_cm = np.linalg.norm(r.commands_cm[:k], axis=1)
    held = (asked_cm >= PRESS_MIN_CM) & (moved_cm < PRESS_RATIO * asked_cm)
    return int(held.sum()) >= PRESS_STEPS


def metaworld_expert(state: dict[str, Any], priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One turn of Meta-World's own policy for `priv["task"]`, planned by looking ahead (see the module)."""
    name = priv["task"]
    sim = priv.get(SIM_STATE)
    if sim is None:
        return (
            "I cannot plan: this turn's facts carry no simulation state to look ahead in.",
            {},
        )
    r, k, why = plan(name, sim)
    effort = float(r.efforts[0])
    held = sim.get("effort")
    if held is not None and why == "a turn's reach" and abs(effort - float(held)) > EFFORT_CHANGE:
        effort = float(held)  # the leg goes on past this turn: its grip change rides with the leg's end
    k, checked = _checked(name, sim, r, k, effort)
    if checked:
        why += f", shortened to {k} steps to match the policy's effect on the objects"
    move = to_ours(r.mocap_m[k] - r.tool_m[0]) * 100.0
    act = _action(move, effort, pressed(r, k))
    text = (
        f"Meta-World's {name} policy, looked ahead {k} control steps until {why}: move "
        f"{np.linalg.norm(move):.1f} cm with grip effort {effort:+.2f}"
        + (", pressing through contact." if "press" in act else ".")
    )
    return text, {"arm": act}


def _action(move_cm: np.ndarray, effort: float, press: bool) -> dict[str, Any]:
    """The protocol's action for a move (cm, our frame), a grip effort and whether it presses."""
    act: dict[str, Any] = {"gripper": round(float(np.clip((1.0 - effort) / 2.0, 0.0, 1.0)), 3)}
    if float(np.linalg.norm(move_cm)) >= 0.05:
        act["position"] = [round(float(v), 2) for v in move_cm]
        if press:
            act["press"] = True
    return act


def outcome(name: str, sim: dict[str, Any], act: dict[str, Any]) -> np.ndarray:
    """Where the objects are, (2, 3) m, after the protocol's own move (`MetaWorldBackend.execute`:
    move until reached and still, blocked, pressed or timed out) runs `act` from the state `sim`, in
    the private copy of the task."""
    with _COPIES.lock:
        be = _COPIES.get(name, int(sim["seed"]))
        restore_state(be.env, sim)
        be._obs = np.asarray(sim["obs"], dtype=float).copy()
        held = sim.get("effort")
        be._effort = -1.0 if held is None else float(held)
        be._driving, be._goal = False, be.tcp()
        target = None
        if "position" in act:
            target = to_ours(be.tcp()) + np.asarray(act["position"], dtype=float) / 100.0
        press = bool(act.get("press"))
        be.execute({"arm": PartCommand(joints_rad=target, gripper=act["gripper"], press=press)})
        return _objects(be._obs)


def _checked(name: str, sim: dict[str, Any], r: Rollout, k: int, effort: float) -> tuple[int, bool]:
    """(steps, shortened): a turn that moves an object in the look-ahead (or passes near one) is
    run through the protocol's own move in the copy; where that leaves an object more than
    `MATCH_CM` from where the policy's own steps leave it (a ball kicked at the move's speed where
    the policy nudges it, an object knocked), the turn is halved until it matches, down to
    `MIN_CHECKED_STEPS` (the closest then, if it misses by `IMPROVES` of what the whole turn
    misses by or less). A turn that changes the grip is left whole: its fingers close (or open)
    over the move, and a shorter move would close them higher."""
    held = sim.get("effort")
    if r.objects_m is None or k < 2 * MIN_CHECKED_STEPS:
        return k, False
    if abs(effort - (-1.0 if held is None else float(held))) > EFFORT_CHANGE:
        return k, False  # the grip changes: the fingers close over the whole move, however long
    objs = r.objects_m[: k + 1]
    moved = np.linalg.norm(objs - objs[0], axis=2).max()
    real = np.any(objs[0] != 0.0, axis=1)  # a task with one object leaves the second at zero
    near = np.linalg.norm(r.tool_m[: k + 1, None, :] - objs, axis=2)[:, real].min(initial=np.inf)
    if moved * 100 <= OBJECT_MOVED_CM and near * 100 > NEAR_CM:
        return k, False
    best, best_err, whole, kk = k, np.inf, np.inf, k
    while kk >= MIN_CHECKED_STEPS:
        move = to_ours(r.mocap_m[kk] - r.tool_m[0]) * 100.0
        got = outcome(name, sim, _action(move, effort, pressed(r, kk)))
        err = float(np.linalg.norm(got - r.objects_m[kk], axis=1).max()) * 100
        whole = err if kk == k else whole
        if err < best_err:
            best, best_err = kk, err
        if err <= MATCH_CM:
            break
        kk //= 2
    if best_err > MATCH_CM and best_err > IMPROVES * whole:
        return k, False  # shorter turns miss as well: the whole one
    return best, best < k
