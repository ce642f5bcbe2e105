"""The operator in the loop: yes/no questions answered through a std_srvs/SetBool service or the
terminal ("success? [y/n]"), whichever answers first.

    pear-agent ros judge yes
    ros2 service call /pear/operator/judge std_srvs/srv/SetBool "{data: true}"   # the same
    pear-agent ros reject "too close to the cup"   # a step answer with its reason (answer topic)

An answer with a reason comes as JSON (std_msgs/String) on the answer topic:
`{"kind": "step", "answer": false, "reason": "..."}`; it answers only an open question of its kind.

Each question and its answer are also announced (`on_event`: agent_node publishes them on its status
topic), so a remote operator knows which question is open: the service carries only yes or no.
rclpy is imported lazily; the terminal reader is one daemon thread for the node's lifetime.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

QUESTION_KINDS = ("success", "home", "step")
"""What a question is about: the episode's success, the home move before the first turn, or (step
mode) the next motion."""


def parse_answer(line: str) -> bool | None:
    """'y', 'yes', '1', 'true' -> True; 'n', 'no', '0', 'false' -> False; anything else None."""
    word = line.strip().lower()
    if word in ("y", "yes", "1", "true", "ok", "success"):
        return True
    if word in ("n", "no", "0", "false", "fail", "failure"):
        return False
    return None


class Operator:
    """Asks one question at a time; an answer given while no question is open is refused
    (the service replies success=False), so a stale click cannot judge the next episode."""

    def __init__(self, node: Any, service: str, terminal: bool = True, answer_topic: str = "") -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy  # optional: rclpy
        from std_msgs.msg import String  # optional: rclpy
        from std_srvs.srv import SetBool  # optional: rclpy

        self.node = node
        self.service = service
        self.on_event: Callable[[dict[str, Any]], None] | None = None
        """Called with {"event": "question", ...} when a question opens and {"event": "answer", ...}
        when it closes (answered, timed out or aborted)."""
        self.abort: Callable[[], str | None] = lambda: None
        """Why an open question must close now without an answer (the backend: an e-stop), or None."""
        self._answers: queue.Queue[tuple[bool, str, str]] = queue.Queue()
        self._question: str | None = None
        self._kind = ""
        self.reason = ""
        """The reason given with the last answer ('' when none)."""
        self._lock = threading.Lock()
        node.create_service(SetBool, service, self._on_service)
        self.answer_topic = answer_topic
        if answer_topic:
            qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            node.create_subscription(String, answer_topic, self._on_answer_msg, qos)
        self.terminal = bool(terminal and sys.stdin is not None and sys.stdin.isatty())
        self._lines: queue.Queue[str] = queue.Queue()
        if self.terminal:
            threading.Thread(target=self._read_terminal, daemon=True).start()

    def _read_terminal(self) -> None:
        for line in sys.stdin:
            self._lines.put(line)

    def _on_service(self, request: Any, response: Any) -> Any:
        with self._lock:
            open_question = self._question
        if open_question is None:
            response.success = False
            response.message = "no question is open"
            return response
        self._answers.put((bool(request.data), f"the {self.service} service", ""))
        response.success = True
        response.message = f"answered {'yes' if request.data else 'no'} to: {open_question}"
        return response

    def _on_answer_msg(self, msg: Any) -> None:
        """A JSON answer on the answer topic: taken only for an open question of its kind."""
        try:
            data = json.loads(msg.data)
        except ValueError:
            return
        if not isinstance(data, dict) or not isinstance(data.get("answer"), bool):
            return
        with self._lock:
            if self._question is None or data.get("kind") != self._kind:
                return
        reason = str(data.get("reason") or "")[:500]
        self._answers.put((data["answer"], f"the {self.answer_topic} topic", reason))

    def _announce(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception as exc:  # an announcement must never cost the answer
                self.node.get_logger().warning(f"operator: could not announce {event['event']}: {exc}")

    def ask(self, question: str, timeout_s: float, kind: str = "success") -> tuple[bool | None, str]:
        """(answer, who answered); (None, why) when nobody answered within `timeout_s`. `kind` is one
        of QUESTION_KINDS, announced with the question."""
        if kind not in QUESTION_KINDS:
            raise ValueError(f"question kind {kind!r}: not one of {QUESTION_KINDS}")
        while not self._answers.empty():
            self._answers.get_nowait()
        while not self._lines.empty():
            self._lines.get_nowait()
        with self._lock:
            self._question, self._kind = question, kind
        self.reason = ""
        how = f"call {self.service} (std_srvs/SetBool)" + (" or answer here" if self.terminal else "")
        if kind == "step":
            here = ", or y | n [reason] here" if self.terminal else ""
            how = f"pear-agent ros approve | reject [reason]{here}"
        self.node.get_logger().warning(f"operator: {question} [y/n] ({how}, {timeout_s:g} s)")
        self._announce(
            {"event": "question", "kind": kind, "question": question, "timeout_s": timeout_s}
            | {"service": self.service, "answer_topic": self.answer_topic}
        )
        if self.terminal:
            print(f"{question} [y/n] ", end="", file=sys.stderr, flush=True)
        answer: tuple[bool | None, str] = (None, f"no operator answer within {timeout_s:g} s")
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    said_yes, who, self.reason = self._answers.get(timeout=0.05)
                    answer = (said_yes, who)
                    break
                except queue.Empty:
                    pass
                why = self.abort()
                if why is not None:  # nobody is asked about an episode that was stopped
                    answer = (None, f"not asked any more: {why}")
                    break
                said = None
                while said is None and not self._lines.empty():
                    line = self._lines.get_nowait()
                    said = parse_answer(line.split(maxsplit=1)[0].rstrip(",.:;") if line.split() else "")
                    self.reason = line.split(maxsplit=1)[1].strip() if len(line.split()) > 1 else ""
                    if said is None:
                        print("please answer y or n: ", end="", file=sys.stderr, flush=True)
                if said is not None:
                    answer = (said, "the terminal")
                    break
            return answer
        finally:
            with self._lock:
                self._question = None
            answered = {"event": "answer", "kind": kind, "answer": answer[0], "by": answer[1]}
            self._announce(answered | ({"reason": self.reason} if self.reason else {}))
