"""One replay row per (record, hook, event, window), and the typed DataFrame they make.

A row is a plain dict of Python values (it crosses from a Dask worker as one), built from a
:class:`~murmur_nb.HookResult` and, for ``compact``, the window offered. Rows become a frame
with pandas' nullable dtypes, so a column that does not apply to a row (compaction figures on
a ``task-start`` row, anything after a trap) is ``<NA>``, never a fake zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from murmur_nb._conversations.store import Message
from murmur_nb._hooks.results import HookResult

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "DTYPES", "compact_row", "frame_of", "start_row"]

#: Column -> pandas dtype, in the frame's order.
DTYPES: dict[str, str] = {
    "context_id": "string",
    "hook_id": "string",
    "event": "category",
    "window": "Int64",
    "final": "boolean",
    "ok": "bool",
    "code": "string",
    "error": "string",
    "duration_ms": "float64",
    "fuel_used": "Int64",
    "note": "string",
    "messages_in": "Int64",
    "chars_in": "Int64",
    "messages_out": "Int64",
    "chars_out": "Int64",
    "kept_ratio": "Float64",
    "roles_dropped": "object",
    "first_system_kept": "boolean",
    "last_user_kept": "boolean",
    "kept_ids": "object",
    "new_ids": "object",
    "output": "object",
    "stderr": "string",
    "worker": "string",
}
COLUMNS = tuple(DTYPES)


def _base(context_id: str, result: HookResult, worker: str | None) -> dict[str, Any]:
    return {
        "context_id": context_id,
        "hook_id": result.hook_id,
        "event": result.event,
        "ok": result.ok,
        "code": result.code,
        "error": result.error,
        "duration_ms": result.duration_ms,
        "fuel_used": result.fuel_used,
        "stderr": result.stderr or None,
        "worker": worker,
    }


def start_row(context_id: str, result: HookResult, worker: str | None = None) -> dict[str, Any]:
    """The row of one ``task-start`` call: its note when ``ok``."""
    row = _base(context_id, result, worker)
    row["note"] = result.value if result.ok else None
    return row


def _survived(messages: Sequence[Message], role: str, out_ids: set[str], last: bool) -> Any:
    found = [m for m in messages if m.role == role]
    if not found:
        return None
    return (found[-1] if last else found[0]).id in out_ids


def compact_row(
    context_id: str,
    result: HookResult,
    window: Sequence[Message],
    *,
    final: bool,
    worker: str | None = None,
) -> dict[str, Any]:
    """The row of one ``compact`` call on ``window`` (the record's first ``len(window)``)."""
    row = _base(context_id, result, worker)
    row.update(
        window=len(window),
        final=final,
        messages_in=len(window),
        chars_in=sum(len(m.content) for m in window),
    )
    if not result.ok:
        return row
    out: list[Message] = list(result.value)
    out_ids = {m.id for m in out}
    in_ids = {m.id for m in window}
    kept = [m.id for m in out if m.id in in_ids]
    dropped = Counter(m.role for m in window if m.id not in out_ids)
    # a record may repeat an id: a message offered is kept when its id comes back
    survived = sum(1 for m in window if m.id in out_ids)
    row.update(
        messages_out=len(out),
        chars_out=sum(len(m.content) for m in out),
        kept_ratio=survived / len(window) if window else None,
        roles_dropped=dict(sorted(dropped.items())),
        first_system_kept=_survived(window, "system", out_ids, last=False),
        last_user_kept=_survived(window, "user", out_ids, last=True),
        kept_ids=kept,
        new_ids=[m.id for m in out if m.id not in in_ids],
        output=out,
    )
    return row


def frame_of(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a frame with the columns and dtypes of :data:`DTYPES`."""
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    frame = pd.DataFrame.from_records(list(rows), columns=list(COLUMNS))
    typed = {c: t for c, t in DTYPES.items() if t != "object"}
    frame = frame.astype(typed)
    frame["event"] = frame["event"].cat.set_categories(["task-start", "compact"])
    return frame
