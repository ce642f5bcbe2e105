"""The agent as a ROS 2 node: runs one episode of the turn loop on the ROS 2 backend.

The instruction comes from the `instruction` parameter, else from a simulated robot's task status,
else from the first std_msgs/String on `instruction_topic`. Progress is published as JSON
(std_msgs/String) on `status_topic`: one message per turn, and a final one with the result.

    python -m pear_agent.ros2.agent_node --ros-args --params-file agent.yaml

Before anything moves it checks the stack (joint states, controllers, cameras) and refuses with one
line naming what is missing. On a robot without a simulator's success check the operator judges
each episode (std_srvs/SetBool on `operator_service`, or "success? [y/n]" on the terminal); a
run folder with `episode.jsonl`, `summary.json` and `episode.mp4` (from `video_camera`) is written
on every ending, crashes included.

Exit codes:
  0  success (the simulator's check, or the operator said yes)
  1  failure (turn limit, the operator said no or did not answer, invalid action, policy error, crash)
  2  configuration error (a parameter, the robot YAML, a policy that needs simulator facts)
  3  stopped or refused (e-stop; stale or missing joint states, controllers or cameras)
  130 interrupted (Ctrl-C: the arms are held at the measured pose first)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pear_agent.ros2.backend import RosSettings

EXIT_SUCCESS, EXIT_FAILURE, EXIT_CONFIG, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

PARAMS: dict[str, Any] = {
    "robot": "yam_bimanual",
    "task": "",
    "instruction": "",
    "instruction_topic": "/pear/instruction",
    "instruction_timeout_s": 30.0,
    "max_turns": 0,
    "seed": 0,
    "policy": "scripted",
    "action_noise_cm": 0.0,
    "replay_path": "",
    "replay_delay_s": 0.0,
    "model": "",
    "base_url": "",
    "api_key_env": "",
    "temperature": -1.0,
    "max_tokens": 0,
    "model_timeout_s": 120.0,
    "keep_images": 0,
    "video_fps": 10.0,
    "runs_dir": "runs",
    "status_topic": "/pear/agent/status",
    **{k: f.default for k, f in RosSettings.model_fields.items()},
}


class ConfigError(ValueError):
    """A parameter the user must fix; printed as one line."""


class _Paced:
    """A replay at a model's pace (`replay_delay_s` per decision): a dry run of the timing a real
    model gives, e.g. how old the joint states are when its action arrives."""

    def __init__(self, policy: Any, delay_s: float) -> None:
        self.policy, self.delay_s = policy, delay_s
        self.name = policy.name

    def reset(self, seed: int) -> None:
        self.policy.reset(seed)

    def act(self, messages: Any, ctx: Any) -> Any:
        time.sleep(self.delay_s)
        return self.policy.act(messages, ctx)


def make_policy(p: dict[str, Any], task: str) -> Any:
    kind = p["policy"]
    if kind == "scripted":
        from pear_agent.policies.scripted import ScriptedPolicy

        try:
            return ScriptedPolicy(task, action_noise_cm=float(p["action_noise_cm"]), seed=int(p["seed"]))
        except ValueError as exc:
            raise ConfigError(f"policy scripted: {exc}") from None
    if kind == "replay":
        from pear_agent.policies.replay import ReplayPolicy

        if not p["replay_path"]:
            raise ConfigError("policy replay needs the `replay_path` parameter (an episode.jsonl)")
        path = Path(p["replay_path"])
        if not path.is_file():
            raise ConfigError(f"replay_path {path}: no such file")
        policy = ReplayPolicy(path)
        return _Paced(policy, float(p["replay_delay_s"])) if p["replay_delay_s"] > 0 else policy
    if kind == "openai":
        from pear_agent.policies.openai_client import ModelSettings, OpenAIPolicy

        if not p["model"]:
            raise ConfigError("policy openai needs the `model` parameter")
        return OpenAIPolicy(
            ModelSettings(
                model=p["model"],
                base_url=p["base_url"] or None,
                api_key_env=p["api_key_env"] or None,
                temperature=p["temperature"] if p["temperature"] >= 0 else None,
                max_tokens=p["max_tokens"] or None,
                timeout_s=p["model_timeout_s"],
                keep_images=p["keep_images"] or None,
            )
        )
    raise ConfigError(f"unknown policy {kind!r}; use scripted, replay or openai")


def _wait_instruction(node: Any, p: dict[str, Any], backend: Any) -> tuple[str, dict[str, Any]]:
    from std_msgs.msg import String

    status = backend.status()
    if p["instruction"]:
        return p["instruction"], status
    if status.get("instruction"):
        return status["instruction"], status
    got: list[str] = []
    sub = node.create_subscription(String, p["instruction_topic"], lambda m: got.append(m.data), 10)
    node.get_logger().info(f"waiting for an instruction on {p['instruction_topic']}")
    deadline = time.monotonic() + p["instruction_timeout_s"]
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    node.destroy_subscription(sub)
    if not got:
        raise ConfigError(
            f"no instruction: set the `instruction` parameter or publish a std_msgs/String on "
            f"{p['instruction_topic']} within {p['instruction_timeout_s']:g} s"
        )
    return got[0], backend.status()


def _check_policy(p: dict[str, Any], settings: RosSettings) -> None:
    """Refuse, before anything moves, a policy that needs simulator facts on a robot without them."""
    if p["policy"] == "scripted" and not settings.task_status_topic:
        raise ConfigError(
            "policy scripted reads simulator facts (object poses from task_status_topic), which a real "
            "robot does not have: use policy replay or openai"
        )
    if p["keep_images"] < 0:
        raise ConfigError("parameter keep_images: must be >= 0 (0 = keep every image)")


def _summary(result: Any) -> dict[str, Any]:
    return result.to_json() if hasattr(result, "to_json") else dict(result)


def _hold_quietly(backend: Any, log: Any) -> None:
    try:
        backend.stop()
    except Exception as exc:  # the graph may be gone already; the exit must still happen
        log.error(f"could not send the hold: {type(exc).__name__}: {exc}")


def exit_code(success: bool, end_reason: str) -> int:
    if success:
        return EXIT_SUCCESS
    if end_reason in ("stopped", "refused"):
        return EXIT_STOPPED
    return EXIT_FAILURE


def run(node: Any, p: dict[str, Any]) -> int:
    from pydantic import ValidationError
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from pear_agent.backend import TaskInfo
    from pear_agent.episode import Episode, EpisodeConfig, EpisodeResult
    from pear_agent.kinematics import Kinematics
    from pear_agent.records import RunWriter, new_run_dir
    from pear_agent.robot_config import load_robot
    from pear_agent.ros2.backend import ResetAborted, RosBackend

    try:
        settings = RosSettings(**{k: p[k] for k in RosSettings.model_fields})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"parameter {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    _check_policy(p, settings)
    robot = load_robot(p["robot"])
    kin = Kinematics(robot)
    qos = QoSProfile(
        depth=200, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
    )
    status_pub = node.create_publisher(String, p["status_topic"], qos)
    log = node.get_logger()

    def publish(event: dict[str, Any]) -> None:
        status_pub.publish(String(data=json.dumps(event, default=str)))

    backend = RosBackend(robot, node, TaskInfo(p["task"] or "ros2", "", 30), settings, kin)
    status: dict[str, Any] = {}
    if settings.task_status_topic:
        backend._wait_status(3.0)
        status = backend.status()
        if p["policy"] == "scripted" and not status:
            raise ConfigError(
                f"policy scripted needs a simulator's task status on {settings.task_status_topic}; none "
                "came within 3 s (is sim_robot_node running?)"
            )
    task = p["task"] or status.get("task") or "ros2"
    seed = int(p["seed"])
    policy = make_policy(p, task)
    video_fps = float(p["video_fps"]) if backend.video_camera and p["video_fps"] > 0 else None
    writer = RunWriter(new_run_dir(Path(p["runs_dir"]), task, seed), video_fps=video_fps)
    backend.log = writer.log
    result: Any = {"success": False, "turns": 0, "end_reason": "error", "detail": "", "task": task}
    summary_written = False

    def finish(res: Any) -> None:
        nonlocal summary_written
        summary = _summary(res) | {"run_dir": str(writer.run_dir), "robot": robot.name, "seed": seed}
        if backend.operator_verdict:
            summary["operator"] = backend.operator_verdict
        writer.finish(summary)
        summary_written = True

    try:
        why = backend.check_stack()  # before waiting for an instruction: a missing robot is said at once
        if why is not None:
            raise ResetAborted("refused", why)
        instruction, status = _wait_instruction(node, p, backend)
        task = p["task"] or status.get("task") or task
        max_turns = int(p["max_turns"]) or int(status.get("max_turns") or 30)
        backend.task = TaskInfo(task, instruction, max_turns)
        publish(
            {"event": "start", "robot": robot.name, "task": task, "instruction": instruction, "seed": seed}
        )

        def on_turn(t: Any) -> None:
            log.info(f"turn {t.turn}: {t.summary} -> {t.outcome}")
            publish(
                {
                    "event": "turn",
                    "turn": t.turn,
                    "summary": t.summary,
                    "outcome": t.outcome,
                    "success": t.success,
                }
            )

        episode = Episode(backend, kin, policy, EpisodeConfig(max_turns=max_turns), writer, on_turn)
        result = episode.run(seed)
        summary_written = (writer.run_dir / "summary.json").is_file()
        if not backend.judged:  # the loop did not call the hook (seam 2): ask here
            verdict = backend.judge_success(result.end_reason, result.detail)
            if verdict is not None:
                result.success = verdict
        if summary_written and backend.operator_verdict:
            path = writer.run_dir / "summary.json"
            on_disk = json.loads(path.read_text())
            on_disk |= {"success": bool(result.success), "operator": backend.operator_verdict}
            path.write_text(json.dumps(on_disk, indent=2))
    except ResetAborted as exc:
        result = EpisodeResult(False, 0, exc.status, exc.detail, task=task, robot=robot.name, seed=seed)
        result.policy = getattr(policy, "name", p["policy"])
        log.error(f"{exc.status}: {exc.detail}")
    except ConfigError:
        result = {"success": False, "turns": 0, "end_reason": "configuration", "task": task}
        raise
    except KeyboardInterrupt:
        _hold_quietly(backend, log)  # Ctrl-C: hold at the measured pose first
        result = {"success": False, "turns": 0, "end_reason": "interrupted", "detail": "Ctrl-C"}
        raise
    except Exception as exc:
        _hold_quietly(backend, log)  # a crash on hardware: hold at the measured pose first
        result = {
            "success": False,
            "turns": 0,
            "end_reason": "error",
            "detail": f"{type(exc).__name__}: {exc}",
        }
        log.error(f"episode crashed: {type(exc).__name__}: {exc}")
    finally:
        if not summary_written:
            finish(result)
    summary = _summary(result)
    publish(summary | {"event": "done", "final_status": backend.status(), "run_dir": str(writer.run_dir)})
    reason, detail = summary.get("end_reason"), summary.get("detail", "")
    line = (
        f"episode done: {reason} ({detail}) in {summary.get('turns', 0)} turns; run folder {writer.run_dir}"
    )
    (log.info if summary.get("success") else log.warning)(line)
    if reason in ("stopped", "refused", "error"):
        print(f"agent_node: {reason}: {detail}", file=sys.stderr, flush=True)
    time.sleep(0.5)  # let the final status reach subscribers
    return exit_code(bool(summary.get("success")), str(reason))


def main(argv: list[str] | None = None) -> int:
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from pear_agent.robot_config import RobotConfigError
    from pear_agent.ros2.backend import declare_params, spin_in_background

    # Ctrl-C raises KeyboardInterrupt with the context still valid, so the arms can be held first
    rclpy.init(args=argv if argv is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("pear_agent")
    shutdown = spin_in_background(node)
    code = EXIT_CONFIG
    try:
        params = declare_params(node, PARAMS)
        code = run(node, params)
    except (ConfigError, RobotConfigError, ValueError) as exc:
        print(f"agent_node: configuration error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    finally:
        shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
