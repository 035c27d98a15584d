"""Timelines: SPEC §2 events drawn as a static chart, one lane per ``lane`` value.

Events are a JSON list or ``{"events": [...]}``; each has ``start`` (seconds as a number, or
an RFC 3339 timestamp), optional ``end``, ``label`` and ``lane``. An event with an ``end``
after its ``start`` is a bar, any other a marker. Lanes keep their order of first appearance.
The chart is plain HTML placed with inline styles, with ``title`` tooltips: no script and no
SVG, so it reads the same in nbconvert output, on nbviewer and in a notebook JupyterLab does
not trust (its sanitizer removes inline SVG, which left the labels as one run-on string).
A label is cut to 200 characters as it is read (:func:`~..core.clipped`): each is escaped
into a tooltip and a bar, and three labels of 8 MiB of quotes took 880 MiB to escape.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from murmur_nb._render.core import Body, CannotRender, RenderBudget, Source, clipped, esc
from murmur_nb._render.primitives.text import load_json
from murmur_nb._render.theme import FG, FG_MUTED, GREY
from murmur_nb._rules import rfc3339_instant

__all__ = ["Event", "parse_events", "render_timeline", "timeline_html"]

_MAX_TICKS = 20
#: Lane colours. Fixed, not themed: each carries white labels at a contrast of at least 4.8
#: (WCAG AA), and stands out against light and dark pages alike (>= 3.5).
_PALETTE = ("#0969da", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#bf3989", "#1b7c83")
_ON_PALETTE = "#ffffff"
_LABEL_W = 130
_PAD = 12
_LANE_H = 30
_AXIS_H = 20
_ABS = "position:absolute;white-space:nowrap"
# Themed text colours; untrusted, the var() is dropped and the theme's own text colour shows.
_TICK = f"color:{FG_MUTED}"
_LANE = f"color:{FG};font-weight:bold"
# Grid lines: grey at half opacity reads on light and dark pages without a theme.
_GRID = "border-left:1px solid rgba(128,128,128,0.45)"


@dataclass(frozen=True)
class Event:
    start: float
    end: float | None
    label: str
    lane: str


def _time(value: Any, where: str) -> tuple[float, bool]:
    """``(seconds, is_timestamp)`` of a ``start``/``end`` value."""
    if isinstance(value, bool):
        raise CannotRender(f"{where} is a boolean, not a time")
    if isinstance(value, int | float):
        try:
            seconds = float(value)  # an int past float's range (JSON allows any) overflows
        except OverflowError:
            seconds = math.inf
        if not math.isfinite(seconds):
            raise CannotRender(f"{where} is not a finite number of seconds")
        return seconds, False
    if isinstance(value, str):
        parsed = rfc3339_instant(value)
        if parsed is not None:
            return float(parsed.timestamp()), True
        with contextlib.suppress(ValueError):
            if datetime.fromisoformat(value).tzinfo is None:
                raise CannotRender(
                    f"{where} {value!r} has no time zone offset (RFC 3339 needs one)"
                )
        raise CannotRender(f"{where} {value!r} is not an RFC 3339 timestamp")
    raise CannotRender(f"{where} must be a number of seconds or an RFC 3339 string")


def parse_events(value: Any) -> tuple[list[Event], bool]:
    """Events from a timeline document, and whether times were timestamps (else seconds)."""
    raw = value.get("events") if isinstance(value, dict) else value
    if not isinstance(raw, list):
        raise CannotRender('a timeline is a JSON list of events or {"events": [...]}')
    events: list[Event] = []
    kinds: set[bool] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or "start" not in item:
            raise CannotRender(f"event {i} is not an object with a 'start'")
        start, ts = _time(item["start"], f"event {i} start")
        kinds.add(ts)
        end: float | None = None
        if item.get("end") is not None:
            end, ts_end = _time(item["end"], f"event {i} end")
            kinds.add(ts_end)
        label = "" if item.get("label") is None else clipped(str(item["label"]))
        lane = "" if item.get("lane") is None else str(item["lane"])
        events.append(Event(start, end, label, lane))
    if len(kinds) > 1:
        raise CannotRender("a timeline mixes numeric seconds and RFC 3339 timestamps")
    return events, kinds == {True}


def _nice_step(span: float, target: int = 8) -> float:
    raw = span / target
    if not (math.isfinite(raw) and raw > 0):  # a span of a few subnormals underflows to 0
        return span if math.isfinite(span) and span > 0 else 1.0
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude  # pragma: no cover


def _tick_label(t: float, origin: float, timestamps: bool, step: float) -> str:
    if timestamps:
        when = datetime.fromtimestamp(origin + t, tz=UTC)
        return when.strftime("%H:%M:%S" if step >= 1 else "%H:%M:%S.%f")[:12]
    if step >= 1:
        return f"{t:g}s"
    return f"{t:.3g}s"


@dataclass(frozen=True)
class _Chart:
    """The time window and time -> percent of the plot's width."""

    origin: float
    lo: float
    hi: float
    timestamps: bool

    @property
    def span(self) -> float:
        return self.hi - self.lo or 1.0

    def x(self, t: float) -> float:
        """Where ``t`` lies across the plot, in percent (0-100)."""
        return min(max((t - self.lo) / self.span * 100, 0.0), 100.0)


