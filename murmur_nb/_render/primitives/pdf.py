"""PDF documents: page count, PNG previews of the first pages, a download link.

Pages are drawn with pypdfium2 (the ``render`` extra), opened from the path so a large PDF is
not read into memory. Without pypdfium2 the card still shows the download link and says which
package to install; nothing fails. Previews are embedded only while they fit what the
rendering has left of its total budget (many PDFs in one invocation cannot add up past it).
"""

from __future__ import annotations

import io
from pathlib import Path

from murmur_nb._exceptions import MissingDependency
from murmur_nb._render.core import (
    Body,
    CannotRender,
    RenderBudget,
    Source,
    data_uri,
    left_of,
    strip_spent,
    uri_size,
)
from murmur_nb._render.downloads import offer
from murmur_nb._render.primitives.media import download_link
from murmur_nb._render.theme import BORDER, FG_MUTED

__all__ = ["pdf_pages", "render_document"]


def pdf_pages(path: Path, width_px: int, max_pages: int) -> tuple[int, list[bytes]]:
    """``(page_count, [png, ...])`` for the first ``max_pages`` pages, each ``width_px`` wide.

    Raises
    ------
    MissingDependency
        pypdfium2 is not installed.
    CannotRender
        The file is not a PDF pypdfium2 can open.
    """
    try:
        import pypdfium2 as pdfium  # noqa: PLC0415 - optional, heavy; only for PDFs
    except ImportError as exc:
        raise MissingDependency("pypdfium2", "render", "PDF page previews") from exc
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise CannotRender(f"not a readable PDF ({exc})") from exc
    pngs: list[bytes] = []
    try:
        count = len(pdf)
        for index in range(min(count, max_pages)):
            page = pdf[index]
            try:
                width_pt = page.get_width() or 1.0
                # pdfium rounds the pixel size up; shave the scale so it lands on width_px
                bitmap = page.render(scale=width_px / width_pt * (1 - 1e-6))
                try:
                    image = bitmap.to_pil()
                    buf = io.BytesIO()
                    image.save(buf, format="PNG", optimize=True)
                    pngs.append(buf.getvalue())
                finally:
                    bitmap.close()
            finally:
                page.close()
    finally:
        pdf.close()
    return count, pngs


def page_images_html(pngs: list[bytes], width_px: int, first: int = 1) -> list[str]:
    return [
        f'<figure style="margin:0;flex:0 0 auto"><img src="{data_uri("image/png", png)}" '
        f'alt="page {n}" style="width:{width_px}px;max-width:100%;border:1px solid;'
        f'border-color:{BORDER}"><figcaption style="font-size:11px;color:{FG_MUTED}">'
        f"page {n}</figcaption></figure>"
        for n, png in enumerate(pngs, first)
    ]


def render_document(source: Source, budget: RenderBudget) -> Body:
    got = offer(source, budget)
    link = f"<div>⬇ {download_link(got.url, source.name)}</div>"
    try:
        count, pngs = pdf_pages(source.file, budget.preview_px, budget.preview_pages)
    except MissingDependency as exc:
        return Body(
            html=f"<div>Page preview unavailable.</div>{link}",
            details=["page preview unavailable: pypdfium2 is not installed"],
            notes=[exc.message],
        )
    pngs, dropped = _fitting(pngs, left_of(budget) - len(got.url))
    pages = "page" if count == 1 else "pages"
    notes = [got.note] if got.note else []
    if dropped:
        notes.append(
            f"{dropped} page previews not embedded: {strip_spent(budget, 'total_bytes', '')}"
        )
    if len(pngs) > 1:
        shown = f"; preview of pages 1-{len(pngs)}"
    else:
        shown = "; preview of page 1" if pngs else ""
    figures = "".join(page_images_html(pngs, budget.preview_px))
    html = (
        f"<div><b>{count}</b> {pages}{_showing(len(pngs), count)}</div>"
        f'<div style="display:flex;gap:8px;overflow-x:auto">{figures}</div>{link}'
    )
    placement = "linked" if got.how.startswith("linked") else got.how
    return Body(
        html=html,
        details=[f"{count} {pages}{shown}; download {placement}"],
        notes=notes,
    )


def _showing(shown: int, count: int) -> str:
    """`` · showing 2 of 5 pages`` when the previews are fewer than the pages, else ``""``."""
    if shown >= count:
        return ""
    return f" · showing {shown} of {count} pages (RenderBudget.preview_pages)"


def _fitting(pngs: list[bytes], limit: int) -> tuple[list[bytes], int]:
    """The previews whose data URIs fit in ``limit`` bytes, in order, and how many did not."""
    spent = 0
    for n, png in enumerate(pngs):
        spent += uri_size("image/png", len(png))
        if spent > limit:
            return pngs[:n], len(pngs) - n
    return pngs, 0
