"""A batch as a DataFrame (:func:`batch_frame`) and its images as one grid (:func:`batch_grid`).

One row per input, in input order, on the input's own index, so ``df.join(batch.to_pandas())``
lines up. ``ok`` is a nullable boolean, costs ``Float64`` (``<NA>`` is unknown, never free).
A flat object result spreads into ``result_<name>`` columns, else one ``result`` column; an
input column clashing with an outcome column is prefixed ``input_``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from murmur_nb._modules.invocation import Invocation

if TYPE_CHECKING:
    from murmur_nb._batch.batch import Batch

__all__ = ["OUTCOME_COLUMNS", "batch_frame", "batch_grid"]

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


def _outcome(batch: Batch, i: int, record: dict[str, Any] | None) -> dict[str, Any]:
    if record is None:
        return {"status": batch.status(i), "ok": None, "warnings": [], "artifacts": [],
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
        "from_journal": bool(batch._journaled[i]), "attempts": record.get("attempts"),
        "request_id": record.get("request_id") or None,
    }  # fmt: skip


def _result_columns(batch: Batch, record: dict[str, Any] | None) -> dict[str, Any]:
    fields = batch.plan.flat_result
    result = record.get("result") if record else None
    if fields is None:
        return {"result": result}
    got = result if isinstance(result, dict) else {}
    return {f"result_{name}": got.get(name) for name in fields}


def batch_frame(batch: Batch) -> Any:
    """The batch's rows as a DataFrame (see the module notes for the columns)."""
    import pandas as pd  # noqa: PLC0415

    inputs = batch.inputs
    taken = set(OUTCOME_COLUMNS) | {"result"} | {f"result_{n}" for n in
                                                 batch.plan.flat_result or ()}  # fmt: skip
    names = {c: (f"input_{c}" if c in taken else c) for c in inputs.columns}
    rows = []
    for i in range(len(batch)):
        record = batch.record(i)
        if inputs.frame is not None:
            row = {names[c]: v for c, v in zip(inputs.columns, inputs.frame.iloc[i], strict=True)}
        else:
            value = json.loads(batch._texts[i]) if batch._texts[i] else {}
            value = value if isinstance(value, dict) else {}
            row = {names[c]: value.get(c) for c in inputs.columns}
        row.update(_result_columns(batch, record))
        row.update(_outcome(batch, i, record))
        rows.append(row)
    index = inputs.index if inputs.index is not None else pd.RangeIndex(len(rows))
    frame = pd.DataFrame(rows, index=index)
    for column in frame.columns:
        if column.startswith("result_"):
            frame[column] = frame[column].convert_dtypes()
    for column, dtype in _DTYPES.items():
        if column in frame:
            frame[column] = frame[column].astype(dtype)  # type: ignore[call-overload]
    return frame


def batch_grid(batch: Batch, limit: int) -> Any:
    """The image artifacts of the first ``limit`` rows that have one, as one grid."""
    from murmur_nb._render.render import render  # noqa: PLC0415

    images: list[Any] = []
    for i in range(len(batch)):
        if len(images) >= limit:
            break
        record = batch.record(i)
        if record and any(a.get("file") for a in record.get("artifacts") or []):
            inv = batch[i]
            images.extend(
                a.model_copy(update={"presentation": "image_grid"})
                for a in inv.artifacts
                if a.media_type.startswith("image/")
            )
    first = batch[0] if len(batch) and batch.record(0) else None
    request = first.request if first is not None else None
    grid = Invocation(module=batch.plan.module, capability=batch.capability,
                      request=request or _empty_request(batch), ok=True,
                      artifacts=images[:limit])  # fmt: skip
    if not images:
        grid.request = _empty_request(batch)
    else:
        from murmur_nb.protocol import Root  # noqa: PLC0415

        grid.request = grid.request.model_copy(
            update={"roots": {"staged": Root(path=str(batch.host.store.root), mode="ro")}}
        )
    return render(grid)


def _empty_request(batch: Batch) -> Any:
    from murmur_nb.protocol import Request  # noqa: PLC0415

    return Request(capability=batch.capability, request_id="grid")
