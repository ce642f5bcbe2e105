"""The agent as a ROS 2 node: runs one episode of the turn loop on the ROS 2 backend.

The instruction comes from the `instruction` parameter, else from a simulated robot's task status,
else from the first std_msgs/String on `instruction_topic` (`pear-agent ros instruct "..."`). Progress
is published as JSON (std_msgs/String) on `status_topic`: `start`, one `turn` per turn, each operator
`question` and `answer`, and `done` with the result and the exit code (`pear-agent ros status`).

    python -m pear_agent.ros2.agent_node --ros-args --params-file agent.yaml

How it may move the arm is `arm_mode` (free; shadow: a MuJoCo twin runs each action and nothing is
sent to the controllers; step: each motion waits for `pear-agent ros approve`) and `speed_scale`
(pear_agent.ros2.modes).

Before anything moves it checks the stack (joint states, drivers not latched, controllers, cameras)
and refuses with one line naming what is missing. On a robot without a simulator's success check the
operator judges an episode that reached the end of a task attempt (the model's `done`, the turn
limit) through std_srvs/SetBool on `operator_service` (`pear-agent ros judge yes|no`) or "success?
[y/n]" on the terminal. A run folder with `episode.jsonl`, `summary.json` (the same fields on every
ending) and `episode.mp4` (from `video_camera`) is written on every ending, signals and crashes
included.

Exit codes (pear_agent.ros2.endings):
  0  success (the simulator's check, or the operator said yes)
  1  failure (turn limit or `done` judged no or unanswered, invalid actions, a policy error, a crash)
  2  configuration error (a parameter, the robot YAML, a policy that needs simulator facts, no instruction)
  3  stopped or refused (e-stop; a latched driver; stale or missing joint states, controllers or cameras)
  130 interrupted by Ctrl-C (SIGINT), 143 by SIGTERM: the arms are held at the measured pose first
"""

from __future__ import annotations

import copy
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pear_agent.loop.episode import JUDGED_ENDINGS, EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.policies.bringup import BringupPolicy
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.policies.openai_client import OpenAIPolicy
from pear_agent.policies.replay import ReplayPolicy
from pear_agent.protocol.prompts import OBSERVATION_MODES
from pear_agent.records.log import RunWriter, new_run_dir
from pear_agent.records.view import RRD_NAME, EpisodeView
from pear_agent.robot.backend import EpisodeAborted, TaskInfo
from pear_agent.robot.config import RobotConfigError
from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.loader import load_robot
from pear_agent.ros2.endings import (
    EXIT_CONFIG,
    EXIT_FAILURE,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_STOPPED,
    EXIT_SUCCESS,
    exit_code,
    result_from_log,
    write_summary,
)
from pear_agent.ros2.graph import declare_params, spin_in_background
from pear_agent.ros2.modes import ArmModeSettings
from pear_agent.ros2.settings import RosSettings, agent_defaults, agent_parameters, shared_values

__all__ = ["EXIT_CONFIG", "EXIT_FAILURE", "EXIT_SIGINT", "EXIT_SIGTERM", "EXIT_STOPPED", "EXIT_SUCCESS"]
EXIT_INTERRUPTED = EXIT_SIGINT

PARAMS: dict[str, Any] = agent_defaults()
"""Every ROS parameter with its default, each from the one place it is defined
(`pear_agent.ros2.settings.agent_parameters`: AgentSettings, EpisodeConfig, ModelSettings, RosSettings)."""
POLICIES = ("scripted", "bringup", "replay", "openai")
FINAL_STATUS_ACK_TIMEOUT_S = 5.0


class Interrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM in the middle of anything: hold the arms, write the records, exit
    130 / 143."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def _on_signal(signum: int, frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


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
        try:
            return scripted_policy(task, action_noise_cm=float(p["action_noise_cm"]), seed=int(p["seed"]))
        except ValueError as exc:
            raise ConfigError(f"policy scripted: {exc}") from None
    if kind == "bringup":
        try:
            return BringupPolicy(float(p["bringup_height_cm"]))
        except ValueError as exc:
            raise ConfigError(f"policy bringup: {exc}") from None
    if kind == "replay":
        if not p["replay_path"]:
            raise ConfigError(
                "policy replay needs the `replay_path` parameter: an episode.jsonl recorded with "
                "`pear-agent run --robot <robot> --task <task>`"
            )
        path = Path(p["replay_path"])
        if not path.is_file():
            raise ConfigError(f"replay_path {path}: no such file")
        policy = ReplayPolicy(path)
        return _Paced(policy, float(p["replay_delay_s"])) if p["replay_delay_s"] > 0 else policy
    if kind == "openai":
        if not p["model"]:
            raise ConfigError("policy openai needs the `model` parameter")
        return OpenAIPolicy(ModelSettings(**shared_values(p, "ModelSettings")))
    raise ConfigError(f"unknown policy {kind!r}; use one of {', '.join(POLICIES)}")


