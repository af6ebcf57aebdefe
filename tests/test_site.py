"""``make site``: MkDocs + mkdocs-jupyter over executed notebooks, served on localhost and read
in headless Chromium (each page rendered, no console errors, every image loaded; the
``browser`` marker), and what it publishes (no absolute path of the checkout).

The executed notebooks here are the course's own notebooks with outputs attached (a text line
and a committed figure per notebook): executing the workbook costs ~27 min and is the
notebooks marker's job; this test checks the site build and what the browser sees."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import shutil
import threading
from pathlib import Path

import nbformat
import pytest

from tools import browser, site

ROOT = Path(__file__).resolve().parents[1]


def test_site_refuses_a_run_without_executed_notebooks(tmp_path: Path) -> None:
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    with pytest.raises(site.SiteError, match="make workbook"):
        site.find_executed_run(tmp_path / "runs", site.course_notebooks(ROOT))


def test_site_landing_page_links_to_notebook_pages() -> None:
    text = site._landing_page("see [01](notebooks/01_data_exploration.ipynb) and `notebooks/`")
    assert "(01_data_exploration/)" in text and "`notebooks/`" in text


def test_published_notebooks_carry_no_absolute_path_of_the_checkout() -> None:
    root = Path("/home/someone/toolrl")
    executed = json.dumps({"metadata": {"papermill": {"input_path": f"{root}/notebooks/03_x.ipynb"}},
                           "cells": [{"outputs": [{"text": f'File "{root}/toolrl_lib/x.py", line 3\n'},
                                                  {"text": f"root: {root}\n"},
                                                  {"text": f"{root}2/other"}]}]})
    published = site.publishable(executed, root)
    assert published.count(str(root)) == 1  # only inside the other folder's name
    assert "notebooks/03_x.ipynb" in published and 'File \\"toolrl_lib/x.py\\"' in published
    assert "root: .\\n" in published and f"{root}2/other" in published


def _fake_run(run: Path) -> None:
    png = next(iter(sorted((ROOT / "figures").glob("*.png"))), None)
    assert png is not None, "figures/ has no PNG to attach"
    image = base64.b64encode(png.read_bytes()).decode()
    for name in site.course_notebooks(ROOT):
        nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        code[-1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran {name}\n"),
                            nbformat.v4.new_output("display_data", data={"image/png": image})]
        nbformat.write(nb, run / name)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mkdocs") is None and not _module("mkdocs"):
        pytest.skip("mkdocs not installed (scripts/bootstrap.sh installs it)")
    run = tmp_path_factory.mktemp("run")
    _fake_run(run)
    return site.build_site(run, tmp_path_factory.mktemp("site") / "site", ROOT)


def _module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@pytest.mark.browser
def test_site_pages_render_in_chromium(built: Path) -> None:
    path = browser.chromium_path()
    if path is None:
        pytest.skip("no Chromium")
    from playwright.sync_api import sync_playwright

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(built))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    pages = [""] + [name[:-6] + "/" for name in site.course_notebooks(ROOT)]
    shots = ROOT / "runs" / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as pw:
            chrome = pw.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
            for page_path in pages:
                page = chrome.new_page()
                problems: list[str] = []
                page.on("console", lambda m, p=problems: p.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, p=problems: p.append(str(e)))
                page.on("requestfailed", lambda r, p=problems: p.append(f"failed: {r.url}"))
                response = page.goto(f"{base}/{page_path}", wait_until="networkidle")
                assert response is not None and response.ok, page_path
                assert "ToolRL Workbook" in page.title()
                images = page.evaluate("() => [...document.images].map(i => [i.src.slice(0, 60), "
                                       "i.complete && i.naturalWidth > 0])")
                assert all(ok for _, ok in images), f"{page_path}: images not loaded {images}"
                if page_path:
                    assert images, f"{page_path}: the notebook's figure is missing"
                    assert f"ran {page_path[:-1]}.ipynb" in page.inner_text("body")
                page.screenshot(path=str(shots / f"site_{page_path[:-1] or 'index'}.png"))
                assert problems == [], f"{page_path or 'index'}: {problems}"
                page.close()
            chrome.close()
    finally:
        server.shutdown()
