"""Append to a conversation record the way the runtime does.

The runtime is the only writer of a record; this writer exists for demos, tests and
benchmarks, and is never offered to hooks. Each message is one compact JSON object
and its newline, written with a single ``write`` on a descriptor opened with
``O_APPEND``, so a concurrent reader sees either the whole line or a prefix of it
without its newline (which readers skip until it is complete). :meth:`RecordWriter.append_raw`
writes arbitrary bytes, which is how tests land a partial line or a line that is not
a message.

*Never through a link.* The record is opened beneath ``<home>/conversations`` (itself opened
without following a link) with ``O_NOFOLLOW``, then ``fstat``-checked: a record that is a
symbolic link, has several hard links or is not a regular file is refused before a byte is
written (code ``unavailable``), so nothing outside the store is ever changed through it.
"""

from __future__ import annotations

import errno
import math
import os
import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from murmur_nb._conversations.store import ConversationStore, check_context_id
from murmur_nb._conversations.tool_envelope import dumps_exact
from murmur_nb._exceptions import MurmurError
from murmur_nb._files.beneath import one_file_problem
from murmur_nb._rules import RFC3339_RE, rfc3339_instant

__all__ = ["RecordWriter"]

_FLUSH_AT = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO planted as the record fails or is refused instead of blocking the open
_RECORD_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK
# numpy numbers and arrays in a tool result are written as the plain JSON they hold
_DUMPS_OPTION = orjson.OPT_SERIALIZE_NUMPY
_PLAIN = frozenset({str, int, bool, type(None)})


def _not_finite(value: Any) -> str | None:
    """The first NaN or infinity inside ``value`` (nested lists, dicts, numpy values), or ``None``.

    A numpy value is looked into as the plain value it is written as.
    """
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return repr(item)
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif type(item) not in _PLAIN and hasattr(item, "tolist"):  # numpy, as written
            pending.append(item.tolist())
    return None


def _absent(value: Any) -> bool:
    """Whether ``value`` is missing: ``None``, or pandas' ``NA`` / ``NaT`` (what a frame's
    empty cell holds), which is written as not given, as ``None`` is."""
    return value is None or (
        type(value).__name__ in {"NAType", "NaTType"}
        and type(value).__module__.startswith("pandas")
    )


def _numpy_bool(value: object) -> bool:
    """Whether ``value`` is a numpy boolean scalar (``np.True_``), which is a bool to JSON."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in {"bool", "bool_"}


def _type_name(value: object) -> str:
    """``value``'s type as a user would write it: ``numpy.int64``, not a bare ``int64``."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _check_keys(id: object, name: object, tool_call_id: object, is_error: object) -> None:
    """Refuse the optional keys SPEC §3 types, before a line the reader would drop is written."""
    if not isinstance(id, str) or not id:
        given = repr(id) if isinstance(id, str) else f"{_type_name(id)} ({id!r})"
        raise (ValueError if isinstance(id, str) else TypeError)(
            f"id must be a non-empty string, not {given}: the reader skips a line without "
            "one, so the message would be lost; pass a string (for example str(id)), or "
            "None for a fresh id"
        )
    for key, value in (("name", name), ("tool_call_id", tool_call_id)):
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"{key} must be a string, not {_type_name(value)} ({value!r}): the "
                f"reader would drop it; pass str({key}), or None to leave it out"
            )
    if is_error is not None and type(is_error) is not bool:
        raise TypeError(
            f"is_error must be True, False or None, not {_type_name(is_error)} "
            f"({is_error!r}): the reader would drop it; pass bool(is_error), or None to "
            "leave it out"
        )


def _dumps_line(line: dict[str, Any], extra: Mapping[str, Any] | None) -> bytes:
    """``line`` as compact JSON; what JSON cannot carry is refused naming its key."""
    try:
        return dumps_exact(line, _DUMPS_OPTION)
    except orjson.JSONEncodeError as exc:
        field = "content"
        if extra:
            try:
                dumps_exact(line["content"], _DUMPS_OPTION)
            except orjson.JSONEncodeError:
                pass
            else:
                field = "extra"
        raise TypeError(
            f"the {field} of message {line['id']!r} is not JSON ({exc}); pass dicts with "
            "string keys, lists, strings, numbers, booleans and None (numpy numbers and "
            "arrays are written as the plain JSON they hold)"
        ) from exc


