"""PDF documents: page count, PNG previews of the first pages, a download link.

Pages are drawn with pypdfium2 (the ``render`` extra), opened from the path so a large PDF is
not read into memory. Without pypdfium2 the card still shows the download link and says which
package to install; nothing fails. Previews are embedded only while they fit what the
rendering has left of its total budget (many PDFs in one invocation cannot add up past it).

A page's box, read before it is drawn, sets its scale: a preview is ``width_px`` wide and at
most :data:`TALLEST` widths tall, so a 1x4000 pt page is drawn 1x1440, never 360x1,440,000
(pdfium would allocate the whole bitmap first). The bitmap is paid for from the rendering's
pixel budget before pdfium draws it; pages past that budget are counted, not drawn, and a
pdfium failure (``MemoryError`` included) is the artifact's error card (:mod:`..decode`).

The bitmap bounds a page's memory, not its drawing: a page's content stream, compressed,
may hold a million path operators (43 s of CPU for a 43 KB page, and a slide strip of 60
such pages from an 8 KB file; a red-team review). Pages are drawn progressively, pdfium
asking every few milliseconds whether to pause: a document's pages share
``RenderBudget.document_draw_s`` seconds (and what is left of the rendering's
``RenderBudget.draw_s``), and the page that reaches it is abandoned, counted and not drawn,
like a page past the pixel budget. Control comes back to Python every
:data:`PAUSE_EVERY_S`, so Ctrl-C interrupts a page being drawn.
"""

from __future__ import annotations

import io
import math
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import MissingDependency
from murmur_nb._render.core import (
    Body,
    CannotRender,
    DecodeError,
    PixelBudget,
    RenderBudget,
    Source,
    data_uri,
    drawing_left,
    drawing_total,
    left_of,
    missing_dependency,
    pixels_of,
    strip_spent,
    uri_size,
)
from murmur_nb._render.decode import decoding
from murmur_nb._render.downloads import offer
from murmur_nb._render.primitives.media import download_line
from murmur_nb._render.theme import BORDER, FG_MUTED

if TYPE_CHECKING:
    from pypdfium2 import PdfDocument

__all__ = ["PAUSE_EVERY_S", "TALLEST", "Page", "Pages", "pdf_pages", "render_document"]

#: A page preview is at most this many times as tall as it is wide; a taller page is drawn
#: narrower.
TALLEST = 4
#: the short reason of a page past its drawing time
_TOO_SLOW = "too slow to draw"
#: How often a page being drawn hands control back to Python.
PAUSE_EVERY_S = 0.05


@dataclass(frozen=True)
class Page:
    """One page drawn: its PNG and pixel size."""

    png: bytes
    width: int
    height: int


@dataclass(frozen=True)
class Pages:
    """What :func:`pdf_pages` drew: the page count, the pages drawn in order, and why it
    stopped early (a page past the rendering's pixel budget or drawing time), if it did,
    with the :class:`RenderBudget` field that stopped it."""

    count: int
    drawn: list[Page]
    stopped: str | None = None
    stopped_by: str = "decode_px"


def pdf_pages(
    path: Path, width_px: int, max_pages: int, pixels: PixelBudget, *, seconds: float
) -> Pages:
    """The page count and the first ``max_pages`` pages, each ``width_px`` wide at most.

    Raises
    ------
    MissingDependency
        pypdfium2 is not installed.
    CannotRender
        The file is not a PDF pypdfium2 can open.
    DecodeError
        ``decode_failed``: pdfium failed on a page (``MemoryError`` included).
    """
    try:
        import pypdfium2 as pdfium  # noqa: PLC0415 - optional, heavy; only for PDFs
    except ImportError as exc:
        raise missing_dependency("pypdfium2", "PDF page previews") from exc
    stream = path.open("rb")  # not the path: pypdfium2 resolves it, and a sealed copy's
    try:  # (/proc/self/fd/N, :mod:`murmur_nb._render.verify`) resolves to no file
        pdf = pdfium.PdfDocument(stream, autoclose=True)
    except pdfium.PdfiumError as exc:
        stream.close()
        raise CannotRender(f"not a readable PDF ({exc})") from exc
    drawn: list[Page] = []
    left = drawing_left()  # a rendering's drawing may be nearly spent
    knob = "document_draw_s" if seconds <= left else "draw_s"
    seconds = min(seconds, left)
    deadline = time.monotonic() + seconds
    try:
        count = len(pdf)
        for index in range(min(count, max_pages)):
            try:
                drawn.append(_page(pdf, index, width_px, pixels, (deadline, seconds)))
            except DecodeError as exc:
                if exc.code != "decode_refused":
                    raise
                late = exc.short == _TOO_SLOW
                return Pages(count, drawn, exc.message, knob if late else "decode_px")
    finally:
        pdf.close()
    return Pages(count, drawn)


