"""The checker report and the ModuleBrowser as a person sees them: JupyterLab in Chromium.

A notebook checks a real module with three faults (``tests/modules/threefaults.py``) and
shows a ModuleBrowser over the demo home. In the light theme, then the dark one, the test
sets the output to 868 px wide and measures: the report's failures come first and nothing
scrolls sideways (``scrollWidth <= clientWidth`` on the output and on every card); one
click on a capability shows its form beside the list, in view; under 700 px the same form
sits right under the clicked row; a run lands in the history, and a click on its row shows
its InvocationView. Screenshots go to ``test-artifacts/`` (``report-*.png``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _jupyter import CONTRAST_JS, LabPage, lab_in_chromium, lab_root, run_in_lab, write_notebook
from _modules import install

import murmur_nb as mnb

WAIT_MS = 120_000
OUTPUT_PX = 868
REPORT, BROWSER = 1, 2

#: Horizontal overflow of an element and of every element in it (px past its right edge).
OVERFLOW_JS = """el => {
    const edge = el.getBoundingClientRect().right + 1;
    const wide = [...el.querySelectorAll('*')].filter(n => n.getBoundingClientRect().right > edge);
    return {scroll: el.scrollWidth, client: el.clientWidth,
            past: wide.slice(0, 5).map(n => n.outerHTML.slice(0, 80))};
}"""


def _notebook(path: Path, faulty: Path) -> None:
    cells = [
        "import murmur_nb as mnb\n"
        "from murmur_nb.widgets import ModuleBrowser\n"
        "home = mnb.prepare_demo_home()\n"
        "host = mnb.ModuleHost(home=home.facet_home, policy=home.policy(), "
        "artifact_store=home.artifact_store)",
        f"mnb.check_module({str(faulty)!r})",
        "browser = ModuleBrowser(host)\nbrowser",
    ]
    write_notebook(path, cells)


def _report_fits_and_fails_first(lab: LabPage) -> None:
    lab.fit_output(OUTPUT_PX, REPORT)
    root = lab.see(REPORT, ".murmur-check")
    items = lab.out(REPORT).locator(".murmur-check-item")
    statuses = [items.nth(i).get_attribute("data-status") for i in range(items.count())]
    checks = [items.nth(i).get_attribute("data-check") for i in range(items.count())]
    assert statuses == ["fail", "fail", "fail", "warn"], statuses
    assert checks[:3] == ["invoke.no_envelope", "invoke.result_schema", "invoke.request_id"]
    tops = [items.nth(i).bounding_box()["y"] for i in range(items.count())]
    passes = lab.out(REPORT).locator("details.murmur-check-passes")
    assert tops == sorted(tops) and tops[-1] < passes.bounding_box()["y"]  # failures on top
    for element in (lab.out(REPORT), root, *(items.nth(i) for i in range(items.count()))):
        box = element.evaluate(OVERFLOW_JS)
        assert box["scroll"] <= box["client"] and box["past"] == [], (lab.theme, box)
    assert root.evaluate("el => el.getBoundingClientRect().width") <= OUTPUT_PX
    crash = items.nth(0)
    for text in ("exit status", "ZeroDivisionError", '"n": 10', "murmur-nb --home"):
        assert text in crash.inner_text(), text
    assert passes.evaluate("d => !d.open")
    lab.shot(REPORT, "report-checker")
    passes.locator("summary").click()
    assert passes.evaluate("d => d.open") and passes.locator("li").count() > 10
    passes.locator("summary").click()
    measured = lab.page.evaluate(CONTRAST_JS, ".murmur-check-tag, .murmur-check-item pre")
    low = [(text, round(ratio, 2)) for text, ratio in measured if ratio < 4.5]
    assert len(measured) > 10 and low == [], (lab.theme, low)


def _form_beside_then_under(lab: LabPage) -> None:
    button = lab.see(BROWSER, "button.murmur-cap:has-text('gallery.thumbs')")
    button.click()
    form = lab.see(BROWSER, ".murmur-form-box")
    lab.see(BROWSER, ".murmur-form-box .widget-html:has-text('How many images to paint.')")
    lab.page.wait_for_timeout(300)
    row, box = button.bounding_box(), form.bounding_box()
    assert box["x"] > row["x"] + row["width"], (row, box)  # beside the list
    height = lab.page.viewport_size["height"]
    assert 0 <= box["y"] < height - 100, (box, height)  # in view, no scrolling needed
    lab.shot(BROWSER, "report-browser-beside")
    # a narrow output (under 700 px): the same form, right under the clicked row
    wide = lab.page.viewport_size
    lab.page.set_viewport_size({"width": wide["width"] - OUTPUT_PX + 600, "height": wide["height"]})
    lab.page.wait_for_timeout(500)
    box = form.bounding_box()
    row = form.evaluate("""el => {
        const row = el.previousElementSibling, r = row.getBoundingClientRect();
        return {x: r.x, y: r.y, height: r.height,
                clicked: row.querySelector('button.murmur-cap').textContent};
    }""")  # the element just before the form: the clicked capability's row
    assert row["clicked"] == "gallery.thumbs"
    assert abs(box["x"] - row["x"]) < 40 and row["y"] + row["height"] <= box["y"] + 1, (row, box)
    assert box["y"] - (row["y"] + row["height"]) < 20  # right under it, not after the list
    assert 0 <= box["y"] < lab.page.viewport_size["height"] - 100  # in view
    assert lab.out(BROWSER).evaluate("el => el.scrollWidth <= el.clientWidth")
    lab.shot(BROWSER, "report-browser-narrow")
    lab.page.set_viewport_size(wide)
    lab.page.wait_for_timeout(300)


def _history(lab: LabPage) -> None:
    lab.see(BROWSER, ".murmur-form-box button:has-text('Run')").click()
    lab.see(BROWSER, ".murmur-history-row:has-text('gallery.thumbs')")
    rows = lab.out(BROWSER).locator(".murmur-history-row")
    assert "ok" in rows.first.inner_text()
    # a view shown before (the other theme's pass) is marked, so the new one is waited for
    lab.out(BROWSER).evaluate(
        "el => el.querySelectorAll('.murmur-history-view .murmur-result')"
        ".forEach(r => r.dataset.shownBefore = '1')"
    )
    lab.out(BROWSER).locator("button.murmur-history-show").first.click()
    view = lab.see(BROWSER, ".murmur-history-view .murmur-result:not([data-shown-before])")
    assert "gallery.thumbs" in lab.out(BROWSER).locator(".murmur-history-view").inner_text()
    view.scroll_into_view_if_needed()
    lab.shot(BROWSER, "report-browser-history")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_checker_report_and_module_browser_in_jupyterlab_light_and_dark(tmp_path: Path) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    faulty = install(tmp_path / "src", "threefaults", "threefaults")
    env, root = lab_root(tmp_path, demo.path)
    _notebook(root / "report.ipynb", faulty)
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("report.ipynb"))
        lab = LabPage(page)
        lab.see(BROWSER, "button.murmur-cap")
        _report_fits_and_fails_first(lab)
        _form_beside_then_under(lab)
        _history(lab)
        lab.dark()
        _report_fits_and_fails_first(lab)
        _form_beside_then_under(lab)
        _history(lab)
    assert problems == [], problems
