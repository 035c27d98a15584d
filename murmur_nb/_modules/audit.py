"""Audit rows for :meth:`ModuleHost.audit <murmur_nb.ModuleHost.audit>`, and their DataFrame.

* **A row per invocation, refused and failed ones too.** An :class:`AuditRow` is a value,
  built once when the call ended (:meth:`AuditRow.of`) from how far it got (module,
  approval, grants), so a refusal still records what was known, and a failure after the
  run keeps the partial :class:`~murmur_nb.Invocation`'s facts, its evidence (how the
  process ended, its stderr tail) included.
* **Unknown is not free.** Costs are nullable ``Float64`` columns: ``<NA>`` is *unknown*,
  ``0`` is free.
* **Knowledge loads have their own frame** (``knowledge.knowledge_frame``, a row per skill or
  overlay load, refused ones too): they are not invocations, and mixing them would break
  "one row per invocation".
* **pandas is imported on first use**, never by ``import murmur_nb``.
* **Small in memory.** A host keeps every row of its life (a 100,000-row batch makes as
  many), so rows have slots, their repeated texts are interned, and a row whose grants equal
  the previous row's shares that dict (rows are frozen, :meth:`AuditRow.as_dict` copies):
  about a third of the memory of plain rows.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from murmur_nb._modules.invocation import Invocation

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AuditRow", "Called", "Reached", "audit_frame"]


#: ``(time, capability, request_id)``: what the caller asked, and when
Called = tuple[datetime, str, str]
#: ``(module, approval, grants)``: how far a call got before it ended
Reached = tuple[str | None, str, dict[str, Any] | None]


_last_grants: list[dict[str, Any] | None] = [None]


def _shared(grants: dict[str, Any] | None) -> dict[str, Any] | None:
    """``grants``, or the previous row's equal dict (one dict for a batch's rows)."""
    last = _last_grants[0]
    if grants is not None and grants == last:
        return last
    _last_grants[0] = grants
    return grants


def _kept(text: str | None) -> str | None:
    """A repeated short text (module, capability, approval, outcome, sandbox), interned."""
    return None if text is None else sys.intern(text)


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One invocation's audit facts; the field order is the DataFrame's column order."""

    time: datetime
    module: str | None
    capability: str
    request_id: str
    grants: dict[str, Any] | None = None
    approval: str = "not evaluated"
    duration_ms: float | None = None
    outcome: str | None = None
    ok: bool = False
    estimated_cost: float | None = None
    actual_cost: float | None = None
    artifacts: list[str] = field(default_factory=list)
    rejected_artifacts: list[str] = field(default_factory=list)
    warnings: int = 0
    message: str = ""
    confinement: str = ""
    exit: str = ""
    stderr_tail: str = ""

    @classmethod
    def of(
        cls,
        call: Called,
        reached: Reached,
        outcome: tuple[str, str],
        duration_ms: float,
        inv: Invocation | None = None,
    ) -> AuditRow:
        """The row of one call, built once when it ended: what the caller asked (``call``),
        how far it got (``reached``: module, approval, grants), how it ended (``outcome``:
        code and message) and, when the module ran, what its invocation knows (costs,
        artifacts, sandbox, how the process ended); a failed run's invocation is never ok."""
        module, approval, grants = reached
        if inv is None:
            return cls(
                time=call[0], module=_kept(module), capability=sys.intern(call[1]),
                request_id=call[2], grants=_shared(grants), approval=sys.intern(approval),
                duration_ms=duration_ms, outcome=_kept(outcome[0]), message=outcome[1],
            )  # fmt: skip
        evidence = inv.evidence
        # the caller's dump of this request's grants when it made one (a call's pipeline does,
        # for the rows of calls that end before the module runs)
        dumped = grants if grants is not None else inv.request.grants.wire()
        return cls(
            time=call[0],
            module=_kept(inv.module),
            capability=sys.intern(call[1]),
            request_id=call[2],
            grants=_shared(dumped),
            approval=sys.intern(inv.approval),
            duration_ms=duration_ms,
            outcome=_kept(outcome[0]),
            ok=inv.ok and outcome[0] == "ok",
            estimated_cost=inv.execution.estimated_cost,
            actual_cost=inv.execution.actual_cost,
            artifacts=[a.digest for a in inv.artifacts],
            rejected_artifacts=[f"{r.id}:{r.code}" for r in inv.rejected_artifacts],
            warnings=len(inv.warnings),
            message=outcome[1],
            confinement=sys.intern(inv.confinement),
            exit=sys.intern(evidence.ended) if evidence is not None else "",
            stderr_tail=evidence.stderr_tail if evidence is not None else "",
        )

    @staticmethod
    def outcome_of(inv: Invocation) -> tuple[str, str]:
        """``(outcome, message)`` of a call that returned: ``ok`` or the module's error; an
        ok in the ``warning`` state says why in its message (``Invocation.problems``)."""
        if inv.ok:
            return "ok", "; ".join(inv.problems)
        if inv.error is None:
            return "error", ""
        return inv.error.code, inv.error.message

    def as_dict(self) -> dict[str, Any]:
        """A copy as plain data (lists and the grants dict copied too)."""
        return dataclasses.asdict(self)


COLUMNS = tuple(f.name for f in dataclasses.fields(AuditRow))
#: the columns of text (``module`` is missing for a call that found no module)
TEXT_COLUMNS = ("module", "capability", "request_id", "approval", "outcome", "message",
                "confinement", "exit", "stderr_tail")  # fmt: skip


def audit_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows (:meth:`AuditRow.as_dict`) as a DataFrame: nullable costs, a UTC ``time``."""
    import pandas as pd  # noqa: PLC0415 - heavy; imported on first use

    frame = pd.DataFrame(list(rows), columns=list(COLUMNS))
    for col in ("estimated_cost", "actual_cost"):
        frame[col] = pd.array(
            [pd.NA if v is None else float(v) for v in frame[col]], dtype="Float64"
        )
    # one schema however many rows (an empty audit had object columns and a time in seconds,
    # so a concat with a full one turned its text columns into objects)
    frame["time"] = pd.to_datetime(frame["time"], utc=True).astype("datetime64[us, UTC]")
    for col in TEXT_COLUMNS:
        frame[col] = frame[col].astype("str")
    frame["duration_ms"] = frame["duration_ms"].astype("float64")
    frame["ok"] = frame["ok"].astype(bool)
    frame["warnings"] = frame["warnings"].astype("int64")
    return frame
