"""ModuleBrowser list and detail: the form opens in the clicked capability's card, beside its
rows (under them when narrow), and the browser keeps a history of its runs.

Driven from Python against the real demo modules; the browser tests
(``test_browser_widgets.py``) measure the same layout in JupyterLab.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import default_descriptor, install, write_descriptor

from murmur_nb import DemoHome, ModuleHost
from murmur_nb.widgets import InvocationView, ModuleBrowser


@pytest.fixture
def host(demo_home: DemoHome) -> Iterator[ModuleHost]:
    with ModuleHost(home=demo_home.facet_home, policy=demo_home.policy(),
                    artifact_store=demo_home.artifact_store) as h:  # fmt: skip
        yield h


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _card(browser: ModuleBrowser, module_id: str) -> object:
    index = [m.id for m in browser.modules].index(module_id)
    return browser.cards.children[index]


def test_the_form_opens_beside_its_capability_rows_and_moves_with_the_click(
    host: ModuleHost,
) -> None:
    browser = ModuleBrowser(host)
    browser.capability_buttons["gallery.thumbs"].click()
    gallery = _card(browser, "gallery")
    children = list(gallery.children)
    row = next(c for c in children if browser.capability_buttons["gallery.thumbs"] in
               getattr(c, "children", ()))  # fmt: skip
    assert children[children.index(row) + 1] is browser.form_box  # right after its row
    assert browser.form_box.children == (browser.form,)
    assert "murmur-open" in gallery._dom_classes
    assert gallery.layout.display == "grid" and "3fr" in gallery.layout.grid_template_columns
    # placed by grid_area alone (a view drawn anew drops grid_row / grid_column), beside
    # the rows from the top, over their auto tracks and the 1fr track that takes the rest
    rows = len(children) - 1
    assert browser.form_box.layout.grid_area == f"1 / 2 / span {rows + 1} / 3"
    assert gallery.layout.grid_template_rows == f"repeat({rows}, auto) 1fr"
    assert all(c.layout.grid_area == "auto / 1 / auto / 2" for c in children
               if c is not browser.form_box)  # fmt: skip
    assert all(c.layout.grid_row is None and c.layout.grid_column is None for c in children)
    # another module's capability: the form moves there, the gallery card is as before
    browser.capability_buttons["docs.report"].click()
    assert browser.form_box not in gallery.children and len(gallery.children) == len(children) - 1
    assert "murmur-open" not in gallery._dom_classes and gallery.layout.display is None
    assert gallery.layout.grid_template_rows is None
    assert browser.form_box in _card(browser, "docs").children
    # one view of the form only, and a container query for narrow outputs
    assert sum(browser.form_box in getattr(c, "children", ()) for c in browser.cards.children) == 1
    assert "murmur-browser" in browser._dom_classes
    assert "@container (max-width:700px)" in browser.children[0].value
    # Refresh keeps the open form beside its capability
    browser.refresh(rescan=False)
    assert browser.form_box in _card(browser, "docs").children


def test_static_html_shows_the_form_under_its_row(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    browser.capability_buttons["gallery.thumbs"].click()
    page = browser.static_html()
    form = page.index("How many images to paint.")  # the thumbs form's first field
    # after the thumbs row, before the next capability's row (gallery.poster)
    assert page.index("<code>gallery.thumbs</code>") < form < page.index("<code>gallery.poster")


def test_history_lists_runs_newest_first_and_shows_one_again(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    assert browser.history == [] and browser.history_box.children == ()
    browser.open_form("gallery.thumbs")
    assert browser.form is not None
    first = browser.form.run()  # the plain call
    browser.open_form("docs.report")
    browser.form.run(live=True)  # the Run button's way: a LiveRun in the background
    browser.form.wait()
    # LiveRun sets "done" just before it calls the form back: wait for the history row
    _until(lambda: len(browser.history_box.children) == 3)
    second = browser.form.invocation
    assert [(r.capability, r.outcome) for r in browser.history] == [
        ("gallery.thumbs", "ok"), ("docs.report", "ok" if second.ok else second.error.code)
    ]
    assert browser.history[0].invocation is first and browser.history[1].invocation is second
    assert all(r.duration_s >= 0 for r in browser.history)
    head, newest, oldest = browser.history_box.children
    assert "Runs" in head.value
    assert "docs.report" in newest.children[-1].value
    assert "gallery.thumbs" in oldest.children[-1].value
    oldest.children[0].click()  # its Show button
    sent, view = browser.history_view.children
    assert "input:" in sent.value and '"count": 4' in html.unescape(sent.value)  # the default
    assert isinstance(view, InvocationView) and view.invocation is first
    assert browser.shown_run is browser.history[0]
    assert browser.text().endswith(f"runs: 2 (last: docs.report {browser.history[1].outcome})")
    static = browser.static_html()
    assert "murmur-history-row" in static and "gallery.thumbs" in static
    assert ":" not in static.split("murmur-history-row", 1)[1][:40]  # the time is volatile


def test_no_skills_anywhere_hides_the_knowledge_list_and_says_so(facet_home: Path) -> None:
    install(facet_home, "plain")  # a module that lists no skill and no overlay
    with ModuleHost(home=facet_home) as host:
        browser = ModuleBrowser(host)
        assert browser.knowledge_picker.options == ()
        assert browser.knowledge_picker.layout.display == "none"
        assert browser.no_knowledge.layout.display is None
        assert "no module lists skills or overlays" in browser.no_knowledge.value


def test_the_demo_knowledge_list_is_shown(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    assert browser.knowledge_picker.options and browser.knowledge_picker.layout.display is None
    assert browser.no_knowledge.layout.display == "none"


def test_a_validation_message_sits_under_its_field_not_beside_it(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    form = browser.open_form("gallery.thumbs")
    form.inputs["count"].value = "99"
    field = form._fields["count"]
    assert "greater than the maximum" in field.error.value
    row = field.box.children[0]
    assert field.widget in row.children and field.error not in row.children
    assert field.box.children[-1] is field.error  # its own line, under the field
    files = browser.open_form("critic.review")
    files.run()
    picker = files.files["image"]
    assert "choose a file" in picker.error_view.value
    (row,) = [b for b in _boxes(files) if picker.box in b.children]  # the picker's row
    assert picker.error_view not in row.children


def _boxes(widget: Any) -> Iterator[Any]:
    """Every box inside ``widget``, itself included."""
    kids = getattr(widget, "children", None)
    if kids is None:
        return
    yield widget
    for kid in kids:
        yield from _boxes(kid)


def test_a_crash_is_a_failed_run_in_the_history_with_its_input(facet_home: Path) -> None:
    """Issue 40: a module that ran and crashed is ``failed`` (not ``refused``), listed under
    Runs with the input it was sent; Show draws that input and the crash's record."""
    install(facet_home, "crashy", "crashy")
    with ModuleHost(home=facet_home) as host:
        browser = ModuleBrowser(host)
        form = browser.open_form("crashy.raise")
        form.set_value("note", "first try")
        form.run_button.click()
        form.wait()
        _until(lambda: len(browser.history) == 1)
        assert form.state == "failed" and form.live is not None and form.live.state == "failed"
        assert "failed: protocol_violation" in form.status.value
        (run,) = browser.history
        assert (run.status, run.outcome, run.input) == ("failed", "protocol_violation",
                                                         {"note": "first try"})  # fmt: skip
        assert run.invocation is not None and run.invocation.returncode == 1
        _head, row = browser.history_box.children
        assert 'data-status="failed"' in row.children[-1].value
        assert "failed: protocol_violation" in row.children[-1].value
        assert html.escape('{"note":"first try"}') in row.children[-1].value
        row.children[0].click()
        sent, view = browser.history_view.children
        assert "first try" in sent.value and "failed" in sent.value
        assert "ZeroDivisionError" in view.text()
        # the plain call records its failure too; a module that answers runs ok
        form.set_value("note", "second")
        assert form.run() is None and form.state == "failed"
        assert [r.status for r in browser.history] == ["failed", "failed"]
        assert browser.text().endswith("runs: 2 (last: crashy.raise failed protocol_violation)")


