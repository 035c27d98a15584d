"""The widgets used as a person uses them: JupyterLab in Debian Chromium, driven by Playwright.

A notebook of one widget per cell is run by a real kernel over a demo home (plus ``sleepy``,
a module that only sleeps, to be cancelled). The test then clicks, types, runs, cancels,
polls and pages, asserting on the DOM after each step and saving a screenshot of each state
under ``test-artifacts/`` (``widgets-*.png``), in the light theme, then switches JupyterLab
to the dark theme and measures the contrast of the key text in both (WCAG AA, >= 4.5).

A second test converts the committed tour to HTML the way ``scripts/demo --headless`` does
(with nbconvert's light and its dark theme) and opens it in Chromium with the network off:
every widget's content must be in the page, its key text readable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _jupyter import (
    BIN,
    CONTRAST_JS,
    REPO,
    artifacts_dir,
    chromium,
    lab_in_chromium,
    lab_root,
    run_in_lab,
    switch_to_dark,
    write_notebook,
)

import murmur_nb as mnb

WAIT_MS = 120_000

SLEEPY_MAIN = """
import json, sys, time
descriptor = {
    "module": "sleepy", "name": "Sleepy", "version": "1.0.0",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [{"id": "sleepy.nap", "title": "Nap", "request_schema": "nap.request",
                      "result_schema": "nap.result",
                      "effects": {"local": True, "cost_known": True}}],
    "request_schemas": {"nap.request": {"type": "object", "properties": {
        "minutes": {"type": "integer", "minimum": 1, "default": 5}}}},
    "result_schemas": {"nap.result": {"type": "object"}}, "permissions": {},
}
if sys.argv[1:] == ["describe"]:
    print(json.dumps({"protocol": "modproto.v1", "module": "sleepy", "operation": "describe",
                      "request_id": "", "ok": True, "result": descriptor, "warnings": [],
                      "execution": {"local": True}}))
else:
    time.sleep(300)
