"""Timelines: SPEC §2 events drawn as a static SVG chart, one lane per ``lane`` value.

Events are a JSON list or ``{"events": [...]}``; each has ``start`` (seconds as a number, or
an RFC 3339 timestamp), optional ``end``, ``label`` and ``lane``. An event with an ``end``
after its ``start`` is a bar, any other a marker. Lanes keep their order of first appearance.
Everything is drawn in SVG with ``<title>`` tooltips: no script, so it reads the same in
nbconvert output and on GitHub.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from murmur_nb._render.core import Body, CannotRender, RenderBudget, Source, esc
from murmur_nb._render.primitives.text import load_json
from murmur_nb._render.theme import BG, BG_SOFT, BORDER, FG, FG_MUTED

__all__ = ["Event", "parse_events", "render_timeline", "timeline_svg"]

_MAX_TICKS = 20
#: Lane colours. Fixed, not themed: each carries white labels at a contrast of at least 4.8
#: (WCAG AA), and stands out against light and dark pages alike (>= 3.5).
_PALETTE = ("#0969da", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#bf3989", "#1b7c83")
_ON_PALETTE = "#ffffff"
# SVG presentation attributes take no var(): the themed colours go in style attributes.
_GRID = f"stroke:{BORDER}"
_TICK = f"fill:{FG_MUTED}"
_LANE = f"fill:{FG}"
_BAND = f"fill:{BG_SOFT}"
_HALO = f"fill:{FG};stroke:{BG}"


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
        if not math.isfinite(value):
            raise CannotRender(f"{where} is not a finite number")
        return float(value), False
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise CannotRender(f"{where} {value!r} is not an RFC 3339 timestamp") from exc
        if parsed.tzinfo is None:
            raise CannotRender(f"{where} {value!r} has no time zone offset (RFC 3339 needs one)")
        return float(parsed.timestamp()), True
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
        label = "" if item.get("label") is None else str(item["label"])
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
    """Where things go: the time window, the sizes, and time -> x."""

    origin: float
    lo: float
    hi: float
    timestamps: bool
    width: int
    height: int
    label_w: int = 130
    pad: int = 12
    lane_h: int = 30
    axis_h: int = 26

    @property
    def span(self) -> float:
        return self.hi - self.lo or 1.0

    def x(self, t: float) -> float:
        plot_w = self.width - self.label_w - 2 * self.pad
        return self.label_w + self.pad + (t - self.lo) / self.span * plot_w


def _chart(events: list[Event], lanes: list[str], timestamps: bool, width: int) -> _Chart:
    origin = min(e.start for e in events) if (timestamps and events) else 0.0
    lo = min((e.start for e in events), default=0.0) - origin
    hi = max((max(e.start, e.end or e.start) for e in events), default=1.0) - origin
    if not timestamps:
        lo = min(lo, 0.0)
    height = _Chart.axis_h + _Chart.lane_h * max(len(lanes), 1) + _Chart.pad
    return _Chart(origin, lo, hi, timestamps, width, height)


def _axis(c: _Chart) -> list[str]:
    """Grid lines and tick labels along the top."""
    parts: list[str] = []
    step = _nice_step(c.span)
    first = math.ceil(c.lo / step)
    count = min(math.floor(c.hi / step + 1e-9) - first + 1, _MAX_TICKS)
    for k in range(max(count, 0)):  # by index: float steps below an ulp must not loop forever
        tick = (first + k) * step
        tx = c.x(tick)
        parts.append(
            f'<line x1="{tx:.1f}" y1="{c.axis_h - 4}" x2="{tx:.1f}" y2="{c.height - c.pad}" '
            f'style="{_GRID}" stroke-width="1"/>'
            f'<text class="murmur-tick" x="{tx:.1f}" y="{c.axis_h - 8}" text-anchor="middle" '
            f'style="{_TICK}">'
            f"{esc(_tick_label(tick, c.origin, c.timestamps, step))}</text>"
        )
    return parts


def _lane_bands(c: _Chart, lanes: list[str]) -> list[str]:
    """One shaded band per lane, its name at the left."""
    parts: list[str] = []
    for li, lane in enumerate(lanes):
        y0 = c.axis_h + li * c.lane_h
        if li % 2 == 0:  # every other lane shaded
            parts.append(
                f'<rect x="0" y="{y0}" width="{c.width}" height="{c.lane_h}" '
                f'style="{_BAND}" opacity="0.6"/>'
            )
        parts.append(
            f'<text class="murmur-lane" x="6" y="{y0 + c.lane_h / 2 + 4:.1f}" '
            f'style="{_LANE}" font-weight="bold">'
            f"{esc((lane or 'events')[:20])}</text>"
        )
    return parts


def _tip(c: _Chart, e: Event) -> str:
    """The start of an event's tooltip: its label and when it starts (the caller closes it)."""
    return f"{e.label} ({_tick_label(e.start - c.origin, c.origin, c.timestamps, 0.001)}"


