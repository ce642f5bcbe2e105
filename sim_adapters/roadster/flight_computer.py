"""The 50 Hz flight computer: the command in force -> four thrusts (N), numpy only.

Thrusters push along the floor's normal (body +z), so the same firing that lifts the car upright
pushes it toward the ground upside down. Left pair harder rolls it (left side up: + roll = right
side down); front pair harder pitches the nose up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim_adapters.roadster.commands import Climb, Coast, Hold, Land, Rotate
from sim_adapters.roadster.model import THRUSTERS_BODY_M

MAX_THRUST_N = 12_000.0
GRAVITY_MPS2 = 9.81
INERTIA_KGM2 = np.array([900.0, 3700.0, 4000.0])
"""Roll, pitch, yaw inertia the controller assumes (close to the model's)."""
ATTITUDE_KP = 30.0
ATTITUDE_KD = 11.0
VZ_GAIN = 3.0
ROTATE_RATE_MAX_RAD_S = 6.5
ROTATE_BRAKE_RAD_S2 = 11.0
ROTATE_RATE_GAIN = 14.0
ROTATE_LIFT_G = 0.5
"""`lift` 1.0 in a rotate carries half the weight while the floor faces the sky: it slows a fall,
it does not stop one (only climb, hold and land hold a vertical speed)."""
LAND_BRAKE_MPS2 = 5.5
LAND_TOUCHDOWN_MPS = 1.4

_POS = np.array(THRUSTERS_BODY_M)
# [total force; roll torque; pitch torque] = A @ f  (torque = r x (0, 0, f))
_A = np.vstack([np.ones(4), _POS[:, 1], -_POS[:, 0]])
_A_PINV = np.linalg.pinv(_A)


@dataclass
class FlightState:
    """What the flight computer measures (its own sensors, not the model's telemetry text)."""

    roll_total_rad: float
    """Unwrapped roll since the flight began (+ = right side down)."""
    pitch_total_rad: float
    """Unwrapped nose-up pitch."""
    rates_body_rad_s: np.ndarray
    """Body angular velocity (x forward, y left, z up)."""
    vz_mps: float
    height_m: float
    """Height of the car's centre above its resting ride height."""
    normal_z: float
    """World z component of the floor normal (1 upright, -1 upside down)."""
    mass_kg: float
    wheels_down: int
    world_up_body: np.ndarray
    """World +z expressed in the body frame."""


def mix(total_n: float, roll_torque_nm: float, pitch_torque_nm: float) -> np.ndarray:
    """Four thrusts in [0, MAX] giving the torques first and the total force as near as they allow."""
    want = _A_PINV @ np.array([0.0, roll_torque_nm, pitch_torque_nm])  # zero-sum differential part
    spread = float(want.max() - want.min())
    if spread > MAX_THRUST_N:
        want *= MAX_THRUST_N / spread
    lo, hi = -float(want.min()), MAX_THRUST_N - float(want.max())
    level = min(max(total_n / 4.0, lo), hi)
    return np.clip(want + level, 0.0, MAX_THRUST_N)


def _nearest_level(angle_rad: float) -> float:
    return 2 * math.pi * round(angle_rad / (2 * math.pi))


def _attitude_torques(s: FlightState, roll_target: float, pitch_target: float) -> tuple[float, float]:
    """Body-frame (x, y) torques toward the target roll (about the body's long axis) and nose-up
    pitch (about the horizontal axis across the nose, whichever way up the car is)."""
    p = float(s.rates_body_rad_s[0])
    tx = INERTIA_KGM2[0] * (ATTITUDE_KP * (roll_target - s.roll_total_rad) - ATTITUDE_KD * p)
    axis_b, up_rate = _nose_up_axis(s)
    t_up = INERTIA_KGM2[1] * (ATTITUDE_KP * (pitch_target - s.pitch_total_rad) - ATTITUDE_KD * up_rate)
    return tx + t_up * float(axis_b[0]), t_up * float(axis_b[1])


def _nose_up_axis(s: FlightState) -> tuple[np.ndarray, float]:
    """The axis (body frame) about which a positive rotation raises the nose, and the rate about it."""
    zw_b = s.world_up_body
    a = np.cross(np.array([1.0, 0.0, 0.0]), zw_b)
    n = float(np.linalg.norm(a))
    if n < 1e-6:
        return np.zeros(3), 0.0
    a /= n
    return a, float(a @ s.rates_body_rad_s)


def _vertical_thrust(s: FlightState, vz_target: float) -> float:
    accel = GRAVITY_MPS2 + VZ_GAIN * (vz_target - s.vz_mps)
    return s.mass_kg * max(accel, 0.0) / max(s.normal_z, 0.35) if s.normal_z > 0.2 else 0.0


def land_vz_target(height_m: float) -> float:
    """Descent speed that brakes at LAND_BRAKE_MPS2 to a soft touchdown."""
    return -max(LAND_TOUCHDOWN_MPS, math.sqrt(2 * LAND_BRAKE_MPS2 * max(height_m - 0.3, 0.0)))


def thrusts(cmd: Coast | Climb | Hold | Rotate | Land, s: FlightState) -> np.ndarray:
    """Four thruster forces (FL, FR, RL, RR) in N for one 50 Hz tick."""
    if isinstance(cmd, Coast):
        return np.zeros(4)
    if isinstance(cmd, Climb | Hold | Land):
        roll0, pitch0 = _nearest_level(s.roll_total_rad), _nearest_level(s.pitch_total_rad)
        if isinstance(cmd, Hold):
            roll_t, pitch_t, vz = roll0 + math.radians(cmd.roll), pitch0 + math.radians(cmd.pitch), cmd.vz
        elif isinstance(cmd, Climb):
            roll_t, pitch_t, vz = roll0, pitch0, cmd.vz
        else:
            if s.wheels_down >= 1 or s.height_m < 0.15:
                return np.zeros(4)  # touching down: let the springs take it
            roll_t, pitch_t, vz = roll0, pitch0, land_vz_target(s.height_m)
        tx, ty = _attitude_torques(s, roll_t, pitch_t)
        return mix(_vertical_thrust(s, vz), tx, ty)
    # rotate
    if cmd.axis == "roll":
        angle, rate = s.roll_total_rad, float(s.rates_body_rad_s[0])
    else:
        angle, rate = s.pitch_total_rad, _nose_up_axis(s)[1]
    err = math.radians(cmd.to) - angle
    want_rate = math.copysign(min(ROTATE_RATE_MAX_RAD_S, math.sqrt(2 * ROTATE_BRAKE_RAD_S2 * abs(err))), err)
    if abs(err) < math.radians(4) and abs(rate) < 1.0:
        want_rate = err * 4.0
    axis_torque = INERTIA_KGM2[0 if cmd.axis == "roll" else 1] * ROTATE_RATE_GAIN * (want_rate - rate)
    if cmd.axis == "roll":
        tx, ty = _attitude_torques(s, s.roll_total_rad, _nearest_level(s.pitch_total_rad))
        tx = axis_torque
    else:
        tx, _ = _attitude_torques(s, _nearest_level(s.roll_total_rad), s.pitch_total_rad)
        axis_b = _nose_up_axis(s)[0]
        tx, ty = tx + axis_torque * float(axis_b[0]), axis_torque * float(axis_b[1])
    lift = cmd.lift * ROTATE_LIFT_G * s.mass_kg * GRAVITY_MPS2 * max(s.normal_z, 0.0)
    return mix(lift, tx, ty)
