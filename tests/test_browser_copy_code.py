"""Copy as code clicked in JupyterLab (Debian Chromium): the code shown in the page.

A run goes through the ModuleBrowser's form; the history row's "Copy as code" button fills
the browser's read-only text area with the call, named for the notebook's own variable
(``studio``, found in the kernel's namespace), and an edit typed into the area is put back.
``browser.copy_as_code()`` run in a cell puts the same call in a new cell below it
(``set_next_input``, which JupyterLab takes from the executing cell's reply).
The code read from the page is then run here against a host on the same demo home and sends
what the page's run sent; the form's own button shows the same call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _jupyter import LabPage, artifacts_dir, lab_in_chromium, lab_root, run_in_lab, write_notebook

import murmur_nb as mnb
from murmur_nb.widgets import CapabilityForm

WAIT_MS = 120_000
BROWSER = 1

CELLS = [
    "import murmur_nb as mnb\n"
    "from murmur_nb.widgets import ModuleBrowser\n"
    "home = mnb.prepare_demo_home()\n"
    "studio = mnb.ModuleHost(home=home.facet_home, policy=home.policy(), "
    "artifact_store=home.artifact_store)",
    "browser = ModuleBrowser(studio)\nbrowser",
    "browser.copy_as_code() if browser.history else None  # run again once a run is in",
]

#: Run the third cell again (now the history holds a run): how many cells it added, and the
#: source of the one after it.
RUN_COPY_CELL_JS = """async () => {
    const panel = window.jupyterapp.shell.currentWidget;
    const cells = () => panel.content.widgets;
    const before = cells().length;
    panel.content.activeCellIndex = 2;
    await window.jupyterapp.commands.execute('notebook:run-cell');
    for (let i = 0; i < 600 && cells().length === before; i++) {
        await new Promise(r => setTimeout(r, 100));
    }
    await new Promise(r => setTimeout(r, 1000));  // any further cell would be in by now
    return [cells().length - before, cells()[3].model.sharedModel.getSource()];
}"""

def _notebook(path: Path) -> None:
    write_notebook(path, CELLS)


def _area(page: Any, out: Any, selector: str) -> str:
    handle = page.wait_for_function(
        "([out, sel]) => { const a = out.querySelector(sel); return a && a.value || null; }",
        arg=[out.element_handle(), selector], timeout=WAIT_MS,
    )  # fmt: skip
    value: str = handle.json_value()
    return value


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_copy_as_code_on_a_history_row_shows_the_call_in_the_page(tmp_path: Path) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    env, root = lab_root(tmp_path, demo.path)
    _notebook(root / "copy.ipynb")
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("copy.ipynb"))
        out = LabPage(page).out(BROWSER)
        out.locator("button.murmur-cap:text-is('gallery.thumbs')").click()
        count = out.locator(".murmur-form-box .widget-text input").first
        count.wait_for(timeout=WAIT_MS)
        count.fill("2")
        count.press("Tab")
        out.locator(".murmur-form-box button:has-text('Run')").click()
        out.locator(".murmur-history-row[data-status='ok']").wait_for(timeout=WAIT_MS)
        history_area = ".murmur-browser > .murmur-code-box textarea"
        assert out.locator(history_area).is_hidden()
        out.locator("button.murmur-history-code").first.click()
        code = _area(page, out, history_area)
        # the box's value and its display reach the page as two model updates, in either
        # order: the value being there does not mean the box is shown yet
        out.locator(history_area).wait_for(state="visible", timeout=WAIT_MS)
        caption = out.locator(".murmur-browser > .murmur-code-box").inner_text()
        out.locator(history_area).fill("studio.invoke('something.else', {})")
        out.locator(history_area).press("Tab")  # the area is read-only: the code comes back
        page.wait_for_function(
            "([out, sel, code]) => out.querySelector(sel).value === code",
            arg=[out.element_handle(), history_area, code], timeout=WAIT_MS,
        )  # fmt: skip
        out.locator(".murmur-form-box button.murmur-copy-code").click()
        form_code = _area(page, out, ".murmur-form-box .murmur-code-box textarea")
        out.screenshot(path=str(artifacts_dir() / "browser-copy-as-code.png"))
        added, next_cell = page.evaluate(RUN_COPY_CELL_JS)
    print(code, caption, sep="\n")
    assert "run of gallery.thumbs as code" in caption
    assert added == 1  # one new cell, below the cell that ran
    with mnb.ModuleHost(home=demo.facet_home, policy=demo.policy(),
                        artifact_store=demo.artifact_store) as host:  # fmt: skip
        form = CapabilityForm(host, "gallery.thumbs", values={"count": 2}, host_name="studio")
        assert code == form_code == form.code() == next_cell
        assert code.startswith("studio.invoke('gallery.thumbs', {'count': 2,")
        again = eval(code, {"studio": host})
    assert again.ok and again.request.input == form.form.value()
    assert problems == [], problems
