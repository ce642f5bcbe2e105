"""The operator's answers: parsing, and the SetBool service over DDS refusing answers while no
question is open (a stale click cannot judge the next episode)."""

from __future__ import annotations

import threading
import time

import pytest

from pear_agent.ros2.operator import parse_answer
from tests.ros2.conftest import STARTUP_S

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")


def test_parse_answer() -> None:
    assert parse_answer(" y\n") is True and parse_answer("YES") is True and parse_answer("1") is True
    assert parse_answer("n") is False and parse_answer("no\n") is False
    assert parse_answer("maybe") is None and parse_answer("") is None


def test_service_answers_only_an_open_question() -> None:
    from std_srvs.srv import SetBool

    from pear_agent.ros2.operator import Operator

    node, close = _node("pear_operator_test")
    try:
        op = Operator(node, "/pear_test/judge", terminal=False)
        client = node.create_client(SetBool, "/pear_test/judge")
        assert client.wait_for_service(timeout_sec=STARTUP_S)

        def call(value: bool):
            future = client.call_async(SetBool.Request(data=value))
            deadline = time.monotonic() + 10
            while not future.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            return future.result()

        early = call(True)
        assert early.success is False and "no question" in early.message
        answers: list = []
        asker = threading.Thread(target=lambda: answers.append(op.ask("success?", 10.0)))
        asker.start()
        time.sleep(0.3)
        reply = call(False)
        asker.join(timeout=10)
        assert reply.success and "success?" in reply.message
        assert answers == [(False, "the /pear_test/judge service")]
        assert op.ask("again?", 0.2) == (None, "no operator answer within 0.2 s")
    finally:
        close()


def _node(name: str = "pear_operator_abort_test") -> tuple:
    """A node in its own context, spun on a thread, and the function that takes it all down."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node(name, context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    stop = threading.Event()
    spin = threading.Thread(
        target=lambda: [executor.spin_once(0.05) for _ in iter(stop.is_set, True)], daemon=True
    )
    spin.start()

    def close() -> None:
        stop.set()
        spin.join(timeout=2)
        executor.shutdown(timeout_sec=1)
        node.destroy_node()
        ctx.try_shutdown()

    return node, close


def test_an_open_question_is_announced_and_closed_by_an_abort() -> None:
    """Each question and its end go to `on_event` (agent_node's status topic: how `pear-agent ros
    judge` knows a success question is open); an e-stop (`abort`) closes it at once, unanswered."""
    from pear_agent.ros2.operator import Operator

    node, close = _node()
    try:
        op = Operator(node, "/pear_test/judge_abort", terminal=False)
        events: list = []
        op.on_event = events.append
        why: list = []
        op.abort = lambda: why[0] if why else None
        threading.Timer(0.3, lambda: why.append("e-stop on /pear/estop")).start()
        t0 = time.monotonic()
        answer = op.ask("episode ended (done: ...) - success?", 30.0, "success")
        assert time.monotonic() - t0 < 5.0
        assert answer == (None, "not asked any more: e-stop on /pear/estop")
        assert [e["event"] for e in events] == ["question", "answer"]
        assert events[0]["kind"] == "success" and events[0]["service"] == "/pear_test/judge_abort"
        assert events[1] == {"event": "answer", "kind": "success", "answer": None, "by": answer[1]}
        with pytest.raises(ValueError, match="question kind"):
            op.ask("what?", 1.0, "other")
    finally:
        close()
