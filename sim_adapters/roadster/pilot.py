"""The scripted roadster pilot: a few dozen if-then rules on the telemetry row, nothing else.

It reads the same text a model reads (the briefing's `stunt:` line and the latest telemetry row)
and answers through the same 0.2 s interface, so it also works behind `pear-agent serve`.
Rules (kickflip): drive until the truck is 1.1 s away, climb, start the roll 1.4 m above the
truck's roof, lean against sideways drift, land once past the truck. Ramp flip: rotate upright
the way it already turns, brake while leaning against the drift, land.

Plans: asked for plans of K commands (the briefing's `max_plan: K` line), the pilot
applies its rules to the row it predicts for each of the next K intervals (`predict`: a crude
point-mass extrapolation; the command's own setpoints pull vz and the roll rate), so the car has
sensible commands to fly while a slow decision is being made.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.prompts import Message
from sim_adapters.roadster.telemetry import read_row

G_MPS2 = 9.81
STUNT_RE = re.compile(r"^stunt:\s*(\w+)", re.M)
MAX_PLAN_RE = re.compile(r"^max_plan:\s*(\d+)", re.M)
ROW_S = 0.2
VZ_ACCEL_MPS2 = 6.0
"""How fast the predicted vertical speed moves toward a commanded one (thrust-limited)."""
ROLL_ACCEL_DPS2 = 600.0
"""How fast the predicted roll rate builds up under a rotate command."""
ROLL_RATE_DPS = 360.0
REALTIME_TEXT = "keeps flying while you think"
"""The realtime briefing's words (environment.briefing)."""
COMPACT_TEXT = "one row of integers"
"""The compact briefing's words (environment.compact_briefing): replies are bare JSON."""


@dataclass(frozen=True)
class PilotParams:
    climb_at_truck_s: float = 1.1
    roll_above_roof_m: float = 1.4
    climb_vz_mps: float = 6.0
    roll_done_deg: float = 335.0
    upright_deg: float = 28.0
    max_lean_deg: float = 10.0
    drift_pos_gain: float = 0.35
    drift_vel_gain: float = 1.1
    flare_m: float = 1.0
    brake_mps2: float = 5.0

    def jittered(self, rng: np.random.Generator, noise: float) -> PilotParams:
        """Per-flight perturbed rules (stochastic rollouts for RL groups); noise 1 = the usual spread."""
        if noise <= 0:
            return self
        n = rng.normal(size=5) * noise
        return replace(
            self,
            climb_at_truck_s=self.climb_at_truck_s + 0.12 * n[0],
            roll_above_roof_m=self.roll_above_roof_m + 0.35 * n[1],
            climb_vz_mps=self.climb_vz_mps + 0.8 * n[2],
            drift_vel_gain=max(0.0, self.drift_vel_gain * (1 + 0.3 * n[3])),
            brake_mps2=max(2.5, self.brake_mps2 + 0.8 * n[4]),
        )


DEFAULT = PilotParams()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))


def _deg(x: float) -> float:
    return round(x, 1) + 0.0  # (no "-0.0" in replies)


def lean_against_drift(row: dict[str, Any], p: PilotParams = DEFAULT) -> float:
    """Roll (degrees, + = right side down = pushes toward -y) that steers back to the road's centre."""
    accel = p.drift_pos_gain * row["y_m"] + p.drift_vel_gain * row["v_side_mps"]
    return max(-p.max_lean_deg, min(p.max_lean_deg, math.degrees(math.atan2(accel, G_MPS2))))


def _descent(row: dict[str, Any], p: PilotParams) -> tuple[str, dict[str, Any]]:
    h = row["h_m"]
    if h < p.flare_m:
        return "low: land", {"mode": "land"}
    vz = -max(1.5, math.sqrt(2 * p.brake_mps2 * max(h - 0.3, 0.0)))
    return f"descend at {vz:.1f} m/s leaning against drift", {
        "mode": "hold",
        "roll": _deg(lean_against_drift(row, p)),
        "pitch": 0.0,
        "vz": round(max(vz, -10.0), 1),
    }


