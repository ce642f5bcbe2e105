"""`pear-agent bench`: tasks x seeds in parallel workers, one JSONL line per finished episode.

Each worker keeps `concurrency` episodes in flight (`arun_job`: the turn loop as a coroutine that
awaits the model), so `--workers 2 --concurrency 64` keeps 128 requests open against one server.

Resumable: each result is appended (flush + fsync) the moment its episode ends; a restarted run
reads the file (ignoring a torn last line), skips every episode already recorded and reruns only
the rest, so a SIGKILL loses at most the episodes in flight and repeats none. The executor is
pluggable: any `executor(fn, jobs, workers, concurrency) -> iterator of (job, result)` works with
the picklable top-level `arun_job(job: dict) -> dict` (local processes or Ray); `run_job` is the
same episode for a synchronous caller.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pear_agent.bench.report import INFRA_ENDINGS
from pear_agent.loop.config import DEFAULT_CONTEXT_TOKENS, EpisodeConfig
from pear_agent.loop.registry import EnvSpec, PolicyAsk, family_of
from pear_agent.loop.runner import POOL, EpisodeJob, arun_episode
from pear_agent.loop.step_watch import Hang
from pear_agent.loop.workers import run_coroutine, run_local
from pear_agent.policies.lerobot.client import LeRobotPolicy, LeRobotSettings
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.policies.openai_client import OpenAIPolicy
from pear_agent.policies.replay import ReplayPolicy
from pear_agent.records.log import SECRET_PATTERNS, RunWriter
from pear_agent.records.view import RRD_NAME, EpisodeView
from pear_agent.robot.gl import configure_gl

SPLITS: dict[str, tuple[int, int]] = {"train": (0, 10_000), "val": (10_000, 11_000), "test": (20_000, 21_000)}
"""Named seed splits (half-open ranges, disjoint): tune on train, choose on val, report on test."""

RESULTS = "results.jsonl"
CONFIG = "bench.json"

Executor = Callable[..., Iterator[tuple[dict, dict]]]
"""`executor(fn, jobs, workers, concurrency=1)` -> (job, result) in completion order."""


def split_seeds(split: str, episodes: int) -> list[int]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; splits are: {', '.join(SPLITS)}")
    lo, hi = SPLITS[split]
    if not 0 < episodes <= hi - lo:
        raise ValueError(f"--episodes must be 1..{hi - lo} for split {split!r}, got {episodes}")
    return list(range(lo, lo + episodes))


def parse_seeds(text: str) -> list[int]:
    """'0-9' or '1,5,7' or '0-4,10' -> a sorted list of distinct seeds."""
    seeds: set[int] = set()
    try:
        for chunk in filter(None, (c.strip() for c in text.split(","))):
            a, _, b = chunk.partition("-")
            seeds.update(range(int(a), int(b) + 1) if b else [int(a)])
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected e.g. '0-9' or '1,5,7'") from None
    if not seeds:
        raise ValueError(f"--seeds {text!r} names no seed")
    return sorted(seeds)


# -- policies -------------------------------------------------------------------------------
def make_policy(spec: dict[str, Any], task: str, seed: int = 0, config: EpisodeConfig | None = None) -> Any:
    """A policy from a plain, picklable description (never holding an API key: the worker reads
    the key from the environment variable the spec names). "scripted" is the task's family's own
    (the arm experts, the roadster's pilot)."""
    kind = spec.get("kind", "scripted")
    if kind == "scripted":
        noise = float(spec.get("action_noise_cm", 0.0))
        return family_of(task).default_policy(
            task, ask=PolicyAsk(seed=seed, action_noise_cm=noise, config=config)
        )
    if kind == "openai":
        return OpenAIPolicy(ModelSettings(**spec["settings"]))
    if kind == "lerobot":
        return LeRobotPolicy(str(spec["checkpoint"]), LeRobotSettings(**(spec.get("settings") or {})))
    if kind == "replay":
        return ReplayPolicy(Path(spec["path"]))
    raise ValueError(f"unknown policy kind {kind!r}")


def policy_label(spec: dict[str, Any]) -> str:
    if spec.get("kind") == "openai":
        return f"openai:{spec['settings']['model']}"
    if spec.get("kind") == "lerobot":
        return f"lerobot:{spec['checkpoint']}"
    return str(spec.get("kind", "scripted"))


# -- one episode ----------------------------------------------------------------------------
def episode_key(task: str, seed: int) -> str:
    return f"{task}/s{seed}"


def episode_dir(task: str, seed: int) -> Path:
    """episodes/<task>-s<seed>; a LIBERO task `libero_spatial/0` gets episodes/libero_spatial-0-s<seed>."""
    return Path("episodes") / f"{task.replace('/', '-')}-s{seed}"


MAX_SIMS = 4
"""Idle environments one worker keeps beyond those in flight (a LIBERO suite has 10 tasks; each
scene holds its own simulator): `pear_agent.loop.runner.POOL`."""


def close_sims() -> None:
    """Close this process's idle environments."""

    POOL.close()


def _env_spec(job: dict[str, Any]) -> Any:

    options = dict(job.get("options") or {})
    if job.get("robot"):
        options["robot"] = job["robot"]
    cfg = EpisodeConfig(**(job.get("episode") or {}))
    return EnvSpec.of(
        job["task"], options, mode=job.get("mode", "paused"), render=bool(job.get("render", True)), config=cfg
    )


def wants_view(view: list[str] | None, key: str) -> bool:
    """Whether `bench --view` asked for this episode's recording."""
    return bool(view) and ("all" in view or key in view)  # type: ignore[operator]


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """`arun_job` for a synchronous caller (one episode on its own event loop)."""
    return run_coroutine(arun_job(job))


def _line(job: dict[str, Any]) -> dict[str, Any]:
    """What a result line says of its job before the episode runs."""
    task, seed = job["task"], int(job["seed"])
    return {
        "key": episode_key(task, seed),
        "task": task,
        "seed": seed,
        "split": job.get("split"),
        "mode": job.get("mode", "paused"),
        "latency_injected_s": job.get("latency_s"),
        "policy": policy_label(job["policy"]),
        "run_dir": str(episode_dir(task, seed)),
        **(job.get("fields") or {}),
    }


def hang_line(job: dict[str, Any], hang: Hang) -> dict[str, Any]:
    """The result line of an episode whose environment step hung (written by the runner, whose
    worker was killed; the episode's log holds the turns before the hang)."""
    turns = max(0, hang.turn - 1) if hang.step in ("observe", "advance", "execute") else 0
    return _line(job) | {
        "success": False,
        "turns": turns,
        "end_reason": "env_hang",
        "detail": f"{hang.detail()}; its worker process was killed and replaced",
        "latencies_s": [],
        "hang_step": hang.step,
        "wall_time_s": None,
    }


async def arun_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one episode on this event loop (through the one runner, `pear_agent.loop.runner`) and
    return its result line. Never raises: a crash becomes end_reason "error" with a one-line
    detail, so one bad episode does not stop the bench."""
    configure_gl()

    task, seed = job["task"], int(job["seed"])
    run_dir = Path(job["out_dir"]) / episode_dir(task, seed)
    if run_dir.exists():  # a leftover of a killed run: start this episode afresh
        shutil.rmtree(run_dir)
    line = _line(job)
    key_env = (job["policy"].get("settings") or {}).get("api_key_env")
    secrets = [os.environ[key_env]] if key_env and os.environ.get(key_env) else []
    t0 = time.perf_counter()
    POOL.in_flight(int(job.get("concurrency") or 1))
    POOL.max_idle = max(POOL.max_idle, MAX_SIMS)
    try:
        spec = _env_spec(job)
        cfg = EpisodeConfig(
            max_turns=job.get("max_turns"),
            max_context_tokens=int(job.get("max_context_tokens") or DEFAULT_CONTEXT_TOKENS),
            mode=job.get("mode", "paused"),
            latency_s=job.get("latency_s"),
            **(job.get("episode") or {}),
        )
    except Exception as exc:  # a bad job description: the same one-line error as a crash
        detail, tb = " ".join(f"{type(exc).__name__}: {exc}".split())[:500], traceback.format_exc()
    else:
        video = 10.0 if job.get("video", True) else None

        def policy() -> Any:
            return make_policy(job["policy"], task, seed, cfg)

        def view(env: Any, writer: RunWriter | None) -> None:
            if writer is not None and wants_view(job.get("view"), line["key"]):
                kin = getattr(env, "kin", None)
                writer.observers.append(EpisodeView(run_dir / RRD_NAME, run_dir=run_dir, kinematics=kin))

        outcome = await arun_episode(
            EpisodeJob(
                spec,
                policy,
                seed,
                cfg,
                writer=lambda: RunWriter(run_dir, video_fps=video, secrets=secrets),
                on_start=view,
            )
        )
        if outcome.result is not None:
            res = outcome.result.to_json()
            res.pop("run_dir", None)
            line |= res | outcome.fields
            line["wall_time_s"] = line.get("wall_time_s") or time.perf_counter() - t0
            return line
        detail, tb = outcome.error or "error", outcome.traceback or ""
    # one line in the results; the (redacted) traceback in error.txt
    for secret in secrets:
        detail, tb = detail.replace(secret, "[redacted]"), tb.replace(secret, "[redacted]")
    for pat in SECRET_PATTERNS:
        detail = pat.sub("[redacted]", detail)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.txt").write_text(tb, encoding="utf-8")  # for debugging; never printed
    line |= {"success": False, "turns": 0, "end_reason": "error", "detail": detail, "latencies_s": []}
    line["wall_time_s"] = time.perf_counter() - t0
    return line


# -- the results file -----------------------------------------------------------------------
def read_results(path: Path) -> list[dict[str, Any]]:
    """Every episode's result, once: its last complete line (an episode that ended on an endpoint
    failure and was run again on a resume has two; the later one stands), in the order episodes
    were first recorded. A torn last line (killed mid-write) is ignored."""
    if not Path(path).exists():
        return []
    out: dict[str, dict[str, Any]] = {}
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "key" in rec:
            out[rec["key"]] = rec
    return list(out.values())


def pending_again(done: dict[str, dict[str, Any]], keep_endpoint_errors: bool = False) -> set[str]:
    """The recorded episodes a resumed bench runs again: those that ended on an infrastructure fault
    (the model endpoint failed after its retries, or an environment step hung: nothing was learnt
    about the model). `keep_endpoint_errors` keeps the endpoint's; a hung episode never finished."""
    again = set(INFRA_ENDINGS) - ({"endpoint_error"} if keep_endpoint_errors else set())
    return {k for k, r in done.items() if r.get("end_reason") in again}


