"""Opening a report in a real headless browser: Debian's Chromium, driven by Playwright."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from faults.registry import is_step
from tests.conftest import missing
from tests.helpers import history_events

ARTIFACTS = Path(os.environ.get("BJ_TEST_ARTIFACTS", "test-artifacts"))
# Chromium's own background traffic goes nowhere on these machines: keep it from trying.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STEP_BANDS = "el => (el.layout.shapes || []).filter(s => (s.name || '').startsWith('step ')).length"


@dataclass
class Rendered:
    console_errors: list[str]
    step_bands: int | None  # None: the page has no timeline
    verdict_text: str
    screenshot: Path
    external_requests: list[str]


def render(page_path: Path, screenshot_name: str) -> Rendered:
    """Loads the page from file://, waits for the timeline, screenshots the whole page."""
    chromium = shutil.which("chromium")
    if chromium is None:
        missing("Debian's chromium is not installed (make setup)")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / screenshot_name
    errors: list[str] = []
    external: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on(
                "request",
                lambda r: (
                    external.append(r.url) if not r.url.startswith(("file:", "data:")) else None
                ),
            )
            page.goto(page_path.resolve().as_uri(), timeout=60_000)
            bands = None
            if page.locator("#timeline").count():
                page.wait_for_selector("#timeline .main-svg", timeout=60_000)
                bands = page.eval_on_selector("#timeline", STEP_BANDS)
            verdict = page.inner_text("#verdict")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return Rendered(errors, bands, verdict, shot, external)


def assert_report_shows_the_run(run_dir: Path, screenshot_name: str) -> Rendered:
    """The report a real run wrote: loads with no console error and no request off the page,
    one band per nemesis step, and the verdict's own words at the top."""
    import json

    from contract.packed import history_file

    verdict = json.loads((run_dir / "verdict.json").read_text())
    has_nemesis = history_file(run_dir / "history", "nemesis") is not None
    events = history_events(run_dir / "history", "nemesis") if has_nemesis else []
    fault_steps = [e for e in events if e["type"] == "invoke" and is_step(e["f"])]
    assert (run_dir / "junit.xml").exists()
    shown = render(run_dir / "report.html", screenshot_name)
    assert shown.console_errors == [] and shown.external_requests == []
    assert shown.step_bands == len(fault_steps)
    word = verdict["claim_verdict"] or verdict["outcome"]
    assert word in shown.verdict_text, (word, shown.verdict_text)
    return shown
