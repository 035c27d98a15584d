"""Finding 5: decode bombs. A small file can hold a huge picture; rendering it must not cost
the kernel its memory or seconds of CPU, and must show why it was not drawn.

Each attack builds the real hostile file (a 309-byte PDF whose page is 1x4000 pt, eight
9400x9400 PNGs of 252 KB each, a 48 KB 1-bit PNG of 20000x20000) and renders it in a fresh
interpreter whose address space is capped (RLIMIT_AS: what it has after warming up, plus
1 GiB), as a kernel on a small machine would be; the child reports the CPU time of the
render and the growth of its peak RSS. Before the pixel budget the tall PDF raised
MemoryError out of ``render()`` under that cap (3.45 GiB otherwise), the grid took 12 s of
CPU and the 1-bit PNG raised DecompressionBombError.

The PNGs are written by hand (zlib on rows of zeros) rather than by Pillow, which would
hold the whole picture to save it.
"""

from __future__ import annotations

import base64
import functools
import io
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from PIL import Image
from test_render_kit import artifact, make_png, write_json

import murmur_nb as mnb

TESTS = Path(__file__).resolve().parent
MIB = 1 << 20
#: what one render() of one hostile artifact may cost at most (the finding's goal)
MAX_CPU_S = 2.0
MAX_RSS_GROWTH = 256 * MIB
#: the child's address space: what it holds after warming up, plus this
AS_HEADROOM = 1 << 30

#: Warm up (libraries loaded, a grid's thread pool and a PDF drawn once), cap the address
#: space, then render the listed artifacts as one invocation and report what it cost.
CHILD = """
import json, resource, sys, time
from pathlib import Path

tests, root, headroom = sys.argv[1], Path(sys.argv[2]), int(sys.argv[4])
spec, budget = json.loads(sys.argv[3]), json.loads(sys.argv[5])
sys.path.insert(0, tests)
import murmur_nb as mnb
from test_render_kit import artifact, invocation, make_pdf, make_png

warm = root.parent / "warm"
make_png(warm / "w.png")
make_pdf(warm / "w.pdf", pages=1)
mnb.render(invocation(warm, [artifact(warm, "w.png", "image/png", "image_grid"),
                             artifact(warm, "w.pdf", "application/pdf")]))
target = invocation(root, [artifact(root, name, mt, hint) for name, mt, hint in spec])

def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))

_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (status("VmSize") + headroom, hard))
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak RSS (VmHWM) starts again from what the process holds now
rss_before = status("VmRSS")
cpu_before = time.process_time()
try:
    rendering = mnb.render(target, budget=mnb.RenderBudget(**budget))
    out = {"html": rendering.html, "text": rendering.text}
except BaseException as exc:
    out = {"raised": f"{type(exc).__name__}: {exc}"}
out["cpu_s"] = time.process_time() - cpu_before
out["rss_growth"] = status("VmHWM") - rss_before
print(json.dumps(out))
"""


