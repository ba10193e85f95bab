"""The Time and Timeline views in a real headless Chromium, on runs with a step-time breakdown:
plotly draws them without a console error (skips like ``test_browser`` without chromium/playwright)."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS
from .test_browser import CHROMIUM, browser, open_view, page, serve, stop  # noqa: F401 (fixtures)
from .test_time_views import traced_results  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium missing")]


@pytest.mark.slow  # ~20 s: a dashboard server and Chromium; run with -m slow
def test_time_and_timeline_draw_in_a_browser(page, traced_results):  # noqa: F811
    proc, url = serve(traced_results)
    try:
        time_figs = open_view(page, url, view="time", source=["reference", "."])
        bars = [t for f in time_figs for t in f["traces"] if t["type"] == "bar"]
        assert {t["name"] for t in bars} >= {"compute", "bubble (waiting for a peer)", "comm: intermediate"}
        gantt = open_view(page, url, view="timeline", source=["reference", "."])
        assert any("Traced step" in f["title"] for f in gantt)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "browser-timeline.png"), full_page=True)
    finally:
        page.goto("about:blank")  # leave the app before it stops: no reconnect errors in the console
        stop(proc)
