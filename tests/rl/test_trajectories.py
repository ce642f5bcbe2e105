import base64
import json

import pytest

from pear_agent.rl.rollouts import PolicySpec, RolloutJob, run_rollout
from pear_agent.rl.trajectories import TrajectoryWriter, export_sft, load_trajectories


@pytest.fixture(scope="module")
def records():
    """Two real rendered episodes of one group: one clean, one with noisy moves."""
    recs = [
        run_rollout(
            RolloutJob("pick_cube", 2, PolicySpec("scripted", 0.0), 0, group_id="g0", index_in_group=0)
        ),
        run_rollout(
            RolloutJob("pick_cube", 2, PolicySpec("scripted", 2.0), 1, group_id="g0", index_in_group=1)
        ),
    ]
    for r, a in zip(recs, [1.0, -1.0], strict=True):
        r["advantage"] = a
    return recs


def _data_urls(messages):
    return [
        c["image_url"]["url"]
        for m in messages
        if isinstance(m["content"], list)
        for c in m["content"]
        if c["type"] == "image_url"
    ]


def test_round_trip_reconstructs_the_conversation_and_images_exactly(records, tmp_path) -> None:
    with TrajectoryWriter(tmp_path) as w:
        for r in records:
            w.write(r)
    loaded = load_trajectories(tmp_path)
    assert len(loaded) == 2
    for rec, orig in zip(loaded, records, strict=True):
        assert rec.chat_messages(tmp_path) == orig["messages"]
        roles = [m["role"] for m in orig["messages"]]
        assert roles[0] == "system" and roles[1] == "user" and "assistant" in roles
        assert (rec.task, rec.seed, rec.group_id, rec.mode) == ("pick_cube", 2, "g0", "paused")
        assert rec.reward == float(orig["success"]) and rec.advantage == orig["advantage"]
        assert len(rec.latencies_s) == rec.turns == orig["turns"]
        # every image is a JPEG file on disk with exactly the bytes the model received
        urls = _data_urls(orig["messages"])
        paths = rec.image_paths()
        assert len(urls) == len(paths) >= 2 * rec.turns
        for url, rel in zip(urls, paths, strict=True):
            data = (tmp_path / rel).read_bytes()
            assert data[:2] == b"\xff\xd8"
            assert data == base64.b64decode(url.split(",", 1)[1])
    line = json.loads((tmp_path / "trajectories.jsonl").read_text().splitlines()[0])
    assert line["schema"] == "pear-agent/trajectory/v1" and "data:image" not in json.dumps(line)


def test_sft_export_keeps_successful_episodes(records, tmp_path) -> None:
    with TrajectoryWriter(tmp_path / "ro") as w:
        for r in records:
            w.write(r)
    n_ok = sum(r["success"] for r in records)
    assert n_ok >= 1
    assert export_sft(tmp_path / "ro", tmp_path / "sft" / "trl.jsonl") == n_ok
    rows = [json.loads(x) for x in (tmp_path / "sft" / "trl.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in records}
    for row in rows:
        assert row["reward"] == 1.0 and by_id[row["id"]]["success"]
        n_image_parts = sum(
            1
            for m in row["messages"]
            if isinstance(m["content"], list)
            for c in m["content"]
            if c["type"] == "image"
        )
        assert n_image_parts == len(row["images"]) == len(_data_urls(by_id[row["id"]]["messages"]))
        assert all((tmp_path / "sft" / p).read_bytes()[:2] == b"\xff\xd8" for p in row["images"])
        assert row["messages"][-1]["role"] == "assistant"
    assert export_sft(tmp_path / "ro", tmp_path / "oa.jsonl", fmt="openai") == n_ok
    for line in (tmp_path / "oa.jsonl").read_text().splitlines():
        row = json.loads(line)
        assert row["messages"] == by_id[row["id"]]["messages"]


def test_a_corrupt_line_is_named(tmp_path) -> None:
    (tmp_path / "trajectories.jsonl").write_text('{"id": "x"}\n')
    with pytest.raises(ValueError, match=r"trajectories.jsonl:1: not a trajectory record"):
        load_trajectories(tmp_path)
    with pytest.raises(FileNotFoundError, match="no trajectories"):
        load_trajectories(tmp_path / "missing")
