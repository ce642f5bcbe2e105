from pear_agent.robot.motion import SettleJudge


def _judge() -> SettleJudge:
    return SettleJudge(duration_s=1.0, reach_tolerance_rad=0.01, settle_timeout_s=2.0)


def test_nothing_is_decided_during_the_planned_motion() -> None:
    assert _judge().verdict(0.5, {"arm": 0.0}, still=True) is None


def test_on_target_and_still_is_reached() -> None:
    j = _judge()
    assert j.verdict(1.0, {"arm": 0.02}, still=False) is None
    assert j.verdict(1.1, {"arm": 0.005}, still=True) == ("reached", None)


def test_still_short_of_target_is_blocked_after_a_moment() -> None:
    j = _judge()
    errors = {"left": 0.001, "right": 0.05}
    assert j.verdict(1.0, errors, still=True) is None
    assert j.verdict(1.2, errors, still=True) is None
    assert j.verdict(1.35, errors, still=True) == ("stopped short of the target", "right")


def test_moving_never_settling() -> None:
    j = _judge()
    assert j.verdict(3.1, {"arm": 0.05}, still=False) == ("did not settle at the target", "arm")
    assert _judge().verdict(3.1, {"arm": 0.0}, still=False) == ("timeout", None)
