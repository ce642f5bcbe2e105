"""Shared by the expert success-rate tests: run the scripted expert over seeds, without rendering."""

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.episode import Episode, EpisodeResult
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.robot.config import RobotConfig
from pear_agent.robot.kinematics import Kinematics


def expert_success_rate(task: str, robot: RobotConfig, kin: Kinematics, seeds: range) -> tuple[float, list]:
    backend = make_backend(task, robot, render=False)
    try:
        results: list[EpisodeResult] = [
            arm_episode(backend, kin, scripted_policy(task)).run(s) for s in seeds
        ]
    finally:
        backend.close()
    rate = sum(r.success for r in results) / len(results)
    failures = [(s, r.end_reason, r.detail) for s, r in zip(seeds, results, strict=True) if not r.success]
    print(f"{task}: {rate:.0%} of seeds {seeds.start}-{seeds.stop - 1}; failures: {failures}")
    return rate, failures


def expert_with_object_swept_off(
    task: str, robot: RobotConfig, kin: Kinematics, body: str, xyz_m: tuple[float, float, float]
) -> tuple[EpisodeResult, Episode]:
    """The real loop with the expert, seed 0, the task's object moved to `xyz_m` (off the table)
    just before the expert's second decision."""
    import numpy as np

    from sim_adapters.mujoco.tasks.base import set_free_pose

    backend = make_backend(task, robot, render=False)
    inner = scripted_policy(task)

    class Sweeper:
        name = "sweeper"

        def reset(self, seed: int) -> None:
            inner.reset(seed)

        def act(self, messages, ctx):
            if ctx.turn == 2:
                set_free_pose(backend.model, backend.data, body, np.array(xyz_m), 0.0)
            return inner.act(messages, ctx)

    try:
        episode = arm_episode(backend, kin, Sweeper())
        return episode.run(0), episode
    finally:
        backend.close()
