"""Loading a robot: its YAML read and checked against the schema (`robot_config`, at the bottom of
the house) with errors that name the file, the key and the problem, then every home given as a
tool pose solved into joint values (`kinematics`). It stands above both, so the schema never
imports the solver."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ValidationError

from pear_agent.robot.config import ROBOTS_DIR, ActuatorTarget, RobotConfig, RobotConfigError
from pear_agent.robot.description_files import UniqueKeyLoader


def _loc(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"] if not _is_tag(p)) or "<top level>"


_UNION_TAGS: dict[str, object] = {"<target>": ActuatorTarget, "<index>": int, "<name>": str}


def _is_tag(p: object) -> bool:
    """Pydantic puts the member's tag in the location of an error inside a tagged union."""
    return isinstance(p, str) and p in _UNION_TAGS


def _model_at(loc: Sequence[object]) -> type[BaseModel] | None:
    """The model class whose keys are allowed at `loc` (a pydantic error location), or None."""
    current: object = RobotConfig
    for p in loc:
        if _is_tag(p):
            current = _UNION_TAGS[str(p)]
            continue
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(p))
            if field is None:
                return None
            current = field.annotation
        else:
            args = typing.get_args(current)
            if typing.get_origin(current) is dict and len(args) == 2:
                current = args[1]
            elif typing.get_origin(current) is list and args:
                current = args[0]
            else:
                return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(tp: object) -> object:
    """Strip Annotated and Optional; a union with one model member becomes that model."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(members) == 1:
                tp = members[0]
            elif len(models) == 1:
                tp = models[0]
            else:
                return tp
        else:
            return tp


def allowed_keys(model: type[BaseModel]) -> list[str]:
    return [name for name, f in model.model_fields.items() if not f.exclude]


def _error_line(path: Path, err: dict) -> str:
    """One validation error: the file, the key, what is wrong; an unknown key lists the allowed."""
    loc = _loc(err)
    if err["type"] == "extra_forbidden":
        where = [p for p in err["loc"][:-1]]
        model = _model_at(where)
        if model is not None:
            parent = ".".join(str(p) for p in where if not _is_tag(p)) or "the top level"
            return (
                f"{path}: key {loc}: unknown key {err['loc'][-1]!r} in {parent}; "
                f"allowed: {', '.join(allowed_keys(model))}"
            )
    return f"{path}: key {loc}: {err['msg']}"


def read_robot(name_or_path: str | Path, robots_dir: Path = ROBOTS_DIR) -> RobotConfig:
    """Read `robots/<name>.yaml` (or a YAML anywhere, by path) with errors that name the file, the
    key and the problem. Only the YAML is checked here (homes given as a tool pose stay unsolved:
    `load_robot` solves them); `sim_adapters.mujoco.scene` and `kinematics`
    check the names it gives against the model files, `pear-agent robots --check` all."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = robots_dir / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in robots_dir.glob("*.yaml"))) or "none"
        raise RobotConfigError(f"robot {str(name_or_path)!r}: no file {path} (known robots: {known})")
    path = path.resolve()
    try:
        raw = yaml.load(path.read_text(), Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" line {mark.line + 1}:"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RobotConfigError(f"{path}:{where} not valid YAML: {problem}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RobotConfigError(f"{path}: cannot read: {exc}") from None
    if not isinstance(raw, dict):
        raise RobotConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        cfg = RobotConfig.model_validate({**raw, "source": path})
    except ValidationError as exc:
        lines = [_error_line(path, e) for e in exc.errors()]
        raise RobotConfigError("\n".join(lines)) from None
    for part_name, part in cfg.parts.items():
        for axis, (lo, hi) in part.limits.workspace_cm.items():
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise RobotConfigError(
                    f"{path}: key parts.{part_name}.limits.workspace_cm.{axis}: not finite"
                )
    return cfg


def load_robot(name_or_path: str | Path, robots_dir: Path = ROBOTS_DIR) -> RobotConfig:
    """`robots/<name>.yaml` (or a YAML anywhere, by path), checked, with its homes in joint values;
    every error names the file, the key and the problem."""
    cfg = read_robot(name_or_path, robots_dir)
    if any(p.home.joints_rad is None for p in cfg.parts.values()):
        # heavy: pinocchio
        from pear_agent.robot.kinematics import solve_homes  # Pinocchio and MuJoCo only when needed

        cfg = solve_homes(cfg)
    return cfg


def list_robots(robots_dir: Path = ROBOTS_DIR) -> list[Path]:
    return sorted(robots_dir.glob("*.yaml"))
