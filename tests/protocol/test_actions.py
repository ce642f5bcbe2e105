import json

import jsonschema
import pytest

from pear_agent.protocol.actions import (
    MAX_REPLY_CHARS,
    ActionError,
    action_schema,
    parse_reply,
    reply_text,
    response_schema,
    wire_action,
)
from pear_agent.protocol.prompts import turn_text


def test_fenced_action_with_reasoning(panda) -> None:
    reply = (
        'The cube is left of me.\n```json\n{"action": {"arm": {"move_cm": [0, 4, -8], "gripper": 1}}}\n```'
    )
    a = parse_reply(reply, panda)
    assert a.parts["arm"].position_cm == [0.0, 4.0, -8.0]
    assert a.parts["arm"].gripper == 1.0 and a.parts["arm"].orientation_rad is None and not a.done


def test_bare_json_and_the_last_action_decides(panda) -> None:
    reply = (
        'State was {"arm": {"position": [50, 1, 2]}}. First {"action": {"arm": {"move_cm": [1, 0, 0]}}} '
        'then actually {"action": {"arm": {"turn_rad": [0, 0, 0.3]}}} and {"oops": 1}'
    )
    a = parse_reply(reply, panda)
    assert a.parts["arm"].orientation_rad == [0.0, 0.0, 0.3] and a.parts["arm"].position_cm is None


def test_an_invalid_last_action_is_not_replaced_by_an_earlier_draft(panda) -> None:
    reply = '{"action": {"arm": {"move_cm": [1, 0, 0]}}} no wait: {"action": {"arm": {"move_cm": [1, 0]}}}'
    with pytest.raises(ActionError, match="list of 3 numbers"):
        parse_reply(reply, panda)


def test_think_block_is_ignored(panda) -> None:
    reply = (
        '<think>maybe {"action": {"arm": {"gripper": 0}}}</think>Final: {"action": {"arm": {"gripper": 1}}}'
    )
    assert parse_reply(reply, panda).parts["arm"].gripper == 1.0


def test_done_flag_and_key_order(panda) -> None:
    a = parse_reply('{"done": true, "action": {"arm": {"gripper": 0}}}', panda)
    assert a.done and a.to_json() == {"action": {"arm": {"gripper": 0.0}}, "done": True}


def test_zero_changes_hold_still(panda) -> None:
    a = parse_reply('{"action": {"arm": {"move_cm": [0, 0, 0], "turn_rad": [0, 0, 0]}}}', panda)
    pa = a.parts["arm"]
    assert pa.position_cm is None and pa.orientation_rad is None and pa.gripper is None


