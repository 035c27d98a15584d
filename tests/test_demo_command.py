"""``scripts/demo``, the README's main command, run for real.

The interactive form ends in JupyterLab (its page and widgets are proved by
``test_browser.py``); the headless form runs end to end from a fresh clone in
``test_setup_commands.py`` (set-up, a chosen home, the tour's report). Here: its arguments,
and its report step on a small notebook.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "scripts" / "demo"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MURMUR_NB", "PYTEST"))}
    env["HOME"] = str(tmp_path / "user")  # the default demo home must not be the one used
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    env["MURMUR_NB_CACHE"] = os.environ.get(
        "MURMUR_NB_CACHE", str(Path.home() / ".cache" / "murmur-nb")
    )
    return env


def test_unknown_arguments_are_refused_with_the_usage(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(DEMO), "--frobnicate"], env=_env(tmp_path), capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown argument '--frobnicate'" in done.stderr
    assert "--headless" in done.stderr and "--home DIR" in done.stderr
    helped = subprocess.run(
        ["bash", str(DEMO), "--help"], env=_env(tmp_path), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert helped.returncode == 0 and "JupyterLab at the tour" in helped.stdout


def test_the_headless_report_step_is_quiet_and_its_next_links_resolve(tmp_path: Path) -> None:
    """Issue 40: ``scripts/demo --headless`` printed ipykernel's "running over TCP without
    encryption" warning, and the report's "Next:" links named notebooks that were not beside
    it. Its report step (``scripts/demo_report.py``) runs a notebook holding the tour's own
    "Next:" cell with the kernel on IPC sockets, and points each link at the working copy."""
    tour = nbformat.read(REPO / "notebooks" / "01-tour.ipynb", as_version=4)
    (following,) = [c for c in tour.cells if c.source.startswith("Next:")]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import murmur_nb as mnb\nprint(mnb.__version__)"),
                nbformat.v4.new_markdown_cell(following.source)]  # fmt: skip
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    source = tmp_path / "checkout" / "01-tour.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    work = tmp_path / "home" / "notebooks"  # where scripts/demo copies the tutorials
    work.mkdir(parents=True)
    for name in re.findall(r"\(([^)]+\.ipynb)\)", following.source):
        shutil.copyfile(REPO / "notebooks" / name, work / name)
    report = tmp_path / "home" / "report" / "01-tour.html"
    report.parent.mkdir()
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo_report.py"), str(source), str(report),
         str(work)], capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "without encryption" not in done.stdout + done.stderr, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    page = report.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"#]+\.ipynb)"', page)
    assert len(links) == 4, links
    for link in links:
        assert (report.parent / link).resolve().is_file(), link
        assert (report.parent / link).resolve().parent == work
