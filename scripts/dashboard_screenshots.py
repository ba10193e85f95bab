"""Screenshots of the dashboard's main views for the README (docs/img/<view>.png).

Serves ``parbench dashboard`` over a results directory (default: the committed reference sweep) and
photographs each view in Debian's Chromium through playwright:

    python scripts/dashboard_screenshots.py [--results-dir results/reference] [--out docs/img]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VIEWS = ("landing", "overview", "scaling", "memory", "communication", "step_time", "compare", "correctness",
         "simulator", "simulator_search", "simulator_published", "simulator_rows")
SECTIONS = {"simulator_published": ("simulator", "Against published runs", "Your own runs"),
            "simulator_rows": ("simulator", "Your own runs", ""),
            "simulator_search": ("simulator", "Every layout at scale", "Predicted vs measured")}
"""Shots of one part of a view: (view, the heading it starts at, the heading it stops at: '' for the page's end)."""
CLICKS = {"simulator_search": ("Search every layout", "Pareto front")}
"""Shots taken after a click: (the button's label, a text that shows once its result is drawn)."""
FILLS = {"simulator_rows": ("Rows file", str(ROOT / "docs" / "examples" / "rows.toml"), "Your runs")}
"""Shots taken after typing into a text box: (its label's start, the text, a text that shows once it is drawn)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default=str(ROOT / "results" / "reference"), help="results to show")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"), help="where the PNG files go")
    parser.add_argument("--views", default=",".join(VIEWS), help="comma-separated view keys")
    a = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    from parbench.commands.dashboard import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "parbench", "dashboard", "--results-dir", a.results_dir,
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        Path(a.out).mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1500})
            for shot in a.views.split(","):
                view, heading, stop = SECTIONS.get(shot, (shot, "", ""))
                page.goto(f"{url}/?view={view}")
                drawn = "[data-testid=stDataFrame]" if view == "overview" else ".js-plotly-plot .main-svg"
                page.wait_for_selector(drawn, timeout=120_000)
                page.wait_for_timeout(1500)  # the running indicator shows up only after a moment
                page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')",
                                       timeout=120_000)
                page.wait_for_timeout(2000)  # plotly's transitions and the grid's first paint
                if shot in CLICKS:
                    label, drawn = CLICKS[shot]
                    start = time.monotonic()
                    page.get_by_text(label).click()
                    page.wait_for_selector(f"text={drawn}", timeout=300_000)
                    print(f"{shot}: {label!r} drawn in {time.monotonic() - start:.1f} s")
                    page.wait_for_timeout(3000)
                if shot in FILLS:
                    label, text, drawn = FILLS[shot]
                    box = page.locator(f"input[aria-label^=\"{label}\"]")
                    box.fill(text)
                    box.press("Enter")
                    page.wait_for_selector(f"text={drawn}", timeout=120_000)
                    page.wait_for_timeout(3000)
                path = Path(a.out) / f"{shot}.png"
                if heading:  # the app scrolls inside its own block: a viewport tall enough holds all of it
                    block = page.locator("[data-testid=stMainBlockContainer]")
                    page.set_viewport_size({"width": 1400, "height": int(block.bounding_box()["height"]) + 200})
                    page.wait_for_timeout(2000)
                    top, box = page.get_by_role("heading", name=heading).first.bounding_box()["y"], block.bounding_box()
                    end = page.get_by_role("heading", name=stop).first.bounding_box()["y"] if stop else box["y"] + box["height"]
                    page.screenshot(path=str(path), clip={"x": box["x"], "y": top - 10, "width": box["width"],
                                                          "height": end - top})
                    page.set_viewport_size({"width": 1400, "height": 1500})
                else:
                    page.screenshot(path=str(path), full_page=True)
                print(path)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