def _wait_instruction(node: Any, p: dict[str, Any], backend: Any) -> tuple[str, dict[str, Any]]:
    from std_msgs.msg import String  # optional: rclpy

    status = backend.status()
    if p["instruction"]:
        return p["instruction"], status
    if status.get("instruction"):
        return status["instruction"], status
    got: list[str] = []
    sub = node.create_subscription(String, p["instruction_topic"], lambda m: got.append(m.data), 10)
    node.get_logger().info(
        f"waiting for an instruction on {p['instruction_topic']} "
        f'(pear-agent ros instruct "..."; {p["instruction_timeout_s"]:g} s)'
    )
    deadline = time.monotonic() + p["instruction_timeout_s"]
    try:
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        node.destroy_subscription(sub)
    if not got:
        raise ConfigError(
            f"no instruction: set the `instruction` parameter or send one within "
            f'{p["instruction_timeout_s"]:g} s (pear-agent ros instruct "...": a std_msgs/String on '
            f"{p['instruction_topic']})"
        )
    return got[0], backend.status()


def _wait_task_status(backend: Any, topic: str, timeout_s: float, log: Any) -> dict[str, Any]:
    """A simulator started beside the agent (a launch file, two shell commands) builds its scene
    first, and DDS discovery alone can take a few seconds: wait for its status up to `timeout_s`,
    saying so once when it is not there at once, and go on as soon as it comes."""
    quiet_s = min(0.5, timeout_s)
    backend._wait_status(quiet_s)
    if not backend.status():
        log.info(f"waiting up to {timeout_s:g} s for the simulator's task status on {topic}")
        backend._wait_status(timeout_s - quiet_s)
    return backend.status()


def _check_params(p: dict[str, Any], settings: RosSettings) -> None:
    """Refuse, before anything moves, a policy that needs simulator facts on a robot without them,
    and values no node could use."""
    if p["policy"] == "scripted" and not settings.task_status_topic:
        raise ConfigError(
            "policy scripted reads simulator facts (object poses from task_status_topic), which a real "
            "robot does not have: use policy bringup (a short motion the operator judges), replay (an "
            "episode recorded with `pear-agent run --robot yam_bimanual`) or openai"
        )
    if settings.task_status_topic and p["task_status_timeout_s"] <= 0:
        raise ConfigError("parameter task_status_timeout_s: must be > 0 (seconds to wait for the simulator)")
    if p["keep_images"] < 0:
        raise ConfigError("parameter keep_images: must be >= 0 (0 = keep every image)")
    if p["observation"] not in OBSERVATION_MODES:
        raise ConfigError(
            f"parameter observation: one of {', '.join(OBSERVATION_MODES)}, not {p['observation']!r}"
        )


def _observation(p: dict[str, Any], cameras: dict[str, str], log: Any) -> str:
    """What the model gets each turn: `observation`, except that with no camera in use `both` becomes
    `state`, so the system prompt tells the model it gets no images (it would promise them)."""
    if cameras or p["observation"] in ("state", "compact"):
        return p["observation"]
    if p["observation"] == "images":
        raise ConfigError(
            "observation images: no camera is in use (the robot YAML's cameras with a topic, less "
            "disabled_cameras); use observation state or both"
        )
    log.info("no camera in use: the model gets the state only and is told so (observation: state)")
    return "state"


def _prompt_kinematics(kin: Any, robot: Any, cameras: dict[str, str]) -> Any:
    """The kinematics the loop prompts from: the robot with only the cameras in use, so the model
    is told of exactly the images it gets."""
    if set(cameras) == set(robot.cameras):
        return kin
    out = copy.copy(kin)
    out.robot = robot.model_copy(update={"cameras": {n: c for n, c in robot.cameras.items() if n in cameras}})
    return out


def _interrupted(signal_name: str, settings: RosSettings) -> str:
    return (
        f"{signal_name}: the arms were held at the measured pose and `true` went out on "
        f"{settings.estop_topic} (yam drivers stay latched until `pear-agent ros release`)"
    )


def _twin(modes: ArmModeSettings, robot: Any, seed: int) -> Any:
    """The shadow's simulated twin: the robot YAML's MuJoCo model in `twin_task`'s scene."""

    try:
        twin = make_backend(modes.twin_task, robot, render=False)
    except ValueError as exc:
        raise ConfigError(f"parameter twin_task: {exc}") from None
    twin.reset(seed)
    return twin


