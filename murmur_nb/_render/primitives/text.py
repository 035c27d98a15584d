"""Text, Markdown and JSON: read within the text budget, shown without script.

Only the first ``RenderBudget.text_bytes`` of a text file are read; the card says how much
was shown of how much. Markdown is converted with mistune (with raw HTML escaped, since the
text comes from a module) and shown as its source when mistune is not installed. JSON gets a
collapsible tree made of nested ``<details>`` elements, which every HTML viewer folds without
script, plus the indented text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from murmur_nb._render.core import Body, CannotRender, RenderBudget, Source, esc, format_size

__all__ = [
    "load_json",
    "markdown_html",
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


def read_text(path: Path, limit: int) -> tuple[str, bool]:
    """The first ``limit`` bytes of ``path`` as text, and whether it was cut."""
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    cut = len(data) > limit
    data = data[:limit]
    text = data.decode("utf-8", errors="ignore" if cut else "replace")
    return text, cut


def _cut_note(source: Source, budget: RenderBudget) -> str:
    return (
        f"showing the first {format_size(budget.text_bytes)} of {format_size(source.bytes)} "
        "(RenderBudget.text_bytes)"
    )


def render_text(source: Source, budget: RenderBudget) -> Body:
    text, cut = read_text(source.file, budget.text_bytes)
    body = Body(html=f'<pre style="{_PRE}">{esc(text)}</pre>')
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    noun = "line" if lines == 1 else "lines"
    body.details.append(f"{lines} {noun} shown" + (", truncated" if cut else ""))
    if cut:
        body.notes.append(_cut_note(source, budget))
    return body


def markdown_html(text: str) -> str | None:
    """``text`` as HTML with raw HTML escaped, or ``None`` when mistune is not installed."""
    try:
        import mistune  # noqa: PLC0415 - optional; only for Markdown
    except ImportError:
        return None
    out = mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])(text)
    return str(out)


def markdown_block(text: str) -> tuple[str, bool]:
    """HTML for a Markdown snippet, and whether it was converted (``False``: shown as source)."""
    converted = markdown_html(text)
    if converted is None:
        return f'<pre style="{_PRE}">{esc(text)}</pre>', False
    return f'<div class="murmur-markdown" style="{_WRAP}">{converted}</div>', True


def render_markdown(source: Source, budget: RenderBudget) -> Body:
    text, cut = read_text(source.file, budget.text_bytes)
    html, converted = markdown_block(text)
    body = Body(html=html)
    if not converted:
        body.notes.append(
            "Markdown shown as source: the optional package 'mistune' is not installed. "
            "Install it with: pip install 'murmur-nb[render]'"
        )
    if cut:
        body.notes.append(_cut_note(source, budget))
    body.details.append("markdown" + (", truncated" if cut else ""))
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


_TREE_NODES = 2000
_SCALAR_CHARS = 200


class _Tree:
    """Builds nested ``<details>`` for a JSON value, stopping after a node budget."""

    def __init__(self) -> None:
        self.nodes = 0
        self.cut = False

    def scalar(self, value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False)
        if len(text) > _SCALAR_CHARS:
            text = text[:_SCALAR_CHARS] + "…"
        colour = _STRING if isinstance(value, str) else _NUMBER
        return f'<span style="color:{colour}">{esc(text)}</span>'

    def node(self, key: str | None, value: Any, depth: int) -> str:
        self.nodes += 1
        label = f'<span style="color:{_KEY}">{esc(key)}</span>: ' if key is not None else ""
        if not isinstance(value, dict | list) or not value:
            return f"<div>{label}{self.scalar(value)}</div>"
        if self.nodes > _TREE_NODES:
            self.cut = True
            return f"<div>{label}…</div>"
        if isinstance(value, dict):
            kind = f"{{…}} {len(value)} keys"
            children = [self.node(str(k), v, depth + 1) for k, v in value.items()]
        else:
            kind = f"[…] {len(value)} items"
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
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    cut = len(pretty.encode("utf-8")) > budget.text_bytes
    if cut:
        head = pretty.encode("utf-8")[: budget.text_bytes]
        pretty = head.decode("utf-8", errors="ignore") + "\n…"
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
    if cut:
        body.notes.append(f"JSON text truncated to {format_size(budget.text_bytes)}")
    return body
