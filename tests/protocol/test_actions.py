import json

import pytest

from pear_agent.protocol.actions import ActionError, action_schema, parse_reply


def test_fenced_action_with_reasoning(panda) -> None:
    reply = 'The cube is left of me.\n```json\n{"arm": {"position": [0, 4, -8], "gripper": 1}}\n```'
    a = parse_reply(reply, panda)
    assert a.parts["arm"].position_cm == [0.0, 4.0, -8.0]
    assert a.parts["arm"].gripper == 1.0 and a.parts["arm"].orientation_rad is None


def test_bare_json_and_last_valid_wins(panda) -> None:
    reply = (
        'State was {"arm": {"position": [50, 1, 2]}}. First {"arm": {"position": [1, 0, 0]}} '
        'then actually {"arm": {"orientation": [0, 0, 0.3]}} and {"oops": 1}'
    )
    a = parse_reply(reply, panda)
    assert a.parts["arm"].orientation_rad == [0.0, 0.0, 0.3] and a.parts["arm"].position_cm is None


def test_think_block_is_ignored(panda) -> None:
    reply = '<think>maybe {"arm": {"gripper": 0}}</think>Final: {"arm": {"gripper": 1}}'
    assert parse_reply(reply, panda).parts["arm"].gripper == 1.0


def test_empty_object_is_a_valid_no_op(panda) -> None:
    assert parse_reply("I wait. {}", panda).parts == {}


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("", "empty"),
        ("I think I should move left.", "no JSON object"),
        ('{"leg": {"position": [0, 0, 1]}}', "unknown part 'leg'"),
        ('{"arm": {"velocity": [0, 0, 1]}}', "unknown quantity 'arm.velocity'"),
        ('{"arm": {"position": [0, 1]}}', "arm.position must be a list of 3 numbers"),
        ('{"arm": {"position": "up"}}', "arm.position must be a list of 3 numbers"),
        ('{"arm": [0, 0, 1]}', "arm must be an object"),
        ('{"arm": {"position": [0, NaN, 1]}}', "arm.position[1] must be finite"),
        ('{"arm": {"position": [0, Infinity, 1]}}', "must be finite"),
        ('{"arm": {"position": [0, true, 1]}}', "arm.position[1] must be a number"),
        ('{"arm": {"gripper": 1.5}}', "arm.gripper = 1.5 is out of range"),
        ('{"arm": {"gripper": "open"}}', "arm.gripper must be a number"),
        ('{"arm": {"position": [0, 0, 500]}}', "arm.position[2] = 500 is out of range"),
        ('{"arm": {"orientation": [0, 0, 7]}}', "arm.orientation[2] = 7 is out of range"),
        ("[1, 2, 3]", "no JSON object"),
        ('<think>never closed {"arm": {"gripper": 0}}', "no JSON object"),
    ],
)
def test_bad_replies_are_rejected_with_the_cause(panda, reply: str, needle: str) -> None:
    with pytest.raises(ActionError) as exc:
        parse_reply(reply, panda)
    assert needle in str(exc.value)


def test_schema_matches_parts_and_quantities(panda) -> None:
    schema = action_schema(panda)
    assert set(schema["properties"]) == {"arm"}
    arm = schema["properties"]["arm"]["properties"]
    assert set(arm) == {"position", "orientation", "gripper"}
    assert arm["gripper"]["maximum"] == 1
    json.dumps(schema)
