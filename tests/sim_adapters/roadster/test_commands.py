import json

import pytest

from sim_adapters.roadster.commands import (
    MODES,
    Climb,
    CommandError,
    Rotate,
    command_schema,
    describe_command,
    parse_command,
)


def test_the_issue_example_parses():
    cmd = parse_command('{"mode": "rotate", "axis": "roll", "to": 360.0, "lift": 1.0}')
    assert cmd == Rotate(mode="rotate", axis="roll", to=360.0, lift=1.0)
    assert describe_command(cmd) == "rotate:roll:360:lift1.0"


def test_reasoning_then_fenced_json_and_last_object_wins():
    text = 'Truck is 1.1 s away {"mode": "coast"} so climb.\n```json\n{"mode": "climb", "vz": 5}\n```'
    assert parse_command(text) == Climb(mode="climb", vz=5.0)
    assert parse_command('{"mode": "coast"} then {"mode": "land"}').mode == "land"
    assert parse_command('<think>maybe {"mode": "land"}</think>{"mode": "coast"}').mode == "coast"
    with pytest.raises(CommandError, match="no JSON object"):
        parse_command('<think>{"mode": "land"}</think> I will land.')


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("", "empty reply"),
        ("roll now!", "no JSON object"),
        ('{"mode": "fly"}', "'mode' must be one of coast, climb, hold, rotate, land (got 'fly')"),
        ('{"vz": 3}', "needs a 'mode'"),
        ('{"mode": "climb"}', "climb: 'vz' is missing"),
        ('{"mode": "climb", "vz": 30}', "climb: 'vz'"),
        ('{"mode": "hold", "roll": 60, "pitch": 0}', "hold: 'roll'"),
        ('{"mode": "rotate", "axis": "yaw", "to": 90}', "rotate: 'axis'"),
        ('{"mode": "rotate", "axis": "roll", "to": 5000}', "rotate: 'to'"),
        ('{"mode": "land", "gently": true}', "unknown field 'gently'"),
        ('{"mode": "climb", "vz": NaN}', "finite"),
        ('{"mode": "climb", "vz": 1,}', "not valid JSON"),
        ('{"mode": "climb", "vz": 1e400}', "finite"),
        ('{"mode": "climb", "vz": true}', "climb: 'vz'"),
        ('{"mode": ' + "[" * 5000 + "]" * 5000 + "}", "longer than 1000 characters"),
        ('{"mode": ' + "[" * 400 + "]" * 400 + "}", "'mode' must be one of"),
    ],
)
def test_bad_replies_name_the_cause_in_one_line(reply, needle):
    with pytest.raises(CommandError) as exc:
        parse_command(reply)
    msg = str(exc.value)
    assert needle in msg
    assert "\n" not in msg and "Traceback" not in msg


def test_a_huge_reply_is_refused_quickly():
    with pytest.raises(CommandError, match="longer than 1,000,000 characters"):
        parse_command("{" * 2_000_000)


def test_schema_names_all_five_modes_and_validates_examples():
    schema = command_schema()
    text = json.dumps(schema)
    for mode in MODES:
        assert f'"{mode}"' in text
    assert schema["discriminator"]["propertyName"] == "mode"


@pytest.mark.parametrize(
    ("final", "why"),
    [
        ('{"mode": "rotate", "axis": "roll", "to": 36', "cut off"),  # the token limit
        ('{"mode": "climb", "vz": 4.0,}', "not valid JSON"),  # a trailing comma
        ('{"mode": "climb", "vz": tru}', "not valid JSON"),  # a bad literal
        ('{"mode": "coast", "pad": "' + "x" * 3000 + '"}', "longer than"),
    ],
)
def test_a_malformed_final_command_never_flies_an_earlier_draft(final: str, why: str) -> None:
    reply = 'Draft: {"mode": "land"}\nNo, better: ' + final
    with pytest.raises(CommandError, match=why):
        parse_command(reply)
