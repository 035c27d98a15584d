"""The vocabulary every renderer shares: budget, source, body, the result object, the card.

Renderers return static HTML with inline styles and no script, so it reads the same in
JupyterLab, ``nbconvert`` and GitHub; interactivity belongs to widgets, which read
:attr:`Rendering.slides`. Output is stable for nbval: no timestamp, address, random id or
absolute temporary path; linked media are relative to :attr:`RenderBudget.link_base`. The
declared ``bytes`` decides embed-or-link before the file is opened (a file outside the link
base is never linked: Jupyter could not serve it; :mod:`.downloads`), and each renderer gets
the budget narrowed to what the whole rendering has left (:func:`within`; the account is kept
by :mod:`.total`). Decoding is work done for a guest too: each rendering has one
:class:`PixelBudget`, carried by the narrowed budget, that every decode takes from before it
starts (:mod:`.decode`).

Text a module wrote (a title, a path, a file's JSON) may hold what no display can take: a
lone surrogate (JSON allows ``"\\ud800"``) cannot be encoded, so a cell showing it fails, and
terminal control sequences in ``text/plain`` would drive the reader's terminal. :func:`esc`
and :class:`Rendering` pass every string through :func:`readable` (HTML) or :func:`printable`
(plain text), so no caller has to remember to. What a module wrote is cut to a few hundred
characters by :func:`clipped` before it is escaped, so the HTML a label costs is bounded.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import html
import math
import os
import reprlib
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from murmur_nb._exceptions import MissingDependency
from murmur_nb._render.theme import BORDER, ERROR, FG, FG_MUTED, WARN, kept, soft_background
from murmur_nb._rules import clipped, escape_bidi, printable, readable

__all__ = [
    "Body",
    "CannotRender",
    "DecodeError",
    "PixelBudget",
    "RenderBudget",
    "Rendering",
    "Slide",
    "Source",
    "card",
    "clipped",
    "data_uri",
    "drawing_clock",
    "drawing_left",
    "drawing_total",
    "RENDER_EXTRA",
    "embedded",
    "error_card",
    "esc",
    "format_size",
    "left_of",
    "link_to",
    "linked_reason",
    "not_linked_note",
    "megapixels",
    "missing_dependency",
    "pixels_of",
    "printable",
    "readable",
    "servable",
    "strip_allowance",
    "strip_spent",
    "short_digest",
    "source_card",
    "source_rendering",
    "summary_line",
    "uri_size",
    "within",
]

_MIB = 1024 * 1024

#: how to install the ``render`` extra, from a package index or from a checkout of murmur-nb
RENDER_EXTRA = "pip install 'murmur-nb[render]' (or, from a checkout: pip install -e '.[render]')"


def missing_dependency(package: str, feature: str) -> MissingDependency:
    """The :class:`~murmur_nb.MissingDependency` for a package of the ``render`` extra, its
    advice naming both ways murmur-nb may have been installed (:data:`RENDER_EXTRA`)."""
    exc = MissingDependency(package, "render", feature)
    exc.args = (
        f"{feature} needs the optional package {package!r}, which is not installed. "
        f"Install it with: {RENDER_EXTRA}",
    )
    return exc


class DecodeError(Exception):
    """An image or a PDF page was not decoded: refused by the pixel budget, or the decoder
    failed (``MemoryError`` included). It becomes the artifact's error card, or its tile in
    a grid or a strip; it never leaves ``render()``.

    ``code`` is ``decode_refused`` (over :attr:`RenderBudget.decode_px`, or a PDF page past
    its drawing time) or ``decode_failed``; ``short`` fits a thumbnail tile, ``message``
    says what to do.
    """

    def __init__(self, code: str, message: str, short: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.short = short


def megapixels(n: int) -> str:
    """``n`` pixels for a reader: ``400 Mpx``, ``50.0 Mpx``, ``0.52 Mpx``, ``2880 px``."""
    if n < 10_000:
        return f"{n} px"
    mpx = n / 1e6
    if mpx >= 100:
        return f"{mpx:.0f} Mpx"
    return f"{mpx:.1f} Mpx" if mpx >= 1 else f"{mpx:.2f} Mpx"


class PixelBudget:
    """The pixels one rendering may still decode (:attr:`RenderBudget.decode_px`).

    Every decode takes its cost, read from headers, *before* the decoder runs; a cost past
    what is left raises :class:`DecodeError` and nothing is decoded. Grids take in item
    order on the rendering's thread (their workers only decode what was taken), so which
    image is refused never depends on thread timing.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        return max(0, self.limit - self.spent)

    def take(self, what: str, size: tuple[int, int], copies: int = 1, how: str = "") -> None:
        """Take ``width x height x copies`` pixels for ``what``, or raise ``decode_refused``.

        ``copies`` counts the full-size buffers the decode holds at once (``how`` says why,
        for the message): memory and time follow them, not the picture's own size.
        """
        width, height = size
        cost = width * height * copies
        with self._lock:
            if cost <= self.limit - self.spent:
                self.spent += cost
                return
            left = self.left
        raise self._refusal(what, size, cost, left, how)

    def _refusal(
        self, what: str, size: tuple[int, int], cost: int, left: int, how: str
    ) -> DecodeError:
        width, height = size
        short = f"{width}x{height} = {megapixels(width * height)}"
        if cost != width * height:
            short += f", counted as {megapixels(cost)}"
        shape = f"{short} ({how})" if how and cost != width * height else short
        limit = megapixels(self.limit)
        if cost > self.limit:
            return DecodeError(
                "decode_refused",
                f"{what} is {shape}, over the {limit} a rendering may decode "
                "(RenderBudget.decode_px); download the file and open it in a viewer, or "
                "render it with a larger RenderBudget(decode_px=...)",
                f"{short}: over the {limit} decode budget",
            )
        return DecodeError(
            "decode_refused",
            f"{what} is {shape}, more than the {megapixels(left)} this rendering has left "
            f"of the {limit} it may decode (RenderBudget.decode_px); render it on its own, "
            "or with a larger RenderBudget(decode_px=...)",
            f"{short}: past the {limit} decode budget",
        )


