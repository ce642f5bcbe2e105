"""Per-step training metrics beside `metrics.jsonl`: TensorBoard event files (RUN/tensorboard,
`tensorboard --logdir RUN`) and, where it is installed, Weights & Biases in offline mode (RUN/wandb;
nothing leaves the machine until `wandb sync`). The recipe's `logging.report_to` picks them."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

TENSORBOARD_DIR = "tensorboard"


def scalars(report: Any, prefix: str = "") -> dict[str, float]:
    """A step report's numbers as flat `section/name` scalars (dicts become `name/key`); text,
    None and lists are left out."""
    doc = asdict(report) if is_dataclass(report) else dict(report)
    out: dict[str, float] = {}
    for k, v in doc.items():
        name = f"{prefix}{k}"
        if isinstance(v, bool | int | float):
            out[name] = float(v)
        elif isinstance(v, dict):
            out |= scalars(v, f"{name}/")
    return out


def event_writer(logdir: Path) -> Any:
    """TensorBoard's writer: torch's (needs the tensorboard package) or tensorboardX's."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # optional: tensorboard
    except ImportError:
        try:
            from tensorboardX import SummaryWriter  # optional: tensorboardX
        except ImportError:
            raise ValueError(
                "logging.report_to tensorboard needs the tensorboard package (bash scripts/setup.sh "
                "--train installs it, and bash scripts/setup_libero.sh --train in .venv-libero), or set "
                "logging.report_to=[]"
            ) from None
    return SummaryWriter(log_dir=str(logdir))


class MetricsLog:
    """One writer per `report_to` entry; `write(step, report)` logs every scalar of the report."""

    def __init__(
        self,
        out: Path,
        report_to: list[str],
        config: dict[str, Any] | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.out = Path(out)
        self.tb: Any = None
        self.wandb: Any = None
        if "tensorboard" in report_to:
            self.tb = event_writer(self.out / TENSORBOARD_DIR)
        if "wandb" in report_to:
            try:
                import wandb  # optional: wandb
            except ImportError:
                raise ValueError(
                    "logging.report_to wandb: wandb is not installed (pip install wandb), or leave it out"
                ) from None
            os.environ.setdefault("WANDB_MODE", "offline")
            self.wandb = wandb.init(
                project="pear-agent",
                dir=str(self.out),
                name=self.out.name,
                config=config or {},
                mode=os.environ["WANDB_MODE"],
                resume="allow",
                id=self.out.name.replace("/", "-"),
            )
            log(f"wandb: offline run under {self.out / 'wandb'} (wandb sync uploads it)")

    def write(self, step: int, report: Any) -> None:
        values = scalars(report)
        if self.tb is not None:
            for k, v in values.items():
                self.tb.add_scalar(k, v, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(values, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_events(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in a folder's event files: tag -> [(step, value)] (what TensorBoard shows)."""
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )  # optional: tensorboard

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
