"""The course as a static website: the README as landing page, one page per executed notebook.

MkDocs + mkdocs-jupyter rather than Jupyter Book: both render executed notebooks, but Jupyter
Book 2 builds through Node's ``mystmd`` and fetches its theme at build time, while MkDocs is
pip-only and builds offline (the CI box and most learners' laptops). The site is built from a
workbook run folder (``runs/<stamp>/`` with the executed ``NN_*.ipynb``), never from the
committed notebooks, which have no outputs; notebooks are not re-executed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from toolrl_lib.paths import project_root

NOTEBOOK_PATTERN = re.compile(r"^\d\d_.*\.ipynb$")


class SiteError(RuntimeError):
    """The site cannot be built (no executed run, a failed build); says what to do."""


def course_notebooks(root: Path | None = None) -> list[str]:
    folder = (root or project_root()) / "notebooks"
    return sorted(p.name for p in folder.iterdir() if NOTEBOOK_PATTERN.match(p.name))


def has_outputs(path: Path) -> bool:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def find_executed_run(runs: Path | None = None, names: list[str] | None = None) -> Path:
    """The newest ``runs/*/`` folder that holds every course notebook, executed."""
    runs = runs or project_root() / "runs"
    names = names or course_notebooks()
    candidates = [d for d in runs.iterdir() if d.is_dir()] if runs.is_dir() else []
    for folder in sorted(candidates, key=lambda d: d.stat().st_mtime, reverse=True):
        if all((folder / n).is_file() and has_outputs(folder / n) for n in names):
            return folder
    raise SiteError(f"no run folder under {runs} with all of {', '.join(names)} executed: "
                    "run `make workbook` first, or pass --run DIR")


def _landing_page(readme: str) -> str:
    """README text with links to the notebooks pointed at their pages."""
    return re.sub(r"\(notebooks/(\d\d_[^)]*?)\.ipynb\)", r"(\1/)", readme)


def publishable(text: str, root: Path) -> str:
    """An executed notebook's text without the project root's absolute path: outputs, tracebacks
    and metadata that name a file in the checkout show it relative to the project root, so that
    the site shows no absolute path of the machine that ran the workbook."""
    for prefix in sorted({str(root), str(root.resolve())}, key=len, reverse=True):
        text = text.replace(prefix + "/", "")
        text = re.sub(re.escape(prefix) + r"(?![\w.-])", ".", text)  # the root itself, not /root2
    return text


def mkdocs_config(names: list[str]) -> dict:
    titles = {n: n[:-6].replace("_", " ", 1).replace("_", " ") for n in names}
    return {
        "site_name": "ToolRL Workbook",
        "site_description": "RL for LLM tool calling, as a course of executed notebooks",
        "docs_dir": "docs",
        "use_directory_urls": True,
        # No web fonts: the site must render offline without failed requests.
        "theme": {"name": "material", "font": False, "features": ["navigation.instant"]},
        "plugins": [{"mkdocs-jupyter": {"execute": False, "include_source": True,
                                         "include_requirejs": False, "ignore_h1_titles": True}}],
        "nav": [{"Home": "index.md"}] + [{titles[n]: n} for n in names],
        "markdown_extensions": ["tables", "fenced_code", "toc"],
    }


def build_site(run_dir: Path | None = None, out_dir: Path | None = None, root: Path | None = None) -> Path:
    """Build the site into ``out_dir`` (default ``<root>/site``); returns it."""
    root = root or project_root()
    names = course_notebooks(root)
    run_dir = Path(run_dir) if run_dir else find_executed_run(root / "runs", names)
    missing = [n for n in names if not (run_dir / n).is_file()]
    if missing:
        raise SiteError(f"{run_dir}: executed notebooks missing: {', '.join(missing)}")
    out = Path(out_dir) if out_dir else root / "site"
    with tempfile.TemporaryDirectory(prefix="toolrl-site-") as tmp:
        work = Path(tmp)
        docs = work / "docs"
        docs.mkdir()
        (docs / "index.md").write_text(_landing_page((root / "README.md").read_text(encoding="utf-8")),
                                       encoding="utf-8")
        for name in names:
            text = (run_dir / name).read_text(encoding="utf-8")
            (docs / name).write_text(publishable(text, root), encoding="utf-8")
        if (root / "figures").is_dir():
            shutil.copytree(root / "figures", docs / "figures")
        (work / "mkdocs.yml").write_text(yaml.safe_dump(mkdocs_config(names), sort_keys=False))
        staging = work / "site"
        done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--clean", "-f",
                               str(work / "mkdocs.yml"), "-d", str(staging)], capture_output=True, text=True)
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-5:])
            raise SiteError(f"mkdocs build failed: {tail}")
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(staging, out)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.site [--run DIR] [--out DIR]`` (``make site``)."""
    import argparse

    parser = argparse.ArgumentParser(description="build the course website from executed notebooks")
    parser.add_argument("--run", type=Path, help="run folder with executed notebooks (default: newest)")
    parser.add_argument("--out", type=Path, help="output folder (default: site/)")
    args = parser.parse_args(argv)
    try:
        out = build_site(args.run, args.out)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"site: {out}/index.html (serve it: python -m http.server -d {out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
