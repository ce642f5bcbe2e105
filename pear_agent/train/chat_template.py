"""What a model's chat template says about a turn: the tokens that end an assistant reply."""

from __future__ import annotations

from typing import Any


def turn_end_ids(tokenizer: Any) -> list[int]:
    """Token ids that end an assistant turn in this template (e.g. ChatML's <|im_end|>), and EOS."""
    probe = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "PEARREPLY"}]
    text = tokenizer.apply_chat_template(probe, tokenize=False)
    closing = text[text.index("PEARREPLY") + len("PEARREPLY") :]
    ids = tokenizer(closing, add_special_tokens=False)["input_ids"] if closing else []
    out = [ids[0]] if ids and ids[0] in tokenizer.all_special_ids else []
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in out:
        out.append(tokenizer.eos_token_id)
    if not out:
        raise ValueError("cannot tell which token ends an assistant turn in this chat template")
    return out
