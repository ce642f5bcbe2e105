"""The turn loop's command-line options, shared by `run` and `bench`: made from `EpisodeConfig`'s
fields (`pear_agent.loop.episode`), read back as its keyword arguments, checked by it."""

from __future__ import annotations

import argparse
from typing import Any

from pear_agent.loop.config import DEFAULT_CONTEXT_TOKENS, EpisodeConfig
from pear_agent.policies.model_settings import ModelSettings, settings_from_args
from pear_agent.policies.openai_client import OpenAIPolicy
from pear_agent.settings import add_arguments, values_from_args

LOOP_OPTIONS = (
    "max_turns",
    "max_invalid",
    "observation",
    "scene_facts",
    "scene_relative",
    "max_chunk",
    "history",
    "history_older",
    "record_fps",
)
CLOCK_OPTIONS = ("mode", "latency_s", "max_context_tokens")


def add_loop_args(parser: argparse.ArgumentParser | Any) -> None:
    """`--max-turns`, `--max-invalid`, `--observation`, `--scene-facts`, `--max-chunk`, `--history`,
    `--history-older`, `--record-fps` (EpisodeConfig fields)."""
    add_arguments(parser, EpisodeConfig, only=LOOP_OPTIONS)


def add_clock_args(parser: argparse.ArgumentParser | Any) -> None:
    """`--realtime`, `--latency`, `--max-context-tokens` (EpisodeConfig fields)."""
    add_arguments(parser, EpisodeConfig, only=CLOCK_OPTIONS)


def clock_from_args(args: Any) -> dict[str, Any]:
    """EpisodeConfig keyword arguments for the clock and the context budget, checked. Without
    --max-context-tokens the budget is the server's window where it reports one (asked once)."""
    values = values_from_args(EpisodeConfig, args)
    clock = {k: values.get(k) for k in CLOCK_OPTIONS}
    clock["mode"] = clock["mode"] or "paused"
    if clock["max_context_tokens"] is None:
        settings = model_settings_from_args(args)
        window = OpenAIPolicy(settings).context_window() if settings is not None else None
        clock["max_context_tokens"] = window or DEFAULT_CONTEXT_TOKENS
    EpisodeConfig(**clock)  # the checks, before any worker starts
    return clock


def loop_options_from_args(args: Any) -> dict[str, Any]:
    """EpisodeConfig keyword arguments from `add_loop_args` options (defaults when absent); checked
    by `EpisodeConfig` itself."""
    values = values_from_args(EpisodeConfig, args)
    out = {k: values[k] for k in LOOP_OPTIONS if k in values}
    for key in ("max_chunk", "record_fps"):  # only when given: benches recorded before stay resumable
        if out.get(key) is None:
            out.pop(key, None)
    if not out.get("scene_relative"):  # likewise the relative positions: off in every older bench
        out.pop("scene_relative", None)
    if out.get("history") is None:  # likewise the window: no window is what every older bench ran
        out.pop("history", None)
        out.pop("history_older", None)
    return out


def model_settings_from_args(args: Any) -> ModelSettings | None:
    """The model settings of a command's options (None without --model), a timed-out decision
    retried or not as the clock those options hold (`--realtime`: not)."""
    return settings_from_args(args, realtime=values_from_args(EpisodeConfig, args).get("mode") == "realtime")
