"""The scripted pilot behind the real `pear-agent serve` (uvicorn, real HTTP, the real openai
client): paused it lands; on the clock, a server that takes 1 s per reply loses the kickflip."""

import json

import pytest

from pear_agent.cli import main
from tests.servers import serve_in_thread

pytestmark = pytest.mark.wallclock

pytest.importorskip("mujoco")


def run_via_serve(url, tmp_path, capsys, *extra):
    rc = main(["run", "--task", "roadster_kickflip", "--seed", "20001", "--model", "pear-scripted-expert",
               "--base-url", url, "--no-video", "--json", "--runs-dir", str(tmp_path), *extra])  # fmt: skip
    return rc, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_paused_flight_through_serve_lands_like_the_in_process_pilot(tmp_path, capsys):
    with serve_in_thread() as url:
        rc, via_http = run_via_serve(url, tmp_path / "http", capsys)
    main(["run", "--task", "roadster_kickflip", "--seed", "20001", "--no-video", "--json",
          "--runs-dir", str(tmp_path / "local")])  # fmt: skip
    local = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and via_http["success"] and via_http["policy"] == "openai:pear-scripted-expert"
    assert (via_http["turns"], via_http["detail"]) == (local["turns"], local["detail"])
    assert via_http["reward"] == pytest.approx(local["reward"])


def test_realtime_one_second_replies_from_serve_crash_the_kickflip(tmp_path, capsys):
    with serve_in_thread(latency_s=1.0) as url:
        rc, result = run_via_serve(url, tmp_path, capsys, "--realtime")
    assert rc == 1 and not result["success"] and result["end_reason"] == "crashed"
    # the measured decision times (not an injected one) moved the world
    assert result["latency_injected_s"] is None and result["advanced_s"] >= 1.0
    assert min(result["latencies_s"][1:]) >= 1.0
