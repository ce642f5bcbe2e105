"""ROS 2 stops: the left arm of the JTC stand-in (tests/ros2/jtc_double.py: the
controller's own interpolation from the measured position and velocity, servos with a lag) moving at
full speed (>= 95 % of the 1.5 rad/s cap), stopped by the agent's braking e-stop, or by the one-point
hold at the measured pose the agent used to send. Peak deceleration, reversal and stopping
distance are measured from the joint-state stamps the probe receives.

    .venv/bin/python benchmarks/ros2_brake.py [--runs 3] [--joint-state-velocity none]

`--joint-state-velocity none|nan`: the stand-in's joint_state_broadcaster publishes no
velocities (hardware without a velocity state interface) or NaN; the agent brakes from velocities it
estimates from the stamped positions.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine, verdict

DECEL = 8.0


def one_run(robot: Any, workdir: Path, how: str, velocity: str = "measured") -> dict[str, float]:
    import numpy as np

    from pear_agent.ros2 import conversions as cv
    from tests.ros2.conftest import TRUTH_TOPIC, DoubleProcess, Probe, double_config, home_joints
    from tests.ros2.test_stops import InProcessAgent, motion, run_to_full_speed_then_stop, stamped_series

    double = DoubleProcess(
        double_config(robot, cameras={}, joint_state_velocity=velocity, truth_topic=TRUTH_TOPIC), workdir
    )
    probe = Probe()
    agent = InProcessAgent(robot, stop_deceleration_rad_s2=DECEL)
    try:
        be = agent.backend
        assert be.check_stack() is None
        joints = list(robot.parts["left_arm"].joints)
        start = np.array([home_joints(robot)[j] for j in joints])
        part = be.parts["left_arm"]
        target = np.clip(
            start + np.array([1.2, 0.9, -0.9, 0.8, 0.0, 0.0]), part.lower + 0.05, part.upper - 0.05
        )

        def old_hold() -> None:  # what the agent sent before: one point at the measured pose
            q, _ = be._read(joints)
            with be._pub_lock:
                be._estop_reason = "old one-point hold"
                be._publish_raw(part.topic, cv.hold_plan(joints, q, q, q, 0.1))

        stop = old_hold if how == "one_point_hold" else lambda: be.emergency_stop("benchmark")
        t_stop, speed = run_to_full_speed_then_stop(agent, probe, joints, target, stop)
        time.sleep(1.5)
        t, q = stamped_series(probe, joints, t_stop - 0.2)
        tv, v, acc = motion(t, q)
        k0 = int(np.searchsorted(tv, t_stop))
        v0 = v[max(0, k0 - 1)]
        moving = np.abs(v0) > 0.2
        peak = float(np.max((-acc[k0:] * np.sign(v0))[:, moving]))
        k = int(np.searchsorted(t, t_stop))
        along = q[k:] * np.sign(v0)
        reversal = float(np.max((np.maximum.accumulate(along, axis=0) - along)[:, moving]))
        dist = float(np.max(np.abs(q[-1] - q[k])))
        return {
            "speed_rad_s": speed,
            "peak_decel_rad_s2": peak,
            "reversal_mrad": 1000 * reversal,
            "stop_rad": dist,
        }
    finally:
        agent.close()
        probe.close()
        double.stop()


def one_run_retried(
    robot: Any, workdir: Path, how: str, velocity: str, retried: list[str]
) -> dict[str, float]:
    """A run whose move ended before full speed (blocked: on this shared machine the stand-in can
    be kept off the CPU long enough to fall behind) is run again, at most twice; each is noted."""
    for attempt in range(3):
        try:
            d = workdir / f"try{attempt}"
            d.mkdir()
            if attempt:
                os.environ["ROS_DOMAIN_ID"] = str(random.randint(101, 200))
            return one_run(robot, d, how, velocity)
        except AssertionError as exc:
            if "before full speed" not in str(exc) or attempt == 2:
                raise
            retried.append(f"{how}: {' '.join(str(exc).split())[:300]}")
    raise AssertionError("unreachable")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--joint-state-velocity", choices=["measured", "none", "nan"], default="measured")
    ap.add_argument("--stops", default="brake,one_point_hold", help="comma list: brake, one_point_hold")
    args = ap.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from pear_agent.robot.loader import load_robot

    robot = load_robot("yam_bimanual")
    results: dict[str, list[dict[str, float]]] = {h.strip(): [] for h in args.stops.split(",") if h.strip()}
    retried: list[str] = []
    for i in range(args.runs):
        for how in results:
            os.environ["ROS_DOMAIN_ID"] = str(random.randint(101, 200))
            with tempfile.TemporaryDirectory(prefix=f"pear_brake_{i}_") as d:
                results[how].append(one_run_retried(robot, Path(d), how, args.joint_state_velocity, retried))
    worst = {h: {k: max(r[k] for r in rs) for k in rs[0]} for h, rs in results.items()}
    ok = "brake" in worst and (
        worst["brake"]["peak_decel_rad_s2"] <= 1.25 * DECEL and worst["brake"]["reversal_mrad"] <= 5.0
    )
    result = {"runs": args.runs, "joint_state_velocity": args.joint_state_velocity,
              "stop_deceleration_rad_s2": DECEL, "worst": worst, "all": results, "runs_retried": retried,
              "verdict": verdict(ok), "machine": machine()}  # fmt: skip
    rows = [
        [how, f"{w['speed_rad_s']:.2f}", f"{w['peak_decel_rad_s2']:.1f}", f"{w['reversal_mrad']:.1f}",
         f"{w['stop_rad']:.3f}"]
        for how, w in worst.items()
    ]  # fmt: skip
    rows.append(["verdict (brake: <= 10 rad/s2, <= 5 mrad)", result["verdict"], "", "", ""])
    emit(
        "ros2_brake"
        if args.joint_state_velocity == "measured"
        else f"ros2_brake_{args.joint_state_velocity}_velocity",
        result,
        rows,
        ["stop (worst of runs)", "speed rad/s", "peak decel rad/s2", "reversal mrad", "stop rad"],
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
