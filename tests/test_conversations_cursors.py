"""Cursors are opaque and tamper-evident.

Anything but a cursor this store issued for this record generation, at a position
inside the record, is ``invalid-cursor``, and never another exception.

A few tests reach the cursor codec (internal) on purpose: for the cursor's length, for
refusing weak keys, and to forge a cursor correctly signed for this record that names a
position outside it, a forgery the public API cannot produce and the reader must refuse.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import murmur_nb as mnb
from murmur_nb._conversations.budget import (  # private: the bound a hook's read carries
    MESSAGE_OVERHEAD,
    ReadBudget,
)
from murmur_nb._conversations.cursor import (  # private: to forge a signed cursor past the end
    CURSOR_LENGTH,
    CursorCodec,
)

B64 = string.ascii_letters + string.digits + "-_"
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def write_messages(home: Path, context_id: str, count: int, start: int = 0) -> None:
    with mnb.RecordWriter(home, context_id, stamp=False) as writer:
        for k in range(start, start + count):
            writer.append("user", f"message {k}", id=f"m{k}")


def assert_invalid(reader: mnb.ConversationReader, cursor: Any, limit: int = 10) -> None:
    with pytest.raises(mnb.ConversationReadError) as info:
        reader.read_messages(cursor, limit)
    assert (info.value.code, str(info.value)) == ("invalid-cursor", "invalid-cursor")


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> tuple[mnb.ConversationReader, str]:
    home = tmp_path_factory.mktemp("home")
    write_messages(home, "ctx", 250)
    reader = mnb.ConversationStore(home).reader("ctx")
    cursor = reader.read_messages(None, 100).next_cursor
    assert cursor is not None
    return reader, cursor


def test_cursor_is_short_url_safe_text(record: tuple[mnb.ConversationReader, str]) -> None:
    reader, cursor = record
    assert len(cursor) == CURSOR_LENGTH == 36
    assert set(cursor) <= set(B64)
    assert [m.id for m in reader.read_messages(cursor, 3).messages] == ["m149", "m148", "m147"]


@FUZZ
@given(text=st.text(max_size=60))
def test_arbitrary_text_is_invalid(record: tuple[mnb.ConversationReader, str], text: str) -> None:
    reader, cursor = record
    assume(text != cursor)
    assert_invalid(reader, text)


@FUZZ
@given(data=st.data())
def test_every_single_character_alteration_is_invalid(
    record: tuple[mnb.ConversationReader, str], data: st.DataObject
) -> None:
    reader, cursor = record
    at = data.draw(st.integers(0, len(cursor) - 1))
    replacement = data.draw(st.sampled_from(B64) | st.characters())
    assume(replacement != cursor[at])
    assert_invalid(reader, cursor[:at] + replacement + cursor[at + 1 :])


@FUZZ
@given(data=st.data())
def test_truncated_extended_and_spliced_cursors_are_invalid(
    record: tuple[mnb.ConversationReader, str], data: st.DataObject
) -> None:
    reader, cursor = record
    cut = data.draw(st.integers(0, len(cursor) - 1))
    extra = data.draw(st.text(alphabet=B64 + "=. ", min_size=1, max_size=8))
    assert_invalid(reader, cursor[:cut])
    assert_invalid(reader, cursor + extra)
    assert_invalid(reader, extra + cursor)
    spliced = cursor[:cut] + extra + cursor[cut + len(extra) :]
    if spliced != cursor:
        assert_invalid(reader, spliced)


def test_every_bit_flip_of_the_decoded_bytes_is_invalid(
    record: tuple[mnb.ConversationReader, str],
) -> None:
    import base64

    reader, cursor = record
    raw = base64.urlsafe_b64decode(cursor)
    for bit in range(len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert_invalid(reader, base64.urlsafe_b64encode(bytes(flipped)).decode())


@pytest.mark.parametrize(
    "cursor", [b"bytes", 0, 1.5, ["list"], {"d": 1}, True, object(), "", " " * 36, "=" * 36]
)
def test_non_cursor_values_are_invalid(
    record: tuple[mnb.ConversationReader, str], cursor: Any
) -> None:
    reader, _ = record
    assert_invalid(reader, cursor)


def test_a_good_cursor_still_works_after_the_fuzzing(
    record: tuple[mnb.ConversationReader, str],
) -> None:
    reader, cursor = record
    page = reader.read_messages(cursor, 100)
    assert [m.id for m in page.messages][:2] == ["m149", "m148"]


def test_cursor_from_another_record_or_store_is_invalid(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx-1", 150)
    write_messages(tmp_path, "ctx-2", 150)
    store = mnb.ConversationStore(tmp_path)
    one, two = store.reader("ctx-1"), store.reader("ctx-2")
    from_two = two.read_messages(None, 100).next_cursor
    assert_invalid(one, from_two)
    other_store = mnb.ConversationStore(tmp_path).reader("ctx-1")
    assert_invalid(other_store, one.read_messages(None, 100).next_cursor)
    # the same record under another home is another record too
    write_messages(tmp_path / "elsewhere", "ctx-1", 150)
    elsewhere = mnb.ConversationStore(tmp_path / "elsewhere")
    assert_invalid(elsewhere.reader("ctx-1"), one.read_messages(None, 100).next_cursor)


def test_stores_sharing_a_key_share_cursors(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx", 150)
    key = os.urandom(32)
    cursor = (
        mnb.ConversationStore(tmp_path, cursor_key=key).reader("ctx").read_messages().next_cursor
    )
    page = mnb.ConversationStore(tmp_path, cursor_key=key).reader("ctx").read_messages(cursor, 5)
    assert [m.id for m in page.messages] == ["m49", "m48", "m47", "m46", "m45"]


def test_a_position_outside_the_record_is_invalid(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx", 150)
    store = mnb.ConversationStore(tmp_path)
    reader = store.reader("ctx")
    genuine = reader.read_messages(None, 100).next_cursor
    assert genuine is not None
    index = store._index("ctx", store.record_path("ctx"))
    scope = b"ctx\0" + (index.token or b"")
    # Correctly signed for this record, but naming positions it does not have.
    for position in (0, 151, 152, 10**6, 2**64 - 1):
        assert_invalid(reader, store._codec.encode(position, scope))
    assert [m.id for m in reader.read_messages(store._codec.encode(150, scope), 2).messages] == [
        "m149",
        "m148",
    ]


def test_cursor_codec_refuses_weak_keys() -> None:
    with pytest.raises(ValueError, match="16 to 64 bytes"):
        CursorCodec(b"short")


# --------------------------------------------------------------------------- rewrites


def first_cursor(tmp_path: Path) -> tuple[mnb.ConversationReader, str, Path]:
    write_messages(tmp_path, "ctx", 250)
    store = mnb.ConversationStore(tmp_path)
    reader = store.reader("ctx")
    cursor = reader.read_messages(None, 100).next_cursor
    assert cursor is not None
    return reader, cursor, store.record_path("ctx")


def test_truncated_record_invalidates_cursors(tmp_path: Path) -> None:
    reader, cursor, path = first_cursor(tmp_path)
    data = path.read_bytes()
    with path.open("r+b") as handle:
        handle.truncate(len(data) // 3)
    assert_invalid(reader, cursor)
    assert reader.read_messages(None, 100).total < 250


def test_record_rewritten_in_place_invalidates_cursors(tmp_path: Path) -> None:
    reader, cursor, path = first_cursor(tmp_path)
    inode = path.stat().st_ino
    with path.open("r+b") as handle:
        handle.truncate(0)
    write_messages(tmp_path, "ctx", 400, start=1000)  # longer than before, same inode
    assert path.stat().st_ino == inode
    assert_invalid(reader, cursor)
    page = reader.read_messages(None, 100)
    assert (page.total, page.messages[0].id) == (400, "m1399")


def test_record_rewritten_keeping_its_first_line_invalidates_cursors(tmp_path: Path) -> None:
    reader, cursor, path = first_cursor(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    with path.open("r+b") as handle:
        handle.truncate(0)
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append_raw(lines[0])  # same first line, then something else entirely
        for k in range(300):
            writer.append("user", f"other {k}", id=f"o{k}")
    assert_invalid(reader, cursor)


def test_record_replaced_by_rename_invalidates_cursors(tmp_path: Path) -> None:
    reader, cursor, path = first_cursor(tmp_path)
    replacement = path.with_name("new.tmp")
    replacement.write_bytes(path.read_bytes() + path.read_bytes())
    replacement.replace(path)
    assert_invalid(reader, cursor)
    assert reader.read_messages(None, 1).total == 500


def test_record_removed_invalidates_cursors_and_reads_empty(tmp_path: Path) -> None:
    reader, cursor, path = first_cursor(tmp_path)
    path.unlink()
    assert_invalid(reader, cursor)
    assert reader.read_messages(None, 100) == mnb.MessagePage([], None, 0)
    write_messages(tmp_path, "ctx", 250)  # the same bytes again, a new generation
    assert_invalid(reader, cursor)


def test_appends_keep_cursors_valid(tmp_path: Path) -> None:
    reader, cursor, _ = first_cursor(tmp_path)
    write_messages(tmp_path, "ctx", 500, start=250)
    page = reader.read_messages(cursor, 100)
    assert page.total == 750
    assert page.messages[0].id == "m149"


def test_a_line_edited_in_place_is_a_rewrite(tmp_path: Path) -> None:
    reader, cursor, path = first_cursor(tmp_path)
    data = path.read_bytes()
    # Same size, same first and last lines: only a line in the middle changes, so that
    # it is no longer a message ("content" becomes "contenx").
    at = data.index(b'"id":"m60"')
    edited = data[:at] + data[at:].replace(b'"content"', b'"contenx"', 1)
    assert len(edited) == len(data)
    with path.open("r+b") as handle:
        handle.write(edited)
    assert_invalid(reader, cursor, limit=100)
    page = reader.read_messages(None, 100)
    assert page.total == 249
    ids = [m.id for p in [page, reader.read_messages(page.next_cursor, 100)] for m in p.messages]
    assert "m149" in ids
    assert "m60" not in ids


def test_a_record_replaced_between_stat_and_open_is_noticed(tmp_path: Path) -> None:
    """Drives the record index (internal) directly: a record replaced between the reader's
    ``stat`` and its ``open`` is a race no public call can be timed to hit."""
    from murmur_nb._conversations.index import (  # private: a stat/open race no public call can hit
        RecordChanged,
        RecordIndex,
    )

    write_messages(tmp_path, "ctx", 10)
    path = tmp_path / "conversations" / "ctx.jsonl"
    index = RecordIndex(path)
    stale = path.stat()
    replacement = path.with_name("next.tmp")
    replacement.write_bytes(path.read_bytes())
    replacement.replace(path)
    with pytest.raises(RecordChanged):
        index.sync(stale, None)
    index.sync(path.stat(), None)
    assert index.count == 10


def walk_within(reader: mnb.ConversationReader, budget: ReadBudget) -> list[list[str]]:
    """The ids of each page of a walk read within ``budget``, pages newest first."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = reader.read_messages(cursor, 100, budget=budget)
        pages.append([m.id for m in page.messages])
        cursor = page.next_cursor
        if cursor is None:
            return pages