def test_a_call_the_host_refuses_is_a_refused_run(host: ModuleHost) -> None:
    """Nothing ran (the module still needs setup): ``refused``, listed, with its input."""
    browser = ModuleBrowser(host)
    browser.artifacts.extend(host.invoke("gallery.thumbs", {"count": 1}).artifacts)
    form = browser.open_form("transcribe.audio", setup_first=False)
    assert form is not None
    form.files["audio"].choice.value = 0  # the thumbnail: a file, so the form is valid
    assert form.form.errors() == {}
    form.run_button.click()
    form.wait()
    _until(lambda: len(browser.history) == 1)
    (run,) = browser.history
    assert (run.status, run.outcome, run.invocations) == ("refused", "missing_requirement", ())
    assert form.state == "refused" and "nothing ran" in form.status.value
    browser.show_run(run)
    sent, view = browser.history_view.children
    assert "refused" in sent.value and "missing_requirement" in view.value


#: capabilities of the wide module (the review's catalog had 20,000: 24 s, 160,055 widgets)
WIDE = 3000


@pytest.fixture
def wide_host(tmp_path: Path) -> Iterator[ModuleHost]:
    """A real module (the ``plain`` fixture) declaring ``WIDE`` capabilities ``wide.c<i>``."""
    home = tmp_path / "wide-home"
    folder = install(home, "wide", "plain")
    descriptor = default_descriptor(home, "wide")
    echo = descriptor["capabilities"][0]
    descriptor["capabilities"] = [
        {**echo, "id": f"wide.c{i}", "title": f"Tool {i}", "summary": f"does thing {i}"}
        for i in range(WIDE)
    ]
    write_descriptor(folder, descriptor)
    with ModuleHost(home=home) as h:
        yield h


