"""``scripts/demo``, the README's main command, run for real.

The interactive form ends in JupyterLab (its page and widgets are proved by
``test_browser.py``); the headless form runs end to end from a fresh clone in
``test_setup_commands.py`` (set-up, a chosen home, the tour's report). Here: its arguments.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