def _page(
    pdf: PdfDocument, index: int, width_px: int, pixels: PixelBudget,
    deadline: tuple[float, float],
) -> Page:
    """Page ``index`` drawn at the scale its box allows, once its bitmap is paid for, by
    ``deadline`` (``time.monotonic()``, and the seconds the document was given)."""
    what = f"page {index + 1}"
    with decoding(what):
        page = pdf[index]
    try:
        with decoding(what):
            width_pt, height_pt = page.get_width(), page.get_height()
        scale = _scale(what, width_pt, height_pt, width_px)
        size = (math.ceil(width_pt * scale), math.ceil(height_pt * scale))  # as pdfium sizes it
        pixels.take(what, size, 2, "pdfium's bitmap and the picture copied from it")
        with decoding(what):
            bitmap = _drawn(page, size, what, deadline)
            try:
                image = bitmap.to_pil()
                buf = io.BytesIO()
                image.save(buf, format="PNG", optimize=True)
            finally:
                bitmap.close()
        return Page(buf.getvalue(), image.width, image.height)
    finally:
        page.close()


def _drawn(page: Any, size: tuple[int, int], what: str, deadline: tuple[float, float]) -> Any:
    """``page`` drawn into a new white bitmap of ``size`` (as ``page.render`` draws it, with
    its annotations), progressively: a ``decode_refused`` :class:`DecodeError` once
    ``deadline`` passes with the page unfinished."""
    import pypdfium2 as pdfium  # noqa: PLC0415 - loaded with the document already
    import pypdfium2.internal as pdfium_i  # noqa: PLC0415
    import pypdfium2.raw as pdfium_c  # noqa: PLC0415

    width, height = size
    bitmap = pdfium.PdfBitmap.new_native(width, height, pdfium_c.FPDFBitmap_BGR)
    try:
        bitmap.fill_rect((255, 255, 255, 255), 0, 0, width, height)
        pause_at = [time.monotonic() + PAUSE_EVERY_S]
        pressed = _Pressed()
        pause = pdfium_c.IFSDK_PAUSE(version=1)
        pdfium_i.set_callback(pause, "NeedToPauseNow",
                              lambda _: pressed.yes or time.monotonic() >= pause_at[0])  # fmt: skip
        with pressed:
            status = pdfium_c.FPDF_RenderPageBitmap_Start(
                bitmap, page, 0, 0, width, height, 0, pdfium_c.FPDF_ANNOT, pause
            )
            status = _continued(page, pause, status, pause_at, pressed=pressed, what=what,
                                deadline=deadline)  # fmt: skip
        if status != pdfium_c.FPDF_RENDER_DONE:
            raise DecodeError("decode_failed", f"pdfium failed to draw {what}; download the "
                              "file and open it in a PDF viewer", "pdfium failed")  # fmt: skip
    except BaseException:
        bitmap.close()
        raise
    return bitmap


def _continued(page: Any, pause: Any, status: int, pause_at: list[float], *, pressed: _Pressed,
               what: str, deadline: tuple[float, float]) -> int:  # fmt: skip
    """Go on drawing ``page`` while pdfium pauses unfinished; its last status."""
    import pypdfium2.raw as pdfium_c  # noqa: PLC0415

    try:
        while status == pdfium_c.FPDF_RENDER_TOBECONTINUED:
            pressed.raise_if_pressed()
            if time.monotonic() >= deadline[0]:
                raise DecodeError(
                    "decode_refused",
                    f"{what} was not drawn: the document's pages took more than the "
                    f"{deadline[1]:.3g} s of drawing they had (RenderBudget.document_draw_s "
                    f"a document, RenderBudget.draw_s ({drawing_total():g} s) a "
                    "rendering's artifacts); download the file and open it in a PDF viewer, "
                    "or render it with a larger RenderBudget(document_draw_s=..., draw_s=...)",
                    _TOO_SLOW,
                )
            pause_at[0] = time.monotonic() + PAUSE_EVERY_S
            status = pdfium_c.FPDF_RenderPage_Continue(page, pause)
        pressed.raise_if_pressed()
        return int(status)
    finally:
        pdfium_c.FPDF_RenderPage_Close(page)


