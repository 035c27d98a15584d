"""A batch's finished rows as a picture: how long they took, and what they cost so far.

One inline SVG, no script: the same markup is live in the view and static in a saved
notebook. It is drawn for any width (a ``viewBox``, at most :data:`WIDTH` px, shrinking
with its view), in the notebook's colours: text in ``currentColor``, bars in JupyterLab's
brand colour through ``style`` (CSS variables work there, not in presentation attributes)
with a fallback outside JupyterLab, so light and dark themes both read. Every bin is a bar
(an empty one is 0 high), each with a ``<title>`` tooltip and its count in ``data-count``.
"""

from __future__ import annotations

from collections.abc import Sequence

from murmur_nb.widgets._html import esc

__all__ = ["BINS", "duration_bins", "duration_histogram"]

#: Bars in the histogram.
BINS = 12
#: The picture's width at most, in px (its ``viewBox``); narrower views shrink it.
WIDTH, HEIGHT = 480, 132
_TOP, _BOTTOM, _SIDE = 22, 18, 6
_BAR = "fill:var(--jp-brand-color1, #1976d2)"


def duration_bins(durations_s: Sequence[float], bins: int = BINS) -> tuple[list[float], list[int]]:
    """``bins + 1`` equal-width edges from the shortest to the longest duration, and how
    many durations fall in each bin (the last bin holds the longest)."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    lo = min(durations_s, default=0.0)
    hi = max(durations_s, default=0.0)
    step = (hi - lo) / bins or 0.001 / bins  # all alike: one millisecond wide
    counts = [0] * bins
    for d in durations_s:
        counts[min(int((d - lo) / step), bins - 1)] += 1
    last = hi if hi > lo else lo + bins * step  # exactly the longest, not lo + bins * step
    return [*(lo + k * step for k in range(bins)), last], counts


def _seconds(s: float) -> str:
    return f"{s:.3g} s" if s < 100 else f"{s:.0f} s"


def duration_histogram(durations_s: Sequence[float], *, cost: str, bins: int = BINS) -> str:
    """The SVG: a bar per bin of the finished rows' durations, their count and the cost so
    far in its heading, the shortest and longest duration under it."""
    edges, counts = duration_bins(durations_s, bins)
    n, tallest = len(durations_s), max(counts, default=0) or 1
    plot_w, plot_h = WIDTH - 2 * _SIDE, HEIGHT - _TOP - _BOTTOM
    slot = plot_w / bins
    bars = []
    for k, count in enumerate(counts):
        h = plot_h * count / tallest
        x, y = _SIDE + k * slot + 1, _TOP + plot_h - h
        rows = "1 row" if count == 1 else f"{count} rows"
        tip = f"{_seconds(edges[k])} to {_seconds(edges[k + 1])}: {rows}"
        bars.append(
            f'<rect class="murmur-hist-bar" data-count="{count}" x="{x:.1f}" y="{y:.1f}" '
            f'width="{max(slot - 2, 1):.1f}" height="{h:.1f}" style="{_BAR}">'
            f"<title>{esc(tip)}</title></rect>"
        )
    head = f"{n} finished rows · cost so far {cost}"
    if n:
        head += f" · most in one bar: {max(counts)}"
    base = _TOP + plot_h
    text = ('fill="currentColor" font-size="11" '
            'style="font-family:var(--jp-ui-font-family,sans-serif)"')  # fmt: skip
    return (
        f'<svg class="murmur-batch-hist" data-rows="{n}" data-bins="{bins}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'style="max-width:{WIDTH}px;height:auto;display:block" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{esc(head)}</title>'
        f'<text x="{_SIDE}" y="14" {text}>{esc(head)}</text>'
        f'<line x1="{_SIDE}" y1="{base}" x2="{WIDTH - _SIDE}" y2="{base}" stroke="currentColor" '
        f'stroke-opacity="0.5"/>{"".join(bars)}'
        f'<text x="{_SIDE}" y="{HEIGHT - 4}" {text}>{esc(_seconds(edges[0]))}</text>'
        f'<text x="{WIDTH - _SIDE}" y="{HEIGHT - 4}" text-anchor="end" {text}>'
        f"{esc(_seconds(edges[-1]))}</text></svg>"
    )
