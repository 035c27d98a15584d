"""Conversation records and the ``murmur:conversation/read@0.1.0`` read API.

The runtime appends one JSON object per line to ``<home>/conversations/<context-id>.jsonl``
and is the only writer. :class:`ConversationReader.read_messages` serves that record newest
first in pages of at most 100, as the WIT seed says. A position is a message's index from the
oldest, so appends never move it and a walk concurrent with appends never repeats or skips.
A page is a pipeline: bring the record's index up to date (:mod:`.index`, one ``stat`` when
nothing moved), turn the cursor into positions, read and decode just those lines
(:mod:`.messages`). A read made on a guest's behalf carries a
:class:`~murmur_nb._conversations.budget.ReadBudget`: its page is cut, from the index's byte
offsets and before any line is read, to what the guest's memory can hold, and the scan and
the decoding stop at the call's deadline (:mod:`.budget` says why). A rewritten record is a
new generation: older cursors are ``invalid-cursor``. ``unavailable: <reason>`` names the
context, never a host path, since a guest may receive it verbatim.
"""

from __future__ import annotations

import json
import operator
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._conversations.budget import ReadBudget
from murmur_nb._conversations.cursor import CursorCodec
from murmur_nb._conversations.index import (
    OPEN_FLAGS,
    Columns,
    LineTooLarge,
    ProgressCallback,
    RecordChanged,
    RecordIndex,
    Row,
    Walk,
)
from murmur_nb._conversations.messages import (
    Message,
    MessagePage,
    lowered_size,
    messages_of,
    read_rows,
)
from murmur_nb._exceptions import ConversationReadError, InvalidContextId
from murmur_nb._rules import PLAIN_ID_RE
from murmur_nb._rules import murmur_home as default_home

__all__ = [
    "CONTEXT_ID_PATTERN",
    "MAX_PAGE",
    "ConversationReader",
    "ConversationStore",
    "Message",
    "MessagePage",
    "RecordSummary",
    "check_as_of",
    "check_context_id",
    "default_home",
    "summarize_record",
    "walk_record",
]

CONTEXT_ID_PATTERN = PLAIN_ID_RE
"""What a context id must match in full (SPEC §3); it is a plain name, never a path."""

MAX_PAGE = 100
"""``limit`` is clamped to ``1..=MAX_PAGE``."""

Served = tuple[list[Row] | None, str | None, int, int]
"""What serving one page gives: ``(rows, next_cursor, total, start)``."""


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


