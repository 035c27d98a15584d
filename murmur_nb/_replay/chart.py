"""The small chart a replay comparison leads with: per hook, messages kept and dropped,
characters out and fuel, as bars.

It is HTML (``div`` bars with a width in percent), not inline SVG: JupyterLab's sanitizer
removes ``<svg>`` from an untrusted notebook's HTML (its text would be left as loose words),
while ``div``, a percent ``width`` and a plain ``background`` colour survive it, as they
survive nbconvert; no script. Each figure has its own scale (messages, characters and fuel
are not one unit), its value written beside its bar in the theme's text colour; a bar is a
tone (:mod:`murmur_nb._render.theme`: a plain colour, then the theme's), never under text.
The four blocks sit in one row in an 868 px output and wrap, two a row, in a narrow one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from murmur_nb._render.core import esc
from murmur_nb._render.theme import ACCENT, FG, FG_MUTED, WARN, kept

__all__ = ["FIGURES", "totals_chart"]

#: The figures drawn, in order: (key in the totals, what the block is called).
FIGURES = (
    ("kept", "messages kept"),
    ("dropped", "messages dropped"),
    ("chars_out", "chars out"),
    ("fuel_used", "fuel"),
)
_TONES = (ACCENT, WARN)


def totals_chart(sides: Sequence[str], totals: Mapping[str, Mapping[str, int]]) -> str:
    """Bars for each of :data:`FIGURES`, one per side (``totals[side][figure]``).

    Each side is named once, in a legend beside its colour; every bar carries its value as
    text and a tooltip.
    """
    legend = "".join(
        f'<span style="display:inline-block;margin-right:12px">{_swatch(tone)} '
        f"{esc(side)} <small>({_calls(totals[side])})</small></span>"
        for side, tone in zip(sides, _TONES, strict=False)
    )
    blocks = "".join(_block(key, name, sides, totals) for key, name in FIGURES)
    return (
        f'<div class="murmur-comparison-chart" style="color:{FG};margin:4px 0 8px 0">'
        f'<div class="murmur-chart-legend">{legend}</div>'
        f'<div style="display:flex;flex-wrap:wrap;gap:4px 16px">{blocks}</div></div>'
    )


def _calls(figures: Mapping[str, int]) -> str:
    failed = figures.get("failed", 0)
    calls = figures.get("calls", 0)
    return f"{calls} calls" + (f", {failed} failed" if failed else "")


def _swatch(tone: str) -> str:
    return (f'<span style="display:inline-block;width:10px;height:10px;'
            f'{kept("background", tone)}"></span>')  # fmt: skip


def _block(key: str, name: str, sides: Sequence[str], totals: Mapping[str, Mapping[str, int]]
           ) -> str:  # fmt: skip
    values = [int(totals[side].get(key, 0)) for side in sides]
    top = max(values, default=0) or 1
    bars = "".join(
        f'<div style="display:flex;align-items:center;gap:6px" title="{esc(side)}: '
        f'{value:,} {name}"><div style="flex:1 1 auto;min-width:0">'
        f'<div class="murmur-chart-bar" data-side="{esc(side)}" data-value="{value}" '
        f'style="width:{100 * value / top:.1f}%;height:10px;{kept("background", tone)}">'
        f'</div></div><span style="flex:0 0 auto;min-width:6ch;text-align:right">'
        f"{value:,}</span></div>"
        for side, value, tone in zip(sides, values, _TONES, strict=False)
    )
    return (
        f'<div class="murmur-chart-figure" data-figure="{key}" '
        'style="flex:1 1 180px;min-width:0;max-width:100%">'
        f'<div style="color:{FG_MUTED}"><small>{name}</small></div>{bars}</div>'
    )
