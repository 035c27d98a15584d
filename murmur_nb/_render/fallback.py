"""Render one artifact: re-verify it, resolve its primitive, fall back when it cannot be drawn.

* **Verification first.** Every artifact is re-checked (regular file, size, SHA-256) right
  before it is rendered, because the file may have changed since the host verified it. A
  failure yields a visible error card naming the artifact, the rule and the reason; the
  content is never shown.
* **The hint proposes, the media type disposes.** :func:`~.presentation.resolve` picks the
  primitive. If the renderer then finds the content unusable for it (a ``table`` hint on
  JSON that is not records), rendering falls back along a fixed chain — the media type's
  primitive, then ``text`` for textual files (:func:`~.presentation.is_textual`), then
  ``download`` — with a :class:`PresentationWarning` and a note on the card. A broken
  player is never drawn.
* **A decode that cannot be done is an error card.** A page or image refused by the
  rendering's pixel budget, or a decoder failure (``MemoryError`` included), is a
  :class:`~.core.DecodeError`; it is shown as the artifact's error card with its code
  (``decode_refused``, ``decode_failed``), never raised out of ``render()``.
* **Depth is a reason to fall back, too.** The renderers bound their own recursion (the JSON
  tree stops at a depth and says so), but a ``RecursionError`` from anything a primitive
  calls on a deeply nested document moves down the same chain with a note; the last step
  is an error card, never the exception.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from murmur_nb._exceptions import MissingDependency
from murmur_nb._render.core import (
    Body,
    CannotRender,
    DecodeError,
    RenderBudget,
    Rendering,
    Source,
    error_card,
    short_digest,
    source_rendering,
)
from murmur_nb._render.downloads import DownloadDirError
from murmur_nb._render.presentation import (
    PresentationWarning,
    is_textual,
    media_type_primitive,
    resolve,
)
from murmur_nb._render.primitives.diagram import render_diagram
from murmur_nb._render.primitives.grid import grid_rendering, json_grid_rendering
from murmur_nb._render.primitives.media import (
    render_audio,
    render_download,
    render_image,
    render_video,
)
from murmur_nb._render.primitives.pdf import render_document
from murmur_nb._render.primitives.slides import render_slides
from murmur_nb._render.primitives.table import render_table
from murmur_nb._render.primitives.text import render_json, render_markdown, render_text
from murmur_nb._render.primitives.timeline import render_timeline
from murmur_nb._render.verify import VerificationFailure, recheck

__all__ = ["error_rendering", "render_one", "verify_source"]

_Renderer = Callable[[Source, RenderBudget], Body]

_RENDERERS: dict[str, _Renderer] = {
    "video": render_video,
    "audio": render_audio,
    "image": render_image,
    "timeline": render_timeline,
    "document": render_document,
    "diagram": render_diagram,
    "slides": render_slides,
    "table": render_table,
    "markdown": render_markdown,
    "text": render_text,
    "json": render_json,
    "download": render_download,
}


def _label(source: Source) -> str:
    return f"artifact {source.id!r} ({source.rel_path})"


def verify_source(source: Source, held: contextlib.ExitStack) -> Source | Rendering:
    """The source to render, read through the descriptor verified now, or an error card.

    The verified descriptor stays open until ``held`` closes; the source's ``file`` opens
    that very file (``link`` keeps its real path for links shown to the reader).
    """
    result = recheck(
        artifact_id=source.id,
        path=source.rel_path,
        root=source.root,
        root_dir=source.root_dir,
        file=source.file,
        declared_bytes=source.bytes,
        declared_digest=source.digest,
    )
    if isinstance(result, VerificationFailure):
        return error_rendering(
            source.title, result.code, result.message, source, detail=result.detail
        )
    held.callback(result.close)
    return dataclasses.replace(source, file=result.readable, link=result.file)


def error_rendering(
    title: str, code: str, message: str, source: Source | None = None, *, detail: str = ""
) -> Rendering:
    """The error card shown instead of an artifact: which one, which rule, and why."""
    extra: dict[str, str] = {}
    lines = [f"error · {title} · {code}", f"  {message}"]
    if source is not None:
        extra = {
            "id": source.id,
            "path": source.rel_path,
            "declared": f"{source.bytes} bytes, {short_digest(source.digest)}",
        }
    if detail:
        extra["host says"] = detail
    return Rendering(
        primitive="error",
        text="\n".join(lines),
        html=error_card(title, code, message, extra),
        error_code=code,
    )


def _chain(primitive: str, media_type: str) -> list[str]:
    chain = [primitive, media_type_primitive(media_type)]
    if is_textual(media_type):
        chain.append("text")
    chain.append("download")
    out: list[str] = []
    for p in chain:
        if p not in out:
            out.append(p)
    return out


def _render_verified(source: Source, presentation: str, budget: RenderBudget) -> Rendering:
    """Render a source already verified, following the fallback chain."""
    primitive, note = resolve(presentation, source.media_type)
    notes: list[str] = []
    if note is not None:
        warnings.warn(note, PresentationWarning, stacklevel=_callers_level())
        notes.append(note)
    if primitive == "image_grid":
        if source.media_type == "application/json":
            try:
                return json_grid_rendering(source, budget, notes)
            except CannotRender as exc:
                primitive = _fallback_note(notes, "image_grid", source, str(exc))
        else:
            return grid_rendering([source], budget, notes)
    chain = _chain(primitive, source.media_type)
    for i, candidate in enumerate(chain):
        try:
            body = _RENDERERS[candidate](source, budget)
        except (CannotRender, MissingDependency, RecursionError) as exc:
            if i + 1 == len(chain):
                raise
            reason = _reason(exc)
            _fallback_note(notes, candidate, source, reason, chain[i + 1])
            continue
        body.notes[:0] = notes
        return source_rendering(candidate, source, body)
    raise AssertionError("unreachable: download always renders")  # pragma: no cover


def _reason(exc: CannotRender | MissingDependency | RecursionError) -> str:
    """Why a primitive could not draw the file, for the card's note."""
    if isinstance(exc, MissingDependency):
        return exc.message
    if isinstance(exc, RecursionError):  # a document nested past what a drawing follows
        return "it is nested too deeply to draw"
    return str(exc)


