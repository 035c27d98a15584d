"""Issue 13, point 9 for image grids: the images a JSON grid lists are read like artifacts.

A ``grid`` artifact that is a JSON list of image paths is verified itself; the images it
names are module-controlled paths too. Each is opened beneath the artifact's root without
following a link, ``fstat``-checked and read from that descriptor, so a listed link, a hard
link to a file elsewhere or a swap after the check shows a refused tile, never the file.
The images are SVG, which a grid embeds as they are (base64): any leaked byte would show.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import swapping
from bs4 import BeautifulSoup
from test_hook_guard import PeakRss

import murmur_nb as mnb

FACET_MODULES = [("hostile", "hostile_output")]

GENUINE = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8">'
    '<rect width="8" height="8" fill="#2da44e"/></svg>'
)
SECRET = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><!-- TOP SECRET host file -->'
    '<text x="0" y="8">TOP SECRET</text></svg>'
)


@pytest.fixture
def host(facet_home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h:
        yield h


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "host-only" / "secret.svg"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def _grid(host: mnb.ModuleHost, listed: list[Any], files: list[dict[str, Any]]) -> mnb.Invocation:
    """The module writes ``files`` and a ``grid.json`` listing ``listed``, and claims the JSON."""
    files = [*files, {"name": "grid.json", "content": json.dumps(listed)}]
    claim = {"path": "grid.json", "media_type": "application/json",
             "presentation": "image_grid"}
    return host.invoke("hostile.make", {"files": files, "claims": [claim]})


def _leaks(rendering: mnb.Rendering) -> bool:
    shown = rendering.html + rendering.text
    secret_b64 = base64.b64encode(SECRET.encode()).decode()
    return "TOP SECRET" in shown or secret_b64 in shown


def _tiles(rendering: mnb.Rendering) -> list[str]:
    """Each figure of the grid: ``"genuine"`` for the genuine image, else the tile's text."""
    genuine = "data:image/svg+xml;base64," + base64.b64encode(GENUINE.encode()).decode()
    out = []
    for figure in BeautifulSoup(rendering.html, "html.parser").select("figure"):
        img = figure.select_one("img")
        if img is not None:
            assert img["src"] == genuine  # an image shown is the genuine one, nothing else
            out.append("genuine")
        else:
            figure.figcaption.decompose()  # type: ignore[union-attr]
            out.append(figure.get_text(" ", strip=True))
    return out


def test_listed_links_and_odd_files_are_refused_tiles(
    host: mnb.ModuleHost, secret: Path
) -> None:
    files = [
        {"name": "pic.svg", "content": GENUINE},
        {"name": "leak.svg", "symlink_to": str(secret)},
        {"name": "linked/dir", "symlink_to": str(secret.parent)},
        {"name": "sub/inner.svg", "content": GENUINE},
    ]
    listed = ["pic.svg", "leak.svg", "linked/dir/secret.svg", "sub", "../secret.svg",
              {"path": "./sub/inner.svg", "title": "inner"}, "gone.svg"]
    inv = _grid(host, listed, files)
    (art,) = inv.artifacts
    rendering = mnb.render(inv)
    assert not _leaks(rendering)
    (grid,) = rendering.parts
    assert grid.primitive == "image_grid" and grid.ok
    tiles = _tiles(grid)
    assert tiles[0] == "genuine" and tiles[5] == "genuine"
    assert tiles[1] == "refused: a symbolic link (links are not followed)"
    assert tiles[2] == "refused: a link or a file where a folder should be"
    assert tiles[3] == "refused: it is not a regular file"
    assert tiles[4] == "outside the root" and tiles[6] == "missing"
    assert "2. leak.svg (refused: a symbolic link (links are not followed))" in grid.text
    assert str(secret.parent) not in grid.text
    # the same artifact, the same answer through render() of the artifact alone
    assert not _leaks(mnb.render(art))
    assert secret.read_text() == SECRET


def test_a_listed_hard_link_to_a_file_outside_the_root_is_refused(
    facet_home: Path, secret: Path
) -> None:
    """Inside the sandbox the module cannot see the secret to link it; the render's own
    check is the line that holds without one (a machine without a sandbox, opted out)."""
    policy = mnb.Policy(sandbox="off")
    with mnb.ModuleHost(home=facet_home, policy=policy) as host:
        inv = _grid(host, ["pic.svg", "innocent.svg"],
                    [{"name": "pic.svg", "content": GENUINE},
                     {"name": "innocent.svg", "hardlink_to": str(secret)}])
        assert secret.stat().st_nlink == 2  # the module really linked it into its root
        rendering = mnb.render(inv)
    assert not _leaks(rendering)
    assert _tiles(rendering.parts[0]) == [
        "genuine", "refused: it has 2 hard links (it is also a file elsewhere)"
    ]


def test_a_listed_image_past_the_decode_budget_is_not_read(
    host: mnb.ModuleHost,
) -> None:
    big = GENUINE.replace("</svg>", "<!--" + "x" * 4000 + "--></svg>")
    inv = _grid(host, ["pic.svg", "big.svg"], [{"name": "pic.svg", "content": GENUINE},
                                                {"name": "big.svg", "content": big}])
    rendering = mnb.render(inv, budget=mnb.RenderBudget(parse_bytes=2000))
    tiles = _tiles(rendering.parts[0])
    assert tiles[0] == "genuine"
    assert tiles[1].startswith("refused: ") and "too large to thumbnail" in tiles[1]