def _chart(events: list[Event], timestamps: bool) -> _Chart:
    origin = min(e.start for e in events) if (timestamps and events) else 0.0
    lo = min((e.start for e in events), default=0.0) - origin
    hi = max((max(e.start, e.end or e.start) for e in events), default=1.0) - origin
    if not timestamps:
        lo = min(lo, 0.0)
    return _Chart(origin, lo, hi, timestamps)


def _at(x: float, gap: int) -> str:
    """Left of a point, ``gap`` px to its right; or, past 70 %, right of it, ``gap`` px left:
    a label never runs off the plot's right edge."""
    if x <= 70:
        return f"left:{x:.2f}%;margin-left:{gap}px"
    return f"right:{100 - x:.2f}%;margin-right:{gap}px"


def _ticks(c: _Chart) -> list[tuple[float, str]]:
    """``(percent, label)`` of each tick along the axis."""
    step = _nice_step(c.span)
    first = math.ceil(c.lo / step)
    count = min(math.floor(c.hi / step + 1e-9) - first + 1, _MAX_TICKS)
    # by index: float steps below an ulp must not loop forever
    ticks = [(first + k) * step for k in range(max(count, 0))]
    return [(c.x(t), _tick_label(t, c.origin, c.timestamps, step)) for t in ticks]


def _axis(c: _Chart) -> str:
    """The tick labels, each beside its grid line, in a row above the lanes."""
    labels = "".join(
        f'<span class="murmur-tick" style="{_ABS};top:2px;{_at(x, 3)};{_TICK}">{esc(label)}</span>'
        for x, label in _ticks(c)
    )
    return f'<div style="display:flex;height:{_AXIS_H}px">{_gutter("")}{_plot(labels)}</div>'


def _grid(c: _Chart) -> str:
    """The grid lines, one per tick, behind the lanes."""
    return "".join(
        f'<div style="{_ABS};top:0;bottom:0;left:{x:.2f}%;width:0;{_GRID}"></div>'
        for x, _label in _ticks(c)
    )


def _gutter(inner: str, style: str = "") -> str:
    """The column of lane names, left of the plot."""
    return (
        f'<div style="flex:none;width:{_LABEL_W}px;box-sizing:border-box;padding-left:6px;'
        f"overflow:hidden;text-overflow:ellipsis;white-space:nowrap;{style}\">{inner}</div>"
    )


def _plot(inner: str) -> str:
    """The plot area: events are placed in it by percent of its width."""
    return f'<div style="position:relative;flex:1;margin-right:{_PAD}px">{inner}</div>'


def _tip(c: _Chart, e: Event) -> str:
    """An event's tooltip: its label and when it happens."""
    when = _tick_label(e.start - c.origin, c.origin, c.timestamps, 0.001)
    if e.end is not None and e.end > e.start:
        when += f" - {_tick_label(e.end - c.origin, c.origin, c.timestamps, 0.001)}"
    return f"{e.label} ({when})"


def _bar(c: _Chart, e: Event, end: float, colour: str) -> str:
    """An event with an ``end`` after its ``start``: a bar, its label inside (cut to fit)."""
    x0, x1 = c.x(e.start - c.origin), c.x(end - c.origin)
    return (
        f'<div class="murmur-event murmur-bar" title="{esc(_tip(c, e))}" style="{_ABS};top:6px;'
        f"left:{x0:.2f}%;width:{max(x1 - x0, 0.3):.2f}%;min-width:2px;height:{_LANE_H - 12}px;"
        f"line-height:{_LANE_H - 12}px;background:{colour};color:{_ON_PALETTE};"
        f"border-radius:3px;padding:0 3px;box-sizing:border-box;overflow:hidden;"
        f'white-space:nowrap;text-overflow:ellipsis">{esc(e.label)}</div>'
    )


