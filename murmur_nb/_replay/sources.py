"""What a replay runs over: record jobs from a context id, a list, a home or a DataFrame.

A job is a context id and, when the source was a DataFrame, the messages the frame holds
(the frame is what the user chose to replay: perhaps filtered). Otherwise the messages are
read when the job runs, through the store's ``read-messages`` pages and cursors, exactly as
a hook reads them, so a job can travel to a Dask worker as its context id alone. A Dask
DataFrame is computed here (the columns a replay reads only), then is a frame like any.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from murmur_nb._conversations.store import (
    CONTEXT_ID_PATTERN,
    MAX_PAGE,
    Message,
    check_context_id,
)

__all__ = ["FRAME_COLUMNS", "HOME", "RecordJob", "jobs_of", "record_messages"]

#: ``source=HOME`` replays every record under the host's store.
HOME = "*"
#: The columns a replay takes from a frame (a Dask frame computes only these).
FRAME_COLUMNS = ("context_id", "id", "role", "content", "name", "created_at")


@dataclass(frozen=True)
class RecordJob:
    """One record to replay: its context id and, from a DataFrame, its messages."""

    context_id: str
    messages: tuple[Message, ...] | None = None


def record_messages(conversations: Any, context_id: str) -> list[Message]:
    """The record's messages, oldest first, read page by page until no cursor is returned.

    The pages tile the record as it stood at the first page (later appends are not
    included), as :func:`murmur_nb.read_conversation` reads it.
    """
    reader = conversations.reader(context_id, granted=True)
    pages: list[list[Message]] = []
    cursor: str | None = None
    while True:
        page = reader.read_messages(cursor, MAX_PAGE)
        pages.append(page.messages)
        cursor = page.next_cursor
        if cursor is None:
            break
    return [m for page in reversed(pages) for m in reversed(page)]


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if type(value).__name__ in {"NAType", "NaTType"}:
        return None
    if hasattr(value, "isoformat"):
        return str(value.isoformat()).replace("+00:00", "Z")
    return str(value)


def _frame_jobs(frame: Any) -> list[RecordJob]:
    """Jobs from a ``read_conversation(s)`` frame: one per context, messages in frame order.

    A column may be an index level too (``frame.set_index("context_id")``). The context id
    is the ``context_id`` column, else the record the ``attrs`` name."""
    levels = [n for n in frame.index.names if n in FRAME_COLUMNS and n not in frame.columns]
    if levels:
        frame = frame.reset_index(level=levels)
    if "context_id" in frame.columns:
        contexts = frame["context_id"]
    elif frame.attrs.get("context_id"):
        contexts = [frame.attrs["context_id"]] * len(frame)
    else:
        raise ValueError(
            "this DataFrame has no context_id column: pass a frame from "
            "mnb.read_conversations(...), one from mnb.read_conversation(context_id, ...), or "
            "add the column (frame.insert(0, 'context_id', 'my-context'))"
        )
    lacking = [c for c in ("id", "role", "content") if c not in frame.columns]
    if lacking:
        raise ValueError(
            f"this DataFrame lacks the column(s) {', '.join(lacking)}: a frame replays the "
            "messages it holds, as mnb.read_conversation(s) gives them. To replay whole records by "
            "their ids, pass a list: frame['context_id'].unique().tolist()"
        )
    grouped: dict[str, list[Message]] = {}
    absent = [None] * len(frame)  # a frame without name or created_at: none given
    columns = [frame[c] if c in frame.columns else absent for c in FRAME_COLUMNS[1:]]
    for context, *fields in zip(contexts, *columns, strict=True):
        m_id, role, content, name, created = (_text(v) for v in fields)
        message = Message(m_id or "", role or "", content or "", name, created)
        grouped.setdefault(check_context_id(str(context)), []).append(message)
    return [RecordJob(c, tuple(ms)) for c, ms in grouped.items()]


def _named(contexts: list[str], conversations: Any) -> list[RecordJob]:
    """Jobs of the records named; a name with no record under the home is warned about (a
    hook reads such a record as empty, as the runtime's would: the rows alone look fine)."""
    path_of = getattr(conversations, "record_path", None)
    missing = [] if path_of is None else [
        c for c in dict.fromkeys(contexts) if not os.path.lexists(path_of(c))
    ]  # fmt: skip
    if missing:
        known = conversations.contexts()  # sorted
        more = f" (+{len(missing) - 5})" if len(missing) > 5 else ""
        shown = ", ".join(map(repr, missing[:5])) + more
        some = ", ".join(known[:5]) or "none"
        warnings.warn(
            f"no record {shown} under {conversations.home}: its hooks are replayed on an "
            f"empty record, as the runtime would run them (records there: {some}; "
            "mnb.ConversationStore(home).contexts() lists them)",
            UserWarning, stacklevel=4,  # the caller of replay()
        )  # fmt: skip
    return [RecordJob(c) for c in contexts]


def _a_home(source: Any) -> bool:
    """Whether ``source`` names the home: a store, a ``PathLike``, or a string that is no
    context id (nor ``"*"``) and names a folder; any other string is checked as an id."""
    if isinstance(source, str):
        if source == HOME or CONTEXT_ID_PATTERN.fullmatch(source):
            return False
        return Path(source).expanduser().is_dir()
    return isinstance(source, os.PathLike) or hasattr(source, "contexts")


def _context(value: Any) -> str:
    """A context id from a list, a Series or an array (numpy's ``str_`` is a ``str``)."""
    return check_context_id(str(value) if isinstance(value, str) else value)


def _computed(lazy: Any) -> Any:
    """A Dask DataFrame's rows, as pandas: its :data:`FRAME_COLUMNS` only (a Dask frame has
    no ``attrs`` and iterates over its column names, which are no records)."""
    wanted = [c for c in FRAME_COLUMNS if c in lazy.columns]
    return (lazy[wanted] if wanted else lazy).compute()


def jobs_of(source: Any, conversations: Any) -> list[RecordJob]:
    """The records ``source`` names (see :func:`murmur_nb.replay`)."""
    if hasattr(source, "columns") and hasattr(source, "npartitions"):  # a Dask DataFrame
        source = _computed(source)
    if hasattr(source, "columns") and hasattr(source, "attrs"):
        return _frame_jobs(source)
    if _a_home(source):
        # ``Path`` has a ``home`` classmethod: a store's home is asked of stores only
        home = Path(source.home if hasattr(source, "contexts") else source)
        if home.expanduser().resolve() != Path(conversations.home).expanduser().resolve():
            raise ValueError(
                f"the hooks read records under {conversations.home}, not {home}: build the "
                "HookHost with conversations=mnb.ConversationStore(home) to replay that home"
            )
        source = HOME
    if isinstance(source, str) and source == HOME:
        return [RecordJob(c) for c in conversations.contexts()]
    if isinstance(source, str):
        return _named([_context(source)], conversations)
    if isinstance(source, Sequence) or hasattr(source, "__iter__"):
        return _named([_context(c) for c in source], conversations)
    raise TypeError(
        f"cannot replay {type(source).__name__}: pass a context id, a list of them, "
        "'*' (every record under the home) or a DataFrame from mnb.read_conversation(s)"
    )
