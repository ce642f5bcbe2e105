"""The MuJoCo family: backends of one scene in a process share one renderer (episodes in flight
together hold ~64 MB less each), and a shared renderer draws exactly what a backend's own does."""

import numpy as np
import pytest

from pear_agent.loop.registry import family_of
from pear_agent.robot.loader import load_robot
from sim_adapters.mujoco.backend import MujocoBackend
from sim_adapters.mujoco.family import task_entries
from sim_adapters.mujoco.tasks import every_robot_tasks

ENTRIES = task_entries()
TASKS = every_robot_tasks()

pytest.importorskip("mujoco")


@pytest.mark.parametrize("task", sorted(ENTRIES))
def test_a_shared_renderer_draws_what_an_own_one_draws(task) -> None:
    robot = load_robot(ENTRIES[task].default_robot)
    shared: dict = {}
    other = MujocoBackend(robot, TASKS[task](), render=True, renderers=shared)
    other.reset(7)  # primes the cache with a renderer built on another backend's model (other seed)
    own = MujocoBackend(robot, TASKS[task](), render=True)
    guest = MujocoBackend(robot, TASKS[task](), render=True, renderers=shared)
    try:
        a, b = own.reset(3), guest.reset(3)
        assert set(a.images) == set(b.images) and a.images
        for cam in a.images:
            assert np.array_equal(a.images[cam], b.images[cam]), cam
        assert guest._renderers is other._renderers and len(shared) == 1
    finally:
        for be in (other, own, guest):
            be.close()
        for r in shared.values():
            r.close()


def test_the_family_shares_one_renderer_cache_per_scene_between_pooled_backends() -> None:
    fam = family_of("pick_cube")
    panda = load_robot("panda")
    a, b = fam.backend("pick_cube", panda, pooled=True), fam.backend("pick_cube", panda, pooled=True)
    c = fam.backend("push_to_target", panda, pooled=True)
    blind = fam.backend("pick_cube", panda, render=False, pooled=True)
    alone = fam.backend("pick_cube", panda)  # built on its own (registry.make_backend): its own renderer
    try:
        a.reset(0)
        b.reset(1)
        c.reset(0)
        assert a._renderers is b._renderers and len(a._renderers) == 1
        assert c._renderers is not a._renderers and blind._renderers is not a._renderers
        assert alone._renderers is not a._renderers
        a.close()  # a backend leaves a shared renderer to the cache: the others still render
        assert b.observe().images["front"].std() > 3
    finally:
        for be in (b, c, blind, alone):
            be.close()


def test_a_perturbed_task_is_named_resolved_and_expanded_by_the_family() -> None:
    import argparse

    fam = family_of("pick_cube~camera")
    assert (
        fam is family_of("pick_cube")
        and fam.resolve("pick_cube", {"perturb": "layout"}) == "pick_cube~layout"
    )
    assert fam.resolve("pick_cube~camera", {"perturb": "layout"}) == "pick_cube~camera"  # the name wins
    bench = argparse.Namespace(perturb="none,camera,layout", robot=None)
    assert fam.expand("push_to_target", bench) == [
        "push_to_target",
        "push_to_target~camera",
        "push_to_target~layout",
    ]
    assert fam.expand("push_to_target", argparse.Namespace(perturb=None)) == ["push_to_target"]
    with pytest.raises(ValueError, match=r"unknown perturbation 'fog'.*camera, lighting"):
        fam.expand("pick_cube", argparse.Namespace(perturb="fog"))
    with pytest.raises(ValueError, match="unknown perturbation 'fog'"):
        fam.resolve("pick_cube~fog", {})
    assert fam.entry("pick_cube~noise") is ENTRIES["pick_cube"]
    assert fam.has_default_policy("pick_cube~layout")


def test_a_perturbed_backend_keeps_its_own_renderer_and_names_its_task() -> None:
    fam = family_of("pick_cube")
    panda = load_robot("panda")
    plain = fam.backend("pick_cube", panda, pooled=True)
    moved = fam.backend("pick_cube~camera", panda, pooled=True)
    try:
        a, b = plain.reset(3), moved.reset(3)
        # its model's camera moved this episode: a renderer built on another model would not show it
        assert moved._renderers is not plain._renderers
        assert moved.task.name == "pick_cube~camera" and plain.task.name == "pick_cube"
        assert moved.perturbation["dimension"] == "camera"
        assert np.abs(a.images["front"].astype(int) - b.images["front"].astype(int)).mean() > 2
    finally:
        plain.close()
        moved.close()


def test_bench_perturb_runs_one_task_per_perturbation_and_records_it(tmp_path, capsys) -> None:
    import json

    from pear_agent.cli import main

    out = tmp_path / "bench"
    argv = ["bench", "--tasks", "pick_cube", "--perturb", "none,layout", "--seeds", "4", "--no-video"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task"] for r in lines) == ["pick_cube", "pick_cube~layout"]
    (pert,) = [r for r in lines if r["task"] == "pick_cube~layout"]
    assert pert["perturbation"]["dimension"] == "layout" and pert["perturbation"]["mirrored"] is True
    assert "pick_cube~layout" in capsys.readouterr().out


def test_pooled_backends_of_another_thread_get_their_own_renderer() -> None:
    """A GL context is current in the thread that made it: skyrl-gym runs each episode in a thread
    of its own while `pear-agent run` renders in the main one; sharing one renderer between them
    failed with EGL_BAD_ACCESS."""
    import threading

    fam = family_of("pick_cube")
    panda = load_robot("panda")
    built: dict = {}

    def in_thread() -> None:
        be = fam.backend("pick_cube", panda, pooled=True)
        built["images"] = be.reset(0).images
        built["cache"] = be._renderers
        built["backend"] = be

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    main = fam.backend("pick_cube", panda, pooled=True)
    try:
        assert main._renderers is not built["cache"]
        assert np.array_equal(main.reset(0).images["front"], built["images"]["front"])
    finally:
        main.close()
        built["backend"].close()
