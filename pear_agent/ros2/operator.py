"""The operator in the loop: yes/no questions answered through a std_srvs/SetBool service or the
terminal ("success? [y/n]"), whichever answers first.

    ros2 service call /pear/operator/judge std_srvs/srv/SetBool "{data: true}"

rclpy is imported lazily; the terminal reader is one daemon thread for the node's lifetime.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from typing import Any


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

    def __init__(self, node: Any, service: str, terminal: bool = True) -> None:
        from std_srvs.srv import SetBool

        self.node = node
        self.service = service
        self._answers: queue.Queue[tuple[bool, str]] = queue.Queue()
        self._question: str | None = None
        self._lock = threading.Lock()
        node.create_service(SetBool, service, self._on_service)
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
        self._answers.put((bool(request.data), f"the {self.service} service"))
        response.success = True
        response.message = f"answered {'yes' if request.data else 'no'} to: {open_question}"
        return response

    def ask(self, question: str, timeout_s: float) -> tuple[bool | None, str]:
        """(answer, who answered); (None, why) when nobody answered within `timeout_s`."""
        while not self._answers.empty():
            self._answers.get_nowait()
        while not self._lines.empty():
            self._lines.get_nowait()
        with self._lock:
            self._question = question
        how = f"call {self.service} (std_srvs/SetBool)" + (" or answer here" if self.terminal else "")
        self.node.get_logger().warning(f"operator: {question} [y/n] ({how}, {timeout_s:g} s)")
        if self.terminal:
            print(f"{question} [y/n] ", end="", file=sys.stderr, flush=True)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    return self._answers.get(timeout=0.05)
                except queue.Empty:
                    pass
                while not self._lines.empty():
                    answer = parse_answer(self._lines.get_nowait())
                    if answer is not None:
                        return answer, "the terminal"
                    print("please answer y or n: ", end="", file=sys.stderr, flush=True)
            return None, f"no operator answer within {timeout_s:g} s"
        finally:
            with self._lock:
                self._question = None
