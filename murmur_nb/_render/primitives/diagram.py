"""Diagrams: SVG shown as an image; Mermaid and Graphviz drawn, confined, when installed.

A module's SVG is shown through ``<img src="data:image/svg+xml...">`` rather than pasted into
the page: an image-context SVG never runs script, so a module cannot smuggle code into the
notebook through a "diagram".

Graphviz DOT is drawn with the ``dot`` binary, Mermaid with ``mmdc`` (mermaid-cli), each
looked up on ``PATH``. The text they parse is a module's, so a parser bug in either would be
a way into the kernel's account: they run in the module sandbox
(:mod:`murmur_nb._sandbox.sandbox`) with the policy a default ``Policy()`` has
(``sandbox="required"``): no network, the system trees read-only, nothing else. ``dot``
reads the text on standard input and writes SVG on standard output (it sees no file of
ours at all); ``mmdc`` needs files, so it gets a fresh private folder as its working folder
and only ``rw`` root, holding its input and output, and the SVG is read back without
following a link. Where the sandbox cannot give every guarantee, the renderer is not run
(never unconfined): the card shows the source and says why. The SVG is cut at
``RenderBudget.embed_bytes`` and the run at :data:`TIMEOUT_S`, or sooner when the rendering
has less of its drawing time left (``RenderBudget.draw_s``): twenty
diagrams that each keep ``dot`` busy to its limit held a gallery's ``render()`` for ten
minutes (a red-team review); past that time the source is shown, undrawn.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from murmur_nb._files.beneath import one_file_problem
from murmur_nb._files.scratch import temp_folder
from murmur_nb._render.core import (
    Body,
    RenderBudget,
    Source,
    data_uri,
    drawing_left,
    drawing_total,
    esc,
    format_size,
    left_of,
    uri_size,
)
from murmur_nb._render.downloads import place
from murmur_nb._render.primitives.media import not_placed
from murmur_nb._render.primitives.text import read_text

if TYPE_CHECKING:
    from murmur_nb._sandbox import SandboxReport

__all__ = ["TIMEOUT_S", "default_sandbox", "draw_source", "render_diagram"]

#: Seconds a renderer may run before it is killed and the source shown instead.
TIMEOUT_S = 30
_PRE = (
    "white-space:pre-wrap;font-size:12px;padding:6px;border-radius:4px;"
    "background:var(--jp-layout-color2, #f6f8fa);color:var(--jp-content-font-color1, #1f2328);"
    "margin:0;max-height:480px;overflow:auto"
)

_RENDERERS = {
    "text/vnd.graphviz": ("dot", "Graphviz", "install Graphviz so that 'dot' is on PATH"),
    "text/vnd.mermaid": ("mmdc", "Mermaid", "install mermaid-cli so that 'mmdc' is on PATH"),
}
_MERMAID_IN, _MERMAID_OUT = "diagram.mmd", "diagram.svg"


def default_sandbox() -> SandboxReport:
    """The sandbox a default ``Policy()`` runs modules in (``sandbox="required"``)."""
    return _default_sandbox()


@functools.cache
def _default_sandbox() -> SandboxReport:
    from murmur_nb._sandbox import MECHANISMS, sandbox_report  # noqa: PLC0415 - when drawn

    return sandbox_report("required", MECHANISMS)  # what Policy() asks for


def draw_source(
    media_type: str,
    source_text: str,
    *,
    max_bytes: int = 4 * 1024 * 1024,
    sandbox: SandboxReport | None = None,
) -> tuple[bytes | None, str | None]:
    """``(svg, None)`` when drawn, else ``(None, reason)``.

    The renderer runs confined by ``sandbox`` (:func:`default_sandbox` when ``None``) and
    only when that sandbox gives every guarantee; its SVG may be at most ``max_bytes``.
    """
    binary, name, fix = _RENDERERS[media_type]
    exe = shutil.which(binary)
    if exe is None:
        return None, f"{name} source shown: no '{binary}' renderer found; {fix}"
    report = sandbox if sandbox is not None else default_sandbox()
    if not report.complete or report.mode == "off":
        missing = ", ".join(report.missing) or "all (sandbox off)"
        return None, (
            f"{name} source shown, not drawn: the module sandbox cannot confine '{binary}' "
            f"on this machine (missing: {missing}), and a diagram is never drawn unconfined"
        )
    seconds = min(TIMEOUT_S, drawing_left())
    if seconds <= 0:
        return None, (
            f"{name} source shown, not drawn: this rendering spent its "
            f"{drawing_total():g} s of drawing (RenderBudget.draw_s: diagrams and "
            "PDF pages, over all its artifacts) before it; render it on its own, or with a "
            "larger RenderBudget(draw_s=...), to draw it"
        )
    with tempfile.TemporaryDirectory(prefix=f"murmur-{binary}-", dir=temp_folder()) as tmp:
        folder = Path(tmp)
        try:
            if binary == "dot":
                out, err, status = _run(report, [exe, "-Tsvg"], source_text, folder, max_bytes,
                                        seconds=seconds)  # fmt: skip
            else:
                out, err, status = _mermaid(report, exe, source_text, folder, max_bytes,
                                            seconds=seconds)  # fmt: skip
        except OSError as exc:
            return None, f"{name} source shown: '{binary}' could not be run ({exc.strerror})"
    if status == "ok" and b"<svg" in out:
        return out, None
    return None, f"{name} source shown: {_why(binary, status, err, max_bytes, seconds)}"


def _why(binary: str, status: str, err: bytes, max_bytes: int, seconds: float) -> str:
    """Why a renderer drew nothing, from how its run ended and its standard error."""
    if status == "timeout":
        return f"'{binary}' did not finish within {seconds:.3g} s"
    if status == "too large":
        return (
            f"'{binary}' drew more than {format_size(max_bytes)} of SVG "
            "(RenderBudget.embed_bytes)"
        )
    lines = err.decode("utf-8", errors="replace").strip().splitlines()
    # fontconfig complains it has no writable cache in the sandbox: not why it failed
    lines = [line for line in lines if not line.startswith("Fontconfig")]
    return f"'{binary}' failed" + (f": {lines[0][:200]}" if lines else "")


def _run(
    report: SandboxReport, argv: list[str], stdin: str, folder: Path, max_bytes: int, *,
    seconds: float = TIMEOUT_S,
) -> tuple[bytes, bytes, str]:
    """``(stdout, stderr tail, status)`` of ``argv`` run confined in ``folder`` (its only
    writable place); status is ``ok``, ``failed``, ``timeout`` or ``too large``."""
    from murmur_nb._sandbox import launch, run_launched  # noqa: PLC0415 - only when drawn
    from murmur_nb.protocol import Root  # noqa: PLC0415

    exe = os.path.realpath(argv[0])
    how = launch(
        report,
        argv,
        cwd=folder,
        module_dir=_install_dir(exe),
        roots={"diagram": Root(path=str(folder), mode="rw")},
        binaries=[exe],
    )
    result = run_launched(
        how, stdin.encode("utf-8"), cwd=folder, deadline_s=seconds, max_output_bytes=max_bytes
    )
    if result.timed_out:
        return b"", result.stderr_tail, "timeout"
    if result.output_exceeded:
        return b"", result.stderr_tail, "too large"
    return result.stdout, result.stderr_tail, "ok" if result.returncode == 0 else "failed"


def _install_dir(exe: str) -> Path:
    """What a renderer may read besides the system trees: the folder its real executable is
    in, or, for a Node script (mmdc), the ``node_modules`` tree it belongs to."""
    path = Path(exe)
    for parent in path.parents:
        if parent.name == "node_modules":
            return parent
    return path.parent


def _mermaid(
    report: SandboxReport, exe: str, text: str, folder: Path, max_bytes: int, *, seconds: float
) -> tuple[bytes, bytes, str]:
    """mmdc reads and writes files: both live in ``folder``; the SVG is read back only if it
    is a regular file of one link within ``max_bytes`` (mmdc could leave a link there)."""
    (folder / _MERMAID_IN).write_text(text, encoding="utf-8")
    argv = [exe, "-i", _MERMAID_IN, "-o", _MERMAID_OUT]
    _, err, status = _run(report, argv, "", folder, max_bytes, seconds=seconds)
    if status != "ok":
        return b"", err, status
    try:
        fd = os.open(folder / _MERMAID_OUT, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return b"", err, "failed"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        problem = one_file_problem(st)
        if problem is not None:
            return b"", f"mmdc's output {problem}".encode(), "failed"
        if st.st_size > max_bytes:
            return b"", err, "too large"
        return fh.read(max_bytes), err, "ok"


def render_diagram(source: Source, budget: RenderBudget) -> Body:
    if source.media_type == "image/svg+xml":
        got = place(source, budget)
        if not got.url:
            return not_placed(source, got, budget)
        img = f'<img src="{esc(got.url)}" alt="{esc(source.title)}" style="max-width:100%">'
        return Body(
            html=img,
            details=["SVG " + ("embedded" if got.embedded else "linked")],
            notes=[got.note] if got.note else [],
        )
    head = read_text(source.file, budget.text_bytes)
    text, cut = head.text, head.cut
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
    svg, reason = draw_source(source.media_type, text, max_bytes=budget.embed_bytes)
    if svg is not None and uri_size("image/svg+xml", len(svg)) + len(pre) > left_of(budget):
        svg, reason = None, (
            f"{kind} drawn, but not shown: the SVG does not fit what this rendering has left "
            f"of its {format_size(budget.total_bytes)} total budget (RenderBudget.total_bytes)"
        )
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