def check_as_of(as_of: object) -> None:
    """Refuse an ``as_of`` that counts no messages (a bool is no count either)."""
    if as_of is not None and (type(as_of) is not int or as_of < 0):
        raise ValueError(
            f"as_of={as_of!r}: give the number of messages (at least 0) the record held at the "
            "moment to read it as of, or leave it out (None) for the record as it is"
        )


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

    Raises
    ------
    ValueError
        ``home`` is a file (a record's path given for its home, say): it listed no record.

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
        if self.home.exists() and not self.home.is_dir():
            raise ValueError(
                f"home={str(self.home)!r} is a file, not a murmur home: pass the folder that "
                "holds (or will hold) conversations/<context-id>.jsonl"
            )
        self._codec = CursorCodec(cursor_key)
        self._indexes: dict[str, RecordIndex] = {}
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

    def reader(
        self, context_id: str | None, *, granted: bool = True, as_of: int | None = None
    ) -> ConversationReader:
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
        as_of
            Read the record as it stood when it held its first ``as_of`` messages (a
            replay's growth window): later messages are not served, ``total`` counts at
            most ``as_of``, and a cursor past it is ``invalid-cursor``. ``None`` (the
            default): the record as it is at each read.

        Raises
        ------
        InvalidContextId
            ``context_id`` is not a plain context name; nothing was touched.
        ValueError
            ``as_of`` is not a whole number of at least 0.
        """
        check_as_of(as_of)
        if context_id is None:
            return ConversationReader.empty(granted=granted)
        path = self.record_path(context_id)
        return ConversationReader(self, context_id, path, granted=granted, as_of=as_of)

    def contexts(self) -> list[str]:
        """Sorted context ids that have a record: a regular ``<id>.jsonl`` file.

        What every read refuses is left out: a symbolic link (even to a regular file; a
        record is never read through a link), a folder, a FIFO.

        Raises
        ------
        ConversationReadError
            ``unavailable`` when the conversations folder exists but cannot be listed
            (no read or search permission, say); the message names the folder and the fix.
        """
        try:
            entries = list(os.scandir(self.folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ConversationReadError(
                "unavailable",
                f"the conversations folder {str(self.folder)!r} cannot be listed: {reason}; "
                "give this user read and search (r-x) permission on it, or run as its owner",
            ) from exc
        found = []
        for entry in entries:
            stem, dot, suffix = entry.name.rpartition(".")
            if (
                dot
                and suffix == "jsonl"
                and CONTEXT_ID_PATTERN.fullmatch(stem)
                and entry.is_file(follow_symlinks=False)
            ):
                found.append(stem)
        return sorted(found)

    def _index(self, context_id: str, path: Path) -> RecordIndex:
        with self._lock:
            index = self._indexes.get(context_id)
            if index is None:
                index = self._indexes[context_id] = RecordIndex(path)
            return index


class ConversationReader:
    """``read-messages`` over one record, as a hook guest sees it.

    Get one from :meth:`ConversationStore.reader`, or :meth:`empty` for a source with no
    record. Cursors are opaque strings; pass back ``next_cursor`` unmodified.
    """

    __slots__ = ("_as_of", "_context_id", "_granted", "_path", "_store")

    def __init__(
        self,
        store: ConversationStore | None,
        context_id: str | None,
        path: Path | None,
        *,
        granted: bool,
        as_of: int | None = None,
    ) -> None:
        self._store = store
        self._context_id = context_id
        self._path = path
        self._granted = bool(granted)
        self._as_of = as_of  # the record's first messages only: see ConversationStore.reader

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

    def read_messages(
        self, cursor: str | None = None, limit: int = MAX_PAGE, *, budget: ReadBudget | None = None
    ) -> MessagePage:
        """Read one page of the record, newest first.

        Parameters
        ----------
        cursor
            ``None`` to start at the newest message, else the ``next_cursor`` of the page
            just read, unmodified.
        limit
            Clamped to ``1..=100``: ``0`` reads one message.
        budget
            The bounds of a read made on a guest's behalf (a hook's ``read-messages``): the
            page holds only the newest messages that fit the guest's memory and a fixed
            ceiling, and the read stops at the deadline (see :mod:`.budget`).

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
            ``unavailable: <reason>`` when the record exists but cannot be read, or (with a
            ``budget``) when its next message alone is more than the guest's memory.
        ReadDeadline
            With a ``budget``: its deadline passed; what the index scanned is kept.
        """
        for _attempt in range(2):
            rows, next_cursor, total, _ = self._serve(cursor, limit, None, budget)
            try:
                return MessagePage(messages_of(rows or []), next_cursor, total)
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
        self, cursor: object, limit: int, walk: Walk | None, budget: ReadBudget | None, retry: bool
    ) -> Served:
        """The record was rewritten or truncated while serving a page (its index is reset).

        A cursor issued before names a position in a record that no longer exists:
        ``invalid-cursor``. A fresh read starts over once; a record that keeps changing
        under it is ``unavailable``. In a walk (whose cursors are its own) it is
        ``RecordChanged``: the walk's owner starts the whole walk again.
        """
        if walk is not None and (cursor is not None or not retry):
            raise RecordChanged
        if cursor is not None:
            raise ConversationReadError("invalid-cursor") from None
        if retry:
            if walk is not None:
                walk.restart()
            return self._serve(None, limit, walk, budget, _retry=False)
        raise ConversationReadError(
            "unavailable", f"the record of context {self._context_id!r} keeps changing"
        ) from None

    def _serve(
        self, cursor: object, limit: int, walk: Walk | None, budget: ReadBudget | None = None,
        _retry: bool = True,
    ) -> Served:  # fmt: skip
        """Serve one page: ``(rows, next_cursor, total, start)``.

        ``rows`` are the page's decoded record rows, oldest first, from position
        ``start``. In a walk, rows at or above ``walk.sink_base`` are not decoded again:
        they are left out (and ``rows`` is ``None`` when that is the whole page). With a
        ``budget`` the page is cut to it before a line is read.
        """
        if not self._granted:
            raise ConversationReadError("not-granted")
        limit = _clamp(limit)
        store, path, context_id = self._store, self._path, self._context_id
        if store is None or path is None or context_id is None:
            return _no_record(cursor)
        index = store._index(context_id, path)
        with index.lock:
            try:
                found = _sync(index, path, context_id, walk, budget)
            except RecordChanged:
                index.forget()
                return self._changed_under(cursor, limit, walk, budget, _retry)
            if not found:
                return _no_record(cursor)
            page = _locate(
                store._codec, context_id, index, cursor, limit=limit, walk=walk, budget=budget,
                as_of=self._as_of,
            )
        return self._decode(page, path, cursor=cursor, limit=limit, walk=walk, budget=budget,
                            retry=_retry)  # fmt: skip

    def _decode(
        self,
        page: _PageSpan,
        path: Path,
        *,
        cursor: object,
        limit: int,
        walk: Walk | None,
        budget: ReadBudget | None,
        retry: bool,
    ) -> Served:
        """Read and decode the lines of ``page`` (none when the walk already holds them);
        with a ``budget``, only while its deadline has not passed."""
        if page.covered:
            return None, page.next_cursor, page.total, page.start
        if not page.starts:
            return [], page.next_cursor, page.total, page.start
        if budget is not None:
            budget.check()
        try:
            rows, nbytes = read_rows(path, page.ident, page.starts, page.ends, page.long_rows)
        except RecordChanged:
            self._invalidate()
            return self._changed_under(cursor, limit, walk, budget, retry)
        except OSError as exc:
            raise _unavailable(str(self._context_id), exc) from exc
        if walk is not None and walk.on_bytes is not None:
            walk.on_bytes(nbytes)
        if budget is not None:
            budget.check()
            return self._fit(rows, page, budget)
        return rows, page.next_cursor, page.total, page.start

    def _fit(self, rows: list[Row], page: _PageSpan, budget: ReadBudget) -> Served:
        """The page cut to what the guest receives, now that it is known: the page was sized
        from its record lines, and a tool result's envelope can be several times its line
        (``1e15`` is written back as ``1000000000000000.0``)."""
        import numpy as np  # noqa: PLC0415 - numpy loads on the first read

        if all(row["role"] != "tool" for row in rows):
            # only a tool result is written back longer than its line: no page of other
            # messages is decoded twice for the guest (a replay's every read)
            return rows, page.next_cursor, page.total, page.start
        sizes = np.array([lowered_size(m) for m in messages_of(rows)[::-1]], dtype=np.int64)
        fits = budget.fitting(sizes)
        if fits == len(rows):
            return rows, page.next_cursor, page.total, page.start
        if not fits:
            message_id = repr(str(rows[-1]["id"]))
            raise _too_large_error(
                f"message {message_id}", int(sizes[-1]), str(self._context_id), budget
            )
        cut = len(rows) - fits
        codec = self._store._codec if self._store is not None else None
        if codec is None:  # pragma: no cover - a page with rows has a store
            raise AssertionError("a page with rows has a store")
        start = page.start + cut
        return rows[cut:], codec.encode(start, page.scope), page.total, start


def walk_record(
    reader: ConversationReader, on_bytes: ProgressCallback | None = None, *,
    walk: Walk | None = None,
) -> Columns:  # fmt: skip
    """Walk every page from ``cursor=None`` until no cursor; return what they held.

    The pages tile ``[0, T)`` newest first, ``T`` being the first page's ``total``;
    the result holds those messages oldest first, as columns. ``on_bytes`` is called
    with the number of record bytes each step read (for a progress bar). ``walk``, when
    given, is the walk's state, for what else it found (``walk.skipped``).

    Raises ``RecordChanged`` when the record was rewritten during the walk (its pages no
    longer tile one record): start again with a fresh ``Walk``.
    """
    walk = walk if walk is not None else Walk(on_bytes)
    decoded: list[list[Row]] = []
    cursor: str | None = None
    while True:
        try:
            rows, cursor, _, _ = reader._serve(cursor, MAX_PAGE, walk)
        except ConversationReadError as exc:
            if cursor is not None and exc.code == "invalid-cursor":
                raise RecordChanged from exc  # the walk's own cursor: a new generation
            raise
        if rows:
            decoded.append(rows)
        if cursor is None:
            break
    if not decoded and walk.sink is not None:
        return walk.sink
    out = Columns()
    try:
        for rows in reversed(decoded):
            out.extend(rows)
    except (KeyError, TypeError, AttributeError):
        # A line changed in place after it was indexed: the record was rewritten.
        reader._invalidate()
        raise RecordChanged from None
    if walk.sink is not None:
        out.extend_columns(walk.sink)
    return out


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """What a record's index knows without decoding a page: how many messages the record
    holds, their roles, and its complete lines that are not messages (blank ones aside), as
    :func:`murmur_nb.read_conversation` counts them; and the id of its newest message
    (``None`` when it holds none), which tells that record from one rewritten since."""

    messages: int
    roles: frozenset[str]
    skipped_lines: int
    last_id: str | None = None


def summarize_record(reader: ConversationReader) -> RecordSummary:
    """The record of ``reader`` as it stands now: one parse of each line not yet indexed,
    no page decoded beyond the newest message.

    Raises ``ConversationReadError`` as ``read_messages`` does (``unavailable``,
    ``not-granted``).
    """
    store, path, context_id = reader._store, reader._path, reader._context_id
    page = reader.read_messages(None, 1)  # brings the index up to date, with its retries
    if store is None or path is None or context_id is None:
        return RecordSummary(0, frozenset(), 0)
    index = store._index(context_id, path)
    with index.lock:  # the figures of one generation, read together
        count = index.count
        last_id = page.messages[0].id if page.messages else None
        if count != page.total:  # appended to (or rewritten) since: its newest message moved
            last_id = _newest_id(index, path, context_id) if count else None
        return RecordSummary(count, frozenset(index.roles), index.skipped, last_id)


def _newest_id(index: RecordIndex, path: Path, context_id: str) -> str:
    """The id of the newest message ``index`` (synced, locked) knows of."""
    try:
        rows, _ = read_rows(path, index.ident, *index.offsets(index.count - 1, index.count))
        return str(rows[0]["id"])
    except (RecordChanged, OSError, KeyError, TypeError) as exc:
        raise ConversationReadError(
            "unavailable", f"the record of context {context_id!r} keeps changing"
        ) from exc


@dataclass(frozen=True, slots=True)
class _PageSpan:
    """Where one page lies: the answer's fields and the byte offsets still to decode.

    ``covered`` means a walk's kept columns already hold every message of the page;
    ``scope`` is what its cursors are minted for.
    """

    start: int
    next_cursor: str | None
    total: int
    ident: tuple[int, int] | None
    starts: list[int]
    ends: list[int]
    long_rows: list[int]
    covered: bool
    scope: bytes


def _locate(
    codec: CursorCodec,
    context_id: str,
    index: RecordIndex,
    cursor: object,
    *,
    limit: int,
    walk: Walk | None,
    budget: ReadBudget | None = None,
    as_of: int | None = None,
) -> _PageSpan:
    """Where the page named by ``cursor`` lies in the (synced, locked) ``index``, cut to
    ``budget`` when one is given; with ``as_of``, in the record's first ``as_of`` messages."""
    total = index.count if as_of is None else min(index.count, as_of)
    scope = context_id.encode() + b"\0" + (index.token or b"")
    if cursor is None:
        end = total
    else:
        end = codec.decode(cursor, scope)
        if index.token is None or not 0 < end <= total:
            raise ConversationReadError("invalid-cursor")
    start = max(0, end - limit)
    if budget is not None and end > start:
        fits = budget.fitting(index.sizes(start, end))
        if not fits:
            raise _too_large(index, end - 1, context_id, budget)
        start = end - fits
    next_cursor = codec.encode(start, scope) if start > 0 else None
    stop = end
    if walk is not None and walk.sink is not None:
        stop = max(start, min(end, walk.sink_base))
        if stop == start:
            return _PageSpan(start, next_cursor, total, index.ident, [], [], [], True, scope)
    starts, ends, long_rows = index.offsets(start, stop) if stop > start else ([], [], [])
    return _PageSpan(start, next_cursor, total, index.ident, starts, ends, long_rows, False, scope)


def _clamp(limit: int) -> int:
    """``limit`` clamped to ``1..=MAX_PAGE``; anything but an integer is a ``TypeError``."""
    try:
        limit = operator.index(limit)
    except TypeError:
        raise TypeError(f"limit must be an integer, not {type(limit).__name__}") from None
    return 1 if limit < 1 else min(limit, MAX_PAGE)


def _no_record(cursor: object) -> Served:
    """The answer when there is no record: an empty page, and no position a cursor names."""
    if cursor is not None:
        raise ConversationReadError("invalid-cursor")
    return [], None, 0, 0


def _sync(
    index: RecordIndex, path: Path, context_id: str, walk: Walk | None,
    budget: ReadBudget | None = None,
) -> bool:  # fmt: skip
    """Bring ``index`` up to date with the record at ``path``; ``False`` when there is none.

    Raises ``RecordChanged`` when the record changed under the scan, ``unavailable`` when
    it exists but cannot be read, and ``ReadDeadline`` when ``budget``'s deadline passed.
    """
    try:
        st = path.lstat()  # a link is never followed: it is reported, not read
    except FileNotFoundError:
        index.forget()
        return False
    except OSError as exc:
        raise _unavailable(context_id, exc) from exc
    if not stat.S_ISREG(st.st_mode):
        raise ConversationReadError(
            "unavailable", f"the record of context {context_id!r} is {_record_kind(st)}"
        )
    try:
        index.sync(st, walk if walk is not None and walk.sink_base < 0 else None, budget)
    except OSError as exc:
        raise _unavailable(context_id, exc) from exc
    except LineTooLarge as exc:
        if budget is None:  # pragma: no cover - only a scan with a budget raises it
            raise
        raise _too_large_error(
            "the line " + _line_name(exc.head, "", "of message ") + f"at byte {exc.offset}",
            exc.size, context_id, budget,
        ) from exc
    return True


_ID_PREFIX = re.compile(rb'\{\s*"id"\s*:\s*("(?:[^"\\]|\\.){1,200}")')
"""The runtime writes ``id`` first: enough of a line to name a message too large to read."""


def _too_large(
    index: RecordIndex, position: int, context_id: str, budget: ReadBudget
) -> ConversationReadError:
    """``unavailable``: the message at ``position`` alone is more than the guest's memory.

    The message is named by its id when its line starts with it (as the runtime writes
    it), read from the line's first bytes only; else by its position.
    """
    starts, ends, _ = index.offsets(position, position + 1)
    size = ends[0] - starts[0]
    try:
        fd = os.open(index.path, OPEN_FLAGS)
        try:
            head = os.pread(fd, min(size, 512), starts[0])
        finally:
            os.close(fd)
    except OSError:
        head = b""
    name = _line_name(head, f"number {position + 1} (counted from the oldest)")
    return _too_large_error(f"message {name}", size, context_id, budget)


def _line_name(head: bytes, otherwise: str, before: str = "") -> str:
    """The id a record line starting with ``head`` gives, quoted, after ``before`` (and a
    space when ``before`` is given); else ``otherwise``."""
    found = _ID_PREFIX.match(head)
    if found is not None:
        try:
            name = repr(json.loads(found.group(1)))
        except ValueError:
            return otherwise
        return f"{before}{name} " if before else name
    return otherwise


def _too_large_error(
    name: str, size: int, context_id: str, budget: ReadBudget
) -> ConversationReadError:
    return ConversationReadError(
        "unavailable",
        f"{name} of the record of context {context_id!r} is "
        f"{_mib(size)} MiB, more than this hook's memory limit of "
        f"{_mib(budget.memory_bytes)} MiB; raise limits.memory_mib for this hook in "
        "murmur.yaml to read it",
    )


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f}".removesuffix(".0")


def _record_kind(st: os.stat_result) -> str:
    """What a record path that is not a regular file is, for the ``unavailable`` reason."""
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link; records are read only as regular files"
    return "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"


def _unavailable(context_id: str, exc: OSError) -> ConversationReadError:
    reason = exc.strerror or type(exc).__name__
    return ConversationReadError(
        "unavailable", f"the record of context {context_id!r} cannot be read: {reason}"
    )
