"""The client's reading of real servers' answers, and what it sends (no simulator here)."""

from types import SimpleNamespace

import pytest

from pear_agent.policies import model_settings as ms
from pear_agent.policies import openai_client as oc
from pear_agent.policies.openai_wire import (
    clean_line,
    dropped_prompt_warning,
    error_body_text,
    is_context_error,
    output_room,
    response_format,
    window_from_models,
    window_from_props,
    wire_messages,
)
from tests.servers import LLAMACPP_CONTEXT, VLLM_CONTEXT, BadHandler, bad_server, vllm_max_tokens_error

pytestmark = pytest.mark.wallclock

SCHEMA = {"type": "object", "properties": {"action": {"type": "object"}}, "required": ["action"]}
SYSTEM = "You control a robot arm. " * 60


@pytest.fixture(autouse=True)
def fresh_server_facts():
    """Each test meets its servers anew (the client remembers what a server supports per process)."""
    oc._SERVER_FACTS.clear()
    BadHandler.calls.clear()
    BadHandler.requests.clear()
    BadHandler.generations.clear()
    yield
    oc._SERVER_FACTS.clear()


def ctx(schema=SCHEMA):
    return SimpleNamespace(turn=1, task="t", state={}, observation=None, response_schema=schema)


def messages(images: bool = False):
    user = [{"type": "text", "text": "Turn 1. State: " + '{"arm": {"position": [1, 2, 3]}} ' * 20}]
    if images:
        user.append({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}})
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def policy(root: str, mode: str, **kw) -> oc.OpenAIPolicy:
    return oc.OpenAIPolicy(ms.ModelSettings(model="m", base_url=f"{root}/{mode}/v1", backoff_s=0.01, **kw))


def test_context_errors_of_each_server_are_recognised() -> None:
    assert is_context_error(400, VLLM_CONTEXT["error"]["message"])
    assert is_context_error(400, LLAMACPP_CONTEXT["error"]["message"], "400 exceed_context_size_error")
    llama_py = (
        "This model's maximum context length is 512 tokens. However, you requested 900 tokens "
        "(890 in the messages, 10 in the completion). Please reduce the length of the messages or completion."
    )
    assert is_context_error(400, llama_py, "context_length_exceeded invalid_request_error")
    assert not is_context_error(400, "Invalid API key") and not is_context_error(500, llama_py)
    room = vllm_max_tokens_error(32768, 4096, 1000)["error"]["message"]
    assert output_room(room) == 3096 and output_room(VLLM_CONTEXT["error"]["message"]) is None


def test_error_bodies_become_one_clean_line() -> None:
    assert error_body_text({"detail": "Invalid API key"}) == "Invalid API key"
    assert error_body_text({"error": {"message": "boom"}}) == "boom"
    assert error_body_text(None, "<html>") == "<html>"
    line = clean_line(
        'Traceback (most recent call last):\n  File "/a/b/c.py", line 3, in f\n  x\nValueError: no'
    )
    assert "\n" not in line and "/a/b" not in line and "ValueError: no" in line


def test_messages_without_images_are_sent_as_strings() -> None:
    out = wire_messages(messages(images=False), None)
    assert all(isinstance(m["content"], str) for m in out)
    assert out[1]["content"].startswith("Turn 1. State:")
    with_images = wire_messages(messages(images=True), None)
    assert isinstance(with_images[1]["content"], list)
    # images dropped by --keep-images 0: the message has only text left, so it becomes a string
    assert isinstance(wire_messages(messages(images=True), 0)[1]["content"], str)


def test_response_format_dialects() -> None:
    assert response_format("json_schema", SCHEMA)["json_schema"]["schema"] == SCHEMA
    assert response_format("json_object", SCHEMA) == {"type": "json_object", "schema": SCHEMA}
    with pytest.raises(ValueError, match="unknown structured-output dialect"):
        response_format("grammar", SCHEMA)


def test_server_windows() -> None:
    assert window_from_models({"data": [{"id": "m", "max_model_len": 8192}]}, "m") == 8192
    assert window_from_models({"data": [{"id": "other", "max_model_len": 8192}, {"id": "m"}]}, "m") is None
    assert window_from_props({"default_generation_settings": {"n_ctx": 2048}}) == 2048
    assert dropped_prompt_warning(7, wire_messages(messages(), None))
    assert dropped_prompt_warning(900, wire_messages(messages(), None)) is None


def test_stream_records_time_to_first_token_and_usage() -> None:
    with bad_server() as root:
        reply = policy(root, "ok").act(messages(), ctx())
    assert reply.error is None and '"action"' in reply.text
    info = reply.info
    assert info["streamed"] and 0 < info["ttft_s"] <= reply.latency_s <= info["decision_s"]
    assert reply.usage["prompt_tokens"] == 10
    (_, body) = BadHandler.requests[-1]
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == ms.DEFAULT_MAX_TOKENS and "response_format" not in body


