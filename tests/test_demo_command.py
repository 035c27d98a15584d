"""``scripts/demo``, the README's main command, run for real.

The interactive form ends in JupyterLab (its page and widgets are proved by
``test_browser.py``); here the headless form runs end to end — set-up, demo home in a chosen
folder, the tour executed — and its HTML report is checked.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_headless_demo_prepares_the_chosen_home_and_writes_the_tour_report(
    tmp_path: Path,
) -> None:
    home = tmp_path / "chosen home"
    report = tmp_path / "out" / "tour.html"
    done = subprocess.run(
        ["bash", str(DEMO), "--headless", "--home", str(home), "--report", str(report)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=850, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert f"preparing the demo home in {home}" in done.stdout
    assert "6 modules: critic, docs, gallery, oracle, studio, transcribe (needs setup)" in (
        done.stdout
    )
    assert f"report: {report}" in done.stdout
    # The home the user chose holds everything; the default one was never made.
    assert (home / "facet-studio" / "modules" / "gallery" / "module").is_file()
    assert (home / "murmur" / "hooks" / "summarize.wasm").read_bytes()[:4] == b"\0asm"
    assert not (tmp_path / "user" / ".murmur-nb-demo").exists()
    page = report.read_text()
    assert "Traceback (most recent call last)" not in page
    # Widgets are saved as their static HTML, so the report shows them offline too.
    assert page.count('class="murmur-static"') >= 5
    assert "application/vnd.jupyter.widget-state+json" not in page
    assert "Needs setup" in page and "cost unknown" in page
    for primitive in ("image", "table", "markdown", "json"):
        assert f'data-primitive="{primitive}"' in page, primitive
    assert "not-granted" in page and "320 messages" in page
