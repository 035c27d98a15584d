"""The colours of every rendering: JupyterLab's CSS variables, each with a light fallback.

In JupyterLab the variables follow the theme (light, dark, high contrast); elsewhere
(nbconvert, GitHub) the fallback applies. Text is drawn in the content colours on the page's
own background or a neutral layout colour, never on a tinted one: a tone (error, warning,
accent) colours only a border or a mark, so the theme's own contrast holds in every theme.

JupyterLab drops a ``var(...)`` declaration when it sanitizes a notebook it does not trust
(so do ``calc()``, ``transform`` and ``data-*`` attributes; plain colours, ``rgba()``,
``position``, ``left``/``width`` in percent and ``title`` are kept); everything then takes
the theme's inherited colours, which read well too. That is why no text or page colour here
is a bare hex value: a hex background surviving next to a dropped ``var()`` text colour is
exactly what would make white text on a near-white box. A neutral box keeps its shape with
:func:`soft_background`: a translucent grey first, which survives and reads under the
inherited text colour in light and dark themes, then the themed colour, which wins where
it is kept.
"""

from __future__ import annotations

__all__ = [
    "ACCENT",
    "BG",
    "BG_SOFT",
    "BORDER",
    "ERROR",
    "FG",
    "FG_MUTED",
    "GREY",
    "WARN",
    "kept",
    "soft_background",
]

#: main text
FG = "var(--jp-content-font-color1, #1f2328)"
#: secondary text (sizes, captions); on ``BG`` only
FG_MUTED = "var(--jp-content-font-color2, #57606a)"
#: the page
BG = "var(--jp-layout-color0, #ffffff)"
#: a neutral box (labels, lanes, placeholders); ``FG`` reads on it in every theme
BG_SOFT = "var(--jp-layout-color2, #eeeeee)"
#: frames and grid lines
BORDER = "var(--jp-border-color2, #d0d7de)"
#: tones, for borders and marks only
ERROR = "var(--jp-error-color1, #cf222e)"
WARN = "var(--jp-warn-color1, #d4a72c)"
ACCENT = "var(--jp-brand-color1, #0969da)"

#: a neutral tint that needs no theme: grey at low opacity over whatever the page is
GREY = "rgba(128,128,128,0.16)"


def soft_background() -> str:
    """``background`` of a neutral box, kept (as :data:`GREY`) when ``var()`` is stripped."""
    return f"background:{GREY};background:{BG_SOFT}"


def kept(prop: str, themed: str) -> str:
    """``prop`` set to a tone's plain fallback, then to ``themed`` (``var(--x, fallback)``).

    For tones only (borders, marks): their fallbacks read on light and dark pages alike.
    """
    fallback = themed.rsplit(",", 1)[-1].rstrip(") ").strip()
    return f"{prop}:{fallback};{prop}:{themed}"
