"""`pear-agent train serve` with a vision-language checkpoint (`tiny-idefics3`: random weights from a
config, nothing downloaded): the chat endpoint takes the images in the messages and answers what
`VisionModelPolicy` samples in process on the same conversation (the same sequence, images
included); the token-in endpoint refuses it in one line (token ids carry no pixels)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.servers import post_json, serve_app

pytestmark = pytest.mark.wallclock


def _jpeg(seed: int) -> bytes:
    from pear_agent.robot.images import encode_jpeg

    rng = np.random.default_rng(seed)
    return encode_jpeg(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))


def _post(url: str, body: dict) -> tuple[int, dict]:
    return post_json(url, body, timeout_s=600)


@pytest.fixture(scope="module")
def served_vlm():
    from pear_agent.train.serve_model import create_app

    with serve_app(create_app("tiny-idefics3", 6), start_timeout_s=120) as url:
        yield url


def test_a_served_vision_model_answers_as_the_in_process_policy_turn_after_turn(served_vlm):
    from pear_agent.protocol.prompts import user_message
    from pear_agent.train.local_model import VisionModelPolicy
    from pear_agent.train.model_files import load_model

    model, proc = load_model("tiny-idefics3")  # the same seeded weights the server built
    local = VisionModelPolicy(model, proc, temperature=0.0, max_new_tokens=6)
    msgs = [
        {"role": "system", "content": "You move a robot arm. Answer with one JSON command."},
        user_message("Turn 1. State: {}", {"agentview": _jpeg(0)}),
    ]
    for turn in range(2):
        status, out = _post(
            f"{served_vlm}/chat/completions",
            {"model": "tiny-idefics3", "messages": msgs, "temperature": 0, "logprobs": True, "max_tokens": 6},
        )
        assert status == 200, out
        served_ids = [c["token_id"] for c in out["choices"][0]["logprobs"]["content"]]
        mine = local.act(msgs, None)  # type: ignore[arg-type]
        assert not mine.error
        assert served_ids == mine.tokens.token_ids and 1 <= len(served_ids) <= 6
        assert out["choices"][0]["message"]["content"] == mine.text
        assert out["usage"]["prompt_tokens"] == mine.usage["prompt_tokens"]
        image_id = proc.tokenizer.convert_tokens_to_ids("<image>")
        # the prompt held the images' tokens: far more than the text alone
        assert local.sequence.ids.count(image_id) > 0 and len(local.sequence.images) == turn + 1
        msgs = [
            *msgs,
            {"role": "assistant", "content": mine.text},
            user_message("Turn 2. State: {}", {"agentview": _jpeg(1)}),
        ]


def test_token_in_completions_refuse_a_vision_model_in_one_line(served_vlm):
    status, out = _post(f"{served_vlm}/completions", {"model": "tiny-idefics3", "prompt": [1, 2, 3]})
    msg = out["error"]["message"]
    assert status == 400 and "vision-language" in msg and "/v1/chat/completions" in msg and "\n" not in msg
