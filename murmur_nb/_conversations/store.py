"""Conversation records and the ``murmur:conversation/read@0.1.0`` read API.

The runtime appends one JSON object per line to ``<home>/conversations/<context-id>.jsonl``
and is the only writer. :class:`ConversationReader.read_messages` serves that record
newest first in pages of at most 100, exactly as the WIT seed says.

Design notes
------------
*Positions, not offsets from the end.* A message's position is its index among the
record's messages counted from the oldest (0). Appends never move a position, so a
cursor that names "the page ending before position p" means the same messages however
much was appended since: a walk concurrent with appends never repeats and never skips,
and ``total`` is simply the number of messages at serve time.

*An incremental index per record.* Counting messages means parsing every line once,
which is the expensive part; doing it on every call would make a walk O(N^2). Each
record gets a :class:`_RecordIndex` holding the byte offsets of its complete message
lines (two growable int64 arrays) and how far it has scanned. A call costs one
``stat``; only when the size or mtime moved does it re-check the record's identity
(device and inode, the bytes of its first line, the bytes just before the scanned
end) and scan the appended tail. A record that was replaced, truncated or rewritten
under the index starts a new generation: the index is rebuilt and every cursor issued
for the old generation is ``invalid-cursor``. A last line without its newline is a
line the runtime is still writing: it is not scanned, not counted, and picked up by
the next call once complete.

*Parse only the page.* Serving a page reads just its lines (one ``pread`` when they are
contiguous) and decodes them in a single ``orjson`` call: every line was already
checked to be one JSON object on its own, so joining them into an array is safe.

*Errors cross into guests.* Reasons in ``unavailable: <reason>`` name the context, never
a host path, because a hook guest may receive them verbatim.
"""

from __future__ import annotations

import hashlib
import operator
import os
import re
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from murmur_nb._conversations.cursor import CursorCodec
from murmur_nb._exceptions import ConversationReadError, InvalidContextId

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CONTEXT_ID_PATTERN",
    "MAX_PAGE",
    "ConversationReader",
    "ConversationStore",
    "Message",
    "MessagePage",
    "check_context_id",
    "default_home",
]

