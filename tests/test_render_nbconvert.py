"""Rendered output is stable and survives a real kernel, a saved notebook and nbconvert."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbclient import NotebookClient
from test_render_kit import (
    artifact,
    invocation,
    make_csv,
    make_mp4,
    make_pdf,
    make_png,
    make_wav,
    write_json,
)

import murmur_nb as mnb


def _tree(root: Path) -> None:
    make_mp4(root / "media" / "clip.mp4")
    make_wav(root / "media" / "tone.wav")
    for i in range(3):
        make_png(root / "frames" / f"f{i}.png", seed=i)
    write_json(root / "frames.json", [f"frames/f{i}.png" for i in range(3)])
    make_pdf(root / "report.pdf", pages=3)
    write_json(
        root / "events.json",
        {"events": [{"start": 0, "end": 2, "label": "a", "lane": "x"}, {"start": 3, "label": "b"}]},
    )
    make_csv(root / "orders.csv", rows=200)
    write_json(root / "data.json", {"k": [1, 2, {"deep": True}]})
    (root / "deck.md").write_text("# One\n---\n# Two\n", encoding="utf-8")
    (root / "bundle.bin").write_bytes(bytes(range(256)))


def _invocation(root: Path) -> mnb.Invocation:
    return invocation(
        root,
        [
            artifact(root, "media/clip.mp4", "video/mp4", "video", "Clip"),
            artifact(root, "media/tone.wav", "audio/wav", "audio"),
            *(artifact(root, f"frames/f{i}.png", "image/png", "image_grid") for i in range(3)),
            artifact(root, "report.pdf", "application/pdf", "document"),
            artifact(root, "events.json", "application/json", "timeline"),
            artifact(root, "orders.csv", "text/csv", "table"),
            artifact(root, "data.json", "application/json", "json"),
            artifact(root, "deck.md", "text/markdown", "slides"),
            artifact(root, "bundle.bin", "application/octet-stream", "download"),
        ],
    )


def test_same_artifacts_render_identically_anywhere_and_twice(tmp_path: Path) -> None:
    first, second = tmp_path / "run-a", tmp_path / "run-b"
    _tree(first)
    shutil.copytree(first, second)
    budget_a = mnb.RenderBudget(link_base=first, embed_bytes=2048)
    budget_b = mnb.RenderBudget(link_base=second, embed_bytes=2048)
    a1 = mnb.render(_invocation(first), budget=budget_a)
    a2 = mnb.render(_invocation(first), budget=budget_a)
    b = mnb.render(_invocation(second), budget=budget_b)
    assert a1.text == a2.text == b.text
    assert a1.html == a2.html == b.html
    assert str(tmp_path) not in a1.text and str(tmp_path) not in a1.html
    assert not re.search(r"0x[0-9a-f]{6,}", a1.text)
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", a1.text)
    # the primitive, title, media type, size and short digest head each artifact's summary
    clip = a1.parts[0].text.splitlines()[0]
    assert re.fullmatch(r"video · Clip · video/mp4 · [\d.]+ KiB · sha256:[0-9a-f]{12}", clip)


_NOTEBOOK_CELLS = [
    "import murmur_nb as mnb",
    "mnb.render_file('media/clip.mp4')",
    "mnb.render_file('media/clip.mp4')",
    "mnb.render_file('media/clip.mp4', budget=mnb.RenderBudget(embed_bytes=10))",
    "mnb.render_file('media/tone.wav')",
    "mnb.render_file('frames.json', presentation='image_grid')",
    "mnb.render_file('report.pdf')",
    "mnb.render_file('events.json', presentation='timeline')",
    "mnb.render_file('orders.csv')",
    "mnb.render_file('data.json')",
    "mnb.render_file('deck.md', presentation='slides')",
    "mnb.render_file('bundle.bin')",
]


@pytest.mark.slow
def test_a_rendered_notebook_survives_nbconvert_to_html(tmp_path: Path) -> None:
    _tree(tmp_path)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in _NOTEBOOK_CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [cell.outputs for cell in nb.cells]
    assert all(o[0]["output_type"] == "execute_result" for o in outputs[1:])
    assert outputs[1][0]["data"]["text/plain"] == outputs[2][0]["data"]["text/plain"]
    assert outputs[1][0]["data"]["text/html"] == outputs[2][0]["data"]["text/html"]
    path = tmp_path / "rendered.ipynb"
    nbformat.write(nb, path)

    subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", str(path)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    page = BeautifulSoup((tmp_path / "rendered.html").read_text(encoding="utf-8"), "html.parser")
    cards = page.select("div.murmur-artifact")
    assert [c["data-primitive"] for c in cards] == [
        "video",
        "video",
        "video",
        "audio",
        "image_grid",
        "document",
        "timeline",
        "table",
        "json",
        "slides",
        "download",
    ]
    video_srcs = [s["src"] for s in page.select("video")]
    assert video_srcs[0].startswith("data:video/mp4;base64,")
    assert video_srcs[2] == "media/clip.mp4"
    assert page.select_one("audio")["src"].startswith("data:audio/wav;base64,")  # type: ignore[index]
    grid, document, timeline, table, json_card, slides, download = cards[4:]
    assert len(grid.select("figure img[src^='data:image/jpeg;base64,']")) == 3
    assert len(document.select("img[src^='data:image/png;base64,']")) == 2
    assert "3 pages" in document.get_text()
    assert timeline.select_one(".murmur-timeline .murmur-bar") is not None
    assert len(table.select("table tbody tr")) == 21
    assert json_card.select_one("details summary") is not None
    assert [h.get_text() for h in slides.select("h1")] == ["One", "Two"]
    assert download.select_one("a[download='bundle.bin']") is not None
