"""Timeline drawing holds for any well-formed event list (property test).

Calls the timeline parser and drawer (internal) directly: a property test over thousands of
event lists is only affordable without writing, verifying and rendering a file for each.
The hostile label (megabytes of quotes) is a real file rendered through ``render_file``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hook_guard import MIB, PeakRss

import murmur_nb as mnb
from murmur_nb._render.core import CannotRender  # private: what a parse refuses with
from murmur_nb._render.primitives.timeline import (  # private: a property test, no files
    parse_events,
    timeline_html,
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
    chart_html, lanes = timeline_html(parsed, timestamps)
    chart = BeautifulSoup(chart_html, "html.parser").select_one(".murmur-timeline")
    assert chart is not None
    drawn = chart.select(".murmur-bar, .murmur-marker")
    assert len(drawn) == len(events)
    expected_lanes = list(dict.fromkeys(str(e.get("lane", "")) for e in events))
    assert lanes == expected_lanes
    assert len(chart.select(".murmur-lane")) == len(lanes)
    bars = sum(1 for e in parsed if e.end is not None and e.end > e.start)
    assert len(chart.select(".murmur-bar")) == bars
    for mark in drawn:
        assert mark.get("title")
    # every place is a percent of the plot, inside it
    for left in re.findall(r"(?:left|right):(-?[\d.]+)%", chart_html):
        assert 0 <= float(left) <= 100
    assert "<svg" not in chart_html and "var(" not in re.sub(r"color:var\([^)]*\)", "", chart_html)


def test_a_span_below_float_resolution_still_draws() -> None:
    parsed, _ = parse_events([{"start": 1e6}, {"start": 1e6 + 1e-9, "label": "x"}])
    chart_html, _ = timeline_html(parsed, False)
    assert chart_html.count('class="murmur-marker"') == 2


def test_a_subnormal_span_still_draws() -> None:
    """Found by Hypothesis: a span of one subnormal made the tick step underflow to zero."""
    parsed, _ = parse_events([{"start": 5e-324, "label": "tiny"}])
    chart_html, _ = timeline_html(parsed, False)
    assert chart_html.count('class="murmur-marker"') == 1 and "tiny" in chart_html


def test_timestamps_follow_rfc3339_as_records_do() -> None:
    """The timeline took any ISO 8601 text (a week date, a comma fraction) that a record's
    reader reads as NaT, and both now take RFC 3339's lowercase ``t`` and ``z``."""
    parsed, _ = parse_events([{"start": "2026-01-01t05:00:00z"},
                              {"start": "2026-01-01T06:00:00+01:00"}])  # fmt: skip
    assert [e.start for e in parsed] == [parsed[0].start] * 2  # the same instant
    for stamp, why in (("2026-W01-1T05:00:00Z", "is not an RFC 3339 timestamp"),
                       ("2026-01-01T05:00:00,5Z", "is not an RFC 3339 timestamp"),
                       ("2026-01-01T05:00:00", "has no time zone offset")):  # fmt: skip
        with pytest.raises(CannotRender, match=re.escape(f"{stamp!r} {why}")):
            parse_events([{"start": stamp}])


def test_a_timeline_cut_by_its_budget_counts_every_lane(tmp_path: Path) -> None:
    """``RenderBudget(timeline_events=4)`` said "10 events in 2 lanes": the events and the
    span were the whole timeline's, the lanes only those of the 4 events drawn."""
    events = [{"start": i, "lane": "abc"[min(i // 4, 2)], "label": f"e{i}"} for i in range(10)]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(events))
    whole = mnb.render_file(path, "application/json", "timeline").text
    cut = mnb.render_file(path, "application/json", "timeline",
                          budget=mnb.RenderBudget(timeline_events=4)).text  # fmt: skip
    assert "10 events in 3 lanes" in whole and "10 events in 3 lanes" in cut, cut
    assert "drew the first 4 of 10 events" in cut


def test_labels_of_megabytes_of_quotes_are_cut_before_they_are_escaped(tmp_path: Path) -> None:
    """Three events labelled with 2 MiB of ``'``: each label was escaped whole (six bytes a
    quote) into a tooltip and a bar before the rendering's total refused it (24 MiB of
    labels took 880 MiB); the chart now shows each label's first 200 characters."""
    file = tmp_path / "t.json"
    file.write_text(json.dumps([{"start": i, "end": i + 1, "label": "'" * (2 << 20)}
                                for i in range(3)]))  # fmt: skip
    started = time.perf_counter()
    with PeakRss() as rss:
        r = mnb.render_file(file, "application/json", "timeline")
    elapsed = time.perf_counter() - started
    assert rss.peak - rss.baseline < 48 * MIB  # 180 MiB before
    assert elapsed < 2.0  # 0.03 s measured
    assert r.primitive == "timeline" and r.ok
    assert len(r.html) < 64 * 1024
    bars = BeautifulSoup(r.html, "html.parser").select(".murmur-bar")
    assert [bar.get_text() for bar in bars] == ["'" * 200 + "…"] * 3
    assert bars[0]["title"] == "'" * 200 + "… (0s - 1s)"
