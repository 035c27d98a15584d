"""Slides: a PDF (one slide a page), a JSON list of image paths, or Markdown split on ``---``.

Listed images are opened beneath the artifact's root without following a link and read
from the checked descriptor, as a grid's are (:mod:`murmur_nb._render.listed`), and decoded
within the rendering's pixel budget as a grid's are (:mod:`..decode`): an image refused or
failing is a frame saying why. PDF pages are drawn within it too (:mod:`.pdf`).

The card is a static, horizontally scrolling strip: every viewer shows it without script.
The same pages are returned as :class:`~murmur_nb._render.core.Slide` objects
(``Rendering.slides``) for a stepping widget. Slide images share one byte budget
(``RenderBudget.grid_bytes``, or what the rendering has left of ``total_bytes`` when that is
less) like a grid; pages past it are listed, not drawn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from murmur_nb._exceptions import MissingDependency
from murmur_nb._render.core import (
    Body,
    CannotRender,
    DecodeError,
    RenderBudget,
    Slide,
    Source,
    data_uri,
    esc,
    format_size,
    pixels_of,
    strip_allowance,
    strip_spent,
)
from murmur_nb._render.decode import thumbnail
from murmur_nb._render.listed import listed_paths, open_listed
from murmur_nb._render.primitives.grid import max_held
from murmur_nb._render.primitives.pdf import pdf_pages
from murmur_nb._render.primitives.text import (
    linked_note,
    load_json,
    markdown_shown,
    read_text,
)
from murmur_nb._render.theme import BORDER, ERROR, FG, FG_MUTED

__all__ = ["render_slides", "split_markdown"]


def split_markdown(text: str) -> list[str]:
    """Markdown pages, split on lines that hold only ``---`` (surrounding blanks ignored)."""
    pages: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip() == "---":
            pages.append([])
        else:
            pages[-1].append(line)
    out = ["\n".join(p).strip("\n") for p in pages]
    return [p for p in out if p.strip()]


def _frame(index: int, inner: str, width: int) -> str:
    return (
        f'<div style="flex:0 0 auto;width:{width}px;border:1px solid;border-color:{BORDER};'
        f'border-radius:4px;padding:4px;overflow:hidden">'
        f'<div style="font-size:11px;color:{FG_MUTED}">'
        f"slide {index}</div>{inner}</div>"
    )


def _strip(frames: list[str]) -> str:
    style = "display:flex;gap:8px;overflow-x:auto;padding-bottom:4px"
    return f'<div style="{style}">{"".join(frames)}</div>'


def _image_slides(
    images: Sequence[tuple[str, bytes | None, str]],
    width: int,
    budget: RenderBudget,
    total: int,
    limited_by: str = "max_slides",
) -> Body:
    """Slides from encoded images (``(label, data or None, media_type)``); ``limited_by``
    names the budget field that kept the slides past them out."""
    limit, knob = strip_allowance(budget, len(images))
    spent = 0
    slides: list[Slide] = []
    frames: list[str] = []
    skipped = 0
    for n, (label, data, mt) in enumerate(images, 1):
        if data is None:
            inner = (
                f'<div style="color:{FG};border-left:3px solid;border-color:{ERROR};'
                f'padding-left:4px;font-size:12px">{esc(label)}</div>'
            )
            text = f"slide {n}: {label}"
        else:
            uri = data_uri(mt, data)
            if spent + len(uri) > limit:
                skipped += 1
                inner = '<div style="font-size:12px">not embedded (budget)</div>'
            else:
                spent += len(uri)
                # never stretched: a page narrower than the frame (a tall one) keeps its size
                inner = f'<img src="{uri}" alt="slide {n}" style="max-width:100%">'
            text = f"slide {n}: {label}"
        frames.append(_frame(n, inner, width))
        slides.append(Slide(index=n - 1, html=_frame(n, inner, width), text=text))
    body = Body(html=_strip(frames), slides=tuple(slides))
    shown = f", first {len(images)} shown" if total > len(images) else ""
    body.details.append(f"{total} slides{shown}")
    if total > len(images):
        body.notes.append(f"showing {len(images)} of {total} slides (RenderBudget.{limited_by})")
    if skipped:
        body.notes.append(
            f"{skipped} slide images not embedded: {strip_spent(budget, knob, 'strip')}"
        )
    return body


def _listed_slides(
    entries: list[tuple[str, str]],
    source: Source,
    width: int,
    budget: RenderBudget,
    held: contextlib.ExitStack,
) -> list[tuple[str, bytes | None, str]]:
    """Listed images as slides, each opened and checked beneath the root
    (:mod:`murmur_nb._render.listed`)."""
    images = open_listed(
        entries, source.root_dir, max_bytes=budget.parse_bytes, keep=max_held(), held=held
    )
    pixels = pixels_of(budget)
    encoded: list[tuple[str, bytes | None, str]] = []
    for image in images:
        if image.file is None:
            encoded.append((f"{image.label}: {image.problem}", None, ""))
            continue
        try:
            data, thumb_mt = thumbnail(image.file, width, pixels, f"image {image.label!r}")
        except DecodeError as exc:
            encoded.append((exc.message, None, ""))
            continue
        except OSError as exc:
            encoded.append((f"{image.label}: unreadable ({exc.__class__.__name__})", None, ""))
            continue
        encoded.append((image.label, data, thumb_mt))
    return encoded


def render_slides(source: Source, budget: RenderBudget) -> Body:
    width = budget.slide_px
    mt = source.media_type
    if mt == "application/pdf":
        try:
            got = pdf_pages(source.file, width, budget.max_slides, pixels_of(budget),
                            seconds=budget.document_draw_s)  # fmt: skip
        except MissingDependency as exc:
            raise CannotRender(exc.message) from exc
        images = [(f"page {i}", p.png, "image/png") for i, p in enumerate(got.drawn, 1)]
        if got.stopped is None:
            return _image_slides(images, width, budget, got.count)
        body = _image_slides(images, width, budget, got.count, got.stopped_by)
        body.notes.append(f"slides stopped: {got.stopped}")
        return body
    if mt == "application/json":
        entries, listed = listed_paths(load_json(source, budget), budget.max_slides)
        with contextlib.ExitStack() as held:
            encoded = _listed_slides(entries, source, width, budget, held)
        return _image_slides(encoded, width, budget, listed)
    return _markdown_slides(source, width, budget)


def _markdown_slides(source: Source, width: int, budget: RenderBudget) -> Body:
    """Markdown split on ``---`` lines, a slide a page (remote images as links unless
    ``budget.remote_images``)."""
    head = read_text(source.file, budget.text_bytes)
    text, cut = head.text, head.cut
    pages = split_markdown(text)
    if not pages:
        raise CannotRender("the Markdown holds no slides")
    frames: list[str] = []
    slides: list[Slide] = []
    linked = 0
    for n, page in enumerate(pages[: budget.max_slides], 1):
        shown = markdown_shown(page, budget.remote_images)
        linked += shown.linked_images
        frame = _frame(n, shown.html, width)
        frames.append(frame)
        first_line = next((ln.strip("# ").strip() for ln in page.splitlines() if ln.strip()), "")
        slides.append(Slide(index=n - 1, html=frame, text=f"slide {n}: {first_line[:80]}"))
    body = Body(html=_strip(frames), slides=tuple(slides))
    body.details.append(f"{len(pages)} slides")
    if len(pages) > budget.max_slides:
        body.notes.append(
            f"showing {budget.max_slides} of {len(pages)} slides (RenderBudget.max_slides)"
        )
    if cut:
        body.notes.append(f"Markdown truncated to {format_size(budget.text_bytes)}")
    if linked:
        body.notes.append(linked_note(linked))
    return body
