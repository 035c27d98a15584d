"""A batch as a DataFrame (:func:`batch_frame`) and its images as one grid (:func:`batch_grid`).

One row per input, in input order, on the input's own index, so ``df.join(batch.to_pandas())``
lines up. ``ok`` is a nullable boolean, costs ``Float64`` (``<NA>`` is unknown, never free).
A flat object result spreads into ``result_<name>`` columns, else one ``result`` column; an
input column clashing with an outcome column is prefixed ``input_``. Every frame has its
columns in one order, an empty batch's too.

**Dtypes do not depend on the values.** A DataFrame's input columns are its own columns,
dtypes and all (``Int64``, ``category``, ``boolean`` stay so; rebuilding them from rows made
them ``object``). A ``result_<name>`` column takes its dtype from the result schema, not from
what the rows hold (``object`` when every row failed, ``Int64`` when one was ok, so two
batches did not ``concat``): ``integer`` -> ``Int64``, ``number`` -> ``Float64``, ``string``
-> ``string``, ``boolean`` -> ``boolean``, anything else ``object``; a value the dtype cannot
hold (an integer past 64 bits) leaves that column ``object``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from murmur_nb._batch.inputs import Inputs
from murmur_nb._modules.invocation import Invocation

__all__ = ["OUTCOME_COLUMNS", "Row", "batch_frame", "batch_grid"]

#: one row of a batch as the frame reads it: its status, its record (``None``: none yet)
#: and whether it came from the journal
Row = tuple[str, dict[str, Any] | None, bool]

OUTCOME_COLUMNS = (
    "status", "ok", "error_code", "error_message", "retryable", "warnings", "artifacts",
    "artifact_locations", "estimated_cost", "actual_cost", "duration_ms", "confinement",
    "from_journal", "attempts", "request_id",
)  # fmt: skip

_DTYPES = {
    "status": "string", "ok": "boolean", "error_code": "string", "error_message": "string",
    "retryable": "boolean", "estimated_cost": "Float64", "actual_cost": "Float64",
    "duration_ms": "Float64", "confinement": "string", "from_journal": "bool",
    "attempts": "Int64", "request_id": "string",
}  # fmt: skip


def _outcome(row: Row) -> dict[str, Any]:
    status, record, from_journal = row
    if record is None:
        return {"status": status, "ok": None, "warnings": [], "artifacts": [],
                "artifact_locations": [], "from_journal": False}  # fmt: skip
    error = record.get("error") or {}
    execution = record.get("execution") or {}
    arts = record.get("artifacts") or []
    return {
        "status": record["status"], "ok": bool(record["ok"]),
        "error_code": error.get("code"), "error_message": error.get("message"),
        "retryable": error.get("retryable") if error else None,
        "warnings": list(record.get("warnings") or []),
        "artifacts": [a["id"] for a in arts],
        "artifact_locations": [a["location"] for a in arts if a.get("location")],
        "estimated_cost": execution.get("estimated_cost"),
        "actual_cost": execution.get("actual_cost"),
        "duration_ms": record.get("duration_ms"), "confinement": record.get("confinement"),
        "from_journal": from_journal, "attempts": record.get("attempts"),
        "request_id": record.get("request_id") or None,
    }  # fmt: skip


#: a flat result property's JSON type -> its column's dtype (any other: ``object``)
_RESULT_DTYPES = {"integer": "Int64", "number": "Float64", "string": "string",
                  "boolean": "boolean"}  # fmt: skip


def _result_columns(fields: dict[str, str] | None, record: dict[str, Any] | None
                    ) -> dict[str, Any]:  # fmt: skip
    result = record.get("result") if record else None
    if fields is None:
        return {"result": result}
    got = result if isinstance(result, dict) else {}
    return {f"result_{name}": got.get(name) for name in fields}


def _typed_results(frame: Any, fields: dict[str, str] | None) -> None:
    """Each ``result_<name>`` column in the dtype of its property's JSON type."""
    for name, kind in (fields or {}).items():
        column = f"result_{name}"
        dtype = _RESULT_DTYPES.get(kind, "object")
        try:
            frame[column] = frame[column].astype(dtype)
        except (TypeError, ValueError, OverflowError):  # a value the dtype cannot hold
            frame[column] = frame[column].astype(object)


