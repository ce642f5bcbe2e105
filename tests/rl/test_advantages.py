import numpy as np
import pytest

from pear_agent.rl.advantages import FilterCounts, classify_group, filter_groups, group_advantages


def test_one_success_in_four_by_hand() -> None:
    # mean 0.25; sample std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5
    adv = group_advantages([1, 0, 0, 0], eps=0.0)
    assert np.allclose(adv, [1.5, -0.5, -0.5, -0.5])
    # population std sqrt(0.1875) = 0.4330127
    assert np.allclose(
        group_advantages([1, 0, 0, 0], eps=0.0, ddof=0), [1.7320508, -0.5773503, -0.5773503, -0.5773503]
    )


def test_half_successes_and_epsilon_by_hand() -> None:
    # mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.5773503; eps = 0.1 widens the denominator
    adv = group_advantages([1, 1, 0, 0], eps=0.1)
    assert np.allclose(adv, [0.5 / 0.6773503, 0.5 / 0.6773503, -0.5 / 0.6773503, -0.5 / 0.6773503])
    assert adv.sum() == pytest.approx(0.0)


def test_shaped_rewards_by_hand() -> None:
    # rewards 0, 1, 2: mean 1, sample std 1
    assert np.allclose(group_advantages([0.0, 1.0, 2.0], eps=0.0), [-1.0, 0.0, 1.0])


def test_uniform_groups_have_zero_advantage_and_are_classified() -> None:
    assert np.allclose(group_advantages([1, 1, 1, 1]), 0.0)
    assert np.allclose(group_advantages([0, 0, 0]), 0.0)
    assert np.allclose(group_advantages([1.0]), 0.0)  # a group of one has no spread
    assert classify_group([1, 1, 1, 1]) == "all_success"
    assert classify_group([0, 0, 0, 0]) == "all_failure"
    assert classify_group([0.5, 0.5]) == "all_equal"
    assert classify_group([0, 1, 0, 0]) == "kept"


def test_filter_keeps_only_groups_with_signal_and_counts_the_rest() -> None:
    groups = [[1, 1, 1, 1], [0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0]]
    kept, counts = filter_groups(groups, eps=0.0)
    assert [i for i, _ in kept] == [1, 3]
    assert np.allclose(kept[0][1], [-0.5, 1.5, -0.5, -0.5])
    assert np.allclose(kept[1][1], [0.5, 0.5, -1.5, 0.5])
    assert counts.to_json() == {
        "sampled": 5,
        "kept": 2,
        "dropped": 3,
        "dropped_all_success": 1,
        "dropped_all_failure": 2,
        "dropped_all_equal": 0,
        "dropped_policy_error": 0,
    }


def test_bad_group_shape_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="1-D list of rewards"):
        group_advantages([])
    assert FilterCounts().dropped_total == 0
