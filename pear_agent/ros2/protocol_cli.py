"""`pear-agent ros protocol pear_real`: the PEAR paper's 30 real-robot trials, run by an operator.

For each trial the command says what to place where on the table (positions in the robot's base
frame, from the simulator's own scene for that trial) and writes a picture of the scene rendered by
the simulator; then it sends the trial's instruction to the waiting agent_node (as `pear-agent ros
instruct` does), follows the agent until its episode is done (the operator judges it with
`pear-agent ros judge yes|no` when the agent asks), and appends one line to `<out>/results.jsonl`
in the bench's shape (key = task and seed), so `pear-agent compare SIM_RUN REAL_RUN` pairs the real
trials against a simulated `bench --preset pear_real` run.

    pear-agent ros protocol pear_real --out runs/pear-real --list        # the 30 trials, no ROS
    pear-agent ros protocol pear_real --out runs/pear-real               # the next trial not yet run
    pear-agent ros protocol pear_real --out runs/pear-real --trial 12    # one trial by number (0-29)

Start one agent_node per trial (an agent runs one episode) with `max_turns: 25` and an empty
`instruction` (it waits for the one this command sends).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.bench import pear_real
from pear_agent.bench.runner import RESULTS, append_result, episode_key, read_results
from pear_agent.loop.registry import make_backend
from pear_agent.robot.loader import load_robot
from pear_agent.ros2.ros_session import AgentStatus, Session, agent_params, describe_event, domain, wait_until

SUMMARY_KEYS = (
    "success",
    "turns",
    "end_reason",
    "detail",
    "sim_time_s",
    "wall_time_s",
    "latencies_s",
    "prompt_tokens",
    "completion_tokens",
    "policy",
    "run_dir",
)


def _say(text: str) -> None:
    print(f"pear-agent ros protocol: {text}", file=sys.stderr, flush=True)


def _pose(xyz_m: Any, yaw_rad: float) -> str:
    x, y = (float(v) * 100 for v in xyz_m[:2])
    return f"at x = {x:.1f} cm, y = {y:.1f} cm, turned {math.degrees(yaw_rad):+.0f} deg"


def body_yaw(data: Any, name: str) -> float:
    """A simulated body's yaw (rad) from its world rotation matrix."""
    xmat = data.body(name).xmat
    return math.atan2(float(xmat[3]), float(xmat[0]))


def scene(trial: pear_real.Trial, picture: Path | None) -> dict[str, Any]:
    """The trial's scene from the simulator: its instruction, what goes where (one line per item,
    base frame of the robot) and, when `picture` is given, the top camera's image written there."""

    robot = load_robot(pear_real.ROBOT)
    backend = make_backend(trial.task, robot, render=picture is not None)
    try:
        obs = backend.reset(trial.seed)
        task, d = backend._task, backend.data
        part = obs.privileged["part"]
        items = []
        if trial.task == pear_real.RULER_TASK:
            for name in ("red_block", "green_block", "blue_block"):
                items.append(
                    f"the {name.replace('_', ' ')} (3 cm cube) {_pose(d.body(name).xpos, body_yaw(d, name))}"
                )
            r = d.body("ruler")
            items.append(
                f"the triangle ruler, its long edge's midpoint {_pose(r.xpos, body_yaw(d, 'ruler'))} "
                "(0 deg: the edge runs along y, the grip fin behind it, towards the robot)"
            )
        else:
            o = d.body("object")
            items.append(f"{task.object.description} {_pose(o.xpos, body_yaw(d, 'object'))}")
        out = {
            "task": trial.task,
            "seed": trial.seed,
            "instruction": backend.task.instruction,
            "arm_side": part,
            "place": items,
        }
        if picture is not None:
            camera = next(n for n, c in robot.cameras.items() if c.sim)
            image = np.asarray(backend.render(camera))
            picture.parent.mkdir(parents=True, exist_ok=True)
            import cv2  # heavy: cv2

            cv2.imwrite(str(picture), np.ascontiguousarray(image[..., ::-1]))  # RGB -> OpenCV's BGR
            out["picture"] = str(picture)
        return out
    finally:
        backend.close()


def describe(index: int, s: dict[str, Any]) -> str:
    lines = [
        f"trial {index}/{len(pear_real.trials()) - 1}: {s['task']} (seed {s['seed']}), on the "
        f"{s['arm_side'].replace('_', ' ')}'s side of the table",
        f"  instruction: {s['instruction']}",
        "  place (robot base frame: x forward from the left arm's base, y to its left):",
        *[f"    - {item}" for item in s["place"]],
    ]
    if s.get("picture"):
        lines.append(f"  picture of the scene: {s['picture']}")
    return "\n".join(lines)


