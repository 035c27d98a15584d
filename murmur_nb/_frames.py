"""Conversation records as DataFrames, loaded through the paginated read API.

:func:`read_conversation` walks ``read-messages`` pages of 100 from ``cursor=None``
until ``next_cursor`` is ``None``, exactly as a hook would, so the frame is the
consistent snapshot the API promises (the messages at positions ``[0, T)``, ``T``
being the first page's ``total``) even while the runtime appends.

Why it is nearly as fast as parsing the file directly: the first page's index scan
parses every line once to count messages, and the walk keeps those decoded rows so
its pages are served from them rather than parsed again (a warm index instead
decodes each page in one ``orjson`` call). Columns are then built in bulk, one list
comprehension each, and converted straight to Arrow-backed strings. While the walk
holds about a million fresh dicts the cyclic garbage collector is paused: they hold
no cycles, and letting it re-traverse them on every allocation threshold would cost
more than the parsing itself.
"""

from __future__ import annotations

import gc
import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from murmur_nb._conversations import (
    ConversationReader,
    ConversationStore,
    Row,
    check_context_id,
    envelope_text,
)
from murmur_nb._exceptions import MissingDependency

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "read_conversation", "read_conversations"]

COLUMNS = (
    "position",
    "id",
    "role",
    "content",
    "name",
    "created_at",
    "tool_call_id",
    "is_error",
    "body",
)
"""Columns of a conversation frame, in order."""

PROGRESS_MIN_BYTES = 1 << 20
"""Records at least this large show a progress bar (unless ``progress=False``)."""

Home = str | os.PathLike[str] | ConversationStore | None


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _store(home: Home) -> ConversationStore:
    return home if isinstance(home, ConversationStore) else ConversationStore(home)


def _only(values: list[Any], kind: type) -> list[Any]:
    """``values`` with anything that is not ``kind`` (or ``None``) replaced by ``None``."""
    if set(map(type, values)) <= {kind, type(None)}:
        return values
    return [value if type(value) is kind else None for value in values]


def _strings(values: list[Any]) -> Any:
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    dtype = pd.StringDtype()
    if dtype.storage == "pyarrow":
        pa: Any = importlib.import_module("pyarrow")
        return pd.array(pa.array(values, type=pa.large_string()), dtype=dtype)
    return pd.array(values, dtype=dtype)


def _frame(rows: list[Row]) -> pd.DataFrame:
    """Columns from decoded record rows (oldest first, position = row index)."""
    import numpy as np  # noqa: PLC0415 - numpy loads on first use
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    count = len(rows)
    ids = [row["id"] for row in rows]
    roles = [row["role"] for row in rows]
    contents = [row["content"] for row in rows]
    names = _only([row.get("name") for row in rows], str)
    stamps = _only([row.get("created_at") for row in rows], str)
    call_ids: list[str | None] = [None] * count
    errors: list[bool | None] = [None] * count
    bodies = np.full(count, None, dtype=object)
    role_array = np.array(roles, dtype=object)
    for k in np.flatnonzero(role_array == "tool").tolist():
        row = rows[k]
        body = contents[k]
        call_id = row.get("tool_call_id")
        is_error = row.get("is_error")
        call_ids[k] = call_id if type(call_id) is str else None
        errors[k] = is_error if type(is_error) is bool else None
        bodies[k] = body
        contents[k] = envelope_text(call_id, is_error, body)
    categories = sorted(set(roles))
    lookup = {role: code for code, role in enumerate(categories)}
    codes = np.fromiter(map(lookup.__getitem__, roles), dtype=np.int32, count=count)
    created = pd.to_datetime(stamps, utc=True, format="ISO8601", errors="coerce")
    columns: dict[str, Any] = {
        "position": np.arange(count, dtype=np.int64),
        "id": _strings(ids),
        "role": pd.Categorical.from_codes(codes, categories=pd.Index(categories)),
        "content": _strings(contents),
        "name": _strings(names),
        "created_at": pd.DatetimeIndex(created).as_unit("us"),
        "tool_call_id": _strings(call_ids),
        "is_error": pd.array(errors, dtype="boolean"),
        "body": bodies,
    }
    return pd.DataFrame(columns, columns=list(COLUMNS), copy=False)