class _Pressed:
    """Ctrl-C while pdfium draws, on the main thread: noted by a handler that raises nothing
    (a ``KeyboardInterrupt`` raised in pdfium's pause callback would be printed and dropped
    by ctypes), and raised once pdfium has paused, the handler before put back first."""

    def __init__(self) -> None:
        self.yes = False
        self._before: Any = None
        self._routed = False

    def __enter__(self) -> _Pressed:
        if threading.current_thread() is threading.main_thread():
            before = signal.getsignal(signal.SIGINT)
            if callable(before):  # not ignored, nor the default action: Python's to deliver
                self._before = before
                signal.signal(signal.SIGINT, self._note)
                self._routed = True
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.yes = True

    def raise_if_pressed(self) -> None:
        if self.yes:
            self.__exit__()
            self.yes = False
            self._before(signal.SIGINT, None)  # Python's own raises KeyboardInterrupt

    def __exit__(self, *_: object) -> None:
        if self._routed:
            self._routed = False
            signal.signal(signal.SIGINT, self._before)


def _scale(what: str, width_pt: float, height_pt: float, width_px: int) -> float:
    """The scale that draws a ``width_pt`` x ``height_pt`` page ``width_px`` wide, or
    narrower when it would be more than :data:`TALLEST` widths tall."""
    if not (math.isfinite(width_pt) and math.isfinite(height_pt)) or min(width_pt, height_pt) <= 0:
        raise DecodeError(
            "decode_failed",
            f"{what} has no usable size ({width_pt}x{height_pt} pt); download the file and "
            "open it in a PDF viewer",
            "no usable page size",
        )
    # pdfium rounds the pixel size up; shave the scale so it lands on width_px
    return min(width_px / width_pt, TALLEST * width_px / height_pt) * (1 - 1e-6)


def page_images_html(pages: list[Page], width_px: int, first: int = 1) -> list[str]:
    """Figures of ``pages``, each at its own size (a page narrower than ``width_px`` is not
    stretched to it)."""
    return [
        f'<figure style="margin:0;flex:0 0 auto"><img src="{data_uri("image/png", page.png)}" '
        f'alt="page {n}" style="width:{min(page.width, width_px)}px;max-width:100%;'
        f'border:1px solid;border-color:{BORDER}"><figcaption style="font-size:11px;'
        f'color:{FG_MUTED}">page {n}</figcaption></figure>'
        for n, page in enumerate(pages, first)
    ]


def render_document(source: Source, budget: RenderBudget) -> Body:
    got = offer(source, budget)
    link = download_line(got, source)
    try:
        got_pages = pdf_pages(
            source.file, budget.preview_px, budget.preview_pages, pixels_of(budget),
            seconds=budget.document_draw_s,
        )
    except MissingDependency as exc:
        return Body(
            html=f"<div>Page preview unavailable.</div>{link}",
            details=["page preview unavailable: pypdfium2 is not installed"],
            notes=[exc.message],
        )
    count = got_pages.count
    shown_pages, dropped = _fitting(got_pages.drawn, left_of(budget) - len(got.url))
    pages = "page" if count == 1 else "pages"
    notes = [got.note] if got.note else []
    if got_pages.stopped is not None:
        notes.append(f"page previews stopped: {got_pages.stopped}")
    if dropped:
        notes.append(
            f"{dropped} page previews not embedded: {strip_spent(budget, 'total_bytes', '')}"
        )
    if len(shown_pages) > 1:
        shown = f"; preview of pages 1-{len(shown_pages)}"
    else:
        shown = "; preview of page 1" if shown_pages else ""
    figures = "".join(page_images_html(shown_pages, budget.preview_px))
    if got_pages.stopped is not None:
        knob = "decode_px"
    else:
        knob = "total_bytes" if dropped else "preview_pages"
    html = (
        f"<div><b>{count}</b> {pages}{_showing(len(shown_pages), count, knob)}</div>"
        f'<div style="display:flex;gap:8px;overflow-x:auto">{figures}</div>{link}'
    )
    placement = "linked" if got.how.startswith("linked") else got.how
    return Body(
        html=html,
        details=[f"{count} {pages}{shown}; download {placement}"],
        notes=notes,
    )


def _showing(shown: int, count: int, knob: str) -> str:
    """`` · showing 2 of 5 pages`` when the previews are fewer than the pages, naming the
    budget field that limited them, else ``""``."""
    if shown >= count:
        return ""
    return f" · showing {shown} of {count} pages (RenderBudget.{knob})"


def _fitting(pages: list[Page], limit: int) -> tuple[list[Page], int]:
    """The previews whose data URIs fit in ``limit`` bytes, in order, and how many did not."""
    spent = 0
    for n, page in enumerate(pages):
        spent += uri_size("image/png", len(page.png))
        if spent > limit:
            return pages[:n], len(pages) - n
    return pages, 0
