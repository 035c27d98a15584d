"""Cards keep their content inside them, measured in a real Chromium (Debian's, Playwright).

A rendering is loaded into a page as narrow as a side panel's output, and every element's
content is compared with its box: a long unbroken word (a SHA-256 in a Markdown heading)
must wrap, not run past the card's edge.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from _jupyter import chromium
from test_render_kit import artifact

import murmur_nb as mnb

#: The first card and the elements in it whose content is wider than their box (the card
#: then scrolls sideways, or the text runs past its edge).
OVERFLOW_JS = """() => {
    const card = document.querySelector('.murmur-artifact');
    return [card, ...card.querySelectorAll('*')]
        .filter(el => el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0)
        .map(el => el.localName + ': ' + el.textContent.slice(0, 40));
}"""


@pytest.mark.slow
def test_a_long_hash_in_a_markdown_heading_wraps_inside_its_card(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"murmur").hexdigest()
    (tmp_path / "n.md").write_text(f"# Build sha256:{digest}\n\nok\n", encoding="utf-8")
    r = mnb.render(artifact(tmp_path, "n.md", "text/markdown"))
    page_html = f'<div style="width:360px">{r.html}</div>'
    with chromium(tmp_path / "profile") as ctx:
        page = ctx.new_page()
        page.set_content(page_html)
        heading = page.locator(".murmur-artifact h1")
        assert digest in heading.inner_text().replace("\n", "")
        assert page.evaluate(OVERFLOW_JS) == []
        assert heading.bounding_box()["height"] > 60  # it wrapped onto several lines