def test_slow_generation_is_abandoned_at_the_timeout_not_retried_in_realtime() -> None:
    """The stream is closed at the deadline: the server sees the client leave and stops; no retry
    queues behind it (realtime default)."""
    with bad_server() as root:
        p = policy(root, "slow", timeout_s=0.6, retry_timeouts=False)
        reply = p.act(messages(), ctx())
        assert "timeout" in reply.error and len(reply.info["attempts"]) == 1
        assert BadHandler.calls["slow"] == 1
        for _ in range(100):  # the server notices on its next write
            if BadHandler.generations[0]["ended"]:
                break
            import time

            time.sleep(0.05)
    (gen,) = BadHandler.generations
    assert gen["client_left"] and gen["tokens"] < oc_slow_tokens()
    assert reply.latency_s == 0.0 and reply.info["decision_s"] < 5


def test_a_silent_stream_is_closed_at_the_deadline() -> None:
    with bad_server() as root:
        reply = policy(root, "stall", timeout_s=0.5, retry_timeouts=False).act(messages(), ctx())
    assert "timeout" in reply.error and reply.info["decision_s"] < 3  # not the server's 10 s


def oc_slow_tokens() -> int:
    from tests.servers import SLOW_TOKENS

    return SLOW_TOKENS


def test_paused_mode_retries_a_timeout_after_the_stream_is_closed() -> None:
    with bad_server() as root:
        reply = policy(root, "slow", timeout_s=0.4, max_retries=1).act(messages(), ctx())
    assert "after 2 attempts" in reply.error and len(reply.info["attempts"]) == 2
    # never two generations at once: the first had ended before the retry began
    first, second = BadHandler.generations
    assert first["client_left"] and first["ended"] <= second["started"] + 0.2


@pytest.mark.parametrize("mode", ["ctx-vllm", "ctx-llamacpp", "ctx-llamapy"])
def test_context_errors_end_as_context_budget_without_retry(mode) -> None:
    with bad_server() as root:
        reply = policy(root, mode).act(messages(), ctx())
    assert reply.info["end_reason"] == "context_budget" and len(reply.info["attempts"]) == 1
    asked_again = 1 if mode == "ctx-llamapy" else 0  # its empty stream is asked once more unstreamed
    assert len(reply.info.get("adjustments", [])) == asked_again
    assert "context" in reply.error and BadHandler.calls[mode] == 1 + asked_again


def test_vllm_window_and_max_tokens_room() -> None:
    with bad_server() as root:
        p = policy(root, "vllm")
        assert p.context_window() == 4096
        reply = p.act(messages(), ctx())
    assert reply.error is None and reply.info["adjustments"][0]["status"] == 400
    assert "lowered" in reply.info["adjustments"][0]["adjusted"] and reply.info["retries"] == 0
    sent = [b["max_tokens"] for _, b in BadHandler.requests]
    assert sent[0] == ms.DEFAULT_MAX_TOKENS and sent[-1] < 4096


def test_llamacpp_window_from_props() -> None:
    with bad_server() as root:
        assert policy(root, "llamacpp").context_window() == 2048
        assert policy(root, "ok").context_window() is None  # reports none: the default budget applies


@pytest.mark.parametrize(
    ("mode", "expect", "tries"),
    [("401", "HTTP 401: Invalid API key", 1), ("trace500", "HTTP 500: ", 3), ("500", "HTTP 500", 3)],
)
def test_error_bodies_are_kept_clean_and_4xx_not_retried(mode, expect, tries, monkeypatch) -> None:
    monkeypatch.setenv("PEAR_TEST_KEY", "sk-test-SECRET123456")
    with bad_server() as root:
        reply = policy(root, mode, api_key_env="PEAR_TEST_KEY", max_retries=2).act(messages(), ctx())
    assert reply.error.startswith(expect) and len(reply.info["attempts"]) == tries
    assert "SECRET" not in reply.error and "/srv/venv" not in reply.error and "\n" not in reply.error
    # a 5xx that outlasted the retries is the endpoint's failure; a 401 ends as the policy's
    assert reply.info.get("end_reason") == ("endpoint_error" if tries > 1 else None)


def test_server_that_refuses_streams_gets_whole_replies() -> None:
    with bad_server() as root:
        p = policy(root, "nostream")
        first = p.act(messages(), ctx())
        second = p.act(messages(), ctx())
    assert first.error is None and not first.info["streamed"] and first.info["retries"] == 0
    assert "does not stream" in first.info["adjustments"][0]["adjusted"]
    assert "adjustments" not in second.info and BadHandler.calls["nostream"] == 3  # remembered


