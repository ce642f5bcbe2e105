"""The scripted expert must solve each task on >= 90% of seeds 0-49 (the baseline's contract)."""

import math

import pytest

from pear_agent.episode import Episode
from pear_agent.policies.experts import wrap
from pear_agent.policies.scripted import ScriptedPolicy
from pear_agent.registry import make_backend
from tests.policies.rates import expert_success_rate

SEEDS = range(50)


@pytest.mark.parametrize("task", ["pick_cube", "place_in_bowl", "push_to_target"])
def test_expert_success_rate(panda, panda_kin, task: str) -> None:
    rate, failures = expert_success_rate(task, panda, panda_kin, SEEDS)
    assert rate >= 0.9, failures


def test_noisy_expert_replies_differ_but_parse(panda, panda_kin) -> None:
    backend = make_backend("pick_cube", panda, render=False)
    try:
        a = Episode(backend, panda_kin, ScriptedPolicy("pick_cube", action_noise_cm=1.0, seed=1))
        b = Episode(backend, panda_kin, ScriptedPolicy("pick_cube", action_noise_cm=1.0, seed=2))
        a.run(0)
        b.run(0)
    finally:
        backend.close()
    replies_a = [m["content"] for m in a.messages if m["role"] == "assistant"]
    replies_b = [m["content"] for m in b.messages if m["role"] == "assistant"]
    assert replies_a != replies_b


def test_wrap() -> None:
    assert abs(abs(float(wrap(3 * math.pi))) - math.pi) < 1e-6  # wraps onto +-pi
    assert float(wrap(-2.5 * math.pi)) == pytest.approx(-0.5 * math.pi)
    assert float(wrap(0.5)) == pytest.approx(0.5)
