"""A YAM arm that moves under physics behind I2RT's own robot code, for the driver without hardware.

I2RT's real robot is `MotorChainRobot` (its 1 kHz server loop: gravity compensation, joint-limit
checks, the gripper's force limiter, the MIT-mode command it sends) over a `DMChainCanInterface`
(a CAN thread that sends each motor its command and replaces `state`, the motors' feedback frames,
on every bus cycle). `PhysicsMotorChain` stands in for the CAN bus and the motors only: each motor
applies the MIT-mode law its firmware applies, torque = kp (q_cmd - q) + kd (v_cmd - v) + tau_ff,
to I2RT's own MuJoCo model of the arm and gripper, stepped in real time by a thread that plays the
CAN thread (`state` replaced every cycle, `running`, `read_states()` stamped when called, as
I2RT's). `make_physics_yam` builds I2RT's `MotorChainRobot` on it with the parameters
`get_yam_robot` uses on hardware, so the driver meets the real robot code, with real velocities,
tracking lag and stopping distances.

Faults as the real chain produces them: `stall()` (the CAN thread stops answering while `running`
stays True: the frames stop changing) and `fail(reason)` (a motor error: the thread raises and
`running` goes False, as DMChainCanInterface's loop does).

The gripper: the model's two finger slides (0 = closed .. 0.0475 m = open) are driven as one motor
through a rack of `GRIPPER_TRAVEL_RAD` for the full stroke, with a stand-in stiffness (the rack's
gearing is not in the model); I2RT's gripper limits are given (no calibration run).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

ARMATURE_KG_M2 = 0.02
"""Reflected rotor inertia added to every arm joint (the model has none; a geared motor's rotor
dominates a light link's inertia, and keeps the motors' kd stable at a 2 ms step)."""
GRIPPER_TRAVEL_RAD = 4.0
GRIPPER_KP_N_M = 400.0
GRIPPER_KD_N_S_M = 10.0


class PhysicsMotorChain:
    """I2RT's MotorChain protocol (`__len__`, `set_commands`, `read_states`, `running`, `state`,
    `close`) over MuJoCo: 6 arm motors + the gripper motor."""

    def __init__(self, xml_path: str, initial_q: np.ndarray, rate_hz: float = 500.0) -> None:
        import mujoco  # heavy: mujoco

        self._mj = mujoco
        self.model = mujoco.MjModel.from_xml_path(xml_path)
        # an arm alone in space: no table, and the meshes' self-contacts (which I2RT's model has at
        # common poses) are not what the motors feel
        self.model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
        self.model.dof_armature[:6] += ARMATURE_KG_M2
        self.model.dof_armature[6:8] += 0.5
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:6] = np.asarray(initial_q, float)[:6]
        self.data.qpos[6:8] = 0.0475
        mujoco.mj_forward(self.model, self.data)
        self.period_s = 1.0 / rate_hz
        self.steps = max(1, round(self.period_s / self.model.opt.timestep))
        self.lock = threading.Lock()
        self.commands = {"torque": np.zeros(7), "pos": self._motor_pos(), "vel": np.zeros(7),
                         "kp": np.zeros(7), "kd": np.zeros(7)}  # fmt: skip
        self.running = True
        self.same_bus_device_driver = None
        self.enable_auto_recovery = False
        self._stalled = threading.Event()
        self._enabled = threading.Event()  # the motors hold still until their first command
        self._failure: str | None = None
        self.state: list[Any] = self._frames()
        self._thread = threading.Thread(target=self._can_loop, daemon=True, name="physics_motor_chain")
        self._thread.start()

    def __len__(self) -> int:
        return 7

    def _motor_pos(self) -> np.ndarray:
        q = np.empty(7)
        q[:6] = self.data.qpos[:6]
        q[6] = self.data.qpos[6] / 0.0475 * GRIPPER_TRAVEL_RAD
        return q

    def _motor_vel(self) -> np.ndarray:
        v = np.empty(7)
        v[:6] = self.data.qvel[:6]
        v[6] = self.data.qvel[6] / 0.0475 * GRIPPER_TRAVEL_RAD
        return v

    def _frames(self) -> list[Any]:
        from i2rt.motor_drivers.utils import FeedbackFrameInfo  # optional: i2rt

        pos, vel = self._motor_pos(), self._motor_vel()
        torque = np.append(self.data.qfrc_applied[:6], self.data.qfrc_applied[6])
        return [
            FeedbackFrameInfo(i + 1, "0x1", "", float(pos[i]), float(vel[i]), float(torque[i]), 30.0, 30.0)
            for i in range(7)
        ]

    def _can_loop(self) -> None:
        due = time.monotonic()
        while self.running:
            if self._failure is not None:
                self.running = False
                raise RuntimeError(self._failure)  # as DMChainCanInterface's loop does
            if self._stalled.is_set() or not self._enabled.is_set():
                time.sleep(self.period_s)
                due = time.monotonic()
                continue
            with self.lock:
                cmd = {k: v.copy() for k, v in self.commands.items()}
            behind = 0
            while time.monotonic() >= due and behind < 20:
                self._step(cmd)
                due += self.period_s
                behind += 1
            if behind >= 20:
                due = time.monotonic()
            frames = self._frames()
            with self.lock:
                self.state = frames  # a new list every bus cycle, as the CAN thread's feedback
            time.sleep(max(0.0, due - time.monotonic()))

    def _step(self, cmd: dict[str, np.ndarray]) -> None:
        d = self.data
        q, v = self._motor_pos(), self._motor_vel()
        tau = cmd["kp"] * (cmd["pos"] - q) + cmd["kd"] * (cmd["vel"] - v) + cmd["torque"]
        d.qfrc_applied[:6] = tau[:6]
        x_cmd = cmd["pos"][6] / GRIPPER_TRAVEL_RAD * 0.0475
        for j in (6, 7):
            d.qfrc_applied[j] = GRIPPER_KP_N_M * (x_cmd - d.qpos[j]) - GRIPPER_KD_N_S_M * d.qvel[j]
        self._mj.mj_step(self.model, d, nstep=self.steps)

    # -- I2RT's MotorChain protocol ----------------------------------------------------
    def set_commands(
        self,
        torques: np.ndarray,
        pos: np.ndarray | None = None,
        vel: np.ndarray | None = None,
        kp: np.ndarray | None = None,
        kd: np.ndarray | None = None,
        get_state: bool = True,
    ) -> list[Any] | None:
        zero = np.zeros(7)
        with self.lock:
            self.commands = {
                "torque": np.asarray(torques, float).copy(),
                "pos": np.asarray(pos if pos is not None else zero, float).copy(),
                "vel": np.asarray(vel if vel is not None else zero, float).copy(),
                "kp": np.asarray(kp if kp is not None else zero, float).copy(),
                "kd": np.asarray(kd if kd is not None else zero, float).copy(),
            }
        self._enabled.set()
        return self.read_states(torques) if get_state else None

    def read_states(self, torques: np.ndarray | None = None) -> list[Any]:
        """The cached feedback, stamped now (as DMChainCanInterface.read_states does)."""
        from i2rt.motor_drivers.utils import MotorInfo  # optional: i2rt

        stamp = time.time()
        with self.lock:
            frames = list(self.state)
        return [
            MotorInfo(
                id=f.id,
                error_code=f.error_code,
                target_torque=float(torques[i]) if torques is not None else 0.0,
                vel=f.velocity,
                eff=f.torque,
                pos=f.position,
                temp_mos=f.temperature_mos,
                temp_rotor=f.temperature_rotor,
                timestamp=stamp,
            )
            for i, f in enumerate(frames)
        ]

    def close(self) -> None:
        self.running = False
        self._thread.join(timeout=2.0)

    # -- faults ------------------------------------------------------------------------
    def stall(self) -> None:
        """The bus stops answering: no new feedback frames, `running` stays True."""
        self._stalled.set()

    def fail(self, reason: str) -> None:
        """A motor error: the CAN thread raises and stops, `running` goes False."""
        self._failure = reason


def make_physics_yam(
    initial_q: np.ndarray,
    zero_gravity_mode: bool = False,
    arm_type: str = "yam",
    gripper_type: str = "linear_4310",
) -> Any:
    """I2RT's MotorChainRobot, with the parameters get_yam_robot uses on hardware, over a
    PhysicsMotorChain started at `initial_q` (6 arm joints, rad) with the gripper open."""
    from i2rt.robots.motor_chain_robot import MotorChainRobot  # optional: i2rt

    # optional: i2rt
    from i2rt.robots.utils import ArmType, GripperType, _load_arm_config, combine_arm_and_gripper_xml

    arm_t, grip_t = ArmType.from_string_name(arm_type), GripperType.from_string_name(gripper_type)
    hw = _load_arm_config(arm_t)
    model_path = combine_arm_and_gripper_xml(arm_t, grip_t)
    chain = PhysicsMotorChain(model_path, initial_q)
    limits = np.array(chain.model.jnt_range[:6], dtype=float)
    limits[:, 0] -= 0.15  # get_yam_robot's safety buffer
    limits[:, 1] += 0.15
    gripper_kp, gripper_kd = grip_t.get_motor_kp_kd(arm_t)
    try:
        return MotorChainRobot(
            motor_chain=chain,
            xml_path=model_path,
            use_gravity_comp=True,
            gravity_comp_factor=np.append(hw.gravity_comp_factor, 1.0),
            joint_limits=limits,
            kp=np.append(hw.kp, gripper_kp),
            kd=np.append(hw.kd, gripper_kd),
            grav_comp_kd=np.append(hw.grav_comp_kd, 0.0),
            zero_gravity_mode=zero_gravity_mode,
            gripper_index=6,
            gripper_limits=np.array([0.0, GRIPPER_TRAVEL_RAD]),
            enable_gripper_calibration=False,
            gripper_type=grip_t,
            arm_type=arm_t,
            limit_gripper_force=50.0,
        )
    except Exception:
        chain.close()
        raise
