"""The bench and compare pages in a real headless browser (Debian's Chromium through chromedriver):
they load from files with no server and no network, and show one distributions chart per task,
the success and end-reason charts, the first/last frame thumbnails, and the compare chart."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wallclock

webdriver = pytest.importorskip("selenium.webdriver")

REPO = Path(__file__).resolve().parents[2]
TASKS = ["pick_cube", "push_to_target"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *args], cwd=REPO, capture_output=True, text=True, timeout=900
    )


def browser() -> Any:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup.sh --dev installs them)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,900",
    ):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(driver), options=opts)


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("pages")
    a, b = root / "a", root / "b"
    common = ["--tasks", ",".join(TASKS), "--seeds", "0-2", "--quiet", "--no-video"]
    assert _cli("bench", *common, "--out", str(a)).returncode == 0
    p = _cli("bench", *common, "--action-noise-cm", "3", "--max-turns", "6", "--out", str(b))
    assert p.returncode == 0, p.stderr
    page = root / "compare.html"
    p = _cli("compare", str(a), str(b), "--html", str(page))
    assert p.returncode == 0, p.stderr
    return a, b, page


def _charts(drv: Any, kind: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return drv.find_elements(By.CSS_SELECTOR, f'figure.chart[data-chart="{kind}"]')


def _drawn(fig: Any) -> bool:
    from selenium.webdriver.common.by import By

    svg = fig.find_element(By.TAG_NAME, "svg")
    return (
        svg.size["width"] > 100
        and svg.size["height"] > 50
        and len(svg.find_elements(By.TAG_NAME, "path")) > 3
    )


def test_bench_page_has_one_chart_per_task_and_thumbnails(benches: tuple[Path, Path, Path]) -> None:
    from selenium.webdriver.common.by import By

    a, _, _ = benches
    drv = browser()
    try:
        drv.get((a / "index.html").as_uri())
        per_task = _charts(drv, "task")
        assert sorted(f.get_attribute("data-task") for f in per_task) == TASKS
        assert all(_drawn(f) for f in per_task)
        for kind in ("success", "end_reasons"):
            (fig,) = _charts(drv, kind)
            assert _drawn(fig)
            assert all(t in fig.text for t in TASKS)  # a bar per task, labelled
        thumbs = drv.find_elements(By.CSS_SELECTOR, "img.thumb")
        assert len(thumbs) == 2 * 3 * len(TASKS)  # first and last frame of every episode
        drv.execute_script("window.scrollTo(0, document.body.scrollHeight)")  # lazy images load
        from selenium.webdriver.support.ui import WebDriverWait

        js = "return [...document.querySelectorAll('img.thumb')].filter(i => i.naturalWidth).length"
        WebDriverWait(drv, 30).until(lambda d: d.execute_script(js) == len(thumbs))
    finally:
        drv.quit()


def test_compare_page_charts_the_paired_difference_per_task(benches: tuple[Path, Path, Path]) -> None:
    _, _, page = benches
    drv = browser()
    try:
        drv.get(page.as_uri())
        (fig,) = _charts(drv, "compare")
        assert _drawn(fig)
        assert all(t in fig.text for t in TASKS)
        assert fig.text.count("p = ") == len(TASKS)
    finally:
        drv.quit()
