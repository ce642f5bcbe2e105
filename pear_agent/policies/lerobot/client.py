"""`--policy lerobot:<checkpoint>`: a LeRobot policy (ACT, Diffusion, SmolVLA...: whatever its
`get_policy_class` loads) run through pear-agent's MuJoCo arm tasks at the control rate.

LeRobot lives in its own environment (`.venv-lerobot`: its pins do not fit the core one), so the
checkpoint runs in a server process there (`pear_agent.policies.lerobot.server`, JSON lines over its stdin
and stdout) and this policy, on the core side, imports neither lerobot nor torch. Each turn is one
request: the simulation now (`TurnContext.control`, a control recording's layout), mapped to the
policy's features by the export's own function (`pear_agent.records.export_lerobot.
control_vectors`: a policy trained on `export --format lerobot` is fed what it was trained on),
images as the recording's JPEGs, the instruction as the task; the answer is a chunk of actions
(absolute joint targets + gripper commands, the dataset's `action`), handed to the environment as
`PolicyReply.command` and run as LeRobot's `RobotClient` runs chunks
(`pear_agent.policies.lerobot.joint_chunks`). The decision latency is the request's round trip.

One server per checkpoint per process, started at the first request and shared by the episodes
in flight there (it is stateless: `predict_action_chunk` on each observation); it ends when this
process does (its input closes).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import base64
import contextlib
import importlib.util
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.policies.lerobot.joint_chunks import AGGREGATES
from pear_agent.protocol.prompts import Message
from pear_agent.records.export_lerobot import arrays_layout, control_vectors, jpeg_bytes
from pear_agent.settings import setting

PREFIX = "lerobot:"
ROOT = Path(__file__).resolve().parents[2]


class LeRobotError(Exception):
    """A LeRobot policy could not be run: one line for the user."""


@dataclass
class LeRobotSettings:
    """How a LeRobot policy's chunks run (`--policy lerobot:<checkpoint>`; LeRobot's `RobotClient`
    names for the first three)."""

    actions_per_chunk: int | None = setting(
        None,
        metavar="N",
        help="--policy lerobot: actions asked of each request (the first N of the predicted chunk; "
        "default: the checkpoint's n_action_steps)",
    )
    chunk_size_threshold: float = setting(
        0.5,
        metavar="F",
        help="--policy lerobot: a new observation is sent once the queue is at or under F x the chunk "
        "size (0: run the whole chunk first; LeRobot's default 0.5)",
    )
    aggregate_fn_name: str = setting(
        "latest_only",
        choices=sorted(AGGREGATES),
        help="--policy lerobot: how a new chunk's action merges with one still queued for the same step "
        "(latest_only: the new one wins)",
    )
    lerobot_fps: float = setting(
        30.0,
        metavar="F",
        help="--policy lerobot: the control rate when the checkpoint's training dataset does not say "
        "(its meta/info.json, found through train_config.json, wins); 30 is the export's default",
    )
    lerobot_episode_s: float = setting(
        30.0,
        metavar="S",
        help="--policy lerobot: simulated seconds an episode may run without success (its turns are "
        "requests, so the task's turn limit does not apply)",
    )
    lerobot_timeout_s: float = setting(
        120.0,
        metavar="S",
        help="--policy lerobot: the longest wait for the policy server (its start, one answer); "
        "past it the episode ends with one line",
    )
    lerobot_device: str = setting("cpu", help="--policy lerobot: the torch device of the policy server")

    def __post_init__(self) -> None:
        if self.actions_per_chunk is not None and (
            isinstance(self.actions_per_chunk, bool) or int(self.actions_per_chunk) < 1
        ):
            raise ValueError(f"--actions-per-chunk must be >= 1, not {self.actions_per_chunk!r}")
        if not 0 <= float(self.chunk_size_threshold) <= 1:
            raise ValueError(f"--chunk-size-threshold must be in [0, 1], not {self.chunk_size_threshold!r}")
        if self.aggregate_fn_name not in AGGREGATES:
            raise ValueError(f"--aggregate-fn-name must be one of {sorted(AGGREGATES)}")
        for name, value in (
            ("--lerobot-fps", self.lerobot_fps),
            ("--lerobot-episode-s", self.lerobot_episode_s),
            ("--lerobot-timeout-s", self.lerobot_timeout_s),
        ):
            if not float(value) > 0:
                raise ValueError(f"{name} must be > 0, not {value!r}")


def lerobot_python() -> str | None:
    """A Python that can import lerobot: this one, $PEAR_LEROBOT_PYTHON, or .venv-lerobot (made by
    scripts/setup_lerobot.sh) in the current folder or beside this package."""
    if importlib.util.find_spec("lerobot") is not None:
        return sys.executable
    env = os.environ.get("PEAR_LEROBOT_PYTHON")
    if env:
        return env
    for root in (Path.cwd(), ROOT):
        py = root / ".venv-lerobot" / "bin" / "python"
        if py.exists():
            return str(py)
    return None


def checkpoint_of(policy: str) -> str | None:
    """`lerobot:<checkpoint>` -> the checkpoint (None for another policy kind)."""
    return policy[len(PREFIX) :] if policy.startswith(PREFIX) else None


LEROBOT_MAX_TURNS = 1_000_000
"""A LeRobot episode's turn limit unless --max-turns says: its turns are requests (each runs at
least one control step), so `--lerobot-episode-s` ends it, not the task's limit for a model."""
LEROBOT_CONTEXT_TOKENS = 1_000_000_000
"""Nor does a context budget apply (the policy sees one observation, not a conversation)."""


