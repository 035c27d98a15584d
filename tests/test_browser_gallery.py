"""The committed render gallery in JupyterLab (Debian Chromium, Playwright), as a reader meets it.

First opened **untrusted** and not run, as someone who cloned the repository opens it:
JupyterLab sanitizes its saved HTML, and still every video and audio player must load its
media (metadata read, a duration) and every download link must fetch the committed file
beside the notebook, byte for byte (SHA-256 in the page). Then the notebook is run, which
makes its outputs trusted, and the timeline's labels and a budget note must be readable
(WCAG AA, >= 4.5) in the light and the dark theme. Screenshots of each state, light and
dark, go to ``test-artifacts/`` (``gallery-*.png``).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from _jupyter import (
    CONTRAST_JS,
    REPO,
    RUN_ALL_JS,
    artifacts_dir,
    jupyter_env,
    lab_in_chromium,
    quiet_lab_settings,
)

import murmur_nb as mnb

WAIT_MS = 120_000
NOTEBOOK = "05-render-gallery.ipynb"
OUT = ".jp-OutputArea-output"

#: Every player has a source the browser loaded: metadata read and a duration.
MEDIA_JS = """sel => [...document.querySelectorAll(sel)].map(m => ({
    tag: m.localName, src: (m.getAttribute('src') || '').slice(0, 30),
    ready: m.readyState, duration: m.duration, error: m.error && m.error.code}))"""
MEDIA_READY_JS = """sel => {
    const all = [...document.querySelectorAll(sel)];
    all.forEach(m => m.scrollIntoView({block: 'center'}));
    return all.length > 0 && all.every(m => m.readyState >= 1 && m.duration > 0);
}"""
#: Every link in an artifact card, fetched as the browser would: status, size, SHA-256.
FETCH_LINKS_JS = """async sel => Promise.all([...document.querySelectorAll(sel)].map(async a => {
    const response = await fetch(a.href);
    const body = await response.arrayBuffer();
    const hash = await crypto.subtle.digest('SHA-256', body);
    const hex = [...new Uint8Array(hash)].map(b => b.toString(16).padStart(2, '0')).join('');
    return {text: a.textContent.trim(), href: a.getAttribute('href') || '',
            status: response.status, bytes: body.byteLength, sha256: hex};
}))"""
TRUSTED_JS = """() => {
    const cells = [...window.jupyterapp.shell.currentWidget.content.model.cells];
    return cells.filter(c => c.type === 'code').map(c => c.trusted);
}"""
#: The text the themes must keep readable here: the timeline's labels, the budget note, the
#: cards' header lines.
SVG_TEXT = ".murmur-artifact svg text"
NOTE = ".murmur-note"
HEAD = ".murmur-artifact > div:first-child"


def _served_copy(root: Path) -> None:
    """The committed notebook and its downloads folder, as a clone has them."""
    root.mkdir(parents=True)
    shutil.copyfile(REPO / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    shutil.copytree(REPO / "notebooks" / "downloads", root / "downloads")


def _committed_downloads() -> dict[str, str]:
    folder = REPO / "notebooks" / "downloads"
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def _shot(page: Any, selector: str, name: str, theme: str) -> None:
    target = page.locator(selector).first
    target.scroll_into_view_if_needed()
    target.screenshot(path=str(artifacts_dir() / f"gallery-{name}-{theme}.png"))


def _dark(page: Any) -> None:
    page.evaluate(
        "async () => window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Dark'})"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=WAIT_MS)


def _light(page: Any) -> None:
    page.evaluate(
        "async () => window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Light'})"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=WAIT_MS)


def _media_play(page: Any) -> list[dict[str, Any]]:
    players = f"{OUT} .murmur-artifact video, {OUT} .murmur-artifact audio"
    page.wait_for_function(MEDIA_READY_JS, arg=players, timeout=WAIT_MS)
    media: list[dict[str, Any]] = page.evaluate(MEDIA_JS, players)
    return media


def _links_fetch(page: Any) -> list[dict[str, Any]]:
    links: list[dict[str, Any]] = page.evaluate(FETCH_LINKS_JS, f"{OUT} .murmur-artifact a")
    return links


def _check_links(links: list[dict[str, Any]]) -> None:
    committed = _committed_downloads()
    assert sorted(link["text"] for link in links) == ["report-bundle.zip", "report.pdf"], links
    for link in links:
        assert link["status"] == 200, link
        name = link["href"].rsplit("/", 1)[-1].split("?", 1)[0]
        assert committed.get(name) == link["sha256"], (link, committed)


def _readable(page: Any, theme: str) -> Measured:
    """Contrast ratios of the key text, by kind."""
    return {
        f"{theme} {kind}": page.evaluate(CONTRAST_JS, sel)
        for kind, sel in (("timeline", SVG_TEXT), ("note", NOTE), ("header", HEAD))
    }


def _too_low(measured: Measured) -> list[tuple[str, str, float]]:
    return [
        (kind, text, round(ratio, 2))
        for kind, found in measured.items()
        for text, ratio in found
        if ratio < 4.5
    ]


Measured = dict[str, list[tuple[str, float]]]
Found = tuple[list[dict[str, Any]], list[dict[str, Any]], Measured]


def _untrusted(page: Any) -> Found:
    """The saved notebook, not run: players and links, screenshots, the dark theme's contrast."""
    assert set(page.evaluate(TRUSTED_JS)) == {False}, "the notebook must open untrusted"
    media = _media_play(page)
    links = _links_fetch(page)
    for theme in ("light", "dark"):
        if theme == "dark":
            _dark(page)
        _shot(page, f"{OUT}:has(video)", "untrusted-video", theme)
        _shot(page, f"{OUT}:has(audio)", "untrusted-audio", theme)
        _shot(page, f"{OUT}:has(.murmur-artifact a)", "untrusted-download", theme)
    return media, links, _readable(page, "untrusted dark")


