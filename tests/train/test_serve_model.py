"""A checkpoint behind `pear-agent train serve` flies through the real OpenAI client and the loop,
and the client records the server's token ids and log-probabilities as the turn's trace."""

from __future__ import annotations

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.policies.server_logprobs import trace_from_logprobs
from sim_adapters.roadster.environment import RoadsterEnvironment
from tests.servers import serve_app

pytestmark = pytest.mark.wallclock


def test_vllm_token_id_entries_make_a_trace():
    # vLLM with return_tokens_as_token_ids: each entry's token is "token_id:<id>"
    entries = [
        {"token": "token_id:90", "logprob": -0.25, "bytes": None, "top_logprobs": []},
        {"token": "token_id:2", "logprob": -1.5, "bytes": None, "top_logprobs": []},
    ]
    trace = trace_from_logprobs(entries, policy_version=4)
    assert trace.token_ids == [90, 2] and trace.logprobs == [-0.25, -1.5] and trace.policy_version == 4
    # text-only entries (a hosted API, llama.cpp) cannot be trusted to re-tokenise: no trace
    assert trace_from_logprobs([{"token": "{", "logprob": -0.1}]) is None
    assert trace_from_logprobs([{"token": "token_id:3", "logprob": float("nan")}]) is None


@pytest.fixture()
def served(tiny_model_dir):
    from pear_agent.train.serve_model import create_app

    with serve_app(create_app(tiny_model_dir, 6), start_timeout_s=60) as url:
        yield url


@pytest.mark.parametrize("stream", [True, False])
def test_a_served_checkpoint_flies_with_token_traces(served, tiny, stream):
    from pear_agent.policies.model_settings import ModelSettings
    from pear_agent.policies.openai_client import OpenAIPolicy

    policy = OpenAIPolicy(
        ModelSettings(
            model="pilot", base_url=served, logprobs=True, temperature=0.0, max_tokens=6, stream=stream
        )
    )
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    traces = []
    orig = policy.act

    def act(messages, ctx):
        reply = orig(messages, ctx)
        traces.append(reply.tokens)
        return reply

    policy.act = act
    result = Episode(env, policy, EpisodeConfig(max_invalid=1, max_turns=2)).run(20000)
    assert result.turns >= 1 and result.policy_failures == 0
    tok = tiny[1]
    for trace in traces:
        assert trace is not None and len(trace.token_ids) == len(trace.logprobs) >= 1
        assert all(lp <= 0 for lp in trace.logprobs)
        assert trace.token_ids[-1] in tok.all_special_ids or len(trace.token_ids) == 6
