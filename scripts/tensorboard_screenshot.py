"""A PNG of TensorBoard's time series for a training run, taken in headless Chromium: the picture in
docs/training.md, made the same way on any run.

    .venv/bin/python scripts/tensorboard_screenshot.py RUN_OR_LOGDIR OUT.png

RUN_OR_LOGDIR is a folder TensorBoard reads (`train grpo`/`train sft` write RUN/tensorboard). With
`--from-metrics RUN/metrics.jsonl` the event files are written first from the run's per-step
reports through the trainer's own writer (`pear_agent.train.metrics_log.MetricsLog`), for a run
whose loop kept only `metrics.jsonl`. Needs the dev extra (selenium) and Debian's chromium and
chromium-driver; nothing is fetched (the driver is the system's, named explicitly).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

TAGS = ("mean_reward", "success_rate", "grad_norm", "learning_rate", "entropy", "reply_tokens_mean")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def events_from_metrics(metrics: Path, logdir: Path) -> None:
    """Event files from a `metrics.jsonl` through the trainer's writer (step N is logged as N + 1,
    as the training loop logs it)."""
    from pear_agent.train.metrics_log import MetricsLog  # heavy: torch

    with MetricsLog(logdir, ["tensorboard"]) as board:
        for line in metrics.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rep = json.loads(line)
                board.write(int(rep["step"]) + 1, rep)


def wait_http(url: str, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > end:
                msg = f"tensorboard_screenshot: TensorBoard did not answer at {url} in {timeout_s:.0f} s"
                raise SystemExit(msg) from None
            time.sleep(0.5)


def shoot(url: str, out: Path, width: int, height: int, draw_s: float) -> None:
    from selenium import webdriver  # optional: selenium
    from selenium.webdriver.chrome.service import Service  # optional: selenium

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        raise SystemExit(
            "tensorboard_screenshot: needs chromium and chromedriver (apt-get install chromium-driver)"
        )
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        opts.add_argument(a)
    browser = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        browser.get(url)
        time.sleep(3)
        # TensorBoard's own settings (what its settings pane stores): raw values, every point shown
        settings = {"ignoreOutliers": False, "scalarSmoothing": 0, "timeSeriesSettingsPaneOpened": False}
        browser.execute_script(
            "localStorage.setItem('_tb_global_settings', arguments[0]);", json.dumps(settings)
        )
        browser.refresh()
        time.sleep(draw_s)
        browser.save_screenshot(str(out))
    finally:
        browser.quit()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir", type=Path, help="a run folder or any folder TensorBoard reads")
    ap.add_argument("out", type=Path, help="the PNG to write")
    ap.add_argument(
        "--from-metrics", type=Path, default=None, help="write events from this metrics.jsonl first"
    )
    ap.add_argument(
        "--run-name", default="run", help="the run's name in the chart legend (with --from-metrics)"
    )
    ap.add_argument("--tags", default="|".join(TAGS), help="TensorBoard's tag filter (a regex)")
    ap.add_argument("--size", default="1400x1060", help="window WIDTHxHEIGHT in pixels")
    ap.add_argument("--draw-s", type=float, default=20.0, help="seconds to let the charts draw")
    args = ap.parse_args()

    logdir = args.logdir
    tmp = None
    if args.from_metrics is not None:
        if not args.from_metrics.is_file():
            print(f"tensorboard_screenshot: no such file: {args.from_metrics}", file=sys.stderr)
            return 2
        tmp = tempfile.TemporaryDirectory()
        logdir = Path(tmp.name)
        events_from_metrics(args.from_metrics, logdir / args.run_name)
    elif not logdir.is_dir():
        print(f"tensorboard_screenshot: no such folder: {logdir}", file=sys.stderr)
        return 2
    width, height = (int(v) for v in args.size.split("x"))
    port = free_port()
    tb = shutil.which("tensorboard", path=str(Path(sys.executable).parent)) or "tensorboard"
    server = subprocess.Popen(
        [tb, "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_http(base, 60)
        shoot(
            f"{base}?smoothing=0&tagFilter={quote(args.tags)}#timeseries",
            args.out,
            width,
            height,
            args.draw_s,
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        if tmp is not None:
            tmp.cleanup()
    print(f"screenshot: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
