"""Each setting is written once: a dataclass field carries its default, its help and how it looks on
the command line, and the command line is generated from it (as TRL's `HfArgumentParser` does for
its configs). Checks live in the dataclass's `__post_init__`, so a setting given on the command
line, in a YAML or from Python is checked by the same lines.

Whatever reads a setting reads the field: the commands parse their options into the dataclass
(`from_args`), a family's own options are a dataclass of these fields too (`Family.options_type`),
the ROS agent node declares a parameter for each field that names one (`ros=`), and the training
recipes check their loop settings with `EpisodeConfig` itself. Nothing looks a setting up by its
name as a string (`getattr(args, "name")`): tests/test_settings.py fails on one."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_TYPES: dict[str, type] = {"int": int, "float": float, "str": str}


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    flag: str | None = None,
    cli: bool = True,
    default_factory: Any = dataclasses.MISSING,
    cli_default: Any = dataclasses.MISSING,
    commands: tuple[str, ...] | None = None,
    ros: str | None = None,
    **argparse_kwargs: Any,
) -> Any:
    """A dataclass field with its command-line shape. `flag` defaults to `--field-name`;
    `cli_default` is the command line's own default where it differs (None: "decided later");
    `commands`: the commands that take it (None: every command that declares its dataclass);
    `ros`: the ROS parameter of the agent node that sets it (pear_agent/ros2/settings.py); any
    other keyword (type, choices, action, metavar) goes to argparse."""
    if cli_default is not dataclasses.MISSING:
        argparse_kwargs["default"] = cli_default
    metadata = {
        "help": help,
        "flag": flag,
        "cli": cli,
        "commands": commands,
        "ros": ros,
        "argparse": argparse_kwargs,
    }
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def cli_fields(cls: type) -> Iterator[dataclasses.Field]:
    for f in dataclasses.fields(cls):
        if f.metadata.get("cli"):
            yield f


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def type_of(f: dataclasses.Field) -> type | None:
    """The plain type (int, float, str) of a field annotated `int`, `float | None`, ...; else None."""
    name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    base = name.replace(" | None", "").replace("None | ", "").strip()
    return _TYPES.get(base)


def add_arguments(
    group: Any,
    cls: type,
    *,
    only: tuple[str, ...] | None = None,
    defaults: dict[str, Any] | None = None,
    command: str | None = None,
) -> None:
    """Declare the command-line fields of `cls` (all, or `only` these) on an argparse parser or
    group; `defaults` gives a command its own default for a field (e.g. rollouts sample at 1.0).
    With `command`, only the fields that command takes (`setting(commands=...)`); a flag the parser
    already has (two families sharing `--robot`) is declared once."""
    declared = group._option_string_actions  # the parser's table (an argument group shares it)
    for f in cli_fields(cls):
        if only is not None and f.name not in only:
            continue
        takes = f.metadata.get("commands")
        if command is not None and takes is not None and command not in takes:
            continue
        if flag_of(f) in declared:
            continue
        kwargs = dict(f.metadata["argparse"])
        kwargs["help"] = f.metadata["help"]
        kwargs.setdefault("dest", f.name)
        if "default" not in kwargs:
            if f.default is not dataclasses.MISSING:
                kwargs["default"] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                kwargs["default"] = f.default_factory()
        if "action" not in kwargs and "type" not in kwargs and type_of(f) is not None:
            kwargs["type"] = type_of(f)
        if defaults and f.name in defaults:
            kwargs["default"] = defaults[f.name]
        group.add_argument(flag_of(f), **kwargs)


def values_from_args(cls: type, args: argparse.Namespace | Any) -> dict[str, Any]:
    """The command-line fields of `cls` that `args` holds (a parser may declare only some). The one
    place a setting is read from a namespace by its field's name."""
    return {f.name: getattr(args, f.name) for f in cli_fields(cls) if hasattr(args, f.name)}


def from_args(cls: type[T], args: argparse.Namespace | Any) -> T:
    """`cls` from parsed arguments: the fields the command declared, the defaults for the others
    (checked by `cls.__post_init__`)."""
    return cls(**values_from_args(cls, args))


def reference(cls: type) -> list[tuple[str, str, str]]:
    """(flag, default, help) per command-line field: the reference docs are made from this."""
    rows = []
    for f in cli_fields(cls):
        default = f.metadata["argparse"].get("default", f.default)
        shown = "" if default in (dataclasses.MISSING, None) else repr(default)
        rows.append((flag_of(f), shown, f.metadata["help"]))
    return rows