def _bar(c: _Chart, e: Event, end: float, y0: int, colour: str) -> list[str]:
    """An event with an ``end`` after its ``start``: a bar, labelled inside when it fits."""
    en = end - c.origin
    tip = _tip(c, e) + f" - {_tick_label(en, c.origin, c.timestamps, 0.001)})"
    x0, x1 = c.x(e.start - c.origin), c.x(en)
    parts = [
        f'<g><title>{esc(tip)}</title><rect x="{x0:.1f}" y="{y0 + 6}" '
        f'width="{max(x1 - x0, 2):.1f}" height="{c.lane_h - 12}" rx="3" fill="{colour}"/>'
    ]
    if e.label and x1 - x0 > 30:
        chars = max(int((x1 - x0 - 6) / 6), 1)
        text = e.label if len(e.label) <= chars else e.label[: chars - 1] + "…"
        parts.append(
            f'<text class="murmur-event" x="{x0 + 3:.1f}" y="{y0 + c.lane_h / 2 + 4:.1f}" '
            f'fill="{_ON_PALETTE}">'
            f"{esc(text)}</text>"
        )
    parts.append("</g>")
    return parts


def _marker(c: _Chart, e: Event, y0: int, colour: str) -> list[str]:
    """An instant: a diamond, labelled to its right."""
    cx, cy = c.x(e.start - c.origin), y0 + c.lane_h / 2
    parts = [
        f'<g><title>{esc(_tip(c, e) + ")")}</title><path d="M{cx:.1f} {cy - 7:.1f} '
        f'L{cx + 7:.1f} {cy:.1f} L{cx:.1f} {cy + 7:.1f} L{cx - 7:.1f} {cy:.1f} Z" '
        f'fill="{colour}"/>'
    ]
    if e.label:
        parts.append(
            f'<text class="murmur-event" x="{cx + 9:.1f}" y="{cy + 4:.1f}" style="{_HALO}" '
            'stroke-width="3" paint-order="stroke">'
            f"{esc(e.label[:24])}</text>"
        )
    parts.append("</g>")
    return parts


def timeline_svg(events: list[Event], timestamps: bool, width: int = 860) -> tuple[str, list[str]]:
    """The SVG chart for ``events`` and its lane names (in order)."""
    lanes: list[str] = []
    for e in events:
        if e.lane not in lanes:
            lanes.append(e.lane)
    c = _chart(events, lanes, timestamps, width)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{c.height}" '
        f'viewBox="0 0 {width} {c.height}" role="img" font-family="sans-serif" font-size="11" '
        'style="max-width:100%;height:auto">',
        *_axis(c),
        *_lane_bands(c, lanes),
    ]
    lane_index = {lane: i for i, lane in enumerate(lanes)}
    # bars first, then markers on top, so an instant inside a bar stays visible
    for e in sorted(events, key=lambda e: not (e.end is not None and e.end > e.start)):
        li = lane_index[e.lane]
        colour = _PALETTE[li % len(_PALETTE)]
        y0 = c.axis_h + li * c.lane_h
        if e.end is not None and e.end > e.start:
            parts += _bar(c, e, e.end, y0, colour)
        else:
            parts += _marker(c, e, y0, colour)
    parts.append("</svg>")
    return "".join(parts), lanes


def render_timeline(source: Source, budget: RenderBudget) -> Body:
    events, timestamps = parse_events(load_json(source, budget))
    if not events:
        raise CannotRender("the timeline has no events")
    drawn = events[: budget.timeline_events]
    svg, lanes = timeline_svg(drawn, timestamps)
    span_lo = min(e.start for e in events)
    span_hi = max(max(e.start, e.end or e.start) for e in events)
    if timestamps:
        first = datetime.fromtimestamp(span_lo, tz=UTC).isoformat().replace("+00:00", "Z")
        span = f"from {first}, spanning {span_hi - span_lo:g} s"
    else:
        span = f"spanning {span_lo:g}-{span_hi:g} s"
    body = Body(
        html=svg,
        details=[f"{len(events)} events in {len(lanes)} lanes, {span}"],
    )
    if len(drawn) < len(events):
        body.notes.append(
            f"drew the first {len(drawn)} of {len(events)} events (RenderBudget.timeline_events)"
        )
    return body
