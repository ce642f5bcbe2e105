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
descending times the close by its own speed, which one capped turn cannot keep).

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

from sim_adapters.metaworld.backend import (
    SIM_STATE,
    make_env,
    restore_state,
    sampled_task,
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


@functools.lru_cache(maxsize=64)
def native_policy(name: str) -> Any:
    """Meta-World's scripted policy for a v3 task."""
    from metaworld.policies import ENV_POLICY_MAP  # optional: .venv-metaworld

    return ENV_POLICY_MAP[name]()


class _Copies:
    """One private environment per task, set to an episode's variation when it changes (the
    variation also moves bodies in the model, so the copy is reset with the same task)."""

    def __init__(self) -> None:
        self._envs: dict[str, tuple[Any, int]] = {}
        self.lock = threading.Lock()
        """One look-ahead at a time (`pear-agent serve` answers requests on several threads)."""

    def get(self, name: str, seed: int) -> Any:
        env, loaded = self._envs.get(name, (None, -1))
        if env is None:
            env = make_env(name)
        if loaded != seed:
            env.set_task(sampled_task(name, seed))
            env.reset()
        self._envs[name] = (env, seed)
        return env


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
    return (r, *found) if found else (r, *waypoint(r, LOOKAHEAD_STEPS))


def _run(name: str, sim: dict[str, Any], steps: int, check: bool) -> tuple[Rollout, tuple[int, str] | None]:
    with _COPIES.lock:
        return _steps(_COPIES.get(name, int(sim["seed"])), name, sim, steps, check)


def _steps(
    env: Any, name: str, sim: dict[str, Any], steps: int, check: bool
) -> tuple[Rollout, tuple[int, str] | None]:
    restore_state(env, sim)
    policy = native_policy(name)
    obs = np.asarray(sim["obs"], dtype=float)
    lead = np.asarray(env.data.mocap_pos[0], float) - np.asarray(env.tcp_center, float)
    cmds, efforts, tools, success = [], [], [np.asarray(env.tcp_center, float).copy()], [False]
    mocaps = [np.asarray(env.data.mocap_pos[0], float) - lead]

    def pack() -> Rollout:
        arrays = (cmds, efforts, tools, success, mocaps)
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
        sure = n - WINDOW_STEPS - CONFIRM_STEPS
        if check and n < steps and n % CHECK_EVERY == 0 and sure >= 1:
            k, why = waypoint(pack(), sure)
            if why != "the step budget":
                return pack(), (k, why)
    return pack(), None


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
    held = float(sim.get("effort", effort))
    if why == "a turn's reach" and abs(effort - held) > EFFORT_CHANGE:
        effort = held  # the leg goes on past this turn: its grip change rides with the leg's end

    move = to_ours(r.mocap_m[k] - r.tool_m[0]) * 100.0
    act: dict[str, Any] = {"gripper": round(float(np.clip((1.0 - effort) / 2.0, 0.0, 1.0)), 3)}
    press = pressed(r, k)
    if float(np.linalg.norm(move)) >= 0.05:
        act["position"] = [round(float(v), 2) for v in move]
        if press:
            act["press"] = True
    text = (
        f"Meta-World's {name} policy, looked ahead {k} control steps until {why}: move "
        f"{np.linalg.norm(move):.1f} cm with grip effort {effort:+.2f}"
        + (", pressing through contact." if "press" in act else ".")
    )
    return text, {"arm": act}
