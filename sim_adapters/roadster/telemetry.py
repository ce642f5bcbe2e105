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
