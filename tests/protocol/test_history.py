"""The history window (`--history K`): exactly what the model is sent at turn N, full, one line, or
dropped; the roles still alternate; the older part is a prefix that only grows."""

import pytest

from pear_agent.protocol.history import check_history, one_line, window


def conversation(turns: int, current: bool = True) -> list[dict]:
    """A system prompt, `turns` answered turns (multi-line observations with a one-line form, fenced
    replies), and the turn in progress."""
    msgs = [{"role": "system", "content": "brief"}]
    for n in range(1, turns + 1):
        msgs.append({"role": "user", "content": f"Turn {n}.\nstate {n} long", "_line": f"s{n}"})
        msgs.append(
            {
                "role": "assistant",
                "content": f'think {n}\n```json\n{{"a": {n}}}\n```',
                "_line": f'{{"a":{n}}}',
            }
        )
    if current:
        msgs.append({"role": "user", "content": f"Turn {turns + 1}.\nstate {turns + 1} long", "_line": "x"})
    return msgs


def test_turn_6_with_k2_sends_turns_4_5_in_full_and_1_to_3_as_one_line_each():
    msgs = conversation(5)
    got = window(msgs, 2, "line")
    want = [
        {"role": "system", "content": "brief"},
        *[
            m
            for n in (1, 2, 3)
            for m in ({"role": "user", "content": f"s{n}"}, {"role": "assistant", "content": f'{{"a":{n}}}'})
        ],
        *msgs[7:11],  # turns 4 and 5 as they were (full)
        msgs[11],  # the turn in progress
    ]
    assert got == want
    assert [m["role"] for m in got[1:]] == ["user", "assistant"] * 5 + ["user"]  # roles alternate


def test_drop_sends_only_the_window_and_the_turn_in_progress():
    msgs = conversation(5)
    assert window(msgs, 2, "drop") == [msgs[0], *msgs[7:12]]
    assert window(msgs, 0, "drop") == [msgs[0], msgs[11]]
    assert window(msgs, 0, "line")[-1] is msgs[11] and len(window(msgs, 0, "line")) == 1 + 10 + 1


def test_no_window_is_the_conversation_itself_and_a_short_one_is_whole():
    msgs = conversation(5)
    assert window(msgs, None) is msgs
    assert window(conversation(2), 2, "line") == conversation(2)
    assert window(conversation(2), 5, "drop") == conversation(2)


def test_the_one_line_part_only_grows_as_the_window_slides():
    """Turn n's window starts with turn n-1's system prompt and one-line turns: a server's prefix
    cache keeps them (only the turn that left the window is read again)."""
    for n in range(3, 8):
        before, now = window(conversation(n - 1), 2, "line"), window(conversation(n), 2, "line")
        stable = 1 + 2 * (n - 1 - 2)  # system + the one-line turns of the earlier window
        assert now[:stable] == before[:stable]
        assert now[stable] == {"role": "user", "content": f"s{n - 2}"}


def test_one_line_falls_back_to_the_last_text_line_without_fences():
    assert (
        one_line({"role": "assistant", "content": 'ok\n```json\n{"mode": "coast"}\n```'})
        == '{"mode": "coast"}'
    )
    assert one_line({"role": "user", "content": [{"type": "text", "text": "a\nState: {}"}]}) == "State: {}"
    assert len(one_line({"role": "user", "content": "x" * 5000})) == 300


@pytest.mark.parametrize("k, older", [(-1, "line"), (1.5, "line"), (True, "line"), (2, "summary")])
def test_bad_window_settings_are_one_line_errors(k, older):
    with pytest.raises(ValueError, match="--history"):
        check_history(k, older)
