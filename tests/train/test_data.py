"""Recorded episodes as training examples: a run folder's log gives back the conversation."""

from __future__ import annotations

import pytest

from pear_agent.episode import Episode, EpisodeConfig
from pear_agent.policies.pilot import PilotPolicy
from pear_agent.records import RunWriter
from pear_agent.train.data import load_examples
from sim_adapters.roadster.environment import RoadsterEnvironment


def test_run_and_bench_folders_give_back_the_conversation(tmp_path):
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    episode = Episode.of(
        env, PilotPolicy(), EpisodeConfig(), RunWriter(tmp_path / "bench" / "ep1", video_fps=None)
    )
    result = episode.run(3)
    [ex] = load_examples([tmp_path / "bench"])  # a folder of run folders, as bench writes them
    assert ex.messages == episode.messages
    assert ex.success == result.success and ex.task == "roadster_ramp_flip:light" and ex.seed == 3
    assert ex.traces == [None] * result.turns  # the scripted pilot samples no tokens


def test_a_folder_without_episodes_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"no episode\.jsonl or trajectories\.jsonl"):
        load_examples([tmp_path])
    with pytest.raises(FileNotFoundError, match="no recorded episodes at"):
        load_examples([tmp_path / "missing"])
