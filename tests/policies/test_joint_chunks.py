"""The action queue of joint-target chunks (`pear_agent.policies.lerobot.joint_chunks`): LeRobot's RobotClient
rules for merging chunks, dropping actions already run, and when the next observation goes out."""

from __future__ import annotations

import numpy as np
import pytest

from pear_agent.policies.lerobot.joint_chunks import ActionQueue, JointChunk, parse_chunk


def _chunk(values: list[float], timestep: int, aggregate: str = "latest_only") -> JointChunk:
    return JointChunk(np.array([[v, -v] for v in values]), fps=10.0, aggregate=aggregate, timestep=timestep)


def test_a_chunk_runs_in_order_and_the_threshold_says_when_to_ask_again() -> None:
    q = ActionQueue()
    assert q.merge(_chunk([1, 2, 3, 4, 5, 6], 0)) == 0
    ran = []
    while True:
        step, action = q.pop()  # type: ignore[misc]
        ran.append((step, float(action[0])))
        if q.ready_to_send(0.5):
            break
    assert ran == [(0, 1.0), (1, 2.0), (2, 3.0)]  # 3 of 6 left: 3/6 <= 0.5
    q2 = ActionQueue()
    q2.merge(_chunk([1, 2, 3, 4], 0))
    n = 0
    while True:
        q2.pop()
        n += 1
        if q2.ready_to_send(0.0):
            break
    assert n == 4  # threshold 0: the whole chunk first


@pytest.mark.parametrize(
    ("aggregate", "expected"),
    [
        ("latest_only", 20.0),
        ("weighted_average", 0.3 * 3 + 0.7 * 20),
        ("average", 11.5),
        ("conservative", 0.7 * 3 + 0.3 * 20),
    ],
)
def test_overlapping_steps_are_merged_by_the_aggregate(aggregate: str, expected: float) -> None:
    q = ActionQueue()
    q.merge(_chunk([1, 2, 3, 4], 0))
    q.pop()
    q.pop()  # steps 0 and 1 ran; 2 and 3 queued
    dropped = q.merge(_chunk([10, 20, 30, 40], 1, aggregate))  # answers the observation of step 1
    assert dropped == 1  # its step-1 action is in the past
    assert q.steps == [2, 3, 4]
    assert q.actions[0][0] == pytest.approx(expected)
    assert q.actions[2][0] == pytest.approx(40.0)  # a new step is appended as is
    assert q.actions[0][1] == pytest.approx(-expected)


def test_an_empty_queue_counts_the_step_and_answers_none() -> None:
    q = ActionQueue()
    assert q.pop() is None and q.executed == 1
    assert q.merge(_chunk([1, 2], 0)) == 1  # step 0 already passed while nothing was queued
    assert q.pop()[0] == 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("command", "needle"),
    [
        ({"fps": 10}, "needs 'actions'"),
        ({"actions": [[1.0, 2.0, 3.0]], "fps": 10}, "expected n x 2"),
        ({"actions": [], "fps": 10}, "expected n x 2"),
        ({"actions": [[1.0, float("nan")]], "fps": 10}, "not finite"),
        ({"actions": [[1.0, 2.0]], "fps": 0}, "fps must be"),
        ({"actions": [[1.0, 2.0]], "fps": 10, "chunk_size_threshold": 1.5}, "chunk_size_threshold"),
        ({"actions": [[1.0, 2.0]], "fps": 10, "aggregate": "median"}, "aggregate 'median'"),
    ],
)
def test_a_bad_command_is_refused_with_its_reason(command: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        parse_chunk(command, 2)


def test_a_good_command_parses_with_its_settings() -> None:
    c = parse_chunk(
        {"actions": [[1, 2], [3, 4]], "fps": 30, "chunk_size_threshold": 0.25, "aggregate": "average"}, 2
    )
    assert c.actions.shape == (2, 2) and c.fps == 30 and c.chunk_size_threshold == 0.25
    assert c.to_json()["joint_chunk"]["targets"] == [[1.0, 2.0], [3.0, 4.0]]
