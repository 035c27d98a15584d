"""The BatchView's duration histogram: a bar per bin, every finished row in one bar.

Tested on the SVG text itself (parsed as XML), as a page would receive it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murmur_nb.widgets._batch_chart import (  # private: the view's picture, drawn alone
    BINS,
    WIDTH,
    duration_bins,
    duration_histogram,
)

SVG = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


durations = st.lists(st.floats(min_value=0, max_value=1e5, allow_nan=False), max_size=300)


@given(durations, st.integers(min_value=1, max_value=40))
def test_every_duration_is_in_the_bin_its_edges_say(values: list[float], bins: int) -> None:
    edges, counts = duration_bins(values, bins)
    assert len(edges) == bins + 1 and len(counts) == bins
    assert sum(counts) == len(values)
    assert edges[0] == min(values, default=0.0) and edges[-1] >= max(values, default=0.0)
    eps = 1e-9 * (edges[-1] - edges[0] + 1)  # a value on an edge may go to either side
    for k, count in enumerate(counts):
        surely = sum(edges[k] + eps < v < edges[k + 1] - eps for v in values)
        maybe = sum(edges[k] - eps <= v <= edges[k + 1] + eps for v in values)
        assert surely <= count <= maybe, (k, edges, counts)


@given(durations, st.integers(min_value=1, max_value=40))
def test_the_svg_has_a_bar_per_bin_and_counts_every_row(values: list[float], bins: int) -> None:
    root = _parse(duration_histogram(values, cost="1.5", bins=bins))
    bars = root.findall(f"{SVG}rect")
    assert len(bars) == bins == int(root.get("data-bins", ""))
    assert sum(int(b.get("data-count", "")) for b in bars) == len(values)
    assert int(root.get("data-rows", "")) == len(values)
    assert all(float(b.get("height", "")) >= 0 for b in bars)


def test_the_picture_is_static_fits_its_view_and_follows_the_theme() -> None:
    svg = duration_histogram([0.12, 0.2, 0.21, 0.9, 3.0], cost="4 + 1 unknown")
    root = _parse(svg)
    assert "<script" not in svg and " on" not in svg.replace(" one", "")  # no handler either
    assert root.get("viewBox") == f"0 0 {WIDTH} 132" and root.get("width") == "100%"
    assert f"max-width:{WIDTH}px" in root.get("style", "")
    texts = root.findall(f"{SVG}text")
    assert texts and all(t.get("fill") == "currentColor" for t in texts)
    assert all("var(--jp-brand-color1, #" in b.get("style", "") for b in root.iter(f"{SVG}rect"))
    heading = texts[0].text or ""
    assert heading.startswith("5 finished rows · cost so far 4 + 1 unknown")
    tips = [t.text for t in root.iter(f"{SVG}title")]
    assert "0.12 s to 0.36 s: 3 rows" in tips and "0.84 s to 1.08 s: 1 row" in tips
    assert [t.text for t in texts[1:]] == ["0.12 s", "3 s"]


def test_no_rows_yet_draws_empty_bars_and_bins_must_be_positive() -> None:
    root = _parse(duration_histogram([], cost="0"))
    bars = root.findall(f"{SVG}rect")
    assert len(bars) == BINS and {b.get("height") for b in bars} == {"0.0"}
    with pytest.raises(ValueError, match="bins must be at least 1"):
        duration_bins([1.0], 0)
