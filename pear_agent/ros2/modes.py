"""How carefully the agent node moves a real arm: the operator's bring-up path, as settings.

- `shadow`: the agent reads the real robot (joint states, cameras) and publishes nothing on its
  trajectory topics; each action runs in a simulated twin (the robot YAML's MuJoCo model, its joints
  set from the real ones first) and the log says what would have been sent.
- `step`: each action is shown and waits for the operator (`pear-agent ros approve`, `reject
  [reason]`, the terminal's y/n, or the e-stop); no answer within `step_timeout_s` is a reject.
- `free`: actions move the arm as planned.

`speed_scale` slows every move (speed caps, gripper speed, and so every duration) in any mode;
never a stop, which always brakes at the configured deceleration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pear_agent.robot.backend import Outcome
from pear_agent.settings import setting

if TYPE_CHECKING:  # annotations only: agent_node imports this module at its start, without OpenCV
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.ros2 import conversions as cv

MODES = ("free", "shadow", "step")


@dataclass
class ArmModeSettings:
    """The agent node's bring-up settings (ROS parameters of the same names)."""

    arm_mode: str = setting(
        "free",
        ros="arm_mode",
        cli=False,
        help="free (actions move the arm), shadow (nothing is sent to the real controllers: each action "
        "runs in a MuJoCo twin) or step (each action waits for `pear-agent ros approve` or `reject`)",
    )
    speed_scale: float = setting(
        1.0,
        ros="speed_scale",
        cli=False,
        help="in (0, 1]: every speed cap, the gripper speed and the acceleration and jerk limits are "
        "scaled so a move follows the same path, 1/speed_scale times as long; stops are not scaled",
    )
    step_timeout_s: float = setting(
        60.0, ros="step_timeout_s", cli=False, help="step: no answer within this long rejects the action"
    )
    twin_task: str = setting(
        "bimanual_pickup",
        ros="twin_task",
        cli=False,
        help="shadow: the MuJoCo task whose scene the twin runs in (a task the robot can do)",
    )

    def __post_init__(self) -> None:
        if self.arm_mode not in MODES:
            raise ValueError(f"parameter arm_mode: one of {', '.join(MODES)}, not {self.arm_mode!r}")
        if not 0.0 < self.speed_scale <= 1.0:
            raise ValueError(f"parameter speed_scale: in (0, 1], not {self.speed_scale:g}")
        if self.step_timeout_s <= 0:
            raise ValueError(f"parameter step_timeout_s: must be > 0, not {self.step_timeout_s:g}")

    def header(self) -> dict[str, Any]:
        """What every episode's header records of them."""
        return {"arm_mode": self.arm_mode, "speed_scale": self.speed_scale}


def scaled(limits: cv.MoveLimits, scale: float) -> cv.MoveLimits:
    """The same move `1/scale` times slower: speed x scale, acceleration x scale^2, jerk x scale^3
    (a time-optimal profile within these is the full-speed one stretched in time: the same path)."""
    return dataclasses.replace(
        limits, vmax=limits.vmax * scale, amax=limits.amax * scale**2, jmax=limits.jmax * scale**3
    )


def plan_facts(plan: cv.TrajectoryPlan, cap_rad_s: float, requested_rad: Any) -> dict[str, Any]:
    """What a trajectory would do: its duration, the peak joint speed, and whether the target had to
    be clipped into the joint limits (`requested_rad` against its last point)."""
    peak = float(np.max(np.abs(plan.velocities))) if plan.velocities.size else 0.0
    clipped = bool(np.max(np.abs(np.asarray(requested_rad, float) - plan.positions[-1])) > 1e-6)
    return {
        "joints": list(plan.joint_names),
        "duration_s": round(plan.duration_s, 4),
        "peak_speed_rad_s": round(peak, 4),
        "speed_cap_rad_s": round(cap_rad_s, 4),
        "at_cap": bool(peak >= 0.999 * cap_rad_s),
        "clipped_to_limits": clipped,
        "points": len(plan.times_s),
        "start_rad": [round(float(x), 5) for x in plan.positions[0]],
        "target_rad": [round(float(x), 5) for x in plan.positions[-1]],
    }


def hand_line(kin: Kinematics, part: str, q_from: Any, q_to: Any) -> str:
    """One line of where the hand goes, in cm: `left_arm hand (30.1, 4.0, 20.2) -> (32.0, 4.0, 15.2)
    cm, 5.3 cm`."""
    a = np.asarray(kin.fk(part, np.asarray(q_from, float)).position_m) * 100
    b = np.asarray(kin.fk(part, np.asarray(q_to, float)).position_m) * 100
    fmt = ", ".join
    return (
        f"{part} hand ({fmt(f'{x:.1f}' for x in a)}) -> ({fmt(f'{x:.1f}' for x in b)}) cm, "
        f"{float(np.linalg.norm(b - a)):.1f} cm"
    )


