"""Wind (mean + gusts, weaker near the road) and orientation-dependent drag."""

from __future__ import annotations

import math

import numpy as np

AIR_DENSITY_KG_M3 = 1.2
CDA_BODY_M2 = np.array([1.0, 7.0, 9.0])
"""Drag area (Cd x A) for air along the body's x (nose-first), y (side-on) and z (flat) axes:
side-on shows 7x, flat 9x the nose-first area."""
ROTATIONAL_DAMPING_NMS = np.array([900.0, 2500.0, 2500.0])
"""Aerodynamic damping of the body's roll, pitch and yaw rates (N m per rad/s)."""
CENTRE_OF_PRESSURE_BODY_M = np.array([0.0, 0.0, 0.6])
"""Where the drag acts, relative to the centre of mass: above it (the cabin), so a side wind rolls the car."""
WIND_REF_HEIGHT_M = 6.0
NEAR_GROUND_FACTOR = 0.65
"""The wind at the road surface is this fraction of the mean; full strength from WIND_REF_HEIGHT_M up."""


def height_factor(height_m: float) -> float:
    f = min(max(height_m, 0.0) / WIND_REF_HEIGHT_M, 1.0)
    return NEAR_GROUND_FACTOR + (1.0 - NEAR_GROUND_FACTOR) * math.sqrt(f)


class Gusts:
    """Ornstein-Uhlenbeck gusts on the two horizontal axes (m/s), seeded."""

    def __init__(self, sigma_mps: float, tau_s: float, rng: np.random.Generator) -> None:
        self.sigma, self.tau, self.rng = sigma_mps, tau_s, rng
        self.value = rng.normal(0.0, sigma_mps, 2) if sigma_mps > 0 else np.zeros(2)

    def step(self, dt_s: float) -> np.ndarray:
        a = math.exp(-dt_s / self.tau)
        self.value = a * self.value + math.sqrt(1 - a * a) * self.rng.normal(0.0, self.sigma, 2)
        return self.value


def drag_force(rot_body_to_world: np.ndarray, air_rel_mps: np.ndarray) -> np.ndarray:
    """World-frame drag force on the car for the air's velocity relative to the car (world frame)."""
    speed = float(np.linalg.norm(air_rel_mps))
    if speed < 1e-6:
        return np.zeros(3)
    rel_body = rot_body_to_world.T @ air_rel_mps
    f_body = 0.5 * AIR_DENSITY_KG_M3 * CDA_BODY_M2 * speed * rel_body
    return rot_body_to_world @ f_body