def _fallback_note(
    notes: list[str], primitive: str, source: Source, reason: str, instead: str | None = None
) -> str:
    instead = instead or media_type_primitive(source.media_type)
    note = f"could not show as {primitive}: {reason}; shown as {instead}"
    warnings.warn(note, PresentationWarning, stacklevel=_callers_level())
    notes.append(note)
    return instead


def render_one(source: Source, presentation: str, budget: RenderBudget, verify: bool) -> Rendering:
    """Render ``source`` (re-verified first when ``verify``); any failure is an error card."""
    with contextlib.ExitStack() as held:
        if verify:
            checked = verify_source(source, held)
            if isinstance(checked, Rendering):
                return checked
            source = checked
        return _render_guarded(source, presentation, budget)


def _callers_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside murmur_nb: the
    user's ``render()`` / ``render_file()`` call (or the display machinery that asked for the
    rendering). A fixed number cannot: a gallery recurses, an invocation's artifacts and a
    grid are drawn through further frames. ``1`` when no such frame exists (a render thread)."""
    package = str(Path(__file__).parent.parent) + os.sep  # as co_filename spells it
    frame: FrameType | None = sys._getframe(1)  # the function that warns: level 1
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 1


def _render_guarded(source: Source, presentation: str, budget: RenderBudget) -> Rendering:
    try:
        return _render_verified(source, presentation, budget)
    except DownloadDirError as exc:
        return error_rendering(source.title, "render_failed", f"{_label(source)}: {exc}", source)
    except DecodeError as exc:
        return error_rendering(source.title, exc.code, f"{_label(source)}: {exc.message}", source)
    except RecursionError:  # nested too deeply for every primitive of the chain
        return error_rendering(
            source.title,
            "render_failed",
            f"{_label(source)}: nested too deeply to draw; open the file itself.",
            source,
        )
    except OSError as exc:
        return error_rendering(
            source.title,
            "render_failed",
            f"{_label(source)}: reading the file failed ({exc.strerror or exc}); "
            "check that it is still readable.",
            source,
        )
