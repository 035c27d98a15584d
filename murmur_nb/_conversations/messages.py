"""Messages as the read API returns them, and reading just one page's lines.

*Parse only the page.* Serving a page reads just its lines (one ``pread`` when they are
contiguous) and decodes them in a single ``orjson`` call: every line was already checked
by the index to be one JSON object on its own, so joining them into an array is safe. If
the bytes no longer decode to as many objects as the index promised, the record was
rewritten under it (:class:`~murmur_nb._conversations.index.RecordChanged`). The lines
the index marks as maybe holding a number of 19 or more digits are read again by the
stdlib ``json`` when they do, so integers beyond 64 bits come back exact (see the
index's notes); a page without such a line (almost every page) pays nothing for it.
"""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

import orjson

from murmur_nb._conversations import tool_envelope
from murmur_nb._conversations.index import (
    OPEN_FLAGS,
    RecordChanged,
    Row,
    has_long_number,
    loads_exact,
)

__all__ = ["Message", "MessagePage", "lowered_size", "messages_of", "read_rows"]

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


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


_new_message = object.__new__
# Frozen dataclasses assign through ``object.__setattr__``; the slot descriptors do the
# same assignment at about half the cost, which matters for 100 messages a page.
_set_id, _set_role, _set_content, _set_name, _set_created_at = (
    Message.__dict__[slot].__set__ for slot in Message.__slots__
)


def messages_of(rows: list[Row]) -> list[Message]:
    """Messages for decoded record rows, in reverse order (rows are oldest first)."""
    out: list[Message] = []
    append = out.append
    new, envelope = _new_message, tool_envelope.encode
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


def lowered_size(message: Message) -> int:
    """The bytes of ``message``'s strings as a guest receives them (UTF-8)."""
    size = 0
    for text in (message.id, message.role, message.content, message.name, message.created_at):
        if text is not None:
            size += len(text) if text.isascii() else len(text.encode("utf-8"))
    return size


def read_rows(
    path: Path,
    ident: tuple[int, int] | None,
    starts: list[int],
    ends: list[int],
    long_rows: list[int] | tuple[()] = (),
) -> tuple[list[Row], int]:
    """Decode the message lines at ``starts``/``ends``; return them and the bytes read.

    ``long_rows`` are the indexes of the lines that may hold a long number (the index's
    ``offsets`` tells): they are read exactly.
    """
    fd = os.open(path, OPEN_FLAGS)
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != ident:
            raise RecordChanged
        low, high = starts[0], ends[-1]
        span = high - low
        body = sum(ends) - sum(starts)
        if span == body + len(starts) - 1:  # contiguous lines: one read, one decode
            block = os.pread(fd, span, low)
            if len(block) != span:
                raise RecordChanged
            text = b"[" + block.replace(b"\n", b",") + b"]"
        elif span <= 2 * body + 65536:
            block = os.pread(fd, span, low)
            if len(block) != span:
                raise RecordChanged
            text = (
                b"["
                + b",".join([block[s - low : e - low] for s, e in zip(starts, ends, strict=True)])
                + b"]"
            )
        else:
            parts = [os.pread(fd, e - s, s) for s, e in zip(starts, ends, strict=True)]
            if sum(map(len, parts)) != body:
                raise RecordChanged
            text = b"[" + b",".join(parts) + b"]"
    finally:
        os.close(fd)
    rows = _decode(text, long_rows, starts, ends)
    if len(rows) != len(starts):
        raise RecordChanged
    return rows, span


def _decode(
    text: bytes, long_rows: list[int] | tuple[()], starts: list[int], ends: list[int]
) -> list[Row]:
    """The JSON array ``text`` of the lines at ``starts``/``ends``; ``long_rows`` exact."""
    try:
        rows: list[Row] = _loads(text)
    except _JSONDecodeError:
        if not long_rows:
            raise RecordChanged from None
        try:  # an integer past the double range: orjson refuses it, json reads it
            exact: list[Row] = loads_exact(text)
        except (ValueError, RecursionError):
            raise RecordChanged from None
        return exact
    if long_rows and len(rows) == len(starts):
        sizes = [end - start for start, end in zip(starts, ends, strict=True)]
        stops = list(accumulate(size + 1 for size in sizes))  # "[" or "," before each line
        for k in long_rows:
            line = text[stops[k] - sizes[k] : stops[k]]
            # nested deeper than json reads: orjson's reading stands
            with suppress(ValueError, RecursionError):
                if has_long_number(line):
                    rows[k] = loads_exact(line)
    return rows
