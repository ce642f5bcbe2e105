"""The trainer's one rollout seam runs arm tasks and the roadster through the ONE loop."""

from __future__ import annotations

from pear_agent.loop.config import EpisodeConfig
from pear_agent.train.episodes import TrainJob, run_episodes


def test_arm_and_roadster_episodes_come_back_as_records():
    from pear_agent.loop.task_experts import scripted_policy
    from sim_adapters.roadster.pilot import PilotPolicy

    def make(job):
        return PilotPolicy() if job.task.startswith("roadster") else scripted_policy(job.task)

    jobs = [
        TrainJob("pick_cube", 0, group_id="g0"),
        TrainJob("roadster_ramp_flip:light", 5, index_in_group=1),
    ]
    seen = []
    recs = run_episodes(
        jobs, make, EpisodeConfig(observation="state", scene_facts=True), lambda j, r: seen.append(j)
    )
    assert seen == jobs and [r["task"] for r in recs] == ["pick_cube", "roadster_ramp_flip:light"]
    arm, car = recs
    assert arm["success"] and arm["reward"] == 1.0 and arm["id"] == "g0-pick_cube-s0-r0"
    assert isinstance(arm["messages"][1]["content"], str)  # state observation: text only
    assert len(arm["turn_tokens"]) == arm["turns"] and all(t is None for t in arm["turn_tokens"])
    assert car["success"] and 0.5 < car["shaped_reward"] <= 1.0
