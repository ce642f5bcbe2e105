"""The agent as a ROS 2 node: runs one episode of the turn loop on the ROS 2 backend.

The instruction comes from the `instruction` parameter, else from a simulated robot's task status,
else from the first std_msgs/String on `instruction_topic`. Progress is published as JSON
(std_msgs/String) on `status_topic`: one message per turn, and a final one with the result.

    python -m pear_agent.ros2.agent_node --ros-args --params-file agent.yaml

Exit code: 0 on success, 1 when the episode ended otherwise, 2 on a configuration error.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pear_agent.ros2.backend import RosSettings

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
    "model": "",
    "base_url": "",
    "api_key_env": "",
    "temperature": -1.0,
    "max_tokens": 0,
    "model_timeout_s": 120.0,
    "runs_dir": "runs",
    "status_topic": "/pear/agent/status",
    **{k: f.default for k, f in RosSettings.model_fields.items()},
}


class ConfigError(ValueError):
    """A parameter the user must fix; printed as one line."""


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
        return ReplayPolicy(path)
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


def run(node: Any, p: dict[str, Any]) -> int:
    from pydantic import ValidationError
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from pear_agent.backend import TaskInfo
    from pear_agent.episode import Episode, EpisodeConfig
    from pear_agent.kinematics import Kinematics
    from pear_agent.records import RunWriter, new_run_dir
    from pear_agent.robot_config import load_robot
    from pear_agent.ros2.backend import RosBackend

    try:
        settings = RosSettings(**{k: p[k] for k in RosSettings.model_fields})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"parameter {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    robot = load_robot(p["robot"])
    kin = Kinematics(robot)
    qos = QoSProfile(
        depth=200, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
    )
    status_pub = node.create_publisher(String, p["status_topic"], qos)

    def publish(event: dict[str, Any]) -> None:
        status_pub.publish(String(data=json.dumps(event)))

    backend = RosBackend(robot, node, TaskInfo(p["task"] or "ros2", "", 30), settings, kin)
    if settings.task_status_topic:
        backend._wait_status(min(3.0, settings.wait_for_joint_states_s))
    instruction, status = _wait_instruction(node, p, backend)
    task = p["task"] or status.get("task") or "ros2"
    max_turns = int(p["max_turns"]) or int(status.get("max_turns") or 30)
    backend.task = TaskInfo(task, instruction, max_turns)
    policy = make_policy(p, task)
    seed = int(p["seed"])
    writer = RunWriter(new_run_dir(Path(p["runs_dir"]), task, seed), video_fps=None)
    publish({"event": "start", "robot": robot.name, "task": task, "instruction": instruction, "seed": seed})

    def on_turn(t: Any) -> None:
        node.get_logger().info(f"turn {t.turn}: {t.summary} -> {t.outcome}")
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
    summary = result.to_json() | {"event": "done", "final_status": backend.status()}
    publish(summary)
    node.get_logger().info(f"episode done: {result.end_reason} ({result.detail}) in {result.turns} turns")
    time.sleep(0.5)  # let the final status reach subscribers
    return 0 if result.success else 1


def main(argv: list[str] | None = None) -> int:
    import rclpy

    from pear_agent.robot_config import RobotConfigError
    from pear_agent.ros2.backend import declare_params, spin_in_background

    rclpy.init(args=argv if argv is not None else sys.argv)
    node = rclpy.create_node("pear_agent")
    shutdown = spin_in_background(node)
    code = 2
    try:
        params = declare_params(node, PARAMS)
        code = run(node, params)
    except (ConfigError, RobotConfigError, ValueError) as exc:
        print(f"agent_node: error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    finally:
        shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
