"""Conversation-frame defects of the fourth user trial: the Dask engine's frame differed from
the pandas engine's, ``read_conversations`` dropped the skipped-line counts and said nothing
of a mistyped home, and ``RecordWriter`` refused pandas' ``NaT`` and numpy's booleans."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import murmur_nb as mnb

dd = pytest.importorskip("dask.dataframe")  # the test extra installs dask: never skipped


def _two_records(home: Path) -> None:
    """Roles in an order that sorts differently from how they first appear."""
    with mnb.RecordWriter(home, "a", stamp=False) as writer:
        writer.append("user", "u", id="1")
        writer.append("zeta", "z", id="2")
    with mnb.RecordWriter(home, "b", stamp=False) as writer:
        writer.append("assistant", "x", id="3", created_at="2026-01-02T03:04:05Z")
        writer.append("tool", {"k": 1}, id="4", tool_call_id="c1", is_error=False)


def test_the_dask_engine_computes_the_pandas_engines_frame(tmp_path: Path) -> None:
    """The Dask frame's roles were categories in first-seen order per partition, its index
    restarted per record, and Dask's ``__UNKNOWN_CATEGORIES__`` placeholder reached
    ``value_counts`` and an empty home's computed categories."""
    _two_records(tmp_path)
    eager = mnb.read_conversations(tmp_path, progress=False)
    lazy = mnb.read_conversations(tmp_path, engine="dask")
    assert lazy["role"].cat.known
    assert list(lazy["role"].cat.categories) == ["assistant", "tool", "user", "zeta"]
    computed = lazy.compute(scheduler="synchronous")
    pd.testing.assert_frame_equal(computed, eager)
    assert computed.attrs == eager.attrs
    assert computed.sort_values("role")["id"].tolist() == ["3", "4", "1", "2"]
    assert lazy["role"].cat.codes.compute().tolist() == eager["role"].cat.codes.tolist()
    counts = lazy["role"].value_counts().compute(scheduler="synchronous").to_dict()
    assert counts == {"assistant": 1, "tool": 1, "user": 1, "zeta": 1}
    second = lazy.partitions[1].compute(scheduler="synchronous")
    assert second.index.tolist() == [2, 3]  # the index continues from the record before
    empty_home = tmp_path / "empty"
    empty_home.mkdir()
    for engine_frame in (
        mnb.read_conversations(empty_home, engine="dask").compute(scheduler="synchronous"),
        mnb.read_conversations(empty_home, progress=False),
    ):
        assert engine_frame.empty and list(engine_frame["role"].cat.categories) == []


def test_a_dask_frame_holds_the_records_as_they_were_when_it_was_made(tmp_path: Path) -> None:
    """The partitions read the snapshot the frame was planned on (its counts, its roles):
    a message appended since, even of a new role, is left out; a record rewritten shorter
    is an error naming it, not a frame that disagrees with its own plan."""
    _two_records(tmp_path)
    lazy = mnb.read_conversations(tmp_path, engine="dask")
    want = mnb.read_conversations(tmp_path, progress=False)
    with mnb.RecordWriter(tmp_path, "a", stamp=False) as writer:
        writer.append("critic", "later", id="5")
    pd.testing.assert_frame_equal(lazy.compute(scheduler="synchronous"), want)
    record = tmp_path / "conversations" / "b.jsonl"
    record.write_text(record.read_text().splitlines()[0] + "\n")
    with pytest.raises(mnb.ConversationReadError, match=r"'b' holds 1 messages, fewer than the 2"):
        lazy.compute(scheduler="synchronous")


def test_read_conversations_counts_the_skipped_lines_of_every_record(tmp_path: Path) -> None:
    """``read_conversation("a").attrs`` had ``skipped_lines=2``; ``read_conversations`` had
    ``{}`` on both engines."""
    with mnb.RecordWriter(tmp_path, "a") as writer:
        writer.append("user", "one", id="1")
        writer.append_raw('{"role":"user","content":"no id"}\n')
        writer.append_raw("not json\n")
    with mnb.RecordWriter(tmp_path, "b") as writer:
        writer.append("user", "two", id="2")
    with mnb.RecordWriter(tmp_path, "c") as writer:
        writer.append_raw("\n[1]\n")
        writer.append("user", "three", id="3")
    assert mnb.read_conversation("a", tmp_path, progress=False).attrs["skipped_lines"] == 2
    want = {"skipped_lines": 3, "skipped_lines_by_record": {"a": 2, "c": 1}}
    assert mnb.read_conversations(tmp_path, progress=False).attrs == want
    lazy = mnb.read_conversations(tmp_path, engine="dask")
    assert lazy.compute(scheduler="synchronous").attrs == want
    assert lazy[lazy["role"] == "user"].compute(scheduler="synchronous").attrs == want


def test_a_home_that_does_not_exist_is_warned_about(tmp_path: Path) -> None:
    """A mistyped home gave an empty frame and no word; an existing empty one stays silent."""
    typo = tmp_path / "murmr"
    for engine in ("pandas", "dask"):
        with pytest.warns(UserWarning, match=r"there is no folder '.*murmr'.*check the path"):
            frame = mnb.read_conversations(typo, engine=engine)  # type: ignore[arg-type]
        assert len(frame.columns) == 10 and len(frame) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mnb.read_conversations(tmp_path, progress=False).empty
        assert len(mnb.read_conversations(tmp_path, engine="dask").compute()) == 0


def test_the_writer_takes_pandas_missing_values_and_numpy_booleans(tmp_path: Path) -> None:
    """``created_at=pd.NaT`` said "created_at NaT has no time zone"; ``np.bool_(True)`` said
    "is_error must be True, False or None, not bool (np.True_)"."""
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("tool", {"a": 1}, id="1", created_at=pd.NaT, is_error=np.bool_(True))
        writer.append("tool", {"a": 2}, id="2", name=pd.NA, tool_call_id=pd.NA, is_error=pd.NA)
        with pytest.raises(TypeError, match=r"not numpy\.int64 \(np\.int64\(1\)\)"):
            writer.append("tool", {"a": 3}, is_error=np.int64(1))  # type: ignore[arg-type]
    lines = (tmp_path / "conversations" / "ctx.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"id": "1", "role": "tool", "content": {"a": 1}, "is_error": True},
        {"id": "2", "role": "tool", "content": {"a": 2}},
    ]
    with mnb.RecordWriter(tmp_path, "stamped") as writer:  # NaT is not given: stamped now
        writer.append("user", "hi", id="1", created_at=pd.NaT)
    frame = mnb.read_conversation("stamped", tmp_path, progress=False)
    assert frame["created_at"].notna().all()
