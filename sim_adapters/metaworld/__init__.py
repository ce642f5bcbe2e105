"""Meta-World (PyPI `metaworld` 3.1.1, MIT) through the pear-agent protocol: its 50 v3 tasks on its
Sawyer, its own task sampling, success check (`info["success"]`) and scripted policies.

Optional; runs in the separate `.venv-metaworld` (`scripts/setup_metaworld.sh`): Meta-World pins
mujoco 3.3.0 while the core runs a newer MuJoCo. Nothing here imports Meta-World or MuJoCo at
module level (the core lists these tasks without it).
"""

from __future__ import annotations

ENV_NAMES: tuple[str, ...] = (
    "assembly-v3",
    "basketball-v3",
    "bin-picking-v3",
    "box-close-v3",
    "button-press-topdown-v3",
    "button-press-topdown-wall-v3",
    "button-press-v3",
    "button-press-wall-v3",
    "coffee-button-v3",
    "coffee-pull-v3",
    "coffee-push-v3",
    "dial-turn-v3",
    "disassemble-v3",
    "door-close-v3",
    "door-lock-v3",
    "door-open-v3",
    "door-unlock-v3",
    "hand-insert-v3",
    "drawer-close-v3",
    "drawer-open-v3",
    "faucet-open-v3",
    "faucet-close-v3",
    "hammer-v3",
    "handle-press-side-v3",
    "handle-press-v3",
    "handle-pull-side-v3",
    "handle-pull-v3",
    "lever-pull-v3",
    "pick-place-wall-v3",
    "pick-out-of-hole-v3",
    "pick-place-v3",
    "plate-slide-v3",
    "plate-slide-side-v3",
    "plate-slide-back-v3",
    "plate-slide-back-side-v3",
    "peg-insert-side-v3",
    "peg-unplug-side-v3",
    "soccer-v3",
    "stick-push-v3",
    "stick-pull-v3",
    "push-v3",
    "push-wall-v3",
    "push-back-v3",
    "reach-v3",
    "reach-wall-v3",
    "shelf-place-v3",
    "sweep-into-v3",
    "sweep-v3",
    "window-open-v3",
    "window-close-v3",
)
"""Meta-World's 50 v3 environments in its own order (`metaworld.env_dict.ALL_V3_ENVIRONMENTS`, which
a test compares with this list)."""

MT10: tuple[str, ...] = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)
"""Meta-World's MT10 (`metaworld.env_dict.MT10_V3`); MT50 is all of `ENV_NAMES`."""

PREFIX = "metaworld/"

INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "Pick up the round nut by its handle and put it onto the peg.",
    "basketball-v3": "Pick up the basketball and drop it into the hoop.",
    "bin-picking-v3": "Pick up the cube from the left bin and place it into the right bin.",
    "box-close-v3": "Pick up the box lid and place it onto the box.",
    "button-press-topdown-v3": "Press the button down from the top.",
    "button-press-topdown-wall-v3": "Press the button down from the top, reaching past the short wall.",
    "button-press-v3": "Press the button in from the front.",
    "button-press-wall-v3": "Press the button in from the front, reaching past the short wall.",
    "coffee-button-v3": "Press the button on the front of the coffee machine.",
    "coffee-pull-v3": "Pull the mug out from under the coffee machine to the target spot.",
    "coffee-push-v3": "Push the mug under the coffee machine's spout.",
    "dial-turn-v3": "Turn the dial a half turn.",
    "disassemble-v3": "Pick the round nut by its handle up and off the peg.",
    "door-close-v3": "Push the open door closed.",
    "door-lock-v3": "Turn the door's lock down to lock it.",
    "door-open-v3": "Pull the door open by its handle.",
    "door-unlock-v3": "Turn the door's lock to unlock it.",
    "hand-insert-v3": "Move the gripper into the hole in the table.",
    "drawer-close-v3": "Push the open drawer closed.",
    "drawer-open-v3": "Pull the drawer open by its handle.",
    "faucet-open-v3": "Turn the faucet's handle to the left to open it.",
    "faucet-close-v3": "Turn the faucet's handle to the right to close it.",
    "hammer-v3": "Pick up the hammer and hammer the nail into the wall.",
    "handle-press-side-v3": "Press the handle down from the side.",
    "handle-press-v3": "Press the handle down.",
    "handle-pull-side-v3": "Pull the handle up from the side.",
    "handle-pull-v3": "Pull the handle up.",
    "lever-pull-v3": "Pull the lever up.",
    "pick-place-wall-v3": "Pick up the puck and place it at the goal, passing over the wall.",
    "pick-out-of-hole-v3": "Pick the puck up out of the hole and lift it to the goal.",
    "pick-place-v3": "Pick up the puck and place it at the goal.",
    "plate-slide-v3": "Slide the plate forward into the cabinet.",
    "plate-slide-side-v3": "Slide the plate sideways into the cabinet.",
    "plate-slide-back-v3": "Slide the plate back out of the cabinet towards the robot.",
    "plate-slide-back-side-v3": "Slide the plate sideways out of the cabinet.",
    "peg-insert-side-v3": "Pick up the peg and insert it sideways into the hole in the box.",
    "peg-unplug-side-v3": "Pull the peg out of the box sideways.",
    "soccer-v3": "Push the soccer ball into the goal.",
    "stick-push-v3": "Pick up the stick and use it to push the thermos to the goal.",
    "stick-pull-v3": "Pick up the stick and use it to pull the thermos to the goal.",
    "push-v3": "Push the puck to the goal.",
    "push-wall-v3": "Push the puck around the wall to the goal.",
    "push-back-v3": "Pull the puck back towards the robot to the goal.",
    "reach-v3": "Move the gripper to the goal position.",
    "reach-wall-v3": "Move the gripper over the wall to the goal position.",
    "shelf-place-v3": "Pick up the puck and place it on the shelf.",
    "sweep-into-v3": "Sweep the puck into the hole.",
    "sweep-v3": "Sweep the puck off the edge of the table.",
    "window-open-v3": "Push the window open sideways by its handle.",
    "window-close-v3": "Push the window closed sideways by its handle.",
}
"""One sentence per task, written here from the task descriptions in the appendix of the Meta-World
paper (Yu et al., CoRL 2019, "Meta-World: A Benchmark and Evaluation for Multi-Task and Meta
Reinforcement Learning", table of the 50 tasks), worded as an instruction; the package itself ships
no language instructions."""

MAX_TURNS = 40
"""Turn limit of every Meta-World task: room over the ~10-25 turns the expert needs (Meta-World's
own limit is 500 control steps, which a turn of up to 10 cm spends ~10-80 of)."""


def task_names() -> list[str]:
    """`metaworld/assembly-v3` ... `metaworld/window-close-v3`."""
    return [PREFIX + n for n in ENV_NAMES]


def env_name(task: str) -> str:
    """`metaworld/pick-place-v3` -> `pick-place-v3`, with a one-line error for an unknown name."""
    name = task.removeprefix(PREFIX)
    if not task.startswith(PREFIX) or name not in INSTRUCTIONS:
        raise ValueError(
            f"unknown Meta-World task {task!r}; tasks are metaworld/<env> for: {', '.join(ENV_NAMES)}"
        )
    return name
