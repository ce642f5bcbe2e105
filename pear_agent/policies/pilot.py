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
from typing import Any

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.prompts import Message
from sim_adapters.roadster.telemetry import parse_row

G_MPS2 = 9.81
CLIMB_AT_TRUCK_S = 1.1
ROLL_ABOVE_ROOF_M = 1.4
CLIMB_VZ_MPS = 6.0
ROLL_DONE_DEG = 335.0
UPRIGHT_DEG = 28.0
MAX_LEAN_DEG = 10.0
DRIFT_POS_GAIN = 0.35
DRIFT_VEL_GAIN = 1.1
FLARE_M = 1.0
BRAKE_MPS2 = 5.0
STUNT_RE = re.compile(r"^stunt:\s*(\w+)", re.M)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))


def lean_against_drift(row: dict[str, Any]) -> float:
    """Roll (degrees, + = right side down = pushes toward -y) that steers back to the road's centre."""
    accel = DRIFT_POS_GAIN * row["y_m"] + DRIFT_VEL_GAIN * row["v_side_mps"]
    return max(-MAX_LEAN_DEG, min(MAX_LEAN_DEG, math.degrees(math.atan2(accel, G_MPS2))))


def _descent(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    h = row["h_m"]
    if h < FLARE_M:
        return "low: land", {"mode": "land"}
    vz = -max(1.5, math.sqrt(2 * BRAKE_MPS2 * max(h - 0.3, 0.0)))
    return f"descend at {vz:.1f} m/s leaning against drift", {
        "mode": "hold",
        "roll": round(lean_against_drift(row), 1),
        "pitch": 0.0,
        "vz": round(max(vz, -10.0), 1),
    }


def kickflip(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    roll, h = row["roll_deg"], row["h_m"]
    past = row["time_past_truck_s"] <= 0.0
    rolling = str(row.get("cmd", "")).startswith("rotate")
    if abs(roll) >= ROLL_DONE_DEG:
        if not past:
            return "rolled; hold height until past the truck", {
                "mode": "hold",
                "roll": round(lean_against_drift(row), 1),
                "pitch": 0.0,
                "vz": 0.0,
            }
        return _descent(row)
    if rolling or abs(roll) > 20.0:
        return "keep rolling to 360", {"mode": "rotate", "axis": "roll", "to": 360.0, "lift": 1.0}
    lead_m = max(row["vz_mps"], 0.0) * 0.15
    if row["above_roof_m"] + lead_m >= ROLL_ABOVE_ROOF_M and h > 1.0:
        return "1.4 m above the roof: roll", {"mode": "rotate", "axis": "roll", "to": 360.0, "lift": 1.0}
    if row["time_to_truck_s"] <= CLIMB_AT_TRUCK_S or h > 0.3:
        return "truck close: climb", {
            "mode": "hold",
            "roll": round(lean_against_drift(row) if h > 0.5 else 0.0, 1),
            "pitch": 0.0,
            "vz": CLIMB_VZ_MPS,
        }
    return "drive toward the truck", {"mode": "coast"}


def ramp_flip(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    roll = row["roll_deg"]
    level = 360.0 * round(roll / 360.0)
    if abs(roll - level) > UPRIGHT_DEG:
        target = (
            360.0 * math.ceil(roll / 360.0) if row["roll_rate_dps"] >= 0 else 360.0 * math.floor(roll / 360.0)
        )
        return f"upside down: rotate upright to {target:.0f}", {
            "mode": "rotate",
            "axis": "roll",
            "to": target,
            "lift": 1.0,
        }
    return _descent(row)


RULES = {"kickflip": kickflip, "ramp_flip": ramp_flip}


def pilot_reply(messages: list[Message]) -> tuple[str, str]:
    """(reasoning, reply text) from the conversation; ValueError when it is not a roadster flight."""
    system = next((_text(m["content"]) for m in messages if m["role"] == "system"), "")
    found = STUNT_RE.search(system)
    if not found or found.group(1) not in RULES:
        raise ValueError("not a roadster briefing: no 'stunt: kickflip|ramp_flip' line in the system prompt")
    user = next((_text(m["content"]) for m in reversed(messages) if m["role"] == "user"), "")
    row = parse_row(user)
    reasoning, command = RULES[found.group(1)](row)
    return reasoning, f"{reasoning}\n```json\n{json.dumps(command)}\n```"


class PilotPolicy:
    """The scripted pilot as a policy (same interface as the arm experts)."""

    name = "pilot"

    def reset(self, seed: int) -> None:
        pass

    def act(self, messages: list[Message], ctx: TurnContext | None = None) -> PolicyReply:
        t0 = time.perf_counter()
        try:
            _, text = pilot_reply(messages)
        except ValueError as exc:
            return PolicyReply(text="", error=f"scripted pilot: {exc}")
        return PolicyReply(text=text, latency_s=time.perf_counter() - t0)
