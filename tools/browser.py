"""Drive the workbook the way a learner does: a JupyterLab server on localhost and a real
Chromium (Debian's ``chromium``, through Playwright; no browser download).

Used by the ``browser`` tests. The server runs on a copy of the notebooks in a scratch folder
(outputs never reach the committed files) with ``TOOLRL_ROOT`` pointing at the checkout, the
app exposed to the page (``expose_app_in_browser``) so that a test can run JupyterLab commands
and read the notebook model (outputs, errors) instead of scraping pixels.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
KERNEL_DISPLAY_NAME = "Python 3 (toolrl)"

# JavaScript run in the page: every code cell of the current notebook, its execution count and
# its outputs' types / mime types, and the kernel's display name.
NOTEBOOK_STATE_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model) return null;
  const cells = [];
  for (const cell of panel.content.model.cells) {
    if (cell.type !== 'code') continue;
    const outputs = cell.outputs.toJSON().map(o => ({
      type: o.output_type, mimes: Object.keys(o.data || {}),
      ename: o.ename || null, evalue: o.evalue || null }));
    cells.push({count: cell.executionCount, outputs});
  }
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {cells, kernel: panel.sessionContext.kernelDisplayName,
          status: kernel ? kernel.status : 'none',
          busy: panel.content.widgets.some(w => w.promptNode && w.promptNode.textContent.includes('*'))};
}"""


def chromium_path() -> str | None:
    """The system Chromium (``$TOOLRL_CHROMIUM`` first), or None when there is none."""
    for candidate in (os.environ.get("TOOLRL_CHROMIUM", ""), *CHROMIUM_CANDIDATES):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LabServer:
    url: str
    token: str
    root: Path
    log: Path

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}"


@contextmanager
def lab_server(root: Path, project: Path, log: Path | None = None,
               timeout_s: float = 300.0) -> Iterator[LabServer]:
    """A JupyterLab server on 127.0.0.1 serving ``root``; stopped (and waited for) on exit."""
    import urllib.request

    port, token = free_port(), secrets.token_hex(16)
    log = log or root / "jupyterlab.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TOOLRL_ROOT": str(project), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root",
               "--LabApp.expose_app_in_browser=True", "--ServerApp.disable_check_xsrf=True",
               "--LabServerApp.workspaces_dir=" + str(root / ".workspaces")]
    with log.open("w") as handle:
        proc = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {log}") from None
                time.sleep(0.5)
        yield LabServer(url, token, root, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def copy_notebook(source: Path, root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, root / source.name)
    return source.name


def wait_for_kernel(page: Any, timeout_s: float) -> dict[str, Any]:
    """Poll the notebook model until its kernel is idle; returns the state."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = page.evaluate(NOTEBOOK_STATE_JS)
        if state and state["status"] == "idle":
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"kernel not idle after {timeout_s:.0f} s: {state}")
        time.sleep(1)


def run_all_and_wait(page: Any, timeout_s: float) -> dict[str, Any]:
    """``notebook:run-all-cells``, then wait until every code cell has run (or one failed)."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    deadline = time.monotonic() + timeout_s
    while True:
        time.sleep(2)
        state = page.evaluate(NOTEBOOK_STATE_JS)
        errors = [o for c in state["cells"] for o in c["outputs"] if o["type"] == "error"]
        done = all(c["count"] for c in state["cells"]) and not state["busy"] and state["status"] == "idle"
        if done or (errors and state["status"] == "idle"):
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"notebook still running after {timeout_s:.0f} s")


def errors_in(state: dict[str, Any]) -> list[str]:
    return [f"{o['ename']}: {o['evalue']}" for c in state["cells"] for o in c["outputs"] if o["type"] == "error"]


def figure_count(state: dict[str, Any]) -> int:
    return sum("image/png" in o["mimes"] for c in state["cells"] for o in c["outputs"])
