"""Meta-World's own scripted policies (`metaworld.policies.ENV_POLICY_MAP`) as this family's expert.

Each turn the task's policy is asked for its per-step action on Meta-World's own observation (the
privileged 39 numbers the adapter passes, with the hand where the turn's state says it is), and
rolled forward on a virtual hand for up to `SEGMENT_STEPS` steps, the objects left where they
are: each step moves the hand by the policy's bounded delta (x 1 cm, as Meta-World's `step()`
moves the mocap). The segment ends where the policy changes its grip effort or stops moving the
hand. The turn's action is the segment's whole move (`move_cm`) and its grip effort as the
protocol's absolute gripper command (effort e -> (1 - e) / 2: -1 open -> 1, +1 closed -> 0).
So a 30-step reach becomes three turns, and a grasp a turn of its own; the runtime's
move-until-still then executes it over Meta-World's `step()`.

Stateless, as every expert here: the policies themselves decide from the observation alone.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from sim_adapters.metaworld.backend import to_metaworld, to_ours

SEGMENT_STEPS = 10
"""Meta-World control steps one turn stands for (at most 10 cm: the Sawyer's per-turn cap)."""
EFFORT_CHANGE = 0.2
"""A grip effort change larger than this ends the segment (the fingers act on a fresh observation)."""
HELD_M = 0.05
"""An object this close to the hand's tool point, with the fingers closing on it, moves with the
virtual hand (so a carry is not read as the hand leaving the object)."""
TURN_COS = 0.7
"""A virtual step whose direction turns more than ~45 degrees from the segment's first ends it: the
policy switched waypoints, which it decides best on a fresh observation (the virtual world keeps
the objects still, so a push or a pull would otherwise be read as the hand leaving them)."""
STILL_M = 2e-4
"""A virtual step shorter than this (0.2 mm) ends the segment: the policy waits or has arrived."""


@functools.lru_cache(maxsize=64)
def native_policy(name: str) -> Any:
    """Meta-World's scripted policy for a v3 task."""
    from metaworld.policies import ENV_POLICY_MAP  # optional: .venv-metaworld

    return ENV_POLICY_MAP[name]()


def _observation(state: dict[str, Any], priv: dict[str, Any]) -> np.ndarray:
    """Meta-World's observation for this turn: the adapter's, with the hand (and an object) moved
    where the state says, when a chunk's prediction moved them."""
    obs = np.asarray(priv["metaworld_obs"], dtype=float).copy()
    arm = state["arm"]
    hand = to_metaworld(np.asarray(arm["position"], float) / 100.0) + np.asarray(
        priv["hand_minus_tool"], float
    )
    if float(np.linalg.norm(hand - obs[:3])) > 0.002:  # beyond the state's rounding: a predicted state
        obs[:3] = hand
        obj = (priv.get("objects") or {}).get("object")
        if obj is not None:
            obs[4:7] = to_metaworld(np.asarray(obj["position_cm"], float) / 100.0)
    if abs(float(arm.get("gripper", obs[3])) - obs[3]) > 0.02:
        obs[3] = float(arm["gripper"])
    return obs


def segment(
    policy: Any, obs: np.ndarray, tool_offset: np.ndarray, steps: int = SEGMENT_STEPS
) -> tuple[np.ndarray, float, int]:
    """(hand displacement in Meta-World's frame (m), grip effort, steps rolled): the policy rolled
    forward on a virtual hand (`tool_offset`: hand body minus tool point, m)."""
    obs = obs.copy()
    start = obs[:3].copy()
    effort = None
    first: np.ndarray | None = None
    n = 0
    tool = obs[:3] - tool_offset
    held = obs[3] < 0.85 and float(np.linalg.norm(obs[4:7] - tool)) < HELD_M
    for n in range(steps):  # noqa: B007  (n: the steps rolled, returned)
        with warnings.catch_warnings():  # "Constant(s) may be too high": Meta-World's own notice
            warnings.simplefilter("ignore")
            # a copy each time: some policies change the observation they are given in place
            # (door-open shifts the door's x by -5 cm), harmless only once per observation
            a = np.asarray(policy.get_action(obs.copy()), dtype=float)
        e = float(np.clip(a[3], -1.0, 1.0))
        if effort is None:
            effort = e
        elif abs(e - effort) > EFFORT_CHANGE:
            break
        d = np.clip(a[:3], -1.0, 1.0) * 0.01
        size = float(np.linalg.norm(d))
        if size < STILL_M:
            break
        if first is None:
            first = d / size
        elif float(first @ d) / size < TURN_COS:
            break
        obs[:3] = obs[:3] + d
        if held and e > 0:
            obs[4:7] = obs[4:7] + d
    else:
        n = steps
    return obs[:3] - start, float(effort if effort is not None else 0.0), n


def metaworld_expert(state: dict[str, Any], priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One turn of Meta-World's own policy for `priv["task"]` (see the module)."""
    name = priv["task"]
    move_mw, effort, n = segment(
        native_policy(name), _observation(state, priv), np.asarray(priv["hand_minus_tool"], float)
    )
    move = to_ours(move_mw) * 100.0
    act: dict[str, Any] = {"gripper": round(float(np.clip((1.0 - effort) / 2.0, 0.0, 1.0)), 3)}
    if float(np.linalg.norm(move)) >= 0.05:
        act["position"] = [round(float(v), 2) for v in move]
    why = (
        f"Meta-World's {name} policy over {n} control steps: move {np.linalg.norm(move):.1f} cm "
        f"with grip effort {effort:+.2f}."
    )
    return why, {"arm": act}