#: the fields of :class:`RenderBudget` that count things (at least 1), and amounts (>= 0)
_COUNTS = (
    "thumbnail_px",
    "table_rows",
    "preview_px",
    "preview_pages",
    "slide_px",
    "max_slides",
    "timeline_events",
    "grid_images",
)
_AMOUNTS = ("embed_bytes", "grid_bytes", "text_bytes", "parse_bytes", "total_bytes", "decode_px")


#: the fields of :class:`RenderBudget` that are times, in seconds (more than 0)
_SECONDS = ("draw_s", "document_draw_s")


def _check_seconds(name: str, value: object) -> None:
    """Refuse a :class:`RenderBudget` time that is not a number of seconds more than 0."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(
            f"RenderBudget.{name} must be a number of seconds (such as the default "
            f"{getattr(RenderBudget, name):g}), got {type(value).__name__} "
            f"{reprlib.repr(value)}"
        )
    if not 0 < value < math.inf:
        raise ValueError(f"RenderBudget.{name} must be more than 0 seconds, got {value!r}")


def _check_whole(name: str, value: object) -> None:
    """Refuse a :class:`RenderBudget` field that is not a whole number (``True`` is not one)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return
    unit = "pixels" if name.endswith("_px") else "bytes" if name.endswith("_bytes") else ""
    what = f"a number of {unit}" if unit else "a whole number"
    raise TypeError(
        f"RenderBudget.{name} must be an int ({what}, such as the default "
        f"{getattr(RenderBudget, name):_}), got {type(value).__name__} {reprlib.repr(value)}"
    )


