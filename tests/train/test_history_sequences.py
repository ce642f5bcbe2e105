"""A history window in the token-in/token-out path: the in-process generator's prompt at every turn
is the window the HTTP client sends, templated; the cache kept across a slide is exact; and the
trainer rebuilds, from the record, the very sequences that were sampled."""

from __future__ import annotations

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.policies.openai_wire import wire_messages
from pear_agent.protocol.history import window
from sim_adapters.roadster.environment import RoadsterEnvironment

pytest.importorskip("mujoco")


class Prompts:
    """Wraps a local policy; keeps each turn's messages and the ids it generated after."""

    def __init__(self, policy):
        self.policy, self.name, self.turns = policy, policy.name, []

    def reset(self, seed):
        self.turns = []
        self.policy.reset(seed)

    def act(self, messages, ctx):
        reply = self.policy.act(messages, ctx)
        prompt_ids = list(
            self.policy.sequence.ids[: len(self.policy.sequence.ids) - len(reply.tokens.token_ids)]
        )
        self.turns.append((messages, prompt_ids, reply))
        return reply


def _fly(tiny, reuse=True, history=1, older="line", temperature=0.0):
    from pear_agent.train.local_model import LocalModelPolicy

    model, tok = tiny
    policy = Prompts(
        LocalModelPolicy(model, tok, max_new_tokens=6, temperature=temperature, reuse_cache=reuse)
    )
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False, observation="compact")
    cfg = EpisodeConfig(
        observation="compact", max_invalid=5, max_turns=5, history=history, history_older=older
    )
    episode = Episode(env, policy, cfg)
    episode.run(20001)
    return policy, episode


@pytest.mark.parametrize("older", ["line", "drop"])
def test_the_generator_is_prompted_with_exactly_the_window_the_http_client_sends(tiny, older):
    policy, episode = _fly(tiny, history=1, older=older)
    tok = tiny[1]
    assert len(policy.turns) == 5
    for n, (messages, prompt_ids, _) in enumerate(policy.turns):
        idx = [i for i, m in enumerate(episode.messages) if m["role"] == "assistant"][n]
        assert messages == window(episode.messages[:idx], 1, older)
        sent = wire_messages(messages, None)  # what the HTTP client would send
        text = tok.apply_chat_template(sent, tokenize=False, add_generation_prompt=True)
        assert tok.decode(prompt_ids) == text
    # turn 3 sees turn 1 as one line (or not at all), turn 2 in full
    third = policy.turns[2][0]
    assert len(third) == (1 + 2 + 2 + 1 if older == "line" else 1 + 2 + 1)


def test_the_cache_kept_across_a_slide_gives_what_no_cache_gives(tiny):
    runs = [_fly(tiny, reuse=reuse, history=1)[0] for reuse in (True, False)]
    for (_, ids_a, a), (_, ids_b, b) in zip(runs[0].turns, runs[1].turns, strict=True):
        assert ids_a == ids_b and a.tokens.token_ids == b.tokens.token_ids
        assert a.tokens.logprobs == pytest.approx(b.tokens.logprobs, abs=1e-4)


def test_the_trainer_rebuilds_the_sampled_sequences_from_the_record(tiny):
    from pear_agent.train.sequences import episode_sequences

    policy, episode = _fly(tiny, history=1, temperature=1.0)
    traces = [r.tokens.to_json() for _, _, r in policy.turns]
    seqs = episode_sequences(tiny[1], episode.messages, traces, 1, "line")
    # turn 1 and turn 2 grow one sequence; every later turn starts a new one (the window slid)
    assert len(seqs) == 4 and sum(s.reply_tokens for s in seqs) == sum(len(t["ids"]) for t in traces)
    assert seqs[0].input_ids[: len(policy.turns[1][1])] == policy.turns[1][1]
    for seq, (_, prompt_ids, reply) in zip(seqs[1:], policy.turns[2:], strict=True):
        assert seq.input_ids == prompt_ids + reply.tokens.token_ids
        assert seq.mask == [0] * len(prompt_ids) + [1] * len(reply.tokens.token_ids)
        masked = [x for x, m in zip(seq.old_logprobs, seq.mask, strict=True) if m]
        assert masked == reply.tokens.logprobs
    # without a window: the one append-only sequence, as before
    assert len(episode_sequences(tiny[1], episode.messages, traces, None)) == 1


def test_a_windowed_run_folder_trains_on_the_windows_it_was_flown_with(tiny, tmp_path):
    """Warm start from logs: the one-line forms come back from the log, so the rebuilt prompts are
    the windows the teacher was sent (the log's header says the window)."""
    import json

    from pear_agent.records.log import RunWriter
    from pear_agent.train.data import from_run_folder
    from pear_agent.train.sequences import episode_sequences
    from sim_adapters.roadster.pilot import PilotPolicy

    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    cfg = EpisodeConfig(history=2)
    episode = Episode(env, PilotPolicy(), cfg, writer=RunWriter(tmp_path / "run", video_fps=None))
    assert episode.run(20001).success
    ex = from_run_folder(tmp_path / "run")
    header = json.loads((tmp_path / "run" / "episode.jsonl").read_text().splitlines()[0])
    assert ex.messages == episode.messages  # prompts, replies and one-line forms alike
    seqs = episode_sequences(tiny[1], ex.messages, None, header["history"], header["history_older"])
    replies = sum(1 for m in ex.messages if m["role"] == "assistant")
    assert len(seqs) == replies - 2  # turns 1-3 share one sequence, every later one starts its own
    assert sum(s.reply_tokens for s in seqs) == sum(
        len(tiny[1](m["content"], add_special_tokens=False)["input_ids"]) + 1
        for m in ex.messages
        if m["role"] == "assistant"
    )
