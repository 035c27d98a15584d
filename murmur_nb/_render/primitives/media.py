"""Video, audio, image, image grids and download links.

Players are plain HTML5 ``<video>`` / ``<audio>`` elements, so they work without a kernel or
script. Whether a medium is embedded (data URI) or linked (relative path) is decided from the
declared ``bytes`` alone: a linked file is never opened, so a 1 GB video costs a few hundred
bytes of output and no memory. A file a relative link would not reach (outside the folder
Jupyter serves, :func:`~..downloads.place`) gets no player: a note says its size and how to
show it (a larger ``embed_bytes``, or ``download_dir``, which copies it beside the notebook).

A grid embeds thumbnails, never originals, and stops embedding once its thumbnails reach
``RenderBudget.grid_bytes`` (or what the whole rendering has left of
``RenderBudget.total_bytes``, when that is less); the images past that point are still
listed, in order, by name. That bound is what keeps a 500-image grid under 5 MB of cell
output, and fifty such grids in one invocation under the total. A grid has a cell for at
most ``RenderBudget.grid_images`` images (the rest are counted), and stops making cells
once they would pass what the rendering has left of its total: a cell costs about 500
bytes whatever its image, so a list of 400,000 paths built 200 MB before the total threw
it away. Decoding a thumbnail is paid
for from the rendering's pixel budget before it starts (:mod:`..decode`); an image refused
or failing is a tile saying why, in the error tone, and the card's note says what to do.
"""

from __future__ import annotations

from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from murmur_nb._render.core import (
    Body,
    DecodeError,
    PixelBudget,
    RenderBudget,
    Source,
    clipped,
    data_uri,
    esc,
    format_size,
    left_of,
    pixels_of,
    strip_allowance,
    strip_spent,
)
from murmur_nb._render.decode import draw_thumbnail, open_thumbnail, thumbnail
from murmur_nb._render.downloads import Offer, offer, place
from murmur_nb._render.presentation import is_textual
from murmur_nb._render.primitives.text import render_text
from murmur_nb._render.theme import BG_SOFT, ERROR, FG, FG_MUTED
from murmur_nb._rules import usable_cores

if TYPE_CHECKING:
    from PIL.ImageFile import ImageFile

__all__ = [
    "GridItem",
    "download_line",
    "download_link",
    "grid_html",
    "not_placed",
    "render_audio",
    "render_download",
    "render_image",
    "render_video",
    "thumbnail",
]

_LINK = "font-size:12px"
#: a grid cell that could not be shown: theme text on a neutral box, framed in the error tone
_PROBLEM = f"background:{BG_SOFT};color:{FG};border:1px solid;border-color:{ERROR}"


def _placed(got: Offer, html: str) -> Body:
    """The body, with where the medium is (``details``) and, when the rendering's total
    budget is what kept it out, a visible note naming that budget."""
    return Body(html=html, details=[got.how], notes=[got.note] if got.note else [])


def not_placed(source: Source, got: Offer, budget: RenderBudget) -> Body:
    """No player, no link (it would not open): the note, in the card, says how to show it;
    a textual file (an SVG) shows its text below, within ``text_bytes``."""
    html = (
        f'<div style="color:{FG_MUTED}">{esc(source.name)} '
        f"({esc(format_size(source.bytes))}, {esc(source.media_type)}): not shown</div>"
    )
    if not is_textual(source.media_type):
        return Body(html=html, details=[got.how], notes=[got.note])
    text = render_text(source, budget)
    return Body(
        html=html + text.html, details=[got.how, *text.details], notes=[got.note, *text.notes]
    )


def download_link(url: str, name: str, label: str | None = None) -> str:
    return f'<a href="{esc(url)}" download="{esc(name)}">{esc(label or name)}</a>'


def _player(tag: str, source: Source, budget: RenderBudget, style: str) -> Body:
    """An HTML5 player whose ``src`` is on the element itself.

    JupyterLab's sanitizer (a notebook it does not trust) keeps ``src`` on ``<video>`` and
    ``<audio>`` but not on ``<source>``; the media type travels in the data URI (a linked file
    is sniffed by the browser) and in the title. The text inside the player is shown only by
    a browser without HTML5 media; it links a linked file, but never repeats a data URI.
    """
    got = place(source, budget)
    if not got.url:
        return not_placed(source, got, budget)
    inside = f"Your browser cannot play {esc(source.media_type)}"
    inside += "." if got.embedded else f": {download_link(got.url, source.name)}"
    player = (
        f'<{tag} src="{esc(got.url)}" controls preload="metadata" style="{style}" '
        f'title="{esc(source.title)} ({esc(source.media_type)})">{inside}</{tag}>'
    )
    link = ""
    if not got.embedded:
        link = f'<div style="{_LINK}">Linked file: {download_link(got.url, source.name)}</div>'
    return _placed(got, player + link)