def result_line(trial: pear_real.Trial, summary: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A real trial as a bench result line (the same key as the simulated run's)."""
    line: dict[str, Any] = {
        "key": episode_key(trial.task, trial.seed),
        "task": trial.task,
        "seed": trial.seed,
        "mode": "real",
        "preset": pear_real.NAME,
        "max_turns": summary.get("max_turns") or params.get("max_turns"),
        "reasoning_token_cap": params.get("max_tokens") or None,
    }
    line |= {k: summary[k] for k in SUMMARY_KEYS if k in summary}
    line["success"] = bool(summary.get("success"))
    line.setdefault("turns", 0)
    line.setdefault("end_reason", "unknown")
    return line


def _run_trial(trial: pear_real.Trial, instruction: str, params: dict[str, Any], timeout_s: float) -> dict:
    """Send the instruction to the waiting agent and wait for its `done` event (the operator judges)."""
    from rclpy.duration import Duration  # optional: rclpy
    from std_msgs.msg import String  # optional: rclpy

    with Session("protocol") as s:
        status = AgentStatus(s, params["status_topic"])
        pub = s.node.create_publisher(String, params["instruction_topic"], s.reliable_qos())
        _say(f"waiting for an agent on {params['instruction_topic']} (ROS_DOMAIN_ID={domain()}) ...")
        if not wait_until(lambda: pub.get_subscription_count() > 0, timeout_s):
            raise RuntimeError(
                f"no agent listened on {params['instruction_topic']} within {timeout_s:g} s: start "
                "agent_node with max_turns: 25 and an empty instruction"
            )
        pub.publish(String(data=instruction))
        if not pub.wait_for_all_acked(Duration(seconds=5)):
            raise RuntimeError("the instruction was not acknowledged within 5 s")
        shown = 0

        def done() -> dict[str, Any] | None:
            nonlocal shown
            events = status.snapshot()
            for e in events[shown:]:
                print(f"  {describe_event(e)}", flush=True)
            shown = len(events)
            return next((e for e in events if e.get("event") == "done"), None)

        summary = wait_until(done, timeout_s, 0.1)
        if summary is None:
            raise RuntimeError(f"the agent did not finish within {timeout_s:g} s")
        start = next((e for e in status.snapshot() if e.get("event") == "start"), {})
        return summary | {"max_turns": start.get("max_turns")}


def cmd_protocol(args: argparse.Namespace) -> int:
    trials = pear_real.trials()
    out = Path(args.out)
    done = {r["key"] for r in read_results(out / RESULTS)} if (out / RESULTS).is_file() else set()
    if args.list:
        for i, t in enumerate(trials):
            mark = "done" if episode_key(t.task, t.seed) in done else "to do"
            print(f"{i:2d}  {t.task:<28s} seed {t.seed}  {mark}")
        return 0
    if args.trial is not None:
        if not 0 <= args.trial < len(trials):
            _say(f"--trial {args.trial}: the protocol has trials 0..{len(trials) - 1}")
            return 2
        index = args.trial
    else:
        todo = [i for i, t in enumerate(trials) if episode_key(t.task, t.seed) not in done]
        if not todo:
            _say(f"all {len(trials)} trials are in {out / RESULTS}; compare it with a simulated run")
            return 0
        index = todo[0]
    trial = trials[index]
    params = agent_params(args.params_file)
    s = scene(trial, out / "scenes" / f"{index:02d}-{trial.task.replace('/', '-')}-s{trial.seed}.png")
    print(describe(index, s), flush=True)
    if args.scene_only:
        return 0
    if not args.yes:
        print("  set the scene, then press Enter (Ctrl-C to stop) ...", flush=True)
        sys.stdin.readline()
    try:
        summary = _run_trial(trial, s["instruction"], params, args.timeout_s)
    except RuntimeError as exc:
        _say(str(exc))
        return 1
    line = result_line(trial, summary, params)
    if line["max_turns"] != pear_real.MAX_TURNS:
        _say(f"the agent ran with max_turns {line['max_turns']}, not the protocol's {pear_real.MAX_TURNS}")
    out.mkdir(parents=True, exist_ok=True)
    append_result(out / RESULTS, line)
    (out / "bench.json").exists() or (out / "bench.json").write_text(
        json.dumps({"identity": {"preset": pear_real.NAME, "mode": "real"}}, indent=2)
    )
    verdict = "success" if line["success"] else f"failure ({line['end_reason']})"
    print(f"trial {index}: {verdict} in {line['turns']} turns -> {out / RESULTS}")
    results = [r for r in read_results(out / RESULTS)]
    print(
        pear_real.format_table(
            pear_real.table(results), f"real robot, {len(results)} of {len(trials)} trials"
        )
    )
    return 0


def add_protocol_parser(cmds: Any, common: Any) -> None:
    c = cmds.add_parser(
        "protocol",
        help="the PEAR paper's 30 real-robot trials: set each scene, run the agent, judge, one results file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("preset", choices=[pear_real.NAME])
    c.add_argument("--out", default="runs/pear-real", help="results.jsonl and the scene pictures go here")
    c.add_argument("--trial", type=int, default=None, help="run this trial (0-29) instead of the next to do")
    c.add_argument("--list", action="store_true", help="list the 30 trials and which are done; no ROS")
    c.add_argument("--scene-only", action="store_true", help="say what to place where and render it; no ROS")
    c.add_argument("--yes", action="store_true", help="do not wait for Enter once the scene is set")
    common(c, 1800.0)
    c.set_defaults(func=cmd_protocol)