def _rendered_in_a_capped_kernel(
    root: Path,
    spec: list[tuple[str, str, str]],
    headroom: int = AS_HEADROOM,
    **budget: int,
) -> dict[str, Any]:
    """``render()`` of an invocation of ``spec`` (``(path, media type, hint)``) with
    ``RenderBudget(**budget)`` in a fresh interpreter that may grow by ``headroom``: its HTML
    and text, or what it raised; its CPU time and RSS growth."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", CHILD,
         str(TESTS), str(root), json.dumps(spec), str(headroom), json.dumps(budget)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return got


def _bounded(got: dict[str, Any]) -> None:
    """The render returned, within the CPU and memory the kernel can spare."""
    assert "raised" not in got, got["raised"]
    assert got["cpu_s"] < MAX_CPU_S, got["cpu_s"]
    assert got["rss_growth"] < MAX_RSS_GROWTH, got["rss_growth"] / MIB


# --- hostile files ----------------------------------------------------------------------


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.cache
def _deflated_zeros(n: int) -> bytes:
    """``n`` zero bytes as raw deflate, the final block included: 1 MiB compressed once and
    repeated (each piece ends with a full flush, so none refers back into another)."""
    piece_size = MIB
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = squeeze.compress(bytes(piece_size)) + squeeze.flush(zlib.Z_FULL_FLUSH)
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail = last.compress(bytes(n % piece_size)) + last.flush()
    return piece * (n // piece_size) + tail


def _png(path: Path, size: tuple[int, int], bit_depth: int, colour: int, first: bytes) -> Path:
    """A PNG of ``size`` whose pixels are all zero but those of ``first`` (its first row)."""
    width, height = size
    channels = {0: 1, 2: 3, 6: 4}[colour]
    row = 1 + (width * channels * bit_depth + 7) // 8  # the filter byte, then the pixels
    row0 = b"\0" + first.ljust(row - 1, b"\0")
    head = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = row * (height - 1)
    adler = zlib.adler32(row0)
    a, b = adler & 0xFFFF, adler >> 16
    b = (b + zeros * a) % 65521  # zero bytes leave a alone and add a to b, once each
    stream = (
        b"\x78\xda"
        + head.compress(row0)
        + head.flush(zlib.Z_FULL_FLUSH)
        + _deflated_zeros(zeros)
        + struct.pack(">I", (b << 16) | a)
    )
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour, 0, 0, 0)
    chunks = _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", stream) + _chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunks)
    return path


def _tall_pdf(path: Path, comment: bytes = b"") -> Path:
    """A one-page PDF whose page is 1 pt wide and 4000 pt tall (309 bytes, and nothing on it)."""
    path.write_bytes(_pdf([
        b"<</Type/Catalog/Pages 2 0 R>>",
        b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
        b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 1 4000]>>",
    ], comment))  # fmt: skip
    return path


def _heavy_pdf(path: Path, lines: int, pages: int) -> Path:
    """``pages`` letter pages sharing one Flate-compressed content stream of ``lines``
    stroked lines (a few KB: 300,000 lines compress to 13 KB)."""
    content = zlib.compress(b"0 0 m 612 792 l S\n" * lines, 9)
    kids = b" ".join(b"%d 0 R" % (3 + n) for n in range(pages))
    stream = 3 + pages
    path.write_bytes(_pdf([
        b"<</Type/Catalog/Pages 2 0 R>>",
        b"<</Type/Pages/Kids[%s]/Count %d>>" % (kids, pages),
        *[b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Contents %d 0 R>>" % stream] * pages,
        b"<</Length %d/Filter/FlateDecode>>\nstream\n%s\nendstream" % (len(content), content),
    ]))  # fmt: skip
    return path


def _pdf(objects: list[bytes], comment: bytes = b"") -> bytes:
    """A PDF of ``objects`` (object 1 its catalog), with its cross-reference table."""
    out = b"%PDF-1.4\n" + comment
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


def _images(html: str) -> list[Image.Image]:
    """The pictures a rendering embeds, decoded from their data URIs."""
    out = []
    for img in BeautifulSoup(html, "html.parser").select("img"):
        src = str(img["src"])
        assert src.startswith("data:image/"), src[:60]
        out.append(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))))
    return out


def _refused_tiles(html: str) -> list[str]:
    return [
        tile.get_text(" ", strip=True)
        for tile in BeautifulSoup(html, "html.parser").select('[data-error-code="decode_refused"]')
    ]


# --- the attacks ------------------------------------------------------------------------


def test_a_tall_pdf_page_is_drawn_within_its_box(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    _tall_pdf(root / "tall.pdf")
    _tall_pdf(root / "tall-slides.pdf", comment=b"%slides\n")  # another digest: drawn again
    assert (root / "tall.pdf").stat().st_size < 400
    got = _rendered_in_a_capped_kernel(
        root,
        [("tall.pdf", "application/pdf", ""), ("tall-slides.pdf", "application/pdf", "slides")],
    )
    _bounded(got)
    assert "document · tall.pdf" in got["text"] and "slides · tall-slides.pdf" in got["text"]
    pages = _images(got["html"])
    assert len(pages) == 2  # the document's preview and the slide
    for page in pages:
        assert page.width <= 360 and page.height <= 4 * 360, page.size


def test_eight_huge_pngs_in_a_grid_are_refused_from_their_headers(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    names = [f"big{i}.png" for i in range(8)]
    for i, name in enumerate(names):
        _png(root / name, (9400, 9400), 8, 2, first=bytes([i + 1, 2, 3]))
        assert (root / name).stat().st_size < MIB
    got = _rendered_in_a_capped_kernel(root, [(n, "image/png", "image_grid") for n in names])
    _bounded(got)
    tiles = _refused_tiles(got["html"])
    assert len(tiles) == 8, got["text"]
    assert all("9400x9400 = 88.4 Mpx" in tile for tile in tiles), tiles
    assert "image 'big0.png' is 9400x9400 = 88.4 Mpx, over the 50.0 Mpx" in got["text"]
    assert "RenderBudget.decode_px" in got["text"]


def test_a_one_bit_20000_square_png_is_refused_not_raised(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    _png(root / "bomb.png", (20000, 20000), 1, 0, first=b"\xff")
    assert (root / "bomb.png").stat().st_size < 64 * 1024
    make_png(root / "fine.png")
    write_json(root / "deck.json", ["fine.png", "bomb.png"])
    got = _rendered_in_a_capped_kernel(
        root,
        [
            ("bomb.png", "image/png", "image_grid"),
            ("fine.png", "image/png", "image_grid"),
            ("deck.json", "application/json", "slides"),
        ],
    )
    _bounded(got)
    assert len(_refused_tiles(got["html"])) == 1, got["text"]
    assert "image 'bomb.png' was refused before decoding" in got["text"]
    soup = BeautifulSoup(got["html"], "html.parser")
    grid, slides = soup.select('[data-primitive="image_grid"]'), soup.select(
        '[data-primitive="slides"]'
    )
    assert len(grid) == 1 and len(grid[0].select("img")) == 1  # fine.png is still drawn
    assert len(slides) == 1 and len(slides[0].select("img")) == 1
    assert "image 'bomb.png' was refused before decoding" in slides[0].get_text()


@pytest.mark.parametrize("presentation", ["document", "slides"])
def test_pages_too_heavy_to_draw_in_time_are_counted_not_drawn(
    tmp_path: Path, presentation: str
) -> None:
    """Pages of a few KB whose content stream holds 300,000 lines: drawing one took about
    12 s of the kernel's CPU, without end in sight for Ctrl-C, and a strip of slides takes
    every page in turn. A document's pages now share ``RenderBudget.document_draw_s``
    (10 s; 0.5 s here): the page that reaches it is counted, not drawn, and the card says
    why and which field to raise."""
    _heavy_pdf(tmp_path / "heavy.pdf", 300_000, 3)
    assert (tmp_path / "heavy.pdf").stat().st_size < 64 * 1024
    started = time.monotonic()
    r = mnb.render(artifact(tmp_path, "heavy.pdf", "application/pdf", presentation),
                   budget=mnb.RenderBudget(document_draw_s=0.5))  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed  # one page alone took 12 s before
    assert r.ok and not _images(r.html), r.text[:400]
    assert "page 1 was not drawn: the document's pages took more than the 0.5 s" in r.text
    assert "or render it with a larger RenderBudget(document_draw_s=..., draw_s=...)" in r.text
    if presentation == "slides":
        assert "showing 0 of 3 slides (RenderBudget.document_draw_s)" in r.html


def test_a_renderings_drawing_time_bounds_its_pdf_pages_too(tmp_path: Path) -> None:
    """Two heavy PDFs in one rendering whose ``draw_s`` (0.6 s) is shorter than a
    document's own time: the first stops at the rendering's time, the second draws
    nothing, and both cards name ``RenderBudget.draw_s``."""
    for name, lines in (("a.pdf", 300_000), ("b.pdf", 299_999)):  # not the same content
        _heavy_pdf(tmp_path / name, lines, 2)
    arts = [artifact(tmp_path, name, "application/pdf", "slides") for name in ("a.pdf", "b.pdf")]
    started = time.monotonic()
    r = mnb.render(arts, budget=mnb.RenderBudget(draw_s=0.6))
    elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed
    assert not _images(r.html), r.text[:400]
    assert r.html.count("showing 0 of 2 slides (RenderBudget.draw_s)") == 2, r.text


@pytest.mark.parametrize(("field", "value", "error"), [
    ("draw_s", 0, ValueError), ("document_draw_s", -1.5, ValueError),
    ("draw_s", float("nan"), ValueError), ("draw_s", float("inf"), ValueError),
    ("document_draw_s", "10", TypeError), ("draw_s", True, TypeError),
])  # fmt: skip
def test_drawing_times_are_seconds_more_than_zero(field: str, value: object, error: type) -> None:
    with pytest.raises(error, match=f"RenderBudget.{field} must be"):
        mnb.RenderBudget(**{field: value})
    assert mnb.RenderBudget(**{field: 2}).__getattribute__(field) == 2


def test_ctrl_c_stops_a_page_being_drawn(tmp_path: Path) -> None:
    """A real SIGINT (Jupyter's interrupt) 0.5 s into drawing a heavy page raises
    ``KeyboardInterrupt`` within a fraction of a second. Before, it waited for the page to
    end (12 s); and raised inside pdfium's pause callback, ctypes would print and drop it."""
    _heavy_pdf(tmp_path / "heavy.pdf", 300_000, 2)
    art = artifact(tmp_path, "heavy.pdf", "application/pdf", "document")
    sent: list[float] = []

    def interrupt() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            mnb.render(art)
        ended = time.monotonic()
    finally:
        timer.cancel()
    assert sent and ended - sent[0] < 2.0, ended - sent[0]


def test_a_page_past_the_rendering_s_pixels_is_counted_not_drawn(tmp_path: Path) -> None:
    _tall_pdf(tmp_path / "tall.pdf")
    art = artifact(tmp_path, "tall.pdf", "application/pdf")
    r = mnb.render(art, budget=mnb.RenderBudget(decode_px=1000))
    assert r.ok and not _images(r.html)
    assert "showing 0 of 1 pages (RenderBudget.decode_px)" in r.html
    assert "page 1 is 1x1440 = 1440 px, counted as 2880 px (pdfium's bitmap" in r.text


def test_a_decoder_out_of_memory_is_a_tile_and_an_error_card(tmp_path: Path) -> None:
    """The reader raised the budgets past what the kernel holds (128 MiB more): Pillow and
    pdfium really run out of memory, and the kernel says so instead of dying."""
    root = tmp_path / "out"
    root.mkdir()
    _png(root / "big.png", (9400, 9400), 8, 2, first=b"\x01")
    _tall_pdf(root / "tall.pdf")
    got = _rendered_in_a_capped_kernel(
        root,
        [("big.png", "image/png", "image_grid"), ("tall.pdf", "application/pdf", "")],
        headroom=128 * MIB,
        decode_px=10**12,
        preview_px=100_000,  # the 1x4000 pt page drawn 100x400,000
    )
    assert "raised" not in got, got["raised"]
    out_of_memory = "could not be decoded (the kernel ran out of memory decoding it)"
    soup = BeautifulSoup(got["html"], "html.parser")
    tile = soup.select_one('[data-primitive="image_grid"] [data-error-code="decode_failed"]')
    assert tile is not None and out_of_memory in str(tile["title"])
    card = soup.select_one('.murmur-error[data-error-code="decode_failed"]:not(figure *)')
    assert card is not None and f"page 1 {out_of_memory}" in card.get_text()
    assert "error · tall.pdf · decode_failed" in got["text"]


@pytest.mark.parametrize(("colour", "side"), [(2, 7071), (6, 5000)], ids=["rgb", "alpha"])
def test_a_picture_the_budget_allows_costs_what_the_goal_allows(
    tmp_path: Path, colour: int, side: int
) -> None:
    """The default budget's worst case, just under it: a 50 Mpx RGB PNG, and a 25 Mpx PNG
    with alpha (which counts twice), are drawn within 256 MiB and 2 s of CPU."""
    root = tmp_path / "out"
    root.mkdir()
    _png(root / "wide.png", (side, side), 8, colour, first=b"\x80\x40\x20\xff")
    got = _rendered_in_a_capped_kernel(root, [("wide.png", "image/png", "image_grid")])
    _bounded(got)
    (thumb,) = _images(got["html"])
    assert thumb.size == (160, 160)


def test_a_file_in_another_format_is_never_handed_to_its_decoder(tmp_path: Path) -> None:
    """An EPS named like a PNG would go to Ghostscript (a program, in the kernel's account)
    had Pillow been let to pick any format; only raster formats are opened."""
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 64 64\nshowpage\n"
    (tmp_path / "cover.png").write_bytes(eps)
    r = mnb.render(artifact(tmp_path, "cover.png", "image/png", "image_grid"))
    tile = BeautifulSoup(r.html, "html.parser").select_one('[data-error-code="decode_failed"]')
    assert tile is not None and "not a readable image" in tile.get_text()
    assert "image 'cover.png' is not a PNG, JPEG, GIF, WEBP, BMP, TIFF image" in r.text
