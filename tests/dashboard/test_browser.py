"""End to end in a real headless Chromium: ``parbench dashboard`` serves, plotly draws, a filter acts.

Needs Debian's ``chromium`` (/usr/bin/chromium) and the Python ``playwright`` package (never
``playwright install``: the system browser is used). Skips, saying which is missing, otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from parbench.commands.dashboard import free_port

from .conftest import FIXTURE_RESULTS

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

sync_api = pytest.importorskip("playwright.sync_api", reason="python playwright is not installed (pip install playwright)")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium missing (apt-get install -y chromium)"),
]

# Names of the traces of every plotly chart on the visible tab, read from plotly's graph divs.
VISIBLE_TRACES = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(el => el.offsetParent !== null)
    .map(el => (el.data || []).map(t => t.name))"""


@pytest.fixture
def dashboard_url():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "parbench", "dashboard", "--results-dir", str(FIXTURE_RESULTS),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert re.search(rf"http://127\.0\.0\.1:{port}", line), line
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:  # the address is printed before streamlit listens: poll until it answers
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "dashboard did not start"
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_dashboard_in_chromium(dashboard_url):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(dashboard_url)
            # charts of every tab are in the DOM; only the active tab's are visible
            page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=90_000)
            page.get_by_role("tab", name="Scaling").click()
            page.wait_for_selector(".js-plotly-plot .main-svg", state="visible", timeout=30_000)
            traces = page.evaluate(VISIBLE_TRACES)
            throughput = traces[0]
            assert any(n.startswith("ddp") for n in throughput), throughput
            assert any(n.startswith("pipeline") for n in throughput), throughput
            assert page.locator(".js-plotly-plot .xtitle", has_text="world size (ranks)").count() >= 1

            # remove "ddp" from the sidebar strategy filter: its trace leaves the chart
            page.locator(".st-key-filter-strategy").get_by_role("button", name="Remove ddp").click()
            page.wait_for_function("""() => { const el = [...document.querySelectorAll('.js-plotly-plot')]
                .find(e => e.offsetParent !== null);
                return el && el.data && !el.data.some(t => t.name.startsWith('ddp')); }""", timeout=30_000)
            after = page.evaluate(VISIBLE_TRACES)[0]
            assert not any(n.startswith("ddp") for n in after) and any(n.startswith("pipeline") for n in after)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard-e2e.png"), full_page=True)
        finally:
            browser.close()
    assert (ARTIFACTS / "dashboard-e2e.png").stat().st_size > 10_000


def test_report_renders_offline_in_chromium(tmp_path):
    from parbench import charts
    from parbench.report import write_report

    out, _, _ = write_report(FIXTURE_RESULTS, tmp_path / "report.html")
    expected = sum(len(builders) for _, builders in charts.REPORT_SECTIONS)
    with sync_api.sync_playwright() as p:
        # --disable-background-networking etc. plus no server: every script must come from the file
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("http*://**", lambda route: route.abort())  # prove nothing is fetched
            page.goto(out.as_uri())
            page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {expected}",
                                   timeout=60_000)
            names = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(e => e.data.map(t => t.name))")
        finally:
            browser.close()
    assert any(n and n.startswith("ddp") for n in names) and any(n and n.startswith("pipeline") for n in names)