def kickflip(row: dict[str, Any], p: PilotParams = DEFAULT) -> tuple[str, dict[str, Any]]:
    roll, h = row["roll_deg"], row["h_m"]
    past = row["time_past_truck_s"] <= 0.0
    rolling = str(row.get("cmd", "")).startswith("rotate")
    if abs(roll) >= p.roll_done_deg:
        if not past:
            return "rolled; hold height until past the truck", {
                "mode": "hold",
                "roll": _deg(lean_against_drift(row, p)),
                "pitch": 0.0,
                "vz": 0.0,
            }
        return _descent(row, p)
    if rolling or abs(roll) > 20.0:
        return "keep rolling to 360", {"mode": "rotate", "axis": "roll", "to": 360.0, "lift": 1.0}
    lead_m = max(row["vz_mps"], 0.0) * 0.15
    if row["above_roof_m"] + lead_m >= p.roll_above_roof_m and h > 1.0:
        return "1.4 m above the roof: roll", {"mode": "rotate", "axis": "roll", "to": 360.0, "lift": 1.0}
    if row["time_to_truck_s"] <= p.climb_at_truck_s or h > 0.3:
        return "truck close: climb", {
            "mode": "hold",
            "roll": _deg(lean_against_drift(row, p) if h > 0.5 else 0.0),
            "pitch": 0.0,
            "vz": round(p.climb_vz_mps, 1),
        }
    return "drive toward the truck", {"mode": "coast"}


def ramp_flip(row: dict[str, Any], p: PilotParams = DEFAULT) -> tuple[str, dict[str, Any]]:
    roll = row["roll_deg"]
    level = 360.0 * round(roll / 360.0)
    if abs(roll - level) > p.upright_deg:
        target = (
            360.0 * math.ceil(roll / 360.0) if row["roll_rate_dps"] >= 0 else 360.0 * math.floor(roll / 360.0)
        )
        return f"upside down: rotate upright to {target:.0f}", {
            "mode": "rotate",
            "axis": "roll",
            "to": target,
            "lift": 1.0,
        }
    return _descent(row, p)


RULES = {"kickflip": kickflip, "ramp_flip": ramp_flip}


def _toward(x: float, target: float, step: float) -> float:
    return x + max(-step, min(step, target - x))


def predict(row: dict[str, Any], command: dict[str, Any], dt_s: float = ROW_S) -> dict[str, Any]:
    """The row expected `dt_s` later with `command` in force: a point-mass extrapolation, good
    enough to time the next few rule changes, not a simulator."""
    r = dict(row)
    mode = command.get("mode")
    h = float(r.get("h_m", 0.0))
    vz = float(r.get("vz_mps", 0.0))
    if mode in ("climb", "hold"):
        vz = _toward(vz, float(command.get("vz", 0.0)), VZ_ACCEL_MPS2 * dt_s)
    elif mode == "land":
        vz = _toward(vz, -1.5, VZ_ACCEL_MPS2 * dt_s)
    elif mode == "coast" and h > 0.05:
        vz -= G_MPS2 * dt_s
    elif mode == "rotate":
        vz -= 0.5 * G_MPS2 * dt_s * (1.0 - float(command.get("lift", 1.0)))
    new_h = max(0.0, h + vz * dt_s)
    if new_h == 0.0:
        vz = 0.0
    r["vz_mps"], r["h_m"] = vz, new_h
    if "above_roof_m" in r:
        r["above_roof_m"] = float(r["above_roof_m"]) + (new_h - h)
    rate = float(r.get("roll_rate_dps", 0.0))
    if mode == "rotate" and command.get("axis") == "roll":
        left = float(command.get("to", 0.0)) - float(r.get("roll_deg", 0.0))
        want = math.copysign(min(ROLL_RATE_DPS, abs(left) / dt_s), left)
        rate = _toward(rate, want, ROLL_ACCEL_DPS2 * dt_s)
    elif mode in ("hold", "climb", "land"):
        rate = _toward(rate, 0.0, ROLL_ACCEL_DPS2 * dt_s)
    r["roll_rate_dps"] = rate
    r["roll_deg"] = float(r.get("roll_deg", 0.0)) + rate * dt_s
    speed = max(float(r.get("v_fwd_mps", 0.0)), 0.0)
    r["x_m"] = float(r.get("x_m", 0.0)) + speed * dt_s
    r["y_m"] = float(r.get("y_m", 0.0)) + float(r.get("v_side_mps", 0.0)) * dt_s
    r["t_s"] = float(r.get("t_s", 0.0)) + dt_s
    for key in ("time_to_truck_s", "time_past_truck_s"):
        if key in r:
            r[key] = max(0.0, float(r[key]) - dt_s)
    if "truck_ahead_m" in r:
        r["truck_ahead_m"] = max(0.0, float(r["truck_ahead_m"]) - speed * dt_s)
    r["cmd"] = str(mode) if mode != "rotate" else f"rotate:{command.get('axis')}"
    return r


