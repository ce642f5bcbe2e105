"""The OpenAI-compatible policy over real HTTP: `pear-agent serve`, and servers that misbehave."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.policies.openai_client import OpenAIPolicy, split_reasoning, strip_images
from pear_agent.records.log import RunWriter
from tests.servers import BadHandler, bad_server, serve_in_thread

pytestmark = pytest.mark.wallclock

KEY = "sk-test-SECRET123456"
KEY_ENV = "PEAR_TEST_API_KEY"


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=True)
    yield be
    be.close()


@pytest.fixture(scope="module")
def blind_backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def _grep_secret(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and b"SECRET123456" in p.read_bytes()]


def _turns(run_dir: Path) -> list[dict]:
    lines = [json.loads(x) for x in (run_dir / "episode.jsonl").read_text().splitlines()]
    return [x for x in lines if x["kind"] == "turn"]


def test_episode_over_http_against_serve_succeeds(backend, panda_kin, tmp_path) -> None:
    with serve_in_thread() as url:
        policy = OpenAIPolicy(
            ModelSettings(
                model="expert", base_url=url, api_key_env=KEY_ENV, send_privileged=True, timeout_s=30
            )
        )
        res = arm_episode(backend, panda_kin, policy, writer=RunWriter(tmp_path, video_fps=None)).run(0)
    assert res.success and res.end_reason == "success" and res.policy == "openai:expert"
    turns = _turns(tmp_path)
    assert len(turns) == res.turns == len(res.latencies_s)
    for t in turns:
        assert t["latency_s"] > 0 and t["usage"]["total_tokens"] > t["usage"]["prompt_tokens"] > 0
        assert t["policy_info"]["attempts"][0]["attempt"] == 1 and t["policy_info"]["retries"] == 0
        assert t["context_tokens"] == t["usage"]["total_tokens"]
    assert res.prompt_tokens == sum(t["usage"]["prompt_tokens"] for t in turns)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["latency_median_s"] > 0 and summary["mode"] == "paused"
    assert _grep_secret(tmp_path) == []


def test_reasoning_field_is_logged_and_action_still_parsed(blind_backend, panda_kin, tmp_path) -> None:
    with serve_in_thread(reasoning_field=True) as url:
        policy = OpenAIPolicy(ModelSettings(model="m", base_url=url, send_privileged=True))
        res = arm_episode(
            blind_backend, panda_kin, policy, EpisodeConfig(max_turns=2), RunWriter(tmp_path, None)
        ).run(1)
    assert res.end_reason == "turn_limit" and res.turns == 2
    for t in _turns(tmp_path):
        assert t["policy_info"]["reasoning"] and "```json" in t["reply"] and t["action"]


def test_serve_without_privileged_facts_is_a_clear_error(blind_backend, panda_kin) -> None:
    with serve_in_thread() as url:
        policy = OpenAIPolicy(ModelSettings(model="m", base_url=url, backoff_s=0.01))
        res = arm_episode(blind_backend, panda_kin, policy).run(0)
    assert res.end_reason == "policy_error" and res.turns == 0  # no reply: not a turn
    assert "HTTP 400" in res.detail and "--send-privileged" in res.detail
    assert res.retries == 0  # a 400 is not retried


@pytest.mark.parametrize(
    ("mode", "expect", "retried"),
    [
        ("500", "HTTP 500", True),
        ("429", "HTTP 429", True),
        ("hang", "timeout", True),
        ("garbage", "malformed response", False),
        ("badjson", "malformed response", False),
    ],
)
def test_misbehaving_server_ends_episode_cleanly(
    blind_backend, panda_kin, tmp_path, mode, expect, retried
) -> None:
    with bad_server() as root:
        BadHandler.calls.clear()
        settings = ModelSettings(
            model="m",
            base_url=f"{root}/{mode}/v1",
            api_key_env=KEY_ENV,
            timeout_s=0.5,
            max_retries=2,
            backoff_s=0.01,
        )
        writer = RunWriter(tmp_path, video_fps=None, secrets=[KEY])
        res = arm_episode(blind_backend, panda_kin, OpenAIPolicy(settings), writer=writer).run(0)
    # a transient fault that outlasted the retries is the endpoint's; a reply that is not
    # a reply at all (a web page, JSON without choices) is final and the policy's
    assert res.end_reason == ("endpoint_error" if retried else "policy_error") and res.turns == 0
    assert not res.success
    assert expect in res.detail and KEY not in res.detail and "SECRET" not in res.detail
    (turn,) = _turns(tmp_path)
    attempts = turn["policy_info"]["attempts"]
    # an empty stream (HTML or plain JSON where events were due) is asked once more unstreamed
    asked_again = len(turn["policy_info"].get("adjustments", []))
    assert asked_again == (0 if retried else 1)
    assert len(attempts) == (3 if retried else 1) == BadHandler.calls[mode] - asked_again
    assert all(a["error"] for a in attempts) and res.retries == len(attempts) - 1
    if retried:
        assert "after 3 attempts" in res.detail and attempts[0]["wait_s"] > 0
    assert _grep_secret(tmp_path) == []


def test_retries_then_success_are_visible(blind_backend, panda_kin, tmp_path) -> None:
    with bad_server() as root:
        BadHandler.calls.clear()
        settings = ModelSettings(model="m", base_url=f"{root}/flaky/v1", max_retries=3, backoff_s=0.01)
        res = arm_episode(
            blind_backend,
            panda_kin,
            OpenAIPolicy(settings),
            EpisodeConfig(max_turns=1),
            RunWriter(tmp_path, None),
        ).run(0)
    assert res.end_reason == "turn_limit" and res.retries == 2
    (turn,) = _turns(tmp_path)
    assert [("error" in a) for a in turn["policy_info"]["attempts"]] == [True, True, False]
    assert "HTTP 503" in turn["policy_info"]["attempts"][0]["error"]
    assert turn["outcome"]["status"] == "reached" and turn["usage"]["total_tokens"] == 15


def test_dead_endpoint_is_an_endpoint_error(blind_backend, panda_kin) -> None:
    from tests.servers import free_port

    settings = ModelSettings(
        model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=1, backoff_s=0.01
    )
    res = arm_episode(blind_backend, panda_kin, OpenAIPolicy(settings)).run(0)
    assert res.end_reason == "endpoint_error" and "cannot reach" in res.detail and res.retries == 1


def test_token_budget_from_server_usage(backend, panda_kin) -> None:
    with serve_in_thread() as url:
        policy = OpenAIPolicy(ModelSettings(model="m", base_url=url, send_privileged=True))
        res = arm_episode(backend, panda_kin, policy, EpisodeConfig(max_context_tokens=2500)).run(0)
    assert res.end_reason == "context_budget" and 1 <= res.turns < 8
    assert res.last_total_tokens > 0 and "exceeds 2500" in res.detail


def test_missing_key_variable_is_named() -> None:
    with pytest.raises(ValueError, match="PEAR_NO_SUCH_KEY"):
        OpenAIPolicy(ModelSettings(model="m", api_key_env="PEAR_NO_SUCH_KEY"))


def _conversation(turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "sys"}]
    for i in range(turns):
        msgs.append(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"turn {i}"},
                    {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{i}"}, "_tokens": 9},
                ],
            }
        )
        msgs.append({"role": "assistant", "content": f"reply {i}"})
    return msgs


def test_keep_last_images_replaces_older_ones_with_a_placeholder() -> None:
    msgs = _conversation(3)
    full = strip_images(msgs, None)
    assert sum(c["type"] == "image_url" for m in full[1:] if m["role"] == "user" for c in m["content"]) == 3
    assert all("_tokens" not in c for m in full if isinstance(m["content"], list) for c in m["content"])
    kept = strip_images(msgs, 1)
    # a message left with text only is sent as one string (string-only chat templates)
    kinds = [
        m["content"] if isinstance(m["content"], str) else [c["type"] for c in m["content"]] for m in kept
    ]
    assert kinds[1] == "turn 0\n[image omitted to save context]" and kinds[3].startswith(
        "turn 1\n[image omitted"
    )
    assert kinds[5] == ["text", "image_url"]
    assert [m["role"] for m in kept] == [m["role"] for m in msgs]  # nothing dropped: history stays aligned
    none = strip_images(msgs, 0)
    assert all(isinstance(m["content"], str) for m in none)


def test_think_blocks_and_reasoning_fields_are_split_off() -> None:
    content, reasoning = split_reasoning(SimpleNamespace(content="<think>hmm</think>ok {}", model_extra={}))
    assert content == "<think>hmm</think>ok {}" and reasoning == "hmm"
    msg = SimpleNamespace(content=None, model_extra={"reasoning_content": "deep"})
    assert split_reasoning(msg) == ("", "deep")


@pytest.mark.parametrize("mode", ["ctx-vllm", "ctx-llamacpp"])
def test_server_context_overflow_ends_the_episode_as_context_budget(blind_backend, panda_kin, mode) -> None:
    """vLLM's and llama.cpp's own words for a full context end the episode as context_budget."""
    with bad_server() as root:
        settings = ModelSettings(model="m", base_url=f"{root}/{mode}/v1", backoff_s=0.01)
        res = arm_episode(blind_backend, panda_kin, OpenAIPolicy(settings)).run(0)
    assert res.end_reason == "context_budget" and res.turns == 0 and res.retries == 0
    assert "context" in res.detail and "\n" not in res.detail
