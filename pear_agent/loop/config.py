"""The turn loop's configuration: one typed object, `EpisodeConfig`, each field declared once with
its default, help, command-line shape and ROS parameter (`pear_agent.settings.setting`), each check
written once beside its fields (`__post_init__`, and `check_observation` / `check_max_chunk` where an
environment built from Python without a config checks the same value).

Whatever else carries a loop setting contains this object or is built from it: the command line
(`pear_agent.cli.loop_options`), the ROS agent node's parameters (`pear_agent.ros2.settings`), the
training recipe (`Recipe.episode_config`, which also validates the recipe's loop keys), the trainer's
rollouts and the environment spec (`EnvSpec.of`). tests/loop/test_config.py fails when a class
elsewhere declares a field of the same name without a reason on its allow-list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pear_agent.protocol.history import HISTORY_OLDER, check_history
from pear_agent.protocol.prompts import OBSERVATION_MODES
from pear_agent.settings import setting


def check_observation(observation: Any) -> None:
    """One line naming a bad observation mode."""
    if observation not in OBSERVATION_MODES:
        raise ValueError(f"observation must be one of {list(OBSERVATION_MODES)}, not {observation!r}")


def check_max_chunk(max_chunk: Any) -> None:
    """One line naming a bad chunk size (the robot YAML's own limit, <= 16, is `RobotConfig`'s)."""
    if isinstance(max_chunk, bool) or not isinstance(max_chunk, int) or max_chunk < 1:
        raise ValueError(f"--max-chunk must be an integer >= 1, not {max_chunk!r}")


DEFAULT_CONTEXT_TOKENS = 64000
"""The context budget when neither --max-context-tokens nor the server says."""


@dataclass(frozen=True)
class EpisodeConfig:
    """The turn loop's settings; `pear_agent.cli.loop_options` makes the command line from
    these fields. Frozen (plain values, hashable), so an `EnvSpec` carries the ones an environment
    is built with (`EnvSpec.loop`) to workers and keys the pool of built environments by them."""

    max_turns: int | None = setting(None, ros="max_turns", help="override the task's turn limit")
    max_context_tokens: int = setting(
        DEFAULT_CONTEXT_TOKENS,
        cli_default=None,
        help=f"context token budget (default: the server's window where it reports one, else "
        f"{DEFAULT_CONTEXT_TOKENS})",
    )
    jpeg_quality: int = setting(85, cli=False, help="JPEG quality of the camera images sent")
    mode: Literal["paused", "realtime"] = setting(
        "paused",
        flag="--realtime",
        action="store_const",
        const="realtime",
        help="the world keeps moving while the model thinks (default: paused)",
    )
    tokens_per_image_patch_px: int = setting(
        28, cli=False, help="pixels per side of one image token, for the context estimate"
    )
    latency_s: float | None = setting(
        None,
        flag="--latency",
        metavar="S",
        help="realtime: inject S s per decision (simulated time advances by it instead of the measured "
        "latency; the first decision is untimed either way)",
    )
    max_invalid: int = setting(
        3,
        help="consecutive invalid replies (each answered with a correction turn) that end an episode; "
        "1 = the first invalid reply ends it (default 3)",
    )
    observation: str = setting(
        "both",
        ros="observation",
        choices=list(OBSERVATION_MODES),
        help="what the model gets each turn: state JSON and camera images (both, default), images only, "
        "state only (text: no image parts, user content sent as a plain string), or compact (a short "
        "briefing, the state or telemetry as a few integer fields, no echo of the last command, "
        "bare-JSON replies; text only)",
    )
    history: int | None = setting(
        None,
        ros="history",
        metavar="K",
        help="send the model only the last K turns in full (older ones: see --history-older); "
        "default: every turn, append-only (a server's prefix cache reused turn after turn)",
    )
    history_older: str = setting(
        "line",
        ros="history_older",
        choices=list(HISTORY_OLDER),
        help="with --history K: turns older than the window are sent as one line each (line, default: "
        "the observation's one-line form and the action as JSON) or not at all (drop)",
    )
    scene_facts: bool = setting(
        False,
        action="store_true",
        help="add the objects' positions (from the simulator's privileged facts) to each turn as text; "
        "recorded as privileged in the results",
    )
    scene_relative: bool = setting(
        False,
        action="store_true",
        help="with --scene-facts: add each object's position relative to the gripper's tool point (cm: "
        "the object minus the tool point, the move that reaches it); privileged, recorded in the results",
    )
    max_chunk: int | None = setting(
        None,
        metavar="K",
        help="the most steps one reply's action may carry (a chunk, run as one motion; the roadster: a "
        "plan of K commands); default: the robot YAML's max_chunk, else 1",
    )
    record_fps: float | None = setting(
        None,
        metavar="F",
        help="record the simulation at F Hz during every move (cameras, measured and commanded joints) "
        "beside the log, for `export --format lerobot` at the control rate (MuJoCo; default: off)",
    )

    def __post_init__(self) -> None:
        if self.record_fps is not None and (
            isinstance(self.record_fps, bool) or not 0 < float(self.record_fps) <= 1000
        ):
            raise ValueError(f"--record-fps must be a rate in Hz in (0, 1000], not {self.record_fps!r}")
        if self.mode not in ("paused", "realtime"):
            raise ValueError(f"mode must be 'paused' or 'realtime', not {self.mode!r}")
        if self.latency_s is not None and self.mode != "realtime":
            raise ValueError(
                "--latency needs --realtime (an injected latency only matters when the world moves)"
            )
        if self.latency_s is not None and self.latency_s < 0:
            raise ValueError("--latency must be >= 0")
        if self.max_context_tokens <= 0:
            raise ValueError("--max-context-tokens must be > 0")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError("--max-turns must be >= 1")
        if (
            isinstance(self.max_invalid, bool)
            or not isinstance(self.max_invalid, int)
            or self.max_invalid < 1
        ):
            raise ValueError(f"--max-invalid must be an integer >= 1, not {self.max_invalid!r}")
        check_observation(self.observation)
        if self.scene_relative and not self.scene_facts:
            raise ValueError(
                "--scene-relative needs --scene-facts (its positions are the same privileged simulator facts)"
            )
        check_history(self.history, self.history_older)
        if self.max_chunk is not None:
            check_max_chunk(self.max_chunk)
