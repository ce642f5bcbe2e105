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

A push the per-turn cap cuts (an object still moving under the policy's drive at the turn's end,
the policy driving about as fast as a move goes) would be let go mid-push by a turn that ends at
rest: a thermos on free slide joints coasts on, out of line. Where the runtime takes chunks, such
a push goes on in the same reply: the turn and the legs after it (each to the next waypoint of the
same rollout, at most `MAX_LEGS`, while the push goes on) are one chunk, which the backend runs as
one motion. The whole chunk is checked in the copy first, through the backend's own chunk: it
stands where it leaves the objects within `MATCH_CM` of where the policy's own steps leave them,
where the task's check holds during it, or where it misses by less than the single (checked) turn
misses; else the turn goes alone. The chunking asks for each later step on the state the previous
one predicts, with the facts still the reply's first: the expert answers with the planned push's
next leg, and anywhere else ends the chunk (a look-ahead from the first state would plan the same
turn again).

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
PUSHING_CM = 0.2
"""An object that moves more than this over the last `CONFIRM_STEPS` steps of a turn the cap cuts is
still being pushed: where the runtime takes chunks, the push may go on in the same reply."""
PUSH_SPEED_CM = 0.75
"""A push goes on in a chunk only where the policy drives it about as fast as a protocol move goes
(at least this many cm per control step, the move's top speed being 1): a nudge the policy makes
slowly (a ball rolled a few mm per step) would be a kick at the chunk's speed."""
HELD_CM = 3.0
"""An object this close to the tool point while the fingers close is held: it moves with the hand."""
MAX_LEGS = 4
"""Steps a push's chunk may have (the robot's `max_chunk`, which bounds what the runtime takes)."""


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


def pushing(r: Rollout, k: int) -> bool:
    """Whether an object the hand does not hold is still moving at step `k` of the rollout (more
    than `PUSHING_CM` over the last `CONFIRM_STEPS` steps): the policy's motion is pushing it. An
    object within `HELD_CM` of the tool point with the fingers closing is held (carried, not pushed)."""
    if r.objects_m is None or k < CONFIRM_STEPS:
        return False
    real = np.any(r.objects_m[0] != 0.0, axis=1)
    moved = np.linalg.norm(r.objects_m[k] - r.objects_m[k - CONFIRM_STEPS], axis=1)
    held = (np.linalg.norm(r.objects_m[k] - r.tool_m[k], axis=1) < HELD_CM / 100) & (r.efforts[k - 1] > 0)
    pushed = moved[real & ~held]
    return bool(pushed.size) and float(pushed.max()) * 100 > PUSHING_CM


def _fast(r: Rollout, start: int, end: int) -> bool:
    """Whether the policy drives the hand from step `start` to `end` about as fast as a move goes."""
    return float(np.linalg.norm(r.mocap_m[end] - r.mocap_m[start])) * 100 >= PUSH_SPEED_CM * (end - start)


def _legs(name: str, sim: dict[str, Any], r: Rollout, k: int, effort: float) -> tuple[Rollout, list[int]]:
    """A push the cap cuts at step `k`, continued leg by leg along the policy's own rollout (each
    leg to the next waypoint of the rest, as a turn would end there): (the longer rollout, the legs'
    ends), at most `MAX_LEGS`; one leg where the push does not go on as one motion (the grip changes,
    the path turns or stops, or the policy slows to a nudge)."""
    ends = [k]
    while len(ends) < MAX_LEGS:
        start = ends[-1]
        long = rollout(name, sim, start + LOOKAHEAD_STEPS + WINDOW_STEPS + CONFIRM_STEPS)
        if len(long.efforts) <= start:
            break
        r = long
        tail = Rollout(
            r.commands_cm[start:],
            r.efforts[start:],
            np.vstack([r.mocap_m[start], r.tool_m[start + 1 :]]),
            r.success[start:],
            r.mocap_m[start:],
            None if r.objects_m is None else r.objects_m[start:],
        )
        n, why = waypoint(tail, LOOKAHEAD_STEPS)
        n = unbent(tail, n)
        if n < CONFIRM_STEPS or np.any(np.abs(tail.efforts[:n] - effort) > EFFORT_CHANGE):
            break
        if not _fast(r, start, start + n):
            break  # slower than a move: a nudge, not a push to run through
        ends.append(start + n)
        if why != "a turn's reach" or not pushing(tail, n):
            break  # the push ends with this leg
    return r, ends


