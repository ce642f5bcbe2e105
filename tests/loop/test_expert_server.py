"""`pear-agent serve`: an OpenAI-compatible endpoint answered by the scripted expert."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from pear_agent.loop.registry import make_backend
from pear_agent.protocol.actions import parse_reply
from tests.servers import free_port, post_json, serve_in_thread

pytestmark = pytest.mark.wallclock


def _post(url: str, body: dict) -> tuple[int, dict]:
    return post_json(url + "/chat/completions", body, timeout_s=10)


@pytest.fixture(scope="module")
def facts(panda):
    be = make_backend("pick_cube", panda, render=False)
    try:
        obs = be.reset(0)
    finally:
        be.close()
    from pear_agent.protocol.state import robot_state
    from pear_agent.robot.kinematics import Kinematics

    state = {k: v.to_json() for k, v in robot_state(obs, Kinematics(panda)).items()}
    return {"task": "pick_cube", "state": state, "facts": obs.privileged}


def test_answers_with_a_valid_action_and_usage(panda, facts) -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Turn 1"}]}]
    with serve_in_thread() as url:
        status, body = _post(
            url, {"model": "x", "messages": msgs, "pear_privileged": json.loads(json.dumps(facts))}
        )
    assert status == 200 and body["object"] == "chat.completion"
    text = body["choices"][0]["message"]["content"]
    assert "arm" in parse_reply(text, panda).parts
    assert (
        body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"model": "x", "messages": []}, "--send-privileged"),
        ({"model": "x"}, "'messages'"),
        (
            {"messages": [], "pear_privileged": {"task": "fly", "state": {}, "facts": {}}},
            "no scripted expert for task 'fly'",
        ),
        ({"messages": [], "pear_privileged": {"task": "pick_cube"}}, "malformed pear_privileged.state"),
        (
            {
                "messages": [],
                "pear_privileged": {"task": "pick_cube", "state": {}, "facts": {}, "max_chunk": 0},
            },
            "malformed pear_privileged.max_chunk",
        ),
        (
            {"messages": [], "pear_privileged": {"task": "pick_cube", "state": {}, "facts": {}, "k": 2}},
            "malformed pear_privileged.k",
        ),
    ],
)
def test_bad_requests_get_a_400_that_says_why(body, needle) -> None:
    with serve_in_thread() as url:
        status, resp = _post(url, body)
    assert status == 400 and needle in resp["error"]["message"]


def test_cli_serve_starts_and_lists_its_model() -> None:
    port = free_port()
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pear_agent", "serve", "--port", str(port), "--latency", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                    models = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "serve did not come up"
                time.sleep(0.2)
        assert models["data"][0]["id"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "--send-privileged" in proc.stdout.read().decode()


def test_cli_serve_rejects_negative_latency() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "pear_agent", "serve", "--latency", "-1"], capture_output=True, text=True
    )
    assert r.returncode == 2 and "--latency must be >= 0" in r.stderr and "Traceback" not in r.stderr


def test_a_roadster_briefing_is_answered_without_privileged_facts() -> None:
    from sim_adapters.roadster.environment import RoadsterEnvironment

    env = RoadsterEnvironment("roadster_kickflip", "light", render=False)
    env.reset(20000)
    msgs = [{"role": "system", "content": env.system_prompt()}, env.observe(1, 10, None).message]
    with serve_in_thread() as url:
        status, body = _post(url, {"model": "x", "messages": msgs})
    assert status == 200
    env.parse(body["choices"][0]["message"]["content"])  # a valid roadster command


@pytest.mark.parametrize("reasoning_field", [False, True])
def test_streamed_answer_matches_the_unstreamed_one(panda, facts, reasoning_field: bool) -> None:
    """The real `openai` client reads the server-sent chunks as it would vLLM's."""
    import openai

    msgs = [{"role": "user", "content": "Turn 1"}]
    extra = {"pear_privileged": json.loads(json.dumps(facts))}
    with serve_in_thread(reasoning_field=reasoning_field) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        whole = client.chat.completions.create(model="x", messages=msgs, extra_body=extra)
        stream = client.chat.completions.create(
            model="x", messages=msgs, extra_body=extra, stream=True, stream_options={"include_usage": True}
        )
        content, reasoning, finish, usage, chunks = [], [], None, None, 0
        for chunk in stream:
            chunks += 1
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                content.append(choice.delta.content or "")
                reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
                finish = choice.finish_reason or finish
    text = "".join(content)
    assert chunks > 3 and finish == "stop" and text == whole.choices[0].message.content
    assert usage is not None and usage.total_tokens == whole.usage.total_tokens
    assert bool("".join(reasoning)) is reasoning_field
    assert "arm" in parse_reply(text, panda).parts


def test_the_served_expert_backs_off_a_third_identical_failed_move(panda, facts) -> None:
    """The served expert reads the conversation as the in-process one does: after its own move
    came back blocked twice in a row, the third request for it gets a back-off instead."""
    priv = json.loads(json.dumps(facts))
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Turn 1 of 25."}]}]
    with serve_in_thread() as url:
        _, first = _post(url, {"model": "x", "messages": msgs, "pear_privileged": priv})
        reply = first["choices"][0]["message"]["content"]
        blocked = {"role": "user", "content": "Turn 2 of 25.\nLast action: blocked: arm stopped short"}
        for _ in range(2):
            msgs += [{"role": "assistant", "content": reply}, blocked]
        _, third = _post(url, {"model": "x", "messages": msgs, "pear_privileged": priv})
    text = third["choices"][0]["message"]["content"]
    assert text.startswith("I back off") and parse_reply(text, panda).parts["arm"].position_cm[2] > 0
    assert text != reply


@pytest.mark.parametrize("task_success", [False, True])
def test_the_served_expert_claims_done_only_when_the_task_agrees(panda, facts, task_success: bool) -> None:
    priv = json.loads(json.dumps(facts))
    priv["facts"]["object"]["position_cm"][2] = -290.0  # on the floor: the expert stops
    priv["facts"]["task_success"] = task_success
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Turn 3 of 25."}]}]
    with serve_in_thread() as url:
        _, body = _post(url, {"model": "x", "messages": msgs, "pear_privileged": priv})
    text = body["choices"][0]["message"]["content"]
    assert parse_reply(text, panda).done is task_success
    assert ("I cannot finish the task" in text) is not task_success
