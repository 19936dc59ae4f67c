"""The HTML report opened in headless Chromium: it renders (a screenshot that is not blank, a DOM with
the tables and charts), logs no console message, and cannot make a network request.

The negative control proves the detector can fail: the same CSP on a page that tries to load a remote
image produces a console line.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from predictor.reports import build_report
from predictor.reports.html import CSP, render_html
from tests.reports import chromium
from tests.reports.fixture import fixture_inputs

pytestmark = pytest.mark.skipif(chromium.chromium() is None, reason="Debian chromium is not installed")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render_html(build_report(**fixture_inputs())), encoding="utf-8")
    return path


def test_page_is_self_contained(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert f'content="{CSP}"' in html
    assert not re.search(r"(?i)https?://|//[a-z0-9.-]+\.[a-z]{2,}/", html), "the page references a URL"
    assert not re.search(r"(?i)<script|<link|@import|url\(", html)
    assert html.count('src="data:image/png;base64,') == 4  # bars, heatmap, two fan charts


@pytest.mark.slow
def test_screenshot_is_not_blank_and_console_is_clean(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    result = chromium.screenshot(page, shot)
    assert result.returncode == 0, result.stderr[-2000:]
    assert chromium.console_lines(result.stderr) == []
    pixels = image.imread(str(shot))[..., :3]
    assert pixels.shape[0] > 1000 and pixels.shape[1] == 1280
    colours = np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50, "the screenshot is (nearly) uniform"
    dark = (pixels.mean(axis=2) < 0.5).mean()
    assert 0.005 < dark < 0.5, f"{dark:.1%} dark pixels: blank or broken page"


def test_dom_has_tables_and_charts(page: Path) -> None:
    result = chromium.dump_dom(page)
    assert result.returncode == 0, result.stderr[-2000:]
    assert chromium.console_lines(result.stderr) == []
    dom = result.stdout
    assert "<h1>Fixture report</h1>" in dom
    assert dom.count("<tr") >= 2 + 2 + 2  # queue rows, workload rows and headers
    assert dom.count("data:image/png;base64,") == 4


def test_detector_sees_a_blocked_request(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}"></head>'
        '<body><p>x</p><img src="http://127.0.0.1:9/x.png"></body></html>',
        encoding="utf-8",
    )
    result = chromium.dump_dom(bad)
    assert any("Content Security Policy" in line for line in chromium.console_lines(result.stderr))
