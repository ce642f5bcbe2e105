import pytest

from pear_agent.rl.curriculum import CurriculumSampler, SuccessTracker


def test_tracker_counts_and_window() -> None:
    tr = SuccessTracker(["a"], window=4)
    assert tr.rate("a") is None
    tr.update("a", [True, True, False, False, False, False])
    s = tr.stats()["a"]
    assert (s.attempts, s.successes) == (6, 2)
    assert s.recent_rate == 0.0  # only the last 4 count
    tr.update("b", [True])
    assert tr.tasks == ["a", "b"] and tr.rate("b") == 1.0


def test_sampler_favours_tasks_strictly_between_0_and_1() -> None:
    tr = SuccessTracker(["solved", "hopeless", "learnable"])
    tr.update("solved", [True] * 8)
    tr.update("hopeless", [False] * 8)
    tr.update("learnable", [True, False] * 4)
    sampler = CurriculumSampler(tr, floor=0.02, seed=1)
    w = sampler.weights()
    assert w == {"solved": 0.02, "hopeless": 0.02, "learnable": 0.25}
    draws = [sampler.sample() for _ in range(600)]
    share = draws.count("learnable") / len(draws)
    assert 0.8 < share < 0.98  # expected 0.25 / 0.29 = 0.86
    assert "solved" in draws and "hopeless" in draws  # the floor keeps them visited


def test_untried_tasks_are_explored_first() -> None:
    tr = SuccessTracker(["new", "mixed"])
    tr.update("mixed", [True, False, False, False])  # p(1-p) = 0.1875
    probs = CurriculumSampler(tr).probabilities()
    assert probs["new"] > probs["mixed"]
    assert sum(probs.values()) == pytest.approx(1.0)


def test_sampler_needs_a_task() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        CurriculumSampler(SuccessTracker())
