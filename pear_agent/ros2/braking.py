"""The braking stop and the e-stop of the ROS 2 backend (a mixin of `RosBackend`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pear_agent.ros2 import conversions as cv
from pear_agent.ros2 import joint_velocity as jv
from pear_agent.ros2.settings import (
    STOP_CONFIRM_S,
    _PartSpec,
)
from pear_agent.ros2.yam_trajectory import trajectory_identity

STOP_REPLANS = 3
"""A stop is planned at most this many times when its planning keeps running late (see `_stop_msg`)."""


class Braking:
    """Every stop is a braking profile from the arm's real motion (position and velocity, measured or
    estimated) to rest, within the stop limits; the e-stop latches."""

    # -- e-stop and stops ---------------------------------------------------------------
    def emergency_stop(self, reason: str) -> None:
        """Latching: every controller gets a braking trajectory from the arm's state now to rest
        (see `_stop_msg`), each sent as soon as it is planned (planned from where its arm is when
        the planning ends, it would fall behind an arm still at speed while the next were
        planned), and nothing is sent again until the node restarts. On the topic interface there
        is no goal to cancel: a new trajectory replaces whatever the controller was following."""
        with self._pub_lock:
            if self._estop_reason is not None:
                return
            self._estop_reason = reason
            missing = []
            shadow = self.modes.arm_mode == "shadow"  # the real controllers were never sent anything
            if shadow:
                self.twin.stop()
            for p in self.parts.values() if not shadow else ():
                for topic, names in self._targets(p):
                    msg = self._stop_msg(p, topic, names)
                    if msg is None:
                        missing.append(topic)
                    else:
                        self._publish_msg(topic, msg)
            if not reason.startswith(f"e-stop on {self.settings.estop_topic}"):
                # a service call or a crash: latch whatever else listens to the e-stop topic (the
                # i2rt driver nodes stop by themselves then); our own subscription returns early
                self._estop_pub.publish(self._Bool(data=True))
        extra = f"; no joint states to stop from for {', '.join(missing)}" if missing else ""
        self.node.get_logger().warning(f"{reason}: braking to rest, sending nothing more{extra}")

    def _targets(self, p: _PartSpec) -> list[tuple[str, list[str]]]:
        out = [(p.topic, p.joints)]
        if p.gripper is not None and p.gripper_topic:
            out.append((p.gripper_topic, [p.g_joint]))
        return out

    def _stop_msg(self, p: _PartSpec, topic: str, names: list[str]) -> Any:
        """A braking trajectory to rest from the arm's state now (None when nothing is known):
        from the fresh measured state, carried forward by its age at its measured velocity; from a
        stale one, the state of the trajectory the controller is following (it keeps following
        it), never the stale measurement; at rest, one point where the arm is (never clipped into
        the limits).

        Timing: the controller starts it from the state it measures when it takes it, some
        milliseconds later, when the arm has moved on (speed x that latency). Where the robot's
        clock is ours (joint-state stamps agree with it), the stop carries header.stamp = now, so
        the controller places its points in time as planned and its first cubic joins the arm's
        state on the profile; elsewhere it starts on receipt, planned `command_latency_s` ahead.
        The state is carried to the end of the planning (milliseconds, tens on a loaded machine):
        a profile planned from where the arm was when it was read would leave the arm, still at
        speed, that much less room to its rest point (a harder stop). Carried at constant speed,
        though, only over a short planning: an arm whose process was kept off the CPU for longer
        than a joint state may be old has followed its trajectory meanwhile (slowed down, or
        reached its target and stopped), so the stop is planned again from the state then (the
        newest measurement, or the trajectory's state where none is fresh): carried a second at
        full speed, the rest point would lie far past where the arm is, even past its limits, and
        the controller would rush the arm there."""
        s = self.settings
        for _ in range(STOP_REPLANS):
            now_s, now_mono = time.time(), time.monotonic()  # the time the state below is carried to
            planned = self._plan_stop(p, topic, names)
            if planned is None or isinstance(planned, cv.TrajectoryPlan):
                return None if planned is None else self._to_msg(planned)  # nothing known, or a hold
            late = time.monotonic() - now_mono
            if late <= s.joint_state_max_age_s:
                break
            self.node.get_logger().warning(
                f"{topic}: the stop took {late:.2f} s to plan; planning it again from the state now"
            )
        plan, v, synced = planned
        late = min(late, s.joint_state_max_age_s)  # (only after STOP_REPLANS late plannings in a row)
        braking = float(np.max(np.abs(np.nan_to_num(v)))) >= 1e-3  # not at rest
        if braking:  # the arm kept its speed while the profile was planned: start it from there
            plan.positions = plan.positions + np.nan_to_num(v)[None, :] * late
        if synced and braking:
            plan = cv.TrajectoryPlan(
                plan.joint_names,
                np.append(plan.times_s, plan.duration_s + cv.BRAKE_SETTLE_S),
                np.vstack([plan.positions, plan.positions[-1:]]),
                np.vstack([plan.velocities, np.zeros((1, len(names)))]),
                stamp_s=now_s + late,
            )
        self._active[topic] = (plan, time.monotonic())
        return self._to_msg(plan)

    def _plan_stop(
        self, p: _PartSpec, topic: str, names: list[str]
    ) -> cv.TrajectoryPlan | tuple[cv.TrajectoryPlan, np.ndarray, bool] | None:
        """The braking profile from the arm's state now, with the velocity it brakes from and
        whether the robot's clock is ours (see `_stop_msg`); a finished one-point hold where the
        arm's motion is unknown; None when nothing is known."""
        s = self.settings
        q, v, age = self._read_aged(names)
        arm = names == p.joints
        decel = s.stop_deceleration_rad_s2 if arm else 10 * p.gripper_vmax
        jerk = s.stop_jerk_rad_s3 if arm else 100 * p.gripper_vmax
        active = self._active.get(topic)
        synced = self._clocks_agree(names)
        ahead = 0.0 if synced else s.command_latency_s
        planned = None
        if active is not None:
            plan, sent = active
            planned = plan.state(time.monotonic() - sent + ahead)
        fresh = age <= s.joint_state_max_age_s and not np.any(np.isnan(q))
        source, lag = self.velocity_source(names)
        if fresh and source == jv.PUBLISHED:
            q, v = cv.predict_state(q, v, age + ahead, s.joint_state_max_age_s + 0.1)
            plan = cv.brake_plan(names, q, v, decel, jerk, s.trajectory_dt_s, hold_s=s.hold_time_s)
            self.stop_sources[topic] = jv.PUBLISHED
        elif fresh and (
            chosen := jv.choose_velocity(
                np.array([]), v, lag + age, None if planned is None else planned[1], s.joint_state_max_age_s
            )
        ):
            # no published velocity: the estimated motion (or the trajectory followed), anchored on
            # the measured position, never an assumed rest
            plan = cv.anchored_brake_plan(
                names, q, chosen[0], age + ahead, s.joint_state_max_age_s + 0.1, decel, jerk,
                s.trajectory_dt_s, hold_s=s.hold_time_s,
            )  # fmt: skip
            v = chosen[0]
            self.stop_sources[topic] = chosen[1]
        elif planned is not None:
            q, v = planned
            plan = cv.brake_plan(names, q, v, decel, jerk, s.trajectory_dt_s, hold_s=s.hold_time_s)
            self.stop_sources[topic] = jv.TRAJECTORY
        elif np.any(np.isnan(q)):
            return None
        else:  # stale, or its velocity unknown, and nothing commanded by us: a slow point where it is
            duration = cv.hold_time_s(age, None if np.any(np.isnan(v)) else v, decel, s.hold_time_s)
            self.stop_sources[topic] = jv.HOLD
            return cv.hold_plan(names, q, q, q, duration)
        return plan, v, synced

    def velocity_source(self, names: list[str]) -> tuple[str, float]:
        """Where the velocities of `names` come from (the worst of them: jv.PUBLISHED, jv.ESTIMATED,
        or "" when one is unknown) and the oldest estimate's lag behind its position (s)."""
        with self._lock:
            rows = [self._velocity_from.get(n, ("", float("inf"))) for n in names]
        lag = max((r[1] for r in rows), default=float("inf"))
        if any(r[0] == "" for r in rows) or not rows:
            return "", lag
        return (jv.ESTIMATED if any(r[0] == jv.ESTIMATED for r in rows) else jv.PUBLISHED), lag

    def velocity_report(self) -> dict[str, dict[str, Any]]:
        """Per controller: whether /joint_states publishes its joints' velocities, and what a stop
        now brakes from (the stack check logs it): the published velocities; else the estimate
        from the stamped positions where every joint has one that can be fresh (its lag within
        `joint_state_max_age_s`), with the trajectory followed as the fallback; else that
        trajectory (no fallback: with nothing commanded, a slow point where the arm is)."""
        out: dict[str, dict[str, Any]] = {}
        for name, p in self.parts.items():
            for topic, names in self._targets(p):
                controller = (
                    self.robot.parts[name].controller
                    if names == p.joints
                    else getattr(p.gripper, "controller", None)
                ) or topic
                source, lag = self.velocity_source(names)
                if source == jv.PUBLISHED:
                    stop, fallback = jv.PUBLISHED, None
                elif source == jv.ESTIMATED and lag <= self.settings.joint_state_max_age_s:
                    stop, fallback = jv.ESTIMATED, jv.TRAJECTORY
                else:  # no estimate, or one that lags more than a state may be old
                    stop, fallback = jv.TRAJECTORY, None
                out[controller] = {
                    "velocities_published": source == jv.PUBLISHED,
                    "stop_velocity_source": stop,
                    "fallback": fallback,
                }
        return out

    def _clocks_agree(self, names: list[str]) -> bool:
        """The last joint states of `names` were stamped by a clock that agrees with ours: they
        arrived 0..50 ms after their stamps (a later arrival or a stamp from the future is a
        clock of its own, or a late message: no stamped stop then)."""
        with self._lock:
            rows = [self._joints.get(n) for n in names]
        if any(r is None for r in rows):
            return False
        transits = [r[4] for r in rows]  # type: ignore[index]
        return all(t is not None and -0.005 <= t <= 0.05 for t in transits)

    def _stop_part(self, p: _PartSpec, topic: str, names: list[str]) -> str | None:
        """Publish a braking trajectory to rest; its `trajectory_identity`, by which a driver's
        status confirms it (None when there is no state to stop from: nothing sent)."""
        msg = self._stop_msg(p, topic, names)
        if msg is None:
            return None
        self._publish_msg(topic, msg)
        return trajectory_identity(msg)

    def _driver_counts(self) -> dict[str, tuple[int, int]]:
        """Per part whose driver reports a status: (trajectories accepted, rejected) so far."""
        return {
            part: (int(st.get("accepted", 0)), int(st.get("rejected", 0)))
            for part, st in self.driver_states().items()
        }

    @staticmethod
    def _stop_verdict(st: dict[str, Any], ids: list[str], before: tuple[int, int]) -> bool | None:
        """A driver status's word on the stops `ids` sent to its controllers: True taken, False
        rejected, None not yet. By identity where the status names the last trajectory each
        controller took and rejected: its counts may rise for the move sent before the stop, whose
        acceptance (or rejection) had not reached us when we sent it. A status without them (an
        older driver) by its counts since `before`, which cannot tell the two apart."""
        took, refused = st.get("last_accepted_id"), st.get("last_rejected_id")
        if isinstance(took, dict) and isinstance(refused, dict):
            if any(i in refused.values() for i in ids):  # (both: one identical message each way)
                return False
            return True if all(i in took.values() for i in ids) else None
        if int(st.get("rejected", 0)) > before[1]:
            return False
        return True if int(st.get("accepted", 0)) >= before[0] + len(ids) else None

    def _stops_heard(self, sent: dict[str, list[str]], before: dict[str, tuple[int, int]]) -> str | None:
        """After stops were sent (`sent`: the identities of each part's stop messages), where a
        part's driver reports what it takes (`before`: its counts then), wait up to STOP_CONFIRM_S
        for it to say it took them (`_stop_verdict`). A driver that rejects a stop (yam_driver_node
        rejects a brake that would move the arm faster than its cap from where the driver
        measures it: one planned from a stale state) keeps following its trajectory, and one that
        says nothing may too: then the e-stop latches every driver, which brakes from its own
        reference, and the line returned says so. None when every such driver took its stop (or
        none reports: a ros2_control stack, whose controllers take any valid trajectory; no wait)."""
        watched = {part: ids for part, ids in sent.items() if ids and part in before}
        deadline = time.monotonic() + STOP_CONFIRM_S
        why = ""
        while watched:
            states = self.driver_states()
            verdicts = {
                p: self._stop_verdict(states[p], ids, before[p]) if p in states else None
                for p, ids in watched.items()
            }
            rejected = [p for p, v in verdicts.items() if v is False]
            if rejected:
                why = "; ".join(
                    f"the {p} driver rejected the stop ({states[p].get('last_rejection') or 'no reason'})"
                    for p in rejected
                )
                break
            watched = {p: ids for p, ids in watched.items() if verdicts[p] is None}
            if watched and time.monotonic() >= deadline:
                names = ", ".join(watched)
                why = f"no word from the {names} driver that it took the stop within {STOP_CONFIRM_S:g} s"
                break
            if watched:
                time.sleep(0.005)
        if not why:
            return None
        self.node.get_logger().error(f"{why}: e-stop")
        self.emergency_stop(why)
        return f"{why}: e-stop latched, every driver brakes to rest by itself"

    def estop_acknowledged(self, timeout_s: float) -> bool:
        """Every subscriber of the e-stop topic has acknowledged what we sent on it (reliable): a
        process that exits right after a stop or a Ctrl-C must not take its e-stop with it."""
        from rclpy.duration import Duration  # optional: rclpy

        return bool(self._estop_pub.wait_for_all_acked(Duration(seconds=timeout_s)))

    @property
    def stopped_reason(self) -> str | None:
        return self._estop_reason
