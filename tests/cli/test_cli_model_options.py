"""`pear-agent run` with a model endpoint and the realtime clock, through the real CLI."""

import json
import os
import subprocess
import sys

import pytest

from tests.servers import serve_in_thread

pytestmark = pytest.mark.wallclock


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", "run", "--no-video", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--latency", "2"], "--latency needs --realtime"),
        (["--model", "m", "--extra-body", "{bad"], "--extra-body is not valid JSON"),
        (["--base-url", "http://x/v1"], "--base-url needs --model"),
        (["--model", "m", "--api-key-env", "PEAR_UNSET_VAR"], "PEAR_UNSET_VAR"),
    ],
)
def test_bad_options_are_one_line(args, message, tmp_path) -> None:
    r = _run("--runs-dir", str(tmp_path), *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_run_against_serve_with_a_key_that_never_shows(tmp_path) -> None:
    key = "sk-test-SECRET123456"
    with serve_in_thread() as url:
        r = _run(
            *("--runs-dir", str(tmp_path), "--model", "expert", "--base-url", url, "--send-privileged"),
            *("--api-key-env", "PEAR_TEST_KEY", "--realtime", "--json"),
            env=os.environ | {"PEAR_TEST_KEY": key},
        )
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)
    assert summary["success"] and summary["mode"] == "realtime" and summary["policy"] == "openai:expert"
    assert summary["advanced_s"] > 0 and summary["prompt_tokens"] > 0
    assert "SECRET123456" not in r.stdout + r.stderr
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and b"SECRET123456" in p.read_bytes()]


def test_realtime_latency_run_reports_its_mode(tmp_path) -> None:
    r = _run(
        "--runs-dir",
        str(tmp_path),
        "--task",
        "conveyor_pick",
        "--realtime",
        "--latency",
        "2",
        "--max-turns",
        "4",
    )
    assert r.returncode == 1 and "/ realtime (+2 s per decision)" in r.stdout and "Traceback" not in r.stderr
