"""The study's recipe as the study ran it: storm drawn at twice light's weight (no curriculum
reweighting unless a recipe asks), the pick on storm kickflips, and a second teacher behind an
endpoint (`pear-agent serve`, a real server process) whose landed storm and gale kickflips are mixed
into the warm start."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import pytest

from pear_agent.train.config import load_recipe
from pear_agent.train.mix import TaskMix

pytestmark = pytest.mark.wallclock


def _band(task: str) -> str:
    return task.rsplit(":", 1)[1]


def test_storm_is_drawn_at_twice_lights_weight_whatever_the_success_rates():
    recipe = load_recipe("roadster_study")
    assert recipe.grpo.curriculum is False
    mix = TaskMix(recipe.grpo.stages[0].mix, "train", seed=3, curriculum=recipe.grpo.curriculum)
    # the study's warm start: light nearly always lands, storm rarely; no reweighting follows
    for _ in range(40):
        d = mix.draw()
        mix.update(d, [_band(d.task) == "light"] * 4 if _band(d.task) != "gale" else [True, False] * 2)
    p = mix.probabilities()
    by_band = Counter()
    for e, pe in zip(recipe.grpo.stages[0].mix, p, strict=True):
        by_band[_band(e.task)] += pe
    assert by_band["storm"] == pytest.approx(2 * by_band["light"], rel=1e-9)
    drawn = Counter(_band(mix.draw().task) for _ in range(3000))
    assert drawn["storm"] / drawn["light"] == pytest.approx(2.0, rel=0.15)
    # what the reweighting would do at the same rates (why it is off): storm far above double
    cur = TaskMix(recipe.grpo.stages[0].mix, "train", seed=3, curriculum=True)
    for entry_i, e in enumerate(recipe.grpo.stages[0].mix):
        band = _band(e.task)
        rate = {
            "light": [True] * 31 + [False],
            "gale": [True, False] * 16,
            "storm": [True] * 8 + [False] * 24,
        }
        cur.tracker.update(cur.key(entry_i), rate[band])
    pc = cur.probabilities()
    storm = sum(x for e, x in zip(recipe.grpo.stages[0].mix, pc, strict=True) if _band(e.task) == "storm")
    light = sum(x for e, x in zip(recipe.grpo.stages[0].mix, pc, strict=True) if _band(e.task) == "light")
    assert storm / light > 5  # reweighted by p(1 - p): far from the written 2


def test_pick_flies_storm_kickflips_for_the_study():
    from pear_agent.train.evaluate import eval_draws

    draws = eval_draws(load_recipe("roadster_study"), "val")
    assert len(draws) == 32 and {d.task for d in draws} == {"roadster_kickflip:storm"}
    assert all(10_000 <= d.seed < 11_000 for d in draws)
    cpu = eval_draws(load_recipe("roadster_study", "cpu"), "val")
    assert {d.task for d in cpu} == {"roadster_ramp_flip:light"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served_teacher():
    """`pear-agent serve` (the scripted pilot behind an OpenAI-compatible endpoint) as a real process."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pear_agent", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    model = json.loads(r.read())["data"][0]["id"]
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "pear-agent serve did not come up"
                time.sleep(0.3)
        yield url, model
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_served_second_teacher_lands_storm_and_gale_kickflips_into_the_warm_start(served_teacher, tmp_path):
    from pear_agent.rl.trajectories import load_trajectories
    from pear_agent.train.data import load_examples
    from pear_agent.train.teacher import collect_teacher

    url, model = served_teacher
    recipe = load_recipe("roadster_study")
    strong = tmp_path / "teacher-strong"
    summary = collect_teacher(recipe, strong, episodes=4, base_url=url, model=model)
    assert summary["teacher"] == f"{model} at {url}" and summary["flown"] == 4
    recs = load_trajectories(strong)
    assert 1 <= len(recs) == summary["written"] <= 4
    assert all(r.success for r in recs)  # landed flights only
    assert {_band(r.task) for r in recs} <= {"gale", "storm"}
    assert all(r.task.startswith("roadster_kickflip:") and 0 <= r.seed < 10_000 for r in recs)
    flown = {t for t in summary["tasks"]}
    assert flown <= {"roadster_kickflip:gale", "roadster_kickflip:storm"}
    scripted = tmp_path / "teacher-roadster"
    light = load_recipe("roadster_study", sets=["teacher.mix=[{task: 'roadster_ramp_flip:light'}]"])
    collect_teacher(light, scripted, episodes=2)
    # the warm start reads both folders, as the recipe's sft.data names them
    examples = load_examples([str(scripted), str(strong)])
    tasks = Counter(e.task.split(":")[0] for e in examples)
    assert tasks["roadster_ramp_flip"] >= 1 and tasks["roadster_kickflip"] == len(recs)
    with pytest.raises(ValueError, match="both --base-url and --model"):
        collect_teacher(recipe, tmp_path / "x", base_url=url)
