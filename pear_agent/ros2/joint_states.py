"""Joint states of the ROS 2 backend (a mixin of `RosBackend`): the subscription's callback (ages
from the header stamps, velocities estimated where the driver publishes none), reads with their
age, and the checks that make commanding unsafe (missing or stale joint states)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pear_agent.ros2 import joint_velocity as jv


class JointStates:
    """The newest joint state per joint name, `(position, velocity, receipt, transit, raw age)`."""

    def _on_joint_state(self, msg: Any) -> None:
        now = time.monotonic()
        stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        transit = self._transit_s(stamp_s)
        raw = time.time() - stamp_s if stamp_s > 0 else None
        t_est = stamp_s if stamp_s > 0 else now  # the broadcaster's stamps: free of delivery jitter
        with self._lock:
            for i, name in enumerate(msg.name):
                pos = float(msg.position[i]) if i < len(msg.position) else float("nan")
                vel = float(msg.velocity[i]) if i < len(msg.velocity) else float("nan")
                if np.isfinite(vel):
                    self._velocity_from[name] = (jv.PUBLISHED, 0.0)
                else:  # no velocity state interface (empty array) or a driver's NaN: from the motion
                    self._estimator.add(name, t_est, pos)
                    est = self._estimator.estimate(name)
                    vel = est.velocity if est is not None else float("nan")
                    self._velocity_from[name] = (jv.ESTIMATED, est.lag_s) if est else ("", float("inf"))
                self._joints[name] = (pos, vel, now, transit, raw)

    def _transit_s(self, stamp_s: float) -> float:
        """How old a message already was when it arrived: receipt (system clock) - header stamp.
        0 for an unstamped message; a stamp more than 1 s off is a clock not shared with the
        robot (noted once in the log) and counts from receipt."""
        if stamp_s <= 0.0:
            return 0.0
        transit = time.time() - stamp_s
        if -0.05 <= transit <= 1.0:
            return max(0.0, transit)
        if not self._clock_note:
            self._clock_note = f"joint state stamps are {transit:+.2f} s off this computer's clock"
            self.node.get_logger().warning(
                f"{self._clock_note}: synchronise the clocks (chrony/PTP); ages count from receipt"
            )
        return 0.0

    def _read_aged(self, names: list[str]) -> tuple[np.ndarray, np.ndarray, float]:
        """Positions, velocities and the age of the oldest of them (inf when one is missing): the
        time since its header stamp (since receipt where the clocks disagree), so a message that
        arrived late counts as old as it is."""
        now = time.monotonic()
        with self._lock:
            rows = [self._joints.get(n) for n in names]
        if any(r is None for r in rows):
            return np.full(len(names), np.nan), np.full(len(names), np.nan), float("inf")
        pos = np.array([r[0] for r in rows])
        vel = np.array([r[1] for r in rows])
        return pos, vel, max(now - r[2] + r[3] for r in rows)

    def _read(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        pos, vel, _ = self._read_aged(names)
        return pos, vel

    def joint_check(self, names: list[str]) -> str | None:
        """Why commanding is unsafe now (missing or stale joint states), or None."""
        topic = self.settings.joint_states_topic
        now = time.monotonic()
        with self._lock:
            missing = [n for n in names if n not in self._joints]
            ages = [now - self._joints[n][2] + self._joints[n][3] for n in names if n in self._joints]
        if len(missing) == len(names):
            return f"no joint states on {topic}"
        if missing:
            return f"joint states on {topic} lack {', '.join(missing)}"
        age = max(ages)
        if age > self.settings.joint_state_max_age_s:
            limit = self.settings.joint_state_max_age_s
            return f"joint states on {topic} are {age:.2f} s old (limit {limit:g} s)"
        return None

    def fresh_check(self, names: list[str]) -> str | None:
        """joint_check after waiting up to `wait_for_fresh_state_s` for a fresh message."""
        deadline = time.monotonic() + self.settings.wait_for_fresh_state_s
        why = self.joint_check(names)
        while why is not None and time.monotonic() < deadline:
            time.sleep(0.005)
            why = self.joint_check(names)
        return why

    def _required_joints(self) -> list[str]:
        out = []
        for p in self.parts.values():
            out += p.joints
            if p.gripper is not None:
                out.append(p.g_joint)
        return out

    def wait_for_joint_states(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.joint_check(self._required_joints()) is None:
                return True
            time.sleep(0.02)
        return self.joint_check(self._required_joints()) is None
