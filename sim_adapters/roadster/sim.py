"""The roadster simulation: MuJoCo at 500 Hz, the flight computer at 50 Hz, a telemetry row every
0.2 s of simulated time, crash and success checks, and the shaped reward.

No rendering unless asked (`render_frame`); a flight costs a few percent of real time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim_adapters.roadster import aero, model
from sim_adapters.roadster.commands import Coast, describe_command
from sim_adapters.roadster.flight_computer import FlightState, thrusts
from sim_adapters.roadster.scenario import make_scenario, wind_vector

PHYSICS_HZ = 500
CONTROL_HZ = 50
ROW_S = 0.2
EXHAUST_VELOCITY_MPS = 850.0
"""Cold gas: air used = thrust / exhaust velocity (kg/s); a 2.1 t hover burns ~25 kg/s."""
MAX_FLIGHT_S = 14.0
SETTLE_S = 0.6
"""On four wheels this long = landed; the verdict is taken then."""
MAX_LEVEL_DEG = 20.0
MAX_SETTLED_RATE_DPS = 45.0
MAX_WHEEL_IMPACT_MPS = 9.0
"""The wheels survive a 4 m drop (8.9 m/s); harder is a crash."""
THRUSTERS_BODY = np.array(model.THRUSTERS_BODY_M).T
"""Thruster positions relative to the body origin, 3 x 4 (body frame)."""
ROW_FIELDS = (
    "t_s", "x_m", "y_m", "h_m", "v_fwd_mps", "v_side_mps", "vz_mps", "roll_deg", "pitch_deg", "yaw_deg",
    "roll_rate_dps", "pitch_rate_dps", "wind_mps", "wind_from_deg", "wind_side_mps", "air_kg", "air_pct",
    "wheels",
)  # fmt: skip


@dataclass
class FlightStatus:
    over: bool = False
    success: bool = False
    crashed: bool = False
    reason: str = ""
    landed_t_s: float | None = None


@dataclass
class FlightStats:
    max_height_m: float = 0.0
    min_clearance_m: float = math.inf
    """Kickflip: the lowest height of the car's centre above the roof while over the truck."""
    cleared_truck: bool = False
    max_roll_progress_deg: float = 0.0
    airborne: bool = False
    touchdown_vz_mps: float | None = None
    touchdown_tilt_deg: float | None = None
    touchdown_wheels_first: bool | None = None
    min_upright_err_deg: float = 180.0