@pytest.mark.parametrize(("mode", "dialect"), [("llamaschema", "json_object"), ("vllmschema", "json_schema")])
def test_structured_output_auto_probes_once_and_sends_the_schema(mode, dialect, capsys) -> None:
    with bad_server() as root:
        p = policy(root, mode, structured_output="auto")
        p.act(messages(), ctx())
        p.act(messages(), ctx())
    assert f"auto chose {dialect}" in capsys.readouterr().err
    real = [b for _, b in BadHandler.requests if b.get("stream")]
    assert len(real) == 2
    for body in real:
        fmt = body["response_format"]
        assert fmt["type"] == dialect
        assert (fmt["json_schema"]["schema"] if dialect == "json_schema" else fmt["schema"]) == SCHEMA
    probes = [b for _, b in BadHandler.requests if not b.get("stream")]
    assert len(probes) == (2 if dialect == "json_object" else 1)  # once, not per decision


def test_dropped_prompt_is_warned_in_log_and_console(capsys) -> None:
    """A string-only template (list content and system message dropped) counted 7 tokens."""
    with bad_server() as root:
        listy = policy(root, "listdrop").act(messages(images=True), ctx())
        stringy = policy(root, "listdrop").act(messages(images=False), ctx())
    assert "its chat template probably dropped" in listy.info["warnings"][0]
    assert "its chat template probably dropped" in capsys.readouterr().err
    # the same text sent as a string: the template keeps the user turn (only the system message goes)
    assert stringy.usage["prompt_tokens"] > listy.usage["prompt_tokens"] + 100


def test_settings_from_args_realtime_does_not_retry_timeouts() -> None:
    import argparse

    from pear_agent.cli.loop_options import add_clock_args, model_settings_from_args

    p = argparse.ArgumentParser()
    ms.add_model_args(p)
    add_clock_args(p)
    args = p.parse_args(["--model", "m", "--realtime", "--structured-output", "auto"])
    s = model_settings_from_args(args)
    assert ms.settings_from_args(args, realtime=True) == s
    assert not s.retry_timeouts and s.structured_output == "auto" and s.max_tokens == ms.DEFAULT_MAX_TOKENS
    assert ms.settings_from_args(p.parse_args(["--model", "m"])).retry_timeouts
    with pytest.raises(ValueError, match="needs --model"):
        ms.settings_from_args(p.parse_args(["--structured-output", "auto"]))
    with pytest.raises(ValueError, match="not both"):
        ms.settings_from_args(
            p.parse_args(
                ["--model", "m", "--structured-output", "auto", "--extra-body", '{"response_format": {}}']
            )
        )


def test_context_budget_defaults_to_the_servers_window() -> None:
    import argparse

    from pear_agent.cli.loop_options import DEFAULT_CONTEXT_TOKENS, add_clock_args, clock_from_args

    p = argparse.ArgumentParser()
    ms.add_model_args(p)
    add_clock_args(p)
    with bad_server() as root:
        vllm = p.parse_args(["--model", "m", "--base-url", f"{root}/vllm/v1"])
        assert clock_from_args(vllm)["max_context_tokens"] == 4096
        silent = p.parse_args(["--model", "m", "--base-url", f"{root}/ok/v1"])
        assert clock_from_args(silent)["max_context_tokens"] == DEFAULT_CONTEXT_TOKENS
        given = p.parse_args(["--model", "m", "--base-url", f"{root}/vllm/v1", "--max-context-tokens", "900"])
        assert clock_from_args(given)["max_context_tokens"] == 900
    assert clock_from_args(p.parse_args([]))["max_context_tokens"] == DEFAULT_CONTEXT_TOKENS


def test_dropped_prompt_warning_names_the_likely_cause() -> None:
    listy = dropped_prompt_warning(7, wire_messages(messages(images=True), None))
    assert "list-form content" in listy and "--observation state" in listy
    stringy = dropped_prompt_warning(50, wire_messages(messages(images=False), None))
    assert "system message" in stringy and "--observation state" not in stringy


def test_decisions_on_one_loop_share_the_endpoints_client_and_its_cap() -> None:
    """Episodes in flight in one worker: one client (one connection pool) per endpoint per loop;
    `max_in_flight` holds a request back until a slot frees (the wait is `queue_s`)."""
    import asyncio

    async def decide(*policies):
        replies = await asyncio.gather(*(p.aact(messages(), ctx()) for p in policies))
        eps = oc.endpoints()
        await oc.aclose_endpoints()
        return replies, eps

    with bad_server() as root:
        (a, b), eps = asyncio.run(decide(policy(root, "ok"), policy(root, "ok", temperature=0.5)))
        assert a.error is None and b.error is None
        assert len(eps) == 1 and eps[0].peak_in_flight == 2  # both open at once, on one client
        capped = [policy(root, "slowish", max_in_flight=1) for _ in range(3)]
        replies, eps = asyncio.run(decide(*capped))
    assert all(r.error is None for r in replies) and eps[0].peak_in_flight == 1
    waits = sorted(r.info["queue_s"] for r in replies)
    assert waits[0] < waits[1] < waits[2] and waits[2] >= 2 * min(r.latency_s for r in replies) * 0.9


def test_max_in_flight_must_be_positive() -> None:
    with pytest.raises(ValueError, match="--max-in-flight must be >= 1"):
        ms.ModelSettings(model="m", max_in_flight=0)
