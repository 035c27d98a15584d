"""Run a tutorial into the static HTML report of ``scripts/demo --headless``.

    python scripts/demo_report.py NOTEBOOK REPORT NOTEBOOKS

``jupyter nbconvert --execute`` with ``scripts/report_config.py`` (every widget's static HTML,
nothing from a CDN), then two things a reader of the report should not meet:

* The kernel talks to nbconvert over IPC sockets in a private runtime folder, not over TCP on
  loopback: no other account can connect to it, and ipykernel has no reason to print its
  "running over TCP without encryption" warning. The folder is short-lived and its path short
  (a Unix socket path holds at most 107 bytes, which a deep ``$HOME`` would pass).
* A link to another tutorial (the tour's "Next:" line, ``02-hosting-modules.ipynb``) is
  relative to the notebook; the report is written elsewhere, so each link to a notebook
  that is in ``NOTEBOOKS`` is rewritten to point there, relative to the report.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: ``href="name.ipynb"`` (optionally ``#anchor``), a link to a notebook beside the tutorial.
NOTEBOOK_LINK = re.compile(r'href="([^"/#?:]+\.ipynb)(#[^"]*)?"')


def convert(notebook: Path, report: Path) -> None:
    """Execute ``notebook`` and write its HTML to ``report``, the kernel on IPC sockets."""
    runtime = Path(tempfile.mkdtemp(prefix="mnb-rt-", dir="/tmp"))  # not $TMPDIR: short
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
    try:
        subprocess.run(
            [str(Path(sys.executable).parent / "jupyter"), "nbconvert", "--to", "html",
             "--execute", "--config", str(HERE / "report_config.py"),
             # an absolute socket path: a relative one is taken from nbconvert's working
             # folder by the client and from the notebook's by the kernel
             "--KernelManager.transport=ipc", f"--KernelManager.ip={runtime / 'kernel'}",
             "--ExecutePreprocessor.timeout=900",
             "--ExecutePreprocessor.kernel_name=python3", "--output-dir", str(report.parent),
             "--output", report.stem, str(notebook)],
            env=env, check=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def link_notebooks(report: Path, notebooks: Path) -> int:
    """Point ``report``'s links to notebooks at their copies in ``notebooks``; how many."""
    page = report.read_text(encoding="utf-8")
    count = 0

    def relink(match: re.Match[str]) -> str:
        nonlocal count
        target = notebooks / match[1]
        if not target.is_file():
            return match[0]
        count += 1
        return f'href="{os.path.relpath(target, report.parent)}{match[2] or ""}"'

    report.write_text(NOTEBOOK_LINK.sub(relink, page), encoding="utf-8")
    return count


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    source, out, folder = (Path(a).resolve() for a in sys.argv[1:])
    convert(source, out)
    link_notebooks(out, folder)