def _escaped(line: dict[str, Any]) -> dict[str, Any]:
    """``line`` with each lone surrogate in its keys and text cells written as its escape
    (``\\udc80``): the frame's text columns are UTF-8 and cannot hold one."""

    def shown(value: Any) -> Any:
        if isinstance(value, str):
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value

    return {shown(k): shown(v) for k, v in line.items()}


def _input_columns(frame: Any, given: Any, names: list[str]) -> None:
    """The DataFrame ``given``'s own columns put in front of ``frame`` under ``names``, their
    dtypes kept (named, so an ``object`` column is not inferred again: a lone surrogate in
    an invalid row's text cell stays as it was given)."""
    import pandas as pd  # noqa: PLC0415

    for at, name in enumerate(names):
        column = given.iloc[:, at]
        frame.insert(at, name, pd.Series(column.array, index=frame.index, dtype=column.dtype,
                                         copy=False))  # fmt: skip


def batch_frame(
    inputs: Inputs, texts: Sequence[str], flat_result: Sequence[tuple[str, str]] | None,
    rows: Iterable[Row],
) -> Any:  # fmt: skip
    """The batch's rows as a DataFrame (see the module notes for the columns): ``inputs``
    and their canonical ``texts``, the plan's ``flat_result`` fields and their JSON types,
    and each row's :data:`Row` in input order (read from the journal as the frame is
    built)."""
    import pandas as pd  # noqa: PLC0415

    fields = None if flat_result is None else dict(flat_result)
    taken = set(OUTCOME_COLUMNS) | {"result"} | {f"result_{n}" for n in fields or ()}
    names = {c: (f"input_{c}" if c in taken else c) for c in inputs.columns}
    listed = inputs.frame is None  # the input columns come from the rows' own JSON
    out = []
    for i, row in enumerate(rows):
        line: dict[str, Any] = {}
        if listed:
            value = json.loads(texts[i]) if texts[i] else {}
            value = value if isinstance(value, dict) else {}
            line.update((names[c], value.get(c)) for c in inputs.columns)
        line.update(_result_columns(fields, row[1]))
        line.update(_outcome(row))
        out.append(line)
    index = inputs.index if inputs.index is not None else pd.RangeIndex(len(out))
    # named, so that every frame has them in this order: an empty batch's too
    columns = [*(names.values() if listed else ()), *_result_columns(fields, None),
               *OUTCOME_COLUMNS]  # fmt: skip
    try:
        frame = pd.DataFrame(out, index=index, columns=columns)
    except UnicodeEncodeError:  # a lone surrogate in an invalid row's key or cell
        frame = pd.DataFrame([_escaped(line) for line in out], index=index,
                             columns=list(_escaped(dict.fromkeys(columns))))  # fmt: skip
    if not listed:
        _input_columns(frame, inputs.frame, [names[c] for c in inputs.columns])
    _typed_results(frame, fields)
    for column, dtype in _DTYPES.items():
        if column in frame:
            frame[column] = frame[column].astype(dtype)  # type: ignore[call-overload]
    return frame


def batch_grid(
    with_files: Iterator[Invocation], first: Invocation | None, *, module: str,
    capability: str, store_root: Path, limit: int,
) -> Any:  # fmt: skip
    """The image artifacts of the first ``limit`` rows that have one (``with_files``: the
    rows with an artifact file, in input order; ``first``: row 0, if it has an outcome), as
    one grid."""
    from murmur_nb._render.render import render  # noqa: PLC0415

    images: list[Any] = []
    for inv in with_files:
        if len(images) >= limit:
            break
        images.extend(
            a.model_copy(update={"presentation": "image_grid"})
            for a in inv.artifacts
            if a.media_type.startswith("image/")
        )
    request = first.request if first is not None else None
    grid = Invocation(module=module, capability=capability,
                      request=request or _empty_request(capability), ok=True,
                      artifacts=images[:limit])  # fmt: skip
    if not images:
        grid.request = _empty_request(capability)
    else:
        from murmur_nb.protocol import Root  # noqa: PLC0415

        grid.request = grid.request.model_copy(
            update={"roots": {"staged": Root(path=str(store_root), mode="ro")}}
        )
    return render(grid)


def _empty_request(capability: str) -> Any:
    from murmur_nb.protocol import Request  # noqa: PLC0415

    return Request(capability=capability, request_id="grid")
