"""Text, Markdown and JSON: read within the text budget, shown without script.

Only the first ``RenderBudget.text_bytes`` of a text file are read; the card says how much
was shown of how much. The cut drops at most the one character it splits; a byte that is not
UTF-8 shows as U+FFFD with a note, in a file of any size (:func:`decode_utf8`). Markdown is
converted with mistune (with raw HTML escaped, since the text comes from a module) and shown
as its source when mistune is not installed. JSON gets a collapsible tree made of nested
``<details>`` elements, which every HTML viewer folds without script, plus the indented text;
the tree stops at a depth, so a small file nested a thousand levels deep draws (and says
where it stopped) instead of exhausting Python's recursion limit.

A Markdown image on another server (``![](https://...)``) would be fetched by the reader's
browser each time the output is shown: a beacon telling that server when, where and by whom
the notebook is read. Such images become links (:func:`is_remote` is the one rule) unless
the rendering opts in with ``RenderBudget(remote_images=True)``; images in the page itself
(``data:``) and beside the notebook (a relative path) stay images.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from murmur_nb._render.core import (
    RENDER_EXTRA,
    Body,
    CannotRender,
    RenderBudget,
    Source,
    clipped,
    esc,
    format_size,
    readable,
)

__all__ = [
    "NOT_UTF8",
    "MarkdownShown",
    "TextHead",
    "decode_utf8",
    "is_remote",
    "linked_note",
    "load_json",
    "markdown_block",
    "markdown_html",
    "markdown_shown",
    "read_text",
    "render_json",
    "render_markdown",
    "render_text",
]

# JupyterLab's own editor colours (tuned for each theme), GitHub's light ones as fallbacks
_STRING = "var(--jp-mirror-editor-string-color, #0a3069)"
_NUMBER = "var(--jp-mirror-editor-number-color, #953800)"
_KEY = "var(--jp-mirror-editor-property-color, #8250df)"
_MUTED = "var(--jp-content-font-color2, #57606a)"

_PRE = (
    "white-space:pre-wrap;word-break:break-word;font-size:12px;"
    "background:var(--jp-layout-color2, #f6f8fa);color:var(--jp-content-font-color1, #1f2328);"
    "padding:6px;border-radius:4px;margin:0;max-height:480px;overflow:auto"
)

#: a long unbroken word (a hash, a URL) wraps inside the card instead of overflowing it
_WRAP = "overflow-wrap:anywhere;word-break:break-word;max-width:100%"


def decode_utf8(data: bytes, *, cut: bool) -> tuple[str, bool]:
    """``data`` as text, and whether it was not valid UTF-8 (each invalid byte is shown as
    U+FFFD). When ``cut`` (the bytes stop at a budget), a character split by the cut is
    dropped, never the rest: the one rule for decoding a head of bytes.

    >>> decode_utf8("né".encode()[:-1], cut=True)
    ('n', False)
    >>> decode_utf8(b"caf\\xe9 ok", cut=False)[1]
    True
    """
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=not cut), False
    except UnicodeDecodeError:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode(data, final=not cut), True


#: the card's note for a file that is not valid UTF-8, whatever its size
NOT_UTF8 = "not valid UTF-8: each invalid byte is shown as U+FFFD (\ufffd)"


@dataclass(frozen=True)
class TextHead:
    """The start of a text file, as shown: the text, whether it was cut at the budget, and
    whether its bytes were not valid UTF-8."""

    text: str
    cut: bool
    invalid: bool


def read_text(path: Path, limit: int) -> TextHead:
    """The first ``limit`` bytes of ``path`` as text (:func:`decode_utf8`)."""
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    cut = len(data) > limit
    text, invalid = decode_utf8(data[:limit], cut=cut)
    return TextHead(text, cut, invalid)


def _cut_note(source: Source, budget: RenderBudget) -> str:
    return (
        f"showing the first {format_size(budget.text_bytes)} of {format_size(source.bytes)} "
        "(RenderBudget.text_bytes)"
    )


def render_text(source: Source, budget: RenderBudget) -> Body:
    head = read_text(source.file, budget.text_bytes)
    text, cut = head.text, head.cut
    body = Body(html=f'<pre style="{_PRE}">{esc(text)}</pre>')
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    noun = "line" if lines == 1 else "lines"
    body.details.append(f"{lines} {noun} shown" + (", truncated" if cut else ""))
    if head.invalid:
        body.notes.append(NOT_UTF8)
    if cut:
        body.notes.append(_cut_note(source, budget))
    return body


#: a URL scheme (``https:``, ``ftp:``), as RFC 3986 spells one
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
#: what a browser drops from a URL before reading it (WHATWG URL: C0 controls and spaces
#: around it, tabs and newlines anywhere)
_EDGES = "".join(map(chr, range(0x21)))
_DROPPED = str.maketrans("", "", "\t\n\r")


def is_remote(url: str) -> bool:
    """Whether a browser would fetch ``url`` from a server of its own choosing: any scheme
    but ``data:``, or a host given without one (``//host/x``, also spelt ``\\\\host\\x``).

    >>> is_remote("https://example.org/x.png"), is_remote("//example.org/x.png")
    (True, True)
    >>> is_remote("figures/x.png"), is_remote("data:image/png;base64,AAAA")
    (False, False)
    """
    cleaned = url.strip(_EDGES).translate(_DROPPED).replace("\\", "/")
    if cleaned.startswith("//"):
        return True
    return _SCHEME.match(cleaned) is not None and not cleaned.lower().startswith("data:")


@functools.cache
def _renderer_class() -> type[Any]:
    """mistune's HTML renderer, with remote images as links unless asked for (mistune is
    imported only when Markdown is shown)."""
    import mistune  # noqa: PLC0415 - optional; only for Markdown

    class RemoteImagesAsLinks(mistune.HTMLRenderer):
        def __init__(self, remote_images: bool) -> None:
            super().__init__(escape=True)  # raw HTML in a module's Markdown is shown as text
            self.remote_images = remote_images
            self.linked = 0

        def image(self, text: str, url: str, title: str | None = None) -> str:
            if self.remote_images or not is_remote(url):
                return str(super().image(text, url, title))
            self.linked += 1
            note = "remote image, not loaded (RenderBudget.remote_images)"
            return str(self.link(f"image: {text or esc(url)}", url, note))

    return RemoteImagesAsLinks


def markdown_html(text: str, remote_images: bool = False) -> tuple[str, int] | None:
    """``text`` as HTML with raw HTML escaped, and how many remote images became links
    (none when ``remote_images``); ``None`` when mistune is not installed."""
    try:
        import mistune  # noqa: PLC0415 - optional; only for Markdown
    except ImportError:
        return None
    renderer = _renderer_class()(remote_images)
    out = mistune.create_markdown(renderer=renderer, plugins=["table", "strikethrough"])(text)
    return str(out), int(renderer.linked)


@dataclass(frozen=True)
class MarkdownShown:
    """A Markdown snippet as HTML: whether mistune converted it (else it is shown as its
    source), and how many remote images it shows as links."""

    html: str
    converted: bool
    linked_images: int = 0

    @property
    def notes(self) -> list[str]:
        """What the card says about it: remote images linked, mistune missing."""
        notes = []
        if not self.converted:
            notes.append(
                "Markdown shown as source: the optional package 'mistune' is not installed. "
                f"Install it with: {RENDER_EXTRA}"
            )
        if self.linked_images:
            notes.append(linked_note(self.linked_images))
        return notes


def linked_note(n: int) -> str:
    """The card's note for ``n`` remote images shown as links: why, and the opt-in."""
    one = n == 1
    them = "it" if one else "them"
    return (
        f"{n} remote image{'' if one else 's'} shown as link{'' if one else 's'}: loading "
        f"{them} would tell {'its' if one else 'their'} server each time this output is "
        f"viewed; RenderBudget(remote_images=True) shows {them}"
    )