_DRAWING: ContextVar[tuple[float, float] | None] = ContextVar("murmur_nb_drawing", default=None)


@contextlib.contextmanager
def drawing_clock(seconds: float) -> Iterator[None]:
    """The drawing time of one rendering call starts: ``seconds`` of it
    (:attr:`RenderBudget.draw_s`); a nested call shares its caller's."""
    if _DRAWING.get() is not None:
        yield
        return
    token = _DRAWING.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DRAWING.reset(token)


def drawing_left() -> float:
    """Seconds of drawing the rendering under way has left (the default
    :attr:`RenderBudget.draw_s` outside one)."""
    clock = _DRAWING.get()
    return RenderBudget.draw_s if clock is None else clock[0] - time.monotonic()


def drawing_total() -> float:
    """The seconds of drawing the rendering under way was given."""
    clock = _DRAWING.get()
    return RenderBudget.draw_s if clock is None else clock[1]


@dataclass(frozen=True)
class RenderBudget:
    """Limits that keep rendered output small; every field has a sensible default.

    Parameters
    ----------
    embed_bytes
        Largest artifact (by its declared ``bytes``) embedded as a data URI; larger media are
        linked by path when they are under ``link_base`` (copied into ``download_dir`` when it
        is set and they are not), else shown as a note saying their size and how to show
        them: a link outside the folder Jupyter serves would not open. Default 4 MiB.
    thumbnail_px
        Longest side of a grid thumbnail, in pixels.
    grid_bytes
        Most encoded thumbnail data one grid may embed; images past it are listed by name.
        The default keeps a grid's output under 5 MB whatever the number of images.
    table_rows
        Rows shown of a table; past it the first and last half are shown with the row count.
    text_bytes
        Bytes of a text, Markdown or JSON file shown before it is truncated.
    parse_bytes
        Largest file decoded whole: a JSON document (timeline, table, grid list, JSON view)
        or an image to thumbnail. Also the most of a CSV or TSV table parsed (past it its
        first rows are shown, with a note) and the most a Parquet table's rows shown may
        decode, judged from its footer before decoding (past it those rows are left out).
    preview_px
        Width of a PDF page preview, in pixels.
    preview_pages
        PDF pages previewed by the ``document`` primitive.
    slide_px
        Width of one slide in the static strip, in pixels.
    max_slides
        Slides rendered at most; the page list names how many more there were.
    timeline_events
        Events drawn at most in a timeline.
    link_base
        Folder that linked media paths are made relative to, and that a file must be under
        to be linked where it is; the working directory (the notebook's folder) when
        ``None``.
    download_dir
        Opt-in: a folder (relative to ``link_base``, i.e. beside the notebook) that download
        files up to ``embed_bytes`` are copied into, named by digest, and linked by a relative
        address instead of a data URI. JupyterLab strips ``data:`` links from notebooks it
        does not trust, but keeps relative ones, so a committed notebook rendered with it
        offers its downloads to every reader; commit the folder beside the notebook.
        A file too large to embed, or past ``total_bytes``, that is outside ``link_base``
        (an artifact in the host's run folder) is copied there too, so its player or link
        opens. ``None`` (the default) embeds downloads, and shows such a file as a note.
    total_bytes
        Most output (HTML and plain text) one ``render(...)`` call produces, over all the
        artifacts of an invocation or a gallery; per-artifact limits still apply inside it.
        A content shown once (same digest) is not embedded again: later occurrences refer
        to it. Past the total, artifacts are linked (media, downloads) or listed (grid and
        slide images) with a note naming this field, and an artifact that no longer fits at
        all is shown as a link to its file. Default 32 MiB: several embedded media, and a
        notebook a browser still opens.
    decode_px
        Most pixels one ``render(...)`` call decodes in the kernel, over all its grid and
        slide thumbnails and PDF page previews (an image shown on its own is embedded, never
        decoded). Sizes are read from headers before anything is decoded: a JPEG counts at
        the reduced scale it is decoded at, and an image once for each full-size copy its
        decoding holds (twice with alpha, as TIFF or as a progressive JPEG, four times as
        WebP); a PDF page is drawn at most four widths tall. An image that does not fit is a
        tile saying its size and what to do; a page that does not fit is counted, not drawn.
        Default 50 Mpx: under 256 MiB and about a second of CPU.
    remote_images
        Opt-in: show Markdown images whose address is on another server (``https://``,
        ``//host/...``) as images. Each would be fetched by the reader's browser every time
        the output is shown, telling that server when and where it is read (a tracking
        beacon). ``False`` (the default) shows them as links.
    grid_images
        Images an ``image_grid`` shows at most (a cell each, thumbnail or not); the card
        counts the rest, and of a JSON list of paths only these are read. Default 1000.
    draw_s
        Seconds one ``render(...)`` call spends drawing, over all its artifacts: diagrams
        drawn by Graphviz or Mermaid, PDF page previews and PDF slides. Each may take a
        renderer's whole time (30 s a diagram, ``document_draw_s`` a document) and an
        invocation or a gallery holds as many as it likes: past this, what is left is shown
        undrawn (a diagram's source, a PDF's download), with a note naming this field.
        Default 30.
    document_draw_s
        Seconds the pages of one PDF may take to draw, all together; the page that reaches
        it is counted, not drawn (pdfium hands control back every 50 ms, so Ctrl-C stops a
        page being drawn too). Default 10.
    """

    embed_bytes: int = 4 * _MIB
    thumbnail_px: int = 160
    grid_bytes: int = 4 * _MIB
    table_rows: int = 20
    text_bytes: int = 64 * 1024
    parse_bytes: int = 32 * _MIB
    preview_px: int = 360
    preview_pages: int = 2
    slide_px: int = 360
    max_slides: int = 60
    timeline_events: int = 2000
    link_base: Path | None = None
    download_dir: Path | str | None = None
    total_bytes: int = 32 * _MIB
    decode_px: int = 50_000_000
    remote_images: bool = False
    grid_images: int = 1000
    draw_s: float = 30.0
    document_draw_s: float = 10.0
    #: what is left of ``total_bytes`` for the artifact being rendered (see :func:`within`)
    #: (not a parameter: ``help(RenderBudget)`` shows only what a caller sets)
    _left: int | None = field(default=None, init=False, repr=False, compare=False)
    #: what the whole rendering may still decode (see :func:`within`)
    _pixels: PixelBudget | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in _COUNTS + _AMOUNTS:
            _check_whole(name, getattr(self, name))
        for name in _COUNTS:
            if getattr(self, name) < 1:
                raise ValueError(
                    f"RenderBudget.{name} must be at least 1, got {getattr(self, name)}"
                )
        if self.download_dir is not None and not str(self.download_dir).strip():
            raise ValueError(
                "RenderBudget.download_dir must name a folder (or be None to embed downloads)"
            )
        for name in _AMOUNTS:
            if getattr(self, name) < 0:
                raise ValueError(
                    f"RenderBudget.{name} must not be negative, got {getattr(self, name)}"
                )
        for name in _SECONDS:
            _check_seconds(name, getattr(self, name))


