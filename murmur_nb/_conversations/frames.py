"""Conversation records as DataFrames, loaded through the paginated read API.

:func:`read_conversation` walks ``read-messages`` pages of 100 from ``cursor=None``
until ``next_cursor`` is ``None``, exactly as a hook would, so the frame is the
consistent snapshot the API promises (the messages at positions ``[0, T)``, ``T``
being the first page's ``total``) even while the runtime appends.

Why it costs about what parsing the file directly does: the first page's index scan
has to parse every line once anyway (to count messages), so during a walk it appends
each message's fields straight into column lists while the decoded object is still
hot, and the pages it covers are not decoded again; pages below a warm index's old
end are read from the record, one ``orjson`` call a page. The columns then become
Arrow-backed strings, a categorical, Arrow-parsed timestamps and a nullable boolean
in bulk; only tool rows get per-row work (their envelope text). While the walk
allocates about a million fresh objects the cyclic garbage collector is paused: they
hold no cycles, and re-traversing them at every allocation threshold would cost
more than the parsing itself.

:func:`read_conversations` with ``engine="dask"`` plans its partitions from one scan of each
record's index (:func:`~murmur_nb._conversations.store.summarize_record`): roles are any
string (SPEC §3), so only a scan makes them known categories, and Dask's stand-in for
unknown ones leaks into computed results (``value_counts``, an empty frame). The same scan
gives each record's message count, so each partition holds the record as it was then and
its index continues the previous one: computed, the frame is the pandas engine's.
"""

from __future__ import annotations

import difflib
import gc
import importlib
import itertools
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from murmur_nb._conversations import tool_envelope
from murmur_nb._conversations.index import Columns, RecordChanged, Walk
from murmur_nb._conversations.store import (
    CONTEXT_ID_PATTERN,
    ConversationReader,
    ConversationStore,
    RecordSummary,
    check_context_id,
    summarize_record,
    walk_record,
)
from murmur_nb._exceptions import ConversationReadError, InvalidContextId, MissingDependency
from murmur_nb._rules import RFC3339_RE, rfc3339_instant

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

_ARROW_CHUNK = 1 << 16


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


def _arrow() -> Any:
    """pyarrow when pandas stores strings in it (pandas 3 with pyarrow installed), else None."""
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    if pd.StringDtype().storage != "pyarrow":
        return None
    return importlib.import_module("pyarrow")


def _strings(values: Any) -> Any:
    """A pandas ``string`` array (``None`` -> NA) from a list or object ndarray of str."""
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    pa = _arrow()
    if pa is None:
        return pd.array(values, dtype=pd.StringDtype())
    # In chunks: one Arrow array of several hundred megabytes grows its data buffer by
    # repeated reallocation, which made the 2N walk cost well over twice the N walk.
    step = _ARROW_CHUNK
    kind = pa.large_string()
    chunks = [pa.array(values[at : at + step], type=kind) for at in range(0, len(values), step)]
    return pd.array(pa.chunked_array(chunks, type=kind), dtype=pd.StringDtype())


def _categorical(roles: list[str]) -> Any:
    """``roles`` as a pandas Categorical with sorted categories."""
    import numpy as np  # noqa: PLC0415 - numpy loads on first use
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    pa = _arrow()
    if pa is not None:
        encoded = pa.array(roles, type=pa.large_string()).dictionary_encode()
        seen: list[str] = encoded.dictionary.to_pylist()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    else:
        lookup: dict[str, int] = {}
        codes = np.fromiter(
            (lookup.setdefault(role, len(lookup)) for role in roles), np.int32, len(roles)
        )
        seen = list(lookup)
    order = sorted(range(len(seen)), key=seen.__getitem__)
    recode = np.empty(len(seen), dtype=np.int32)
    recode[order] = np.arange(len(seen), dtype=np.int32)
    return pd.Categorical.from_codes(recode[codes], categories=pd.Index([seen[k] for k in order]))