"""

CELLS = [
    "import murmur_nb as mnb\n"
    "from murmur_nb.widgets import CapabilityForm, ConversationExplorer, HookConsole, "
    "ModuleBrowser\n"
    "home = mnb.prepare_demo_home()\n"
    "host = mnb.ModuleHost(home=home.facet_home, policy=home.policy(), "
    "artifact_store=home.artifact_store)\n"
    "store = mnb.ConversationStore(home.murmur_home)",
    "ModuleBrowser(host)",
    'CapabilityForm(host, "studio.storyboard", values={"scenes": list("ABCDEF")})',
    'CapabilityForm(host, "sleepy.nap")',
    'thumbs = host.invoke("gallery.thumbs", {"count": 2})\n'
    'CapabilityForm(host, "critic.review", artifacts=list(thumbs.artifacts))',
    "ConversationExplorer(store, home.context_id)",
    "hooks = mnb.HookHost.from_config(home.murmur_yaml, conversations=store)\n"
    "HookConsole(hooks, store)",
    "from murmur_nb.widgets import LiveRun\n"
    'report = host.invoke("docs.report", {}, progress=LiveRun.in_cell)',
]
BROWSER, STORY, NAP, REVIEW, EXPLORER, CONSOLE, PROGRESS = range(1, 8)

#: Text that must be readable: badges, rows, results, the text primitive, JSON, statuses.
KEY_TEXT = ", ".join(
    [
        ".murmur-badge",
        ".murmur-cap-line",
        ".murmur-card-head b",
        ".murmur-message summary",
        ".murmur-message pre",
        ".murmur-json-leaf code",
        ".murmur-live b",
        ".murmur-artifact[data-primitive='text'] pre",
        ".murmur-artifact[data-primitive='json'] span",
        ".murmur-artifact > div:first-child",  # an artifact card's header line
        ".murmur-artifact > div:first-child > span",  # its primitive label
    ]
)


def _install_sleepy(facet_home: Path) -> None:
    folder = facet_home / "modules" / "sleepy"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.py").write_text(SLEEPY_MAIN)
    launcher = folder / "module"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I "${{0%/*}}/main.py" "$@"\n')
    launcher.chmod(0o755)


def _contrast(page: Any) -> list[tuple[str, float]]:
    measured: list[tuple[str, float]] = page.evaluate(CONTRAST_JS, KEY_TEXT)
    return measured


class _Lab:
    """The open notebook: cells by index, screenshots by name and theme."""

    def __init__(self, page: Any, theme: str = "light") -> None:
        self.page = page
        self.theme = theme
        self.shots = artifacts_dir()

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-CodeCell").nth(index)

    def out(self, index: int) -> Any:
        return self.cell(index).locator(".jp-Cell-outputWrapper")

    def see(self, index: int, selector: str) -> Any:
        found = self.out(index).locator(selector).first
        found.wait_for(state="visible", timeout=WAIT_MS)
        return found

    def shot(self, index: int, name: str) -> None:
        self.cell(index).scroll_into_view_if_needed()
        self.cell(index).screenshot(path=str(self.shots / f"widgets-{name}-{self.theme}.png"))


def _browse(lab: _Lab) -> None:
    """ModuleBrowser: a click on a capability opens its form; setup first where needed."""
    lab.see(BROWSER, ".murmur-card-head:has-text('Needs setup')")
    select = lab.see(BROWSER, ".widget-dropdown select")
    assert select.input_value() != ""  # never a blank selection
    lab.see(BROWSER, "button.murmur-cap:has-text('gallery.thumbs')").click()
    lab.see(BROWSER, ".widget-html:has-text('How many images to paint.')")
    lab.see(BROWSER, "button:has-text('Run')")
    full = lab.out(BROWSER).locator("button.murmur-cap:has-text('studio.storyboard_status')")
    assert full.evaluate("b => b.scrollWidth <= b.clientWidth + 1")  # no truncated label
    lab.shot(BROWSER, "browser-form")
    lab.see(BROWSER, "button.murmur-cap:has-text('transcribe.')").click()
    lab.see(BROWSER, ".murmur-setup ol li:has-text('whisper-cli')")
    assert lab.out(BROWSER).locator("button:has-text('Run')").count() == 0  # no form yet
    lab.shot(BROWSER, "browser-setup")


def _poll_and_stop(lab: _Lab) -> None:
    """A long-running job: Run, elapsed time, automatic polls at a visible interval, progress."""
    lab.see(STORY, "button:has-text('Run')").click()
    lab.see(STORY, ".murmur-live[data-state='polling']:has-text('every 1 s')")
    lab.see(STORY, ".murmur-elapsed:has-text(' s')")
    lab.see(STORY, ".widget-hprogress")
    lab.shot(STORY, "poll-running")
    lab.see(STORY, ".murmur-live[data-state='ok']")
    lab.see(STORY, ".widget-label:has-text('6 of 6 done')")
    lab.see(STORY, ".murmur-result details.murmur-json")
    lab.shot(STORY, "poll-done")
    # again, and Stop: the polling ends, the last result stays
    lab.see(STORY, "button:has-text('Run')").click()
    lab.see(STORY, ".murmur-live[data-state='polling']")
    lab.see(STORY, "button:has-text('Stop polling')").click()
    lab.see(STORY, ".murmur-live[data-state='stopped']")
    lab.shot(STORY, "poll-stopped")


def _cancel(lab: _Lab) -> None:
    """A run that would take five minutes: Cancel ends it within seconds."""
    lab.see(NAP, "button:has-text('Run')").click()
    lab.see(NAP, ".murmur-live[data-state='running']")
    lab.shot(NAP, "cancel-running")
    lab.see(NAP, "button:has-text('Cancel')").click()
    lab.see(NAP, ".murmur-live[data-state='cancelled']:has-text('process tree was killed')")
    lab.shot(NAP, "cancel-done")


def _pick_a_file(lab: _Lab) -> None:
    """A staged-file input: choose a session artifact (thumbnail shown), run."""
    select = lab.see(REVIEW, ".widget-dropdown select")
    options = [o.replace("\xa0", " ") for o in select.locator("option").all_inner_texts()]
    assert options[0] == "— choose a file —" and len(options) == 3
    select.select_option(index=1)
    lab.see(REVIEW, "img.murmur-thumb")
    lab.see(REVIEW, "button:has-text('Run')").click()
    lab.see(REVIEW, ".murmur-live[data-state='ok']")
    lab.see(REVIEW, ".murmur-artifact[data-primitive='markdown']")
    lab.shot(REVIEW, "file-picked")


def _page_and_filter(lab: _Lab) -> None:
    """ConversationExplorer: jump to the oldest page, type a page number and a filter, expand."""
    lab.see(EXPLORER, "button:has-text('Oldest')").click()
    lab.see(EXPLORER, ".widget-html:has-text('page 16 of 16 (oldest)')")
    lab.see(EXPLORER, ".murmur-message[data-id='m00001']")
    page_box = lab.see(EXPLORER, ".widget-inline-hbox:has-text('Page') input")
    page_box.fill("3")
    page_box.press("Enter")
    lab.see(EXPLORER, ".widget-html:has-text('page 3 of 16')")
    search = lab.see(EXPLORER, "input[placeholder='text, then Enter']")
    search.fill("error")
    search.press("Enter")  # the filter walks the whole record once, on Enter
    lab.see(EXPLORER, ".widget-html:has-text('matches in the whole record (320 messages)')")
    row = lab.see(EXPLORER, "details.murmur-message summary")
    row.click()
    lab.see(EXPLORER, "details.murmur-message[open] pre")
    lab.shot(EXPLORER, "explorer")


def _unknown_context(lab: _Lab) -> None:
    box = lab.see(CONSOLE, "input[placeholder='context id']")
    box.fill("no-such-session")
    box.press("Enter")
    lab.see(CONSOLE, ".murmur-badge:has-text('unknown context')")
    lab.see(CONSOLE, "button:has-text('Fire task-start')").click()
    lab.see(CONSOLE, ".widget-html:has-text(\"has no record in the store\")")
    lab.shot(CONSOLE, "hooks-unknown-context")


def _assert_readable(lab: _Lab) -> None:
    measured = _contrast(lab.page)
    assert len(measured) > 20, measured
    low = [(text, round(ratio, 2)) for text, ratio in measured if ratio < 4.5]
    assert low == [], f"{lab.theme}: text below WCAG AA contrast: {low}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_widgets_clicked_typed_run_cancelled_polled_and_paged_in_both_themes(
    tmp_path: Path,
) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    _install_sleepy(demo.facet_home)
    env, root = lab_root(tmp_path, demo.path)
    write_notebook(root / "widgets.ipynb", CELLS)
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("widgets.ipynb"))
        page.set_viewport_size({"width": 1280, "height": 2000})
        lab = _Lab(page)
        lab.see(PROGRESS, ".murmur-live[data-state='ok']:has-text('docs.report')")
        lab.see(PROGRESS, ".murmur-result")
        lab.shot(PROGRESS, "progress-in-a-cell")
        _browse(lab)
        _poll_and_stop(lab)
        _cancel(lab)
        _pick_a_file(lab)
        _page_and_filter(lab)
        _unknown_context(lab)
        _assert_readable(lab)
        switch_to_dark(page, WAIT_MS)
        lab.theme = "dark"
        for index, name in [
            (REVIEW, "file-picked"), (EXPLORER, "explorer"), (CONSOLE, "hooks-unknown-context"),
            (PROGRESS, "progress-in-a-cell"),
        ]:  # fmt: skip
            lab.shot(index, name)
        _assert_readable(lab)
        # every state again, so each light screenshot has its dark twin
        _browse(lab)
        _poll_and_stop(lab)
        _cancel(lab)
        _assert_readable(lab)
        stderr_mime = "application/vnd.jupyter.stderr"
        stderr = page.locator(f".jp-OutputArea-output[data-mime-type='{stderr_mime}']")
        stderr_texts = stderr.all_inner_texts()
    assert problems == [], problems
    assert stderr_texts == [], stderr_texts


def _report(tmp_path: Path, theme: str) -> Path:
    """The committed tour converted with the headless report's settings (not re-run)."""
    subprocess.run(
        [str(BIN / "jupyter"), "nbconvert", "--to", "html", "--config",
         str(REPO / "scripts" / "report_config.py"), f"--HTMLExporter.theme={theme}",
         "--output-dir", str(tmp_path), str(REPO / "notebooks" / "01-tour.ipynb")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return tmp_path / "01-tour.html"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_report_shows_every_widget_offline(tmp_path: Path, theme: str) -> None:
    report = _report(tmp_path, theme)
    with chromium(tmp_path / "profile") as ctx:
        ctx.set_offline(True)
        fetched: list[str] = []
        ctx.on("request", lambda r: fetched.append(r.url))
        page = ctx.new_page()
        page.goto(report.as_uri())
        statics = page.locator(".murmur-static")
        assert statics.count() >= 5
        for text in [
            "gallery.thumbs",  # ModuleBrowser: a capability of a card
            "Needs setup",
            "oracle.critique",  # CapabilityForm
            "tool_call_id",  # ConversationExplorer
            "not-granted",  # HookConsole
        ]:
            assert page.locator(f".murmur-static:has-text('{text}')").count() > 0, text
        # InvocationView: the result as a tree that folds without a script
        assert page.locator(".murmur-static .murmur-result details.murmur-json").count() > 0
        grid = ".murmur-static .murmur-artifact[data-primitive='image_grid'] img"
        assert page.locator(grid).count() == 6
        assert page.evaluate(
            "s => [...document.querySelectorAll(s)].every(i => i.complete && i.naturalWidth > 0)",
            grid,
        )
        shot = artifacts_dir() / f"report-offline-{theme}.png"
        page.screenshot(path=str(shot), full_page=False)
        measured = _contrast(page)
    remote = [u for u in fetched if u.startswith(("http:", "https:"))]
    widget_js = [u for u in remote if "widget" in u or "html-manager" in u]
    assert widget_js == [], widget_js
    assert len(measured) > 20, measured
    low = [(text, round(ratio, 2)) for text, ratio in measured if ratio < 4.5]
    assert low == [], f"{theme} report: text below WCAG AA contrast: {low}"