@pytest.mark.slow
def test_swapping_a_listed_image_for_a_link_never_shows_the_secret(
    host: mnb.ModuleHost, secret: Path
) -> None:
    inv = _grid(host, ["pic.svg"], [{"name": "pic.svg", "content": GENUINE},
                                    {"name": "swap", "symlink_to": str(secret)}])
    (art,) = inv.artifacts
    root = art.file.parent
    outcomes: dict[str, int] = {}
    with swapping(root / "pic.svg", root / "swap"):
        for _ in range(1500):
            rendering = mnb.render(inv)
            assert not _leaks(rendering)
            (tile,) = _tiles(rendering.parts[0])
            outcomes[tile] = outcomes.get(tile, 0) + 1
    # the race was real: some renders saw the genuine file, some the link (refused)
    link = "refused: a symbolic link (links are not followed)"
    assert set(outcomes) == {"genuine", link}, outcomes
    assert secret.read_text() == SECRET


def test_slides_listing_links_show_refused_pages(tmp_path: Path) -> None:
    """Slides read listed images through the same opener; the secret's pixels never show
    (its thumbnail, drawn on its own, appears nowhere in the deck)."""
    from test_render_kit import artifact, make_png, write_json

    root = tmp_path / "root"
    make_png(root / "s0.png", seed=1)
    secret_png = make_png(tmp_path / "host-only" / "secret.png", seed=9)
    (root / "leak.png").symlink_to(secret_png)
    (root / "hard.png").hardlink_to(secret_png)
    write_json(root / "deck.json", ["s0.png", "leak.png", "hard.png"])
    deck = mnb.render(artifact(root, "deck.json", "application/json", "slides"))
    assert [s.text for s in deck.slides] == [
        "slide 1: s0.png",
        "slide 2: leak.png: refused: a symbolic link (links are not followed)",
        "slide 3: hard.png: refused: it has 2 hard links (it is also a file elsewhere)",
    ]
    make_png(tmp_path / "copy" / "secret.png", seed=9)  # same pixels, in a deck of its own
    write_json(tmp_path / "copy" / "deck.json", ["secret.png"])
    alone = mnb.render(artifact(tmp_path / "copy", "deck.json", "application/json", "slides"))
    uri = BeautifulSoup(alone.html, "html.parser").select_one("img")["src"]  # type: ignore[index]
    assert isinstance(uri, str) and uri.startswith("data:image/")
    assert uri not in deck.html
    assert deck.html.count("<img") == 1


MIB = 1 << 20


def test_a_list_of_200_000_paths_reads_only_the_images_shown(tmp_path: Path) -> None:
    """A 1.6 MB list naming one image 200,000 times: each entry was opened and given a
    ~500-byte cell (a 400,000-entry list took 742 MiB and 7 s); now the first
    ``grid_images`` are, and the rest are counted."""
    (tmp_path / "a.svg").write_text(GENUINE)
    listing = tmp_path / "grid.json"
    listing.write_text(json.dumps(["a.svg"] * 200_000))
    started = time.perf_counter()
    with PeakRss() as rss:
        r = mnb.render_file(listing, "application/json", "image_grid")
    elapsed = time.perf_counter() - started
    assert rss.peak - rss.baseline < 64 * MIB
    assert elapsed < 1.5  # 0.05 s measured
    assert r.primitive == "image_grid" and r.ok
    tiles = _tiles(r)
    assert len(tiles) == 1000 and tiles[0] == "genuine"
    assert "200000 images listed" in r.text
    assert (
        "showing 1,000 of 200,000 images listed (RenderBudget.grid_images); the rest are "
        "counted, not read: render a shorter list, or with a larger "
        "RenderBudget(grid_images=...)" in r.text
    )


def test_a_grid_stops_making_cells_once_the_rendering_output_is_spent(tmp_path: Path) -> None:
    (tmp_path / "a.svg").write_text(GENUINE)
    listing = tmp_path / "grid.json"
    listing.write_text(json.dumps(["a.svg"] * 1000))
    budget = mnb.RenderBudget(total_bytes=256 * 1024)
    r = mnb.render_file(listing, "application/json", "image_grid", budget=budget)
    assert r.primitive == "image_grid" and r.ok
    shown = len(_tiles(r))
    assert 0 < shown < 1000
    assert len(r.html) <= 256 * 1024
    assert (
        f"{1000 - shown:,} of 1,000 images not listed: the rendering reached its 256.0 KiB "
        "total budget (RenderBudget.total_bytes); render it on its own, or with a larger "
        "RenderBudget(total_bytes=...)" in r.text
    )


def test_grid_titles_of_megabytes_of_quotes_are_cut_before_they_are_escaped(
    tmp_path: Path,
) -> None:
    """Four titles of 1 MiB of ``'``, each escaped whole (six bytes a quote) into a caption
    and its tooltip before the rendering's total refused the grid."""
    (tmp_path / "a.svg").write_text(GENUINE)
    listing = tmp_path / "grid.json"
    listing.write_text(json.dumps([{"path": "a.svg", "title": "'" * MIB}] * 4))
    with PeakRss() as rss:
        r = mnb.render_file(listing, "application/json", "image_grid")
    assert rss.peak - rss.baseline < 32 * MIB  # 66 MiB before
    assert r.primitive == "image_grid" and r.ok
    assert _tiles(r) == ["genuine"] * 4
    captions = BeautifulSoup(r.html, "html.parser").select("figcaption")
    assert [c.get_text() for c in captions] == [f"{n}. " + "'" * 200 + "…" for n in range(1, 5)]
    assert captions[0]["title"] == "'" * 200 + "…"