def _timestamps(stamps: list[str | None]) -> Any:
    """RFC 3339 strings as datetime64[us, UTC]; NaT when absent or not an RFC 3339 instant.

    One result per string, whatever its neighbours: the library's rule
    (:func:`~murmur_nb._rules.rfc3339_instant`) decides. Arrow's parser accepts more forms
    (``00:00Z``, ``+0530``), so only strings of the rule's form reach it; those it refuses
    (a February 30, a fraction of seven digits) are decided one by one, in the small
    blocks where Arrow failed, so a column of good stamps still parses in one cast.
    """
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    pa = _arrow()
    if pa is None or not stamps:
        import numpy as np  # noqa: PLC0415 - numpy loads on first use

        micros = [_utc_micros(s) for s in stamps]
        ticks = np.array([_NAT if m is None else m for m in micros], dtype=np.int64)
        return pd.DatetimeIndex(ticks.view("datetime64[us]")).tz_localize("UTC")
    pc = importlib.import_module("pyarrow.compute")
    texts = pa.array(stamps, type=pa.large_string())
    strict = pc.match_substring_regex(texts, _RFC3339_ANCHORED)
    strict = pc.and_(strict, pc.invert(pc.starts_with(texts, "0000")))  # Arrow has a year 0
    texts = pc.ascii_upper(texts)  # "t" and "z" as the rule reads them
    if not pc.all(strict).as_py():  # all absent, or all of the form: nothing to hide
        texts = pc.if_else(strict, texts, pa.scalar(None, pa.large_string()))
    step = _ARROW_CHUNK
    parsed = pa.chunked_array(
        [_cast_stamps(pa, texts.slice(at, step)) for at in range(0, len(texts), step)],
        type=_utc_us(pa),
    )
    return pd.DatetimeIndex(parsed.to_pandas()).as_unit("us")


_RFC3339_ANCHORED = f"^(?:{RFC3339_RE.pattern})$"
_SMALL_BLOCK = 256
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_NAT = -(1 << 63)  # numpy's NaT as int64


def _utc_us(pa: Any) -> Any:
    return pa.timestamp("us", tz="UTC")


def _cast_stamps(pa: Any, texts: Any) -> Any:
    """``texts`` (of the rule's form, or null) cast by Arrow; what it refuses is decided by
    the rule, block by block (halving the block that failed)."""
    try:
        return texts.cast(_utc_us(pa))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if len(texts) > _SMALL_BLOCK:
            half = len(texts) // 2
            parts = [_cast_stamps(pa, texts.slice(0, half)), _cast_stamps(pa, texts.slice(half))]
            return pa.concat_arrays(parts)
    micros = [_utc_micros(s) for s in texts.to_pylist()]
    return pa.array(micros, type=pa.int64()).cast(_utc_us(pa))


def _utc_micros(text: str | None) -> int | None:
    """Microseconds since the epoch of the instant ``text`` names by the library's rule,
    else ``None`` (a subtraction, so an instant just before year 1 in UTC still has one)."""
    instant = None if text is None else rfc3339_instant(text)
    return None if instant is None else (instant - _EPOCH) // _MICROSECOND


def _frame(columns: Columns) -> pd.DataFrame:
    """The DataFrame of decoded messages (oldest first, position = index)."""
    import numpy as np  # noqa: PLC0415 - numpy loads on first use
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    count = len(columns)
    contents = columns.contents
    role = _categorical(columns.roles)
    tool_code = list(role.categories).index("tool") if "tool" in role.categories else -1
    tools = np.flatnonzero(role.codes == tool_code)
    at = tools.tolist()
    if len(at) != len(columns.call_ids):
        raise AssertionError("tool columns out of step")  # pragma: no cover - a bug if hit
    call_ids = _only(columns.call_ids, str)
    errors = _only(columns.errors, bool)
    tool_bodies = [contents[k] for k in at]
    envelopes = tool_envelope.encode_cleaned(call_ids, errors, tool_bodies)
    for k, text in zip(at, envelopes, strict=True):
        contents[k] = text
    bodies = np.full(count, None, dtype=object)
    bodies[tools] = np.fromiter(tool_bodies, dtype=object, count=len(at))
    call_id_column = np.full(count, None, dtype=object)
    call_id_column[tools] = np.fromiter(call_ids, dtype=object, count=len(at))
    error_values = np.zeros(count, dtype=bool)
    error_values[tools] = np.fromiter((e is True for e in errors), dtype=bool, count=len(at))
    error_mask = np.ones(count, dtype=bool)
    error_mask[tools] = np.fromiter((e is None for e in errors), dtype=bool, count=len(at))
    frame_columns: dict[str, Any] = {
        "position": np.arange(count, dtype=np.int64),
        "id": _strings(columns.ids),
        "role": role,
        "content": _strings(contents),
        "name": _strings(_only(columns.names, str)),
        "created_at": _timestamps(_only(columns.stamps, str)),
        "tool_call_id": _strings(call_id_column),
        "is_error": pd.arrays.BooleanArray(error_values, error_mask),
        "body": bodies,
    }
    return pd.DataFrame(frame_columns, columns=list(COLUMNS), copy=False)


