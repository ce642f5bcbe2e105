import base64

import cv2
import numpy as np

from pear_agent.backend import TaskInfo
from pear_agent.protocol.prompts import encode_jpeg, system_prompt, turn_text, user_message


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
