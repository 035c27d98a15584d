"""A replay comparison and a hook check report as a person sees them: JupyterLab in Chromium.

Issue 40: ``compare_replays`` showed every column of both sides (23 of them, mostly ``-``),
3,668 px wide in an 868 px output, rows about 150 px tall; ``check_hook`` showed a table in
rule order (failures among passes) with right-aligned prose and a ``fix`` column about
100 px wide. A notebook replays the demo hook over the demo record and over the same record
with 40 messages taken out (another store: notes, kept ids and windows differ), replays two
versions of the hook (one under a fuel limit), and checks a hook whose ``determinism`` rule
fails after four passes (two more follow). With each output 868 px wide, then 568 px (a
narrow window or a side panel), in the light and the dark theme, the test measures: nothing
scrolls sideways, each comparison leads with its chart (kept, dropped, chars out and fuel of
each hook, values legible on the theme's background), shows only the columns that differ
with a cut value whole in its tooltip, and the hook report reads like the module checker's
(the failure first, left-aligned, its fix as wide as the card). A notebook holding a
comparison's output, opened and not run (untrusted, so sanitized), still shows the chart.
Screenshots: ``comparison-<theme>-<width>-*.png``, ``comparison-<theme>-untrusted.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from _jupyter import (
    CONTRAST_JS,
    LabPage,
    artifacts_dir,
    lab_in_chromium,
    lab_root,
    run_in_lab,
    wait_for_dark,
    write_notebook,
)
from test_check_hook import capsule

import murmur_nb as mnb

WAIT_MS = 180_000
#: The user test's output width, and a narrow one (a small window, a side panel).
WIDTHS = (868, 568)
RECORDS, VERSIONS, HOOK = 1, 2, 3

#: Horizontal overflow of an element and of every element in it (px past its right edge),
#: but for what is inside a box that scrolls sideways (its own width is measured: ``boxes``).
OVERFLOW_JS = """el => {
    const edge = el.getBoundingClientRect().right + 1;
    const all = [...el.querySelectorAll('*')];
    const scrollers = all.filter(n => getComputedStyle(n).overflowX === 'auto');
    const wide = all.filter(n => n.getBoundingClientRect().right > edge
        && !scrollers.some(b => b !== n && b.contains(n)));
    const boxes = scrollers.map(b => ({scroll: b.scrollWidth, client: b.clientWidth}));
    return {scroll: el.scrollWidth, client: el.clientWidth, boxes: boxes,
            past: wide.slice(0, 5).map(n => n.outerHTML.slice(0, 80))};
}"""


def _notebook(path: Path, config: Path) -> None:
    cells = [
        "import murmur_nb as mnb\n"
        "home = mnb.prepare_demo_home()\n"
        "record = home.murmur_home / 'conversations' / f'{home.context_id}.jsonl'\n"
        "other = home.path / 'other-murmur'\n"
        "(other / 'conversations').mkdir(parents=True, exist_ok=True)\n"
        "lines = record.read_text().splitlines(True)\n"
        "(other / 'conversations' / record.name).write_text(''.join(lines[:1] + lines[41:]))\n"
        "def run(store_home, yaml=home.murmur_yaml, **kw):\n"
        "    store = mnb.ConversationStore(store_home)\n"
        "    with mnb.HookHost.from_config(yaml, conversations=store) as hooks:\n"
        "        return mnb.replay(hooks, home.context_id, windows=80, progress=False, **kw)\n"
        "versions = home.murmur_home / 'versions.yaml'\n"
        "versions.write_text('hooks:\\n'\n"
        "    '  summarize:\\n    component: hooks/summarize.wasm\\n'\n"
        "    '    capabilities: {conversation: {read: true}}\\n'\n"
        "    '  summarize-budget:\\n    component: hooks/summarize.wasm\\n'\n"
        "    '    capabilities: {conversation: {read: true}}\\n    limits: {fuel: 5000000}\\n')",
        "mnb.compare_replays(run(home.murmur_home, hooks='summarize'), "
        "run(other, hooks='summarize'))",
        "mnb.compare_replays(run(home.murmur_home, versions))",
        f"mnb.check_hook({str(config.parent / 'hooks' / 'hook.wasm')!r}, config={str(config)!r})",
    ]
    write_notebook(path, cells)


def _fits(lab: LabPage, index: int, root: str, name: str, width: int) -> Any:
    out = lab.out(index, root)
    element = out.locator(root).first
    element.wait_for(state="visible", timeout=WAIT_MS)
    for el in (out, element):
        box = el.evaluate(OVERFLOW_JS)
        assert box["scroll"] <= box["client"] and box["past"] == [], (name, width, box)
    # a table too wide for a narrow output scrolls in its own box, by less than one screen;
    # at 868 px nothing scrolls
    for inner in box["boxes"]:
        assert inner["scroll"] <= (inner["client"] if width >= 868 else 2 * inner["client"]), (
            name, width, box)  # fmt: skip
    measured = element.evaluate("el => el.getBoundingClientRect().width")
    print(f"{name} at {width} px: {measured:.0f} px wide, scrollWidth {box['scroll']}, "
          f"inner boxes (scrollWidth, clientWidth): "
          f"{[(b['scroll'], b['client']) for b in box['boxes']]}")  # fmt: skip
    assert measured <= width
    out.scroll_into_view_if_needed()
    out.screenshot(path=str(artifacts_dir() / f"comparison-{name}.png"))
    return element


def _chart(view: Any, sides: list[str]) -> None:
    """The chart leads: a bar per hook for each figure, its value beside it, readable."""
    chart = view.locator(".murmur-comparison-chart")
    assert chart.bounding_box()["y"] < view.locator("table").bounding_box()["y"]
    assert view.locator(".murmur-chart-figure").evaluate_all(
        "els => els.map(e => e.dataset.figure)") == ["kept", "dropped", "chars_out", "fuel_used"]
    bars = view.locator(".murmur-chart-bar").evaluate_all(
        "els => els.map(e => [e.dataset.side, Number(e.dataset.value),"
        " e.getBoundingClientRect().width])")  # fmt: skip
    assert [side for side, _, _ in bars] == sides * 4, bars
    for figure in range(4):
        (_, a, wa), (_, b, wb) = bars[2 * figure: 2 * figure + 2]
        if max(a, b) > 0:  # the longer bar for the larger value, the other in proportion
            assert abs(wa / max(wa, wb) - a / max(a, b)) < 0.02, bars
    legend = chart.locator(".murmur-chart-legend").inner_text()
    assert all(side in legend for side in sides), legend


def _legible(lab: LabPage, width: int) -> None:
    """Every text of the charts and tables stands out from what it is drawn on (WCAG AA)."""
    found = lab.page.evaluate(CONTRAST_JS, ".murmur-comparison-chart span, "
                              ".murmur-comparison-chart small, .murmur-comparison td")  # fmt: skip
    assert found and min(ratio for _, ratio in found) >= 4.5, (width, sorted(
        found, key=lambda f: f[1])[:3])  # fmt: skip


def _records_compared(lab: LabPage, width: int, tag: str) -> None:
    view = _fits(lab, RECORDS, ".murmur-comparison", f"{tag}-records", width)
    _chart(view, ["summarize (1)", "summarize (2)"])
    assert "rows differ (note in 1, messages_out in 3" in view.inner_text()
    heads = view.locator("th").all_inner_texts()
    # only what differs: no duration, fuel, first_system_kept (the same on both sides) ...
    assert heads == ["record", "event", "window", "hook", "note", "messages_out", "chars_out",
                     "kept_ratio", "last_user_kept", "kept_ids"], heads
    assert view.locator("td small").all_inner_texts() == ["(no row)"] * 2  # windows 280, 320
    cuts = view.locator("td span[title]")
    whole = [cuts.nth(i).get_attribute("title") or "" for i in range(cuts.count())]
    shown = cuts.all_inner_texts()
    assert whole[0].startswith("task replay-demo-session: 320 messages"), whole
    assert any(w.startswith("m00001, m00073, m00074") and len(w) > 40 for w in whole), whole
    assert all(s.endswith("\u2026") and len(s) <= 40 and w.startswith(s[:-1])
               for s, w in zip(shown, whole, strict=True)), shown
    heights = view.locator("tr.murmur-comparison-row").evaluate_all(
        "rows => rows.map(r => r.getBoundingClientRect().height)")
    # at 868 px one line per hook, a cut value wraps once; narrower, a few lines more
    assert heights and max(heights) <= 90 * 868 / width, heights


def _versions_compared(lab: LabPage, width: int, tag: str) -> None:
    view = _fits(lab, VERSIONS, ".murmur-comparison", f"{tag}-versions", width)
    _chart(view, ["summarize", "summarize-budget"])
    heads = view.locator("th").all_inner_texts()
    assert heads == ["record", "event", "window", "hook", "ok", "code"], heads
    assert "fuel_exhausted" in view.inner_text()


def _hook_report(lab: LabPage, width: int, tag: str) -> None:
    report = _fits(lab, HOOK, ".murmur-check", f"{tag}-hook-report", width)
    items = report.locator(".murmur-check-item")
    assert [items.nth(i).get_attribute("data-status") for i in range(items.count())] == ["fail"]
    assert items.first.get_attribute("data-check") == "determinism"
    passes = report.locator("details.murmur-check-passes")
    assert items.first.bounding_box()["y"] < passes.bounding_box()["y"]  # the failure on top
    assert passes.evaluate("d => !d.open") and "6 checks passed" in passes.inner_text()
    prose = items.first.locator("div").evaluate_all(
        "els => els.map(e => [getComputedStyle(e).textAlign, e.getBoundingClientRect().width])")
    assert all(align in ("left", "start") for align, _ in prose), prose
    assert min(w for _, w in prose) > width * 0.8, prose  # the fix as wide as the card


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_comparison_and_a_hook_report_fit_868_and_568_px_outputs(
    tmp_path: Path, theme: str
) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    config = capsule(tmp_path / "capsule", "determinism")
    env, root = lab_root(tmp_path, demo.path)
    _notebook(root / "comparison.ipynb", config)
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("comparison.ipynb"))
        page.set_viewport_size({"width": 1280, "height": 1600})
        lab = LabPage(page, wait_ms=WAIT_MS)
        lab.out(HOOK, ".murmur-check").wait_for(timeout=WAIT_MS)
        if theme == "dark":
            lab.dark()
        for width in WIDTHS:
            lab.fit_output(width, RECORDS)
            tag = f"{theme}-{width}"
            _records_compared(lab, width, tag)
            _versions_compared(lab, width, tag)
            _hook_report(lab, width, tag)
            _legible(lab, width)
        _untrusted(ctx, url, demo, root, theme)
    assert problems == [], problems


def _untrusted(ctx: Any, url: Any, demo: mnb.DemoHome, root: Path, theme: str) -> None:
    """A notebook that is opened, not run, is not trusted: JupyterLab sanitizes its HTML
    (no ``<svg>``, no ``var()``). The chart is still there, its bars in proportion, coloured,
    and legible."""
    store = mnb.ConversationStore(demo.murmur_home)
    versions = demo.murmur_home / "versions.yaml"  # written by the notebook's first cell
    with mnb.HookHost.from_config(versions, conversations=store) as hooks:
        frame = mnb.replay(hooks, demo.context_id, windows=80, progress=False)
    comparison = mnb.compare_replays(frame)
    cell = nbformat.v4.new_code_cell("mnb.compare_replays(...)", outputs=[
        nbformat.v4.new_output("execute_result", {"text/html": comparison._repr_html_()},
                               execution_count=1)])  # fmt: skip
    write_notebook(root / "untrusted.ipynb", [cell])
    page, problems = run_in_lab(ctx, url("untrusted.ipynb"), run_js="() => null")
    if theme == "dark":
        wait_for_dark(page, WAIT_MS)
    view = LabPage(page).out(0, ".murmur-comparison-chart")
    view.wait_for(timeout=WAIT_MS)
    assert "var(" not in view.inner_html() and "data-value" not in view.inner_html()  # sanitized
    bars = view.locator(".murmur-chart-bar").evaluate_all(
        "els => els.map(e => [e.getBoundingClientRect().width,"
        " getComputedStyle(e).backgroundColor])")  # fmt: skip
    assert len(bars) == 8, bars
    totals = comparison.totals()
    for key, (wa, ca), (wb, cb) in zip(("kept", "dropped", "chars_out", "fuel_used"),
                                       bars[::2], bars[1::2], strict=True):  # fmt: skip
        a, b = (totals[side][key] for side in (comparison.left, comparison.right))
        assert ca != cb and "rgba(0, 0, 0, 0)" not in (ca, cb), bars  # two plain tones
        assert max(a, b) > 0 and abs(wa / max(wa, wb) - a / max(a, b)) < 0.02, (key, bars)
    found = page.evaluate(CONTRAST_JS, ".murmur-comparison-chart span, "
                          ".murmur-comparison-chart small")  # fmt: skip
    assert found and min(ratio for _, ratio in found) >= 4.5, found
    view.screenshot(path=str(artifacts_dir() / f"comparison-{theme}-untrusted.png"))
    page.close()
    assert problems == [], problems
