"""What every murmur-nb widget shares: badges, output handling and a stable text form.

Design notes:

* Output widgets are filled by assigning ``Output.outputs`` rather than ``with out:``:
  capturing needs a live kernel, assignment works the same in a kernel, in tests and in
  scripts, and the saved notebook holds exactly the mimebundle we put there.
* ``text/plain`` of a widget is its own summary, never ipywidgets' trait dump: nbval
  compares it, so it holds no model id, memory address, wall-clock time or duration.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

import ipywidgets as w

__all__ = [
    "TextView",
    "badge",
    "bundle_of",
    "effect_badges",
    "effect_words",
    "esc",
    "lines_html",
    "set_output",
]

_TONES: Mapping[str, tuple[str, str]] = {
    "ok": ("#e6f4ea", "#137333"),
    "error": ("#fce8e6", "#a50e0e"),
    "warn": ("#fef7e0", "#8a5300"),
    "info": ("#e8f0fe", "#174ea6"),
    "muted": ("#f1f3f4", "#3c4043"),
}


def esc(text: object) -> str:
    """HTML-escape any value's ``str``."""
    return html.escape(str(text), quote=True)


def badge(text: str, tone: str = "muted", title: str = "") -> str:
    """A small inline label; ``tone`` is ok, error, warn, info or muted."""
    bg, fg = _TONES.get(tone, _TONES["muted"])
    tip = f' title="{esc(title)}"' if title else ""
    return (
        f'<span class="murmur-badge murmur-{esc(tone)}"{tip} style="display:inline-block;'
        f"padding:0 6px;margin:0 4px 2px 0;border-radius:8px;font-size:85%;"
        f'background:{bg};color:{fg}">{esc(text)}</span>'
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
        out.append(badge(f"provider: {provider}", "warn"))
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
        out.append(f"provider: {provider}")
    out.append("cost known" if getattr(effects, "cost_known", False) else "cost unknown")
    return out


class TextView(w.VBox):  # type: ignore[misc]
    """A VBox whose ``repr`` and ``text/plain`` are a readable, stable summary."""

    def text(self) -> str:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.text()
        return bundle
