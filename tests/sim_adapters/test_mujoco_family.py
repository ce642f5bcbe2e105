"""The MuJoCo family: backends of one scene in a process share one renderer (episodes in flight
together hold ~64 MB less each), and a shared renderer draws exactly what a backend's own does."""

import numpy as np
import pytest

from pear_agent.registry import family_of
from pear_agent.robot_config import load_robot
from sim_adapters.mujoco.backend import MujocoBackend
from sim_adapters.mujoco.family import ENTRIES
from sim_adapters.mujoco.tasks import TASKS

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
