"""The scripted roadster pilot: a few dozen if-then rules on the telemetry row, nothing else.

It reads the same text a model reads (the briefing's `stunt:` line and the latest telemetry row)
and answers through the same 0.2 s interface, so it also works behind `pear-agent serve`.
Rules (kickflip): drive until the truck is 1.1 s away, climb, start the roll 1.4 m above the
truck's roof, lean against sideways drift, land once past the truck. Ramp flip: rotate upright
the way it already turns, brake while leaning against the drift, land.
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
from sim_adapters.roadster.telemetry import parse_row

G_MPS2 = 9.81
STUNT_RE = re.compile(r"^stunt:\s*(\w+)", re.M)


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


def pilot_reply(messages: list[Message], params: PilotParams = DEFAULT) -> tuple[str, str]:
    """(reasoning, reply text) from the conversation; ValueError when it is not a roadster flight."""
    system = next((_text(m["content"]) for m in messages if m["role"] == "system"), "")
    found = STUNT_RE.search(system)
    if not found or found.group(1) not in RULES:
        raise ValueError("not a roadster briefing: no 'stunt: kickflip|ramp_flip' line in the system prompt")
    user = next((_text(m["content"]) for m in reversed(messages) if m["role"] == "user"), "")
    row = parse_row(user)
    reasoning, command = RULES[found.group(1)](row, params)
    return reasoning, f"{reasoning}\n```json\n{json.dumps(command)}\n```"


class PilotPolicy:
    """The scripted pilot as a policy (same interface as the arm experts)."""

    name = "pilot"
    blocking = False
    """A few rules on one telemetry row: `Episode.arun` calls it inline."""

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        """`noise` > 0 perturbs the rules per flight (seeded by this seed and the episode's), so the
        rollouts of an RL group differ; 0 is the deterministic pilot of the benchmarks."""
        self.noise, self.seed = noise, seed
        self.params = DEFAULT

    def reset(self, seed: int) -> None:
        self.params = DEFAULT.jittered(np.random.default_rng([self.seed, seed]), self.noise)

    def act(self, messages: list[Message], ctx: TurnContext | None = None) -> PolicyReply:
        t0 = time.perf_counter()
        try:
            _, text = pilot_reply(messages, self.params)
        except ValueError as exc:
            return PolicyReply(text="", error=f"scripted pilot: {exc}")
        return PolicyReply(text=text, latency_s=time.perf_counter() - t0)
