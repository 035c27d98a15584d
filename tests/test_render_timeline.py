"""Timeline drawing holds for any well-formed event list (property test).

Calls the timeline parser and drawer (internal) directly: a property test over thousands of
event lists is only affordable without writing, verifying and rendering a file for each.
"""

from __future__ import annotations

from bs4 import BeautifulSoup
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_nb._render.primitives.timeline import (  # private: a property test, no files
    parse_events,
    timeline_svg,
)

_TIME = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
_EVENT = st.fixed_dictionaries(
    {"start": _TIME},
    optional={
        "end": _TIME,
        "label": st.text(max_size=30),
        "lane": st.sampled_from(["", "a", "b", "<lane & co>"]),
    },
)


@settings(deadline=None)
@given(st.lists(_EVENT, min_size=1, max_size=40), st.booleans())
def test_every_event_is_drawn_once_in_its_lane(events: list[dict[str, object]], wrap: bool) -> None:
    parsed, timestamps = parse_events({"events": events} if wrap else events)
    assert not timestamps and len(parsed) == len(events)
    svg_text, lanes = timeline_svg(parsed, timestamps)
    svg = BeautifulSoup(svg_text, "html.parser").select_one("svg")
    assert svg is not None
    groups = svg.select("g")
    assert len(groups) == len(events)
    expected_lanes = list(dict.fromkeys(str(e.get("lane", "")) for e in events))
    assert lanes == expected_lanes
    bars = sum(1 for e in parsed if e.end is not None and e.end > e.start)
    assert sum(1 for g in groups if g.select_one("rect")) == bars
    for g in groups:
        assert g.select_one("title") is not None


def test_a_span_below_float_resolution_still_draws() -> None:
    parsed, _ = parse_events([{"start": 1e6}, {"start": 1e6 + 1e-9, "label": "x"}])
    svg_text, _ = timeline_svg(parsed, False)
    assert svg_text.count("<g>") == 2


def test_a_subnormal_span_still_draws() -> None:
    """Found by Hypothesis: a span of one subnormal made the tick step underflow to zero."""
    parsed, _ = parse_events([{"start": 5e-324, "label": "tiny"}])
    svg_text, _ = timeline_svg(parsed, False)
    assert svg_text.count("<g>") == 1 and "tiny" in svg_text
