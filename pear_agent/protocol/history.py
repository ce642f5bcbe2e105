"""The history window (`--history K`): what of the conversation the model is sent at each turn.

The loop keeps the whole conversation (records, the trainer); at each decision the model gets
`window(messages, k, older)`: the system prompt, every earlier turn, and the current turn's
observation. With `k` None (the default) that is the whole conversation, append-only, so a
server's prefix cache is reused turn after turn. With `k` set, the last `k` completed turns are
sent in full and the older ones either as one line each (`older="line"`, the default: the
observation's one-line form as the user message, the reply's action as bare JSON as the assistant
message) or not at all (`older="drop"`).

An older turn stays a user message and an assistant message (one line each), so the roles still
alternate (Gemma's chat template refuses two user messages in a row), and once a turn has left the
window its one-line form never changes: the system prompt and the one-line turns are a prefix that
grows, and a server's prefix cache keeps them; only the turn leaving the window is re-read.

A message's one-line form is its `_line` key where the loop set one (the environment's own
one-line observation, the parsed action as JSON), else its last non-empty text line (fences
dropped), so a window can be rebuilt from recorded messages alone. Keys starting with `_` are
never sent (`pear_agent.policies.openai_wire.wire_messages`) nor tokenised.
"""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]

HISTORY_OLDER: tuple[str, ...] = ("line", "drop")
"""What becomes of the turns older than the window: one line each, or nothing."""
LINE_KEY = "_line"
MAX_LINE_CHARS = 300
"""A one-line form longer than this is cut (a runaway reply is not a line)."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        c.get("text", "") for c in content or [] if isinstance(c, dict) and c.get("type") == "text"
    )


def one_line(message: Message) -> str:
    """The message's one-line form: its `_line`, else its last non-empty line that is not a fence."""
    line = message.get(LINE_KEY)
    if isinstance(line, str) and line:
        return line
    lines = [ln.strip() for ln in _text(message.get("content")).splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("```")]
    last = lines[-1] if lines else ""
    return last if len(last) <= MAX_LINE_CHARS else last[: MAX_LINE_CHARS - 3] + "..."


def check_history(k: int | None, older: str) -> None:
    """One line naming the bad value (the settings' `__post_init__` and the recipes use it)."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise ValueError(f"--history must be an integer >= 0 (turns sent in full), not {k!r}")
    if older not in HISTORY_OLDER:
        raise ValueError(f"--history-older must be one of {list(HISTORY_OLDER)}, not {older!r}")


def window(messages: list[Message], k: int | None, older: str = "line") -> list[Message]:
    """The messages the model is sent: leading system messages, the turns older than the last `k`
    completed ones as one line each (or dropped), the last `k` in full, then the turn in progress
    (a user message not yet answered, with any correction). `k` None: `messages` itself."""
    if k is None:
        return messages
    head = 0
    while head < len(messages) and messages[head]["role"] == "system":
        head += 1
    turns: list[list[Message]] = []
    for m in messages[head:]:
        if m["role"] == "user" and (not turns or any(x["role"] != "user" for x in turns[-1])):
            turns.append([m])
        elif turns:
            turns[-1].append(m)
        else:  # an assistant message before any user message: kept as it is
            turns.append([m])
    current: list[Message] = []
    if turns and all(m["role"] == "user" for m in turns[-1]):
        current = turns.pop()
    keep = turns[len(turns) - k :] if k else []
    old = turns[: len(turns) - len(keep)]
    out = list(messages[:head])
    if older == "line":
        for turn in old:
            out += [{"role": m["role"], "content": one_line(m)} for m in turn]
    for turn in keep:
        out += turn
    return out + current
