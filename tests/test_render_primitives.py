"""All thirteen primitives render real files, statically (no script), per SPEC §2."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from bs4 import BeautifulSoup, Tag
from test_render_kit import (
    artifact,
    invocation,
    make_csv,
    make_jpeg,
    make_mp4,
    make_parquet,
    make_pdf,
    make_png,
    make_wav,
    write_json,
)

import murmur_nb as mnb


def soup(r: mnb.Rendering) -> BeautifulSoup:
    html = r._repr_mimebundle_()["text/html"]
    assert "<script" not in html.lower()
    return BeautifulSoup(html, "html.parser")


def data_of(uri: str) -> tuple[str, bytes]:
    head, _, payload = uri.partition(",")
    assert head.startswith("data:") and head.endswith(";base64"), head[:40]
    return head[5:-7], base64.b64decode(payload)


def one(s: BeautifulSoup, selector: str) -> Tag:
    found = s.select(selector)
    assert len(found) == 1, (selector, len(found))
    return found[0]


# --- video, audio, image -----------------------------------------------------------------


def test_video_is_an_html5_player_with_the_file_embedded(tmp_path: Path) -> None:
    make_mp4(tmp_path / "clips" / "clip.mp4")
    r = mnb.render(artifact(tmp_path, "clips/clip.mp4", "video/mp4", "video", "Clip"))
    assert r.primitive == "video"
    player = one(soup(r), "video[controls]")  # src on the element: kept by JupyterLab's sanitizer
    assert player.select("source") == [] and "video/mp4" in str(player["title"])
    mt, data = data_of(str(player["src"]))
    assert mt == "video/mp4"
    assert data == (tmp_path / "clips" / "clip.mp4").read_bytes()
    assert r.text.splitlines()[0].startswith("video · Clip · video/mp4 · ")


def test_video_past_the_budget_is_linked_by_relative_path(tmp_path: Path) -> None:
    make_mp4(tmp_path / "clips" / "clip.mp4")
    budget = mnb.RenderBudget(embed_bytes=100, link_base=tmp_path)
    r = mnb.render(artifact(tmp_path, "clips/clip.mp4", "video/mp4", "video"), budget=budget)
    s = soup(r)
    assert one(s, "video")["src"] == "clips/clip.mp4"
    assert s.select_one("a[download]")["download"] == "clip.mp4"  # type: ignore[index]
    assert "linked, not embedded" in r.text
    assert "data:video" not in r.html


def test_audio_is_an_html5_player(tmp_path: Path) -> None:
    make_wav(tmp_path / "tone.wav")
    r = mnb.render(artifact(tmp_path, "tone.wav", "audio/wav", "audio"))
    mt, data = data_of(str(one(soup(r), "audio[controls]")["src"]))
    assert (mt, data[:4]) == ("audio/wav", b"RIFF")


@pytest.mark.parametrize(
    "maker, name, media_type",
    [(make_png, "a.png", "image/png"), (make_jpeg, "b.jpg", "image/jpeg")],
)
def test_image_embeds_the_original_bytes(
    tmp_path: Path, maker: object, name: str, media_type: str
) -> None:
    maker(tmp_path / name)  # type: ignore[operator]
    r = mnb.render(artifact(tmp_path, name, media_type, "image", "Pic"))
    img = one(soup(r), "img")
    assert data_of(str(img["src"])) == (media_type, (tmp_path / name).read_bytes())
    assert img["alt"] == "Pic"


# --- image_grid --------------------------------------------------------------------------


def test_grid_groups_the_image_grid_images_of_one_invocation_in_order(tmp_path: Path) -> None:
    from PIL import Image

    arts = []
    (tmp_path / "notes.md").write_text("# Notes\n", encoding="utf-8")
    arts.append(artifact(tmp_path, "notes.md", "text/markdown", "markdown"))
    for i in range(5):
        make_png(tmp_path / "frames" / f"f{i}.png", size=(400, 300), seed=i)
        arts.append(artifact(tmp_path, f"frames/f{i}.png", "image/png", "image_grid", f"frame {i}"))
        if i == 2:
            make_png(tmp_path / "solo.png")
            arts.append(artifact(tmp_path, "solo.png", "image/png", "image", "solo"))
    r = mnb.render(invocation(tmp_path, arts), budget=mnb.RenderBudget(thumbnail_px=64))
    assert [p.primitive for p in r.parts] == ["markdown", "image_grid", "image"]
    grid = soup(r.parts[1])
    captions = [c.get_text() for c in grid.select("figcaption")]
    assert captions == [f"{i + 1}. frame {i}" for i in range(5)]
    for img in grid.select("figure img"):
        mt, data = data_of(str(img["src"]))
        with Image.open(io.BytesIO(data)) as thumb:
            assert mt == "image/jpeg" and max(thumb.size) <= 64
    assert r.parts[1].text.startswith("image_grid · 5 images · ")


def test_grid_from_a_json_list_of_paths_stays_inside_the_root(tmp_path: Path) -> None:
    make_png(tmp_path / "shots" / "a.png", seed=1)
    make_png(tmp_path / "shots" / "b.png", seed=2)
    (tmp_path.parent / "secret.png").write_bytes((tmp_path / "shots" / "a.png").read_bytes())
    write_json(
        tmp_path / "shots" / "grid.json",
        ["shots/a.png", {"path": "shots/b.png", "title": "B"}, "../secret.png", "shots/none.png"],
    )
    r = mnb.render(artifact(tmp_path, "shots/grid.json", "application/json", "image_grid"))
    assert r.primitive == "image_grid"
    s = soup(r)
    assert len(s.select("figure img")) == 2
    text = s.get_text()
    assert "outside the root" in text and "missing" in text
    assert "3. ../secret.png (outside the root)" in r.text


# --- timeline ----------------------------------------------------------------------------


def test_timeline_draws_lanes_bars_and_markers_in_sanitizer_safe_html(tmp_path: Path) -> None:
    events = {
        "events": [
            {"start": 0, "end": 4.5, "label": "decode", "lane": "video"},
            {"start": 1, "end": 2, "label": "vad", "lane": "audio"},
            {"start": 3, "label": "cut", "lane": "video"},
            {"start": 6, "end": 9, "label": "encode"},
        ]
    }
    write_json(tmp_path / "t.json", events)
    r = mnb.render(artifact(tmp_path, "t.json", "application/json", "timeline", "Pipeline"))
    assert r.primitive == "timeline"
    chart = one(soup(r), ".murmur-timeline")
    assert [t.get_text() for t in chart.select(".murmur-lane")] == ["video", "audio", "events"]
    bars = chart.select(".murmur-bar")
    (marker,) = chart.select(".murmur-marker")
    assert [b.get_text() for b in bars] == ["decode", "vad", "encode"]  # lane by lane
    assert marker["title"] == "cut (3s)" and marker.get_text() == "◆cut"
    assert bars[0]["title"] == "decode (0s - 4.5s)"
    # placed in percent of the plot: 0-4.5 s of 0-9 s is the first half
    assert "left:0.00%;width:50.00%" in str(bars[0]["style"])
    ticks = [t.get_text() for t in chart.select(".murmur-tick")]
    assert ticks == ["0s", "2s", "4s", "6s", "8s"]
    # nothing JupyterLab's sanitizer drops carries the layout: no svg, calc, transform, data-*
    html_text = str(chart)
    for dropped in ("<svg", "calc(", "transform", "data-"):
        assert dropped not in html_text, dropped
    assert "4 events in 3 lanes" in r.text


def test_timeline_accepts_rfc3339_and_a_bare_list(tmp_path: Path) -> None:
    write_json(
        tmp_path / "t.json",
        [
            {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T10:00:30Z", "label": "a"},
            {"start": "2026-01-01T10:00:10+00:00", "label": "b", "lane": "x"},
        ],
    )
    r = mnb.render(artifact(tmp_path, "t.json", "application/json", "timeline"))
    assert r.primitive == "timeline"
    assert "from 2026-01-01T10:00:00Z, spanning 30 s" in r.text
    assert "10:00:10" in one(soup(r), ".murmur-timeline").get_text()


def test_a_timeline_hint_on_non_events_falls_back_with_a_warning(tmp_path: Path) -> None:
    write_json(tmp_path / "t.json", {"not": "events"})
    with pytest.warns(mnb.PresentationWarning, match="could not show as timeline"):
        r = mnb.render(artifact(tmp_path, "t.json", "application/json", "timeline"))
    assert r.primitive == "json"
    assert "note: could not show as timeline" in r.text


# --- document ----------------------------------------------------------------------------


def test_document_shows_page_count_previews_and_a_download(tmp_path: Path) -> None:
    from PIL import Image

    make_pdf(tmp_path / "report.pdf", pages=3)
    budget = mnb.RenderBudget(preview_px=200, preview_pages=2)
    r = mnb.render(artifact(tmp_path, "report.pdf", "application/pdf", "document"), budget=budget)
    s = soup(r)
    assert "3 pages · showing 2 of 3 pages (RenderBudget.preview_pages)" in s.get_text()
    previews = s.select("figure img")
    assert len(previews) == 2
    for img in previews:
        mt, data = data_of(str(img["src"]))
        with Image.open(io.BytesIO(data)) as page:
            assert mt == "image/png" and page.format == "PNG" and page.size[0] == 200
    link = one(s, "a[download]")
    assert link["download"] == "report.pdf"
    assert "3 pages; preview of pages 1-2" in r.text


def test_document_without_pypdfium2_still_offers_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pdf(tmp_path / "report.pdf", pages=2)
    monkeypatch.setitem(sys.modules, "pypdfium2", None)  # makes `import pypdfium2` fail
    r = mnb.render(artifact(tmp_path, "report.pdf", "application/pdf", "document"))
    s = soup(r)
    assert one(s, "a[download]")["download"] == "report.pdf"
    assert "pip install 'murmur-nb[render]'" in s.get_text()
    assert "pypdfium2 is not installed" in r.text


# --- diagram -----------------------------------------------------------------------------

_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
    '<script>alert(1)</script><rect width="40" height="20" fill="teal"/></svg>'
)


def test_svg_diagram_is_shown_as_an_image_so_its_script_never_runs(tmp_path: Path) -> None:
    (tmp_path / "d.svg").write_text(_SVG, encoding="utf-8")
    r = mnb.render(artifact(tmp_path, "d.svg", "image/svg+xml", "diagram"))
    img = one(soup(r), "img")  # soup() also asserts no <script> reached the HTML
    assert data_of(str(img["src"])) == ("image/svg+xml", _SVG.encode())


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs the Graphviz 'dot' binary")
def test_graphviz_is_drawn_when_dot_is_available(tmp_path: Path) -> None:
    (tmp_path / "g.dot").write_text("digraph { plan -> run -> render }", encoding="utf-8")
    r = mnb.render(artifact(tmp_path, "g.dot", "text/vnd.graphviz", "diagram"))
    img = one(soup(r), "img")
    mt, svg = data_of(str(img["src"]))
    assert mt == "image/svg+xml" and b"<svg" in svg and b"render" in svg
    assert "Graphviz drawn as SVG" in r.text


@pytest.mark.parametrize(
    "name, media_type, source",
    [
        ("g.dot", "text/vnd.graphviz", "digraph { a -> b }"),
        ("m.mmd", "text/vnd.mermaid", "graph TD; A-->B"),
    ],
)
def test_diagram_source_is_shown_when_no_renderer_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, media_type: str, source: str
) -> None:
    (tmp_path / name).write_text(source, encoding="utf-8")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    r = mnb.render(artifact(tmp_path, name, media_type, "diagram"))
    s = soup(r)
    assert one(s, "details[open] pre").get_text() == source
    assert not s.select("img")
    assert "source shown (not drawn)" in r.text and "on PATH" in r.text


# --- slides ------------------------------------------------------------------------------


def test_pdf_slides_give_a_static_strip_and_a_page_list(tmp_path: Path) -> None:
    make_pdf(tmp_path / "deck.pdf", pages=4)
    r = mnb.render(artifact(tmp_path, "deck.pdf", "application/pdf", "slides"))
    assert r.primitive == "slides"
    assert len(soup(r).select("img")) == 4
    assert [sl.index for sl in r.slides] == [0, 1, 2, 3]
    assert all("<img" in sl.html for sl in r.slides)


def test_markdown_slides_split_on_rule_lines(tmp_path: Path) -> None:
    (tmp_path / "deck.md").write_text(
        "# Intro\nhello\n---\n# Middle\n - a\n - b\n  ---  \n# End\n", encoding="utf-8"
    )
    r = mnb.render(artifact(tmp_path, "deck.md", "text/markdown", "slides"))
    assert [sl.text for sl in r.slides] == ["slide 1: Intro", "slide 2: Middle", "slide 3: End"]
    assert [h.get_text() for h in soup(r).select("h1")] == ["Intro", "Middle", "End"]


def test_image_list_slides(tmp_path: Path) -> None:
    for i in range(3):
        make_png(tmp_path / f"s{i}.png", seed=i)
    write_json(tmp_path / "deck.json", ["s0.png", "s1.png", "s2.png"])
    r = mnb.render(artifact(tmp_path, "deck.json", "application/json", "slides"))
    assert len(r.slides) == 3 and len(soup(r).select("img")) == 3


# --- table -------------------------------------------------------------------------------


def test_csv_table_shows_head_tail_and_row_count_past_the_budget(tmp_path: Path) -> None:
    make_csv(tmp_path / "t.csv", rows=1000)
    r = mnb.render(
        artifact(tmp_path, "t.csv", "text/csv", "table"), budget=mnb.RenderBudget(table_rows=10)
    )
    s = soup(r)
    rows = s.select("table tbody tr")
    assert len(rows) == 11  # 5 head, the gap, 5 tail
    assert [tr.select_one("th").get_text() for tr in rows] == [
        "0",
        "1",
        "2",
        "3",
        "4",
        "…",
        "995",
        "996",
        "997",
        "998",
        "999",
    ]  # type: ignore[union-attr]
    assert "1,000 rows x 3 columns" in s.get_text()
    assert "1000 rows x 3 columns; first 5 and last 5 of 1,000 rows" in r.text


def test_small_tsv_is_shown_whole(tmp_path: Path) -> None:
    make_csv(tmp_path / "t.tsv", rows=4, sep="\t")
    r = mnb.render(artifact(tmp_path, "t.tsv", "text/tab-separated-values"))
    assert r.primitive == "table"
    assert len(soup(r).select("table tbody tr")) == 4
    assert [th.get_text() for th in soup(r).select("thead th")][1:] == ["n", "square", "name"]


def test_parquet_table_reads_only_head_and_tail_row_groups(tmp_path: Path) -> None:
    make_parquet(tmp_path / "t.parquet", rows=50_000, row_group_size=1000)
    r = mnb.render(
        artifact(tmp_path, "t.parquet", "application/vnd.apache.parquet"),
        budget=mnb.RenderBudget(table_rows=6),
    )
    rows = soup(r).select("table tbody tr")
    assert [tr.select("td")[1].get_text() for tr in rows] == [
        "r0",
        "r1",
        "r2",
        "…",
        "r49997",
        "r49998",
        "r49999",
    ]
    assert "50000 rows x 2 columns" in r.text


def test_json_records_table(tmp_path: Path) -> None:
    write_json(tmp_path / "r.json", [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
    r = mnb.render(artifact(tmp_path, "r.json", "application/json", "table"))
    assert r.primitive == "table"
    assert "2 rows x 2 columns" in r.text


# --- markdown, text, json, download ------------------------------------------------------


def test_markdown_is_converted_with_raw_html_escaped(tmp_path: Path) -> None:
    (tmp_path / "n.md").write_text(
        "# Title\n\n*em* <script>x</script> [link](javascript:alert(1))\n", encoding="utf-8"
    )
    r = mnb.render(artifact(tmp_path, "n.md", "text/markdown"))
    s = soup(r)
    assert one(s, "h1").get_text() == "Title" and one(s, "em").get_text() == "em"
    assert "<script>x</script>" in s.get_text()
    assert "javascript:" not in str(one(s, "a")["href"])


def test_text_is_truncated_past_the_budget_with_the_size_shown(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text(
        "".join(f"line {i}\n" for i in range(10_000)), encoding="utf-8"
    )
    r = mnb.render(
        artifact(tmp_path, "log.txt", "text/plain"), budget=mnb.RenderBudget(text_bytes=1000)
    )
    pre = one(soup(r), "pre").get_text()
    assert len(pre.encode()) <= 1000 and pre.startswith("line 0\n")
    assert "showing the first 1000 B of 96.6 KiB" in r.text


def test_json_is_collapsible_and_has_its_text(tmp_path: Path) -> None:
    write_json(tmp_path / "m.json", {"score": 0.5, "tags": ["a", "b"], "nested": {"k": None}})
    r = mnb.render(artifact(tmp_path, "m.json", "application/json"))
    s = soup(r)
    assert r.primitive == "json"
    assert len(s.select("details")) >= 3
    text_view = s.select("details > pre")[-1].get_text()
    assert json.loads(text_view) == {"score": 0.5, "tags": ["a", "b"], "nested": {"k": None}}
    assert "JSON object with 3 keys" in r.text


def test_download_link_names_the_file(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "bundle.zip", "w") as z:
        z.writestr("a.txt", "hello")
    r = mnb.render(artifact(tmp_path, "bundle.zip", "application/zip"))
    link = one(soup(r), "a[download]")
    assert r.primitive == "download"
    assert link["download"] == "bundle.zip" and link.get_text() == "bundle.zip"
    assert data_of(str(link["href"]))[1] == (tmp_path / "bundle.zip").read_bytes()


def test_every_primitive_is_reachable(tmp_path: Path) -> None:
    """One artifact per primitive through render(inv): the gallery of SPEC §2."""
    make_mp4(tmp_path / "v.mp4")
    make_wav(tmp_path / "a.wav")
    make_png(tmp_path / "i.png")
    make_png(tmp_path / "g1.png", seed=3)
    make_pdf(tmp_path / "d.pdf", pages=2)
    (tmp_path / "d.svg").write_text(_SVG.replace("<script>alert(1)</script>", ""), encoding="utf-8")
    write_json(tmp_path / "t.json", [{"start": 0, "end": 1, "label": "x"}])
    (tmp_path / "s.md").write_text("a\n---\nb\n", encoding="utf-8")
    make_csv(tmp_path / "c.csv", rows=3)
    (tmp_path / "m.md").write_text("# m\n", encoding="utf-8")
    (tmp_path / "x.txt").write_text("plain\n", encoding="utf-8")
    write_json(tmp_path / "j.json", {"a": 1})
    (tmp_path / "b.bin").write_bytes(os.urandom(64))
    arts = [
        artifact(tmp_path, "v.mp4", "video/mp4"),
        artifact(tmp_path, "a.wav", "audio/wav"),
        artifact(tmp_path, "i.png", "image/png"),
        artifact(tmp_path, "g1.png", "image/png", "image_grid"),
        artifact(tmp_path, "t.json", "application/json", "timeline"),
        artifact(tmp_path, "d.pdf", "application/pdf"),
        artifact(tmp_path, "d.svg", "image/svg+xml"),
        artifact(tmp_path, "s.md", "text/markdown", "slides"),
        artifact(tmp_path, "c.csv", "text/csv"),
        artifact(tmp_path, "m.md", "text/markdown"),
        artifact(tmp_path, "x.txt", "text/plain"),
        artifact(tmp_path, "j.json", "application/json"),
        artifact(tmp_path, "b.bin", "application/octet-stream"),
    ]
    r = mnb.render(invocation(tmp_path, arts))
    assert [p.primitive for p in r.parts] == list(mnb.PRIMITIVES)
    assert r.ok


def test_markdown_without_mistune_is_shown_as_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "n.md").write_text("# Title\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "mistune", None)
    r = mnb.render(artifact(tmp_path, "n.md", "text/markdown"))
    s = soup(r)
    assert r.primitive == "markdown"
    assert one(s, "pre").get_text() == "# Title\n" and not s.select("h1")
    assert "pip install 'murmur-nb[render]'" in r.text


def test_parquet_without_pyarrow_falls_back_to_a_download_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_parquet(tmp_path / "t.parquet", rows=5)
    art = artifact(tmp_path, "t.parquet", "application/vnd.apache.parquet", "table")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.warns(mnb.PresentationWarning, match="could not show as table"):
        r = mnb.render(art)
    assert r.primitive == "download"
    assert one(soup(r), "a[download]")["download"] == "t.parquet"
    assert "pip install 'murmur-nb[render]'" in r.text


def test_grid_cells_stay_aligned_around_missing_and_broken_images(tmp_path: Path) -> None:
    """Compares the last cell with the grid's own thumbnail function (internal), so the test
    knows the image embedded there is b.png's, not merely that some image is."""
    from murmur_nb._render.primitives.media import thumbnail  # private: the grid's own thumbnail

    make_png(tmp_path / "a.png", seed=1)
    make_png(tmp_path / "b.png", seed=2)
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    write_json(tmp_path / "g.json", ["a.png", "gone.png", "broken.png", "b.png"])
    r = mnb.render(artifact(tmp_path, "g.json", "application/json", "image_grid"))
    figures = soup(r).select("figure")
    assert [bool(f.select_one("img")) for f in figures] == [True, False, False, True]
    assert "missing" in figures[1].get_text()
    assert "not shown" in figures[2].get_text()
    b_thumb = base64.b64encode(thumbnail(tmp_path / "b.png", 160)[0]).decode()
    assert figures[3].select_one("img")["src"].endswith(b_thumb)  # type: ignore[index]


