"""Telemetry rows as text (one line of `key=value` fields, units in the names) and back.

The model and the scripted pilot read the same line; `parse_row` is what the pilot uses.
"""

from __future__ import annotations

from typing import Any

ROW_PREFIX = "telemetry "


def format_row(row: dict[str, Any]) -> str:
    bits = []
    for k, v in row.items():
        if isinstance(v, float):
            v = f"{v:.2f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:.0f}"
            v = "0" if v in ("-0", "") else v
        bits.append(f"{k}={v}")
    return ROW_PREFIX + " ".join(bits)


def parse_row(text: str) -> dict[str, Any]:
    """The last telemetry line in `text` as a dict (numbers as floats); ValueError if none."""
    lines = [ln for ln in text.splitlines() if ln.startswith(ROW_PREFIX)]
    if not lines:
        raise ValueError("no telemetry row in the message")
    out: dict[str, Any] = {}
    for tok in lines[-1][len(ROW_PREFIX) :].split():
        key, sep, value = tok.partition("=")
        if not sep:
            continue
        try:
            out[key] = float(value)
        except ValueError:
            out[key] = value
    return out


# -- the compact row (`--observation compact`): a few integer fields ---------------------------
COMPACT_FLIGHT_FIELDS: dict[str, tuple[str, float]] = {
    "t": ("t_s", 10.0),
    "h": ("h_m", 10.0),
    "y": ("y_m", 10.0),
    "vz": ("vz_mps", 10.0),
    "vy": ("v_side_mps", 10.0),
    "roll": ("roll_deg", 1.0),
    "rr": ("roll_rate_dps", 1.0),
    "air": ("air_pct", 1.0),
    "w": ("wheels", 1.0),
}
"""Compact name -> (telemetry field, scale) of every flight (COMPACT_LEGEND): the integer is
round(value x scale). Tenths of a second (t), decimetres (h, y), decimetres per second (vz, vy),
degrees (roll), degrees per second (rr), percent (air), wheels on the ground (w)."""
COMPACT_TRUCK_FIELDS: dict[str, tuple[str, float]] = {
    "truck": ("truck_ahead_m", 1.0),
    "roof": ("above_roof_m", 10.0),
    "tt": ("time_to_truck_s", 10.0),
    "tp": ("time_past_truck_s", 10.0),
}
"""The truck's, only on a kickflip (COMPACT_TRUCK_LEGEND): metres (truck), decimetres (roof), tenths
of a second (tt, tp)."""
COMPACT_FIELDS = COMPACT_FLIGHT_FIELDS | COMPACT_TRUCK_FIELDS
"""Every compact field, in the row's order."""
COMPACT_LEGEND = (
    "t time (0.1 s); h height (dm); y from the road's centre (dm, + = left); vz vertical speed (dm/s, "
    "+ = up); vy side speed (dm/s, + = left); roll total roll (deg, 0 = level, 360 = one full roll); "
    "rr roll rate (deg/s); air (%); w wheels on the ground"
)
COMPACT_TRUCK_LEGEND = (
    "; truck to the truck (m); roof your height above its roof (dm); tt time until your nose reaches "
    "it, tp until your tail is past it (0.1 s; 0 once reached / past)"
)


def compact_row(row: dict[str, Any]) -> str:
    """The row as integer fields: `t=12 h=23 y=-4 vz=-12 vy=3 roll=187 rr=-240 air=78 w=0`."""
    bits = []
    for short, (key, scale) in COMPACT_FIELDS.items():
        if key in row:
            bits.append(f"{short}={round(float(row[key]) * scale) + 0}")
    return " ".join(bits)


def parse_compact_row(text: str) -> dict[str, Any]:
    """The last compact row in `text`, back in the telemetry's names and units (floats); ValueError
    if none. What the scripted pilot reads from a compact flight."""
    for line in reversed(text.splitlines()):
        words = line.split()
        pairs = [w.partition("=") for w in words]
        if not words or not all(sep and k in COMPACT_FIELDS for k, sep, _ in pairs):
            continue
        out: dict[str, Any] = {}
        try:
            for short, _, value in pairs:
                key, scale = COMPACT_FIELDS[short]
                out[key] = int(value) / scale
        except ValueError:
            continue
        return out
    raise ValueError("no compact telemetry row in the message")


def read_row(text: str) -> dict[str, Any]:
    """The last telemetry row in `text`, full (`telemetry k=v ...`) or compact."""
    try:
        return parse_row(text)
    except ValueError:
        return parse_compact_row(text)
