"""Table previews and image grids as Chromium lays them out (Debian's, through Playwright).

A rendering is loaded into a page as wide as the user test's output (868 px) and measured:
a table preview shows every row its line names with no inner scroll box; a grid of small
images draws each thumbnail over its whole cell, and each caption whole (wrapped, never cut
with an ellipsis).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _jupyter import (
    chromium,
    lab_in_chromium,
    lab_root,
    run_in_lab,
    write_notebook,
)
from test_render_kit import artifact, invocation, make_csv, make_png

import murmur_nb as mnb

OUTPUT_PX = 868

#: Elements of the first card that scroll vertically (content taller than their box).
INNER_SCROLL_JS = """() => {
    const card = document.querySelector('.murmur-artifact');
    return [card, ...card.querySelectorAll('*')]
        .filter(el => el.scrollHeight > el.clientHeight + 1 && el.clientHeight > 0
                && ['auto', 'scroll'].includes(getComputedStyle(el).overflowY))
        .map(el => `${el.localName}: ${el.clientHeight} of ${el.scrollHeight}`);
}"""


def _page_html(body: str) -> str:
    return f'<div style="width:{OUTPUT_PX}px">{body}</div>'


#: Each body row of the first table card: its index label, and whether it is inside every
#: clipping box of the card around it (seen without scrolling any inner box).
ROWS_JS = """() => [...document.querySelectorAll('.murmur-artifact tbody tr')]
            .map(tr => {
                const th = tr.querySelector('th'), box = tr.getBoundingClientRect();
                const card = tr.closest('.murmur-artifact');
                let el = tr.parentElement, seen = true;
                for (; el && card.contains(el); el = el.parentElement) {  // the card's boxes
                    const clip = el.getBoundingClientRect();
                    if (getComputedStyle(el).overflowY !== 'visible'
                        && (box.top < clip.top - 1 || box.bottom > clip.bottom + 1)) seen = false;
                }
                return [th ? th.textContent : '', seen];
            })"""


def _check_rows(scrolls: list[str], rows: list[tuple[str, bool]]) -> None:
    print("inner scroll boxes:", scrolls, "rows:", [label for label, _ in rows])
    assert scrolls == [], scrolls
    assert [label for label, _ in rows][-2:] == ["110", "111"]
    assert len(rows) == 21 and all(seen for _, seen in rows), rows


@pytest.mark.slow
def test_a_table_preview_shows_every_row_it_names_without_an_inner_scroll(
    tmp_path: Path,
) -> None:
    make_csv(tmp_path / "orders.csv", rows=112)
    r = mnb.render(artifact(tmp_path, "orders.csv", "text/csv", "table"))
    assert "first 10 and last 10 of 112 rows" in r.html
    with chromium(tmp_path / "profile") as ctx:
        page = ctx.new_page()
        page.set_viewport_size({"width": 1000, "height": 600})
        page.set_content(_page_html(r.html))
        _check_rows(page.evaluate(INNER_SCROLL_JS), page.evaluate(ROWS_JS))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_report_table_preview_in_jupyterlab_has_no_inner_scroll(tmp_path: Path) -> None:
    """The same, with JupyterLab's own table style (taller rows) on docs.report's CSV."""
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    env, root = lab_root(tmp_path, demo.path)
    write_notebook(root / "table.ipynb", [
        "import murmur_nb as mnb\n"
        "home = mnb.prepare_demo_home()\n"
        "host = mnb.ModuleHost(home=home.facet_home, policy=home.policy(), "
        "artifact_store=home.artifact_store)\n"
        'report = host.invoke("docs.report", {})\n'
        'mnb.render(next(a for a in report.artifacts if a.media_type == "text/csv"))'
    ])  # fmt: skip
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("table.ipynb"))
        page.set_viewport_size({"width": 1280, "height": 1600})
        page.locator(".jp-OutputArea-output .murmur-artifact tbody tr").first.wait_for(
            timeout=120_000)  # fmt: skip
        page.wait_for_timeout(300)
        _check_rows(page.evaluate(INNER_SCROLL_JS), page.evaluate(ROWS_JS))
    assert problems == [], problems


@pytest.mark.slow
def test_small_images_fill_their_grid_cells_and_captions_are_whole(tmp_path: Path) -> None:
    arts = []
    for i in range(4):
        make_png(tmp_path / f"t{i}.png", size=(48, 48), seed=i)
        label = f"thumbnail {i} of the dusk palette, seed {i}"
        arts.append(artifact(tmp_path, f"t{i}.png", "image/png", "image_grid", label))
    r = mnb.render(invocation(tmp_path, arts))
    with chromium(tmp_path / "profile") as ctx:
        page = ctx.new_page()
        page.set_content(_page_html(r.html))
        page.wait_for_function(
            "() => [...document.images].every(i => i.complete && i.naturalWidth > 0)"
        )
        cells = page.evaluate("""() => [...document.querySelectorAll('figure')].map(f => {
            const img = f.querySelector('img'), cap = f.querySelector('figcaption');
            const i = img.getBoundingClientRect(), c = f.getBoundingClientRect();
            return {img: [i.width, i.height], natural: img.naturalWidth, cell: c.width,
                    caption: cap.textContent, cut: cap.scrollWidth > cap.clientWidth + 1
                        || getComputedStyle(cap).textOverflow === 'ellipsis',
                    captionBox: [cap.clientWidth, cap.clientHeight]};
        })""")
    print("grid cells:", cells)
    assert len(cells) == 4
    for cell in cells:
        width, height = cell["img"]
        assert cell["natural"] <= 48  # a small image: drawn over its cell, not centred small
        assert width >= cell["cell"] - 2 and height >= cell["cell"] - 2, cell
        assert not cell["cut"] and "dusk palette, seed" in cell["caption"], cell
