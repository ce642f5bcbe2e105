"""Runtime overhead of one turn, physics and model excluded (measure 1): state JSON (FK), JPEG
encoding of every camera, prompt text + OpenAI message (base64), reply parsing, safety clipping
and IK, done the way `pear_agent/loop/episode.py` does them, on the observations and replies of a
recorded scripted Panda episode (2 cameras at 256x256; images pre-rendered).

    .venv/bin/python benchmarks/turn_overhead.py [--samples 600] [--quality 85]
"""

from __future__ import annotations

import argparse
import time

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine, record_episode, stats_ms, verdict

from pear_agent.loop.safety import clip_target
from pear_agent.protocol.actions import parse_reply
from pear_agent.protocol.prompts import turn_text, user_message
from pear_agent.protocol.state import robot_state, state_json
from pear_agent.robot.images import encode_jpeg
from pear_agent.robot.kinematics import rpy_to_matrix

TARGET_MEDIAN_MS = 4.5
PIECES = ("state_json", "jpeg", "prompt_message", "parse", "safety", "ik")


def one_turn(kin, robot, turn: int, obs, reply: str, quality: int) -> dict[str, float]:
    t = {}
    c = time.perf_counter
    t0 = c()
    state = robot_state(obs, kin)
    sj = state_json(state)
    t1 = c()
    jpegs = {name: encode_jpeg(img, quality) for name, img in obs.images.items()}
    t2 = c()
    text = turn_text(turn, 25, sj, "reached" if turn > 1 else None, list(jpegs))
    user_message(text, jpegs)
    t3 = c()
    action = parse_reply(reply, robot)
    t4 = c()
    targets = {
        name: clip_target(name, robot.parts[name], state[name], pa) for name, pa in action.parts.items()
    }
    t5 = c()
    for name, tg in targets.items():
        if tg.moves_arm:
            kin.ik(name, tg.position_cm / 100.0, rpy_to_matrix(tg.orientation_rad), obs.joints_rad[name])
    t6 = c()
    t.update(
        state_json=t1 - t0, jpeg=t2 - t1, prompt_message=t3 - t2, parse=t4 - t3, safety=t5 - t4, ik=t6 - t5
    )
    t["total"] = t6 - t0
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=600, help="turns timed (cycling the recorded ones)")
    ap.add_argument("--quality", type=int, default=85, help="JPEG quality (EpisodeConfig default 85)")
    ap.add_argument("--task", default="pick_cube")
    args = ap.parse_args()

    rec = record_episode(args.task, 0)
    rec["backend"].close()
    kin, robot, turns = rec["kin"], rec["robot"], rec["turns"]
    cams = {n: list(i.shape) for n, i in turns[0]["obs"].images.items()}
    for i, tr in enumerate(turns):  # warm-up
        one_turn(kin, robot, i + 1, tr["obs"], tr["reply"], args.quality)
    samples: dict[str, list[float]] = {k: [] for k in (*PIECES, "total")}
    for k in range(args.samples):
        i = k % len(turns)
        t = one_turn(kin, robot, i + 1, turns[i]["obs"], turns[i]["reply"], args.quality)
        for key, v in t.items():
            samples[key].append(v)
    res = {key: stats_ms(v) for key, v in samples.items()}
    jpeg_bytes = [len(encode_jpeg(img, args.quality)) for tr in turns for img in tr["obs"].images.values()]
    total = res["total"]
    out = {
        "machine": machine(),
        "task": args.task,
        "cameras": cams,
        "recorded_turns": len(turns),
        "jpeg_quality": args.quality,
        "jpeg_bytes_mean": sum(jpeg_bytes) / len(jpeg_bytes),
        "pieces": res,
        "target": "total median <= 4.5 ms",
        "pass": total["median_ms"] <= TARGET_MEDIAN_MS,
    }
    rows = [(k, v["median_ms"], v["p90_ms"], v["mean_ms"]) for k, v in res.items()]
    rows.append(("target", TARGET_MEDIAN_MS, "", verdict(out["pass"])))
    emit("turn_overhead", out, rows, ("piece", "median ms", "p90 ms", "mean ms"))


if __name__ == "__main__":
    main()
