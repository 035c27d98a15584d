"""What every murmur-nb widget shares: badges, output handling and a stable text form.

Outputs are filled by assigning ``Output.outputs`` (not ``with out:``, which needs a live
kernel), so tests, scripts and saved notebooks hold exactly that mimebundle. A widget's
``text/plain`` is its own summary, with no model id, address or time (nbval compares it), and
its ``text/html`` the same content as static HTML for nbconvert, GitHub and nbviewer. Colours
are JupyterLab's CSS variables with a light fallback; text never sits on a tinted background,
so it keeps the theme's contrast. The required-field mark is :func:`field_label`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import ipywidgets as w

from murmur_nb._render.core import clipped, esc, printable
from murmur_nb._rules import LABEL_CHARS

__all__ = [
    "TextView",
    "badge",
    "bundle_of",
    "close_tree",
    "effect_badges",
    "effect_words",
    "esc",
    "json_tree",
    "lines_html",
    "printable",
    "progress_html",
    "progress_of",
    "require",
    "set_output",
    "tone_colour",
    "volatile",
]

#: tone -> (JupyterLab variable, fallback) for a badge's border and a mark's colour
_TONES: Mapping[str, tuple[str, str]] = {
    "ok": ("--jp-success-color1", "#2e7d32"),
    "error": ("--jp-error-color1", "#c62828"),
    "warn": ("--jp-warn-color1", "#b26a00"),
    "info": ("--jp-brand-color1", "#1976d2"),
    "muted": ("--jp-border-color1", "#9e9e9e"),
}
#: the text colours: main text, secondary text (both AA on the layout colours)
FG = "var(--jp-content-font-color1, #1f1f1f)"
FG_MUTED = "var(--jp-content-font-color2, #4d4d4d)"
BG_SOFT = "var(--jp-layout-color2, #eeeeee)"
BORDER = "var(--jp-border-color2, #dadada)"
#: a neutral tint that needs no theme (what a badge keeps when ``var()`` is stripped)
_GREY = "rgba(128,128,128,0.16)"


def require(value: Any, attribute: str, widget: str, what: str) -> None:
    """A widget's main argument must have ``attribute`` (what its kind has): else a
    ``TypeError`` saying ``what`` the widget takes, not an ``AttributeError`` deep inside."""
    if not hasattr(value, attribute):
        raise TypeError(f"{widget} takes {what}, not a {type(value).__name__}")


def portable(text: str, folders: dict[str, Any]) -> str:
    """``text`` with each folder of ``folders`` (name -> path) written as its name.

    A folder is replaced as given and resolved (a symlinked home is named either way),
    the longest spelling first, so a folder inside another keeps its own name.
    """
    spellings: dict[str, str] = {}
    for name, folder in folders.items():
        for spelling in (os.fspath(folder), os.path.realpath(folder)):
            spellings.setdefault(spelling, name)
    for spelling in sorted(spellings, key=len, reverse=True):
        text = text.replace(spelling, spellings[spelling])
    return text


def tone_colour(tone: str) -> str:
    """The CSS colour of ``tone`` (a JupyterLab variable with a fallback)."""
    var, fallback = _TONES.get(tone, _TONES["muted"])
    return f"var({var}, {fallback})"


def field_label(title: str, *, required: bool) -> str:
    """A form field's title in bold, with the one red ``*`` of a required field."""
    mark = f' <span style="color:{tone_colour("error")}">*</span>' if required else ""
    return f"<b>{esc(clipped(title))}</b>{mark}"


def badge(text: str, tone: str = "muted", title: str = "") -> str:
    """A small inline label; ``tone`` is ok, error, warn, info or muted.

    Each colour is written twice, plain then themed: JupyterLab's sanitizer (an untrusted
    notebook) drops every ``var()``, and the plain one is what stays: a translucent grey
    under the inherited text colour, and the tone's own colour on the border.
    """
    tip = f' title="{esc(title)}"' if title else ""
    fallback = _TONES.get(tone, _TONES["muted"])[1]
    return (
        f'<span class="murmur-badge murmur-{esc(tone)}"{tip} style="display:inline-block;'
        f"padding:0 6px;margin:0 4px 2px 0;border-radius:8px;font-size:85%;"
        f"background:{_GREY};background:{BG_SOFT};color:{FG};"
        f"border:1px solid {fallback};border:1px solid {tone_colour(tone)};"
        f'border-left-width:4px">{esc(text)}</span>'
    )


