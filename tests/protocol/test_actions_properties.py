"""Property-based tests of the reply parser (Hypothesis): only ActionError ever escapes, valid
actions survive any reasoning around them, and no state ever parses as an action.
The 100,000-reply run with timings is benchmarks/parser_fuzz.py."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pear_agent.protocol.actions import MAX_ACTION_CHARS, ActionError, parse_reply
from pear_agent.robot.loader import load_robot
from tests.protocol.strategies import PROSE, replies, states, valid_actions

PANDA = load_robot("panda")
BIMANUAL = load_robot("yam_bimanual")
FAST = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _parse_or_error(text: str, robot=PANDA):
    try:
        return parse_reply(text, robot)
    except ActionError as exc:
        msg = str(exc)
        assert msg and msg.isprintable() and len(msg) <= 400, msg  # one clean line for the log and the model
        return None


@FAST
@given(replies(max_repeat=200))
def test_any_reply_gives_an_action_or_an_action_error(text: str) -> None:
    _parse_or_error(text)
    _parse_or_error(text, BIMANUAL)


@FAST
@given(st.text())
def test_any_unicode_text(text: str) -> None:
    _parse_or_error(text)


@FAST
@given(valid_actions(PANDA), PROSE, PROSE, st.booleans())
def test_a_valid_action_survives_reasoning_around_it(action, before: str, after: str, fenced: bool) -> None:
    body = json.dumps(action)
    text = f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before} {body} {after}"
    parsed = parse_reply(text, PANDA)
    assert parsed.done is bool(action.get("done", False))
    for name, q in action["action"].items():
        pa = parsed.parts[name]
        held = pa.gripper is None and pa.position_cm is None and pa.orientation_rad is None
        if not held:  # all-zero changes are a hold
            assert pa.position_cm == q.get("move_cm") or (pa.position_cm is None and not any(q["move_cm"]))
            assert pa.gripper == q.get("gripper")


@FAST
@given(valid_actions(BIMANUAL))
def test_bimanual_actions_parse(action) -> None:
    assert set(parse_reply(json.dumps(action), BIMANUAL).parts) == set(action["action"])


@FAST
@given(states(PANDA), PROSE)
def test_a_state_never_parses_as_an_action(state, prose: str) -> None:
    for text in (json.dumps(state), f"State: {json.dumps(state)}", f"{prose} {json.dumps(state)}"):
        with pytest.raises(ActionError):
            parse_reply(text, PANDA)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000,
        "{" * 200_000,
        '{"action": ' * 50_000,
        '"action"' * 100_000,
        '{"action": {"arm": {"move_cm": [0, 0, ' + "9" * 500_000 + "]}}}",
        '{"action": {"arm": {"move_cm": [0, 0, 1]}}, "x": "' + "\x00" * 10_000 + '"}',
        "<think>" * 100_000,
        "```" * 100_000,
        '{"action": {"arm": {"move_cm": [0, 0, 1]}}}' + " " * (MAX_ACTION_CHARS * 3),
    ],
)
def test_adversarial_replies_end_in_action_error_or_an_action(text: str) -> None:
    _parse_or_error(text)


def test_a_valid_action_after_a_megabyte_of_noise_is_found() -> None:
    noise = "I think { about [ this " * 40_000  # unbalanced braces everywhere, ~0.9 MB
    text = noise + '\n```json\n{"action": {"arm": {"gripper": 0.5}}}\n```'
    assert parse_reply(text, PANDA).parts["arm"].gripper == 0.5