def _live_widgets() -> int:
    """Widgets the kernel holds (each one is state a notebook saves): ipywidgets' own
    registry, read directly because ``Widget.widgets`` warns that it is deprecated."""
    from ipywidgets.widgets import widget

    return len(widget._instances)


def test_thousands_of_capabilities_are_a_page_of_rows_and_a_bounded_picker(
    wide_host: ModuleHost,
) -> None:
    before = _live_widgets()
    browser = ModuleBrowser(wide_host)  # 50 rows, then "Show 50 more"
    assert _live_widgets() - before < 600  # a row per capability: 24,000 widgets
    assert len(browser.capability_buttons) == 50
    assert len(browser.capability_picker.options) == 500  # PICKER_LIMIT
    browser = ModuleBrowser(wide_host, page_size=20)
    (card,) = browser.cards.children
    assert len(browser.capability_buttons) == 20
    line = card.children[21]  # after the head and the 20 rows
    assert "showing 20 of 3,000 capabilities" in html.unescape(line.children[0].value)
    assert browser.filter_box.layout.display is None  # offered once a module has a page more
    assert "3,000 capabilities" in browser.matching.value
    text = browser.text()
    assert "wide.c19 [" in text and "wide.c20 [" not in text
    assert "… showing 20 of 3,000 capabilities" in text
    more = line.children[1]
    assert more.description == "Show 20 more"
    more.click()
    assert len(browser.capability_buttons) == 40 and browser.show_more("wide") == 60
    paged = ModuleBrowser(wide_host, page_size=1500)
    assert paged.show_more("wide") == 3000
    assert f"wide.c{WIDE - 1}" in paged.capability_buttons and "…" not in paged.text()
    (card,) = paged.cards.children
    assert not any("murmur-showing" in getattr(c, "value", "") for c in card.children)


def test_a_small_catalog_draws_every_row_and_offers_no_filter(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    declared = [c.id for m in browser.modules if m.descriptor is not None
                for c in m.descriptor.capabilities or ()]  # fmt: skip
    assert list(browser.capability_buttons) == declared
    assert [v for _, v in browser.capability_picker.options] == declared
    assert browser.filter_box.layout.display == "none" and "…" not in browser.text()


def test_the_filter_and_open_form_reach_the_last_of_thousands_of_capabilities(
    wide_host: ModuleHost,
) -> None:
    browser = ModuleBrowser(wide_host)
    last = f"wide.c{WIDE - 1}"
    browser.filter_box.value = "THING 2999"  # id, title or summary; any case
    assert [v for _, v in browser.capability_picker.options] == [last]
    assert list(browser.capability_buttons)[-1] == last
    assert "1 of 3,000 capabilities match" in browser.matching.value
    browser.capability_buttons[last].click()
    assert browser.form is not None and browser.form.capability_id == last
    (card,) = browser.cards.children
    rows = [c for c in card.children if browser.capability_buttons[last] in
            getattr(c, "children", ())]  # fmt: skip
    assert card.children[card.children.index(rows[0]) + 1] is browser.form_box
    browser.filter_box.value = ""  # the open form stays beside its row, drawn after the page
    assert browser.form_box in card.children and last in browser.capability_buttons
    assert browser.capability_picker.value == last
    other = f"wide.c{WIDE - 2}"  # neither on the first page nor in the picker's first 500
    assert browser.open_form(other) is browser.form and browser.form.capability_id == other
    assert browser.capability_picker.value == other
    assert browser.form_box in card.children
