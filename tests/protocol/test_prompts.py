import base64
import json

import cv2
import numpy as np
import pytest

from pear_agent.protocol.prompts import system_prompt, turn_text, user_message
from pear_agent.robot.backend import TaskInfo
from pear_agent.robot.images import encode_jpeg


def test_system_prompt_states_frames_units_parts_cameras_and_action(panda) -> None:
    text = system_prompt(panda, TaskInfo("pick_cube", "Pick up the red cube.", 25))
    for needle in [
        "`arm`",
        "centimetres (cm)",
        "roll, pitch, yaw in radians",
        "+x: forward",
        "+z: up",
        "`front`",
        "`wrist`",
        "0 = closed",
        "absolute",
        "```json",
        "Pick up the red cube.",
        "at most 25 turns",
        "10 cm",
    ]:
        assert needle in text, needle
    assert "$" not in text  # every template field was filled


def test_user_message_carries_state_and_decodable_jpegs() -> None:
    img = np.zeros((48, 64, 3), np.uint8)
    img[:, :32, 0] = 255
    text = turn_text(3, 25, '{"arm": {}}', "reached", ["front"])
    assert "Last action: reached" in text and "Turn 3 of 25" in text
    msg = user_message(text, {"front": encode_jpeg(img)})
    assert msg["role"] == "user" and msg["content"][0]["text"] == text
    url = msg["content"][2]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    decoded = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == (48, 64, 3)
    assert decoded[10, 5, 2] > 200 and decoded[10, 60, 2] < 50  # red stays red (RGB in, BGR file)


def test_state_only_prompts_say_what_the_model_gets(panda) -> None:
    task = TaskInfo("pick_cube", "Pick up the red cube.", 25)
    text = system_prompt(panda, task, observation="state", scene_facts=True, max_invalid=2)
    assert "(no images)" in text and "No camera images" in text and "`front`" not in text
    assert "`Scene`" in text and "after 2 invalid replies in a row" in text and "$" not in text
    assert '{"action": {"arm": {"move_cm": [0.0, 0.0, -2.0], "gripper": 0.0}}}' in text
    turn = turn_text(1, 25, '{"arm": {}}', None, [], observation="state", scene='{"object": {}}')
    assert "State: " in turn and "Scene: " in turn and "Camera" not in turn
    msg = user_message(turn, {}, as_string=True)
    assert msg == {"role": "user", "content": turn}


def test_images_only_turn_has_no_state_and_both_is_the_default(panda) -> None:
    turn = turn_text(2, 25, '{"arm": {}}', "reached", ["front"], observation="images")
    assert "State:" not in turn and "Camera images follow (front)." in turn
    assert turn_text(2, 25, '{"arm": {}}', "reached", ["front"]).count("State: ") == 1
    task = TaskInfo("pick_cube", "Pick up the red cube.", 25)
    with pytest.raises(ValueError, match="observation must be one of"):
        system_prompt(panda, task, observation="video")
    with pytest.raises(ValueError, match="cannot carry images"):
        user_message("x", {"front": b"\xff\xd8"}, as_string=True)


def test_scene_facts_keep_geometry_and_drop_expert_bookkeeping() -> None:
    from pear_agent.protocol.state import scene_facts

    facts = {
        "task": "t",
        "tool": {"table_z_cm": 0.0},
        "object": {"name": "cube", "position_cm": [50.123, 1, 2], "yaw_rad": 0.5, "size_cm": 4.0, "mass": 1},
        "grasp_points_cm": {"left_arm": [1, 2, 3]},
        "touching": {"left_arm": True},
        "target_xy_cm": [60, 5],
        "lift_cm": 10.0,
    }
    out = json.loads(scene_facts(facts))
    assert out == {
        "object": {"name": "cube", "position_cm": [50.12, 1, 2], "yaw_rad": 0.5, "size_cm": 4.0},
        "target_xy_cm": [60, 5],
    }