def _timestamp(value: datetime | str) -> str:
    if isinstance(value, str):
        if RFC3339_RE.fullmatch(value) is None:
            raise ValueError(
                f"created_at {value!r} is not an RFC 3339 time with its zone (like "
                "'2026-01-02T03:04:05Z'), so a frame would read it as NaT; pass one, an aware "
                "datetime, or write the line as it is with append_raw"
            )
        if rfc3339_instant(value) is None:
            raise ValueError(
                f"created_at {value!r} names no instant Python or pandas can hold (a month or "
                "day past the calendar, or a leap second :60), so a frame would read it as "
                "NaT; pass the time it stands for (a leap second as :59.999999)"
            )
        return value
    if value.tzinfo is None:
        raise ValueError(
            f"created_at {value!r} has no time zone; pass an aware datetime "
            "(for example datetime.now(UTC)) or an RFC 3339 string"
        )
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class RecordWriter:
    """Append messages to ``<home>/conversations/<context_id>.jsonl``.

    Parameters
    ----------
    home
        A murmur home folder, a :class:`ConversationStore`, or ``None`` for the default
        home (``$MURMUR_HOME``, else ``~/.murmur``).
    context_id
        The record's context id (a plain name; validated before anything is created).
    buffered
        ``False`` (the default) writes each line with one ``write``, as the runtime does.
        ``True`` collects lines and writes them in large blocks (fast, for benchmarks);
        lines become visible on :meth:`flush`, :meth:`close`, or every megabyte.
    stamp
        Fill ``created_at`` with the current UTC time when a message gives none. A given
        ``created_at`` is an aware ``datetime`` or an RFC 3339 string with its zone; a tool
        result holds no NaN or infinity (JSON has none). :meth:`append_raw` writes any line.

    Raises
    ------
    MurmurError
        Code ``unavailable`` when the record (or the ``conversations`` folder) is a symbolic
        link, the record has more than one hard link or is not a regular file: nothing is
        written through it, and the message names the record and the reason.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as home, RecordWriter(home, "ctx-1") as writer:
    ...     writer.append("user", "hello", id="m1", created_at="2026-01-01T00:00:00Z")
    'm1'
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | ConversationStore | None,
        context_id: str,
        *,
        buffered: bool = False,
        stamp: bool = True,
    ) -> None:
        check_context_id(context_id)
        store = home if isinstance(home, ConversationStore) else ConversationStore(home)
        self.context_id = context_id
        self.path: Path = store.record_path(context_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = _open_record(self.path, context_id)
        self._buffered = buffered
        self._stamp = stamp
        self._pending = bytearray()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "closed" if self._fd is None else "open"
        return f"RecordWriter({self.context_id!r}, {state})"

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._fd is None

    def encode(
        self,
        role: str,
        content: Any,
        *,
        id: str | None = None,
        name: str | None = None,
        created_at: datetime | str | None = None,
        tool_call_id: str | None = None,
        is_error: bool | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> bytes:
        """The record line :meth:`append` would write, newline included.

        Keys whose value is ``None`` are left out, as the runtime does. ``content`` must
        be a string unless ``role`` is ``"tool"``, whose content is any JSON value (numpy
        numbers and arrays are written as the plain JSON they hold; integers of any size
        exactly). ``id`` is a non-empty string, ``name`` and ``tool_call_id`` strings and
        ``is_error`` a bool, numpy's included (SPEC §3): any other value is refused, as
        the reader would drop the line or the key. A missing value of pandas (``pd.NA``,
        ``pd.NaT``: a frame's empty cell) is not given, as ``None`` is.
        """
        if not isinstance(role, str):
            raise TypeError(f"role must be a string, not {type(role).__name__}")
        if role != "tool" and not isinstance(content, str):
            raise TypeError(
                f"content of a {role!r} message must be a string, not {type(content).__name__}; "
                "only tool results carry other JSON values"
            )
        if not isinstance(content, str) and (bad := _not_finite(content)) is not None:
            raise ValueError(
                f"the tool result holds {bad}, which JSON cannot carry (it would be written as "
                "null); put None, or the value as text, in its place"
            )
        if id is None:
            id = f"msg_{uuid.uuid4().hex}"
        name = None if _absent(name) else name
        tool_call_id = None if _absent(tool_call_id) else tool_call_id
        created_at = None if _absent(created_at) else created_at
        is_error = None if _absent(is_error) else is_error
        if _numpy_bool(is_error):
            is_error = bool(is_error)
        _check_keys(id, name, tool_call_id, is_error)
        line: dict[str, Any] = {
            "id": id,
            "role": role,
            "content": content,
        }
        if name is not None:
            line["name"] = name
        if created_at is None and self._stamp:
            created_at = datetime.now(UTC)
        if created_at is not None:
            line["created_at"] = _timestamp(created_at)
        if tool_call_id is not None:
            line["tool_call_id"] = tool_call_id
        if is_error is not None:
            line["is_error"] = is_error
        if extra:
            for key, value in extra.items():
                line.setdefault(key, value)
        return _dumps_line(line, extra) + b"\n"

    def append(
        self,
        role: str,
        content: Any,
        *,
        id: str | None = None,
        name: str | None = None,
        created_at: datetime | str | None = None,
        tool_call_id: str | None = None,
        is_error: bool | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Append one message and return its id (a fresh one when ``id`` is ``None``)."""
        message_id = id if id is not None else f"msg_{uuid.uuid4().hex}"
        line = self.encode(
            role,
            content,
            id=message_id,
            name=name,
            created_at=created_at,
            tool_call_id=tool_call_id,
            is_error=is_error,
            extra=extra,
        )
        self.append_raw(line)
        return message_id

    def append_raw(self, data: str | bytes) -> None:
        """Append ``data`` exactly as given: no newline is added.

        This is how a test lands a partial line (write the start of a line, later its
        rest and the newline) or a line that is not a message.
        """
        raw = data.encode() if isinstance(data, str) else bytes(data)
        with self._lock:
            fd = self._require_open()
            if self._buffered:
                self._pending += raw
                if len(self._pending) >= _FLUSH_AT:
                    self._drain(fd)
            else:
                _write_all(fd, raw)

    def flush(self) -> None:
        """Write out what a buffered writer holds."""
        with self._lock:
            self._drain(self._require_open())

    def close(self) -> None:
        """Flush and close the record; closing twice is harmless."""
        with self._lock:
            if self._fd is None:
                return
            try:
                self._drain(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def _require_open(self) -> int:
        if self._fd is None:
            raise ValueError(f"the writer of record {self.context_id!r} is closed")
        return self._fd

    def _drain(self, fd: int) -> None:
        if self._pending:
            _write_all(fd, bytes(self._pending))
            self._pending.clear()


def _refused(path: Path, context_id: str, reason: str) -> MurmurError:
    return MurmurError(
        f"unavailable: the record of context {context_id!r} ({path}) {reason}; records are "
        "appended to only as regular files with one link, never through a link. Nothing "
        "was written: remove or rename it, or write under another context id",
        code="unavailable",
    )


def _open_record(path: Path, context_id: str) -> int:
    """``path`` opened for appending, no link followed, checked to be a lone regular file."""
    try:
        folder = os.open(path.parent, _DIR_FLAGS)
    except OSError as exc:
        linked = exc.errno in {errno.ELOOP, errno.ENOTDIR}
        reason = "a symbolic link" if linked else f"not readable ({exc.strerror})"
        raise _refused(path, context_id, f"is in a folder that is {reason}") from exc
    try:
        fd = os.open(path.name, _RECORD_FLAGS, 0o644, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(path, context_id, "is a symbolic link") from exc
        if exc.errno == errno.EISDIR:
            raise _refused(path, context_id, "is a folder") from exc
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise _refused(path, context_id, "is not a regular file") from exc
        raise
    finally:
        os.close(folder)
    problem = one_file_problem(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise _refused(path, context_id, problem)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
