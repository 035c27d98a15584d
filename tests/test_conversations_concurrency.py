"""A walk is a snapshot while the runtime appends, and the index scans each byte once.

A writer thread appends messages, tool results, lines that are not messages, and lines
landed in pieces (a prefix without its newline first, the rest later) while a reader
walks from ``cursor=None`` to the end. The walk must yield exactly the messages at
positions ``[0, T)`` newest first, ``T`` being the first page's ``total``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import murmur_nb as mnb

STEPS = st.sampled_from(["msg", "msg", "msg", "tool", "junk", "blank", "partial", "partial"])


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Make the interpreter switch threads every few microseconds, for real interleavings."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(5e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


class Appender(threading.Thread):
    """Appends ``plan`` to a record; message ``k`` (counting messages only) has id ``m{k}``."""

    def __init__(
        self,
        home: Path,
        first: int,
        plan: list[str],
        cuts: list[int],
        gate: threading.Event | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.gate = gate
        self.writer = mnb.RecordWriter(home, "ctx", stamp=False)
        self.next_id = first
        self.plan = plan
        self.cuts = cuts
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if self.gate is not None:
                self.gate.wait(timeout=60)
            for step, cut in zip(self.plan, self.cuts, strict=True):
                self.step(step, cut)
        except BaseException as exc:  # reported by the test, never swallowed
            self.error = exc
        finally:
            self.writer.close()

    def step(self, step: str, cut: int) -> None:
        writer = self.writer
        if step == "junk":
            writer.append_raw(b'{"id":"","role":"user","content":"not a message"}\n')
        elif step == "blank":
            writer.append_raw(b"\n")
        else:
            role, content = ("tool", {"rows": [self.next_id]}) if step == "tool" else ("user", "x")
            line = writer.encode(role, content, id=f"m{self.next_id}", tool_call_id="c")
            self.next_id += 1
            if step == "partial":
                cut = 1 + cut % (len(line) - 1)
                writer.append_raw(line[:cut])
                time.sleep(0)  # let the reader see the line without its newline
                writer.append_raw(line[cut:])
            else:
                writer.append_raw(line)


def prefill(home: Path, count: int) -> None:
    with mnb.RecordWriter(home, "ctx", stamp=False) as writer:
        for k in range(count):
            writer.append("user", "x", id=f"m{k}")
            if k % 7 == 3:
                writer.append_raw(b"garbage line\n")


def walk_while_appending(
    home: Path,
    first_count: int,
    plan: list[str],
    cuts: list[int],
    *,
    limit: int,
    gate: threading.Event | None = None,
) -> tuple[list[str], int, list[int]]:
    """Walk the record while an Appender runs; with ``gate``, appends start after page 1."""
    reader = mnb.ConversationStore(home).reader("ctx")
    appender = Appender(home, first_count, plan, cuts, gate)
    appender.start()
    seen: list[str] = []
    totals: list[int] = []
    cursor: str | None = None
    while True:
        page = reader.read_messages(cursor, limit)
        totals.append(page.total)
        if gate is not None:
            gate.set()
        seen.extend(m.id for m in page.messages)
        cursor = page.next_cursor
        if cursor is None:
            break
    appender.join(timeout=60)
    assert not appender.is_alive()
    if appender.error is not None:
        raise appender.error
    return seen, totals[0], totals


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first_count=st.integers(0, 400),
    plan=st.lists(STEPS, min_size=1000, max_size=2500),
    seed=st.integers(0, 2**16),
    limit=st.integers(0, 100),
)
def test_walk_concurrent_with_appends_is_a_snapshot(  # noqa: PLR0917 - fixtures + hypothesis
    tmp_path_factory: pytest.TempPathFactory,
    fast_switching: None,
    first_count: int,
    plan: list[str],
    seed: int,
    limit: int,
) -> None:
    home = tmp_path_factory.mktemp("home")
    prefill(home, first_count)
    cuts = [(seed * 7919 + k * 104729) % 4096 for k in range(len(plan))]
    seen, total, totals = walk_while_appending(home, first_count, plan, cuts, limit=max(limit, 1))
    assert total >= first_count
    assert seen == [f"m{k}" for k in reversed(range(total))]
    assert totals == sorted(totals)  # total only grows while the runtime appends
    final = mnb.ConversationStore(home).reader("ctx").read_messages(None, 1).total
    assert final == first_count + sum(step in {"msg", "tool", "partial"} for step in plan)


def test_long_walk_concurrent_with_thousands_of_appends(
    tmp_path: Path, fast_switching: None
) -> None:
    prefill(tmp_path, 3000)
    plan = ["msg", "partial", "tool", "junk", "partial", "blank"] * 1000
    cuts = [k * 37 for k in range(len(plan))]
    seen, total, totals = walk_while_appending(
        tmp_path, 3000, plan, cuts, limit=7, gate=threading.Event()
    )
    assert total == 3000
    assert totals[-1] > total  # the runtime really appended during the walk
    assert seen == [f"m{k}" for k in reversed(range(total))]
    assert len(set(seen)) == len(seen)


def test_partial_line_is_counted_only_once_complete(tmp_path: Path) -> None:
    prefill(tmp_path, 3)
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        line = writer.encode("user", "late", id="m3")
        for cut in range(1, len(line) - 1, 5):
            writer.append_raw(line[:cut] if cut == 1 else line[cut - 5 : cut])
        written = cut
        assert reader.read_messages(None, 100).total == 3
        writer.append_raw(line[written:-1])  # everything but the newline
        page = reader.read_messages(None, 100)
        assert (page.total, page.messages[0].id) == (3, "m2")
        writer.append_raw(b"\n")
    page = reader.read_messages(None, 100)
    assert (page.total, page.messages[0].id) == (4, "m3")


def test_read_conversation_concurrent_with_appends_is_a_snapshot(
    tmp_path: Path, fast_switching: None
) -> None:
    prefill(tmp_path, 2500)
    appender = Appender(tmp_path, 2500, ["msg", "partial", "junk"] * 1500, list(range(4500)))
    appender.start()
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    appender.join(timeout=60)
    assert appender.error is None
    assert len(frame) >= 2500
    assert frame["id"].tolist() == [f"m{k}" for k in range(len(frame))]
    assert frame["position"].tolist() == list(range(len(frame)))


# ------------------------------------------------------- the index scans each byte once


def scanned(store: mnb.ConversationStore, context_id: str) -> int:
    """Bytes the store's index has scanned (internal): the cost claims below are about this
    counter, which the public API does not expose."""
    return store._index(context_id, store.record_path(context_id)).bytes_scanned


def test_each_call_scans_only_the_appended_tail(tmp_path: Path) -> None:
    prefill(tmp_path, 500)
    store = mnb.ConversationStore(tmp_path)
    path = store.record_path("ctx")
    reader = store.reader("ctx")
    reader.read_messages(None, 100)
    assert scanned(store, "ctx") == path.stat().st_size
    before = scanned(store, "ctx")
    reader.read_messages(None, 100)
    assert scanned(store, "ctx") == before  # nothing appended: nothing scanned
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        line = writer.encode("user", "one more", id="m500")
        writer.append_raw(line)
        writer.append_raw(b'{"id":"m501","role":"us')  # partial: not scanned as a line
    page = reader.read_messages(None, 100)
    assert (page.total, page.messages[0].id) == (501, "m500")
    assert scanned(store, "ctx") == before + len(line)


def test_a_full_walk_with_appends_scans_every_byte_once(tmp_path: Path) -> None:
    prefill(tmp_path, 20_000)
    store = mnb.ConversationStore(tmp_path)
    reader = store.reader("ctx")
    cursor: str | None = None
    pages = 0
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        while True:
            page = reader.read_messages(cursor, 100)
            pages += 1
            writer.append("user", "appended during the walk", id=f"extra{pages}")
            cursor = page.next_cursor
            if cursor is None:
                break
    reader.read_messages(None, 1)
    assert pages >= 200
    assert scanned(store, "ctx") == store.record_path("ctx").stat().st_size


def test_walk_cost_grows_linearly(tmp_path: Path) -> None:
    """Per-page cost does not grow with the record: the last pages of a long walk cost
    about what the first ones do (a re-scan per call would make them ~N times dearer)."""
    prefill(tmp_path, 60_000)
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    reader.read_messages(None, 100)  # builds the index once
    cursor: str | None = None
    durations: list[float] = []
    while True:
        started = time.perf_counter()
        page = reader.read_messages(cursor, 100)
        durations.append(time.perf_counter() - started)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(durations) == 600
    early = sorted(durations[:100])[50]
    late = sorted(durations[-100:])[50]
    assert late < 5 * early + 0.01
