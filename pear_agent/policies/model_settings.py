"""The model client's settings, one typed definition: `ModelSettings`' fields carry their defaults,
checks and command-line shape, and `add_model_args` makes `run`'s and `bench`'s options from them."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from typing import Any

from pear_agent.policies.openai_wire import DIALECTS
from pear_agent.settings import add_arguments, setting, values_from_args

DEFAULT_MAX_TOKENS = 32768
"""PEAR's limit: 32k (reasoning + answer) tokens per turn; a reply cut there fails that turn."""
STRUCTURED_CHOICES = ("off", "auto", *DIALECTS)


def _json_object(text: str) -> dict[str, Any]:
    """`--extra-body`: a JSON object, or one line saying what is wrong with it."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--extra-body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--extra-body must be a JSON object")
    return value


def _yes_no(text: str) -> bool:
    if text not in ("yes", "no"):
        raise argparse.ArgumentTypeError(f"use yes or no, not {text!r}")
    return text == "yes"


@dataclass
class ModelSettings:
    """The model client's settings; `add_model_args` makes the command line from these fields."""

    model: str = setting(default=None, ros="model", help="model name; selects the OpenAI-compatible client")
    base_url: str | None = setting(
        None, ros="base_url", help="e.g. http://localhost:8000/v1 (default: OpenAI's)"
    )
    api_key_env: str | None = setting(
        None,
        ros="api_key_env",
        help="NAME of the environment variable holding the key (none for a local server that needs none)",
    )
    temperature: float | None = setting(
        None, ros="temperature", help="sampling temperature (default: the server's)"
    )
    max_tokens: int | None = setting(
        DEFAULT_MAX_TOKENS,
        ros="max_tokens",
        help=f"tokens per decision, reasoning included (default {DEFAULT_MAX_TOKENS}, PEAR's per-turn "
        "limit; 0 sends none; lowered automatically to what the server allows)",
    )
    reasoning_effort: str | None = setting(None, help="passed through (e.g. low, medium, high)")
    extra_body: dict[str, Any] = setting(
        default_factory=dict,
        help="JSON object merged into the request body",
        type=_json_object,
    )
    timeout_s: float = setting(
        120.0,
        ros="model_timeout_s",
        help="per-decision timeout, first byte to last token; the stream is closed (default 120)",
    )
    max_retries: int = setting(3, help="retries on 408/409/425/429/5xx/connection errors")
    backoff_s: float = setting(1.0, help="first retry's wait", cli=False)
    backoff_max_s: float = setting(20.0, help="longest retry wait", cli=False)
    keep_images: int | None = setting(
        None,
        metavar="K",
        ros="keep_images",
        help="send only the last K turns' images (older ones become a placeholder)",
    )
    send_privileged: bool = setting(
        False,
        action="store_true",
        help="diagnostic: send simulator facts so `pear-agent serve`'s scripted expert can answer",
    )
    stream: bool = setting(
        True, flag="--no-stream", action="store_false", help="ask for whole replies instead of a stream"
    )
    structured_output: str = setting(
        "off",
        choices=list(STRUCTURED_CHOICES),
        help="send the action schema as response_format: json_schema (OpenAI, vLLM, SGLang), json_object "
        "(llama.cpp's json_object + schema), auto (probe the server once), off (default)",
    )
    structured_output_chosen: str | None = setting(
        None, cli=False, help="what `auto` resolved to (the bench's parent probes once for its workers)"
    )
    retry_timeouts: bool = setting(
        True,
        type=_yes_no,
        metavar="{yes,no}",
        cli_default=None,
        help="retry a timed-out decision (default: yes paused, no realtime: the world has moved on)",
    )
    logprobs: bool = setting(
        False,
        cli=False,
        help="ask for the sampled tokens' log-probabilities (recorded as the turn's tokens when the "
        "server gives ids too: vLLM with return_tokens_as_token_ids; see `server_logprobs`)",
    )
    max_in_flight: int | None = setting(
        None,
        metavar="N",
        help="at most N requests open at once to the endpoint (bench: over all its workers; default no "
        "cap): keeps a server's batch, and its prefix-cache hits, where you want them",
    )

    def __post_init__(self) -> None:
        if self.structured_output not in STRUCTURED_CHOICES:
            raise ValueError(
                f"--structured-output {self.structured_output!r}: use one of {', '.join(STRUCTURED_CHOICES)}"
            )
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ValueError(f"--max-in-flight must be >= 1, not {self.max_in_flight}")
        if self.timeout_s <= 0 or self.max_retries < 0:
            raise ValueError("--timeout-s must be > 0 and --max-retries >= 0")
        if self.keep_images is not None and self.keep_images < 0:
            raise ValueError("--keep-images must be >= 0")
        if self.max_tokens is not None and self.max_tokens < 0:
            raise ValueError("--max-tokens must be >= 0 (0 sends none)")
        if self.max_tokens == 0:
            self.max_tokens = None
        if "response_format" in self.extra_body and self.structured_output != "off":
            raise ValueError(
                "give response_format either in --extra-body or by --structured-output, not both"
            )


# -- command-line options shared by `run` and `bench` ---------------------------------------------
def add_model_args(p: Any) -> None:
    """The model options (argparse), made from `ModelSettings`: `--model` switches the policy to the
    OpenAI client."""
    add_arguments(p.add_argument_group("model (any OpenAI-compatible endpoint)"), ModelSettings)


def settings_from_args(args: Any, *, realtime: bool = False) -> ModelSettings | None:
    """The model settings `args` holds (its command's `ModelSettings` options, checked), or None
    without --model. Unless told, a timed-out decision is retried when the loop's clock is paused,
    not when it is `realtime` (the world has moved on; `pear_agent.cli.loop_options.
    model_settings_from_args` reads the clock from the same options)."""
    values = values_from_args(ModelSettings, args)
    values["extra_body"] = values.get("extra_body") or {}
    if values.get("retry_timeouts") is None:
        values["retry_timeouts"] = not realtime
    settings = ModelSettings(**values)
    if settings.model:
        return settings
    alone = {
        "--base-url": settings.base_url,
        "--api-key-env": settings.api_key_env,
        "--extra-body": settings.extra_body,
        "--reasoning-effort": settings.reasoning_effort,
        "--structured-output": settings.structured_output != "off",
    }
    for flag, given in alone.items():
        if given:
            raise ValueError(f"{flag} needs --model")
    return None


def secrets_from_args(args: Any) -> list[str]:
    """The key's value, for the run writer's redaction (never written anywhere)."""
    env = values_from_args(ModelSettings, args).get("api_key_env")
    return [os.environ[env]] if env and os.environ.get(env) else []