def _hold_quietly(backend: Any, log: Any) -> None:
    try:
        backend.stop()
    except Exception as exc:  # the graph may be gone already; the exit must still happen
        log.error(f"could not send the hold: {type(exc).__name__}: {exc}")


def run(node: Any, p: dict[str, Any]) -> int:
    """One episode; returns the exit code. Raises ConfigError for a configuration the user must fix
    (after writing the run folder's summary when one was started)."""
    from rclpy.duration import Duration  # optional: rclpy
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy  # optional: rclpy
    from std_msgs.msg import String  # optional: rclpy

    from pear_agent.loop.arm_environment import arm_episode  # heavy: cv2
    from pear_agent.ros2.backend import RosBackend  # heavy: cv2

    try:
        settings = RosSettings(**{k: p[k] for k in RosSettings.model_fields})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"parameter {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    _check_params(p, settings)
    try:
        modes = ArmModeSettings(**shared_values(p, "ArmModeSettings"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    robot = load_robot(p["robot"])
    kin = Kinematics(robot)
    twin = _twin(modes, robot, int(p["seed"])) if modes.arm_mode == "shadow" else None
    qos = QoSProfile(
        depth=200, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
    )
    status_pub = node.create_publisher(String, p["status_topic"], qos)
    log = node.get_logger()

    def publish(event: dict[str, Any]) -> None:
        status_pub.publish(String(data=json.dumps(event, default=str)))

    backend = RosBackend(robot, node, TaskInfo(p["task"] or "ros2", "", 30), settings, kin, modes, twin)
    observation = _observation(p, backend.cameras, log)
    prompt_kin = _prompt_kinematics(kin, robot, backend.cameras)
    status: dict[str, Any] = {}
    if settings.task_status_topic:
        status = _wait_task_status(backend, settings.task_status_topic, p["task_status_timeout_s"], log)
        if p["policy"] == "scripted" and not status:
            raise ConfigError(
                f"policy scripted needs a simulator's task status on {settings.task_status_topic}; none "
                f"came within {p['task_status_timeout_s']:g} s (is sim_robot_node running? "
                "parameter task_status_timeout_s)"
            )
    task = p["task"] or status.get("task") or "ros2"
    seed = int(p["seed"])
    policy = make_policy(p, task)
    video_fps = float(p["video_fps"]) if backend.video_camera and p["video_fps"] > 0 else None
    writer = RunWriter(new_run_dir(Path(p["runs_dir"]), task, seed), video_fps=video_fps)
    if p["view"]:  # a Rerun recording (episode.rrd) beside the log: the `view` extra
        writer.observers.append(
            EpisodeView(writer.run_dir / RRD_NAME, run_dir=writer.run_dir, kinematics=kin)
        )
    backend.log = writer.log
    backend.video_fps = video_fps or backend.video_fps
    backend.operator.on_event = publish
    fields = {"task": task, "robot": robot.name, "seed": seed, "policy": getattr(policy, "name", p["policy"])}
    fields |= {"observation": observation}
    log.info(
        f"arm mode {modes.arm_mode}, speed scale {modes.speed_scale:g}"
        + (f" (twin: {modes.twin_task} in MuJoCo; nothing is sent to the robot)" if twin else "")
    )
    result: Any = None
    loop_finished = False
    signal_name = ""
    config_error: ConfigError | None = None

    def unfinished(end_reason: str, detail: str) -> Any:
        return result_from_log(writer.log_path, end_reason, detail, **fields)

    try:
        why = backend.check_stack()  # before waiting for an instruction: a missing robot is said at once
        if why is not None:
            raise EpisodeAborted("refused", why)
        instruction, status = _wait_instruction(node, p, backend)
        task = p["task"] or status.get("task") or task
        max_turns = int(p["max_turns"]) or int(status.get("max_turns") or 30)
        backend.task = TaskInfo(task, instruction, max_turns)
        publish(
            {
                "event": "start",
                "robot": robot.name,
                "task": task,
                "instruction": instruction,
                "seed": seed,
                "max_turns": max_turns,
            }
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

        window = {k: v for k, v in shared_values(p, "EpisodeConfig").items() if k.startswith("history")}
        cfg = EpisodeConfig(max_turns=max_turns, observation=observation, **window)
        episode = arm_episode(backend, prompt_kin, policy, cfg, writer, on_turn)
        result = episode.run(seed)
        loop_finished = True
        if not backend.judged:  # the loop did not call the hook (seam 2): ask here
            verdict = backend.judge_success(result.end_reason, result.detail)
            if verdict is not None:
                result.success, result.judged = bool(verdict), True
        if backend.stopped_reason and not result.success and result.end_reason in JUDGED_ENDINGS:
            # an e-stop after the last turn (e.g. while the operator was asked): stopped, not judged
            result.detail = (
                f"{backend.stopped_reason} after the episode ended {result.end_reason} ({result.detail})"
            )
            result.end_reason = "stopped"
    except EpisodeAborted as exc:
        result = unfinished(exc.status, exc.detail)
        log.error(f"{exc.status}: {exc.detail}")
    except ConfigError as exc:
        result, config_error = unfinished("configuration", str(exc)), exc
    except Interrupted as exc:
        signal_name = exc.signal_name
        _ignore_signals()  # the hold and the records come first: a second Ctrl-C must not cut them short
        _hold_quietly(backend, log)
        result = unfinished("interrupted", _interrupted(signal_name, settings))
    except KeyboardInterrupt:  # raised by something else than our handler (e.g. a library)
        signal_name = "SIGINT"
        _ignore_signals()
        _hold_quietly(backend, log)
        result = unfinished("interrupted", _interrupted(signal_name, settings))
    except Exception as exc:
        _ignore_signals()
        _hold_quietly(backend, log)  # a crash on hardware: hold at the measured pose first
        result = unfinished("error", f"{type(exc).__name__}: {exc}")
        log.error(f"episode crashed: {type(exc).__name__}: {exc}")
    finally:
        _ignore_signals()  # the records are written whatever comes now
        if result is None:  # a BaseException we do not handle (SystemExit): still leave the records
            result = unfinished("error", "the agent exited in the middle of the episode")
        summary = write_summary(writer, result, backend.operator_verdict or None, loop_finished)
    code = exit_code(bool(summary.get("success")), str(summary.get("end_reason")), signal_name)
    publish(summary | {"event": "done", "exit_code": code, "final_status": backend.status()})
    reason, detail = summary.get("end_reason"), summary.get("detail", "")
    line = (
        f"episode done: {reason} ({detail}) in {summary.get('turns', 0)} turns; run folder {writer.run_dir}"
    )
    (log.info if summary.get("success") else log.warning)(line)
    if reason in ("stopped", "refused", "error", "interrupted"):
        print(f"agent_node: {reason}: {detail}", file=sys.stderr, flush=True)
    # the final status is the one a console or a supervisor waits for: keep the process (and the
    # topic's transient-local history) until every subscriber has acknowledged it, not a guessed
    # time (under load 0.5 s was not always enough)
    if not status_pub.wait_for_all_acked(Duration(seconds=FINAL_STATUS_ACK_TIMEOUT_S)):
        log.warning(
            f"the final status was not acknowledged by every subscriber of {p['status_topic']} "
            f"within {FINAL_STATUS_ACK_TIMEOUT_S:.0f} s"
        )
    # likewise the e-stop a stop, a Ctrl-C or a crash sent: every driver latches before we go
    if backend.stopped_reason and not backend.estop_acknowledged(FINAL_STATUS_ACK_TIMEOUT_S):
        log.warning(
            f"the e-stop on {settings.estop_topic} was not acknowledged by every subscriber within "
            f"{FINAL_STATUS_ACK_TIMEOUT_S:.0f} s: check that every driver latched (pear-agent ros health)"
        )
    if config_error is not None:
        raise config_error
    return code


def _ignore_signals() -> None:
    """From the first signal (or the episode's end) on, SIGINT and SIGTERM no longer interrupt."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    import rclpy  # optional: rclpy
    from rclpy.signals import SignalHandlerOptions  # optional: rclpy

    # SIGINT and SIGTERM raise Interrupted in this thread with the context still valid, so the arms
    # can be held and the records written first
    rclpy.init(args=argv if argv is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    node = rclpy.create_node("pear_agent")
    shutdown = spin_in_background(node)
    code = EXIT_CONFIG
    try:
        params = declare_params(node, PARAMS, {p.name: p.description for p in agent_parameters()})
        code = run(node, params)
    except (ConfigError, RobotConfigError, ValueError) as exc:
        print(f"agent_node: configuration error: {exc}", file=sys.stderr)
    except Interrupted as exc:  # before the episode started: nothing moved, no run folder yet
        code = exit_code(False, "interrupted", exc.signal_name)
    except KeyboardInterrupt:
        code = EXIT_SIGINT
    finally:
        _ignore_signals()
        shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