REWRITE_ATTEMPTS = 3
"""How many times a read walks a record that is being rewritten under it before giving up."""


def _progress_bar(reader: ConversationReader, path: os.PathLike[str] | None) -> Any:
    """A ``tqdm.auto`` bar over the record's bytes when it is large enough, else ``None``."""
    if path is None:
        return None
    try:
        size = Path(path).stat().st_size
    except OSError:
        size = 0
    if size < PROGRESS_MIN_BYTES:
        return None
    from tqdm.auto import tqdm  # noqa: PLC0415 - tqdm loads on first use

    return tqdm(
        total=size,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=f"reading {reader.context_id}",
        leave=False,
    )


def _walk_frame(
    reader: ConversationReader, path: os.PathLike[str] | None, progress: bool
) -> pd.DataFrame:
    """The record walked into a frame; a walk the record was rewritten under starts again
    from the newest page, up to :data:`REWRITE_ATTEMPTS` times."""
    bar = _progress_bar(reader, path) if progress else None
    try:
        for _attempt in range(REWRITE_ATTEMPTS):
            walk = Walk(bar.update if bar is not None else None)
            try:
                with _gc_paused():
                    frame = _frame(walk_record(reader, walk=walk))
            except RecordChanged:
                if bar is not None:
                    bar.reset(total=bar.total)
                continue
            frame.attrs["skipped_lines"] = max(0, walk.skipped)
            return frame
    finally:
        if bar is not None:
            bar.update(max(0, bar.total - bar.n))
            bar.close()
    raise ConversationReadError(
        "unavailable",
        f"the record of context {reader.context_id!r} was rewritten while being read, "
        f"{REWRITE_ATTEMPTS} times in a row (the runtime only appends; something replaced "
        "the file); call read_conversation again once it is done",
    )