def _leg_moves(r: Rollout, ends: list[int]) -> list[np.ndarray]:
    """Each leg's move (cm, our frame): where the policy drove the hand from the previous leg's end."""
    starts = [r.tool_m[0]] + [r.mocap_m[e] for e in ends[:-1]]
    return [to_ours(r.mocap_m[e] - a) * 100.0 for e, a in zip(ends, starts, strict=True)]


def _chunk_misses(
    name: str, sim: dict[str, Any], r: Rollout, ends: list[int], effort: float
) -> tuple[float, bool]:
    """(cm, done): how far (the worst object) the legs, run through the protocol's own chunk in the
    copy, leave the objects from where the policy's own steps leave them at the last leg's end, and
    whether the task's own check held on the way there."""
    acts = [_action(m, effort, False) for m in _leg_moves(r, ends)]
    got, done = outcome(name, sim, acts, success=True)
    return float(np.linalg.norm(got - r.objects_m[ends[-1]], axis=1).max()) * 100, done


@dataclass
class _Chunk:
    """A push planned as a chunk: per step the protocol-frame tool point (cm) the step before it
    leaves the arm at (what the chunking predicts when it asks for that step) and the step's action."""

    at_cm: list[np.ndarray]
    actions: list[dict[str, Any]]
    whys: list[str]


_CHUNKS: dict[tuple[Any, ...], _Chunk] = {}
"""Pushes planned as chunks, by `_key` of the state they were planned on: the chunking asks the
expert again on the state its previous step predicts (the simulation's state still the first's),
and the expert answers with the next leg of the push it checked as a whole."""
_CHUNKS_KEPT = 32
PREDICTED_CM = 0.1
"""An arm this far from where the simulation has it is a state the chunking predicts."""


def _key(name: str, sim: dict[str, Any]) -> tuple[Any, ...]:
    return (name, int(sim["seed"]), tuple(round(float(v), 9) for v in sim["obs"]))