CONTEXT_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""What a context id must match in full (SPEC §3); it is a plain name, never a path."""

MAX_PAGE = 100
"""``limit`` is clamped to ``1..=MAX_PAGE``."""

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_FIRST_CHUNK = 8 << 20
_HEAD_BYTES = 256
_TAIL_BYTES = 64
_loads = orjson.loads
_dumps = orjson.dumps
_JSONDecodeError = orjson.JSONDecodeError

Row = dict[str, Any]
ProgressCallback = Callable[[int], object]


def check_context_id(context_id: object) -> str:
    """Return ``context_id`` if it is a plain context name, else raise.

    Checked before anything touches the file system.

    Raises
    ------
    InvalidContextId
        ``context_id`` is not a string matching ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``.

    Examples
    --------
    >>> check_context_id("ctx-1")
    'ctx-1'
    """
    if type(context_id) is not str or CONTEXT_ID_PATTERN.fullmatch(context_id) is None:
        shown = repr(context_id) if len(repr(context_id)) <= 80 else repr(context_id)[:77] + "..."
        raise InvalidContextId(
            f"{shown} is not a context id: a context id is a plain name of 1 to 128 "
            "characters from A-Z a-z 0-9 . _ - starting with a letter or digit, never a path. "
            "Pass the context_id the runtime reported for the task."
        )
    return context_id


def default_home() -> Path:
    """The murmur home: ``$MURMUR_HOME`` when set and non-empty, else ``~/.murmur``."""
    env = os.environ.get("MURMUR_HOME")
    return Path(env).expanduser() if env else Path.home() / ".murmur"


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a record, as ``murmur:hook/lifecycle``'s ``message`` carries it.

    For role ``"tool"``, ``content`` is the tool-message envelope: the compact JSON text
    of ``{"__murmur_tool_msg__": true, "tool_call_id": ..., "is_error": ..., "body": ...}``.
    """

    id: str
    role: str
    content: str
    name: str | None = None
    created_at: str | None = None


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of a record, newest first (``messages[0]`` is the most recent).

    ``next_cursor`` is ``None`` only when the page reached the oldest message; ``total``
    is the number of messages in the whole record when the page was served.
    """

    messages: list[Message]
    next_cursor: str | None
    total: int


def _encode_deep(value: Any) -> bytes:
    """Compact JSON without recursion, for bodies nested deeper than orjson writes."""
    out: list[bytes] = []
    stack: list[Any] = [value]
    literal = _Literal
    while stack:
        item = stack.pop()
        if type(item) is literal:
            out.append(item.text)
        elif type(item) is dict:
            stack.append(literal(b"}"))
            pairs = list(item.items())
            for index in range(len(pairs) - 1, -1, -1):
                key, member = pairs[index]
                stack.append(member)
                stack.append(literal((b"," if index else b"") + _dumps(key) + b":"))
            out.append(b"{")
        elif type(item) is list:
            stack.append(literal(b"]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(literal(b","))
            out.append(b"[")
        else:
            out.append(_dumps(item))
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class _Literal:
    text: bytes


def envelope_text(tool_call_id: Any, is_error: Any, body: Any) -> str:
    """The tool-message envelope for one tool result, as compact JSON text.

    ``tool_call_id`` that is not a string and ``is_error`` that is not a bool become
    ``null``; the keys keep the seed's order.
    """
    envelope = {
        "__murmur_tool_msg__": True,
        "tool_call_id": tool_call_id if type(tool_call_id) is str else None,
        "is_error": is_error if type(is_error) is bool else None,
        "body": body,
    }
    try:
        return _dumps(envelope).decode()
    except orjson.JSONEncodeError:
        return _encode_deep(envelope).decode()


_new_message = object.__new__
# Frozen dataclasses assign through ``object.__setattr__``; the slot descriptors do the
# same assignment at about half the cost, which matters for 100 messages a page.
_set_id, _set_role, _set_content, _set_name, _set_created_at = (
    Message.__dict__[slot].__set__ for slot in Message.__slots__
)


def _messages(rows: list[Row]) -> list[Message]:
    """Messages for decoded record rows, in reverse order (rows are oldest first)."""
    out: list[Message] = []
    append = out.append
    new, envelope = _new_message, envelope_text
    set_id, set_role, set_content = _set_id, _set_role, _set_content
    set_name, set_created_at = _set_name, _set_created_at
    for row in reversed(rows):
        role = row["role"]
        content = row["content"]
        if role == "tool":
            content = envelope(row.get("tool_call_id"), row.get("is_error"), content)
        name = row.get("name")
        created_at = row.get("created_at")
        message = new(Message)
        set_id(message, row["id"])
        set_role(message, role)
        set_content(message, content)
        set_name(message, name if type(name) is str else None)
        set_created_at(message, created_at if type(created_at) is str else None)
        append(message)
    return out


class _RecordChanged(Exception):
    """The record is no longer the generation the index describes."""


class _Columns:
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

    def extend_columns(self, other: _Columns) -> None:
        """Append every message of ``other``."""
        for name in self.__slots__:
            getattr(self, name).extend(getattr(other, name))


@dataclass(slots=True)
class _Walk:
    """State one full walk keeps across its pages (see ``read_conversation``).

    The first page's index scan parses every appended line anyway; the walk keeps what
    it decoded, as columns, so that its pages need not be parsed a second time.
    ``sink`` holds the messages at positions ``sink_base`` onwards; pages below that are
    decoded from the record and handed back as rows.
    """

    on_bytes: ProgressCallback | None = None
    sink: _Columns | None = None
    sink_base: int = -1

    def restart(self) -> None:
        """Drop the kept columns: the record changed and is being indexed afresh."""
        self.sink = None
        self.sink_base = -1


class _RecordIndex:
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

    def sync(self, st: os.stat_result, walk: _Walk | None) -> None:
        """Bring the index up to date with the record whose ``stat`` is ``st``.

        Opens the file only when something moved. Raises ``OSError`` when the record
        cannot be read and ``_RecordChanged`` when it changed under the open.
        """
        ident = (st.st_dev, st.st_ino)
        if ident != self.ident or st.st_size < self.scanned:
            self._reset(ident)
        elif self._seen == (st.st_size, st.st_mtime_ns):
            if walk is not None:
                walk.sink, walk.sink_base = _Columns(), self.count
            return
        fd = os.open(self.path, _OPEN_FLAGS)
        try:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != ident or not stat.S_ISREG(fst.st_mode):
                raise _RecordChanged
            if self.scanned and not self._same_generation(fd, fst.st_size):
                self._reset(ident)
            if walk is not None:
                walk.sink, walk.sink_base = _Columns(), self.count
            self._scan(fd, fst.st_size, walk.sink if walk is not None else None, walk)
            self._seen = (fst.st_size, fst.st_mtime_ns)
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

    def _scan(self, fd: int, size: int, sink: _Columns | None, walk: _Walk | None) -> None:
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
            kept = _messages_in(lines) if sink is None else _messages_into(lines, sink)
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


def _messages_in(lines: list[bytes]) -> list[int]:
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


def _messages_into(lines: list[bytes], sink: _Columns) -> list[int]:
    """Like :func:`_messages_in`, also appending each message's fields to ``sink``."""
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