def markdown_shown(text: str, remote_images: bool = False) -> MarkdownShown:
    """HTML for a Markdown snippet; remote images are links unless ``remote_images``."""
    converted = markdown_html(text, remote_images)
    if converted is None:
        return MarkdownShown(f'<pre style="{_PRE}">{esc(text)}</pre>', converted=False)
    html, linked = converted
    return MarkdownShown(f'<div class="murmur-markdown" style="{_WRAP}">{html}</div>', True, linked)


def markdown_block(text: str, remote_images: bool = False) -> tuple[str, bool]:
    """HTML for a Markdown snippet, and whether it was converted (``False``: shown as source)."""
    shown = markdown_shown(text, remote_images)
    return shown.html, shown.converted


def render_markdown(source: Source, budget: RenderBudget) -> Body:
    head = read_text(source.file, budget.text_bytes)
    cut = head.cut
    shown = markdown_shown(head.text, budget.remote_images)
    body = Body(html=shown.html, notes=shown.notes)
    if head.invalid:
        body.notes.append(NOT_UTF8)
    if cut:
        body.notes.append(_cut_note(source, budget))
    body.details.append("markdown" + (", truncated" if cut else ""))
    if shown.linked_images:
        body.details.append(f"{shown.linked_images} remote images shown as links")
    return body