def plan_ahead(
    stunt: str, row: dict[str, Any], k: int, params: PilotParams = DEFAULT, skip: int = 0
) -> tuple[str, list[dict[str, Any]]]:
    """(reasoning, commands): the rules applied to the row predicted `skip` intervals ahead (the
    decision time: the reply lands that late) and to the K-1 rows predicted after it."""
    rule = RULES[stunt]
    for _ in range(skip):  # the old plan flies meanwhile: by the same rules
        row = predict(row, rule(row, params)[1])
    why, cmd = rule(row, params)
    whys, plan = [why], [cmd]
    for _ in range(k - 1):
        row = predict(row, cmd)
        why, cmd = rule(row, params)
        whys.append(why)
        plan.append(cmd)
    if len(plan) == 1:
        return whys[0], plan
    steps = []
    for w in whys:  # "climb, climb, climb, roll" -> "climb x3, then roll"
        if steps and steps[-1][0] == w:
            steps[-1][1] += 1
        else:
            steps.append([w, 1])
    return "plan: " + "; then ".join(f"{w}" + (f" (x{n})" if n > 1 else "") for w, n in steps), plan


def pilot_reply(
    messages: list[Message],
    params: PilotParams = DEFAULT,
    max_chunk: int | None = None,
    lead_s: float | None = None,
) -> tuple[str, str]:
    """(reasoning, reply text) from the conversation; ValueError when it is not a roadster flight.
    `max_chunk`: plan this many intervals ahead (None: what the briefing's `max_plan:` line allows).
    `lead_s`: the pilot's own decision time: its first command is for the row that much later.
    None: with plans in realtime, what the last decision cost (the rows' clock: the time between
    the last two rows beyond the interval flown), else 0."""
    system = next((_text(m["content"]) for m in messages if m["role"] == "system"), "")
    found = STUNT_RE.search(system)
    if not found or found.group(1) not in RULES:
        raise ValueError("not a roadster briefing: no 'stunt: kickflip|ramp_flip' line in the system prompt")
    if max_chunk is None:
        allowed = MAX_PLAN_RE.search(system)
        max_chunk = int(allowed.group(1)) if allowed else 1
    users = [_text(m["content"]) for m in messages if m["role"] == "user"]
    row = read_row(users[-1] if users else "")
    if "cmd" not in row:  # a compact row does not echo the command in force: the last reply says it
        last = next((_text(m["content"]) for m in reversed(messages) if m["role"] == "assistant"), "")
        row["cmd"] = "rotate" if '"rotate"' in last else ""
    if lead_s is None:
        lead_s = 0.0
        if max_chunk > 1 and REALTIME_TEXT in system and len(users) >= 2:
            try:
                before = read_row(users[-2])
                lead_s = max(0.0, float(row["t_s"]) - float(before["t_s"]) - ROW_S)
            except (ValueError, KeyError, TypeError):
                lead_s = 0.0
    skip = int(lead_s / ROW_S + 1e-9)
    reasoning, plan = plan_ahead(found.group(1), row, max(1, max_chunk), params, skip)
    wire: dict[str, Any] = plan[0] if len(plan) == 1 else {"plan": plan}
    if COMPACT_TEXT in system:  # the compact briefing asks for the command alone
        return reasoning, json.dumps(wire, separators=(",", ":"))
    return reasoning, f"{reasoning}\n```json\n{json.dumps(wire)}\n```"


class PilotPolicy:
    """The scripted pilot as a policy (same interface as the arm experts)."""

    name = "pilot"
    blocking = False
    """A few rules on one telemetry row: `Episode.arun` calls it inline."""

    def __init__(self, noise: float = 0.0, seed: int = 0, lead_s: float | None = None) -> None:
        """`noise` > 0 perturbs the rules per flight (seeded by this seed and the episode's), so the
        rollouts of an RL group differ; 0 is the deterministic pilot of the benchmarks. `lead_s`:
        the decision time the pilot plans for (realtime: its reply flies that late; 0: none; None:
        with plans in realtime, measured from the rows, see `pilot_reply`)."""
        self.noise, self.seed, self.lead_s = noise, seed, lead_s
        self.params = DEFAULT

    def reset(self, seed: int) -> None:
        self.params = DEFAULT.jittered(np.random.default_rng([self.seed, seed]), self.noise)

    def act(self, messages: list[Message], ctx: TurnContext | None = None) -> PolicyReply:
        t0 = time.perf_counter()
        try:
            k = ctx.max_chunk if ctx is not None else None
            _, text = pilot_reply(
                messages, self.params, k, self.lead_s if ctx is None or ctx.turn > 1 else 0.0
            )
        except ValueError as exc:
            return PolicyReply(text="", error=f"scripted pilot: {exc}")
        return PolicyReply(text=text, latency_s=time.perf_counter() - t0)
