"""The compaction viewer as a person uses it: JupyterLab in Debian Chromium, light and dark.

A notebook replays the demo hook (componentize-py) over the demo record in a real kernel and
shows a :class:`~murmur_nb.widgets.CompactionViewer`. The test checks the whole-record view
(dropped messages struck through, the summary marked new), picks another window in the
dropdown, and measures the contrast of the viewer's text in both themes (WCAG AA, >= 4.5),
saving ``replay-viewer-*.png`` screenshots under ``test-artifacts/``.
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

import murmur_nb as mnb

WAIT_MS = 120_000
CELLS = [
    "import murmur_nb as mnb\n"
    "from murmur_nb.widgets import CompactionViewer\n"
    "home = mnb.prepare_demo_home()\n"
    "store = mnb.ConversationStore(home.murmur_home)\n"
    "hooks = mnb.HookHost.from_config(home.murmur_yaml, conversations=store)\n"
    "results = mnb.replay(hooks, home.context_id, windows=100, hooks='summarize', progress=False)",
    "CompactionViewer(results, store)",
]
KEY_TEXT = ", ".join([
    ".murmur-compaction-head b", ".murmur-compaction .murmur-badge", ".murmur-msg-head b",
    ".murmur-msg-head code", ".murmur-msg-body",
])  # fmt: skip


def _notebook(path: Path) -> None:
    write_notebook(path, CELLS)


def _check(page: Any, theme: str) -> None:
    out = page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".jp-Cell-outputWrapper")
    head = out.locator(".murmur-compaction-head").first
    head.wait_for(state="visible", timeout=WAIT_MS)
    assert "whole record" in head.inner_text() and "320 → 13" in head.inner_text()
    assert out.locator(".murmur-compaction-before del").count() == 308
    new = out.locator(".murmur-compaction-after .murmur-msg-new")
    assert new.count() == 1 and "Summary of earlier turns" in new.inner_text()
    # strike-through is drawn, not only present in the markup
    line = out.locator(".murmur-compaction-before del").first.evaluate(
        "e => getComputedStyle(e).textDecorationLine")
    assert "line-through" in line
    out.screenshot(path=str(artifacts_dir() / f"replay-viewer-whole-{theme}.png"))
    _readable(page, theme)
    out.locator(".widget-dropdown select").nth(2).select_option(label="100 messages")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.murmur-compaction-head')]"
        ".some(e => e.innerText.includes('first 100 messages'))", timeout=WAIT_MS)
    assert out.locator(".murmur-compaction-before del").count() == 90
    out.screenshot(path=str(artifacts_dir() / f"replay-viewer-window-{theme}.png"))
    _readable(page, theme)
    out.locator(".widget-dropdown select").nth(2).select_option(label="320 messages (whole)")
    head.filter(has_text="whole record").wait_for(state="visible", timeout=WAIT_MS)


def _readable(page: Any, theme: str) -> None:
    measured: list[tuple[str, float]] = page.evaluate(CONTRAST_JS, KEY_TEXT)
    assert len(measured) > 50, measured
    low = [(text[:40], round(ratio, 2)) for text, ratio in measured if ratio < 4.5]
    assert low == [], f"{theme}: text below WCAG AA contrast: {low[:10]}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_compaction_viewer_in_jupyterlab_light_and_dark(tmp_path: Path) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    env, root = lab_root(tmp_path, demo.path)
    _notebook(root / "replay.ipynb")
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("replay.ipynb"))
        page.set_viewport_size({"width": 1280, "height": 2000})
        _check(page, "light")
        switch_to_dark(page, WAIT_MS)
        _check(page, "dark")
        stderr = page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        ).all_inner_texts()
    assert problems == [], problems
    assert stderr == [], stderr
