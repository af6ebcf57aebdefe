"""The interactive path in a real browser: JupyterLab on localhost, Debian's Chromium through
Playwright. Notebook 02 runs cell by cell in the "Python 3 (toolrl)" kernel with no error and
its figures drawn; the completion browser of notebook 03 (an ipywidgets slider) renders and
answers a change. Screenshots go to ``runs/browser/`` (CI artefacts).

Skipped where no Chromium or Playwright is installed, unless ``TOOLRL_REQUIRE_BROWSER=1``
(``.ci/run`` sets it: there a missing browser is a failure, not a skip).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

from tools import browser

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[1]
ARTEFACTS = ROOT / "runs" / "browser"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = browser.chromium_path()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        if os.environ.get("TOOLRL_REQUIRE_BROWSER") == "1":
            pytest.fail("no Chromium/Playwright: run scripts/bootstrap.sh (installs both)")
        pytest.skip("no Chromium/Playwright here (scripts/bootstrap.sh installs them)")
    return path


@pytest.fixture(scope="module")
def page(chromium: str):
    from playwright.sync_api import sync_playwright

    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        chrome = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        tab = chrome.new_page(viewport={"width": 1400, "height": 1000})
        console: list[str] = []
        tab.on("pageerror", lambda error: console.append(str(error)))
        tab.console_errors = console  # type: ignore[attr-defined]
        yield tab
        chrome.close()


def _open(page, server: browser.LabServer, name: str) -> dict:
    page.goto(server.notebook_url(name))
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                           "&& window.jupyterapp.shell.currentWidget.content", timeout=120_000)
    return browser.wait_for_kernel(page, timeout_s=180)


def test_notebook_02_runs_in_jupyterlab(page, tmp_path: Path) -> None:
    name = browser.copy_notebook(ROOT / "notebooks" / "02_reward_design.ipynb", tmp_path)
    with browser.lab_server(tmp_path, ROOT, ARTEFACTS / "jupyterlab_02.log") as server:
        state = _open(page, server, name)
        assert state["kernel"] == browser.KERNEL_DISPLAY_NAME
        start = time.monotonic()
        state = browser.run_all_and_wait(page, timeout_s=900)
        seconds = time.monotonic() - start
        page.screenshot(path=str(ARTEFACTS / "02_reward_design.png"), full_page=False)
        assert browser.errors_in(state) == []
        assert all(cell["count"] for cell in state["cells"]), "a cell did not run"
        assert browser.figure_count(state) >= 1
        drawn = page.evaluate("() => [...document.querySelectorAll('.jp-RenderedImage img')]"
                              ".map(img => img.complete && img.naturalWidth > 0)")
        assert drawn and all(drawn), f"{drawn.count(False)} figure(s) did not render"
        print(f"notebook 02 ran in the browser in {seconds:.0f} s, {len(drawn)} figures")


def _widget_notebook(path: Path) -> None:
    """The completion browser of notebook 03 over a small table of completions."""
    setup = (
        "import pandas as pd\nfrom toolrl_lib.train import report\n"
        "table = pd.DataFrame([{'id': f'ex{i}', 'query': f'question number {i}', 'expected': '[]',"
        " 'before': f'before text {i}', 'before_binary': 0.0, 'after': f'after text {i}',"
        " 'after_binary': 1.0} for i in range(3)])"
    )
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": browser.KERNEL_DISPLAY_NAME,
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell("report.completion_browser(table)")]
    nbformat.write(nb, path)


def test_completion_browser_widget_renders_and_responds(page, tmp_path: Path) -> None:
    _widget_notebook(tmp_path / "widget.ipynb")
    with browser.lab_server(tmp_path, ROOT, ARTEFACTS / "jupyterlab_widget.log") as server:
        _open(page, server, "widget.ipynb")
        state = browser.run_all_and_wait(page, timeout_s=300)
        assert browser.errors_in(state) == []
        html = page.locator(".widget-html-content").first
        html.wait_for(timeout=60_000)
        assert "question number 0" in html.inner_text()
        page.screenshot(path=str(ARTEFACTS / "completion_browser_0.png"))
        handle = page.locator(".widget-slider .noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("() => document.querySelector('.widget-html-content')"
                               ".innerText.includes('question number 1')", timeout=30_000)
        text = html.inner_text()
        assert "before text 1" in text and "after text 1" in text and "question number 0" not in text
        page.screenshot(path=str(ARTEFACTS / "completion_browser_1.png"))
    assert page.console_errors == []  # type: ignore[attr-defined]
