"""BatchView as a person uses it: JupyterLab in Debian Chromium, driven by Playwright.

A notebook starts two real batches in the background (tests/modules/batchy.py, sandboxed)
and shows each in a ``BatchView``. The test watches the first one's progress bar move and
its row list fill in, then clicks a row and sees that row's invocation; it clicks Cancel
on the second, slow one and sees it stop with its finished rows kept. Screenshots go to
``test-artifacts/batch-*.png``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from _jupyter import (
    WIDGETS_READY_JS,
    artifacts_dir,
    lab_in_chromium,
    lab_root,
    run_in_lab,
    write_notebook,
)

FACET_MODULES = [("batchy", "batchy")]
WAIT_MS = 120_000
ROWS, SLOW_ROWS = 12, 40

SETUP = """
import pandas as pd
import murmur_nb as mnb
from murmur_nb.widgets import BatchView
host = mnb.ModuleHost(home={home!r})
df = pd.DataFrame({{"n": range({rows}), "fail_every": 5, "sleep": 2.5}},
                  index=pd.Index([f"k{{i}}" for i in range({rows})], name="key"))
"""
CELLS = [
    SETUP,
    'fast = host.map("batchy.work", df, concurrency=2, background=True, progress=False,\n'
    "                journal=None)\n"
    "BatchView(fast, refresh_s=0.1)",
    f'slow = host.map("batchy.work", [{{"n": i, "sleep": 3.0}} for i in range({SLOW_ROWS})],\n'
    "                concurrency=2, background=True, progress=False, journal=None)\n"
    "BatchView(slow, refresh_s=0.1)",
]
FAST, SLOW = 1, 2

#: Run every cell, without waiting for the run to end (the batches are watched as they run).
START_ALL_JS = """async () => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;""" + WIDGETS_READY_JS + """
    app.commands.execute('notebook:run-all-cells');
}"""


def _notebook(path: Path, home: Path) -> None:
    write_notebook(path, [CELLS[0].format(home=str(home), rows=ROWS), *CELLS[1:]])


#: Whether the row list stays inside the BatchView and nothing in it scrolls sideways.
FITS_JS = """out => {
    const select = out.querySelector('.widget-select');
    const view = select.parentElement;
    const overflowing = [out, ...out.querySelectorAll('*')].filter(
        el => el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0
              && ['auto', 'scroll'].includes(getComputedStyle(el).overflowX))
        .map(el => el.className.slice(0, 60) + ` ${el.scrollWidth} > ${el.clientWidth}`);
    return {overflowing, past: select.getBoundingClientRect().right
                                - view.getBoundingClientRect().right};
}"""


def _out(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(".jp-Cell-outputWrapper")


def _settled(view: Any) -> int:
    """The bar's settled rows, read from the counts line (``<n>/<total> settled``)."""
    counts = view.locator(".widget-html:has-text('settled')").first.inner_text()
    found = re.search(r"(\d+)/\d+ settled", counts)
    return int(found.group(1)) if found else -1


def _bar_percent(view: Any) -> float:
    style = view.locator(".progress-bar").first.get_attribute("style") or ""
    found = re.search(r"width:\s*([\d.]+)%", style)
    return float(found.group(1)) if found else -1.0


def _wait_text(page: Any, element: Any, pattern: str) -> None:
    """Wait until ``element``'s rendered text matches ``pattern`` (a JavaScript regex)."""
    page.wait_for_function(
        "([el, p]) => new RegExp(p).test(el.innerText)", arg=[element.element_handle(), pattern],
        timeout=WAIT_MS,
    )  # fmt: skip