def test_gripper_out_of_range_is_clipped_with_a_note(panda) -> None:
    a = parse_reply('{"action": {"arm": {"gripper": 1.5}}}', panda)
    assert a.parts["arm"].gripper == 1.0 and "clipped to 1" in a.notes[0]


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("I think I should move left.", "no action found"),
        ("I wait. {}", 'no "action" key'),
        ('{"action": {}}', "names no part"),
        ('{"action": {"arm": {}}}', "names no quantity"),
        ('{"arm": {"position": [0, 0, 1]}}', "looks like the state or the old action format"),
        ('{"action": {"arm": {"position": [0, 0, 1]}}}', "'position' is how the state reports"),
        ('{"action": {"leg": {"move_cm": [0, 0, 1]}}}', 'unknown part "leg"'),
        ('{"action": {"arm": {"velocity": [0, 0, 1]}}}', 'unknown quantity "action.arm.velocity"'),
        ('{"action": {"arm": {"move_cm": [0, 1]}}}', "action.arm.move_cm must be a list of 3 numbers"),
        ('{"action": {"arm": {"move_cm": "up"}}}', "action.arm.move_cm must be a list of 3 numbers"),
        ('{"action": {"arm": [0, 0, 1]}}', "action.arm must be an object"),
        ('{"action": [1]}', '"action" must be an object'),
        ('{"action": {"arm": {"move_cm": [0, NaN, 1]}}}', "action.arm.move_cm[1] must be a finite number"),
        ('{"action": {"arm": {"move_cm": [0, Infinity, 1]}}}', "must be a finite number"),
        ('{"action": {"arm": {"move_cm": [0, 1e999, 1]}}}', "must be a finite number"),
        ('{"action": {"arm": {"move_cm": [0, true, 1]}}}', "action.arm.move_cm[1] must be a number"),
        ('{"action": {"arm": {"gripper": "open"}}}', "action.arm.gripper must be a number"),
        ('{"action": {"arm": {"move_cm": [0, 0, 500]}}}', "action.arm.move_cm[2] = 500 is out of range"),
        ('{"action": {"arm": {"turn_rad": [0, 0, 7]}}}', "action.arm.turn_rad[2] = 7 is out of range"),
        ('{"action": {"arm": {"gripper": 1}}, "done": "yes"}', '"done" must be true or false'),
        ('{"action": {"arm": {"gripper": 1}}, "why": "x"}', 'unexpected top-level keys ["why"]'),
        ("[1, 2, 3]", "no action found"),
        ('<think>never closed {"action": {"arm": {"gripper": 0}}}', "cut off before </think>"),
    ],
)
def test_bad_replies_are_rejected_with_the_cause(panda, reply: str, needle: str) -> None:
    with pytest.raises(ActionError) as exc:
        parse_reply(reply, panda)
    assert needle in str(exc.value)


def test_over_long_replies_are_refused_with_the_limit(panda) -> None:
    with pytest.raises(ActionError, match=f"the limit is {MAX_REPLY_CHARS}"):
        parse_reply("x" * (MAX_REPLY_CHARS + 1), panda)


def test_the_state_and_the_whole_user_turn_never_parse(panda, panda_kin) -> None:
    from pear_agent.loop.registry import make_backend
    from pear_agent.protocol.state import robot_state, state_json

    be = make_backend("pick_cube", panda, render=False)
    try:
        obs = be.reset(0)
    finally:
        be.close()
    state = state_json(robot_state(obs, panda_kin))
    for text in (
        state,
        f"State: {state}",
        turn_text(1, 25, state, None, ["front", "wrist"]),
        turn_text(2, 25, state, "reached (note: arm gripper 3 is outside [0, 1])", ["front"]),
        turn_text(2, 25, state, "invalid reply: names no part", [], observation="state", scene="{}"),
    ):
        with pytest.raises(ActionError):
            parse_reply(text, panda)


