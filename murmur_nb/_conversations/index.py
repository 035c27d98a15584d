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
A line longer than a scan chunk is searched for its newline piece by piece, nothing held,
and read whole only once complete and free of NULs (a sparse file's hole, a crash's tail).
A scan for a hook's read looks at the call's deadline every
:data:`~murmur_nb._conversations.budget.SCAN_CHUNK` bytes and stops there: each chunk is
indexed whole before the next is read, so the next call goes on from ``scanned``. Nor does
it read a line longer than the guest's memory (:class:`LineTooLarge`): a line is one parse,
which no deadline interrupts, of several times its length in the kernel.

During a full walk (:class:`Walk`) the scan also keeps each message's fields as
:class:`Columns`, so the pages it covers need not be decoded a second time. Every scan
keeps the set of the roles it indexed (a set add per message, beside the parse): a Dask
frame of many records knows its ``role`` categories before any partition is read.

*Integers beyond 64 bits.* orjson reads them as floats (or refuses them once they pass
the double range), while a tool result is any JSON value, so its integers must come back
exact. Only a number of 19 or more digits can be one. The scan searches each chunk for
such runs once, with numpy (:func:`long_number_lines`), and the index keeps the positions
of the messages whose line may hold one (almost always none). A tool result on such a
line, or a line orjson refused, is checked exactly and read again by the stdlib ``json``,
which keeps every integer exact; a page's other lines pay nothing more.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import stat
import threading
from bisect import bisect_left
from collections.abc import Callable, Container
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from murmur_nb._conversations.budget import SCAN_CHUNK, ReadBudget

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "OPEN_FLAGS",
    "Columns",
    "LineTooLarge",
    "ProgressCallback",
    "RecordChanged",
    "RecordIndex",
    "Row",
    "Walk",
    "has_long_number",
    "loads_exact",
    "long_number_lines",
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
# digits to "0", every other byte to " ": a run of 19 digits becomes _LONG_NUMBER
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
# -9223372036854775809 has 19 digits and is the first integer orjson reads as a float
_LONG_NUMBER = b"0" * 19
_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)
_SEEK_HOLE: int | None = getattr(os, "SEEK_HOLE", None)
_BLANK = b" \t\r"  # JSON whitespace a line can hold besides its ending newline

Row = dict[str, Any]
ProgressCallback = Callable[[int], object]


class RecordChanged(Exception):
    """The record is no longer the generation the index describes."""


