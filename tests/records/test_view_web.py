"""`run --view-web`: a live episode served to Rerun's web viewer, opened in a real headless browser
(Debian's Chromium with its software rasteriser): the viewer starts, connects to the episode's
server without a data-source error, and shows the recording (the camera images the model got are on
screen: the table's colour from the episode's own JPEGs covers part of the page)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.wallclock

pytest.importorskip("rerun")
webdriver = pytest.importorskip("selenium.webdriver")

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _browser() -> Any:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup.sh --dev installs them)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
              "--disable-dev-shm-usage", "--window-size=1600,1000"):  # fmt: skip
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def open_viewer(url: str, png: Path, timeout_s: float = 240.0) -> list[dict[str, Any]]:
    """Load the viewer, wait until its app runs and has drawn a while, save a screenshot; returns
    the browser's console log."""
    from selenium.common.exceptions import TimeoutException

    drv = _browser()
    drv.set_page_load_timeout(timeout_s)
    try:
        drv.get(url)
        deadline = time.monotonic() + timeout_s
        started = None
        while time.monotonic() < deadline:
            time.sleep(1)
            try:  # the renderer may be too busy compiling the viewer to answer at once
                text = drv.execute_script("return document.body.innerText") or ""
                canvases = drv.execute_script("return document.querySelectorAll('canvas').length")
            except TimeoutException:
                continue
            if canvases and "Loading" not in text:
                started = started or time.monotonic()
                # the data streamed in and was drawn (10 s fell short once, on a loaded machine)
                if time.monotonic() - started > 20:
                    break
        assert started is not None, "the web viewer did not start"
        drv.save_screenshot(str(png))
        return drv.get_log("browser")
    finally:
        drv.quit()


def test_live_episode_in_the_web_viewer(tmp_path: Path) -> None:
    import cv2

    web, grpc = _free_port(), _free_port()
    args = f"run --view-web {web} --view-grpc-port {grpc} --view-linger-s 400 --no-video --json --runs-dir"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pear_agent", *args.split(), str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # the episode process imports, builds the scene, serves
            try:
                socket.create_connection(("127.0.0.1", web), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                time.sleep(0.5)
        url = f"http://127.0.0.1:{web}/?url=rerun%2Bhttp://127.0.0.1:{grpc}/proxy"
        logs = open_viewer(url, tmp_path / "viewer.png")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    failures = [e["message"] for e in logs if "Data source failed" in e["message"]]
    assert not failures, failures
    run_dir = Path(json.loads(out.strip().splitlines()[-1])["run_dir"])
    first = cv2.imread(str(sorted((run_dir / "images").glob("turn_001_front.jpg"))[0]))
    table = np.median(first[-40:, :, :].reshape(-1, 3), axis=0)  # the bottom rows: table top
    shot = cv2.imread(str(tmp_path / "viewer.png"))
    close = np.linalg.norm(shot.astype(float) - table, axis=2) < 25
    # the viewer's own colours are greys and blues; the table's tan is there only in a camera view
    assert close.sum() > 3000, f"camera image not on screen ({close.sum()} table-coloured pixels)"
