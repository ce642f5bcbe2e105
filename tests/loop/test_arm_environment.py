"""The arm as an environment of the loop: observation messages per mode, clip + IK + backend."""

import pytest

from pear_agent.loop.arm_environment import ArmEnvironment, describe_executed
from pear_agent.loop.registry import make_backend
from pear_agent.protocol.actions import ActionError


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda)
    yield be
    be.close()


@pytest.mark.parametrize(("mode", "images"), [("both", 2), ("images", 2), ("state", 0)])
def test_observation_modes(backend, panda_kin, mode: str, images: int) -> None:
    env = ArmEnvironment(backend, panda_kin, observation=mode)
    env.reset(0)
    p = env.observe(1, 25, None)
    assert len(p.images) == images and p.record["state"]["arm"]["position"]
    assert isinstance(p.message["content"], str) is (mode == "state")
    assert ("State: " in p.text) is (mode != "images") and ("Camera images" in p.text) is (mode != "state")
    assert p.context.response_schema == env.response_schema() and p.context.task == "pick_cube"
    assert (p.tokens > 200) is (images > 0)  # 256x256 images at 28 px patches: 100 tokens each


def test_execute_reports_what_was_executed_after_clipping(backend, panda_kin) -> None:
    env = ArmEnvironment(backend, panda_kin)
    env.reset(0)
    before = env.observe(1, 25, None).record["state"]["arm"]["position"]
    step = env.execute(env.parse('{"action": {"arm": {"move_cm": [0, 0, 40], "gripper": 2}}}'))
    cap = panda_kin.robot.parts["arm"].limits.max_position_step_cm
    assert step.status == "reached" and not step.end and not step.success
    assert step.record["executed"]["arm"]["move_cm"][2] == pytest.approx(cap, abs=0.01)
    assert step.record["executed"]["arm"]["gripper"] == 1.0
    notes = step.record["outcome"]["notes"]
    assert any("clipped to 1" in n for n in notes) and any("shortened" in n for n in notes)
    assert "note:" in step.feedback and step.executed.startswith(f"arm move +0.0 +0.0 +{cap:.1f} cm")
    after = env.observe(2, 25, step.feedback).record["state"]["arm"]["position"]
    assert after[2] - before[2] == pytest.approx(cap, abs=0.5)
    assert env.judge_success("done", "") is None  # simulated backends do not judge


def test_hold_and_refusal(backend, panda_kin) -> None:
    env = ArmEnvironment(backend, panda_kin)
    env.reset(0)
    env.observe(1, 25, None)
    hold = env.execute(env.parse('{"action": {"arm": {"move_cm": [0, 0, 0]}}}'))
    assert hold.executed == "arm holds" and hold.record["plan"]["ik"] == {}  # no IK for a hold
    with pytest.raises(ActionError):
        env.parse('{"arm": {"position": [0, 0, 1]}}')


def test_describe_executed() -> None:
    assert describe_executed({}) == "nothing"
    assert (
        describe_executed({"arm": {"move_cm": [0, 0, 0], "turn_rad": [0, 0, 0.5]}})
        == "arm turn +0.00 +0.00 +0.50 rad"
    )
    assert describe_executed({"l": {"gripper": 0.0}, "r": {}}) == "l gripper 0.0; r holds"
    with pytest.raises(ValueError, match="observation"):
        ArmEnvironment(None, type("K", (), {"robot": None})(), observation="x")