def volatile(html_text: str) -> str:
    """Mark a run-to-run fact (a duration, an elapsed time): live views show it, the static
    HTML saved in the notebook (which nbval compares) leaves it out."""
    return f'<span class="murmur-volatile">{html_text}</span>'


_VOLATILE = re.compile(
    r'<span class="murmur-volatile">(?:[^<]|<(?!/?span\b)|<span\b[^>]*>[^<]*</span>)*</span>'
)


#: Characters of a result a tree shows: each key and value costs its JSON's length plus
#: :data:`_NODE_CHARS`; past this the rest of a list or object is counted, not drawn. A
#: module's 8 MB string was 8 MB of the view's HTML, and 100,000 small items 20 MB.
TREE_CHARS = 10_000
_NODE_CHARS = 50


def json_tree(value: Any, *, open_depth: int = 1) -> str:
    """``value`` as nested ``<details>``: collapsible without any script, so static too.

    Bounded at :data:`TREE_CHARS`: a long value is cut (``…``) and the items past the
    budget counted in a line naming ``Invocation.result``, which keeps them all.
    """
    return _json_node(value, None, 0, open_depth, [TREE_CHARS])


def _json_node(value: Any, key: str | None, depth: int, open_depth: int, left: list[int]) -> str:
    """One node of :func:`json_tree`, paid for from ``left[0]``, the characters left."""
    key = None if key is None else clipped(key)
    label = f'<span class="murmur-json-key">{esc(key)}</span>: ' if key is not None else ""
    margin = f"margin-left:{12 if depth else 0}px"
    left[0] -= _NODE_CHARS + len(key or "")
    if isinstance(value, dict | list) and value:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        kind = f"{{{len(value)}}}" if isinstance(value, dict) else f"[{len(value)}]"
        inner = []
        for shown, (k, v) in enumerate(items):
            if left[0] <= 0:
                more = f"… and {len(value) - shown} more (Invocation.result keeps them all)"
                inner.append(f'<div style="margin-left:12px;color:{FG_MUTED}">{esc(more)}</div>')
                break
            inner.append(_json_node(v, str(k), depth + 1, open_depth, left))
        opened = " open" if depth < open_depth else ""
        return (
            f'<details class="murmur-json"{opened} style="{margin}">'
            f'<summary>{label}<span style="color:{FG_MUTED}">{esc(kind)}</span></summary>'
            f"{''.join(inner)}</details>"
        )
    text = clipped(json.dumps(value, ensure_ascii=False), max(left[0], LABEL_CHARS))
    left[0] -= len(text)
    return (
        f'<div class="murmur-json-leaf" style="{margin};color:{FG}">'
        f"{label}<code>{esc(text)}</code></div>"
    )


def progress_of(result: Any) -> tuple[int, int] | None:
    """``(done, total)`` when a result reports progress that way, else ``None``."""
    if not isinstance(result, Mapping):
        return None
    done, total = result.get("done"), result.get("total")
    if not (isinstance(done, int) and isinstance(total, int)) or bool in (type(done), type(total)):
        return None
    if total <= 0 or not 0 <= done <= total:
        return None
    return done, total


def progress_html(done: int, total: int) -> str:
    """A static progress bar (``<progress>``) with its numbers in words."""
    return (
        f'<div class="murmur-progress"><progress value="{done}" max="{total}"></progress> '
        f"<span>{done} of {total} done</span></div>"
    )


def bundle_of(obj: Any) -> dict[str, Any]:
    """A mimebundle for any displayable object, always with ``text/plain``."""
    data: dict[str, Any] = {}
    if hasattr(obj, "_repr_mimebundle_"):
        got = obj._repr_mimebundle_()
        if isinstance(got, tuple):
            got = got[0]
        if isinstance(got, Mapping):
            data.update(got)
    elif hasattr(obj, "_repr_html_"):
        rendered = obj._repr_html_()
        if rendered is not None:
            data["text/html"] = rendered
    data.setdefault("text/plain", repr(obj))
    return data


def close_tree(widget: Any) -> None:
    """Close ``widget`` and every widget below it (a box's children, each one's layout and
    style): a view replaced for good then holds nothing open in the kernel or the page
    (``close`` alone closes one widget, not its parts)."""
    for child in getattr(widget, "children", ()) or ():
        close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
        if isinstance(part, w.Widget):
            part.close()
    widget.close()


def set_output(out: w.Output, *objs: Any) -> None:
    """Make ``objs`` the whole content of ``out`` (nothing when ``objs`` is empty)."""
    out.outputs = tuple(
        {"output_type": "display_data", "data": bundle_of(o), "metadata": {}} for o in objs
    )