class RoadsterSim:
    def __init__(self, stunt: str, wind_band: str = "light", seed: int = 0) -> None:
        import mujoco  # heavy: mujoco; lazily: the turn loop never imports MuJoCo

        self._mj = mujoco
        self.stunt = stunt
        self.scenario = make_scenario(stunt, wind_band, seed)
        sc = self.scenario
        self.model = mujoco.MjModel.from_xml_string(
            model.build_mjcf(stunt, sc.truck_x_m, sc.exit_height_m, 1.0 / PHYSICS_HZ)
        )
        self.data = mujoco.MjData(self.model)
        m = self.model
        self._car = m.body("car").id
        self._chassis_body_mass = float(m.body_mass[self._car])
        self._tyres = {m.geom(f"tyre_{w}").id for w in ("fl", "fr", "rl", "rr")}
        self._body_geoms = {m.geom("chassis").id, m.geom("cabin").id}
        self._ground = m.geom("ground").id
        self._truck = {m.geom(n).id for n in ("truck_bed", "truck_cab")} if stunt == "kickflip" else set()
        self._steps_per_tick = PHYSICS_HZ // CONTROL_HZ
        self._ticks_per_row = round(ROW_S * CONTROL_HZ)
        self.reset(seed, wind_band)

    # -- set-up ---------------------------------------------------------------------------
    def reset(self, seed: int, wind_band: str | None = None) -> None:
        mj = self._mj
        if wind_band is not None or seed != self.scenario.seed:
            self.scenario = make_scenario(self.stunt, wind_band or self.scenario.wind_band, seed)
        sc, m, d = self.scenario, self.model, self.data
        mj.mj_resetData(m, d)
        # one model per stunt: this flight's truck / ramp lip move the static scenery bodies
        if self.stunt == "kickflip":
            m.body_pos[m.body("truck").id] = [sc.truck_x_m + model.TRUCK_SIZE_M[0] / 2, 0.0, 0.0]
        else:
            m.body_pos[m.body("ramp").id] = [0.0, 0.0, sc.exit_height_m - model.RAMP_BUILT_HEIGHT_M]
        self.air_kg = sc.air_kg
        self.air0_kg = sc.air_kg
        self._rng = np.random.default_rng([sc.seed, 99])
        self._wind_mean = wind_vector(sc.wind_mean_mps, sc.wind_from_deg)
        self._gusts = aero.Gusts(sc.gust_sigma_frac * sc.wind_mean_mps, sc.gust_tau_s, self._rng)
        self.wind_now = self._wind_mean.copy()
        if self.stunt == "kickflip":
            d.qpos[:3] = [0.0, 0.0, model.RIDE_HEIGHT_M]
            d.qvel[0] = sc.speed_mps
            spin = sc.speed_mps / model.WHEEL_RADIUS_M
            for w in ("fl", "fr", "rl", "rr"):
                d.qvel[m.joint(f"spin_{w}").dofadr[0]] = spin
        else:
            # the corkscrew ramp leaves the car upside down at its lip: roll 180 degrees
            half = math.pi / 2
            d.qpos[:3] = [1.0, 0.0, sc.exit_height_m + model.RIDE_HEIGHT_M]
            d.qpos[3:7] = [math.cos(half), math.sin(half), 0.0, 0.0]
            d.qvel[:3] = [sc.speed_mps, 0.0, sc.exit_vz_mps]
            d.qvel[3] = math.radians(sc.exit_roll_rate_dps)
        mj.mj_forward(m, d)
        self.command: Any = Coast(mode="coast")
        self.t_s = 0.0
        self.roll_total = math.pi if self.stunt == "ramp_flip" else 0.0
        self.pitch_total = 0.0
        self._last_euler = self._euler()
        self.status = FlightStatus()
        self.stats = FlightStats(airborne=self.stunt == "ramp_flip")
        self._on_wheels_s = 0.0
        self._thrust = np.zeros(4)
        self._vz_before = float(d.qvel[2])
        self._update_mass()

    # -- measurements ---------------------------------------------------------------------
    def _rot(self) -> np.ndarray:
        return self.data.xmat[self._car].reshape(3, 3)

    def _euler(self) -> tuple[float, float]:
        """(roll, nose-up pitch), wrapped, from the body's rotation matrix."""
        r = self._rot()
        pitch_up = math.asin(max(-1.0, min(1.0, float(r[2, 0]))))
        roll = math.atan2(float(r[2, 1]), float(r[2, 2]))
        return roll, pitch_up

    def _unwrap(self) -> None:
        roll, pitch = self._euler()
        for name, new, old in (
            ("roll_total", roll, self._last_euler[0]),
            ("pitch_total", pitch, self._last_euler[1]),
        ):
            delta = (new - old + math.pi) % (2 * math.pi) - math.pi
            setattr(self, name, getattr(self, name) + delta)
        self._last_euler = (roll, pitch)

    def height_m(self) -> float:
        return float(self.data.xpos[self._car][2]) - model.RIDE_HEIGHT_M

    def _update_mass(self) -> None:
        self.model.body_mass[self._car] = self._chassis_body_mass + self.air_kg

    def mass_kg(self) -> float:
        return model.DRY_MASS_KG + self.air_kg

    def body_rates(self) -> np.ndarray:
        return self._rot().T @ self.data.qvel[3:6]

    # -- contacts -------------------------------------------------------------------------
    def _contacts(self) -> tuple[set[int], bool, bool, list[float]]:
        """(tyres touching, body touching the ground, anything touching the truck, tyre contact ys)."""
        d = self.data
        tyres: set[int] = set()
        body_ground = truck = False
        ys: list[float] = []
        for i in range(d.ncon):
            c = d.contact[i]
            g = {int(c.geom1), int(c.geom2)}
            if g & self._truck and (g & self._tyres or g & self._body_geoms):
                truck = True
            if self._ground in g:
                if g & self._tyres:
                    tyres |= g & self._tyres
                    ys.append(float(c.pos[1]))
                if g & self._body_geoms:
                    body_ground = True
        return tyres, body_ground, truck, ys

    # -- stepping -------------------------------------------------------------------------
    def set_command(self, cmd: Any) -> None:
        self.command = cmd

    def _tick(self) -> None:
        """One 50 Hz control tick: wind, drag, thrust, then 10 physics steps."""
        mj, m, d = self._mj, self.model, self.data
        dt = 1.0 / CONTROL_HZ
        r = self._rot()
        h = self.height_m()
        gust = self._gusts.step(dt)
        self.wind_now = (self._wind_mean + np.array([gust[0], gust[1], 0.0])) * aero.height_factor(h + 1.0)
        force = aero.drag_force(r, self.wind_now - d.qvel[:3])
        rates = r.T @ d.qvel[3:6]
        torque = -r @ (aero.ROTATIONAL_DAMPING_NMS * rates) + np.cross(
            r @ aero.CENTRE_OF_PRESSURE_BODY_M, force
        )
        tyres, _, _, _ = self._contacts()
        state = FlightState(
            self.roll_total,
            self.pitch_total,
            rates,
            float(d.qvel[2]),
            h,
            float(r[2, 2]),
            self.mass_kg(),
            len(tyres),
            r[2, :].copy(),
        )
        f = thrusts(self.command, state) if self.air_kg > 0 else np.zeros(4)
        used = float(f.sum()) / EXHAUST_VELOCITY_MPS * dt
        if used > self.air_kg:
            f *= self.air_kg / used
            used = self.air_kg
        if self.air0_kg < 1e5:  # (benchmarks set an endless tank)
            self.air_kg -= used
        self._thrust = f
        normal = r[:, 2]
        pos_world = (r @ THRUSTERS_BODY).T  # 4 x 3, relative to the body origin
        force = force + normal * float(f.sum())
        torque = torque + np.cross(pos_world, np.outer(f, normal)).sum(axis=0)
        # xfrc_applied acts at the body's centre of mass; the origin is there (symmetric geoms) to within cm
        d.xfrc_applied[self._car, :3] = force
        d.xfrc_applied[self._car, 3:] = torque
        self._update_mass()
        self._vz_before = float(d.qvel[2])
        mj.mj_step(m, d, nstep=self._steps_per_tick)
        self.t_s += dt
        self._unwrap()
        self._check()

    def _check(self) -> None:
        _st, stats, d = self.status, self.stats, self.data
        tyres, body_ground, truck, ys = self._contacts()
        h = self.height_m()
        stats.max_height_m = max(stats.max_height_m, h)
        if self.stunt == "kickflip":
            self._truck_progress(h)
            if abs(self.roll_total) > math.radians(stats.max_roll_progress_deg):
                stats.max_roll_progress_deg = min(360.0, math.degrees(abs(self.roll_total)))
        else:
            err = abs(self.roll_total - 2 * math.pi * round(self.roll_total / (2 * math.pi)))
            stats.min_upright_err_deg = min(stats.min_upright_err_deg, math.degrees(err))
        if truck:
            return self._end(False, "hit the truck", crashed=True)
        if body_ground:
            return self._end(
                False, "the body touched the ground before the wheels took the landing", crashed=True
            )
        if not tyres and not stats.airborne and h > 0.15:
            stats.airborne = True
        if tyres and stats.airborne and stats.touchdown_vz_mps is None:
            # the speed just before the tyres met the ground (this tick's contact already slowed it)
            stats.touchdown_vz_mps = min(float(d.qvel[2]), self._vz_before)
            stats.touchdown_tilt_deg = self.tilt_deg()
            stats.touchdown_wheels_first = True
            if -stats.touchdown_vz_mps > MAX_WHEEL_IMPACT_MPS:
                speed = -stats.touchdown_vz_mps
                return self._end(
                    False, f"touched down at {speed:.1f} m/s: the suspension broke", crashed=True
                )
        if len(tyres) == 4 and stats.airborne:
            self._on_wheels_s += 1.0 / CONTROL_HZ
        else:
            self._on_wheels_s = 0.0
        if self._on_wheels_s >= SETTLE_S:
            return self._verdict(ys)
        if self.t_s >= MAX_FLIGHT_S:
            return self._end(False, f"no landing within {MAX_FLIGHT_S:g} s")
        return None

    def _truck_progress(self, h: float) -> None:
        sc, stats = self.scenario, self.stats
        x = float(self.data.xpos[self._car][0])
        half = model.CAR_LENGTH_M / 2
        if sc.truck_x_m - half <= x <= sc.truck_x_m + model.TRUCK_SIZE_M[0] + half:
            stats.min_clearance_m = min(
                stats.min_clearance_m, h + model.RIDE_HEIGHT_M - model.TRUCK_SIZE_M[2]
            )
        if x - half > sc.truck_x_m + model.TRUCK_SIZE_M[0]:
            stats.cleared_truck = True

    def tilt_deg(self) -> float:
        return math.degrees(math.acos(max(-1.0, min(1.0, float(self._rot()[2, 2])))))

    def _verdict(self, tyre_ys: list[float]) -> None:
        why = []
        if self.tilt_deg() > MAX_LEVEL_DEG:
            why.append(f"tilted {self.tilt_deg():.0f} degrees")
        rate = math.degrees(float(np.linalg.norm(self.data.qvel[3:6])))
        if rate > MAX_SETTLED_RATE_DPS:
            why.append(f"still spinning at {rate:.0f} deg/s")
        off = [y for y in tyre_ys if abs(y) > model.ROAD_HALF_WIDTH_M]
        if off or abs(float(self.data.xpos[self._car][1])) > model.ROAD_HALF_WIDTH_M:
            why.append(f"off the 14 m road (y = {self.data.xpos[self._car][1]:+.1f} m)")
        if self.stunt == "kickflip":
            if not self.stats.cleared_truck:
                why.append("landed before clearing the truck")
            if abs(abs(self.roll_total) - 2 * math.pi) > math.radians(MAX_LEVEL_DEG):
                why.append(f"rolled {math.degrees(self.roll_total):.0f} degrees, not a full 360")
        if why:
            return self._end(False, "landed but " + ", ".join(why))
        self.status.landed_t_s = self.t_s
        return self._end(True, "landed on four wheels on the road, level, not spinning")

    def _end(self, success: bool, reason: str, crashed: bool = False) -> None:
        self.status.over, self.status.success, self.status.crashed, self.status.reason = (
            True,
            success,
            crashed,
            reason,
        )
        self.data.xfrc_applied[:] = 0.0

    def step(self, duration_s: float) -> None:
        """Fly `duration_s` of simulated time (whole 50 Hz ticks) with the command in force."""
        for _ in range(max(0, round(duration_s * CONTROL_HZ))):
            if self.status.over:
                return
            self._tick()

    def step_row(self) -> None:
        self.step(ROW_S)

    # -- telemetry ------------------------------------------------------------------------
    def row(self) -> dict[str, Any]:
        d, r = self.data, self._rot()
        yaw = math.atan2(float(r[1, 0]), float(r[0, 0]))
        heading = np.array([math.cos(yaw), math.sin(yaw)])
        v = d.qvel[:3]
        rates = self.body_rates()
        wind = self.wind_now
        wind_speed = float(np.linalg.norm(wind[:2]))
        from_deg = math.degrees(math.atan2(-wind[1], -wind[0])) % 360 if wind_speed > 1e-6 else 0.0
        tyres, _, _, _ = self._contacts()
        row: dict[str, Any] = {
            "t_s": round(self.t_s, 2),
            "x_m": round(float(d.xpos[self._car][0]), 1),
            "y_m": round(float(d.xpos[self._car][1]), 2),
            "h_m": round(self.height_m(), 2),
            "v_fwd_mps": round(float(v[:2] @ heading), 2),
            "v_side_mps": round(float(v[1]), 2),
            "vz_mps": round(float(v[2]), 2),
            "roll_deg": round(math.degrees(self.roll_total), 1),
            "pitch_deg": round(math.degrees(self.pitch_total), 1),
            "yaw_deg": round(math.degrees(yaw), 1),
            "roll_rate_dps": round(math.degrees(float(rates[0])), 1),
            "pitch_rate_dps": round(-math.degrees(float(rates[1])), 1),
            "wind_mps": round(wind_speed, 1),
            "wind_from_deg": round(from_deg),
            "wind_side_mps": round(float(wind[1]), 1),
            "air_kg": round(self.air_kg, 1),
            "air_pct": round(100 * self.air_kg / self.air0_kg),
            "wheels": len(tyres),
            "cmd": describe_command(self.command),
        }
        if self.stunt == "kickflip":
            row |= self.truck_row()
        return row

    def truck_row(self) -> dict[str, Any]:
        sc = self.scenario
        x = float(self.data.xpos[self._car][0])
        speed = max(float(self.data.qvel[0]), 0.5)
        nose, tail = x + model.CAR_LENGTH_M / 2, x - model.CAR_LENGTH_M / 2
        far = sc.truck_x_m + model.TRUCK_SIZE_M[0]
        return {
            "truck_ahead_m": round(max(sc.truck_x_m - nose, 0.0), 1),
            "truck_roof_m": model.TRUCK_SIZE_M[2],
            "above_roof_m": round(self.height_m() + model.RIDE_HEIGHT_M - model.TRUCK_SIZE_M[2], 2),
            "time_to_truck_s": round(max(sc.truck_x_m - nose, 0.0) / speed, 2),
            "time_past_truck_s": round(max(far - tail, 0.0) / speed, 2),
        }

    # -- reward ---------------------------------------------------------------------------
    def reward(self) -> dict[str, float]:
        """Shaped reward in [0, 1]: partial credit (<= 0.5), +0.4 landing, +0.1 clean finish."""
        st, stats = self.status, self.stats
        parts: dict[str, float] = {}
        if self.stunt == "kickflip":
            target = model.TRUCK_SIZE_M[2] + 1.4
            parts["height"] = 0.1 * min(1.0, max(stats.max_height_m + model.RIDE_HEIGHT_M, 0.0) / target)
            parts["truck"] = 0.1 * float(stats.cleared_truck)
            parts["rotation"] = 0.15 * min(1.0, stats.max_roll_progress_deg / 360.0)
        else:
            parts["height"] = 0.1 * float(not st.crashed or self.t_s > 1.0) * min(1.0, self.t_s / 2.0)
            parts["truck"] = 0.0
            parts["rotation"] = 0.25 * max(0.0, 1.0 - self.stats.min_upright_err_deg / 180.0)
        tq = 0.0
        if stats.touchdown_vz_mps is not None and not st.crashed:
            soft = max(0.0, 1.0 - max(-stats.touchdown_vz_mps - 1.0, 0.0) / 8.0)
            level = max(0.0, 1.0 - (stats.touchdown_tilt_deg or 0.0) / 45.0)
            tq = 0.15 * soft * level
        parts["touchdown"] = tq
        parts["landing"] = 0.4 if st.success else 0.0
        clean = 0.0
        if st.success:
            soft = stats.touchdown_vz_mps is not None and -stats.touchdown_vz_mps <= 3.0
            air = self.air_kg >= 0.1 * self.air0_kg
            centred = abs(float(self.data.xpos[self._car][1])) <= model.ROAD_HALF_WIDTH_M / 2
            clean = 0.1 * (soft + air + centred) / 3.0
        parts["clean"] = clean
        parts["total"] = min(1.0, sum(parts.values()))
        return parts

    # -- rendering (optional) -------------------------------------------------------------
    def render_frame(self, renderer: Any) -> np.ndarray:
        renderer.update_scene(self.data, camera="chase")
        return renderer.render()