def _read_rows(
    path: Path, ident: tuple[int, int] | None, starts: list[int], ends: list[int]
) -> tuple[list[Row], int]:
    """Decode the message lines at ``starts``/``ends``; return them and the bytes read."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != ident:
            raise _RecordChanged
        low, high = starts[0], ends[-1]
        span = high - low
        body = sum(ends) - sum(starts)
        if span == body + len(starts) - 1:  # contiguous lines: one read, one decode
            block = os.pread(fd, span, low)
            if len(block) != span:
                raise _RecordChanged
            text = b"[" + block.replace(b"\n", b",") + b"]"
        elif span <= 2 * body + 65536:
            block = os.pread(fd, span, low)
            if len(block) != span:
                raise _RecordChanged
            text = (
                b"["
                + b",".join([block[s - low : e - low] for s, e in zip(starts, ends, strict=True)])
                + b"]"
            )
        else:
            parts = [os.pread(fd, e - s, s) for s, e in zip(starts, ends, strict=True)]
            if sum(map(len, parts)) != body:
                raise _RecordChanged
            text = b"[" + b",".join(parts) + b"]"
    finally:
        os.close(fd)
    try:
        rows = _loads(text)
    except _JSONDecodeError:
        raise _RecordChanged from None
    if len(rows) != len(starts):
        raise _RecordChanged
    return rows, span


class ConversationStore:
    """The conversation records under one murmur home.

    Parameters
    ----------
    home
        The murmur home; ``None`` means ``$MURMUR_HOME``, else ``~/.murmur``. Records live
        at ``<home>/conversations/<context-id>.jsonl``.
    cursor_key
        Secret key for cursors (16 to 64 bytes). By default each store draws a random
        one, so a cursor is only accepted by readers of the store that issued it. Pass
        the same key to several stores to let cursors move between them.

    Notes
    -----
    The store keeps one incremental index per record it has served, so keep one store
    for as long as you read (a hook host: one per host) rather than one per call.
    It is safe to use from several threads.
    """

    def __init__(
        self, home: str | os.PathLike[str] | None = None, *, cursor_key: bytes | None = None
    ) -> None:
        self.home = Path(home).expanduser() if home is not None else default_home()
        self._codec = CursorCodec(cursor_key)
        self._indexes: dict[str, _RecordIndex] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ConversationStore(home={str(self.home)!r})"

    @property
    def folder(self) -> Path:
        """``<home>/conversations``, where the records live."""
        return self.home / "conversations"

    def record_path(self, context_id: str) -> Path:
        """Path of the record of ``context_id`` (validated first; it may not exist)."""
        return self.folder / f"{check_context_id(context_id)}.jsonl"

    def reader(self, context_id: str | None, *, granted: bool = True) -> ConversationReader:
        """A reader of the record of ``context_id``.

        Parameters
        ----------
        context_id
            The context the current task belongs to. ``None`` means there is no record
            (before the first task, or ``inference.transport: process``): every read is
            an empty page with ``total`` 0.
        granted
            Whether the reader holds ``capabilities.conversation.read: true``. When
            ``False`` every read raises ``not-granted``.

        Raises
        ------
        InvalidContextId
            ``context_id`` is not a plain context name; nothing was touched.
        """
        if context_id is None:
            return ConversationReader.empty(granted=granted)
        path = self.record_path(context_id)
        return ConversationReader(self, context_id, path, granted=granted)

    def contexts(self) -> list[str]:
        """Sorted context ids that have a record (a regular ``<id>.jsonl`` file)."""
        try:
            entries = list(os.scandir(self.folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in entries:
            stem, dot, suffix = entry.name.rpartition(".")
            if dot and suffix == "jsonl" and CONTEXT_ID_PATTERN.fullmatch(stem) and entry.is_file():
                found.append(stem)
        return sorted(found)

    def _index(self, context_id: str, path: Path) -> _RecordIndex:
        with self._lock:
            index = self._indexes.get(context_id)
            if index is None:
                index = self._indexes[context_id] = _RecordIndex(path)
            return index


class ConversationReader:
    """``read-messages`` over one record, as a hook guest sees it.

    Get one from :meth:`ConversationStore.reader`, or :meth:`empty` for a source with no
    record. Cursors are opaque strings; pass back ``next_cursor`` unmodified.
    """

    __slots__ = ("_context_id", "_granted", "_path", "_store")

    def __init__(
        self,
        store: ConversationStore | None,
        context_id: str | None,
        path: Path | None,
        *,
        granted: bool,
    ) -> None:
        self._store = store
        self._context_id = context_id
        self._path = path
        self._granted = bool(granted)

    @classmethod
    def empty(cls, *, granted: bool = True) -> ConversationReader:
        """A reader with no record behind it (process transport, or no task yet).

        Every read succeeds with an empty page, ``total`` 0 and no cursor; a cursor
        passed to it names a position outside an empty record, so it is
        ``invalid-cursor``. Ungranted, every read is still ``not-granted``.
        """
        return cls(None, None, None, granted=granted)

    @property
    def context_id(self) -> str | None:
        """The context whose record this reads, or ``None`` for an empty source."""
        return self._context_id

    @property
    def granted(self) -> bool:
        return self._granted

    def __repr__(self) -> str:
        return f"ConversationReader(context_id={self._context_id!r}, granted={self._granted})"

    def read_messages(self, cursor: str | None = None, limit: int = MAX_PAGE) -> MessagePage:
        """Read one page of the record, newest first.

        Parameters
        ----------
        cursor
            ``None`` to start at the newest message, else the ``next_cursor`` of the page
            just read, unmodified.
        limit
            Clamped to ``1..=100``: ``0`` reads one message.

        Returns
        -------
        MessagePage
            ``next_cursor`` is ``None`` only when the page reached the oldest message;
            loop until then. ``total`` may grow between pages while the runtime appends.

        Raises
        ------
        ConversationReadError
            ``not-granted``; ``invalid-cursor`` (malformed, altered, another record's,
            beyond this record, or issued before the record was rewritten);
            ``unavailable: <reason>`` when the record exists but cannot be read.
        """
        for _attempt in range(2):
            rows, next_cursor, total, _ = self._serve(cursor, limit, None)
            try:
                return MessagePage(_messages(rows or []), next_cursor, total)
            except (KeyError, TypeError, AttributeError):
                # A line changed in place since it was indexed: the runtime never does
                # that, so the record was rewritten. Re-index and try once more.
                self._invalidate()
                if cursor is not None:
                    raise ConversationReadError("invalid-cursor") from None
        raise ConversationReadError(
            "unavailable", f"the record of context {self._context_id!r} keeps changing"
        )

    def _invalidate(self) -> None:
        if self._store is not None and self._context_id is not None and self._path is not None:
            index = self._store._index(self._context_id, self._path)
            with index.lock:
                index.forget()

    def _changed_under(
        self, cursor: object, limit: int, walk: _Walk | None, retry: bool
    ) -> tuple[list[Row] | None, str | None, int, int]:
        """The record was rewritten or truncated while serving a page (its index is reset).

        A cursor issued before names a position in a record that no longer exists:
        ``invalid-cursor``. A fresh read starts over once; a record that keeps changing
        under it is ``unavailable``.
        """
        if cursor is not None:
            raise ConversationReadError("invalid-cursor") from None
        if retry:
            if walk is not None:
                walk.restart()
            return self._serve(None, limit, walk, _retry=False)
        raise ConversationReadError(
            "unavailable", f"the record of context {self._context_id!r} keeps changing"
        ) from None

    def _serve(
        self, cursor: object, limit: int, walk: _Walk | None, _retry: bool = True
    ) -> tuple[list[Row] | None, str | None, int, int]:
        """Serve one page: ``(rows, next_cursor, total, start)``.

        ``rows`` are the page's decoded record rows, oldest first, from position
        ``start``. In a walk, rows at or above ``walk.sink_base`` are not decoded again:
        they are left out (and ``rows`` is ``None`` when that is the whole page).
        """
        if not self._granted:
            raise ConversationReadError("not-granted")
        try:
            limit = operator.index(limit)
        except TypeError:
            raise TypeError(f"limit must be an integer, not {type(limit).__name__}") from None
        limit = 1 if limit < 1 else min(limit, MAX_PAGE)
        store, path, context_id = self._store, self._path, self._context_id
        if store is None or path is None or context_id is None:
            if cursor is not None:
                raise ConversationReadError("invalid-cursor")
            return [], None, 0, 0
        index = store._index(context_id, path)
        with index.lock:
            try:
                st = path.stat()
            except FileNotFoundError:
                index.forget()
                if cursor is not None:
                    raise ConversationReadError("invalid-cursor") from None
                return [], None, 0, 0
            except OSError as exc:
                raise _unavailable(context_id, exc) from exc
            if not stat.S_ISREG(st.st_mode):
                kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                raise ConversationReadError(
                    "unavailable", f"the record of context {context_id!r} is {kind}"
                )
            try:
                index.sync(st, walk if walk is not None and walk.sink_base < 0 else None)
            except _RecordChanged:
                index.forget()
                return self._changed_under(cursor, limit, walk, _retry)
            except OSError as exc:
                raise _unavailable(context_id, exc) from exc
            total = index.count
            scope = context_id.encode() + b"\0" + (index.token or b"")
            if cursor is None:
                end = total
            else:
                end = store._codec.decode(cursor, scope)
                if index.token is None or not 0 < end <= total:
                    raise ConversationReadError("invalid-cursor")
            start = max(0, end - limit)
            next_cursor = store._codec.encode(start, scope) if start > 0 else None
            ident = index.ident
            stop = end
            if walk is not None and walk.sink is not None:
                stop = max(start, min(end, walk.sink_base))
                if stop == start:
                    return None, next_cursor, total, start
            starts, ends = index.offsets(start, stop) if stop > start else ([], [])
        if not starts:
            return [], next_cursor, total, start
        try:
            rows, nbytes = _read_rows(path, ident, starts, ends)
        except _RecordChanged:
            self._invalidate()
            return self._changed_under(cursor, limit, walk, _retry)
        except OSError as exc:
            raise _unavailable(context_id, exc) from exc
        if walk is not None and walk.on_bytes is not None:
            walk.on_bytes(nbytes)
        return rows, next_cursor, total, start

    def _walk(self, on_bytes: ProgressCallback | None = None) -> _Columns:
        """Walk every page from ``cursor=None`` until no cursor; return what they held.

        The pages tile ``[0, T)`` newest first, ``T`` being the first page's ``total``;
        the result holds those messages oldest first, as columns.
        """
        walk = _Walk(on_bytes)
        decoded: list[list[Row]] = []
        cursor: str | None = None
        while True:
            rows, cursor, _, _ = self._serve(cursor, MAX_PAGE, walk)
            if rows:
                decoded.append(rows)
            if cursor is None:
                break
        if not decoded and walk.sink is not None:
            return walk.sink
        out = _Columns()
        try:
            for rows in reversed(decoded):
                out.extend(rows)
        except (KeyError, TypeError, AttributeError):
            # A line changed in place after it was indexed: the record was rewritten.
            self._invalidate()
            raise ConversationReadError("invalid-cursor") from None
        if walk.sink is not None:
            out.extend_columns(walk.sink)
        return out


def _unavailable(context_id: str, exc: OSError) -> ConversationReadError:
    reason = exc.strerror or type(exc).__name__
    return ConversationReadError(
        "unavailable", f"the record of context {context_id!r} cannot be read: {reason}"
    )
