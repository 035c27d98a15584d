"""Issue 22, point 11: one ``render(...)`` call is bounded as a whole, not artifact by artifact.

A real hostile module writes one 4 MiB file and claims it 150 times (it was embedded 150
times: 800 MiB of HTML, 2.5 GiB of memory); distinct files, grids and slides past the total
are shown as links or listed tiles with a note naming ``RenderBudget.total_bytes``.
"""

from __future__ import annotations

import base64
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from test_render_kit import artifact, invocation, make_png, write_json

import murmur_nb as mnb

FACET_MODULES = [("hostile", "hostile_output")]
MIB = 1 << 20
DATA_URI = re.compile(r"data:[a-z/+.-]+;base64,")
#: the short link cards of artifacts past the total come on top of it (about 1.2 kB each)
CARDS = 64 * 1024


@pytest.fixture
def host(facet_home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h:
        yield h


def _bundle_bytes(r: mnb.Rendering) -> int:
    return sum(len(v.encode("utf-8")) for v in r._repr_mimebundle_().values())


def _rendered(obj: object, budget: mnb.RenderBudget | None = None) -> tuple[mnb.Rendering, int]:
    """The rendering and the peak memory Python allocated while producing it."""
    tracemalloc.start()
    try:
        r = mnb.render(obj, budget=budget)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return r, peak


def test_one_file_claimed_150_times_is_embedded_once(host: mnb.ModuleHost) -> None:
    head = "the one file a module claims 150 times"
    files = [{"name": "one.bin", "content": head, "sparse": 4 * MIB}]
    claims = [
        {"path": "one.bin", "id": f"copy-{i:03}", "media_type": "application/octet-stream"}
        for i in range(150)
    ]
    inv = host.invoke("hostile.make", {"files": files, "claims": claims})
    assert len(inv.artifacts) == 150 and not inv.rejected_artifacts

    r, peak = _rendered(inv)

    assert r.ok, r.text
    encoded_head = base64.b64encode(head.encode()[:36]).decode()
    assert r.html.count(encoded_head) == 1  # the content itself: once
    assert len(DATA_URI.findall(r.html)) == 1
    size = _bundle_bytes(r)
    assert 5.5e6 < size < 6.5e6, size  # one 4 MiB file as base64 plus 149 short cards
    assert size < mnb.RenderBudget().total_bytes
    assert peak < 80 * MIB, peak  # it was 2.5 GiB
    again = [p for p in r.parts if "same content" in p.text]
    assert len(again) == 149
    assert "as artifact 'copy-000' (one.bin) shown above" in again[-1].text
    cards = BeautifulSoup(r.html, "html.parser").select(".murmur-artifact")
    assert len(cards) == 150  # every artifact is still accounted for on the page


def test_distinct_files_past_the_total_are_links_naming_the_knob(host: mnb.ModuleHost) -> None:
    files = [{"name": f"f{i:02}.bin", "content": f"file number {i:02}", "sparse": 4 * MIB}
             for i in range(12)]
    claims = [{"path": f"f{i:02}.bin", "media_type": "application/octet-stream"}
              for i in range(12)]
    inv = host.invoke("hostile.make", {"files": files, "claims": claims})
    budget = mnb.RenderBudget()

    r, peak = _rendered(inv, budget)

    embedded = len(DATA_URI.findall(r.html))
    assert 1 <= embedded < 12
    assert _bundle_bytes(r) <= budget.total_bytes + CARDS, _bundle_bytes(r)
    # two copies (the parts and the page), two bytes a character once a card holds a glyph
    # past Latin-1 (the download arrow): bounded by the total, whatever the number of files
    assert peak < 5 * budget.total_bytes, peak
    linked = [p for p in r.parts if "data:" not in p.html]
    assert len(linked) == 12 - embedded
    for part in linked:  # a visible note saying what to raise, and no link: the files are
        # in the host's run folder, outside the working directory Jupyter serves
        assert "RenderBudget.total_bytes" in part.text
        assert "RenderBudget.total_bytes" in part.html
        assert "outside the folder Jupyter serves" in part.text
        assert BeautifulSoup(part.html, "html.parser").select_one("a[href]") is None
    # the knob works: with room for all of them, all twelve are embedded
    roomy = mnb.render(inv, budget=mnb.RenderBudget(total_bytes=128 * MIB))
    assert len(DATA_URI.findall(roomy.html)) == 12
    assert "total_bytes" not in roomy.text


def test_a_gallery_of_invocations_shares_one_total(host: mnb.ModuleHost) -> None:
    """Three calls each under the total are, together, over it: a gallery is one rendering."""
    runs = []
    for n in range(3):
        files = [{"name": f"r{n}-{i}.bin", "content": f"run {n} file {i}", "sparse": 3 * MIB}
                 for i in range(2)]
        claims = [{"path": f"r{n}-{i}.bin", "media_type": "application/octet-stream"}
                  for i in range(2)]
        runs.append(host.invoke("hostile.make", {"files": files, "claims": claims}))
    budget = mnb.RenderBudget(total_bytes=16 * MIB)
    for run in runs:
        assert len(DATA_URI.findall(mnb.render(run, budget=budget).html)) == 2
    gallery = mnb.render(runs, budget=budget)
    assert len(DATA_URI.findall(gallery.html)) == 3  # 4.2 MB each: three fit in 16 MiB
    assert _bundle_bytes(gallery) <= budget.total_bytes + CARDS
    assert gallery.text.count("RenderBudget.total_bytes") >= 3


def _noise_png(path: Path, seed: int) -> None:
    import hashlib

    from PIL import Image

    data = hashlib.shake_256(seed.to_bytes(4, "big")).digest(200 * 150 * 3)
    Image.frombytes("RGB", (200, 150), data).save(path, format="PNG")


def test_grids_and_slides_listing_images_count_against_the_total(tmp_path: Path) -> None:
    """Twenty JSON grids listing the same 40 incompressible images: each would embed its
    full grid budget; together they stop at the total, and say so."""
    names = []
    for i in range(40):
        _noise_png(tmp_path / f"n{i:02}.png", i)
        names.append(f"n{i:02}.png")
    arts = []
    for g in range(20):
        write_json(tmp_path / f"grid{g:02}.json", [{"path": n, "title": f"{g}/{n}"} for n in names])
        arts.append(artifact(tmp_path, f"grid{g:02}.json", "application/json", "image_grid"))
    write_json(tmp_path / "deck.json", names)
    arts.append(artifact(tmp_path, "deck.json", "application/json", "slides"))
    inv = invocation(tmp_path, arts)

    unbounded = mnb.render(inv, budget=mnb.RenderBudget(total_bytes=1 << 40))
    budget = mnb.RenderBudget(total_bytes=2 * MIB)
    r = mnb.render(inv, budget=budget)

    assert _bundle_bytes(unbounded) > 4 * budget.total_bytes  # what the total prevents
    assert _bundle_bytes(r) <= budget.total_bytes + CARDS, _bundle_bytes(r)
    soup = BeautifulSoup(r.html, "html.parser")
    thumbs = soup.select("figure img")
    assert 0 < len(thumbs) < 20 * 40
    assert "thumbnails not embedded: the rendering reached its 2.0 MiB total budget " \
           "(RenderBudget.total_bytes)" in r.text
    slides = r.parts[-1]
    assert "RenderBudget.total_bytes" in slides.text and "<img" not in slides.html


def test_artifacts_past_the_listing_cap_are_counted_in_one_line(tmp_path: Path) -> None:
    for i in range(600):
        (tmp_path / f"t{i:03}.txt").write_text(f"text artifact {i}\n" * 200)
    inv = invocation(tmp_path, [artifact(tmp_path, f"t{i:03}.txt", "text/plain")
                                for i in range(600)])
    r = mnb.render(inv, budget=mnb.RenderBudget(total_bytes=256 * 1024))
    shown = [p for p in r.parts if p.primitive == "text"]
    linked = [p for p in r.parts
              if "RenderBudget.total_bytes" in p.text and p.primitive != "omitted"]
    (omitted,) = [p for p in r.parts if p.primitive == "omitted"]
    assert len(shown) + len(linked) + int(omitted.text.split()[2]) == 600
    assert len(linked) == 200
    assert "more artifacts not shown or listed" in omitted.html
    assert _bundle_bytes(r) < 256 * 1024 + 200 * 2048


def test_the_total_is_checked_like_the_other_limits() -> None:
    with pytest.raises(ValueError, match="total_bytes"):
        mnb.RenderBudget(total_bytes=-1)


def test_a_content_shown_once_still_refuses_a_changed_copy(tmp_path: Path) -> None:
    """A copy that changed after the host verified it is an error card, not a reference."""
    make_png(tmp_path / "a.png", seed=1)
    make_png(tmp_path / "b.png", seed=1)
    first = artifact(tmp_path, "a.png", "image/png")
    second = artifact(tmp_path, "b.png", "image/png")
    (tmp_path / "b.png").write_bytes(b"changed after verification" + bytes(100))
    r = mnb.render([first, second, first])
    assert [p.primitive for p in r.parts] == ["image", "error", "download"]
    assert r.parts[1].error_code == "size_mismatch"
    assert "same content" in r.parts[2].text
