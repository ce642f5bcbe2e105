"""The turn loop's own CPU per turn, before and after it became a coroutine: the same
episodes through the code at an older commit (default dc1b7be) and through this tree, `run` and
`arun` (1 and 16 episodes in flight on one event loop).

Two worlds: `line` (the test suite's 1-D world: no physics, no images, no records, so the figure
is the loop itself: prompt, policy call, accounting, parse, execute) and `pick_cube` with the
scripted expert and cameras off (physics, IK and the records included; the same MuJoCo work on
both sides). CPU time is the process's (`time.process_time`): the best of `--rounds` within a
side, and the best of `--alternations` old/new alternations (the machine is shared: file-system
and scheduler noise is of the order of the line world's whole turn).

    .venv/bin/python benchmarks/loop_overhead.py [--episodes 40] [--rounds 3] [--old-ref dc1b7be]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import REPO_ROOT, emit, machine, verdict

TARGET = 0.10
"""The loop may cost at most 10% more CPU per turn than before."""

SNIPPET = r"""
import asyncio, json, sys, tempfile, time
from pathlib import Path
try:  # the package layout of newer trees: pear_agent/loop, robot, records
    from pear_agent.loop import registry
    from pear_agent.loop.arm_environment import ArmEnvironment
    from pear_agent.loop.episode import Episode, EpisodeConfig
    from pear_agent.loop.task_experts import scripted_policy
    from pear_agent.records.log import RunWriter
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot
except ImportError:  # an older tree: the modules side by side in pear_agent/
    from pear_agent import registry
    from pear_agent.arm_environment import ArmEnvironment
    from pear_agent.episode import Episode, EpisodeConfig
    from pear_agent.records import RunWriter
    from pear_agent.kinematics import Kinematics
    try:
        from pear_agent.task_experts import scripted_policy
    except ImportError:
        scripted_policy = None
    try:
        from pear_agent.robot_loader import load_robot
    except ImportError:
        from pear_agent.robot_config import load_robot
from tests.loop.test_environment import Line, Replies

episodes, rounds, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
HOLD = '{"action": {"step": 0}}'
out = {}


class Cheap(Replies):
    blocking = False  # answers at once: called inline by arun (the old loop ignores the attribute)


def worlds():
    yield "line", lambda: Line(), lambda: Cheap([HOLD]), EpisodeConfig(max_turns=10)
    from pear_agent.policies.scripted import ScriptedPolicy

    robot = load_robot("panda")
    backend = registry.make_backend("pick_cube", robot, render=False)
    kin = Kinematics(robot)
    expert = lambda: scripted_policy("pick_cube")  # noqa: E731
    yield "pick_cube", lambda: ArmEnvironment(backend, kin), expert, EpisodeConfig()


def one_round(make_env, make_policy, cfg, how, tmp, records):
    writers = [RunWriter(Path(tmp) / f"{how}-{i}", None) if records else None for i in range(episodes)]
    envs = [make_env() for _ in range(episodes if how == "arun16" else 1)]
    c0 = time.process_time()
    if how == "run":
        results = [Episode(envs[0], make_policy(), cfg, w).run(i) for i, w in enumerate(writers)]
    else:
        n = 16 if how == "arun16" else 1

        async def many():
            sem = asyncio.Semaphore(n)

            async def one(i, w):
                async with sem:
                    return await Episode(envs[i % len(envs)], make_policy(), cfg, w).arun(i)

            return await asyncio.gather(*(one(i, w) for i, w in enumerate(writers)))

        results = asyncio.run(many())
    cpu = time.process_time() - c0
    return cpu, sum(r.turns for r in results)


for name, make_env, make_policy, cfg in worlds():
    modes = ["run"] if mode == "old" else ["run", "arun1"] + (["arun16"] if name == "line" else [])
    for how in modes:
        best = None
        for _ in range(rounds):
            with tempfile.TemporaryDirectory() as tmp:
                cpu, turns = one_round(make_env, make_policy, cfg, how, tmp, name != "line")
            best = cpu / turns if best is None else min(best, cpu / turns)
        out[f"{name}/{how}"] = {"cpu_ms_per_turn": 1000 * best, "turns": turns}
print(json.dumps(out))
"""


def side(tree: Path, episodes: int, rounds: int, mode: str) -> dict[str, Any]:
    env = os.environ | {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", SNIPPET, str(episodes), str(rounds), mode],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} side failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--alternations", type=int, default=3, help="old/new alternations (best of)")
    ap.add_argument("--old-ref", default="dc1b7be")
    ap.add_argument("--old-tree", default=None, help="a checkout of --old-ref (default: git archive)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="loop-overhead-") as tmp:
        old_tree = Path(args.old_tree) if args.old_tree else Path(tmp) / "old"
        if not args.old_tree:
            old_tree.mkdir()
            archive = subprocess.run(
                ["git", "archive", args.old_ref], cwd=REPO_ROOT, capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
        load_before = machine()["loadavg_1_5_15"]
        old: dict[str, Any] = {}
        new: dict[str, Any] = {}
        for _ in range(args.alternations):
            for best, got in ((old, side(old_tree, args.episodes, args.rounds, "old")),
                              (new, side(REPO_ROOT, args.episodes, args.rounds, "new"))):  # fmt: skip
                for k, v in got.items():
                    if k not in best or v["cpu_ms_per_turn"] < best[k]["cpu_ms_per_turn"]:
                        best[k] = v
    ratios = {
        k: v["cpu_ms_per_turn"] / old[k.split("/")[0] + "/run"]["cpu_ms_per_turn"] - 1 for k, v in new.items()
    }
    ok = all(r <= TARGET for k, r in ratios.items() if not k.endswith("arun16"))
    out = {
        "machine": machine(),
        "load_before": load_before,
        "old_ref": args.old_ref,
        "episodes": args.episodes,
        "old": old,
        "new": new,
        "new_vs_old": ratios,
        "target": "CPU per turn of run and arun (1 in flight) within +10% of the old run",
        "pass": ok,
    }
    rows = [("old " + k, f"{v['cpu_ms_per_turn']:.3f}", "") for k, v in old.items()]
    rows += [("new " + k, f"{v['cpu_ms_per_turn']:.3f}", f"{100 * ratios[k]:+.1f}%") for k, v in new.items()]
    rows.append(("verdict", verdict(ok), ""))
    emit("loop_overhead", out, rows, ("world/driver", "cpu ms/turn", "vs old run"))


if __name__ == "__main__":
    main()
