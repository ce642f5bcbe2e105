"""A flight's telemetry plot for the HTML report: an inline SVG (no plotting library) with height
(and the truck's roof), roll, wind, the command in force and each reply's latency over time.

Reads the episode log's turn lines: `telemetry` (the row the policy saw), `rows` (every 0.2 s row
flown after it, including those flown while the policy was still thinking), `latency_s`.
"""

from __future__ import annotations

import html
from typing import Any

WIDTH, PANEL_H, LEFT, GAP = 720, 90, 58, 14
MODE_COLOURS = {
    "coast": "#bbbbbb",
    "climb": "#4c9be8",
    "hold": "#59b36b",
    "rotate": "#e8a33c",
    "land": "#a25fd1",
}


def flight_rows(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for t in lines:
        if t.get("kind") != "turn":
            continue
        if not rows and t.get("telemetry"):
            rows.append(t["telemetry"])
        rows.extend(t.get("rows") or [])
    return rows


def decisions(lines: list[dict[str, Any]]) -> list[tuple[float, float, str]]:
    """(time the policy saw the row, reply latency, command mode or 'invalid') per turn."""
    out = []
    for t in lines:
        if t.get("kind") == "turn" and t.get("telemetry") is not None:
            mode = (t.get("action") or {}).get("mode", "invalid")
            out.append((float(t["telemetry"]["t_s"]), float(t.get("latency_s") or 0.0), str(mode)))
    return out


def _poly(points: list[tuple[float, float]], colour: str, width: float = 1.6) -> str:
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline fill="none" stroke="{colour}" stroke-width="{width}" points="{pts}"/>'


def telemetry_svg(lines: list[dict[str, Any]]) -> str:
    rows = flight_rows(lines)
    if len(rows) < 2:
        return "<p>(no telemetry recorded)</p>"
    t_end = max(float(r["t_s"]) for r in rows) or 1.0
    plot_w = WIDTH - LEFT - 10

    def x(t: float) -> float:
        return LEFT + plot_w * t / t_end

    panels: list[str] = []
    y0 = 8

    def panel(title: str, series: list[tuple[str, str, list[float]]], ref: float | None = None) -> None:
        nonlocal y0
        vals = [v for _, _, vs in series for v in vs] + ([ref] if ref is not None else [])
        lo, hi = min(vals), max(vals)
        if hi - lo < 1e-6:
            hi = lo + 1.0
        pad = 0.08 * (hi - lo)
        lo, hi = lo - pad, hi + pad

        def y(v: float) -> float:
            return y0 + PANEL_H * (1 - (v - lo) / (hi - lo))

        g = [f'<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{PANEL_H}" fill="#fafafa" stroke="#ccc"/>']
        g.append(f'<text x="4" y="{y0 + 12}" font-size="11">{html.escape(title)}</text>')
        g.append(f'<text x="{LEFT - 4}" y="{y0 + 10}" font-size="9" text-anchor="end">{hi:.0f}</text>')
        g.append(f'<text x="{LEFT - 4}" y="{y0 + PANEL_H}" font-size="9" text-anchor="end">{lo:.0f}</text>')
        if lo < 0 < hi:
            g.append(
                f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#ddd"/>'
            )
        if ref is not None:
            g.append(
                f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(ref):.1f}" y2="{y(ref):.1f}" '
                'stroke="#999" stroke-dasharray="4 3"/>'
            )
        for i, (name, colour, vs) in enumerate(series):
            g.append(_poly([(x(float(r["t_s"])), y(v)) for r, v in zip(rows, vs, strict=True)], colour))
            g.append(
                f'<text x="{LEFT + 6 + 90 * i}" y="{y0 + PANEL_H - 4}" font-size="9" fill="{colour}">'
                f"{html.escape(name)}</text>"
            )
        panels.append("".join(g))
        y0 += PANEL_H + GAP

    roof = None
    if "truck_roof_m" in rows[0]:
        roof = float(rows[0]["truck_roof_m"]) - 0.646  # in h_m terms (h = 0 resting on the wheels)
    panel("height m", [("h_m", "#1f77b4", [float(r["h_m"]) for r in rows])], roof)
    panel(
        "roll deg",
        [
            ("roll_deg", "#d62728", [float(r["roll_deg"]) for r in rows]),
            ("pitch_deg", "#8c564b", [float(r["pitch_deg"]) for r in rows]),
        ],
    )
    panel(
        "wind m/s, y m",
        [
            ("wind_mps", "#2ca02c", [float(r["wind_mps"]) for r in rows]),
            ("wind_side_mps", "#98df8a", [float(r["wind_side_mps"]) for r in rows]),
            ("y_m", "#17becf", [float(r["y_m"]) for r in rows]),
        ],
    )
    # commands in force (from the rows) and each decision's latency
    g = [f'<text x="4" y="{y0 + 12}" font-size="11">command</text>']
    prev_t = 0.0
    for r in rows[1:]:
        mode = str(r.get("cmd", "coast")).split(":")[0]
        t = float(r["t_s"])
        g.append(
            f'<rect x="{x(prev_t):.1f}" y="{y0}" width="{max(x(t) - x(prev_t), 0.5):.1f}" height="16" '
            f'fill="{MODE_COLOURS.get(mode, "#000")}"><title>{html.escape(str(r.get("cmd")))}</title></rect>'
        )
        prev_t = t
    for i, (mode, colour) in enumerate(MODE_COLOURS.items()):
        g.append(f'<text x="{LEFT + 60 * i}" y="{y0 + 30}" font-size="9" fill="{colour}">{mode}</text>')
    y0 += 40
    decs = decisions(lines)
    lat_max = max([d[1] for d in decs] + [0.2])
    g.append(f'<text x="4" y="{y0 + 12}" font-size="11">reply s</text>')
    g.append(f'<text x="{LEFT - 4}" y="{y0 + 10}" font-size="9" text-anchor="end">{lat_max:.2g}</text>')
    g.append(f'<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="50" fill="#fafafa" stroke="#ccc"/>')
    for t, lat, mode in decs:
        h = 50 * lat / lat_max
        g.append(
            f'<rect x="{x(t):.1f}" y="{y0 + 50 - h:.1f}" width="{max(x(t + lat) - x(t), 1.5):.1f}" '
            f'height="{max(h, 1):.1f}" fill="{MODE_COLOURS.get(mode, "#d62728")}" opacity="0.8">'
            f"<title>t={t:.1f} s: {html.escape(mode)} after {lat:.3f} s</title></rect>"
        )
    y0 += 50 + GAP
    g.append(f'<text x="{LEFT}" y="{y0 + 4}" font-size="10">0 s</text>')
    g.append(f'<text x="{LEFT + plot_w}" y="{y0 + 4}" font-size="10" text-anchor="end">{t_end:.1f} s</text>')
    panels.append("".join(g))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y0 + 10}" '
        f'viewBox="0 0 {WIDTH} {y0 + 10}" class="telemetry">' + "".join(panels) + "</svg>"
    )