def _repair_tail(path: Path) -> None:
    """Cut a torn last line so the next append starts on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    with path.open("r+b") as f:
        f.truncate(cut)


def append_result(path: Path, rec: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


@dataclass
class BenchConfig:
    tasks: list[str]
    seeds: list[int]
    policy: dict[str, Any]
    out_dir: str
    split: str | None = None
    mode: str = "paused"
    latency_s: float | None = None
    workers: int = 1
    concurrency: int = 1
    """Episodes in flight per worker (one event loop each)."""
    video: bool = True
    render: bool = True
    max_turns: int | None = None
    max_context_tokens: int | None = None
    robot: str | None = None
    episode: dict[str, Any] = field(default_factory=dict)
    """Loop options (EpisodeConfig fields: max_invalid, observation, scene_facts)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Environment families' own options besides the robot (plain values)."""
    extra: dict[str, Any] = field(default_factory=dict)
    view: list[str] | None = None
    """Episodes that get a Rerun recording (`episode.rrd`): ["all"] or episode keys (task/s<seed>)."""
    pairs: list[tuple[str, int]] | None = None
    """(task, seed) episodes instead of tasks x seeds (a preset such as `pear_real`)."""
    fields: dict[str, Any] = field(default_factory=dict)
    """Added to every result line (a preset's name, the token cap the model ran under)."""
    env_step_timeout_s: float | None = None
    """A step past it is a hang (`WorkerOptions.env_step_timeout_s`); None: steps are not timed."""

    def episodes(self) -> list[tuple[str, int]]:
        if self.pairs is not None:
            return [(t, int(s)) for t, s in self.pairs]
        return [(t, s) for t in self.tasks for s in self.seeds]

    def identity(self) -> dict[str, Any]:
        """What must match for a resume to be the same bench (not how many ran at once)."""
        ident = {"policy": self.policy, "mode": self.mode, "latency_s": self.latency_s, "robot": self.robot}
        if self.episode:
            ident["episode"] = self.episode
        if self.options:
            ident["options"] = self.options
        policy = dict(self.policy)
        if isinstance(policy.get("settings"), dict) and "max_in_flight" in policy["settings"]:
            # how many requests were open at once does not change what an episode is
            policy["settings"] = {k: v for k, v in policy["settings"].items() if k != "max_in_flight"}
            ident["policy"] = policy
        return ident

    def jobs(self) -> list[dict[str, Any]]:
        base = {
            "out_dir": self.out_dir,
            "split": self.split,
            "mode": self.mode,
            "latency_s": self.latency_s,
            "policy": self.policy,
            "video": self.video,
            "render": self.render,
            "max_turns": self.max_turns,
            "max_context_tokens": self.max_context_tokens,
            "robot": self.robot,
            "episode": self.episode,
            "options": self.options,
            "concurrency": self.concurrency,
            "view": self.view,
            "fields": self.fields,
        }
        return [base | {"task": t, "seed": s} for t, s in self.episodes()]


