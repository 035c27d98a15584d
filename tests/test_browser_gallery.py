"""The committed render gallery in JupyterLab (Debian Chromium, Playwright), as a reader meets it.

First opened **untrusted** and not run, as someone who cloned the repository opens it:
JupyterLab sanitizes its saved HTML, and still every video and audio player must load its
media (metadata read, a duration) and every download link must fetch the committed file
beside the notebook, byte for byte (SHA-256 in the page). Then the notebook is run, which
makes its outputs trusted, and the timeline's labels and a budget note must be readable
(WCAG AA, >= 4.5) in the light and the dark theme. Untrusted, in both themes, the timeline
keeps its layout (the sanitizer removes inline SVG, scripts and ``var()`` colours): every
tick, lane name and event label is its own box, none overlapping another, lanes on rows of
their own; and the cards' labels, like the tour's badges (the committed tour opened
untrusted too), keep a background colour. Screenshots of each state, light and
dark, go to ``test-artifacts/`` (``gallery-*.png``).
"""

from __future__ import annotations

import hashlib
import itertools
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
SVG_TEXT = ".murmur-timeline .murmur-tick, .murmur-timeline .murmur-lane, .murmur-event"
#: Each timeline label's text and where that text is drawn (the text's own box, cut to its
#: element's: a bar's label is cut to the bar); the labels of one timeline whose text
#: overlaps another's (> 1 px²).
LABELS_JS = """sel => [...document.querySelectorAll(sel)].map(chart => {
    const labels = [...chart.querySelectorAll('.murmur-tick, .murmur-lane, .murmur-event')]
        .map(el => {
            const range = document.createRange();
            range.selectNodeContents(el);
            const t = range.getBoundingClientRect(), e = el.getBoundingClientRect();
            const x = Math.max(t.left, e.left), y = Math.max(t.top, e.top);
            return {text: el.textContent, kind: el.className, x, y,
                    w: Math.min(t.right, e.right) - x, h: Math.min(t.bottom, e.bottom) - y};
        });
    const overlaps = [];
    labels.forEach((a, i) => labels.slice(i + 1).forEach(b => {
        const w = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
        const h = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
        if (w > 0 && h > 0 && w * h > 1) overlaps.push([a.text, b.text]);
    }));
    return {labels, overlaps, text: chart.innerText};
})"""
#: The background colour of each element matching a selector.
BACKGROUNDS_JS = """sel => [...document.querySelectorAll(sel)].map(el => [
    el.textContent.trim().slice(0, 30), getComputedStyle(el).backgroundColor])"""
TOUR = "01-tour.ipynb"
NOTE = ".murmur-note"
HEAD = ".murmur-artifact > div:first-child"


def _served_copy(root: Path) -> None:
    """The committed notebook and its downloads folder, as a clone has them."""
    root.mkdir(parents=True)
    shutil.copyfile(REPO / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    shutil.copyfile(REPO / "notebooks" / TOUR, root / TOUR)
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


def _timeline_laid_out(page: Any, theme: str) -> None:
    """Every timeline label its own box, none overlapping, lanes on rows of their own."""
    charts = page.evaluate(LABELS_JS, f"{OUT} .murmur-timeline")
    assert len(charts) == 2, f"{theme}: {len(charts)} timelines"  # whole, and cut to 4 events
    for chart in charts:
        labels = chart["labels"]
        lanes = [x for x in labels if x["kind"] == "murmur-lane"]
        assert len([x for x in labels if "murmur-event" in x["kind"]]) >= 4
        assert [x["text"] for x in lanes] == ["picture", "captions", "sound"][: len(lanes)]
        assert len(lanes) >= 2 and len([x for x in labels if x["kind"] == "murmur-tick"]) >= 4
        assert all(x["w"] > 4 and x["h"] > 4 for x in labels), (theme, labels)
        assert chart["overlaps"] == [], (theme, chart["overlaps"])
        rows = sorted({round(x["y"]) for x in lanes})
        assert len(rows) == len(lanes) and min(b - a for a, b in itertools.pairwise(rows)) >= 20
        # the SVG this replaces collapsed to one run-on line: "0s2s4s…picturecaptionssound…"
        assert "picturecaptions" not in chart["text"].replace("\n", "")


def _labels_keep_a_background(page: Any, selector: str, theme: str) -> None:
    found = page.evaluate(BACKGROUNDS_JS, selector)
    assert len(found) >= 3, (theme, selector, found)
    bare = [(text, bg) for text, bg in found if bg in ("rgba(0, 0, 0, 0)", "transparent")]
    assert bare == [], f"{theme}: labels without a background: {bare}"


def _untrusted(page: Any) -> Found:
    """The saved notebook, not run: players and links, the timeline's layout, the labels'
    backgrounds, screenshots, the dark theme's contrast."""
    assert set(page.evaluate(TRUSTED_JS)) == {False}, "the notebook must open untrusted"
    media = _media_play(page)
    links = _links_fetch(page)
    for theme in ("light", "dark"):
        if theme == "dark":
            _dark(page)
        _timeline_laid_out(page, f"untrusted {theme}")
        _labels_keep_a_background(page, f"{HEAD} > span:first-child", f"untrusted {theme}")
        _shot(page, f"{OUT}:has(.murmur-timeline)", "untrusted-timeline", theme)
        _shot(page, f"{OUT}:has(video)", "untrusted-video", theme)
        _shot(page, f"{OUT}:has(audio)", "untrusted-audio", theme)
        _shot(page, f"{OUT}:has(.murmur-artifact a)", "untrusted-download", theme)
    return media, links, _readable(page, "untrusted dark")


def _tour_badges_untrusted(ctx: Any, url: str) -> dict[str, Measured]:
    """The committed tour, untrusted: its badges keep a background and read in both themes."""
    page = ctx.new_page()
    page.set_viewport_size({"width": 1280, "height": 1400})
    page.goto(url, timeout=WAIT_MS)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=WAIT_MS)
    page.wait_for_selector(f"{OUT} .murmur-badge", timeout=WAIT_MS)
    assert set(page.evaluate(TRUSTED_JS)) == {False}, "the tour must open untrusted"
    measured: dict[str, Measured] = {}
    for theme in ("light", "dark"):
        if theme == "dark":
            _dark(page)
        else:
            _light(page)
        _labels_keep_a_background(page, f"{OUT} .murmur-badge", f"tour {theme}")
        measured[theme] = {f"tour {theme} badges": page.evaluate(CONTRAST_JS, ".murmur-badge")}
        _shot(page, f"{OUT}:has(.murmur-badge)", "untrusted-tour-badges", theme)
    page.close()
    return measured


def _ran(page: Any) -> Found:
    """Run all: outputs made here are trusted; the timeline and the note in both themes."""
    _light(page)
    page.evaluate(RUN_ALL_JS)
    note = f"{OUT} .murmur-note:has-text('timeline_events')"
    page.wait_for_selector(note, timeout=WAIT_MS)
    page.wait_for_selector(f"{OUT} .murmur-timeline .murmur-event", timeout=WAIT_MS)
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
        badges = _tour_badges_untrusted(ctx, url(TOUR))
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
    for theme in ("light", "dark"):
        low += _too_low(badges[theme])
    assert low == [], f"text below WCAG AA contrast: {low}"
    assert problems == [], problems