def render_video(source: Source, budget: RenderBudget) -> Body:
    return _player("video", source, budget, "max-width:100%;max-height:480px")


def render_audio(source: Source, budget: RenderBudget) -> Body:
    return _player("audio", source, budget, "width:100%;max-width:480px")


def render_image(source: Source, budget: RenderBudget) -> Body:
    got = place(source, budget)
    if not got.url:
        return not_placed(source, got, budget)
    img = (
        f'<img src="{esc(got.url)}" alt="{esc(source.title)}" '
        'style="max-width:100%;max-height:640px;height:auto">'
    )
    link = ""
    if not got.embedded:
        link = f'<div style="{_LINK}">{download_link(got.url, source.name)}</div>'
    return _placed(got, img + link)


def download_line(got: Offer, source: Source) -> str:
    """``⬇ <link> (size)``, or the name and size alone when the file cannot be offered."""
    name = download_link(got.url, source.name) if got.url else esc(source.name)
    return (
        f"<div>⬇ {name} "
        f'<span style="color:{FG_MUTED}">({esc(format_size(source.bytes))})</span></div>'
    )


def render_download(source: Source, budget: RenderBudget) -> Body:
    got = offer(source, budget)
    html = download_line(got, source)
    notes = [got.note] if got.note else []
    return Body(html=html, details=[f"download {source.name} ({got.how})"], notes=notes)


@dataclass(frozen=True)
class GridItem:
    """One cell of a grid: a label and a file, or a reason it cannot be shown."""

    label: str
    file: Path | None
    media_type: str = ""
    problem: str | None = None


_SVG_INLINE_MAX = 64 * 1024
_BATCH = 16


_Thumb = str | Exception | None
"""A cell's thumbnail: its data URI, why there is none, or ``None`` (the item has no file)."""


def _opened(item: GridItem, px: int, max_bytes: int, pixels: PixelBudget) -> ImageFile | _Thumb:
    """On the rendering's thread, in order: an SVG's data URI, or the raster image opened
    and paid for (:func:`~..decode.open_thumbnail`), or why it is not shown."""
    if item.problem is not None or item.file is None:
        return None
    try:
        size = item.file.stat().st_size
        if size > max_bytes:
            raise ValueError(f"{format_size(size)} is too large to thumbnail")
        if item.media_type == "image/svg+xml":
            if size > _SVG_INLINE_MAX:
                raise ValueError("SVG too large for a thumbnail")
            return data_uri("image/svg+xml", item.file.read_bytes())
        return open_thumbnail(item.file, px, pixels, f"image {item.label!r}")
    except (OSError, ValueError, DecodeError) as exc:
        return exc


def _drawn(opened: ImageFile | _Thumb, px: int, label: str) -> _Thumb:
    """On a worker: the opened image decoded into a thumbnail data URI, or why not."""
    if opened is None or isinstance(opened, str | Exception):
        return opened
    try:
        data, mt = draw_thumbnail(opened, px, f"image {label!r}")
    except DecodeError as exc:
        return exc
    return data_uri(mt, data)


def _thumb_uris(
    items: list[GridItem], px: int, max_bytes: int, pixels: PixelBudget
) -> Generator[_Thumb, None, None]:
    """Thumbnails in item order, a batch at a time: opened and paid for on this thread,
    decoded on worker threads; the consumer stops pulling once the byte budget is spent."""
    workers = min(4, usable_cores())
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="murmur-thumb") as pool:
        for start in range(0, len(items), _BATCH):
            batch = items[start : start + _BATCH]
            opened = [_opened(it, px, max_bytes, pixels) for it in batch]
            futures = [
                pool.submit(_drawn, o, px, it.label) for o, it in zip(opened, batch, strict=True)
            ]
            for fut in futures:
                yield fut.result()