def test_render_file_guesses_media_types_and_refuses_what_is_not_a_file(tmp_path: Path) -> None:
    make_parquet(tmp_path / "t.parquet", rows=3)
    make_csv(tmp_path / "t.tsv", rows=2, sep="\t")
    (tmp_path / "n.md").write_text("# x\n", encoding="utf-8")
    (tmp_path / "g.gv").write_text("digraph { a }", encoding="utf-8")
    assert mnb.render_file(tmp_path / "t.parquet").primitive == "table"
    assert mnb.render_file(str(tmp_path / "t.tsv")).primitive == "table"
    assert mnb.render_file(tmp_path / "n.md").primitive == "markdown"
    assert mnb.render_file(tmp_path / "g.gv").primitive == "text"  # SPEC: other text/* -> text
    assert mnb.render_file(tmp_path / "g.gv", presentation="diagram").primitive == "diagram"
    summary = mnb.render_file(tmp_path / "n.md", media_type="text/plain").text.splitlines()[0]
    assert summary.startswith("text · n.md · text/plain · 4 B · sha256:")
    with pytest.raises(FileNotFoundError, match="is not an existing file"):
        mnb.render_file(tmp_path / "nope.png")
    with pytest.raises(FileNotFoundError):
        mnb.render_file(tmp_path)
    with pytest.raises(TypeError, match="render_file"):
        mnb.render(42)
    # a dict iterates its keys and a DataFrame its columns: each was taken for a gallery and
    # refused as "not str"
    with pytest.raises(TypeError, match="not dict; for a plain file"):
        mnb.render({"n.md": tmp_path / "n.md"})
    with pytest.raises(TypeError, match="not DataFrame; for a plain file"):
        mnb.render(pd.DataFrame({"artifact": ["n.md"]}))
    with pytest.raises(TypeError, match=r"stage\(\) takes a VerifiedArtifact .*not a PosixPath"):
        mnb.ArtifactStore(tmp_path / "store").stage(tmp_path / "n.md")  # type: ignore[arg-type]