def load_json(source: Source, budget: RenderBudget) -> Any:
    """Parse the artifact as JSON, refusing files past ``budget.parse_bytes``."""
    if source.bytes > budget.parse_bytes:
        raise CannotRender(
            f"JSON of {format_size(source.bytes)} exceeds the {format_size(budget.parse_bytes)} "
            "parse budget (RenderBudget.parse_bytes)"
        )
    try:
        with source.file.open("rb") as fh:
            return json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CannotRender(f"not valid JSON ({exc})") from exc
    except RecursionError as exc:  # the parser recurses once a level
        raise CannotRender("JSON nested too deeply to parse") from exc


_TREE_NODES = 2000
#: levels the tree draws (each costs two Python frames); deeper containers show as ``…``
_TREE_DEPTH = 50


class _Tree:
    """Builds nested ``<details>`` for a JSON value, stopping after a node budget and at a
    depth (its recursion stays far below Python's limit whatever the document)."""

    def __init__(self) -> None:
        self.nodes = 0
        self.cut = False
        self.deep = False

    def scalar(self, value: Any) -> str:
        text = clipped(readable(json.dumps(value, ensure_ascii=False)))
        colour = _STRING if isinstance(value, str) else _NUMBER
        return f'<span style="color:{colour}">{esc(text)}</span>'

    def node(self, key: str | None, value: Any, depth: int) -> str:
        self.nodes += 1
        label = ""
        if key is not None:  # a key is cut like a value: escaping may make it six times longer
            label = f'<span style="color:{_KEY}">{esc(clipped(key))}</span>: '
        if not isinstance(value, dict | list) or not value:
            return f"<div>{label}{self.scalar(value)}</div>"
        if self.nodes > _TREE_NODES:
            self.cut = True
            return f"<div>{label}…</div>"
        kind = f"{{…}} {len(value)} keys" if isinstance(value, dict) else f"[…] {len(value)} items"
        if depth >= _TREE_DEPTH:
            self.deep = True
            return f'<div>{label}<span style="color:{_MUTED}">{esc(kind)}, not drawn</span></div>'
        if isinstance(value, dict):
            children = [self.node(str(k), v, depth + 1) for k, v in value.items()]
        else:
            children = [self.node(str(i), v, depth + 1) for i, v in enumerate(value)]
        opened = " open" if depth < 2 else ""
        return (
            f'<details{opened}><summary>{label}<span style="color:{_MUTED}">{esc(kind)}'
            f'</span></summary><div style="padding-left:14px">{"".join(children)}</div></details>'
        )


def render_json(source: Source, budget: RenderBudget) -> Body:
    value = load_json(source, budget)
    tree = _Tree()
    tree_html = tree.node(None, value, 0)
    encoded = readable(json.dumps(value, indent=2, ensure_ascii=False)).encode("utf-8")
    cut = len(encoded) > budget.text_bytes
    pretty = decode_utf8(encoded[: budget.text_bytes], cut=cut)[0] + ("\n…" if cut else "")
    html = (
        f'<div style="font-family:ui-monospace,monospace;font-size:12px">{tree_html}</div>'
        f'<details><summary style="font-size:12px">JSON text</summary>'
        f'<pre style="{_PRE}">{esc(pretty)}</pre></details>'
    )
    if isinstance(value, dict):
        shape = f"object with {len(value)} keys"
    elif isinstance(value, list):
        shape = f"array of {len(value)} items"
    else:
        shape = type(value).__name__
    body = Body(html=html, details=[f"JSON {shape}"])
    if tree.cut:
        body.notes.append(f"tree shows the first {_TREE_NODES} nodes")
    if tree.deep:
        body.notes.append(
            f"tree shows {_TREE_DEPTH} levels; what is nested deeper is in the JSON text"
        )
    if cut:
        body.notes.append(f"JSON text truncated to {format_size(budget.text_bytes)}")
    return body