class ShadowAndStep:
    """The shadow and step modes of `RosBackend` (a mixin): the shadow's twin and its records, and
    the step's question to the operator. Needs the backend's `parts`, `modes`, `kin`, `twin`,
    `operator`, `log` and its planning (`_read`, `_arm_limits`, `_gripper_limits`)."""

    pending_action: str = ""
    """What the loop asked of the next motion, as the model gave it and as clipped (`preview_action`)."""

    def run_header(self) -> dict[str, Any]:
        """The arm mode and speed scale, for the episode's header."""
        return self.modes.header()

    def preview_action(self, asked: str, clipped: str, notes: list[str]) -> None:
        """The loop tells what the coming motion is for: shown with it in step mode."""
        note = f" (clipped: {'; '.join(notes)})" if notes else ""
        self.pending_action = f"model asked {asked}; after clipping {clipped}{note}"

    def _record(self, record: dict[str, Any]) -> None:
        self.mode_records.append(record)
        if self.log is not None:
            self.log(record)

    def would_send(
        self,
        plans: dict[str, cv.TrajectoryPlan],
        gplans: dict[str, cv.TrajectoryPlan],
        requested: dict[str, Any],
    ) -> dict[str, dict[str, Any]]:
        """Per controller topic, what its trajectory would do (`plan_facts`)."""
        out: dict[str, dict[str, Any]] = {}
        for name, plan in plans.items():
            p = self.parts[name]
            want = requested.get(name, plan.positions[-1])
            out[p.topic] = plan_facts(plan, self._arm_limits(p).vmax, want)
        for name, plan in gplans.items():
            p = self.parts[name]
            out[p.gripper_topic] = plan_facts(plan, self._gripper_limits(p).vmax, plan.positions[-1])
        return out

    # -- shadow ---------------------------------------------------------------------------------
    def _twin_from_real(self) -> dict[str, Any]:
        """Set the twin's joints and grippers from the real ones; what it was set to."""
        joints, gripper = {}, {}
        for name, p in self.parts.items():
            joints[name], _ = self._read(p.joints)
            if p.gripper is not None:
                g, _ = self._read([p.g_joint])
                if np.isfinite(g[0]):
                    gripper[name] = p.gripper_opening(float(g[0]))
        self.twin.set_joints(joints, gripper)
        return {"joints_rad": {k: _round(v) for k, v in joints.items()}, "gripper": gripper}

    def _shadow(
        self,
        steps: list[dict[str, Any]],
        plans: dict[str, cv.TrajectoryPlan],
        gplans: dict[str, cv.TrajectoryPlan],
    ) -> tuple[Outcome, int]:
        """Nothing to the real controllers: the twin, set where the real arm is, executes the
        steps; the log gets what would have been sent and the twin's outcome."""
        start = self._twin_from_real()
        last = {n: c.joints_rad for st in steps for n, c in st.items() if c.joints_rad is not None}
        outcome, reached = self.twin.execute_chunk(steps)
        obs = self.twin.observe(render=False)
        self._record(
            {
                "kind": "shadow",
                "would_send": self.would_send(plans, gplans, last),
                "twin_start": start,
                "twin": {
                    "status": outcome.status,
                    "detail": outcome.detail,
                    "duration_s": round(outcome.duration_s, 4),
                    "steps": len(steps),
                    "steps_reached": reached,
                    "joints_rad": {k: _round(v) for k, v in obs.joints_rad.items()},
                    "gripper": obs.gripper,
                },
            }
        )
        detail = f"in the twin, nothing sent to the robot{': ' + outcome.detail if outcome.detail else ''}"
        return Outcome(outcome.status, detail, outcome.duration_s, outcome.blocked_joints), reached

    def _shadow_chunk(self, steps: list[dict[str, Any]]) -> tuple[Outcome, int]:
        """A chunk in shadow: the arms' path through every waypoint is what would be sent."""
        arm = [{n: c for n, c in st.items() if c.joints_rad is not None} for st in steps]
        names = [n for n in self.parts if any(n in st for st in arm)]
        refused, plans, _ = self._prepare_chain(names, arm) if names else (None, {}, {})
        if refused is not None:
            return refused, 0
        return self._shadow(steps, plans, {})

    # -- step -----------------------------------------------------------------------------------
    def step_question(self, plans: dict[str, cv.TrajectoryPlan], gplans: dict[str, cv.TrajectoryPlan]) -> str:
        """The motion as the operator sees it before it moves."""
        lines = [self.pending_action] if self.pending_action else []
        for name, plan in plans.items():
            f = plan_facts(plan, self._arm_limits(self.parts[name]).vmax, plan.positions[-1])
            move = np.round(plan.positions[-1] - plan.positions[0], 3).tolist()
            lines.append(
                f"{name}: joints {move} rad in {f['duration_s']:.2f} s, peak {f['peak_speed_rad_s']:.2f} "
                f"rad/s (cap {f['speed_cap_rad_s']:.2f}); "
                + hand_line(self.kin, name, plan.positions[0], plan.positions[-1])
            )
        for name, plan in gplans.items():
            p = self.parts[name]
            lines.append(
                f"{name} gripper: {p.gripper_opening(float(plan.positions[0][0])):.2f} -> "
                f"{p.gripper_opening(float(plan.positions[-1][0])):.2f} open in {plan.duration_s:.2f} s"
            )
        return "move? " + " | ".join(lines)

    def _ask_step(
        self, plans: dict[str, cv.TrajectoryPlan], gplans: dict[str, cv.TrajectoryPlan]
    ) -> Outcome | None:
        """Show the motion and wait for the operator: None to go; a blocked outcome (the reason
        as the model's feedback) on a reject or no answer; stopped on an e-stop."""
        question = self.step_question(plans, gplans)
        self.pending_action = ""
        timeout_s = self.modes.step_timeout_s
        answer, who = self.operator.ask(question, timeout_s, "step")
        reason = self.operator.reason
        self._record(
            {"kind": "step", "question": question, "answer": answer, "by": who, "reason": reason}
            | {"would_send": self.would_send(plans, gplans, {})}
        )
        if self._estop_reason is not None:
            return Outcome("stopped", f"{self._estop_reason}; nothing moved")
        if answer:
            return None
        if answer is None:
            return Outcome("blocked", f"no operator answer within {timeout_s:g} s: rejected; nothing moved")
        why = reason or "no reason given"
        return Outcome("blocked", f"the operator rejected the move: {why}; nothing moved")


def _round(q: Any) -> list[float]:
    return [round(float(x), 5) for x in np.asarray(q, float)]
