"""Conversation records as DataFrames, built by walking the paginated API: columns, dtypes,
snapshot semantics, progress bars and the Dask engine."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import murmur_nb as mnb


def write_sample(home: Path, context_id: str = "ctx") -> None:
    with mnb.RecordWriter(home, context_id, stamp=False) as writer:
        writer.append("system", "be brief", id="s0")
        writer.append("user", "list files", id="u1", created_at="2026-01-02T03:04:05Z")
        writer.append_raw(b"not json\n")
        writer.append(
            "assistant",
            "calling ls",
            id="a2",
            name="planner",
            created_at="2026-01-02T05:04:05.250+02:00",
        )
        # a time the runtime would never write (append refuses it): as a line of its own
        line = writer.encode("tool", {"files": ["a.txt", "b.txt"], "count": 2}, id="t3",
                             tool_call_id="call-1", is_error=False)  # fmt: skip
        writer.append_raw(line.replace(b'"t3",', b'"t3","created_at":"not a time",'))
        writer.append("tool", "boom", id="t4", is_error=True)
        writer.append_raw(b'{"id":"t5","role":"tool","content":null,"tool_call_id":9}\n')
        writer.append_raw(b'{"id":"p6","role":"user","content":"still being written"')


def test_frame_columns_dtypes_and_order(tmp_path: Path) -> None:
    write_sample(tmp_path)
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    assert list(frame.columns) == [
        "position",
        "id",
        "role",
        "content",
        "name",
        "created_at",
        "tool_call_id",
        "is_error",
        "body",
    ]
    assert frame["position"].dtype == np.int64
    assert frame["id"].dtype == pd.StringDtype()
    assert isinstance(frame["role"].dtype, pd.CategoricalDtype)
    assert frame["content"].dtype == pd.StringDtype()
    assert frame["name"].dtype == pd.StringDtype()
    assert isinstance(frame["created_at"].dtype, pd.DatetimeTZDtype)
    assert str(frame["created_at"].dt.tz) == "UTC"
    assert frame["tool_call_id"].dtype == pd.StringDtype()
    assert frame["is_error"].dtype == pd.BooleanDtype()
    assert frame["body"].dtype == object

    assert frame["position"].tolist() == [0, 1, 2, 3, 4, 5]
    assert frame["id"].tolist() == ["s0", "u1", "a2", "t3", "t4", "t5"]  # oldest first
    assert sorted(frame["role"].cat.categories) == ["assistant", "system", "tool", "user"]
    assert frame["role"].tolist() == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert frame["name"].isna().tolist() == [True, True, False, True, True, True]
    assert frame.loc[2, "name"] == "planner"
    stamps = frame["created_at"]
    assert stamps[1] == pd.Timestamp("2026-01-02T03:04:05Z")
    assert stamps[2] == pd.Timestamp("2026-01-02T03:04:05.250Z")
    assert stamps.isna().tolist() == [True, False, False, True, True, True]  # absent or bad: NaT

    tools = frame[frame["role"] == "tool"]
    assert tools["tool_call_id"].tolist() == ["call-1", pd.NA, pd.NA]
    assert tools["is_error"].tolist() == [False, True, pd.NA]
    assert tools["body"].tolist() == [{"files": ["a.txt", "b.txt"], "count": 2}, "boom", None]
    assert frame.loc[:2, "tool_call_id"].isna().all()
    assert frame.loc[:2, "is_error"].isna().all()
    assert frame.loc[:2, "body"].tolist() == [None, None, None]
    assert json.loads(frame.loc[3, "content"]) == {
        "__murmur_tool_msg__": True,
        "tool_call_id": "call-1",
        "is_error": False,
        "body": {"files": ["a.txt", "b.txt"], "count": 2},
    }


def test_frame_rows_equal_the_pages_of_read_messages(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        for k in range(1234):
            if k % 3 == 2:
                writer.append(
                    "tool", {"k": k, "ok": [True, None]}, id=f"m{k}", tool_call_id=f"c{k}"
                )
            else:
                writer.append("user" if k % 3 else "assistant", f"text {k} \u00e9", id=f"m{k}")
            if k % 100 == 7:
                writer.append_raw(b"{broken\n")
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    messages: list[mnb.Message] = []
    cursor: str | None = None
    while True:
        page = reader.read_messages(cursor, 100)
        messages.extend(page.messages)
        cursor = page.next_cursor
        if cursor is None:
            break
    messages.reverse()
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    assert len(frame) == len(messages) == 1234
    for column in ("id", "role", "content", "name", "created_at"):
        values = frame[column].astype(object).where(frame[column].notna(), None).tolist()
        if column == "created_at":
            values = [None if v is None else v.isoformat() for v in values]
            expected: list[Any] = [
                None if m.created_at is None else pd.Timestamp(m.created_at).isoformat()
                for m in messages
            ]
        else:
            expected = [getattr(m, column) for m in messages]
        assert values == expected, column


def test_warm_store_walk_decodes_pages_from_the_file(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        for k in range(450):
            writer.append("user", f"m{k}", id=f"m{k}")
    store = mnb.ConversationStore(tmp_path)
    cold = mnb.read_conversation("ctx", store, progress=False)
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("user", "new", id="m450")
    warm = mnb.read_conversation("ctx", store, progress=False)  # index reused, tail scanned
    assert cold["id"].tolist() == [f"m{k}" for k in range(450)]
    assert warm["id"].tolist() == [f"m{k}" for k in range(451)]
    pd.testing.assert_frame_equal(warm.iloc[:450], cold)


def test_missing_record_is_an_empty_frame_with_the_columns(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="has no record of context 'nothing'"):
        frame = mnb.read_conversation("nothing", tmp_path, progress=False)
    assert frame.empty
    reference = mnb.read_conversation("ctx", _sample_home(tmp_path), progress=False)
    assert frame.dtypes.astype(str).tolist() == reference.dtypes.astype(str).tolist()


def _sample_home(tmp_path: Path) -> Path:
    home = tmp_path / "sample"
    write_sample(home)
    return home


def test_a_file_given_as_the_home_is_refused(tmp_path: Path) -> None:
    """A record's own path passed as the home listed no record and read nothing, silently
    (``ModuleHost`` refuses a file for its home the same way)."""
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        writer.append("user", "one")
    record = tmp_path / "conversations" / "ctx.jsonl"
    with pytest.raises(ValueError, match=r"is a file, not a murmur home: pass the folder"):
        mnb.ConversationStore(record)
    with pytest.raises(ValueError, match="is a file"):
        mnb.read_conversations(record)
    assert mnb.ConversationStore(tmp_path / "not yet").contexts() == []  # made later: fine


def test_lines_that_are_not_messages_are_counted_in_attrs(tmp_path: Path) -> None:
    """SPEC §3 leaves such lines out of the record; the frame says how many there were, so
    a record with unreadable lines does not pass for a clean one. Blank lines and the last
    line while it has no newline are not counted."""
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        writer.append("user", "one")
        writer.append("assistant", "two")
    path = tmp_path / "conversations" / "ctx.jsonl"
    with path.open("a") as record:
        record.write('{not json}\n\n{"id": "x", "role": "user", "content": 5}\n')
        record.write('{"id": "y", "role": "user", "content": "still being writ')
    store = mnb.ConversationStore(tmp_path)
    frame = mnb.read_conversation("ctx", store, progress=False)
    assert list(frame["content"]) == ["one", "two"]
    assert frame.attrs["skipped_lines"] == 2
    again = mnb.read_conversation("ctx", store, progress=False)  # the store's index is warm
    assert again.attrs["skipped_lines"] == 2
    with path.open("a") as record:
        record.write('ten"}\n[1, 2]\n')
    grown = mnb.read_conversation("ctx", store, progress=False)
    assert list(grown["content"]) == ["one", "two", "still being written"]
    assert grown.attrs["skipped_lines"] == 3
    with pytest.warns(UserWarning, match="has no record of context 'none'"):
        assert mnb.read_conversation("none", store, progress=False).attrs["skipped_lines"] == 0


def test_the_home_given_first_is_refused_with_the_call_to_write(tmp_path: Path) -> None:
    """``RecordWriter(home, context_id)`` and ``read_conversation(context_id, home)`` take
    their two arguments in opposite orders: swapped, the message shows the right call (it
    said only that a path is not a context id)."""
    home = _sample_home(tmp_path)
    for given, shown in ((home, repr(str(home))), (str(home), repr(str(home))),
                         (mnb.ConversationStore(home), "store")):  # fmt: skip
        with pytest.raises(mnb.InvalidContextId) as err:
            mnb.read_conversation(given, "ctx", progress=False)  # type: ignore[arg-type]
        assert f"read_conversation('ctx', {shown})" in str(err.value)
    assert len(mnb.read_conversation("ctx", home, progress=False)) > 0
    with pytest.raises(mnb.InvalidContextId, match="never a path"):  # nothing to swap with
        mnb.read_conversation(str(home), progress=False)


def test_unreadable_record_raises(tmp_path: Path) -> None:
    (tmp_path / "conversations" / "ctx.jsonl").mkdir(parents=True)
    with pytest.raises(mnb.ConversationReadError, match=r"^unavailable: "):
        mnb.read_conversation("ctx", tmp_path)


def write_big(home: Path, context_id: str, size: int) -> None:
    with mnb.RecordWriter(home, context_id, buffered=True, stamp=False) as writer:
        k = 0
        while writer.path.stat().st_size < size:
            for _ in range(500):
                writer.append("user", "x" * 200, id=f"m{k}")
                k += 1
            writer.flush()


def test_progress_bar_for_long_walks_and_off_switch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_big(tmp_path, "big", 2 << 20)
    write_sample(tmp_path, "small")
    capsys.readouterr()
    mnb.read_conversation("big", tmp_path)
    err = capsys.readouterr().err
    assert "reading big" in err
    size = (tmp_path / "conversations" / "big.jsonl").stat().st_size
    assert f"/{size / 1024**2:.2f}M" in err  # the bar counts the record's bytes
    mnb.read_conversation("big", tmp_path, progress=False)
    mnb.read_conversation("small", tmp_path)
    assert capsys.readouterr().err == ""


def test_read_conversations_pandas_concatenates_with_context_id(tmp_path: Path) -> None:
    write_sample(tmp_path, "b")
    with mnb.RecordWriter(tmp_path, "a", stamp=False) as writer:
        writer.append("user", "only one", id="x")
    frame = mnb.read_conversations(tmp_path, engine="pandas", progress=False)
    assert frame.columns[0] == "context_id"
    assert frame["context_id"].tolist() == ["a"] + ["b"] * 6
    assert frame["id"].tolist() == ["x", "s0", "u1", "a2", "t3", "t4", "t5"]
    assert frame["position"].tolist() == [0, 0, 1, 2, 3, 4, 5]
    assert isinstance(frame["role"].dtype, pd.CategoricalDtype)
    assert list(frame["role"].cat.categories) == ["assistant", "system", "tool", "user"]
    assert frame["context_id"].dtype == pd.StringDtype()
    assert frame.index.tolist() == list(range(7))
    (tmp_path / "none").mkdir()  # a home with no record (a missing one is warned about)
    empty = mnb.read_conversations(tmp_path / "none", engine="pandas")
    assert empty.empty
    assert list(empty.columns) == list(frame.columns)
    with pytest.raises(ValueError, match="engine"):
        mnb.read_conversations(tmp_path, engine="polars")  # type: ignore[arg-type]


def test_read_conversations_dask_has_one_partition_per_record(tmp_path: Path) -> None:
    import dask.dataframe as dd  # the test extra installs dask: never skipped

    write_sample(tmp_path, "b")
    write_sample(tmp_path, "c")
    with mnb.RecordWriter(tmp_path, "a", stamp=False) as writer:
        writer.append("user", "only one", id="x")
    lazy = mnb.read_conversations(tmp_path, engine="dask")
    assert isinstance(lazy, dd.DataFrame)
    assert lazy.npartitions == 3
    assert list(lazy.columns) == ["context_id", *mnb.read_conversation("a", tmp_path).columns]
    computed = lazy.compute(scheduler="synchronous")
    expected = mnb.read_conversations(tmp_path, engine="pandas", progress=False)
    assert computed["context_id"].tolist() == expected["context_id"].tolist()
    assert computed["id"].tolist() == expected["id"].tolist()
    assert computed["content"].tolist() == expected["content"].tolist()
    assert computed["created_at"].tolist() == expected["created_at"].tolist()
    assert len(lazy.partitions[1].compute(scheduler="threads")) == 6
    (tmp_path / "none").mkdir()  # a home with no record (a missing one is warned about)
    empty = mnb.read_conversations(tmp_path / "none", engine="dask")
    assert len(empty.compute(scheduler="synchronous")) == 0


def test_dask_missing_gives_a_clear_message(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["dask"] = None  # as if the dask extra were not installed
        sys.modules["dask.dataframe"] = None
        import murmur_nb as mnb
        try:
            mnb.read_conversations({str(tmp_path)!r}, engine="dask")
        except mnb.MissingDependency as err:
            print(err.code, "|", err)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("missing_dependency | ")
    assert "pip install 'murmur-nb[dask]'" in out.stdout


def test_import_murmur_nb_does_not_load_pandas_or_numpy_for_conversations() -> None:
    code = (
        "import sys, murmur_nb as mnb; "
        "mnb.ConversationStore; mnb.RecordWriter; "
        "print(','.join(m for m in ('pandas', 'numpy', 'tqdm', 'dask') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pandas" not in out.stdout
    assert "dask" not in out.stdout


def test_record_rewritten_under_a_walk_is_record_changed(tmp_path: Path) -> None:
    """Drives the internal walk directly: its progress callback is the only hook that can
    truncate the record between two pages of one walk."""
    from murmur_nb._conversations.index import RecordChanged  # private: what the walk raises
    from murmur_nb._conversations.store import walk_record  # private: truncates between two pages

    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        for k in range(1000):
            writer.append("user", f"m{k}", id=f"m{k}")
    store = mnb.ConversationStore(tmp_path)
    reader = store.reader("ctx")
    reader.read_messages(None, 1)  # warm index: the walk decodes its pages from the file
    path = store.record_path("ctx")
    truncated: list[int] = []

    def truncate_after_first_page(nbytes: int) -> None:
        if not truncated:
            truncated.append(nbytes)
            with path.open("r+b") as handle:
                handle.truncate(path.stat().st_size // 2)

    with pytest.raises(RecordChanged):  # read_conversation walks again from the newest page
        walk_record(reader, truncate_after_first_page)
    assert truncated
    assert len(mnb.read_conversation("ctx", store, progress=False)) < 1000


def test_line_edited_in_place_under_a_warm_walk_is_read_again(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        for k in range(300):
            writer.append("user", f"m{k}", id=f"m{k}")
    store = mnb.ConversationStore(tmp_path)
    store.reader("ctx").read_messages(None, 1)
    path = store.record_path("ctx")
    data = path.read_bytes()
    at = data.index(b'"id":"m100"')
    with path.open("r+b") as handle:
        handle.write(data[:at] + data[at:].replace(b'"role"', b'"rolf"', 1))
    # the walk finds the record rewritten under its warm index and starts again, re-indexed
    frame = mnb.read_conversation("ctx", store, progress=False)
    assert len(frame) == 299
    assert "m100" not in set(frame["id"])


def test_dask_frame_gives_back_the_tool_bodies_and_dtypes_of_pandas(tmp_path: Path) -> None:
    """Dask's ``dataframe.convert-string`` (on by default) turned the object ``body`` column
    into repr strings (``"{'rows': [1, 2]}"``, ``'42'``); the Dask frame holds the decoded
    tool results, and every column has the pandas engine's dtype (in the meta too: the
    roles are known, from one scan of each record's index when the frame is made)."""
    with mnb.RecordWriter(tmp_path, "a", stamp=False) as writer:
        writer.append("user", "u", id="1", name="ann")
        writer.append("tool", {"rows": [1, 2]}, id="2", tool_call_id="c1", is_error=True)
        writer.append("tool", 42, id="3")
    with mnb.RecordWriter(tmp_path, "b", stamp=False) as writer:
        writer.append("tool", [None, "x"], id="4", created_at="2026-01-02T03:04:05Z")
    expected = mnb.read_conversations(tmp_path, progress=False)
    lazy = mnb.read_conversations(tmp_path, engine="dask")
    computed = lazy.compute(scheduler="synchronous")
    assert expected["body"].tolist() == [None, {"rows": [1, 2]}, 42, [None, "x"]]
    assert computed["body"].tolist() == expected["body"].tolist()
    assert lazy._meta["body"].dtype == object  # private: the meta is what Dask plans with
    assert dict(computed.dtypes) == dict(expected.dtypes)
    assert dict(lazy.dtypes) == dict(expected.dtypes)
    # the roles are known before any partition is read (they were once claimed to be none)
    assert lazy["role"].cat.known
    known = lazy["role"].cat.categories
    assert list(known) == list(expected["role"].cat.categories) == ["tool", "user"]
    tools = lazy[lazy["role"] == "tool"]["body"]
    rows = tools.apply(lambda body: body.get("rows") if isinstance(body, dict) else None,
                       meta=("body", object))  # fmt: skip
    assert rows.compute(scheduler="synchronous").tolist() == [[1, 2], None, None]
    (tmp_path / "none").mkdir()  # a home with no record (a missing one is warned about)
    empty = mnb.read_conversations(tmp_path / "none", engine="dask")
    assert empty._meta["body"].dtype == object  # private: as above


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_blank_and_whitespace_lines_are_not_counted(tmp_path: Path, ending: bytes) -> None:
    """SPEC §3 skips blank lines silently: a CRLF record's empty line (``\\r``) and lines of
    spaces and tabs are blank too, whether the index was built by a walk or by a reader."""
    lines = [
        b'{"id":"1","role":"user","content":"a"}',
        b"",
        b"   ",
        b"\t \t",
        b"not json",
        b'{"id":"2","role":"user","content":"b"}',
        b"\r",
        b"[1]",
    ]
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        writer.append_raw(b"".join(line + ending for line in lines))
        writer.append_raw(b"   ")  # a last line without its newline: not counted either
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    assert frame["id"].tolist() == ["1", "2"]
    assert frame.attrs["skipped_lines"] == 2
    store = mnb.ConversationStore(tmp_path)
    assert store.reader("ctx").read_messages().total == 2  # indexed without a walk first
    assert mnb.read_conversation("ctx", store, progress=False).attrs["skipped_lines"] == 2


def test_the_frame_without_body_round_trips_through_parquet(tmp_path: Path) -> None:
    """What the docstring says to do for Parquet works: ``to_parquet`` of the whole frame
    fails on ``body`` (any JSON value per row), the frame without it keeps every column's
    values and dtypes, and each tool row's ``body`` is its ``content`` decoded again."""
    write_sample(tmp_path)
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    with pytest.raises(Exception, match="body"):
        frame.to_parquet(tmp_path / "whole.parquet")
    kept = frame.drop(columns="body")
    kept.to_parquet(tmp_path / "frame.parquet")
    back = pd.read_parquet(tmp_path / "frame.parquet")
    pd.testing.assert_frame_equal(back, kept, check_like=False)
    tools = back[back["role"] == "tool"]
    assert len(tools) and [json.loads(c)["body"] for c in tools["content"]] == list(
        frame.loc[tools.index, "body"])  # fmt: skip
