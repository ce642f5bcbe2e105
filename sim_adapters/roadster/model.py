"""The roadster scene as MJCF: a 4.5 m, 2,000 kg free body on four sprung wheels, the 14 m road,
the curled ramp (scenery: the flight starts where the ramp releases the car) and the parked truck.

Coordinates: x along the road (the car drives toward +x), y to the left (road centre y = 0), z up.
"""

from __future__ import annotations

import math

CAR_LENGTH_M = 4.5
CAR_WIDTH_M = 1.9
DRY_MASS_KG = 2000.0
CHASSIS_MASS_KG = 1600.0
CABIN_MASS_KG = 200.0
WHEEL_MASS_KG = 50.0
"""Wheel spin inertia is kept small (0.08 kg m^2) so its gyroscopic torque does not yaw the car in a roll."""
WHEEL_RADIUS_M = 0.33
WHEEL_X_M = 1.45
WHEEL_Y_M = 0.78
WHEEL_Z_M = -0.38
"""Wheel centre below the chassis centre at the spring's rest length."""
SUSPENSION_STIFFNESS_N_PER_M = 70_000.0
SUSPENSION_DAMPING_NS_PER_M = 9_000.0
SUSPENSION_TRAVEL_M = (-0.12, 0.26)
"""Slide range of each wheel (down, up) relative to its rest position."""
RIDE_HEIGHT_M = 0.646
"""Chassis centre height when the car rests on its wheels (spring sag included)."""
ROAD_HALF_WIDTH_M = 7.0
THRUSTERS_BODY_M = ((1.8, 0.8, -0.3), (1.8, -0.8, -0.3), (-1.8, 0.8, -0.3), (-1.8, -0.8, -0.3))
"""Front-left, front-right, rear-left, rear-right: at the floor's corners, pushing along +z (body)."""
RAMP_BUILT_HEIGHT_M = 12.0
"""The ramp is built for a 12 m lip; a flight's own lip height shifts its body (no rebuild per seed)."""
TRUCK_SIZE_M = (5.7, 2.0, 1.9)
"""Length, width, roof height of the parked truck."""


def _ramp_geoms(ramp_end_x_m: float, exit_height_m: float) -> str:
    """A corkscrew ribbon that climbs to the exit and rolls 180 degrees about the road axis.

    Scenery only (contype 0): the flight starts at its lip, upside down, and moves away from it."""
    n, length = 14, 26.0
    parts = []
    for i in range(n):
        f = (i + 0.5) / n
        x = ramp_end_x_m - length * (1 - f)
        z = exit_height_m * (f**1.6) + 0.2
        roll = math.pi * f**2
        y = -2.2 * math.sin(roll)
        qw, qx = math.cos(roll / 2), math.sin(roll / 2)
        zz = z - 0.4 * math.cos(roll)
        parts.append(
            f'<geom type="box" pos="{x:.3f} {y:.3f} {zz:.3f}" quat="{qw:.4f} {qx:.4f} 0 0" '
            f'size="{length / n / 2 + 0.05:.3f} 1.4 0.06" rgba="0.75 0.72 0.62 1" '
            'contype="0" conaffinity="0"/>'
        )
        parts.append(
            f'<geom type="cylinder" fromto="{x:.3f} {y:.3f} 0 {x:.3f} {y:.3f} {max(zz - 0.5, 0.1):.3f}" '
            f'size="0.08" rgba="0.4 0.4 0.42 1" contype="0" conaffinity="0"/>'
        )
    return "\n    ".join(parts)