class LineTooLarge(Exception):
    """A scan for a guest's read met a complete line longer than the guest's memory: telling
    whether it is a message means reading and parsing it whole, which is not done on the
    guest's behalf. ``size`` is its length in bytes (newline excluded), ``offset`` where it
    starts, ``head`` its first bytes (to name the message)."""

    def __init__(self, size: int, offset: int, head: bytes) -> None:
        super().__init__(f"a line of {size} bytes at byte {offset}")
        self.size = size
        self.offset = offset
        self.head = head


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
        "_long",
        "_seen",
        "_starts",
        "_tail",
        "bytes_scanned",
        "count",
        "epoch",
        "ident",
        "lock",
        "path",
        "roles",
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
        self.roles: set[str] = set()  # every role of the messages indexed
        self.token: bytes | None = None
        self._long: list[int] = []  # positions of messages that may hold a long number
        self._seen: tuple[int, int] | None = None
        self._head = b""
        self._tail = b""

    def forget(self) -> None:
        """The record is gone: any cursor issued so far is for a past generation."""
        if self.ident is not None or self.count:
            self._reset(None)

    def offsets(self, start: int, end: int) -> tuple[list[int], list[int], list[int]]:
        """Start and end offsets of messages ``[start, end)``, and which of them (counted
        from ``start``) may hold a number of 19 or more digits."""
        long = self._long
        low, high = bisect_left(long, start), bisect_left(long, end)
        return (
            self._starts[start:end].tolist(),
            self._ends[start:end].tolist(),
            [position - start for position in long[low:high]],
        )

    def sizes(self, start: int, end: int) -> npt.NDArray[np.int64]:
        """Byte sizes of the lines of messages ``[start, end)``, newline excluded."""
        return self._ends[start:end] - self._starts[start:end]

    def sync(self, st: os.stat_result, walk: Walk | None, budget: ReadBudget | None = None) -> None:
        """Bring the index up to date with the record whose ``stat`` is ``st``.

        Opens the file only when something moved. Raises ``OSError`` when the record
        cannot be read and ``RecordChanged`` when it changed under the open. With a
        ``budget``, the scan looks at its deadline every :data:`SCAN_CHUNK` bytes and raises
        ``ReadDeadline`` when it has passed, keeping what it indexed so far.
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
            self._scan(fd, fst.st_size, walk.sink if walk is not None else None, walk, budget)
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

    def _messages(
        self, lines: list[bytes], sink: Columns | None, long_lines: Container[int]
    ) -> tuple[list[int], int]:
        """The message lines of one chunk and its blank lines (decoded into ``sink`` during a
        walk); the roles of its messages join :attr:`roles`."""
        if sink is None:
            return message_lines(lines, self.roles, long_lines)
        before = len(sink.roles)
        kept, blank = message_lines_into(lines, sink, long_lines)
        self.roles.update(sink.roles[before:])
        return kept, blank

    def _scan(
        self, fd: int, size: int, sink: Columns | None, walk: Walk | None,
        budget: ReadBudget | None,
    ) -> None:  # fmt: skip
        """Index the complete lines in ``[scanned, size)``; decode them into ``sink``.

        Each chunk's lines are indexed as a whole before the next is read, so a
        ``ReadDeadline`` between chunks leaves the index consistent up to ``scanned``.
        """
        import numpy as np  # noqa: PLC0415 - numpy loads on the first read

        on_bytes = walk.on_bytes if walk is not None else None
        offset = self.scanned
        chunk = _FIRST_CHUNK if budget is None else SCAN_CHUNK
        while offset < size:
            if budget is not None:
                budget.check()
            buf = os.pread(fd, _data_span(fd, offset, min(chunk, size - offset)), offset)
            if not buf:
                break
            cut = buf.rfind(b"\n")
            if cut < 0:  # a line longer than a chunk, or one running into a hole
                found = _line_end(fd, offset, buf, size, step=chunk, budget=budget)
                if found is None:
                    break  # the last line is still being written
                end, holds_nul = found
                if holds_nul:
                    self._pass_over(fd, offset, end + 1, buf, on_bytes)
                    offset = end + 1
                    continue
                buf = _whole_line(fd, offset, end, buf, budget)
                cut = end - offset
            if offset == 0:
                self._identify(buf[: buf.index(b"\n") + 1])
            lines = buf[:cut].split(b"\n")
            long = long_number_lines(buf, cut)
            marked = set(long.tolist()) if len(long) else ()
            kept, blank = self._messages(lines, sink, marked)
            self.skipped += len(lines) - len(kept) - blank
            if kept:
                newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=cut + 1) == 10)
                chosen = np.array(kept, dtype=np.intp)
                if len(long):
                    long_kept = np.flatnonzero(np.isin(chosen, long)) + self.count
                    self._long.extend(long_kept.tolist())
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

    def _identify(self, first: bytes) -> None:
        """Take the record's first line (or its first bytes and length, for one passed over):
        the head the generation check compares, and the token its cursors are scoped to."""
        self._head = first[:_HEAD_BYTES]
        digest = hashlib.blake2b(digest_size=16)
        digest.update(b"%d:%d:%d:" % (*(self.ident or (0, 0)), self.epoch))
        digest.update(first)
        self.token = digest.digest()

    def _pass_over(
        self, fd: int, offset: int, end: int, head: bytes, on_bytes: ProgressCallback | None
    ) -> None:
        """Index the line ``[offset, end)``, which holds a NUL and so is not a message,
        without reading it whole; ``head`` is its first bytes."""
        if offset == 0:
            self._identify(head + b"...%d" % end)
        self.skipped += 1
        self._tail = os.pread(fd, _TAIL_BYTES, max(0, end - _TAIL_BYTES))
        self.scanned = end
        self.bytes_scanned += end - offset
        if on_bytes is not None:
            on_bytes(end - offset)


def _line_end(
    fd: int, offset: int, head: bytes, size: int, *, step: int, budget: ReadBudget | None
) -> tuple[int, bool] | None:
    """The offset of the newline ending the line at ``offset`` whose first bytes ``head``
    hold none, and whether the line holds a NUL byte; ``None`` when it has no newline yet.

    Read in pieces of at most ``step`` bytes, none kept, and a hole of a sparse file is never
    read (``SEEK_DATA``, and each piece ends where a hole starts: ``SEEK_HOLE``): a hole reads
    as NULs, which no JSON text holds (nor does the run of NULs a crash can leave after the
    last line), so such a line is passed over whole. A piece read whole past each byte of
    data cost its full length in reads: a record of 1 TiB holding a byte every 64 MiB (64 MiB
    on disk) took 164 s to load, and no hook read of it ever ended before its deadline.
    Reading the line at once, doubling, cost twice its length in reads and more in memory,
    each time the record grew while the line had no newline yet: a record of 4 KiB on disk
    ending in a 1 GiB hole took 1.6 GiB and 17 s to read (3.4 GiB and 38 s once a line
    followed the hole), and one of 16 GiB raised ``MemoryError`` in a kernel with 512 MiB
    to spare.
    """
    holds_nul = b"\0" in head
    at = offset + len(head)
    while at < size:
        if budget is not None:
            budget.check()
        data = _data_from(fd, at)
        if data is None or data >= size:
            return None  # a hole up to the end: no newline
        if data > at:
            holds_nul, at = True, data
        piece = os.pread(fd, _data_span(fd, at, min(step, size - at)), at)
        if not piece:
            return None
        newline = piece.find(b"\n")
        if newline >= 0:
            return at + newline, holds_nul or b"\0" in piece[:newline]
        holds_nul = holds_nul or b"\0" in piece
        at += len(piece)
    return None


def _whole_line(fd: int, offset: int, end: int, head: bytes, budget: ReadBudget | None) -> bytes:
    """The line ``[offset, end]`` (its newline included) whose first bytes are ``head``.

    For a guest's read (with a ``budget``) only before its deadline, and only when the line
    fits the guest's memory: else :class:`LineTooLarge`, nothing more read.
    """
    if budget is not None:
        budget.check()
        if end - offset > budget.memory_bytes:
            raise LineTooLarge(end - offset, offset, head[:512])
    line = os.pread(fd, end + 1 - offset, offset)
    if len(line) != end + 1 - offset or line[-1:] != b"\n":
        raise RecordChanged
    return line


def _data_span(fd: int, at: int, want: int) -> int:
    """How many of the ``want`` bytes at ``at`` to read: those before the next hole (at least
    one, so a read at a hole sees its NUL), or all of them where the file system does not say."""
    if _SEEK_HOLE is None:
        return want
    try:
        hole = os.lseek(fd, at, _SEEK_HOLE)
    except OSError:
        return want
    return max(1, min(want, hole - at))


def _data_from(fd: int, at: int) -> int | None:
    """The first offset at or after ``at`` that is not in a hole; ``None`` when only a hole
    follows (or ``at`` itself where the file system does not say)."""
    if _SEEK_DATA is None:
        return at
    try:
        return os.lseek(fd, at, _SEEK_DATA)
    except OSError as exc:
        return None if exc.errno == errno.ENXIO else at


def long_number_lines(buf: bytes, cut: int) -> npt.NDArray[np.intp]:
    """Indexes (sorted, unique) of the lines of ``buf[:cut]`` that may hold 19+ digits in a row.

    Such a run always covers four aligned 4-byte words of digits. numpy finds the words
    whose bytes all lie in 0x30-0x3F (the digits and ``:;<=>?``) in about a tenth of a
    nanosecond a byte; lines with shorter runs, or runs of those signs, are found too
    and told apart when their line is read (:func:`has_long_number`).
    """
    import numpy as np  # noqa: PLC0415 - numpy loads on the first read

    words = np.frombuffer(buf, dtype=np.uint32, count=cut // 4)
    digits = (words & 0xF0F0F0F0) == 0x30303030  # the same for either byte order
    runs = np.flatnonzero(digits[:-3] & digits[1:-2] & digits[2:-1] & digits[3:])
    if not len(runs):
        return runs
    newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=cut) == 10)
    return np.unique(np.searchsorted(newlines, runs * 4))


def has_long_number(text: bytes) -> bool:
    """Whether ``text`` holds a run of 19 or more digits: a number orjson may not keep exact."""
    return _LONG_NUMBER in text.translate(_DIGITS_AS_ZEROS)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"{text} is past the double range")
    return value


# a \uD800-\uDFFF escape (or an escaped backslash before "uD8..": looked at, then kept)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any) -> bool:
    """Whether a string (or key) inside ``value`` holds a lone surrogate: the stdlib reads an
    unpaired ``\\ud800`` escape into one, which no UTF-8 text (a guest's, Arrow's) can hold."""
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif type(item) is dict:
            pending.extend(item)
            pending.extend(item.values())
        elif type(item) is list:
            pending.extend(item)
    return False


def loads_exact(text: bytes) -> Any:
    """``text`` read by the stdlib ``json``, every integer exact however long.

    For text orjson refused or read with a long number in it (see :func:`has_long_number`).
    Only the long integers may differ from orjson's verdict: what orjson refuses for any
    other reason is refused here too (a line is a message or not whatever numbers it holds
    elsewhere), namely NaN, the infinities and numbers past the double range, text that is
    not UTF-8 or starts with a byte order mark (the stdlib reads both from bytes), and lone
    surrogate escapes (the stdlib reads them into strings UTF-8 cannot encode, which broke
    the page's lowering for a guest and the frame's Arrow strings). Raises ``ValueError``
    for text that is not JSON and ``RecursionError`` for nesting deeper than the stdlib reads.
    """
    value = json.loads(text.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    if _SURROGATE_ESCAPE.search(text) is not None and _lone_surrogate(value):
        raise ValueError("a lone surrogate escape is not text")
    return value


def _reread(line: bytes) -> Any:
    """A line orjson refused, read again when a long number is in it; else ``None``."""
    if not has_long_number(line):
        return None
    try:
        return loads_exact(line)
    except (ValueError, RecursionError):
        return None


def _refused(line: bytes, may_be_long: bool) -> tuple[Any, bool]:
    """A line orjson refused: its row when a long number was the reason (read exactly),
    else ``None``; and whether the line is blank (the one rule of both parse loops)."""
    row = _reread(line) if may_be_long else None
    return row, row is None and not line.strip(_BLANK)


def _exact_content(line: bytes, content: Any) -> Any:
    """The ``content`` of a message line orjson read, with its long integers exact."""
    if not has_long_number(line):
        return content
    try:
        return loads_exact(line)["content"]
    except (ValueError, RecursionError, KeyError, TypeError):
        return content


# The two loops below are the hot path of indexing: one parse per line, the SPEC §3
# message test, nothing else (a line orjson refuses is also asked whether it is blank,
# after the exception that already cost far more). A line is a message when it is a
# JSON object with a non-empty string ``id``, a string ``role`` and a ``content`` that is
# a string (any JSON value for role "tool"); subscripting anything but a dict raises
# TypeError.


def message_lines(
    lines: list[bytes], roles: set[str], long_lines: Container[int] = ()
) -> tuple[list[int], int]:
    """Indexes of the lines that are messages, and how many lines are blank; each message's
    role is added to ``roles``.

    A blank line holds nothing but JSON whitespace (a CRLF record's empty line is
    ``"\\r"``); it is not JSON, so it is looked at only on the way out of the parse.
    ``long_lines`` holds the indexes of the lines that may hold a long number (see
    :func:`long_number_lines`): one that orjson refuses is read again exactly.
    """
    loads = _loads
    decode_error = _JSONDecodeError
    kept: list[int] = []
    keep = kept.append
    add_role = roles.add
    blank = 0
    for index, line in enumerate(lines):
        try:
            row = loads(line)
        except decode_error:
            row, is_blank = _refused(line, index in long_lines)
            if row is None:
                blank += is_blank
                continue
        try:
            ident = row["id"]
            role = row["role"]
            content = row["content"]
        except (KeyError, TypeError):
            continue
        if (
            type(ident) is str
            and ident
            and type(role) is str
            and (type(content) is str or role == "tool")
        ):
            keep(index)
            add_role(role)
    return kept, blank


def message_lines_into(
    lines: list[bytes], sink: Columns, long_lines: Container[int] = ()
) -> tuple[list[int], int]:
    """Like :func:`message_lines`, also appending each message's fields to ``sink``.

    A tool result on a line of ``long_lines`` is read exactly.
    """
    loads = _loads
    decode_error = _JSONDecodeError
    kept: list[int] = []
    keep = kept.append
    blank = 0
    add_id, add_role, add_content = sink.ids.append, sink.roles.append, sink.contents.append
    add_name, add_stamp = sink.names.append, sink.stamps.append
    add_call_id, add_error = sink.call_ids.append, sink.errors.append
    for index, line in enumerate(lines):
        try:
            row = loads(line)
        except decode_error:
            row, is_blank = _refused(line, index in long_lines)
            if row is None:
                blank += is_blank
                continue
        try:
            ident = row["id"]
            role = row["role"]
            content = row["content"]
        except (KeyError, TypeError):
            continue
        if type(ident) is str and ident and type(role) is str:
            if type(content) is str:
                if role == "tool":
                    add_call_id(row.get("tool_call_id"))
                    add_error(row.get("is_error"))
            elif role == "tool":
                if index in long_lines:
                    content = _exact_content(line, content)
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
    return kept, blank