def lines_html(lines: Iterable[str]) -> str:
    return "".join(f"<div>{line}</div>" for line in lines)


def effect_badges(effects: Any) -> str:
    """Badges for a capability's declared effects."""
    out = []
    if getattr(effects, "local", False):
        out.append(badge("local", "info"))
    if getattr(effects, "network", False):
        out.append(badge("network", "warn"))
    if getattr(effects, "external_writes", False):
        out.append(badge("external writes", "error"))
    provider = getattr(effects, "provider", "")
    if provider:
        out.append(badge(f"provider: {clipped(provider)}", "warn"))
    out.append(
        badge("cost known", "ok")
        if getattr(effects, "cost_known", False)
        else badge("cost unknown", "error")
    )
    return "<div>" + "".join(out) + "</div>"


def effect_words(effects: Any) -> list[str]:
    """The same badges as words, for ``text/plain``."""
    out = [
        name.replace("_", " ")
        for name in ("local", "network", "external_writes")
        if getattr(effects, name, False)
    ]
    provider = getattr(effects, "provider", "")
    if provider:
        out.append(f"provider: {clipped(provider)}")
    out.append("cost known" if getattr(effects, "cost_known", False) else "cost unknown")
    return out


class TextView(w.VBox):  # type: ignore[misc]
    """A VBox whose ``repr`` and ``text/plain`` are a readable, stable summary, with what a
    module, a guest or a record wrote in it (control sequences, bidirectional overrides, a
    lone surrogate) written as escapes (:func:`~murmur_nb._render.core.printable`)."""

    def text(self) -> str:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __repr__(self) -> str:
        return printable(self.text())

    def static_html(self) -> str:
        """The widget's content as plain HTML: every HTML child and every output, in order."""
        return f'<div class="murmur-static">{static_html_of(self)}</div>'

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = printable(self.text())
        bundle["text/html"] = self.static_html()
        return bundle


def static_html_of(widget: Any) -> str:
    """What a widget tree shows, as HTML: HTML values, labels, buttons, outputs' HTML."""
    layout = getattr(widget, "layout", None)
    if getattr(layout, "display", None) == "none":
        return ""
    if isinstance(widget, w.Box):
        return _box_html(widget)
    if isinstance(widget, w.Output):
        return "".join(_output_html(out) for out in widget.outputs)
    return _leaf_html(widget)


def _box_html(box: Any) -> str:
    inner = "".join(static_html_of(child) for child in box.children)
    if not inner:
        return ""
    if "murmur-card" in box._dom_classes:
        style = f"border:1px solid {BORDER};padding:2px 8px;margin:2px 0"
    elif isinstance(box, w.HBox):
        style = "display:flex;flex-wrap:wrap;gap:6px;align-items:baseline"
    else:
        return inner
    return f'<div style="{style}">{inner}</div>'


def _output_html(out: Mapping[str, Any]) -> str:
    data = out.get("data", {})
    html_part = data.get("text/html")
    if html_part is None:
        return f"<pre>{esc(data.get('text/plain', ''))}</pre>"
    return html_part if isinstance(html_part, str) else "".join(html_part)


def _leaf_html(widget: Any) -> str:
    if isinstance(widget, w.HTML):
        return _VOLATILE.sub("", str(widget.value))
    if isinstance(widget, w.Label):
        return f"<div>{esc(widget.value)}</div>"
    if isinstance(widget, w.Button):  # a capability is content; other buttons are controls
        cap = "murmur-cap" in widget._dom_classes
        return f"<code>{esc(widget.description)}</code>" if cap else ""
    if isinstance(widget, w.Dropdown | w.RadioButtons | w.Select):  # its label, not its index
        return _choice_html(widget)
    return _value_html(widget)


def _value_html(widget: Any) -> str:
    if isinstance(widget, w.IntProgress | w.FloatProgress):
        return progress_html(int(widget.value), int(widget.max))
    value = getattr(widget, "value", None)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return f"<div>{esc(getattr(widget, 'description', ''))} {esc(value)}</div>"
    return ""


def _choice_html(widget: Any) -> str:
    """A selection as the option a reader sees; nothing while a placeholder is chosen."""
    label = widget.label
    if label is None or (str(label).startswith("—") and str(label).endswith("—")):
        return ""
    shown = " ".join(part for part in (getattr(widget, "description", ""), str(label)) if part)
    return f"<div>{esc(shown)}</div>"