def policy_kind(kinds: tuple[str, ...]) -> Any:
    """An argparse type for `--policy`: one of `kinds` or `lerobot:<checkpoint>`."""

    def parse(text: str) -> str:
        if text in kinds or text.startswith(PREFIX):
            return text
        raise argparse.ArgumentTypeError(f"{text!r} is none of {', '.join(kinds)} or lerobot:CHECKPOINT")

    parse.__name__ = "policy"
    return parse


def lerobot_loop(
    loop_options: dict[str, Any], clock: dict[str, Any], context_tokens_given: int | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The loop's options for a LeRobot policy: no task turn limit and no context budget unless
    given (`LEROBOT_MAX_TURNS`, `LEROBOT_CONTEXT_TOKENS`)."""
    loop_options, clock = dict(loop_options), dict(clock)
    if loop_options.get("max_turns") is None:
        loop_options["max_turns"] = LEROBOT_MAX_TURNS
    if context_tokens_given is None:
        clock["max_context_tokens"] = LEROBOT_CONTEXT_TOKENS
    return loop_options, clock


def check_checkpoint(checkpoint: str) -> str:
    """The checkpoint folder, resolved; LeRobotError (one line) when it is not one or when no
    LeRobot environment is found."""
    if not checkpoint:
        raise LeRobotError("--policy lerobot:<checkpoint>: give the checkpoint folder after 'lerobot:'")
    path = Path(checkpoint).expanduser()
    if not (path / "config.json").is_file():
        raise LeRobotError(
            f"--policy lerobot:{checkpoint}: not a LeRobot checkpoint folder (no config.json there; "
            "lerobot-train writes one under checkpoints/<step>/pretrained_model)"
        )
    py = lerobot_python()
    if py is None:
        raise LeRobotError(
            "--policy lerobot needs LeRobot: run `bash scripts/setup_lerobot.sh` (.venv-lerobot) or set "
            "PEAR_LEROBOT_PYTHON to a Python with lerobot 0.4"
        )
    if not Path(py).exists():
        raise LeRobotError(f"--policy lerobot: PEAR_LEROBOT_PYTHON={py} does not exist")
    return str(path.absolute())  # as named (a checkpoints/last link stays 'last')


def preflight(checkpoint: str, settings: LeRobotSettings) -> str:
    """The checkpoint's folder once its server has loaded it: a bad checkpoint or a missing LeRobot
    environment is one LeRobotError before any episode, not one per episode."""
    path = check_checkpoint(checkpoint)
    server_for(path, settings)
    return path


class PolicyServer:
    """One `pear_agent.policies.lerobot.server` process: its hello, then one answer per request (a lock
    keeps the episodes in flight from interleaving lines)."""

    def __init__(self, checkpoint: str, python: str, device: str, timeout_s: float) -> None:
        self.checkpoint = checkpoint
        self.timeout_s = timeout_s
        self.lock = threading.Lock()
        self.log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 (closed in close(): the server's stderr)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "pear_agent.policies.lerobot.server", checkpoint, "--device", device],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                env=env,
            )
        except OSError as exc:
            raise LeRobotError(f"--policy lerobot: could not start {python}: {exc}") from None
        self.hello = self._read("to load the checkpoint")
        if "error" in self.hello:
            self.close()
            raise LeRobotError(f"--policy lerobot:{checkpoint}: {self.hello['error']}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _last_words(self) -> str:
        try:
            self.log.seek(0)
            lines = [ln for ln in self.log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return f": {lines[-1].strip()[:300]}" if lines else ""

    def _read(self, doing: str) -> dict[str, Any]:
        out = self.proc.stdout
        assert out is not None
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            if not sel.select(self.timeout_s):
                self.close()
                raise LeRobotError(
                    f"the LeRobot policy server took more than {self.timeout_s:g} s {doing} (stopped; "
                    "--lerobot-timeout-s)"
                )
        line = out.readline()
        if not line:
            code = self.proc.wait(timeout=10)
            raise LeRobotError(
                f"the LeRobot policy server exited (status {code}) {doing}{self._last_words()}"
            )
        try:
            return json.loads(line)
        except ValueError:
            self.close()
            raise LeRobotError(f"the LeRobot policy server answered something not JSON {doing}") from None

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if self.proc.poll() is not None:
                raise LeRobotError(
                    f"the LeRobot policy server is gone (status {self.proc.returncode}){self._last_words()}"
                )
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write((json.dumps(request, separators=(",", ":")) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                code = self.proc.wait(timeout=10)
                raise LeRobotError(
                    f"the LeRobot policy server is gone (status {code}){self._last_words()}"
                ) from None
            return self._read("to answer")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        if self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=5)
        with contextlib.suppress(Exception):
            self.log.close()


_SERVERS: dict[tuple[str, str, str], PolicyServer] = {}
_SERVERS_LOCK = threading.Lock()


def server_for(checkpoint: str, settings: LeRobotSettings) -> PolicyServer:
    """This process's server of `checkpoint` (started on first use; a dead one is replaced)."""
    path = check_checkpoint(checkpoint)
    py = lerobot_python() or ""
    key = (path, py, settings.lerobot_device)
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None or server.proc.poll() is not None:
            server = PolicyServer(path, py, settings.lerobot_device, settings.lerobot_timeout_s)
            _SERVERS[key] = server
        return server


@atexit.register
def close_servers() -> None:
    """Stop this process's policy servers."""
    with _SERVERS_LOCK:
        for server in _SERVERS.values():
            server.close()
        _SERVERS.clear()


def feature_mismatch(hello: dict[str, Any], vectors: dict[str, np.ndarray], cameras: list[str]) -> str | None:
    """Why the policy's features do not fit what this robot gives (None: they fit)."""
    bad = []
    for key, shape in (hello.get("input_features") or {}).items():
        if key.startswith("observation.images."):
            cam = key.removeprefix("observation.images.")
            if cam not in cameras:
                bad.append(f"camera {cam!r} (this robot's: {', '.join(cameras) or 'none'})")
        elif key not in vectors:
            bad.append(f"{key} (not a feature pear-agent records)")
        elif list(shape) != [int(vectors[key].size)]:
            bad.append(f"{key} of {shape} values (this robot's has {vectors[key].size})")
    act = (hello.get("output_features") or {}).get("action")
    if act is None:
        bad.append("no 'action' output")
    elif list(act) != [int(vectors["action"].size)]:
        bad.append(f"action of {act} values (this robot's has {vectors['action'].size})")
    return "; ".join(bad) or None


class LeRobotPolicy:
    """A LeRobot checkpoint as a policy of the turn loop (see the module's docstring)."""

    blocking = True

    def __init__(self, checkpoint: str, settings: LeRobotSettings | None = None) -> None:
        self.checkpoint = checkpoint
        self.settings = settings or LeRobotSettings()
        self.name = f"{PREFIX}{checkpoint}"
        self._features_checked = False

    def reset(self, seed: int) -> None:
        return None

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        """The chunk for this turn's observation (blocking)."""
        try:
            server, request = self._request(ctx)
            t0 = time.perf_counter()
            answer = server.ask(request)
            return self._reply(answer, time.perf_counter() - t0, server)
        except LeRobotError as exc:
            return PolicyReply("", error=str(exc))

    async def aact(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        """The same, awaiting the server in a thread: the observation is taken here, on the event
        loop's thread (the simulator renders on the thread that owns its context)."""
        try:
            server = await asyncio.to_thread(self._server)  # its first start loads the checkpoint
            server, request = self._request(ctx, server)
            t0 = time.perf_counter()
            answer = await asyncio.to_thread(server.ask, request)
            return self._reply(answer, time.perf_counter() - t0, server)
        except LeRobotError as exc:
            return PolicyReply("", error=str(exc))

    def _server(self) -> PolicyServer:
        return server_for(self.checkpoint, self.settings)

    def _request(
        self, ctx: TurnContext, server: PolicyServer | None = None
    ) -> tuple[PolicyServer, dict[str, Any]]:
        """The server and the request for this turn's observation (the export's feature mapping)."""
        s = self.settings
        if ctx.control is None:
            raise LeRobotError(
                f"{self.name}: this task's environment takes no joint setpoints (LeRobot policies run "
                "on the MuJoCo arm tasks)"
            )
        server = server or self._server()
        hello = server.hello
        arrays = ctx.control()
        layout = arrays_layout(arrays)
        vectors = control_vectors(arrays, layout, 0)
        cameras = sorted(k.removeprefix("jpeg.") for k in arrays if k.startswith("jpeg."))
        if not self._features_checked:
            why = feature_mismatch(hello, vectors, cameras)
            if why:
                raise LeRobotError(f"{self.name}: the policy's features do not fit this robot: {why}")
            self._features_checked = True
        inputs = hello.get("input_features") or {}
        n = s.actions_per_chunk or int(hello.get("n_action_steps") or hello.get("chunk_size") or 1)
        request = {
            "vectors": {k: vectors[k].tolist() for k in inputs if k in vectors},
            "images": {
                f"observation.images.{cam}": base64.b64encode(jpeg_bytes(arrays, cam, 0)).decode()
                for cam in cameras
                if f"observation.images.{cam}" in inputs
            },
            "task": ctx.instruction or ctx.task,
            "n": n,
        }
        return server, request

    def _reply(self, answer: dict[str, Any], latency: float, server: PolicyServer) -> PolicyReply:
        """The turn's reply: no text, the chunk as the environment's command; latency: the round trip."""
        s, hello = self.settings, server.hello
        if "error" in answer:
            raise LeRobotError(f"{self.name}: the policy server refused the observation: {answer['error']}")
        fps = float(hello.get("fps") or s.lerobot_fps)
        command = {
            "actions": answer.get("actions"),
            "fps": fps,
            "chunk_size_threshold": s.chunk_size_threshold,
            "aggregate": s.aggregate_fn_name,
            "time_limit_s": s.lerobot_episode_s,
        }
        info = {
            "server_infer_s": answer.get("infer_s"),
            "actions": len(answer.get("actions") or []),
            "fps": fps,
            "fps_source": hello.get("fps_source") or "--lerobot-fps",
        }
        return PolicyReply("", latency_s=latency, command=command, info=info)
