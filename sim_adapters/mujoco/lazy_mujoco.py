"""`mujoco`, imported on first use: the task classes are read (their names, needs, paraphrases,
experts) whenever tasks are listed, and listing tasks must not load the simulator.

A task module writes `from sim_adapters.mujoco.lazy_mujoco import mujoco` instead of `import mujoco`
and uses it the same way; the first attribute read imports MuJoCo and keeps what it read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mujoco
else:

    class _LazyMujoco:
        """Stands in for the `mujoco` module until a task first touches it."""

        def __getattr__(self, name: str) -> Any:
            import mujoco as module  # heavy: mujoco

            value = getattr(module, name)
            setattr(self, name, value)  # later reads are plain attribute hits
            return value

    mujoco = _LazyMujoco()

__all__ = ["mujoco"]
