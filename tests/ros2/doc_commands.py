"""Run a docs page's command lines as an operator types them, one at a time, so a test can check
each line's exit code and act between lines (wait for an event, send a Ctrl-C).

Lines come from the page's bash blocks through scripts/check_docs.py's block parser, continuations
joined; nothing is rewritten. A line's trailing comment may state its exit code (`# exit code 3: ...`),
which the test holds it to (else 0). Shell state carries over as in one terminal: assignments,
`export`, `set` and `source` lines run again before every later line; `NAME=$!` names the last
process started; `wait $NAME` waits for it. A line that starts a node (`*_node`) runs in the
background, with or without `&`; the others run to completion.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_docs", REPO / "scripts" / "check_docs.py")
check_docs = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules.setdefault("check_docs", check_docs)
_spec.loader.exec_module(check_docs)  # type: ignore[union-attr]

ENV_LINE = re.compile(r"^(export\s|set\s|source\s|\.\s|[A-Za-z_]\w*=(?!\$!))")
PID_LINE = re.compile(r"^([A-Za-z_]\w*)=\$!$")
WAIT_LINE = re.compile(r"^wait\s+\$([A-Za-z_]\w*)$")
EXIT_CODE = re.compile(r"exit code (\d+)")
NODE = re.compile(r"(^|[/.\s])(agent_node|yam_driver_node|sim_robot_node)\b")


@dataclass
class Line:
    text: str
    """The command as written (continuations joined), without a trailing `&` or comment."""
    comment: str
    background: bool

    @property
    def expected_exit(self) -> int:
        m = EXIT_CODE.search(self.comment)
        return int(m.group(1)) if m else 0

    @property
    def starts_node(self) -> bool:
        return bool(NODE.search(self.text)) and "pear-agent" not in self.text


def _split_comment(line: str) -> tuple[str, str]:
    """(command, comment): the first `#` outside quotes that starts a word."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def doc_lines(page: str, *must_contain: str) -> list[Line]:
    """The lines of the one bash block of docs/<page> that contains every string of `must_contain`."""
    found = [b for b in check_docs.blocks(REPO / "docs" / page) if all(m in b.text for m in must_contain)]
    assert len(found) == 1, f"docs/{page}: {len(found)} bash blocks contain {must_contain!r}"
    out: list[Line] = []
    pending = ""
    for raw in found[0].text.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1].rstrip() + " "
            continue
        text, comment = _split_comment(pending + raw)
        pending = ""
        text = " ".join(text.split())
        if not text:
            continue
        background = text.endswith("&") and not text.endswith("&&")
        out.append(Line(text[:-1].rstrip() if background else text, comment, background))
    return out


@dataclass
class Ran:
    line: Line
    code: int
    output: str


@dataclass
class Terminal:
    """One operator's terminal(s): the shell state the lines build up, and the processes they start."""

    logs: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    prelude: list[str] = field(default_factory=list)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    started: list[tuple[Line, subprocess.Popen, Path]] = field(default_factory=list)

    def _script(self, command: str) -> str:
        return "\n".join([*self.prelude, command])

    def start(self, line: Line) -> subprocess.Popen:
        """A long-running line, in its own process group (a Ctrl-C goes to it alone)."""
        log = self.logs / f"proc{len(self.started)}.log"
        proc = subprocess.Popen(
            ["bash", "-c", self._script(f"exec {line.text}")],
            cwd=REPO,
            env=self.env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started.append((line, proc, log))
        self.procs["$!"] = proc
        return proc

    def run(self, line: Line, timeout_s: float = 300.0) -> Ran | None:
        """Run one line as the docs mean it; None for lines that only change the shell's state."""
        if PID_LINE.match(line.text):
            self.procs[PID_LINE.match(line.text).group(1)] = self.procs["$!"]  # type: ignore[union-attr]
            return None
        m = WAIT_LINE.match(line.text)
        if m:
            proc = self.procs[m.group(1)]
            code = wait(proc, timeout_s, self.log_of(proc))
            return Ran(line, code, self.log_of(proc))
        if line.starts_node or line.background:
            self.start(line)
            return None
        if ENV_LINE.match(line.text):
            self.prelude.append(line.text)
            return None
        out = subprocess.run(
            ["bash", "-c", self._script(line.text)],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        return Ran(line, out.returncode, out.stdout + out.stderr)

    def log_of(self, proc: subprocess.Popen) -> str:
        path = next(p for _, q, p in self.started if q is proc)
        return path.read_text(errors="replace")

    def close(self) -> None:
        """SIGTERM to every process still running (as check_docs does at the end of a block)."""
        for _, proc, _ in reversed(self.started):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for _, proc, _ in self.started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait(proc: subprocess.Popen, timeout_s: float, log: str = "") -> int:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {timeout_s} s:\n{log[-3000:]}") from None


def wait_for(cond: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


# -- what docs/ros2.md says of the endings ---------------------------------------------------
def _section(page: str, heading: str) -> str:
    text = (REPO / "docs" / page).read_text()
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start : end if end > 0 else None]


def exit_table() -> dict[int, set[str]]:
    """docs/ros2.md's exit-code table: code -> the end_reason values it lists."""
    out: dict[int, set[str]] = {}
    for row in re.findall(
        r"^\| (\d+) \| ([^|]+) \|", _section("ros2.md", "### Exit codes and records"), re.M
    ):
        out[int(row[0])] = set(re.findall(r"`(\w+)`", row[1]))
    return out


def summary_fields() -> set[str]:
    """What docs/ros2.md says every summary.json holds; it must be what the code writes."""
    from pear_agent.loop.episode import EpisodeResult

    fields = {f.name for f in dataclasses.fields(EpisodeResult)}
    fields |= {"latency_median_s", "latency_p90_s", "decisions", "failed_decisions", "operator", "video"}
    documented = set(re.findall(r"`(\w+)`", _section("ros2.md", "### Exit codes and records")))
    assert fields <= documented, f"summary fields the docs do not name: {fields - documented}"
    return fields
