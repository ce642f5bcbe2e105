"""The old entry point of the LIBERO bench, forwarded to `pear-agent bench --suite` (the one
runner; the suite layout lives in `sim_adapters.libero.family`):

    .venv-libero/bin/python -m sim_adapters.libero.bench --suite libero_spatial --tasks 0-9 --inits 0-4

is the same as `pear-agent bench --suite libero_spatial --suite-tasks 0-9 --seeds 0-4`.
"""

from __future__ import annotations

import argparse
import sys

from sim_adapters.libero import SUITES
from sim_adapters.libero.family import format_summary, parse_range, suite_summary, suite_tasks

__all__ = ["format_summary", "main", "parse_range", "suite_summary", "suite_tasks"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sim_adapters.libero.bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--suite", default="libero_spatial", help=f"comma list of: {', '.join(SUITES)}")
    p.add_argument("--tasks", default="0-9", help="task indices, e.g. 0-9 or 0,3")
    p.add_argument("--inits", default="0-49", help="init-state indices (LIBERO has 50 per task)")
    p.add_argument("--out", default="runs/libero-bench", help="results folder")
    p.add_argument("--workers", default="1")
    args = p.parse_args(argv)
    from pear_agent.cli import main as cli_main

    argv = ["bench", "--suite", args.suite, "--suite-tasks", args.tasks, "--seeds", args.inits]
    return cli_main([*argv, "--out", args.out, "--workers", args.workers])


if __name__ == "__main__":
    sys.exit(main())
