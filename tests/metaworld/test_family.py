"""The Meta-World family through the whole loop: Meta-World's own policies as the expert, chunks,
`bench --preset` with workers (determinism), and `pear-agent serve` driving MT10 over HTTP with
camera images."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pear_agent.cli import main
from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.loop.registry import family_of, make_environment
from pear_agent.loop.task_experts import scripted_policy
from sim_adapters.metaworld import ENV_NAMES
from tests.servers import serve_in_thread

pytestmark = pytest.mark.wallclock

EASY = [
    "metaworld/reach-v3",
    "metaworld/pick-place-v3",
    "metaworld/drawer-close-v3",
    "metaworld/button-press-v3",
]


def _episode(task: str, seed: int, **cfg):
    env = make_environment(task, render=False)
    try:
        ep = Episode(env, scripted_policy(task), EpisodeConfig(**cfg))
        return ep.run(seed), ep
    finally:
        env.close()


def test_registered_with_its_50_tasks_and_expert():
    fam = family_of("metaworld/push-v3")
    assert fam.name == "metaworld" and len(fam.task_names()) == 50
    assert fam.has_default_policy("metaworld/soccer-v3")


def test_metaworld_policies_succeed_through_the_protocol():
    """Native, these policies succeed on every one of these seeds; a margin of one episode."""
    ok = sum(_episode(t, s)[0].success for t in EASY for s in (0, 1))
    assert ok >= 7, f"{ok}/8"


def test_a_turn_is_ignored_with_a_note():
    env = make_environment("metaworld/reach-v3", render=False)
    try:
        env.reset(0)
        env.observe(1, 40, None)
        step = env.execute(env.parse('{"action": {"arm": {"move_cm": [0, 0, 2], "turn_rad": [0, 0, 0.3]}}}'))
        assert step.status == "reached" and "cannot turn" in step.feedback
    finally:
        env.close()


def test_a_chunk_runs_through_the_protocol_as_one_motion():
    env = make_environment("metaworld/reach-v3", render=False, config=EpisodeConfig(max_chunk=4))
    try:
        env.reset(0)
        start = env.observe(1, 40, None).context.state["arm"]["position"]
        steps = [{"arm": {"move_cm": m}} for m in ([3, 0, 0], [0, 3, 0], [0, 0, 3])]
        reply = json.dumps({"action": steps})
        step = env.execute(env.parse(reply))
        assert step.status == "reached" and "all 3 steps" in step.feedback, step.feedback
        end = env.observe(2, 40, step.feedback).context.state["arm"]["position"]
        assert all(abs(e - (s + 3.0)) < 0.7 for s, e in zip(start, end, strict=True)), (start, end)
        assert [x["status"] for x in step.record["steps"]] == ["reached"] * 3
    finally:
        env.close()


def _bench(out: Path, *extra: str) -> dict[tuple[str, int], dict]:
    argv = ["bench", "--preset", "metaworld_mt10", "--seeds", "0", "--no-video", "--quiet", "--out", str(out)]
    assert main([*argv, *extra]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return {(r["task"], r["seed"]): r for r in rows}


def test_bench_preset_is_deterministic_across_workers(tmp_path):
    one = _bench(tmp_path / "w1", "--workers", "1")
    two = _bench(tmp_path / "w2", "--workers", "2")
    assert len(one) == 10 and one.keys() == two.keys()
    for key, r in one.items():
        for field in ("success", "turns", "end_reason", "sim_time_s"):
            assert r[field] == two[key][field], f"{key} {field}: {r[field]} vs {two[key][field]}"
    assert sum(r["success"] for r in one.values()) >= 7


def test_serve_drives_mt10_over_http_with_images(tmp_path):
    with serve_in_thread() as url:
        rows = _bench(
            tmp_path / "served",
            "--base-url",
            url,
            "--model",
            "pear-expert",
            "--send-privileged",
            "--max-turns",
            "40",
        )
    assert len(rows) == 10
    assert sum(r["success"] for r in rows.values()) >= 7
    jpegs = list((tmp_path / "served").rglob("*.jpg"))
    assert jpegs, "no camera image was sent"
    assert {p.name.split("_")[-1].split(".")[0] for p in jpegs} >= {"scene", "gripper"} or len(jpegs) > 20


def test_a_recipe_stage_names_metaworld_in_one_line():
    from pear_agent.train.mix import expand_tasks

    assert expand_tasks("metaworld/*") == sorted(
        (f"metaworld/{n}" for n in ENV_NAMES), key=lambda t: (len(t), t)
    )


def test_press_through_the_protocol_is_briefed_parsed_and_recorded():
    """Meta-World's briefing says what `press` does in one line, its schema offers it, the parser
    takes it, the turn's record marks it and the episode's result fields count the press moves
    (what the press does is `test_backend.py`'s)."""
    from pear_agent.protocol.prompts import PRESS_RULE

    env = make_environment("metaworld/reach-v3", render=False)
    try:
        env.reset(0)
        assert PRESS_RULE in env.system_prompt() and '"press"' in json.dumps(env.response_schema())
        env.observe(1, 40, None)
        assert env.result_fields()["press_moves"] == 0
        down = '{"action": {"arm": {"move_cm": [0, 0, -10], "press": true}}}'
        steps = [env.execute(env.parse(down)) for _ in range(2)]
        assert all(s.record["executed"]["arm"]["press"] is True for s in steps)
        assert env.result_fields()["press_moves"] == 2
    finally:
        env.close()