def _walk_frame(
    reader: ConversationReader, path: os.PathLike[str] | None, progress: bool
) -> pd.DataFrame:
    bar = None
    if progress and path is not None:
        try:
            size = Path(path).stat().st_size
        except OSError:
            size = 0
        if size >= PROGRESS_MIN_BYTES:
            from tqdm.auto import tqdm  # noqa: PLC0415 - tqdm loads on first use

            bar = tqdm(
                total=size,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=f"reading {reader.context_id}",
                leave=False,
            )
    try:
        with _gc_paused():
            pages = list(reader._walk(bar.update if bar is not None else None))
            pages.reverse()
            rows: list[Row] = list(chain.from_iterable(pages))
            del pages
            frame = _frame(rows)
    finally:
        if bar is not None:
            bar.update(max(0, bar.total - bar.n))
            bar.close()
    return frame


def read_conversation(context_id: str, home: Home = None, *, progress: bool = True) -> pd.DataFrame:
    """Load one conversation record into a DataFrame, oldest message first.

    The frame is built by walking ``read-messages`` pages of 100 until ``next_cursor``
    is ``None``: it holds the messages at positions ``[0, T)``, ``T`` being the record's
    message count when the walk started, even while the runtime appends.

    Parameters
    ----------
    context_id
        The record's context id (a plain name).
    home
        Murmur home folder, a :class:`ConversationStore` (reuses its index), or ``None``
        for ``$MURMUR_HOME``, else ``~/.murmur``.
    progress
        Show a ``tqdm.auto`` progress bar for records of a megabyte or more.

    Returns
    -------
    pandas.DataFrame
        Columns ``position`` (int64, 0 = oldest), ``id`` (string), ``role`` (category),
        ``content`` (string; the envelope text for tool rows), ``name`` (string),
        ``created_at`` (datetime64 UTC, NaT when absent or not RFC 3339), and for tool
        rows ``tool_call_id`` (string), ``is_error`` (nullable boolean) and ``body`` (the
        decoded tool result). A record that does not exist gives an empty frame.

    Raises
    ------
    InvalidContextId
        ``context_id`` is not a plain name.
    ConversationReadError
        ``unavailable: <reason>`` when the record exists but cannot be read;
        ``invalid-cursor`` when it was rewritten or truncated during the walk.
    """
    check_context_id(context_id)
    store = _store(home)
    reader = store.reader(context_id, granted=True)
    return _walk_frame(reader, store.record_path(context_id), progress)


def _empty_frame(with_context: bool) -> pd.DataFrame:
    frame = _frame([])
    if with_context:
        frame.insert(0, "context_id", _strings([]))
    return frame


def _record_partition(context_id: str, home: str) -> pd.DataFrame:
    frame = read_conversation(context_id, home, progress=False)
    frame.insert(0, "context_id", _strings([context_id] * len(frame)))
    return frame


def read_conversations(
    home: Home = None,
    *,
    engine: Literal["pandas", "dask"] = "pandas",
    progress: bool = True,
) -> Any:
    """Load every conversation record under a murmur home.

    Parameters
    ----------
    home
        Murmur home folder, a :class:`ConversationStore`, or ``None`` for the default.
    engine
        ``"pandas"`` reads each record with :func:`read_conversation` and concatenates
        them; ``"dask"`` returns a lazy Dask DataFrame with one partition per record,
        each read by :func:`read_conversation` when computed (needs the ``dask`` extra).
    progress
        Show progress bars (pandas engine only; Dask partitions never do).

    Returns
    -------
    pandas.DataFrame or dask.dataframe.DataFrame
        The columns of :func:`read_conversation` after a leading ``context_id`` column
        (string), records in sorted context order.
    """
    store = _store(home)
    contexts = store.contexts()
    if engine == "pandas":
        import pandas as pd  # noqa: PLC0415 - pandas loads on first use

        frames = []
        for context_id in contexts:
            frame = read_conversation(context_id, store, progress=progress)
            frame.insert(0, "context_id", _strings([context_id] * len(frame)))
            frames.append(frame)
        if not frames:
            return _empty_frame(with_context=True)
        return pd.concat(frames, ignore_index=True)
    if engine == "dask":
        try:
            dd: Any = importlib.import_module("dask.dataframe")
        except ImportError as exc:
            raise MissingDependency("dask", "dask", "read_conversations(engine='dask')") from exc
        meta = _empty_frame(with_context=True)
        if not contexts:
            return dd.from_pandas(meta, npartitions=1)
        return dd.from_map(
            _record_partition, contexts, home=str(store.home), meta=meta, enforce_metadata=False
        )
    raise ValueError(f"engine must be 'pandas' or 'dask', not {engine!r}")
