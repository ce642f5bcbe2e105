"""Property test of the command parser: any reply is a command within bounds, or one clear line."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sim_adapters.roadster.commands import MODES, CommandError, parse_command

_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_commands = st.fixed_dictionaries(
    {"mode": st.sampled_from([*MODES, "fly", ""])},
    optional={k: _values for k in ("vz", "roll", "pitch", "axis", "to", "lift", "x")},
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | _commands.map(json.dumps))
def test_any_reply_is_a_command_or_one_clear_line(reply):
    try:
        cmd = parse_command(reply)
    except CommandError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    # a valid command is within its documented bounds and round-trips
    assert parse_command(json.dumps(cmd.model_dump())) == cmd
    for field in ("vz", "roll", "pitch", "to", "lift"):
        v = getattr(cmd, field, 0.0)
        assert v == v and abs(v) <= 720
