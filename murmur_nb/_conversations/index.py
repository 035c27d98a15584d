"""The incremental index of one conversation record, and the SPEC §3 message test.

Counting a record's messages means parsing every line once, which is the expensive part;
doing it on every ``read-messages`` call would make a walk O(N^2). Each record gets a
:class:`RecordIndex` holding the byte offsets of its complete message lines (two growable
int64 arrays) and how far it has scanned. A call costs one ``stat``; only when the size or
mtime moved does it re-check the record's identity (device and inode, the bytes of its
first line, the bytes just before the scanned end) and scan the appended tail. A record
that was replaced, truncated or rewritten under the index starts a new generation: the
index is rebuilt, and its ``token`` changes so every cursor issued for the old generation
is ``invalid-cursor``. A last line without its newline is a line the runtime is still
writing: it is not scanned, not counted, and picked up by the next call once complete.

During a full walk (:class:`Walk`) the scan also keeps each message's fields as
:class:`Columns`, so the pages it covers need not be decoded a second time.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "OPEN_FLAGS",
    "Columns",
    "ProgressCallback",
    "RecordChanged",
    "RecordIndex",
    "Row",
    "Walk",
    "message_lines",
    "message_lines_into",
]

# never through a link: a record swapped for one after the lstat fails the open (ELOOP)
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
)
"""How a record is opened for reading: never blocking on a FIFO put in its place."""

_FIRST_CHUNK = 8 << 20
_HEAD_BYTES = 256
_TAIL_BYTES = 64
_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError

Row = dict[str, Any]
ProgressCallback = Callable[[int], object]


class RecordChanged(Exception):
    """The record is no longer the generation the index describes."""


class Columns:
    """Decoded messages as column lists, for building a DataFrame without a second pass.

    ``call_ids`` and ``errors`` hold the raw ``tool_call_id`` / ``is_error`` values of the
    tool messages only, in order.
    """

    __slots__ = ("call_ids", "contents", "errors", "ids", "names", "roles", "stamps")

    def __init__(self) -> None:
        self.ids: list[Any] = []
        self.roles: list[Any] = []
        self.contents: list[Any] = []
        self.names: list[Any] = []
        self.stamps: list[Any] = []
        self.call_ids: list[Any] = []
        self.errors: list[Any] = []

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, rows: list[Row]) -> None:
        """Append decoded record rows (already known to be messages)."""
        self.ids += [row["id"] for row in rows]
        self.roles += [row["role"] for row in rows]
        self.contents += [row["content"] for row in rows]
        self.names += [row.get("name") for row in rows]
        self.stamps += [row.get("created_at") for row in rows]
        tools = [row for row in rows if row["role"] == "tool"]
        self.call_ids += [row.get("tool_call_id") for row in tools]
        self.errors += [row.get("is_error") for row in tools]

    def extend_columns(self, other: Columns) -> None:
        """Append every message of ``other``."""
        for name in self.__slots__:
            getattr(self, name).extend(getattr(other, name))


@dataclass(slots=True)
class Walk:
    """State one full walk keeps across its pages (see ``read_conversation``).

    The first page's index scan parses every appended line anyway; the walk keeps what
    it decoded, as columns, so that its pages need not be parsed a second time.
    ``sink`` holds the messages at positions ``sink_base`` onwards; pages below that are
    decoded from the record and handed back as rows.
    """

    on_bytes: ProgressCallback | None = None
    sink: Columns | None = None
    sink_base: int = -1
    #: lines of the record, as its first page saw it, that are not messages (blank ones
    #: aside); ``-1`` until then
    skipped: int = -1

    def restart(self) -> None:
        """Drop the kept columns: the record changed and is being indexed afresh."""
        self.sink = None
        self.sink_base = -1
        self.skipped = -1


class RecordIndex:
    """Byte offsets of the complete message lines of one record file."""

    __slots__ = (
        "_capacity",
        "_ends",
        "_head",
        "_seen",
        "_starts",
        "_tail",
        "bytes_scanned",
        "count",
        "epoch",
        "ident",
        "lock",
        "path",
        "scanned",
        "skipped",
        "token",
    )

    def __init__(self, path: Path) -> None:
        import numpy as np  # noqa: PLC0415 - numpy loads on the first read

        self.path = path
        self.lock = threading.RLock()  # a retry re-enters it
        self.epoch = 0
        self.bytes_scanned = 0
        self._capacity = 0
        self._starts: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._ends: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._reset(None)

    def _reset(self, ident: tuple[int, int] | None) -> None:
        self.ident = ident
        self.epoch += 1
        self.count = 0
        self.scanned = 0
        self.skipped = 0  # complete lines that are not messages, blank ones aside
        self.token: bytes | None = None
        self._seen: tuple[int, int] | None = None
        self._head = b""
        self._tail = b""

    def forget(self) -> None:
        """The record is gone: any cursor issued so far is for a past generation."""
        if self.ident is not None or self.count:
            self._reset(None)

    def offsets(self, start: int, end: int) -> tuple[list[int], list[int]]:
        return self._starts[start:end].tolist(), self._ends[start:end].tolist()

    def sync(self, st: os.stat_result, walk: Walk | None) -> None:
        """Bring the index up to date with the record whose ``stat`` is ``st``.

        Opens the file only when something moved. Raises ``OSError`` when the record
        cannot be read and ``RecordChanged`` when it changed under the open.
        """
        ident = (st.st_dev, st.st_ino)
        if ident != self.ident or st.st_size < self.scanned:
            self._reset(ident)
        elif self._seen == (st.st_size, st.st_mtime_ns):
            if walk is not None:
                walk.sink, walk.sink_base = Columns(), self.count
                if walk.skipped < 0:
                    walk.skipped = self.skipped
            return
        fd = os.open(self.path, OPEN_FLAGS)
        try:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != ident or not stat.S_ISREG(fst.st_mode):
                raise RecordChanged
            if self.scanned and not self._same_generation(fd, fst.st_size):
                self._reset(ident)
            if walk is not None:
                walk.sink, walk.sink_base = Columns(), self.count
            self._scan(fd, fst.st_size, walk.sink if walk is not None else None, walk)
            self._seen = (fst.st_size, fst.st_mtime_ns)
            if walk is not None and walk.skipped < 0:
                walk.skipped = self.skipped
        finally:
            os.close(fd)

    def _same_generation(self, fd: int, size: int) -> bool:
        if size < self.scanned:
            return False
        head = self._head
        if os.pread(fd, len(head), 0) != head:
            return False
        tail = self._tail
        return os.pread(fd, len(tail), self.scanned - len(tail)) == tail

    def _grow(self, extra: int) -> None:
        import numpy as np  # noqa: PLC0415 - numpy loads on the first read

        need = self.count + extra
        if need <= self._capacity:
            return
        capacity = max(need, 2 * self._capacity, 1024)
        for name in ("_starts", "_ends"):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=np.int64)
            new[: self.count] = old[: self.count]
            setattr(self, name, new)
        self._capacity = capacity

    def _scan(self, fd: int, size: int, sink: Columns | None, walk: Walk | None) -> None:
        """Index the complete lines in ``[scanned, size)``; decode them into ``sink``."""
        import numpy as np  # noqa: PLC0415 - numpy loads on the first read

        on_bytes = walk.on_bytes if walk is not None else None
        offset = self.scanned
        chunk = _FIRST_CHUNK
        while offset < size:
            buf = os.pread(fd, min(chunk, size - offset), offset)
            if not buf:
                break
            cut = buf.rfind(b"\n")
            if cut < 0:
                if offset + len(buf) >= size:
                    break  # the last line is still being written
                chunk *= 2
                continue
            if offset == 0:
                first = buf[: buf.index(b"\n") + 1]
                self._head = first[:_HEAD_BYTES]
                digest = hashlib.blake2b(digest_size=16)
                digest.update(b"%d:%d:%d:" % (*(self.ident or (0, 0)), self.epoch))
                digest.update(first)
                self.token = digest.digest()
            lines = buf[:cut].split(b"\n")
            kept = message_lines(lines) if sink is None else message_lines_into(lines, sink)
            self.skipped += len(lines) - len(kept) - lines.count(b"")
            if kept:
                newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=cut + 1) == 10)
                chosen = np.array(kept, dtype=np.intp)
                ends = newlines[chosen]
                starts = np.where(chosen == 0, 0, newlines[chosen - 1] + 1)
                self._grow(len(kept))
                self._starts[self.count : self.count + len(kept)] = starts + offset
                self._ends[self.count : self.count + len(kept)] = ends + offset
                self.count += len(kept)
            self._tail = (self._tail + buf[max(0, cut + 1 - _TAIL_BYTES) : cut + 1])[-_TAIL_BYTES:]
            offset += cut + 1
            self.scanned = offset
            self.bytes_scanned += cut + 1
            if on_bytes is not None:
                on_bytes(cut + 1)
            chunk = _FIRST_CHUNK


# The two loops below are the hot path of indexing: one parse per line, the SPEC §3
# message test, nothing else. A line is a message when it is a JSON object with a
# non-empty string ``id``, a string ``role`` and a ``content`` that is a string (any
# JSON value for role "tool"); subscripting anything but a dict raises TypeError.


def message_lines(lines: list[bytes]) -> list[int]:
    """Indexes of the lines that are messages."""
    loads = _loads
    decode_error = _JSONDecodeError
    kept: list[int] = []
    keep = kept.append
    for index, line in enumerate(lines):
        try:
            row = loads(line)
            ident = row["id"]
            role = row["role"]
            content = row["content"]
        except (decode_error, KeyError, TypeError):
            continue
        if (
            type(ident) is str
            and ident
            and type(role) is str
            and (type(content) is str or role == "tool")
        ):
            keep(index)
    return kept


def message_lines_into(lines: list[bytes], sink: Columns) -> list[int]:
    """Like :func:`message_lines`, also appending each message's fields to ``sink``."""
    loads = _loads
    decode_error = _JSONDecodeError
    kept: list[int] = []
    keep = kept.append
    add_id, add_role, add_content = sink.ids.append, sink.roles.append, sink.contents.append
    add_name, add_stamp = sink.names.append, sink.stamps.append
    add_call_id, add_error = sink.call_ids.append, sink.errors.append
    for index, line in enumerate(lines):
        try:
            row = loads(line)
            ident = row["id"]
            role = row["role"]
            content = row["content"]
        except (decode_error, KeyError, TypeError):
            continue
        if type(ident) is str and ident and type(role) is str:
            if type(content) is str:
                if role == "tool":
                    add_call_id(row.get("tool_call_id"))
                    add_error(row.get("is_error"))
            elif role == "tool":
                add_call_id(row.get("tool_call_id"))
                add_error(row.get("is_error"))
            else:
                continue
            keep(index)
            add_id(ident)
            add_role(role)
            add_content(content)
            add_name(row.get("name"))
            add_stamp(row.get("created_at"))
    return kept
