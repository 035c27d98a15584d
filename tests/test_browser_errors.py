"""A module's failure, and an Invocation at the end of a cell, as a person sees them: JupyterLab
in Debian Chromium, light and dark (issue 24).

The notebook's kernel runs the real ``tests/modules/crashy.py`` (it raises: a traceback on
stderr, exit status 1) through ``progress=LiveRun.in_cell``, and ends another cell with
``host.invoke(...)``. The test asserts what is on the page: the LiveRun's error box with the
module's traceback tail, a short error output (not the host's frames), the Invocation's card
(not a dataclass repr), and the contrast of their text in both themes (WCAG AA, >= 4.5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _jupyter import (
    CONTRAST_JS,
    artifacts_dir,
    lab_in_chromium,
    lab_root,
    run_in_lab,
    switch_to_dark,
    write_notebook,
)
from _modules import install

import murmur_nb as mnb

WAIT_MS = 120_000
CRASH, CARD = 1, 2
KEY_TEXT = ", ".join([
    ".murmur-error-box pre",
    ".murmur-error-box .murmur-badge",
    ".murmur-invocation-card b",
    ".murmur-invocation-card .murmur-badge",
    ".murmur-invocation-card summary",
])  # fmt: skip


def _notebook(path: Path, home: Path, out: Path) -> None:
    cells = [
        "import murmur_nb as mnb\n"
        "from murmur_nb.widgets import LiveRun\n"
        f"host = mnb.ModuleHost(home={str(home)!r}, "
        f"policy=mnb.Policy(roots={{'out': {str(out)!r}}}))",
        'host.invoke("crashy.raise", {}, progress=LiveRun.in_cell)',
        'host.invoke("good.make", {})',
    ]
    write_notebook(path, cells)


def _out(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(".jp-Cell-outputWrapper")


def _see(page: Any, index: int, selector: str) -> Any:
    found = _out(page, index).locator(selector).first
    found.wait_for(state="visible", timeout=WAIT_MS)
    return found


def _check(page: Any, theme: str) -> None:
    shots = artifacts_dir()
    box = _see(page, CRASH, ".murmur-live[data-state='failed'] .murmur-error-box")  # it ran
    text = box.inner_text()
    assert "exit: exited with status 1" in text and "ZeroDivisionError: division by zero" in text
    assert "in load_model" in text  # the module's own frame, from its traceback
    stderr = "application/vnd.jupyter.stderr"
    error = _see(page, CRASH, f".jp-OutputArea-output[data-mime-type='{stderr}']")
    said = error.inner_text()
    assert "ProtocolViolation (protocol_violation)" in said and "exited with status 1" in said
    assert "_modules/host.py" not in said and "site-packages" not in said
    assert len(said.splitlines()) < 40
    _out(page, CRASH).screenshot(path=str(shots / f"errors-crash-{theme}.png"))
    card = _see(page, CARD, ".murmur-invocation-card[data-state='ok']")
    shown = _out(page, CARD).inner_text()
    assert "good.make" in shown and "a0 · image/png" in shown and "confinement:" in shown
    assert "Invocation(" not in shown and "request_id" not in shown
    assert card.bounding_box()["height"] < 300  # a compact card, not a 20-line repr
    _out(page, CARD).screenshot(path=str(shots / f"errors-invocation-card-{theme}.png"))
    measured: list[tuple[str, float]] = page.evaluate(CONTRAST_JS, KEY_TEXT)
    assert len(measured) >= 5, measured
    low = [(t, round(r, 2)) for t, r in measured if r < 4.5]
    assert low == [], f"{theme}: text below WCAG AA contrast: {low}"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_crash_and_an_invocation_card_in_jupyterlab_light_and_dark(tmp_path: Path) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    home = tmp_path / "home"
    install(home, "crashy", "crashy")
    install(home, "good")
    out = tmp_path / "out"
    out.mkdir()
    env, root = lab_root(tmp_path, demo.path)
    _notebook(root / "errors.ipynb", home, out)
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("errors.ipynb"))
        # run-all stops at the raising cell: run the card's cell on its own
        _see(page, CRASH, ".murmur-error-box")
        page.locator(".jp-Notebook .jp-CodeCell").nth(CARD).click()
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-cell')")
        _check(page, "light")
        switch_to_dark(page, WAIT_MS)
        _check(page, "dark")
    assert problems == [], problems
