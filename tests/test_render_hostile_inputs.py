"""Inputs a user trial broke rendering with: each is shown (or refused at the call), never an
exception from inside a renderer.

Deeply nested JSON, a number past a float's range, a large file that is not UTF-8, lone
surrogates, arguments of the wrong type, and an invocation rendered after its host closed.
And tables a red-team review built to cost the kernel its memory: a Parquet row group of
zeros that decodes to a hundred times its file, a CSV header of 100,000 columns, cells and
JSON keys of megabytes; those tests sample the process's peak RSS while rendering.
Every file is a real file on disk; the host test runs a real demo module.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from test_hook_guard import PeakRss
from test_render_kit import artifact, invocation, make_png

import murmur_nb as mnb


def _notes(r: mnb.Rendering) -> list[str]:
    return [line.strip().removeprefix("note: ") for line in r.text.splitlines() if "note:" in line]


def _shown_text(r: mnb.Rendering) -> str:
    pre = BeautifulSoup(r.html, "html.parser").select_one("pre")
    assert pre is not None
    return pre.get_text()


# --- deep JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize("hint", [None, "table", "timeline", "json"])
def test_a_small_deeply_nested_json_is_drawn_with_its_tree_cut(
    tmp_path: Path, hint: str | None
) -> None:
    """1000 bytes of valid JSON, 500 levels deep: drawn as JSON, the tree stopping at a depth."""
    file = tmp_path / "deep.json"
    file.write_text("[" * 500 + "]" * 500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mnb.PresentationWarning)
        r = mnb.render_file(file, presentation=hint)
    assert r.primitive == "json" and r.ok
    assert "tree shows 50 levels; what is nested deeper is in the JSON text" in _notes(r)
    soup = BeautifulSoup(r.html, "html.parser")
    tree = soup.select_one("div > details")
    assert tree is not None
    assert len(tree.select("details")) == 49  # levels 1-49 below the top one, then "not drawn"
    assert "[…] 1 items, not drawn" in soup.get_text()


def test_json_nested_past_the_parser_falls_back_to_its_text(tmp_path: Path) -> None:
    file = tmp_path / "deeper.json"
    file.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.warns(mnb.PresentationWarning, match="JSON nested too deeply to parse"):
        r = mnb.render_file(file)
    assert r.primitive == "text" and r.ok
    assert _shown_text(r).startswith("[[[[")


def test_records_nested_near_the_recursion_limit_fall_back_never_raise(tmp_path: Path) -> None:
    """A table of records whose value nests close to Python's limit: the parser follows it,
    drawing it as a table does not; whichever gives up, the file is shown with a note.

    The depths sweep the limit because where each step gives up depends on the stack depth
    the test runs at; at least one lands where only the drawing recurses too deep.
    """
    limit = sys.getrecursionlimit()
    reasons = set()
    for depth in range(limit - 200, limit + 1, 4):
        file = tmp_path / f"records-{depth}.json"
        file.write_text('[{"start": 1, "x": ' + "[" * depth + "]" * depth + "}]")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", mnb.PresentationWarning)
            r = mnb.render_file(file, presentation="table")
        assert r.ok and r.primitive in {"table", "json", "text"}
        reasons |= {str(w.message) for w in caught}
    assert "could not show as table: it is nested too deeply to draw; shown as json" in reasons


def test_a_timeline_start_past_the_range_of_a_float_falls_back(tmp_path: Path) -> None:
    file = tmp_path / "events.json"
    file.write_text('[{"start": 1' + "0" * 400 + ', "label": "a"}]')  # 10**400 seconds
    with pytest.warns(mnb.PresentationWarning, match="event 0 start is not a finite number"):
        r = mnb.render_file(file, presentation="timeline")
    assert r.primitive == "json" and r.ok


def test_json_with_lone_surrogates_is_shown_with_their_escapes(tmp_path: Path) -> None:
    """JSON may spell a lone surrogate (``"\\ud800"``); no UTF-8 text can hold one."""
    file = tmp_path / "surrogates.json"
    file.write_text('["\\ud800", {"k\\udfff": 1}]')
    r = mnb.render_file(file)
    assert r.primitive == "json" and r.ok
    assert "\\ud800" in r.html and "k\\udfff" in r.html
    json.dumps(r._repr_mimebundle_(), ensure_ascii=False).encode("utf-8")  # savable


# --- text that is not UTF-8 -----------------------------------------------------------------


@pytest.mark.parametrize("repeat", [10, 10_000], ids=["small", "past-text-bytes"])
def test_a_latin1_file_keeps_its_text_and_says_it_is_not_utf8(tmp_path: Path, repeat: int) -> None:
    """Under and over ``text_bytes`` alike, each invalid byte is U+FFFD and the card says so."""
    file = tmp_path / "latin1.txt"
    file.write_bytes("café naïve\n".encode("latin-1") * repeat)
    r = mnb.render_file(file)
    assert _shown_text(r).splitlines()[0] == "caf\ufffd na\ufffdve"
    assert "not valid UTF-8: each invalid byte is shown as U+FFFD (\ufffd)" in _notes(r)
    assert ("truncated" in r.text) == (repeat > 10)


def test_a_utf8_file_cut_inside_a_character_loses_only_that_character(tmp_path: Path) -> None:
    file = tmp_path / "accents.md"
    file.write_text("é" * 100, encoding="utf-8")  # 200 bytes; cut after 101: half an "é"
    r = mnb.render_file(file, "text/plain", budget=mnb.RenderBudget(text_bytes=101))
    assert _shown_text(r) == "é" * 50
    assert not any("UTF-8" in note for note in _notes(r))


def test_a_json_text_cut_inside_a_character_loses_only_that_character(tmp_path: Path) -> None:
    file = tmp_path / "accents.json"
    file.write_text(json.dumps(["é" * 100], ensure_ascii=False), encoding="utf-8")
    r = mnb.render_file(file, budget=mnb.RenderBudget(text_bytes=12))  # '[\n  "' + 3.5 x é
    pre = BeautifulSoup(r.html, "html.parser").select("pre")[-1].get_text()
    assert pre == '[\n  "ééé\n…'


# --- arguments of the wrong type ------------------------------------------------------------


def _data_json(tmp_path: Path) -> Path:
    file = tmp_path / "data.json"
    file.write_text('{"a": 1}')
    return file


CALLS: dict[str, tuple[Callable[[Path], object], type[Exception], str]] = {
    "media_type int": (
        lambda f: mnb.render_file(f, 5),  # type: ignore[arg-type]
        TypeError,
        "render_file() takes media_type as a str such as 'text/csv' (or None to guess it "
        "from the name), not int 5",
    ),
    "presentation int": (
        lambda f: mnb.render_file(f, None, 5),  # type: ignore[arg-type]
        TypeError,
        "render_file() takes presentation as a str such as 'table' (or None to let the media "
        "type decide), not int 5",
    ),
    "budget dict": (
        lambda f: mnb.render_file(f, budget={"embed_bytes": 1}),  # type: ignore[arg-type]
        TypeError,
        "render_file() takes budget as a RenderBudget (or None for the defaults), not dict; "
        "for a dict of limits pass RenderBudget(**limits)",
    ),
    "render budget int": (
        lambda f: mnb.render([], budget=5),  # type: ignore[arg-type]
        TypeError,
        "render() takes budget as a RenderBudget (or None for the defaults), not int",
    ),
    "resolve None None": (
        lambda f: mnb.resolve_presentation(None, None),  # type: ignore[arg-type]
        TypeError,
        "resolve_presentation() takes media_type as a str such as 'image/png' ('' when it is "
        "unknown), not NoneType None",
    ),
    "resolve hint int": (
        lambda f: mnb.resolve_presentation(3, "image/png"),  # type: ignore[arg-type]
        TypeError,
        "resolve_presentation() takes presentation as a str such as 'table'",
    ),
    "embed_bytes str": (
        lambda f: mnb.RenderBudget(embed_bytes="4MB"),  # type: ignore[arg-type]
        TypeError,
        "RenderBudget.embed_bytes must be an int (a number of bytes, such as the default "
        "4_194_304), got str '4MB'",
    ),
    "text_bytes float": (
        lambda f: mnb.RenderBudget(text_bytes=10.5),  # type: ignore[arg-type]
        TypeError,
        "RenderBudget.text_bytes must be an int (a number of bytes, such as the default "
        "65_536), got float 10.5",
    ),
    "table_rows bool": (
        lambda f: mnb.RenderBudget(table_rows=True),
        TypeError,
        "RenderBudget.table_rows must be an int (a whole number, such as the default 20), "
        "got bool True",
    ),
    "embed_bytes negative": (
        lambda f: mnb.RenderBudget(embed_bytes=-1),
        ValueError,
        "RenderBudget.embed_bytes must not be negative, got -1",
    ),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_a_wrong_argument_is_refused_at_the_call_saying_what_to_pass(
    tmp_path: Path, case: str
) -> None:
    call, error, message = CALLS[case]
    with pytest.raises(error, match=re.escape(message)):
        call(_data_json(tmp_path))


# --- rendered after the host closed ---------------------------------------------------------


def test_an_invocation_rendered_after_its_folders_went_says_to_render_while_open(
    tmp_path: Path,
) -> None:
    """Closing a host removes its calls' folders (here removed as it does): the card names
    that cause, not only "re-run"."""
    root = tmp_path / "run-1" / "out"
    root.mkdir(parents=True)
    make_png(root / "a.png")
    inv = invocation(root, [artifact(root, "a.png", "image/png")])
    shutil.rmtree(tmp_path / "run-1")
    r = mnb.render(inv)
    card = r.parts[0]
    assert card.error_code == "missing_file"
    assert (
        "artifact 'a.png' (a.png): the folder of root 'out' no longer exists. A ModuleHost "
        "removes its calls' folders when it closes: render while it is open (inside its `with` "
        "block), or re-run the invocation." in card.text
    )
    assert str(tmp_path) not in r.text
    r_file = mnb.render(inv.artifacts[0].model_copy(update={"path": "elsewhere/a.png"}))
    assert "the folder it was written to no longer exists" in r_file.text


def test_the_render_docstring_example_renders_the_artifacts(tmp_path: Path) -> None:
    """``mnb.render``'s example, run against the demo: inside the block every artifact shows;
    after it, each card says why not."""
    home = mnb.prepare_demo_home(tmp_path / "demo", hooks=False)
    with home.host() as host:
        runs = [host.invoke("gallery.thumbs", {"count": 4}), host.invoke("docs.report")]
        inside = mnb.render(runs)
    assert inside.ok
    assert {p.error_code for inv in inside.parts for p in inv.parts} == {None}
    after = mnb.render(runs)
    assert not after.ok
    assert "render while it is open (inside its `with` block)" in after.text
    example = mnb.render.__doc__ or ""
    assert "        display(mnb.render(runs))" in example  # indented: inside the block


# --- table bombs ----------------------------------------------------------------------------

MIB = 1 << 20


def _measured(file: Path, media_type: str) -> tuple[mnb.Rendering, int, float]:
    """``file`` rendered as a table; how much the peak RSS grew, and the seconds it took."""
    started = time.perf_counter()
    with PeakRss() as rss:
        r = mnb.render_file(file, media_type, "table")
    return r, rss.peak - rss.baseline, time.perf_counter() - started


def _parquet_of_zeros(path: Path, rows: int, columns: int) -> Path:
    """One row group of ``rows`` x ``columns`` int64 zeros: a few KB on disk (run-length
    encoded), ``rows * columns * 8`` bytes decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.chunked_array([pa.array([0] * 1_000_000, type=pa.int64())] * (rows // 1_000_000))
    table = pa.table({f"c{i}": column for i in range(columns)})
    pq.write_table(table, path, row_group_size=rows, compression="zstd")
    return path


def test_a_parquet_row_group_that_decodes_past_the_budget_is_not_read_through(
    tmp_path: Path,
) -> None:
    """A 69 KiB file whose one row group decodes to 122 MiB: the head is read in one batch,
    the tail is not decoded (it would read the whole row group), and a note says why."""
    file = _parquet_of_zeros(tmp_path / "bomb.parquet", rows=4_000_000, columns=4)
    r, grew, elapsed = _measured(file, "application/vnd.apache.parquet")
    assert grew < 64 * MIB  # 290 MiB before: the row group decoded twice
    assert elapsed < 1.5  # 3 s before; 0.02 s measured
    assert r.primitive == "table" and r.ok
    assert "4000000 rows x 4 columns; first 20 of 4,000,000 rows" in r.text
    assert len(BeautifulSoup(r.html, "html.parser").select("table tbody tr")) == 20
    assert _notes(r) == [
        "the last rows are not shown: reading them decodes up to 122.1 MiB of the row groups "
        "holding them, over the 32.0 MiB parse budget (RenderBudget.parse_bytes); render it "
        "with a larger RenderBudget(parse_bytes=...), or write the file with smaller row groups"
    ]


def test_a_csv_header_of_100_000_columns_builds_only_the_columns_shown(tmp_path: Path) -> None:
    file = tmp_path / "wide.csv"
    names = [f"c{i}" for i in range(100_000)]
    file.write_text(",".join(names) + "\n" + ",".join("1" for _ in names) + "\n")
    r, grew, elapsed = _measured(file, "text/csv")
    assert grew < 96 * MIB
    assert elapsed < 1.0  # 2.6 s before; 0.08 s measured
    assert r.primitive == "table" and r.ok
    assert "1 rows x 100000 columns; all 1 rows, first 50 columns" in r.text
    heads = [th.get_text() for th in BeautifulSoup(r.html, "html.parser").select("thead th")]
    assert heads[1:] == names[:50]


def test_a_csv_header_past_a_mebibyte_is_shown_as_text(tmp_path: Path) -> None:
    """400,000 columns in a 3.7 MiB header took 784 MiB and 10 s of CPU as a DataFrame."""
    file = tmp_path / "wide.csv"
    file.write_text(",".join(f"c{i}" for i in range(400_000)) + "\n1\n")
    with pytest.warns(mnb.PresentationWarning, match="header line is longer"):
        r, grew, elapsed = _measured(file, "text/csv")
    assert grew < 64 * MIB
    assert elapsed < 2.0  # 0.1 s measured
    assert r.primitive == "text" and r.ok
    assert _shown_text(r).startswith("c0,c1,c2")


def test_a_csv_past_the_parse_budget_shows_its_first_rows_and_says_why(tmp_path: Path) -> None:
    file = tmp_path / "long.csv"
    file.write_text("n,name\n" + "".join(f"{i},row-{i}\n" for i in range(300_000)))
    r = mnb.render_file(file, "text/csv", "table", budget=mnb.RenderBudget(parse_bytes=MIB))
    assert r.primitive == "table" and r.ok
    cells = BeautifulSoup(r.html, "html.parser").select("table tbody tr td:nth-of-type(2)")
    assert [td.get_text() for td in cells] == [f"row-{i}" for i in range(20)]
    assert "first 20 of at least" in r.text
    assert _notes(r) == [
        "only the first 1.0 MiB of this 4.9 MiB file were read (RenderBudget.parse_bytes): "
        "its first 20 rows are shown, not its last; render it with a larger "
        "RenderBudget(parse_bytes=...) to count and show them"
    ]


def test_long_csv_cells_are_cut_before_they_are_escaped(tmp_path: Path) -> None:
    """Four rows of 2 MiB quotes made 8 MiB of HTML (each ' escaped to &#x27;)."""
    file = tmp_path / "cells.csv"
    file.write_text("a,b\n" + ("'" * (2 * MIB) + ",x\n") * 4)
    r = mnb.render_file(file, "text/csv", "table")
    assert r.primitive == "table" and r.ok
    assert len(r.html) < 64 * 1024
    cells = BeautifulSoup(r.html, "html.parser").select("table tbody tr td:nth-of-type(1)")
    assert [td.get_text() for td in cells] == ["'" * 200 + "…"] * 4


def test_json_keys_of_megabytes_of_quotes_are_cut_before_they_are_escaped(
    tmp_path: Path,
) -> None:
    """Eight keys of 512 KiB of ``'``: values were cut to 200 characters but keys were
    escaped whole into the tree (an 8 MiB file took 205 MiB before the total refused it)."""
    file = tmp_path / "k.json"
    file.write_text(json.dumps({"'" * (512 * 1024) + str(i): i for i in range(8)}))
    with PeakRss() as rss:
        r = mnb.render_file(file, "application/json", "json")
    assert rss.peak - rss.baseline < 48 * MIB  # 133 MiB before
    assert r.primitive == "json" and r.ok
    tree = BeautifulSoup(r.html, "html.parser").select_one("div > details")
    assert tree is not None
    keys = [div.get_text() for div in tree.select("div > div")]
    assert keys == ["'" * 200 + f"…: {i}" for i in range(8)]