def _watch_progress(page: Any) -> list[tuple[int, float]]:
    """``(settled, bar %)`` each time either changes, until the first batch is done."""
    view = _out(page, FAST)
    view.locator(".progress-bar").first.wait_for(state="attached", timeout=WAIT_MS)
    seen: list[tuple[int, float]] = []
    end = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < end:
        now = (_settled(view), _bar_percent(view))
        if not seen or now != seen[-1]:
            seen.append(now)
        if now[0] == ROWS:
            break
        page.wait_for_timeout(100)
    return seen


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_batch_view_progress_moves_a_row_click_shows_it_and_cancel_stops(
    tmp_path: Path, facet_home: Path
) -> None:
    env, root = lab_root(tmp_path, facet_home)
    _notebook(root / "batch.ipynb", facet_home)
    shots = artifacts_dir()
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("batch.ipynb"), run_js=START_ALL_JS)
        page.set_viewport_size({"width": 1280, "height": 2400})

        # progress moves: settled rows and the bar grow step by step, to the end
        seen = _watch_progress(page)
        fast = _out(page, FAST)
        fast.screenshot(path=str(shots / "batch-finished.png"))
        settled = [s for s, _ in seen if s >= 0]
        assert settled[-1] == ROWS, seen
        assert len({s for s in settled if 0 < s < ROWS}) >= 2, seen  # seen midway, twice
        assert settled == sorted(settled), seen
        assert seen[-1][1] == 100.0, seen
        assert "9 ok" in fast.inner_text() and "3 failed" in fast.inner_text()  # k0, k5, k10
        assert fast.locator("button:has-text('Cancel')").is_disabled()

        # a row click shows its invocation: the result of k4, then the error of k5
        listing = fast.locator("select")
        assert listing.locator("option").count() == ROWS
        detail = fast.locator(".widget-output").first
        listing.locator("option", has_text="k4 · ok").click()
        _wait_text(page, detail, r"square\W+16")
        fast.screenshot(path=str(shots / "batch-row-clicked.png"))
        listing.locator("option", has_text="k5 · failed").click()
        _wait_text(page, detail, "bad_number")
        # the detail shows the picked row only (k4's result is gone; a duration may hold "16")
        assert not re.search(r"square\W+16", detail.inner_text())

        # Cancel: the slow batch stops, its finished rows kept, the rest not run
        slow = _out(page, SLOW)
        slow.locator(".widget-html:has-text(' ok')").first.wait_for(timeout=WAIT_MS)
        page.wait_for_function(
            "el => /[1-9]\\d* ok/.test(el.innerText)", arg=slow.element_handle(),
            timeout=WAIT_MS,
        )  # fmt: skip
        slow.locator("button:has-text('Cancel')").click()
        # the running rows end (their processes killed) and the batch settles as cancelled
        slow.locator(".widget-html:has-text('cancelled')").first.wait_for(timeout=WAIT_MS)
        page.wait_for_function(
            "el => /0 running/.test(el.innerText)", arg=slow.element_handle(), timeout=WAIT_MS
        )
        counts = slow.locator(".widget-html:has-text('settled')").first.inner_text()
        found = re.search(r"(\d+) ok (\d+) failed 0 running (\d+) not run", counts)
        assert found, counts
        ok, failed, not_run = map(int, found.groups())
        assert ok >= 1 and failed == 0 and not_run > SLOW_ROWS // 2, counts
        assert f"{SLOW_ROWS}/{SLOW_ROWS} settled" in counts
        assert slow.locator("button:has-text('Cancel')").is_disabled()
        assert slow.locator("select option").count() == ok + not_run
        # the bar holds the rows that ran, not 100%, and says the batch was cancelled
        slow.locator(".murmur-batch-bar[data-state='cancelled']").wait_for(timeout=WAIT_MS)
        said = slow.locator(".murmur-batch-bar").inner_text()
        percent = _bar_percent(slow)
        print("cancelled bar:", said, percent, "%")
        assert said.startswith(f"{ok}/{SLOW_ROWS} run · cancelled"), said
        assert abs(percent - 100 * ok / SLOW_ROWS) < 0.5, (percent, ok)
        slow.screenshot(path=str(shots / "batch-cancelled.png"))
        for view in (fast, slow):  # the row list inside its view: no stray sideways scroll
            fits = view.evaluate(FITS_JS)
            print("row list:", fits)
            assert fits["overflowing"] == [] and fits["past"] <= 0.5, fits
    assert problems == [], problems