def test_a_walk_within_a_memory_budget_returns_every_message_once_in_order(
    tmp_path: Path,
) -> None:
    """Pages cut to a hook's memory (here 64 KiB) hold fewer messages, at the sizes' own
    boundaries; the walk still returns every message exactly once, newest first."""
    home = tmp_path / "home"
    sizes = [(k * 7919) % 9000 + 1 for k in range(300)]  # 1 byte to 9 KB, in no order
    with mnb.RecordWriter(home, "ctx", stamp=False) as writer:
        for k, size in enumerate(sizes):
            writer.append("user", "z" * size, id=f"m{k}")
    store = mnb.ConversationStore(home)
    lines = store.record_path("ctx").read_bytes().splitlines()
    cost = [len(line) + MESSAGE_OVERHEAD for line in lines]  # what a page is sized by
    budget = ReadBudget(64 << 10)
    pages = walk_within(store.reader("ctx"), budget)
    assert [i for page in pages for i in page] == [f"m{k}" for k in reversed(range(300))]
    assert len(pages) > 3
    for page in pages:  # what each page holds fits, and one more message would not have
        held = sum(cost[int(i[1:])] for i in page)
        assert held <= budget.memory_bytes
        older = int(page[-1][1:]) - 1
        if len(page) < 100 and older >= 0:
            assert held + cost[older] > budget.memory_bytes


def test_a_walk_of_ordinary_messages_within_a_hooks_budget_is_unchanged(
    record: tuple[mnb.ConversationReader, str],
) -> None:
    """A hook's default 256 MiB leaves pages of ordinary messages whole: 100, 100, 50."""
    reader, _ = record
    pages = walk_within(reader, ReadBudget(256 << 20))
    assert [len(page) for page in pages] == [100, 100, 50]
    assert [i for page in pages for i in page] == [f"m{k}" for k in reversed(range(250))]
