"""Audit rows for :meth:`ModuleHost.audit <murmur_nb.ModuleHost.audit>`, and their DataFrame.

Design notes
------------
* **A row per invocation, refused and failed ones too.** A row is opened before anything
  runs and filled as the call gets further, so a refusal still records what was known
  (module, approval) and a host failure keeps the partial :class:`~murmur_nb.Invocation`'s
  facts.
* **Unknown is not free.** Costs are nullable ``Float64`` columns: ``<NA>`` is *unknown*,
  ``0`` is free.
* **Knowledge loads have their own frame** (:func:`knowledge_frame`, one row per skill or
  overlay load, refused ones too): they are not invocations, and mixing them would break
  "one row per invocation".
* **pandas is imported on first use**, never by ``import murmur_nb``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from murmur_nb._modules.host import Invocation


def _new_row(capability: str, request_id: str, started: datetime) -> dict[str, Any]:
    return {
        "time": started,
        "module": None,
        "capability": capability,
        "request_id": request_id,
        "grants": None,
        "approval": "not evaluated",
        "duration_ms": None,
        "outcome": None,
        "ok": False,
        "estimated_cost": None,
        "actual_cost": None,
        "artifacts": [],
        "rejected_artifacts": [],
        "warnings": 0,
        "message": "",
        "confinement": "",
    }


def _fill_row(row: dict[str, Any], inv: Invocation) -> None:
    row["module"] = inv.module
    row["grants"] = inv.request.grants.model_dump(mode="json")
    row["approval"] = inv.approval
    row["ok"] = inv.ok
    row["estimated_cost"] = inv.execution.estimated_cost
    row["actual_cost"] = inv.execution.actual_cost
    row["artifacts"] = [a.digest for a in inv.artifacts]
    row["rejected_artifacts"] = [f"{r.id}:{r.code}" for r in inv.rejected_artifacts]
    row["warnings"] = len(inv.warnings)
    row["confinement"] = inv.confinement


def _audit_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 - heavy; imported on first use

    columns = [
        "time",
        "module",
        "capability",
        "request_id",
        "grants",
        "approval",
        "duration_ms",
        "outcome",
        "ok",
        "estimated_cost",
        "actual_cost",
        "artifacts",
        "rejected_artifacts",
        "warnings",
        "message",
        "confinement",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    for col in ("estimated_cost", "actual_cost"):
        frame[col] = pd.array(
            [pd.NA if v is None else float(v) for v in frame[col]], dtype="Float64"
        )
    frame["time"] = pd.to_datetime(frame["time"], utc=True)
    frame["duration_ms"] = frame["duration_ms"].astype("float64")
    frame["ok"] = frame["ok"].astype(bool)
    frame["warnings"] = frame["warnings"].astype("int64")
    return frame


KNOWLEDGE_COLUMNS = [
    "time",
    "module",
    "kind",
    "id",
    "path",
    "capability",
    "digest",
    "tokens",
    "bytes",
    "outcome",
    "message",
]


def knowledge_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The skill and overlay loads as a DataFrame; ``bytes`` is ``<NA>`` for a refused load."""
    import pandas as pd  # noqa: PLC0415 - heavy; imported on first use

    frame = pd.DataFrame(rows, columns=KNOWLEDGE_COLUMNS)
    frame["time"] = pd.to_datetime(frame["time"], utc=True)
    frame["tokens"] = frame["tokens"].astype("int64")
    frame["bytes"] = pd.array([row["bytes"] for row in rows], dtype="Int64")
    return frame