def _home_text(home: object) -> str:
    if isinstance(home, ConversationStore):
        return "store"
    return repr(os.fspath(home)) if isinstance(home, os.PathLike) else repr(home)


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
        ``attrs["skipped_lines"]`` counts the record's complete lines, up to ``T``, that
        are not messages and were left out (SPEC §3: not JSON, missing keys; blank lines,
        those of spaces, tabs or a lone ``\\r`` included, aside).
        ``body`` holds any JSON value (dicts, lists, numbers, ``None``), which Parquet and
        Feather cannot store in one column: write ``frame.drop(columns="body")`` (it is
        the tool rows' ``content`` decoded, so nothing is lost) and decode ``content``
        again after reading it back.

    Raises
    ------
    InvalidContextId
        ``context_id`` is not a plain name; also when the home was passed first
        (``RecordWriter`` takes ``(home, context_id)``, this ``(context_id, home)``): the
        message shows the call to write.
    ConversationReadError
        ``unavailable: <reason>`` when the record exists but cannot be read (the message
        names the fix, such as the read permission to give); also when it was rewritten
        under the walk :data:`REWRITE_ATTEMPTS` times in a row (each time the walk starts
        again from the newest page): call again.

    Warns
    -----
    UserWarning
        ``home`` names no folder (a mistyped path), or the home has no record of
        ``context_id`` (the warning names the close matches among its records). The
        frame is empty: the runtime may not have written the record yet.
    """
    homelike = isinstance(context_id, os.PathLike | ConversationStore) or (
        isinstance(context_id, str) and "/" in context_id
    )
    if homelike and type(home) is str and CONTEXT_ID_PATTERN.fullmatch(home) is not None:
        raise InvalidContextId(
            f"read_conversation takes the context id first, then the home: "
            f"read_conversation({home!r}, {_home_text(context_id)}) (it was given the home "
            "first, as RecordWriter(home, context_id) takes them)"
        )
    check_context_id(context_id)
    store = _store(home)
    try:
        frame = _read_record(store, context_id, progress)
    except ConversationReadError as exc:
        raise _with_fix(exc, store, context_id, "") from exc
    if frame.empty:
        _warn_if_no_record(store, context_id)
    return frame


def _read_record(store: ConversationStore, context_id: str, progress: bool) -> pd.DataFrame:
    reader = store.reader(context_id, granted=True)
    frame = _walk_frame(reader, store.record_path(context_id), progress)
    frame.attrs["context_id"] = context_id  # mnb.replay(hooks, frame) knows the record
    return frame


def _with_fix(
    exc: ConversationReadError, store: ConversationStore, context_id: str, option: str
) -> ConversationReadError:
    """``exc`` (a record that cannot be read) with what to do about it: the permission to
    give, and ``option`` (another way on) when there is one. The page API's reason never
    names a host path (a guest may see it); this one, for the notebook, does."""
    if exc.code != "unavailable":
        return exc
    fix = ""
    if isinstance(exc.__cause__, PermissionError):
        path = store.record_path(context_id)
        fix = f"give this user read permission on {str(path)!r} (or run as its owner)"
    fix = "; or ".join(part for part in (fix, option) if part)
    return ConversationReadError(exc.code, f"{exc.reason}; {fix}" if fix else exc.reason)


def _empty_frame(with_context: bool) -> pd.DataFrame:
    frame = _frame(Columns())
    if with_context:
        frame.insert(0, "context_id", _strings([]))
    return frame


def _skipped_attrs(skipped: dict[str, int]) -> dict[str, Any]:
    """``attrs`` of a frame of many records: their skipped lines in all, and per record that
    skipped any (a dict of every record would be copied with the frame's every step)."""
    return {
        "skipped_lines": sum(skipped.values()),
        "skipped_lines_by_record": {c: n for c, n in skipped.items() if n},
    }


def _warn_if_no_home(store: ConversationStore, caller: str, stacklevel: int) -> bool:
    """A home folder that does not exist is most likely a mistyped path: say so (an existing
    home with no record yet is an empty frame, silently). ``True`` when it warned."""
    if store.home.exists():
        return False
    warnings.warn(
        f"there is no folder {str(store.home)!r}, so {caller} found no record; "
        "check the path (a murmur home holds conversations/<context-id>.jsonl; "
        "mnb.prepare_demo_home(...).murmur_home is the demo's)",
        UserWarning,
        stacklevel=stacklevel + 1,  # the caller of read_conversation(s)
    )
    return True


def _warn_if_no_record(store: ConversationStore, context_id: str) -> None:
    """No record of ``context_id`` in an existing home: perhaps a typo, perhaps a record the
    runtime has not written yet. Name the close matches (the frame stays empty)."""
    if _warn_if_no_home(store, "read_conversation", 3) or os.path.lexists(
        store.record_path(context_id)
    ):
        return
    try:
        known = store.contexts()
    except ConversationReadError:
        known = []
    close = difflib.get_close_matches(context_id, known, n=3)
    hint = (
        f"did you mean {' or '.join(map(repr, close))}?"
        if close
        else f"the home has {len(known)} record(s); mnb.ConversationStore(home).contexts() "
        "lists them"
    )
    if (store.home / f"{context_id}.jsonl").is_file():
        hint = f"that folder is itself a conversations folder: pass its parent, {hint}"
    warnings.warn(
        f"the murmur home {str(store.home)!r} has no record of context {context_id!r}, so "
        f"the frame is empty (the runtime may not have written it yet); {hint}",
        UserWarning,
        stacklevel=3,  # the caller of read_conversation
    )


Errors = Literal["raise", "skip"]


def _pandas_frames(
    store: ConversationStore, contexts: list[str], progress: bool, errors: Errors
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every record read in turn, concatenated: one ``RangeIndex``, sorted role categories;
    and the records left out (``errors="skip"``) with why."""
    frames, skipped, unread = [], {}, {}
    for context_id in contexts:
        try:
            frame = _read_record(store, context_id, progress)
        except ConversationReadError as exc:
            if errors == "raise":
                raise _with_fix(exc, store, context_id, _SKIP_OPTION) from exc
            unread[context_id] = exc.reason or str(exc)
            continue
        skipped[context_id] = frame.attrs["skipped_lines"]
        frame.attrs.clear()
        frame.insert(0, "context_id", _strings([context_id] * len(frame)))
        frames.append(frame)
    out = _concat_records(frames) if frames else _empty_frame(with_context=True)
    out.attrs.update(_skipped_attrs(skipped))
    return out, unread


def _concat_records(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """``frames`` (each record's, with its ``context_id``) as one frame, its ``role`` one
    categorical over the sorted roles of them all.

    The roles join once, by codes: giving each record's frame every role first (so that the
    concatenation stays categorical) held a copy of all the roles per record, which grew with
    the square of the records (3 GB for 5,000 one-line records of distinct roles).
    """
    import numpy as np  # noqa: PLC0415 - numpy loads on first use
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    roles = [frame["role"].array for frame in frames]
    categories = pd.Index(sorted(set().union(*(role.categories for role in roles))))
    codes = np.concatenate(
        [categories.get_indexer(role.categories)[role.codes] for role in roles]
    )
    columns = list(frames[0].columns)
    out = pd.concat([frame.drop(columns="role") for frame in frames], ignore_index=True)
    out["role"] = pd.Categorical.from_codes(codes, categories=categories)
    return out[columns]


_SKIP_OPTION = (
    "pass errors='skip' to read_conversations to load the other records (the ones it "
    "cannot read are then listed in frame.attrs['skipped_records'])"
)


def _rewritten(context_id: str, what: str) -> ConversationReadError:
    return ConversationReadError(
        "unavailable",
        f"the record of context {context_id!r} {what}: it was rewritten since; call "
        "read_conversations again",
    )


def _record_partition(
    context_id: str, count: int, start: int, last_id: str | None, *, home: str,
    roles: tuple[str, ...], attrs: dict[str, Any],
) -> pd.DataFrame:  # fmt: skip
    """One record's partition: its first ``count`` messages (as many as it held when the
    Dask frame was made, the last of them ``last_id``), indexed from ``start``, with the
    frame's roles as categories."""
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    store = ConversationStore(home)
    frame = _read_record(store, context_id, progress=False)
    held = frame.iloc[:count]
    planned = "read_conversations(engine='dask') found in it"
    if count and frame.empty and not os.path.lexists(store.record_path(context_id)):
        raise ConversationReadError(
            "unavailable",
            f"the record of context {context_id!r} was deleted since "
            f"read_conversations(engine='dask') made the frame (it held {count} messages "
            "then); call read_conversations again",
        )
    if len(frame) < count:
        raise _rewritten(
            context_id, f"holds {len(frame)} messages, fewer than the {count} {planned}"
        )
    if count and held["id"].iloc[-1] != last_id:
        found = held["id"].iloc[-1]
        raise _rewritten(
            context_id, f"holds {found!r} at position {count - 1}, not the {last_id!r} {planned}"
        )
    new = sorted(set(held["role"].unique()) - set(roles))
    if new:
        roles_text = ", ".join(map(repr, new))
        raise _rewritten(context_id, f"has the role(s) {roles_text}, not among the roles {planned}")
    held = held.assign(role=held["role"].cat.set_categories(list(roles)))
    held.index = pd.RangeIndex(start, start + count)
    held.insert(0, "context_id", _strings([context_id] * count))
    held.attrs.clear()  # the same in every partition, so a computed frame keeps them
    held.attrs.update(attrs)
    return held


def _summaries(
    store: ConversationStore, contexts: list[str], errors: Errors
) -> tuple[dict[str, RecordSummary], dict[str, str]]:
    """Each record's summary, and the records left out (``errors="skip"``) with why."""
    summaries, unread = {}, {}
    for context_id in contexts:
        try:
            summaries[context_id] = summarize_record(store.reader(context_id, granted=True))
        except ConversationReadError as exc:
            if errors == "raise":
                raise _with_fix(exc, store, context_id, _SKIP_OPTION) from exc
            unread[context_id] = exc.reason or str(exc)
    return summaries, unread


def _dask_frame(
    store: ConversationStore, summaries: dict[str, RecordSummary], extra: dict[str, Any]
) -> Any:
    """A lazy frame, one partition per record, planned from one scan of each record's index:
    the message counts (the snapshot each partition reads, its index continuing the one
    before) and newest ids (that the record is still the one planned), the roles (known
    categories) and the skipped lines (``attrs``, with ``extra``)."""
    try:
        dask: Any = importlib.import_module("dask")
        dd: Any = importlib.import_module("dask.dataframe")
    except ImportError as exc:
        raise MissingDependency("dask", "dask", "read_conversations(engine='dask')") from exc
    contexts = list(summaries)
    roles = sorted(set().union(*(s.roles for s in summaries.values())))
    attrs = _skipped_attrs({c: s.skipped_lines for c, s in summaries.items()}) | extra
    meta = _empty_frame(with_context=True)
    meta["role"] = meta["role"].cat.set_categories(roles)
    meta.attrs.update(attrs)
    counts = [s.messages for s in summaries.values()]
    starts = [0, *itertools.accumulate(counts)][:-1]
    last_ids = [s.last_id for s in summaries.values()]
    # Dask's ``dataframe.convert-string`` (on by default) would turn the object ``body``
    # column (decoded tool results: dicts, numbers, None) into their repr strings; every
    # string column here already has pandas' ``string`` dtype.
    with dask.config.set({"dataframe.convert-string": False}):
        if not contexts:
            return dd.from_pandas(meta, npartitions=1)
        return dd.from_map(
            _record_partition, contexts, counts, starts, last_ids, home=str(store.home),
            roles=tuple(roles), attrs=attrs, meta=meta, enforce_metadata=False,
        )  # fmt: skip


def read_conversations(
    home: Home = None,
    engine: Literal["pandas", "dask"] = "pandas",
    *,
    progress: bool = True,
    errors: Errors = "raise",
) -> Any:
    """Load every conversation record under a murmur home.

    Parameters
    ----------
    home
        Murmur home folder, a :class:`ConversationStore`, or ``None`` for the default.
    engine
        ``"pandas"`` reads each record with :func:`read_conversation` and concatenates
        them; ``"dask"`` returns a lazy Dask DataFrame with one partition per record
        (needs the ``dask`` extra). Making it scans each record's lines once, here (about
        a third of the cost of reading them), for its message count and roles; each
        partition is read by :func:`read_conversation` when computed and holds the
        messages the record held when the frame was made (later appends are left out).
    progress
        Show progress bars (pandas engine only; Dask partitions never do).
    errors
        ``"raise"`` (the default): a record that cannot be read (no read permission, a
        symbolic link put in its place) stops the load with its error. ``"skip"``: it is
        left out, a warning names it and why, and ``attrs["skipped_records"]`` maps each
        record left out to the reason (on the Dask engine, records that cannot be read
        when the frame is made; a partition that fails later still raises).

    Returns
    -------
    pandas.DataFrame or dask.dataframe.DataFrame
        The columns of :func:`read_conversation` after a leading ``context_id`` column
        (string), records in sorted context order, one ``RangeIndex`` over them all, and
        ``role`` categories sorted. The Dask frame's categories are known, and computed it
        equals the pandas frame of the same moment (``pandas.testing.assert_frame_equal``
        holds, index and ``attrs`` included). ``attrs["skipped_lines"]`` counts the lines
        of all records that are not messages (see :func:`read_conversation`);
        ``attrs["skipped_lines_by_record"]`` maps each record that has any to its count.

    Raises
    ------
    ConversationReadError
        ``unavailable`` when a record cannot be read (with ``errors="raise"``; the message
        names the fix), or the conversations folder cannot be listed; on the Dask engine
        also when a record was rewritten or deleted after the frame was made (fewer
        messages, another message where the newest planned one was, or a role not seen).

    Warns
    -----
    UserWarning
        ``home`` names no folder (a mistyped path): the frame is empty. With
        ``errors="skip"``, the records left out.
    """
    if engine not in ("pandas", "dask"):
        raise ValueError(f"engine must be 'pandas' or 'dask', not {engine!r}")
    if errors not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', not {errors!r}")
    store = _store(home)
    _warn_if_no_home(store, "read_conversations", 2)
    contexts = store.contexts()
    if engine == "pandas":
        frame, unread = _pandas_frames(store, contexts, progress, errors)
    else:
        summaries, unread = _summaries(store, contexts, errors)
        extra = {"skipped_records": unread} if errors == "skip" else {}
        frame = _dask_frame(store, summaries, extra)
    if errors == "skip":
        if engine == "pandas":
            frame.attrs["skipped_records"] = unread
        _warn_skipped(unread)
    return frame


def _warn_skipped(unread: dict[str, str]) -> None:
    if not unread:
        return
    listed = "; ".join(f"{c!r}: {why}" for c, why in list(unread.items())[:5])
    more = f"; and {len(unread) - 5} more" if len(unread) > 5 else ""
    warnings.warn(
        f"read_conversations(errors='skip') left out {len(unread)} record(s) it could not "
        f"read ({listed}{more}); frame.attrs['skipped_records'] lists them all",
        UserWarning,
        stacklevel=3,  # the caller of read_conversations
    )