def _next_leg(
    name: str, state: dict[str, Any], priv: dict[str, Any], sim: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """Where the chunking asks on a predicted state (the arm at a planned step's target, the
    simulation's state still the one the reply started from): a planned push's next leg, or an
    empty action (the chunk ends there: the copy's look-ahead holds for the real state only);
    None where the arm is where the simulation has it (a fresh turn)."""
    arm = state.get("arm") or {}
    if "position" not in arm:
        return None
    pos = np.asarray(arm["position"], float)
    obs = np.asarray(sim["obs"], float)
    tool = obs[:3] - np.asarray(priv.get("hand_minus_tool", [0.0, 0.0, 0.0]), float)
    if float(np.linalg.norm(pos - to_ours(tool) * 100.0)) < PREDICTED_CM:
        return None
    chunk = _CHUNKS.get(_key(name, sim))
    if chunk is not None:
        for i, at in enumerate(chunk.at_cm[1 : len(chunk.actions)], start=1):
            if float(np.linalg.norm(pos - at)) < PREDICTED_CM:
                return chunk.whys[i], {"arm": dict(chunk.actions[i])}
    return "the motion ends here (the next turn is planned on what the simulation does)", {"arm": {}}


def metaworld_expert(state: dict[str, Any], priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One turn of Meta-World's own policy for `priv["task"]`, planned by looking ahead (see the module)."""
    name = priv["task"]
    sim = priv.get(SIM_STATE)
    if sim is None:
        return (
            "I cannot plan: this turn's facts carry no simulation state to look ahead in.",
            {},
        )
    leg = _next_leg(name, state, priv, sim)
    if leg is not None:
        return leg
    r, k, why = plan(name, sim)
    effort = float(r.efforts[0])
    held = sim.get("effort")
    if held is not None and why == "a turn's reach" and abs(effort - float(held)) > EFFORT_CHANGE:
        effort = float(held)  # the leg goes on past this turn: its grip change rides with the leg's end
    arm = state.get("arm") or {}
    chunk = None
    cut = why == "a turn's reach" and _fast(r, 0, k) and pushing(r, k) and not pressed(r, k)
    if cut and "position" in arm:
        chunk = _push_chunk(name, sim, r, k, effort, np.asarray(arm["position"], float))
    if chunk is not None:
        while len(_CHUNKS) >= _CHUNKS_KEPT:
            _CHUNKS.pop(next(iter(_CHUNKS)))
        _CHUNKS[_key(name, sim)] = chunk
        return chunk.whys[0], {"arm": dict(chunk.actions[0])}
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


def _push_chunk(
    name: str, sim: dict[str, Any], r: Rollout, k: int, effort: float, pos_cm: np.ndarray
) -> _Chunk | None:
    """A push the cap cuts at step `k`, as a chunk of legs that runs on without stopping, where the
    whole chunk, run through the protocol's own chunk in the copy, leaves the objects within
    `MATCH_CM` of where the policy's own steps leave them at its end, or closer than the single
    turn (checked as every turn is) leaves them at its own; else None (the single turn)."""
    long, ends = _legs(name, sim, r, k, effort)
    if len(ends) < 2:
        return None
    err, done = _chunk_misses(name, sim, long, ends, effort)
    if err > MATCH_CM and not done:
        kk, _ = _checked(name, sim, r, k, effort)
        single, _ = _chunk_misses(name, sim, r, [kk], effort)
        if err >= single:
            return None
    moves = _leg_moves(long, ends)
    actions = [_action(m, effort, False) for m in moves]
    at, whys = [pos_cm], []
    for i, (m, a) in enumerate(zip(moves, actions, strict=True)):
        at.append(at[-1] + np.asarray(a.get("position", [0.0, 0.0, 0.0]), float))
        steps = ends[i] - (ends[i - 1] if i else 0)
        lead = (
            f"Meta-World's {name} policy, looked ahead {steps} control steps"
            if i == 0
            else f"the push goes on: the policy, looked ahead {steps} more control steps"
        )
        whys.append(
            f"{lead} (a push of {len(ends)} legs, checked as a whole in a copy): move "
            f"{np.linalg.norm(m):.1f} cm with grip effort {effort:+.2f} without stopping."
        )
    return _Chunk(at, actions, whys)


def _action(move_cm: np.ndarray, effort: float, press: bool) -> dict[str, Any]:
    """The protocol's action for a move (cm, our frame), a grip effort and whether it presses."""
    act: dict[str, Any] = {"gripper": round(float(np.clip((1.0 - effort) / 2.0, 0.0, 1.0)), 3)}
    if float(np.linalg.norm(move_cm)) >= 0.05:
        act["position"] = [round(float(v), 2) for v in move_cm]
        if press:
            act["press"] = True
    return act


def outcome(
    name: str, sim: dict[str, Any], act: dict[str, Any] | list[dict[str, Any]], success: bool = False
) -> Any:
    """Where the objects are, (2, 3) m, after the protocol's own move (`MetaWorldBackend.execute`:
    move until reached and still, blocked, pressed or timed out) runs `act` from the state `sim`, in
    the private copy of the task; a list of actions runs as the protocol's chunk (`execute_chunk`:
    each step's target the previous one's plus its move, passed at speed, the last reached). With
    `success`: (the objects, whether the task's own check held at any step of it)."""
    acts = act if isinstance(act, list) else [act]
    with _COPIES.lock:
        be = _COPIES.get(name, int(sim["seed"]))
        restore_state(be.env, sim)
        be._obs = np.asarray(sim["obs"], dtype=float).copy()
        held = sim.get("effort")
        be._effort = -1.0 if held is None else float(held)
        be._driving, be._goal = False, be.tcp()
        be._success = False
        at = to_ours(be.tcp())
        commands = []
        for a in acts:
            target = None
            if "position" in a:
                at = at + np.asarray(a["position"], dtype=float) / 100.0
                target = at.copy()
            press = bool(a.get("press"))
            commands.append({"arm": PartCommand(joints_rad=target, gripper=a["gripper"], press=press)})
        if len(commands) == 1:
            be.execute(commands[0])
        else:
            be.execute_chunk(commands)
        return (_objects(be._obs), be._success) if success else _objects(be._obs)


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
