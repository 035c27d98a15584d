"""What ``RecordWriter`` refuses and how it writes values JSON carries: SPEC §3 keys of the
wrong type were written and reported as success while the reader dropped the line (or the
key); numpy numbers and integers beyond 64 bits raised orjson's bare ``TypeError``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import murmur_nb as mnb


def record_lines(home: Path, context_id: str = "ctx") -> list[bytes]:
    path = home / "conversations" / f"{context_id}.jsonl"
    return path.read_bytes().splitlines() if path.exists() else []


@pytest.mark.parametrize(
    ("role", "keys", "error", "message"),
    [
        ("user", {"id": ""}, ValueError, "id must be a non-empty string, not ''"),
        ("user", {"id": 5}, TypeError, "id must be a non-empty string, not int (5)"),
        ("user", {"name": 5}, TypeError, "name must be a string, not int (5)"),
        ("tool", {"tool_call_id": 7}, TypeError, "tool_call_id must be a string, not int (7)"),
        ("tool", {"is_error": "yes"}, TypeError, "is_error must be True, False or None, not str"),
        ("tool", {"is_error": 1}, TypeError, "is_error must be True, False or None, not int"),
    ],
)
def test_keys_the_reader_would_drop_are_refused_and_nothing_is_written(
    tmp_path: Path, role: str, keys: dict[str, Any], error: type[Exception], message: str
) -> None:
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        with pytest.raises(error, match=re.escape(message)) as info:
            writer.append(role, "x", **{"id": "m1", **keys})
        assert "pass " in str(info.value)  # and says what to do
        with pytest.raises(error, match=re.escape(message)):
            writer.encode(role, "x", **{"id": "m1", **keys})
    assert record_lines(tmp_path) == []
    assert mnb.read_conversation("ctx", tmp_path, progress=False).attrs["skipped_lines"] == 0


def test_numpy_values_are_written_as_plain_json(tmp_path: Path) -> None:
    body = {
        "count": np.int64(3),
        "small": np.uint8(255),
        "ratio": np.float32(0.5),
        "mean": np.float64(2.25),
        "ok": np.bool_(True),
        "rows": np.arange(3),
    }
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("tool", body, id="t1", tool_call_id="c1")
        with pytest.raises(ValueError, match="holds nan, which JSON cannot carry"):
            writer.append("tool", {"x": np.float32("nan")}, id="t2")
        with pytest.raises(ValueError, match="holds inf, which JSON cannot carry"):
            writer.append("tool", {"x": np.array([1.0, np.inf])}, id="t3")
    plain = {"count": 3, "small": 255, "ratio": 0.5, "mean": 2.25, "ok": True, "rows": [0, 1, 2]}
    (line,) = record_lines(tmp_path)
    assert json.loads(line)["content"] == plain
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    assert frame["body"].tolist() == [plain]


def test_integers_beyond_64_bits_are_written_exactly(tmp_path: Path) -> None:
    body = {"id": 12345678901234567890123, "low": -(2**64), "nested": [[2**100]]}
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("tool", body, id="t1", extra={"trace": 2**70})
    (line,) = record_lines(tmp_path)
    assert line == (
        b'{"id":"t1","role":"tool","content":{"id":12345678901234567890123,'
        b'"low":-18446744073709551616,"nested":[[1267650600228229401496703205376]]},'
        b'"trace":1180591620717411303424}'
    )
    assert mnb.read_conversation("ctx", tmp_path, progress=False)["body"].tolist() == [body]


@pytest.mark.parametrize(
    ("content", "extra", "field"),
    [
        ({"rows": {1, 2}}, None, "content"),
        ({1: "a"}, None, "content"),
        ({1: 2**70}, None, "content"),  # past orjson, the exact writer refuses the key too
        ({"ok": 1}, {"when": object()}, "extra"),
    ],
)
def test_what_json_cannot_carry_is_refused_naming_the_field(
    tmp_path: Path, content: Any, extra: dict[str, Any] | None, field: str
) -> None:
    writer = mnb.RecordWriter(tmp_path, "ctx")
    with writer, pytest.raises(TypeError, match=f"the {field} of message 't1' is not JSON") as info:
        writer.append("tool", content, id="t1", extra=extra)
    assert "pass dicts with string keys" in str(info.value)
    assert record_lines(tmp_path) == []


@pytest.mark.parametrize(
    ("stamp", "written"),
    [("2026-01-01T05:00:00z", True), ("2026-01-01t05:00:00Z", True),
     ("2026-01-01 05:00:00.25+02:00", True), ("2026-W01-1T05:00:00Z", False),
     ("2026-01-01T05:00:00,5Z", False), ("2026-01-01T05:00:00", False),
     ("2026-01-01", False), ("2016-12-31T23:59:60Z", False)],
)  # fmt: skip
def test_created_at_is_written_when_it_is_an_rfc3339_instant_and_read_as_it(
    tmp_path: Path, stamp: str, written: bool
) -> None:
    """The writer took ISO 8601 forms RFC 3339 leaves out (a week date, a comma fraction),
    which the frame read as NaT, and refused RFC 3339's lowercase ``t``/``z``; the frame read a
    time without its zone as UTC, although the writer refuses it and the frame's docstring
    says NaT. One rule for both: what is written is read as the same instant, and a line
    written raw with a stamp that is no instant is NaT."""
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        if written:
            writer.append("user", "x", created_at=stamp)
        else:
            with pytest.raises(ValueError, match=re.escape(repr(stamp))) as info:
                writer.append("user", "x", created_at=stamp)
            assert ("leap second" in str(info.value)) == stamp.endswith(":60Z")
            writer.append_raw(json.dumps({"id": "m", "role": "user", "content": "x",
                                          "created_at": stamp}).encode() + b"\n")  # fmt: skip
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    (value,) = frame["created_at"]
    if written:
        expected = pd.Timestamp(stamp.upper()).tz_convert("UTC")
        assert value == expected
    else:
        assert pd.isna(value)
