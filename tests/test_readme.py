"""The README's promises hold: its quick look runs as written, its links and picture exist.

The quick-look block is taken from the README itself and run in a fresh interpreter against a
temporary demo home, so the README cannot drift from the public API unnoticed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def quick_look() -> str:
    """The first ``python`` block under the "A quick look" heading."""
    section = README.split("## A quick look", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's quick look has no python block"
    return match.group(1)


@pytest.mark.slow
def test_the_quick_look_runs_as_written(tmp_path: Path) -> None:
    code = quick_look()
    assert len(code.strip().splitlines()) <= 14, "the quick look is meant to be about ten lines"
    assert "murmur_nb._" not in code, "the quick look uses only the public API"
    env = {**os.environ, "MURMUR_NB_DEMO_HOME": str(tmp_path / "demo")}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "['critic', 'docs', 'gallery', 'oracle', 'studio', 'transcribe']"
    # what the comments say: the rendering as text, peek's expected not-granted error
    assert lines[1] == "invocation · gallery.thumbs · 3 artifacts", lines[:4]
    assert "HookResult('summarize', task-start, ok" in lines[-1]
    assert "HookResult('peek', task-start, guest_error" in lines[-1] and "not-granted" in lines[-1]


def test_exactly_two_set_up_commands() -> None:
    commands = re.findall(r"```bash\n(.*?)```", README.split("## Set-up", 1)[1].split("\n## ")[0],
                          re.S)
    assert [c.strip() for c in commands] == ["bash scripts/demo", "bash scripts/test"]
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash scripts/test" in ci


def test_every_linked_file_exists() -> None:
    links = re.findall(r"\]\(((?!https?:|#)[^)]+)\)", README)
    assert links, "the README links its tutorials and picture"
    for link in links:
        assert (REPO / link).exists(), f"README links {link}, which does not exist"
    tutorials = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert all(f"notebooks/{name}" in README for name in tutorials)


def test_the_screenshot_is_small_and_real() -> None:
    picture = REPO / "docs" / "jupyterlab.png"
    assert picture.stat().st_size < 400_000
    with Image.open(picture) as image:
        assert image.format == "PNG"
        assert 600 <= image.width <= 1400