@dataclass(slots=True)
class _GridFill:
    """One grid's cells as they are filled: the budget spent and what was left out."""

    px: int
    limit: int
    box: str
    spent: int = 0
    over_budget: int = 0
    unreadable: int = 0
    #: what the decode problems said, in order (the card's note quotes the first)
    undecoded: list[str] = field(default_factory=list)

    @property
    def muted(self) -> str:
        return (
            f'<div style="{self.box};background:{BG_SOFT};color:{FG};font-size:11px">'
            "not embedded</div>"
        )

    def inner(self, item: GridItem, uris: Generator[_Thumb, None, None]) -> str:
        """The cell body for ``item``, pulling its thumbnail from ``uris`` when one is due."""
        if item.problem is not None or item.file is None:
            self.unreadable += 1
            if self.spent < self.limit:
                next(uris)  # keep the thumbnail stream aligned with the items
            return (
                f'<div style="{self.box};{_PROBLEM};font-size:11px;'
                f'text-align:center">{esc(item.problem or "missing")}</div>'
            )
        if self.spent >= self.limit:
            self.over_budget += 1
            return self.muted
        return self.embed(item, next(uris))

    def embed(self, item: GridItem, uri: _Thumb) -> str:
        """The thumbnail ``uri`` as an image while the budget lasts, else why it is not one."""
        if isinstance(uri, DecodeError):
            self.unreadable += 1
            self.undecoded.append(uri.message)
            return (
                f'<div class="murmur-error" data-error-code="{esc(uri.code)}" '
                f'title="{esc(uri.message)}" style="{self.box};{_PROBLEM};font-size:11px">'
                f"not shown: {esc(uri.short)}</div>"
            )
        if isinstance(uri, Exception) or uri is None:
            self.unreadable += 1
            if uri is None:
                reason = "missing"
            elif isinstance(uri, ValueError):
                reason = str(uri)[:80]
            else:
                reason = uri.__class__.__name__
            return (
                f'<div style="{self.box};{_PROBLEM};font-size:11px">not shown: {esc(reason)}</div>'
            )
        if self.spent + len(uri) > self.limit:
            self.over_budget += 1
            self.spent = self.limit  # keep order: nothing after this is embedded
            return self.muted
        self.spent += len(uri)
        px = self.px
        return (
            f'<div style="{self.box}"><img src="{uri}" alt="{esc(item.label)}" '
            f'style="width:{px}px;height:{px}px;object-fit:contain"></div>'
        )


#: what a grid keeps of the rendering's output for its card, notes and plain-text listing
_CARD_ROOM = 32 * 1024


def _left_out(cells: int, items: int, listed: int, budget: RenderBudget) -> list[str]:
    """What the notes say of the images a grid has no cell for: past ``grid_images``, or
    past what the rendering had left of ``total_bytes``."""
    notes: list[str] = []
    if listed > items:
        notes.append(
            f"showing {items:,} of {listed:,} images listed (RenderBudget.grid_images); the "
            "rest are counted, not read: render a shorter list, or with a larger "
            "RenderBudget(grid_images=...)"
        )
    if cells < items:
        notes.append(
            f"{items - cells:,} of {items:,} images not listed: the rendering reached its "
            f"{format_size(budget.total_bytes)} total budget (RenderBudget.total_bytes); "
            "render it on its own, or with a larger RenderBudget(total_bytes=...)"
        )
    return notes


def grid_html(
    items: list[GridItem], budget: RenderBudget, listed: int | None = None
) -> tuple[str, list[str]]:
    """The grid's HTML and notes; thumbnails in order until the strip's allowance is spent
    (:func:`~murmur_nb._render.core.strip_allowance`), cells for at most
    ``budget.grid_images`` of the ``listed`` images (``len(items)`` when ``None``), and
    none past what the rendering has left of its output (:func:`~..core.left_of`)."""
    listed = len(items) if listed is None else listed
    items = items[: budget.grid_images]
    px = budget.thumbnail_px
    box = f"width:{px}px;height:{px}px;display:flex;align-items:center;justify-content:center"
    limit, knob = strip_allowance(budget, len(items))
    fill = _GridFill(px, limit, box)
    cells: list[str] = []
    room = left_of(budget) - _CARD_ROOM
    uris = _thumb_uris(items, px, budget.parse_bytes, pixels_of(budget))
    try:
        for n, item in enumerate(items, 1):
            label = clipped(item.label)  # then wraps onto more lines, not cut to one
            caption = (
                f'<figcaption style="font-size:12px;line-height:1.3;color:{FG_MUTED};'
                f'overflow-wrap:anywhere" title="{esc(label)}">{n}. {esc(label)}</figcaption>'
            )
            inner = fill.inner(item, uris)
            cell = f'<figure style="margin:0;width:{px}px">{inner}{caption}</figure>'
            room -= len(cell)
            if room < 0:
                break
            cells.append(cell)
    finally:
        uris.close()
    notes = _left_out(len(cells), len(items), listed, budget)
    if fill.over_budget:
        notes.append(
            f"{fill.over_budget} of {len(items)} thumbnails not embedded: "
            + strip_spent(budget, knob, "grid")
        )
    if fill.unreadable:
        notes.append(f"{fill.unreadable} of {len(items)} images could not be shown")
    if fill.undecoded:
        more = len(fill.undecoded) - 1
        notes.append(fill.undecoded[0] + (f" ({more} more not decoded)" if more else ""))
    html = f'<div style="display:flex;flex-wrap:wrap;gap:6px">{"".join(cells)}</div>'
    return html, notes