def _ran(page: Any) -> Found:
    """Run all: outputs made here are trusted; the timeline and the note in both themes."""
    _light(page)
    page.evaluate(RUN_ALL_JS)
    note = f"{OUT} .murmur-note:has-text('timeline_events')"
    page.wait_for_selector(note, timeout=WAIT_MS)
    page.wait_for_selector(f"{OUT} .murmur-artifact svg text", timeout=WAIT_MS)
    assert set(page.evaluate(TRUSTED_JS)) == {True}
    media = _media_play(page)
    links = _links_fetch(page)
    measured = _readable(page, "light")
    timeline = f"{OUT}:has(.murmur-note:has-text('timeline_events'))"
    _shot(page, timeline, "timeline-note", "light")
    _shot(page, f"{OUT}:has(.murmur-artifact a[download])", "download", "light")
    _dark(page)
    measured |= _readable(page, "dark")
    _shot(page, timeline, "timeline-note", "dark")
    _shot(page, f"{OUT}:has(.murmur-artifact a[download])", "download", "dark")
    return media, links, measured


def _check_media(media: list[dict[str, Any]]) -> None:
    assert sorted(m["tag"] for m in media) == ["audio", "video"], media
    assert all(m["error"] is None and m["src"].startswith("data:") for m in media), media


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_committed_gallery_plays_and_downloads_untrusted_then_reads_in_both_themes(
    tmp_path: Path,
) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    env = jupyter_env(tmp_path, demo.path)
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "jupyter" / "data")  # no notebook trusted yet
    quiet_lab_settings(env)
    root = tmp_path / "root"
    _served_copy(root)
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page = ctx.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.goto(url(NOTEBOOK), timeout=WAIT_MS)
        page.wait_for_function("() => window.jupyterapp !== undefined", timeout=WAIT_MS)
        page.wait_for_selector(f"{OUT} .murmur-artifact", timeout=WAIT_MS)
        page.set_viewport_size({"width": 1280, "height": 1400})
        untrusted_media, untrusted_links, untrusted_dark = _untrusted(page)
        ran_media, ran_links, measured = _ran(page)
    _check_media(untrusted_media)
    _check_links(untrusted_links)
    _check_media(ran_media)
    _check_links(ran_links)
    for theme in ("light", "dark"):
        assert len(measured[f"{theme} timeline"]) >= 20, measured  # ticks, lanes, events
        assert len(measured[f"{theme} note"]) >= 1 and len(measured[f"{theme} header"]) >= 15
    assert len(untrusted_dark["untrusted dark note"]) >= 1, untrusted_dark
    low = _too_low(measured) + _too_low(untrusted_dark)
    assert low == [], f"text below WCAG AA contrast: {low}"
    assert problems == [], problems