@dataclass(frozen=True)
class Source:
    """A verified file as the renderers see it."""

    id: str
    title: str
    media_type: str
    bytes: int
    digest: str
    file: Path
    #: The artifact's path relative to its root (display and download name; never absolute).
    rel_path: str
    #: The root folder, for re-verification and JSON lists of image paths; ``None`` if unknown.
    root_dir: Path | None = None
    #: The root's name (``Artifact.root``).
    root: str = ""
    #: The file's real path, for links to it, when ``file`` is a verified descriptor's path.
    link: Path | None = None

    @property
    def name(self) -> str:
        return PurePosixPath(self.rel_path).name or self.id


@dataclass(frozen=True)
class Slide:
    """One page of a ``slides`` artifact, for a stepping widget.

    ``html`` shows the page on its own (static, no script); ``text`` is its plain summary.
    """

    index: int
    html: str
    text: str


@dataclass
class Body:
    """What a renderer produced: the card body, extra plain-text lines, notes, slides."""

    html: str
    details: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slides: tuple[Slide, ...] = ()


class CannotRender(Exception):
    """This content cannot be shown as the requested primitive; fall back to the media type."""


@dataclass(frozen=True, repr=False)
class Rendering:
    """A rendered artifact, invocation or file: display it, or read its parts.

    Jupyter shows it through :meth:`_repr_mimebundle_`; ``text/plain`` is always present
    and identical across runs for the same file.

    Attributes
    ----------
    primitive
        The primitive used (``"error"`` for an error card, ``"invocation"`` or ``"gallery"``
        for a composite).
    text, html
        The ``text/plain`` and ``text/html`` representations.
    slides
        The pages of a ``slides`` rendering, in order; empty otherwise.
    parts
        The per-artifact renderings of a composite; empty otherwise.
    error_code
        For an error card, the stable code (``digest_mismatch``, ``size_mismatch``,
        ``missing_file``, ``render_failed``, ``decode_refused``, ``decode_failed``, or a
        rejection code from the host).
    """

    primitive: str
    text: str
    html: str
    slides: tuple[Slide, ...] = ()
    parts: tuple[Rendering, ...] = ()
    error_code: str | None = None

    def __post_init__(self) -> None:
        # frozen: set once, here, so every rendering shows (and saves) whatever a module wrote
        object.__setattr__(self, "text", printable(self.text))
        object.__setattr__(self, "html", readable(self.html))

    @property
    def ok(self) -> bool:
        """``False`` if this, or any part of it, is an error card."""
        return self.error_code is None and all(p.ok for p in self.parts)

    def _repr_mimebundle_(
        self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None
    ) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": self.text, "text/html": self.html}
        if include is not None:
            wanted = set(include)
            bundle = {k: v for k, v in bundle.items() if k in wanted}
        if exclude is not None:
            unwanted = set(exclude)
            bundle = {k: v for k, v in bundle.items() if k not in unwanted}
        return bundle

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def esc(text: object) -> str:
    """HTML-escape ``text`` (quotes included, so it is safe in attributes), lone surrogates
    (:func:`readable`) and bidirectional overrides (:func:`escape_bidi`) written as escapes:
    every page of murmur-nb shows a module's, a guest's or a record's words this way."""
    return html.escape(escape_bidi(readable(str(text))), quote=True)


