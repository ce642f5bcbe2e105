"""A LIBERO episode is a function of task, init state and seed: LIBERO places its fixed
fixtures (the microwave of libero_10/9) at every reset from a random stream its earlier resets have
drawn from, so the adapter must start each episode from the same scene whatever ran before in
that environment. Checked on the first observation (prompt text, camera JPEGs, joints, privileged
facts) and the scripted expert's first reply, byte for byte."""

from __future__ import annotations

import json
from typing import Any

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import family_of
from pear_agent.robot.kinematics import Kinematics
from sim_adapters.libero.backend import LiberoBackend

TASK = "libero_10/9"  # the mug into the microwave: a fixture LIBERO places at reset
INIT = 2


def first_turn(backend: LiberoBackend, robot: Any, seed: int) -> dict[str, Any]:
    """The first observation and the expert's first reply of the episode `seed` on `backend`."""
    expert = family_of(TASK).default_policy(TASK)
    episode = arm_episode(backend, Kinematics(robot), expert, EpisodeConfig(max_turns=1))
    assert episode.begin(seed)
    prompt = episode.observe()
    assert prompt is not None
    reply = episode.decide()
    model = backend.sim.model
    fixtures = {
        name: model.body_pos[model.body_name2id(f.root_body)].tobytes()
        for name, f in backend.inner.fixtures_dict.items()
    }
    return {
        "text": prompt.text,
        "images": prompt.images,
        "joints": backend.joints().tobytes(),
        "qpos": backend.sim.data.qpos.tobytes(),
        "privileged": json.dumps(backend.privileged(), sort_keys=True),
        "fixtures": fixtures,
        "reply": reply.text,
    }


def test_an_episode_starts_the_same_fresh_and_after_other_resets(libero_robot) -> None:
    fresh = LiberoBackend(libero_robot, TASK, render=True)
    try:
        a = first_turn(fresh, libero_robot, INIT)
    finally:
        fresh.close()
    used = LiberoBackend(libero_robot, TASK, render=True)
    try:
        for other in (0, 5, 1):  # what a worker that ran other init states first has done
            used.reset(other)
        b = first_turn(used, libero_robot, INIT)
        again = first_turn(used, libero_robot, INIT)  # and the same episode twice in a row
    finally:
        used.close()
    assert any("microwave" in name for name in a["fixtures"]), a["fixtures"].keys()
    for other in (b, again):
        for key in ("fixtures", "text", "joints", "qpos", "privileged", "reply"):
            assert a[key] == other[key], f"{key} differs between a fresh environment and a used one"
        assert a["images"].keys() == other["images"].keys() and a["images"]
        for cam, jpg in a["images"].items():
            assert jpg == other["images"][cam], f"camera {cam}: the first image differs"
    assert a["reply"].strip(), "the expert gave no first reply"