def test_schema_requires_a_part_with_a_quantity(panda) -> None:
    schema = response_schema(panda)
    assert action_schema(panda) == schema and schema["required"] == ["action"]
    ok = {"action": {"arm": {"move_cm": [0, 0, -2], "gripper": 0}}, "done": True}
    jsonschema.validate(ok, schema)
    for bad in (
        {},
        {"action": {}},
        {"action": {"arm": {}}},
        {"arm": {"position": [0, 0, 1]}},
        {"done": True},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        with pytest.raises(ActionError):
            parse_reply(json.dumps(bad), panda)
    from pear_agent.robot.loader import load_robot

    bi = response_schema(load_robot("yam_bimanual"))
    jsonschema.validate({"action": {"right_arm": {"turn_rad": [0, 0, 1]}}}, bi)
    for bad in ({"action": {"left_arm": {}, "right_arm": {}}}, {"action": {"left_arm": {"move_cm": [0, 0]}}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, bi)


def test_expert_dicts_convert_to_valid_wire_actions(panda) -> None:
    internal = {"arm": {"position": [0.0, 1.0, -2.0], "orientation": [0, 0, 0.2], "gripper": 0.0}}
    wire = wire_action(internal)
    assert wire == {"action": {"arm": {"move_cm": [0.0, 1.0, -2.0], "turn_rad": [0, 0, 0.2], "gripper": 0.0}}}
    a = parse_reply(reply_text("why", wire), panda)
    assert a.parts["arm"].position_cm == [0.0, 1.0, -2.0] and a.parts["arm"].gripper == 0.0
    jsonschema.validate(wire, response_schema(panda))
    for empty in ({"arm": {}}, {}):  # an expert that waits: a valid hold
        hold = parse_reply(json.dumps(wire_action(empty)), panda).parts["arm"]
        assert hold.position_cm is None and hold.gripper is None
    with pytest.raises(ValueError, match="unknown quantities"):
        wire_action({"arm": {"velocity": [0, 0, 1]}})


def test_an_action_word_in_prose_after_the_action_does_not_hide_it(panda) -> None:
    reply = (
        '```json\n{"action": {"arm": {"move_cm": [0, 0, 1]}}}\n```\n'
        'That "action" lifts the arm; "action" again.'
    )
    assert parse_reply(reply, panda).parts["arm"].position_cm == [0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("final", "why"),
    [
        ('{"action":{"arm":{"move_cm":[0,0,2', "cut off"),  # the token limit
        ('{"action": {"arm": {"move_cm": [0, 0, 2]}},}', "not valid JSON"),  # a trailing comma
        ('{"action": {"arm": {"move_cm": [0, 0, 2]}}, "done": tru}', "not valid JSON"),  # a bad literal
        ('{"action": {"arm": {"move_cm": [0, 0, 2], "pad": "' + "x" * 5000 + '"}}}', "longer than"),
    ],
)
def test_a_malformed_final_action_never_runs_an_earlier_draft(panda, final: str, why: str) -> None:
    reply = 'Draft: {"action": {"arm": {"move_cm": [0, 0, -5]}}}\nOn reflection, final: ' + final
    with pytest.raises(ActionError, match=why) as err:
        parse_reply(reply, panda)
    assert "not run" in str(err.value) and "\n" not in str(err.value)


def test_a_cut_off_final_action_in_a_fence_is_invalid(panda) -> None:
    reply = '```json\n{"action": {"arm": {"gripper": 0}}}\n```\nBetter:\n```json\n{"action": {"arm": {"grip'
    with pytest.raises(ActionError, match="cut off"):
        parse_reply(reply, panda)


def test_press_is_refused_where_the_backend_cannot_honour_it(panda) -> None:
    """A robot whose backend has no press (the default) refuses the flag with the cause; where it
    is honoured the flag is parsed, must be a boolean and goes with a move. Mutation seen to fail:
    dropping the `if not press:` refusal in `_part` (the Panda then parsed `press` silently)."""
    reply = '{"action": {"arm": {"move_cm": [0, 0, -2], "press": true}}}'
    with pytest.raises(ActionError, match="cannot press"):
        parse_reply(reply, panda)
    a = parse_reply(reply, panda, press=True)
    assert a.parts["arm"].press and a.parts["arm"].position_cm == [0.0, 0.0, -2.0]
    assert a.to_json()["action"]["arm"]["press"] is True
    plain = parse_reply('{"action": {"arm": {"move_cm": [0, 0, -2]}}}', panda, press=True)
    assert not plain.parts["arm"].press
    with pytest.raises(ActionError, match="true or false"):
        parse_reply('{"action": {"arm": {"move_cm": [0, 0, -2], "press": 1}}}', panda, press=True)
    with pytest.raises(ActionError, match="goes with a move"):
        parse_reply('{"action": {"arm": {"gripper": 0, "press": true}}}', panda, press=True)


def test_the_schema_offers_press_only_where_it_is_honoured(panda) -> None:
    plain = json.dumps(response_schema(panda))
    assert '"press"' not in plain
    schema = response_schema(panda, press=True)
    jsonschema.validate({"action": {"arm": {"move_cm": [0, 0, -2], "press": True}}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": {"arm": {"press": True}}}, schema)