def _marker(c: _Chart, e: Event, colour: str) -> str:
    """An instant: a diamond at its time, its label on a tab of the lane's colour beside it
    (facing left near the right edge), outlined so it stands out on a bar of that colour."""
    x = c.x(e.start - c.origin)
    diamond = (
        f'<span style="{_ABS};top:{_LANE_H / 2 - 9:.0f}px;left:{x:.2f}%;margin-left:-7px;'
        f'width:14px;text-align:center;font-size:16px;line-height:18px;color:{colour}">◆</span>'
    )
    if not e.label:
        return f'<div class="murmur-marker" title="{esc(_tip(c, e))}">{diamond}</div>'
    tab = (
        f'<span class="murmur-event" style="{_ABS};top:7px;{_at(x, 9)};max-width:45%;'
        f"height:{_LANE_H - 14}px;line-height:{_LANE_H - 14}px;padding:0 4px;border-radius:3px;"
        f"background:{colour};color:{_ON_PALETTE};box-shadow:0 0 0 2px rgba(255,255,255,0.85);"
        f'overflow:hidden;white-space:nowrap;text-overflow:ellipsis">{esc(e.label[:40])}</span>'
    )
    return f'<div class="murmur-marker" title="{esc(_tip(c, e))}">{diamond}{tab}</div>'


def _lane(c: _Chart, lane: str, index: int, events: list[Event]) -> str:
    """One lane: its name, then its bars, then its markers on top."""
    colour = _PALETTE[index % len(_PALETTE)]
    band = f"background:{GREY};" if index % 2 == 0 else ""  # every other lane shaded
    bars = [e for e in events if e.end is not None and e.end > e.start]
    marks = [e for e in events if not (e.end is not None and e.end > e.start)]
    inner = "".join(_bar(c, e, e.end, colour) for e in bars if e.end is not None)
    inner += "".join(_marker(c, e, colour) for e in marks)
    name = f'<span class="murmur-lane" style="{_LANE}">{esc((lane or "events")[:20])}</span>'
    return (
        f'<div style="display:flex;height:{_LANE_H}px;line-height:{_LANE_H}px;{band}">'
        f"{_gutter(name)}{_plot(inner)}</div>"
    )


def timeline_html(events: list[Event], timestamps: bool) -> tuple[str, list[str]]:
    """The chart for ``events`` and its lane names (in order).

    Plain HTML placed with inline styles in percent (no SVG, no script, no ``calc()`` or
    ``transform``), so JupyterLab's sanitizer, GitHub and nbviewer keep its layout: an
    untrusted notebook shows the same lanes, ticks and labels.
    """
    lanes: list[str] = []
    for e in events:
        if e.lane not in lanes:
            lanes.append(e.lane)
    c = _chart(events, timestamps)
    rows = "".join(
        _lane(c, lane, i, [e for e in events if e.lane == lane]) for i, lane in enumerate(lanes)
    )
    grid = (
        f'<div style="{_ABS};top:0;bottom:0;left:{_LABEL_W}px;right:{_PAD}px">{_grid(c)}</div>'
    )
    body = (
        f'<div class="murmur-timeline" role="img" aria-label="timeline of {len(events)} events" '
        'style="position:relative;font-family:sans-serif;font-size:11px;min-width:420px;'
        f'padding-bottom:{_PAD}px">{_axis(c)}<div style="position:relative">{grid}{rows}</div>'
        "</div>"
    )
    return body, lanes


def render_timeline(source: Source, budget: RenderBudget) -> Body:
    events, timestamps = parse_events(load_json(source, budget))
    if not events:
        raise CannotRender("the timeline has no events")
    drawn = events[: budget.timeline_events]
    chart, _ = timeline_html(drawn, timestamps)
    lanes = dict.fromkeys(e.lane for e in events)  # the whole timeline's, as its count and span
    span_lo = min(e.start for e in events)
    span_hi = max(max(e.start, e.end or e.start) for e in events)
    if timestamps:
        first = datetime.fromtimestamp(span_lo, tz=UTC).isoformat().replace("+00:00", "Z")
        span = f"from {first}, spanning {span_hi - span_lo:g} s"
    else:
        span = f"spanning {span_lo:g}-{span_hi:g} s"
    body = Body(
        html=chart,
        details=[f"{len(events)} events in {len(lanes)} lanes, {span}"],
    )
    if len(drawn) < len(events):
        body.notes.append(
            f"drew the first {len(drawn)} of {len(events)} events (RenderBudget.timeline_events)"
        )
    return body
