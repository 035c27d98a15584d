"""Decoding images for previews, paid for from the rendering's pixel budget before it starts.

A small file can hold a huge picture (a 48 KB PNG of 20000x20000 pixels, a 2 KB WebP of
50 Mpx): what a decode costs in memory and time follows the pixels, never the bytes. So:

* **Header first.** ``Image.open`` reads the header only; the size it reports is what the
  decoder will allocate, and the rendering's :class:`~.core.PixelBudget` pays for it before
  ``load()`` (:func:`open_thumbnail`). What does not fit is never decoded.
* **A JPEG is drafted**: decoded at 1/2 to 1/8 scale, and counted at that size, when it holds
  one scan; a progressive or multi-scan JPEG keeps every coefficient at full size whatever
  the scale (a 476 KB progressive JPEG of 9000x9000 takes 240 MiB), so it counts at full
  size, twice.
* **Copies count** (:func:`_copies`): Pillow resamples an image with alpha on a
  premultiplied copy, libwebp holds its canvas beside the frame Pillow copies, libtiff a
  strip or tile buffer; each full-size copy counts as the image once more.
* **Raster formats only** (:data:`_FORMATS`): a file is opened as PNG, JPEG, GIF, WebP, BMP
  or TIFF whatever its media type says, never handed to another decoder (an EPS named
  ``.png`` would otherwise run Ghostscript).
* **Every failure is a** :class:`~.core.DecodeError` (:func:`decoding`): ``MemoryError``,
  Pillow's ``DecompressionBombError``, a decoder's own error. The caller shows it as the
  image's tile or the artifact's error card; it never leaves ``render()``.

A grid opens and pays on the rendering's thread, in order, and decodes on worker threads
(:func:`draw_thumbnail`), so which image is refused never depends on thread timing.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from murmur_nb._render.core import DecodeError, PixelBudget, RenderBudget, megapixels

if TYPE_CHECKING:
    from PIL.ImageFile import ImageFile

__all__ = ["decoding", "draw_thumbnail", "open_thumbnail", "thumbnail"]

_WANTED = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF")
#: full-size buffers a format's decoder holds besides the image itself, and why
_EXTRA_COPIES = {
    "WEBP": (3, "libwebp holds its canvas and the frame it hands to Pillow"),
    "TIFF": (1, "libtiff holds a strip or tile buffer"),
}
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA"})
_SCAN_CHUNK = 1 << 20


@functools.cache
def _formats() -> tuple[str, ...]:
    """The raster formats of :data:`_WANTED` this Pillow can open."""
    from PIL import features  # noqa: PLC0415 - Pillow is imported only when a thumbnail is drawn

    return tuple(f for f in _WANTED if f != "WEBP" or features.check("webp"))


@contextlib.contextmanager
def decoding(what: str) -> Iterator[None]:
    """Turn any failure of the decoder inside into a ``decode_failed`` :class:`DecodeError`.

    ``MemoryError`` included: the kernel survives an allocation the decoder could not make,
    and the reader is told what to do instead.
    """
    try:
        yield
    except DecodeError:
        raise
    except MemoryError as exc:
        raise _failed(what, "the kernel ran out of memory decoding it") from exc
    except Exception as exc:  # a decoder's own error: corrupt data, a bomb, a warning as error
        raise _failed(what, f"{type(exc).__name__}: {exc}") from exc


def _failed(what: str, reason: str) -> DecodeError:
    return DecodeError(
        "decode_failed",
        f"{what} could not be decoded ({reason}); download the file and open it in a viewer",
        "could not be decoded",
    )


def open_thumbnail(path: Path, px: int, pixels: PixelBudget, what: str) -> ImageFile:
    """``path`` opened (header only), drafted for a ``px`` thumbnail and paid for from
    ``pixels``; decode it with :func:`draw_thumbnail`, which closes it.

    Raises
    ------
    DecodeError
        ``decode_refused`` past what ``pixels`` has left, ``decode_failed`` when the file
        is not an image Pillow reads in one of the raster formats.
    """
    from PIL import Image, UnidentifiedImageError  # noqa: PLC0415 - only when one is drawn

    with decoding(what):
        try:
            im = Image.open(path, formats=_formats())
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise _past_pillow(what, exc, pixels) from exc
        except UnidentifiedImageError as exc:  # its message names our descriptor's path
            raise DecodeError(
                "decode_failed",
                f"{what} is not a {', '.join(_formats())} image Pillow can read; download the "
                "file and open it in a viewer",
                "not a readable image",
            ) from exc
    try:
        with decoding(what):
            size, copies, how = _drafted(im, px)
        pixels.take(what, size, copies, how)
    except BaseException:
        im.close()
        raise
    return im


def _past_pillow(what: str, exc: Exception, pixels: PixelBudget) -> DecodeError:
    """Pillow refused the header before we could: a picture past its own bomb limit, far
    past ours."""
    return DecodeError(
        "decode_refused",
        f"{what} was refused before decoding: {exc} A rendering decodes at most "
        f"{megapixels(pixels.limit)} (RenderBudget.decode_px); download the file and open "
        "it in a viewer",
        "over Pillow's decompression-bomb limit",
    )


def _drafted(im: ImageFile, px: int) -> tuple[tuple[int, int], int, str]:
    """Draft a JPEG for a ``px`` thumbnail; ``(size, copies, why)``: the size to count, the
    full-size buffers its decode holds at once, and why more than one."""
    if im.format not in ("JPEG", "MPO"):
        return (im.size, *_copies(im))
    full, one_scan = im.size, _one_scan(im)
    im.draft("RGB", (px, px))  # decoded at 1/2..1/8 scale; im.size is now that scale
    if one_scan:
        return im.size, 1, ""
    return full, 2, "a progressive or multi-scan JPEG keeps every coefficient at full size"


def _copies(im: ImageFile) -> tuple[int, str]:
    """Full-size buffers decoding and thumbnailing ``im`` holds at once, and why."""
    extra, why = _EXTRA_COPIES.get(im.format or "", (0, ""))
    reasons = [why] if why else []
    if im.mode in _ALPHA_MODES:
        extra += 1
        reasons.append("alpha is resampled on a premultiplied copy")
    return 1 + extra, "; ".join(reasons)


def _one_scan(im: ImageFile) -> bool:
    """Whether a JPEG holds a single scan, which libjpeg decodes at the drafted scale.

    Pillow's header parse stops at the first scan (``fp`` is at its data): a second
    start-of-scan marker before the end-of-image marker means a multi-scan file. Entropy-
    coded data never holds ``FF DA`` or ``FF D9`` (a data ``FF`` is followed by ``00`` or a
    restart marker), so the first of the two found decides. Wherever else ``fp`` stands
    (an MPO seeks to its first frame), a scan marker is found first: counted at full size.
    """
    if im.info.get("progressive") or im.fp is None:
        return False
    fp = im.fp
    start = fp.tell()
    try:
        tail = b""
        while chunk := fp.read(_SCAN_CHUNK):
            data = tail + chunk
            scan, end = data.find(b"\xff\xda"), data.find(b"\xff\xd9")
            if scan != -1 and (end == -1 or scan < end):
                return False
            if end != -1:
                return True
            tail = data[-1:]
        return True
    finally:
        fp.seek(start)


def draw_thumbnail(im: ImageFile, px: int, what: str) -> tuple[bytes, str]:
    """Decode ``im`` (from :func:`open_thumbnail`) into a JPEG thumbnail whose longest side
    is at most ``px``, and close it. Safe on a worker thread (Pillow releases the GIL while
    decoding and resizing).

    Raises
    ------
    DecodeError
        ``decode_failed``: the decoder failed, ``MemoryError`` included.
    """
    from PIL import Image  # noqa: PLC0415 - Pillow is imported only when a thumbnail is drawn

    with decoding(what), im:
        im.thumbnail((px, px))  # reduces by whole factors first, then resamples
        has_alpha = im.mode in _ALPHA_MODES or (im.mode == "P" and "transparency" in im.info)
        if has_alpha:
            rgba = im.convert("RGBA")
            out = Image.new("RGB", rgba.size, (255, 255, 255))
            out.paste(rgba, mask=rgba.getchannel("A"))
        else:
            out = im.convert("RGB")
        buf = io.BytesIO()
        out.save(buf, format="JPEG", quality=72)
    return buf.getvalue(), "image/jpeg"


def thumbnail(
    path: Path, px: int, pixels: PixelBudget | None = None, what: str = "image"
) -> tuple[bytes, str]:
    """:func:`open_thumbnail` then :func:`draw_thumbnail`, on this thread; ``pixels`` is a
    rendering's budget, the default ``RenderBudget.decode_px`` when ``None``."""
    if pixels is None:
        pixels = PixelBudget(RenderBudget().decode_px)
    return draw_thumbnail(open_thumbnail(path, px, pixels, what), px, what)