def format_size(n: int) -> str:
    """Human size with binary units: ``512 B``, ``2.8 KiB``, ``200.0 MiB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def short_digest(digest: str) -> str:
    """``sha256:`` plus the first 12 hex digits."""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}:{hexpart[:12]}" if hexpart else digest[:19]


def data_uri(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _base(budget: RenderBudget) -> Path:
    return budget.link_base if budget.link_base is not None else Path.cwd()


def servable(path: Path, budget: RenderBudget) -> bool:
    """Whether a relative link to ``path`` would open: it is under the budget's link base
    (the working directory by default, the notebook's folder, which Jupyter serves). A file
    elsewhere (a host's run folder under ``/tmp``, removed when the host closes) is not."""
    real = Path(os.path.realpath(path))
    return real.is_relative_to(os.path.realpath(_base(budget)))


def link_to(path: Path, budget: RenderBudget) -> str:
    """A URL-quoted POSIX path to ``path`` relative to the budget's link base."""
    base = _base(budget)
    try:
        rel = os.path.relpath(path, base)
    except ValueError:  # pragma: no cover - another drive on Windows
        return path.as_uri()
    return urllib.parse.quote(PurePosixPath(*Path(rel).parts).as_posix())


def within(budget: RenderBudget, left: int, pixels: PixelBudget) -> RenderBudget:
    """``budget`` for one artifact of a rendering that may still produce ``left`` bytes and
    decode what ``pixels`` has left."""
    scoped = dataclasses.replace(budget)
    object.__setattr__(scoped, "_left", max(0, left))  # frozen: set once, on the copy
    object.__setattr__(scoped, "_pixels", pixels)
    return scoped


def pixels_of(budget: RenderBudget) -> PixelBudget:
    """The rendering's pixel budget; a renderer called on its own gets a fresh one."""
    return budget._pixels if budget._pixels is not None else PixelBudget(budget.decode_px)


def left_of(budget: RenderBudget) -> int:
    """Bytes the artifact being rendered may still add to the whole rendering."""
    if budget._left is None:
        return budget.total_bytes
    return min(budget._left, budget.total_bytes)


def uri_size(media_type: str, n: int) -> int:
    """Length of the data URI of ``n`` bytes of ``media_type`` (base64: 4 chars per 3 bytes)."""
    return len(f"data:{media_type};base64,") + 4 * ((n + 2) // 3)


def strip_allowance(budget: RenderBudget, items: int) -> tuple[int, str]:
    """``(bytes, knob)`` a strip of ``items`` thumbnails (grid, slides) may embed: its own
    ``grid_bytes``, or less when the rendering's total has less left (keeping room for the
    card and one caption per item), and the budget field that then limits it (named in the
    card's note)."""
    left = left_of(budget) - (16 * 1024 + 1024 * items)
    if left < budget.grid_bytes:
        return max(0, left), "total_bytes"
    return budget.grid_bytes, "grid_bytes"


def strip_spent(budget: RenderBudget, knob: str, what: str) -> str:
    """The end of the note of a strip that stopped embedding, naming the field to raise."""
    if knob == "total_bytes":
        return (
            f"the rendering reached its {format_size(budget.total_bytes)} total budget "
            "(RenderBudget.total_bytes)"
        )
    return (
        f"the {what} reached its {format_size(budget.grid_bytes)} budget "
        "(RenderBudget.grid_bytes)"
    )


def linked_reason(source: Source, budget: RenderBudget) -> str:
    """Why ``source`` is linked rather than embedded, naming the budget field to raise."""
    if source.bytes > budget.embed_bytes:
        return (
            f"linked, not embedded ({format_size(source.bytes)} > "
            f"{format_size(budget.embed_bytes)} embed budget)"
        )
    return (
        f"linked, not embedded: this rendering has {format_size(left_of(budget))} left of its "
        f"{format_size(budget.total_bytes)} total budget (RenderBudget.total_bytes)"
    )


def embedded(source: Source, budget: RenderBudget) -> str | None:
    """The data URI of ``source`` when its declared size fits the budget, else ``None``.

    The decision reads only ``source.bytes``: the file's own limit (``embed_bytes``) and what
    the rendering has left of its total; a file that does not fit is never opened here.
    """
    fits = uri_size(source.media_type, source.bytes) <= left_of(budget)
    if source.bytes <= budget.embed_bytes and fits:
        with source.file.open("rb") as fh:
            data = fh.read(source.bytes)  # never more than declared, even if it grew since
        return data_uri(source.media_type, data)
    return None


def not_linked_note(source: Source, budget: RenderBudget) -> str:
    """Why ``source`` is neither embedded nor linked, and the two ways to show it."""
    size = format_size(source.bytes)
    if source.bytes > budget.embed_bytes:
        why = (
            f"its {size} is above the {format_size(budget.embed_bytes)} embed budget "
            "(RenderBudget.embed_bytes)"
        )
        fix = f"render it with mnb.RenderBudget(embed_bytes={source.bytes}) or more"
    else:
        why = (
            f"this rendering has {format_size(left_of(budget))} left of its "
            f"{format_size(budget.total_bytes)} total budget (RenderBudget.total_bytes)"
        )
        fix = "render it on its own, or with a larger mnb.RenderBudget(total_bytes=...)"
    return (
        f"not shown: {why}, and the file is outside the folder Jupyter serves (the working "
        "directory, or RenderBudget.link_base), so a link to it would not open. To show it, "
        f"{fix}; or pass RenderBudget(download_dir=...) a folder under the notebook's folder, "
        "to copy it there and link the copy"
    )


def summary_line(primitive: str, source: Source) -> str:
    return (
        f"{primitive} · {source.title} · {source.media_type or '(no media type)'} · "
        f"{format_size(source.bytes)} · {short_digest(source.digest)}"
    )


# A border is written as width and style, then its colour apart: a sanitizer that drops the
# ``var()`` colour keeps the border (in the text colour) instead of losing it whole.
_CARD = (
    f"border:1px solid;border-color:{BORDER};border-radius:6px;padding:8px 10px;margin:6px 0;"
    "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;"
    "max-width:100%;overflow:auto"
)
_HEAD = f"font-size:12px;color:{FG_MUTED};margin-bottom:6px"
_NOTE = (
    f"font-size:12px;color:{FG};{soft_background()};border:1px solid;{kept('border-color', WARN)};"
    "border-left-width:4px;border-radius:4px;padding:2px 6px;margin:4px 0"
)


def card(
    primitive: str,
    body: Body,
    *,
    title: str,
    media_type: str | None = None,
    size: int | None = None,
    digest: str | None = None,
) -> str:
    """The framed card: a header line (primitive, title, type, size, digest), notes, body."""
    head = [
        f'<span style="{soft_background()};color:{FG};border-radius:3px;padding:0 4px">'
        f"{esc(primitive)}</span>"
        f" <b>{esc(title)}</b>"
    ]
    if media_type:
        head.append(f"<code>{esc(media_type)}</code>")
    if size is not None:
        head.append(esc(format_size(size)))
    if digest:
        head.append(f'<code title="{esc(digest)}">{esc(short_digest(digest))}</code>')
    notes = "".join(f'<div class="murmur-note" style="{_NOTE}">{esc(n)}</div>' for n in body.notes)
    return (
        f'<div class="murmur-artifact" data-primitive="{esc(primitive)}" style="{_CARD}">'
        f'<div style="{_HEAD}">{" · ".join(head)}</div>{notes}{body.html}</div>'
    )


def source_card(primitive: str, source: Source, body: Body) -> str:
    """:func:`card` for one artifact."""
    return card(
        primitive,
        body,
        title=source.title,
        media_type=source.media_type,
        size=source.bytes,
        digest=source.digest,
    )


def source_rendering(primitive: str, source: Source, body: Body) -> Rendering:
    """The :class:`Rendering` of one artifact shown as ``primitive``: summary, details, notes."""
    lines = [summary_line(primitive, source)]
    lines += [f"  {d}" for d in body.details]
    lines += [f"  note: {n}" for n in body.notes]
    return Rendering(
        primitive=primitive,
        text="\n".join(lines),
        html=source_card(primitive, source, body),
        slides=body.slides,
    )


def error_card(title: str, code: str, message: str, extra: Mapping[str, str] | None = None) -> str:
    """A visible card for an artifact that is not rendered: which, which rule, and why."""
    rows = "".join(
        f"<div><b>{esc(k)}</b>: <code>{esc(v)}</code></div>" for k, v in (extra or {}).items()
    )
    return (
        f'<div class="murmur-artifact murmur-error" data-error-code="{esc(code)}" '
        f'style="{_CARD};border-color:{ERROR};border-left-width:4px;color:{FG}">'
        f'<div style="font-weight:600">Not rendered: {esc(title)} '
        f"(<code>{esc(code)}</code>)</div><div>{esc(message)}</div>{rows}</div>"
    )
