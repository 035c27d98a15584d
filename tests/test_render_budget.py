"""The budget: ``bytes`` decides embed-or-link before the file is opened; output stays small.

One test calls the media renderers (internal) on a ``Source`` whose file does not exist and
whose declared size is a terabyte: the host never hands such an artifact to ``render``, and
that is how the test proves the renderer decided without opening the file.
"""

from __future__ import annotations

import hashlib
import inspect
import tracemalloc
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from test_render_kit import artifact, invocation, make_mp4, make_png

import murmur_nb as mnb
from murmur_nb._render.core import Source  # private: a Source of a missing file
from murmur_nb._render.primitives.media import (  # private: given a missing file
    render_audio,
    render_download,
    render_image,
    render_video,
)


def _bundle_bytes(r: mnb.Rendering) -> int:
    return sum(len(v.encode("utf-8")) for v in r._repr_mimebundle_().values())


@pytest.mark.parametrize("renderer", [render_video, render_audio, render_image, render_download])
def test_declared_bytes_decide_without_opening_the_file(tmp_path: Path, renderer: object) -> None:
    """Past the budget, the renderer links a path it never opens (here: one that does not exist)."""
    ghost = Source(
        id="g",
        title="ghost",
        media_type="video/mp4",
        bytes=10**12,
        digest="sha256:" + "0" * 64,
        file=tmp_path / "never-created.mp4",
        rel_path="never-created.mp4",
    )
    body = renderer(ghost, mnb.RenderBudget(link_base=tmp_path))  # type: ignore[operator]
    assert 'src="never-created.mp4"' in body.html or 'href="never-created.mp4"' in body.html
    assert "data:" not in body.html


def test_the_embed_limit_is_configurable(tmp_path: Path) -> None:
    make_mp4(tmp_path / "clip.mp4")
    art = artifact(tmp_path, "clip.mp4", "video/mp4")
    embedded = mnb.render(art, budget=mnb.RenderBudget(embed_bytes=art.bytes))
    # linked where it is: under link_base (outside it, it would be a note, not a dead link)
    smaller = mnb.RenderBudget(embed_bytes=art.bytes - 1, link_base=tmp_path)
    linked = mnb.render(art, budget=smaller)
    assert "data:video/mp4;base64," in embedded.html
    assert "data:video/mp4" not in linked.html
    assert "linked, not embedded" in linked.text


def test_budget_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="thumbnail_px"):
        mnb.RenderBudget(thumbnail_px=0)
    with pytest.raises(ValueError, match="embed_bytes"):
        mnb.RenderBudget(embed_bytes=-1)


def _noise_png(path: Path, seed: int) -> None:
    from PIL import Image

    w, h = 240, 180
    data = hashlib.shake_256(seed.to_bytes(4, "big")).digest(w * h * 3)
    Image.frombytes("RGB", (w, h), data).save(path, format="PNG")


@pytest.mark.slow
def test_a_500_image_grid_stays_under_5_mb(tmp_path: Path) -> None:
    """Incompressible images make every thumbnail large: the grid budget must cut in, in order."""
    arts = []
    for i in range(500):
        _noise_png(tmp_path / f"f{i:03}.png", i)
        arts.append(artifact(tmp_path, f"f{i:03}.png", "image/png", "image_grid"))
    r = mnb.render(invocation(tmp_path, arts))
    assert len(r.parts) == 1 and r.parts[0].primitive == "image_grid"
    size = _bundle_bytes(r)
    assert size < 5_000_000, size
    figures = BeautifulSoup(r.html, "html.parser").select("figure")
    assert len(figures) == 500
    embedded = [bool(f.select_one("img")) for f in figures]
    first_gap = embedded.index(False)
    assert first_gap > 0 and not any(embedded[first_gap:])  # a prefix, in order
    assert "thumbnails not embedded" in r.text
    assert [f.select_one("figcaption").get_text() for f in figures[:2]] == [  # type: ignore[union-attr]
        "1. f000.png",
        "2. f001.png",
    ]


def test_a_small_grid_budget_lists_the_rest_by_name(tmp_path: Path) -> None:
    arts = []
    for i in range(6):
        make_png(tmp_path / f"p{i}.png", seed=i)
        arts.append(artifact(tmp_path, f"p{i}.png", "image/png", "image_grid"))
    r = mnb.render(invocation(tmp_path, arts), budget=mnb.RenderBudget(grid_bytes=4000))
    figures = BeautifulSoup(r.html, "html.parser").select("figure")
    assert len(figures) == 6
    assert sum(1 for f in figures if f.select_one("img")) < 6
    assert "(RenderBudget.grid_bytes)" in r.text


@pytest.mark.slow
def test_a_1_gb_video_is_linked_and_never_read_into_memory(tmp_path: Path) -> None:
    clip = make_mp4(tmp_path / "head.mp4")
    big = tmp_path / "big.mp4"
    with big.open("wb") as fh:
        fh.write(clip.read_bytes())
        fh.truncate(1024**3)  # sparse: a real MP4 header, then zeros to 1 GiB
    h = hashlib.sha256()
    with big.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    art = mnb.VerifiedArtifact(
        id="big",
        kind="video",
        path="big.mp4",
        root="out",
        media_type="video/mp4",
        bytes=big.stat().st_size,
        digest="sha256:" + h.hexdigest(),
        file=big,
    )
    tracemalloc.start()
    try:
        r = mnb.render(art, budget=mnb.RenderBudget(link_base=tmp_path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.primitive == "video", r.text
    assert peak < 16 * 1024**2, peak
    assert _bundle_bytes(r) < 4096
    player = BeautifulSoup(r.html, "html.parser").select_one("video")
    assert player is not None and player["src"] == "big.mp4"
    assert "1.0 GiB" in r.text and "linked, not embedded" in r.text
    big.unlink()


def test_grid_images_past_the_decode_budget_are_not_decoded(tmp_path: Path) -> None:
    make_png(tmp_path / "small.png", size=(40, 30))
    make_png(tmp_path / "large.png", size=(900, 700), seed=5)
    arts = [
        artifact(tmp_path, "small.png", "image/png", "image_grid"),
        artifact(tmp_path, "large.png", "image/png", "image_grid"),
    ]
    limit = (tmp_path / "small.png").stat().st_size
    r = mnb.render(invocation(tmp_path, arts), budget=mnb.RenderBudget(parse_bytes=limit))
    figures = BeautifulSoup(r.html, "html.parser").select("figure")
    assert figures[0].select_one("img") is not None
    assert figures[1].select_one("img") is None
    assert "too large to thumbnail" in figures[1].get_text()
    assert "1 of 2 images could not be shown" in r.text


def test_the_budget_takes_only_what_a_caller_sets() -> None:
    """``help(mnb.RenderBudget)`` listed ``_left`` and ``_pixels``, the per-rendering state
    ``render()`` keeps on its copies; they are not parameters any more."""
    params = inspect.signature(mnb.RenderBudget).parameters
    assert params and not [name for name in params if name.startswith("_")]
    with pytest.raises(TypeError, match="_left"):
        mnb.RenderBudget(_left=1)  # type: ignore[call-arg]