def build_mjcf(
    stunt: str, truck_x_m: float = 60.0, ramp_exit_height_m: float = 12.0, timestep_s: float = 0.002
) -> str:
    """The scene for one flight. The truck exists in both stunts' scenes only when stunt is
    'kickflip'; the ramp only for 'ramp_flip'."""
    lx, ly = CAR_LENGTH_M / 2, CAR_WIDTH_M / 2
    tl, tw, th = TRUCK_SIZE_M
    lo, hi = SUSPENSION_TRAVEL_M
    wheels = []
    for name, sx, sy in (("fl", 1, 1), ("fr", 1, -1), ("rl", -1, 1), ("rr", -1, -1)):
        wheels.append(
            f"""<body name="wheel_{name}" pos="{sx * WHEEL_X_M} {sy * WHEEL_Y_M} {WHEEL_Z_M}">
          <joint name="susp_{name}" type="slide" axis="0 0 1" range="{lo} {hi}" limited="true"
                 stiffness="{SUSPENSION_STIFFNESS_N_PER_M}" damping="{SUSPENSION_DAMPING_NS_PER_M}"
                 springref="0" solreflimit="0.01 1"/>
          <inertial pos="0 0 0" mass="{WHEEL_MASS_KG}" diaginertia="0.08 0.08 0.08"/>
          <joint name="spin_{name}" type="hinge" axis="0 1 0" damping="0.05"/>
          <geom name="tyre_{name}" type="sphere" size="{WHEEL_RADIUS_M}"
                rgba="0.08 0.08 0.08 1" friction="1.1 0.02 0.001" condim="3"/>
        </body>"""
        )
    scenery = ""
    if stunt == "kickflip":
        scenery = f"""<body name="truck" pos="{truck_x_m + tl / 2} 0 0">
      <geom name="truck_bed" type="box" pos="0 0 {th * 0.4}" size="{tl / 2} {tw / 2} {th * 0.4}"
            rgba="0.62 0.64 0.66 1"/>
      <geom name="truck_cab" type="box" pos="{tl * 0.1} 0 {th * 0.9}"
            size="{tl * 0.28} {tw / 2 - 0.05} {th * 0.1}" rgba="0.55 0.57 0.6 1"/>
    </body>"""
    elif stunt == "ramp_flip":
        scenery = f"""<body name="ramp" pos="0 0 {ramp_exit_height_m - RAMP_BUILT_HEIGHT_M}">
      {_ramp_geoms(0.0, RAMP_BUILT_HEIGHT_M)}
    </body>"""
    return f"""<mujoco model="roadster">
  <compiler angle="radian"/>
  <option timestep="{timestep_s}" gravity="0 0 -9.81" integrator="implicitfast"/>
  <visual><global offwidth="640" offheight="360"/><quality shadowsize="0" offsamples="0"/>
    <headlight ambient="0.45 0.45 0.45" diffuse="0.5 0.5 0.5"/></visual>
  <asset>
    <texture name="sky" type="skybox" builtin="gradient" rgb1="0.55 0.7 0.9" rgb2="0.9 0.93 1"
             width="64" height="64"/>
    <texture name="dirt" type="2d" builtin="checker" rgb1="0.47 0.42 0.33" rgb2="0.43 0.39 0.3"
             width="64" height="64"/>
    <material name="dirt" texture="dirt" texrepeat="60 60"/>
  </asset>
  <worldbody>
    <light pos="0 0 50" dir="0.2 0.3 -1" directional="true" castshadow="false"/>
    <geom name="ground" type="plane" size="400 200 1" material="dirt" friction="1.0 0.02 0.001"/>
    <geom name="road" type="box" pos="120 0 0.002" size="400 {ROAD_HALF_WIDTH_M} 0.002"
          rgba="0.2 0.2 0.22 1" contype="0" conaffinity="0"/>
    <geom type="box" pos="120 0 0.005" size="400 0.1 0.002" rgba="0.95 0.85 0.2 1"
          contype="0" conaffinity="0"/>
    {scenery}
    <body name="car" pos="0 0 {RIDE_HEIGHT_M}">
      <freejoint name="car"/>
      <camera name="chase" mode="trackcom" pos="-11 3 4.5" xyaxes="-0.26 -0.97 0 0.3 -0.08 0.95"/>
      <geom name="chassis" type="box" size="{lx} {ly} 0.25" mass="{CHASSIS_MASS_KG}" rgba="0.75 0.08 0.1 1"/>
      <geom name="cabin" type="box" pos="0 0 0.43" size="1.15 0.8 0.18" mass="{CABIN_MASS_KG}"
            rgba="0.15 0.18 0.25 1"/>
      {"".join(wheels)}
    </body>
  </worldbody>
</mujoco>
"""