def run_bench(
    cfg: BenchConfig,
    executor: Executor | None = None,
    progress: bool = True,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    keep_endpoint_errors: bool = False,
) -> list[dict[str, Any]]:
    """Run every (task, seed) not yet in `results.jsonl`, and again those that ended on an
    infrastructure fault (`pending_again`); return all results, this run's and earlier. With
    `cfg.env_step_timeout_s` the executor times every environment step; a hung one is recorded
    `hang_line` and its worker replaced (`pear_agent.loop.workers.run_local`)."""
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / CONFIG
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text())
        if old.get("identity") != json.loads(json.dumps(cfg.identity())):
            raise ValueError(
                f"{out} holds a bench with another policy/mode ({cfg_path}); use another --out to start anew"
            )
    else:
        cfg_path.write_text(json.dumps({"identity": cfg.identity(), "config": asdict(cfg)}, indent=2))
    results_path = out / RESULTS
    _repair_tail(results_path)
    done = {r["key"]: r for r in read_results(results_path)}
    wanted = {episode_key(t, s) for t, s in cfg.episodes()}
    again = pending_again(done, keep_endpoint_errors) & wanted
    for key in again:
        del done[key]
    jobs = [j for j in cfg.jobs() if episode_key(j["task"], j["seed"]) not in done]
    total = len(wanted)
    bar = None
    if progress:
        bar = tqdm(total=total, initial=total - len(jobs), unit="ep", desc="bench", dynamic_ncols=True)
    run = executor or run_local
    if cfg.workers < 1 or cfg.concurrency < 1:
        raise ValueError("--workers and --concurrency must be >= 1")
    # progress counts only this command's episodes; the file may hold others from earlier runs
    finished = sum(1 for k in done if k in wanted)
    wins = sum(1 for k, r in done.items() if k in wanted and r.get("success"))
    try:
        watch: dict[str, Any] = {}
        if cfg.env_step_timeout_s is not None:
            watch = {"step_timeout_s": cfg.env_step_timeout_s, "on_hang": hang_line}
        for _job, rec in run(arun_job, jobs, cfg.workers, concurrency=cfg.concurrency, **watch):
            append_result(results_path, rec)
            done[rec["key"]] = rec
            wins += bool(rec.get("success"))
            finished += 1
            if on_result is not None:
                on_result(rec)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(success=f"{wins}/{finished}")
    finally:
        if bar is not None:
            bar.close()
    return [r for k, r in done.items() if k in wanted]
