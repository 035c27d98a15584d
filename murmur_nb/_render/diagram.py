"""Diagrams: SVG shown as an image; Mermaid and Graphviz drawn when a renderer is installed.

A module's SVG is shown through ``<img src="data:image/svg+xml...">`` rather than pasted into
the page: an image-context SVG never runs script, so a module cannot smuggle code into the
notebook through a "diagram". Graphviz DOT is drawn with the ``dot`` binary, Mermaid with
``mmdc`` (mermaid-cli), each looked up on ``PATH`` and run with a timeout; when the renderer is
missing or fails, the card shows the diagram's source and says what to install.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from murmur_nb._render.core import Body, RenderBudget, Source, data_uri, embed_or_link, esc
from murmur_nb._render.text import read_text

__all__ = ["draw_source", "render_diagram"]

_TIMEOUT_S = 30
_PRE = (
    "white-space:pre-wrap;font-size:12px;padding:6px;border-radius:4px;"
    "background:var(--jp-layout-color2, #f6f8fa);color:var(--jp-content-font-color1, #1f2328);"
    "margin:0;max-height:480px;overflow:auto"
)

_RENDERERS = {
    "text/vnd.graphviz": ("dot", "Graphviz", "install Graphviz so that 'dot' is on PATH"),
    "text/vnd.mermaid": ("mmdc", "Mermaid", "install mermaid-cli so that 'mmdc' is on PATH"),
}


def draw_source(media_type: str, source_text: str) -> tuple[bytes | None, str | None]:
    """``(svg, None)`` when drawn, else ``(None, reason)``."""
    binary, name, fix = _RENDERERS[media_type]
    exe = shutil.which(binary)
    if exe is None:
        return None, f"{name} source shown: no '{binary}' renderer found; {fix}"
    try:
        if binary == "dot":
            proc = subprocess.run(
                [exe, "-Tsvg"],
                input=source_text.encode("utf-8"),
                capture_output=True,
                timeout=_TIMEOUT_S,
                check=False,
            )
            out, err = proc.stdout, proc.stderr
            ok = proc.returncode == 0 and b"<svg" in out
        else:
            with tempfile.TemporaryDirectory(prefix="murmur-mermaid-") as tmp:
                src = Path(tmp) / "diagram.mmd"
                dst = Path(tmp) / "diagram.svg"
                src.write_text(source_text, encoding="utf-8")
                proc = subprocess.run(
                    [exe, "-i", str(src), "-o", str(dst)],
                    capture_output=True,
                    timeout=_TIMEOUT_S,
                    check=False,
                )
                out = dst.read_bytes() if dst.exists() else b""
                err = proc.stderr
                ok = proc.returncode == 0 and b"<svg" in out
    except subprocess.TimeoutExpired:
        return None, f"{name} source shown: '{binary}' did not finish within {_TIMEOUT_S} s"
    except OSError as exc:
        return None, f"{name} source shown: '{binary}' could not be run ({exc.strerror})"
    if not ok:
        first = err.decode("utf-8", errors="replace").strip().splitlines()[:1]
        why = f": {first[0][:200]}" if first else ""
        return None, f"{name} source shown: '{binary}' failed{why}"
    return out, None


def render_diagram(source: Source, budget: RenderBudget) -> Body:
    if source.media_type == "image/svg+xml":
        url, embedded = embed_or_link(source, budget)
        img = f'<img src="{esc(url)}" alt="{esc(source.title)}" style="max-width:100%">'
        return Body(html=img, details=["SVG " + ("embedded" if embedded else "linked")])
    text, cut = read_text(source.file, budget.text_bytes)
    kind = _RENDERERS[source.media_type][1]
    pre = (
        f'<details><summary style="font-size:12px">{kind} source</summary>'
        f'<pre style="{_PRE}">{esc(text)}</pre></details>'
    )
    if cut:
        return Body(
            html=pre.replace("<details>", "<details open>", 1),
            details=[f"{kind} source shown (too large to draw)"],
            notes=[f"{kind} source exceeds RenderBudget.text_bytes; shown truncated, not drawn"],
        )
    svg, reason = draw_source(source.media_type, text)
    if svg is None:
        assert reason is not None
        return Body(
            html=pre.replace("<details>", "<details open>", 1),
            details=[f"{kind} source shown (not drawn)"],
            notes=[reason],
        )
    img = (
        f'<img src="{data_uri("image/svg+xml", svg)}" alt="{esc(source.title)}" '
        'style="max-width:100%">'
    )
    return Body(html=img + pre, details=[f"{kind} drawn as SVG"])
