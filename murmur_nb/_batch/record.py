"""One finished row of a batch as plain JSON (what the journal keeps), and back.

A row's verified artifacts are staged into the host's content-addressed store as it finishes
(its run folder is private and goes away), so a row read back from the journal, in this
kernel or the next, renders with ``mnb.render(batch[i])``, re-verified against the digest.
On a cluster an artifact past the size bound stays on the worker: the record has a
``location`` instead of a ``file``. A host error is a row too (``ok: false`` with its code),
keeping what the partial invocation knew: costs, warnings, stderr's tail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from murmur_nb._exceptions import ModuleHostError
from murmur_nb._files.artifacts import RejectedArtifact, VerifiedArtifact
from murmur_nb._modules.invocation import Invocation
from murmur_nb._sandbox import RunEvidence
from murmur_nb.protocol import Artifact, Error, Execution, Request, Root

__all__ = ["error_record", "invocation_of", "invocation_record", "not_run_record"]

#: error codes a row gets without any module having answered
NOT_RUN = "not_run"


def _artifact_dict(artifact: Artifact) -> dict[str, Any]:
    return artifact.model_dump(mode="json")


def _evidence_dict(evidence: RunEvidence | None) -> dict[str, Any] | None:
    """How the row's process ended (exit status or signal, stderr's tail, stdout's head):
    what a form shows under a crash, kept so ``batch[i]`` shows it too. Bounded already."""
    if evidence is None:
        return None
    return {"returncode": evidence.returncode, "signal": evidence.signal,
            "stderr_tail": evidence.stderr_tail, "stdout_head": evidence.stdout_head}  # fmt: skip


def invocation_record(
    inv: Invocation, artifacts: list[dict[str, Any]], attempts: int
) -> dict[str, Any]:
    """The record of an invocation that ran (``ok`` or the module's own error)."""
    error = inv.error
    return {
        "status": "ok" if inv.ok else "failed",
        "ok": inv.ok,
        "result": inv.result if inv.ok else None,
        "error": None if error is None else {
            "code": error.code, "message": error.message, "retryable": error.retryable},
        "warnings": list(inv.warnings),
        "execution": inv.execution.effects_wire(),
        "artifacts": artifacts,
        "rejected": [
            {"artifact": _artifact_dict(r.artifact), "code": r.code, "message": r.message}
            for r in inv.rejected_artifacts
        ],
        "duration_ms": inv.duration_ms,
        "approval": inv.approval,
        "confinement": inv.confinement,
        "request_id": inv.request_id,
        "attempts": attempts,
        "evidence": _evidence_dict(inv.evidence),
    }  # fmt: skip


def error_record(exc: ModuleHostError, attempts: int, *, retryable: bool = False) -> dict[str, Any]:
    """The record of a call the host ended with an error (after the module started, or not)."""
    partial = exc.invocation
    record: dict[str, Any] = {
        "status": "failed", "ok": False, "result": None,
        "error": {"code": exc.code, "message": exc.message, "retryable": retryable},
        "warnings": list(partial.warnings) if partial is not None else [],
        "execution": (partial.execution.effects_wire()
                      if partial is not None else {}),
        "artifacts": [], "rejected": [],
        "duration_ms": partial.duration_ms if partial is not None else 0.0,
        "approval": partial.approval if partial is not None else "",
        "confinement": partial.confinement if partial is not None else "",
        "request_id": partial.request_id if partial is not None else "",
        "attempts": attempts,
        "evidence": _evidence_dict(partial.evidence if partial is not None else None),
    }  # fmt: skip
    return record


def not_run_record(code: str, message: str) -> dict[str, Any]:
    """The record of a row that was never started, and why (never journaled)."""
    return {
        "status": NOT_RUN, "ok": False, "result": None,
        "error": {"code": code, "message": message, "retryable": False},
        "warnings": [], "execution": {}, "artifacts": [], "rejected": [], "duration_ms": 0.0,
        "approval": "", "confinement": "", "request_id": "", "attempts": 0,
    }  # fmt: skip


def invocation_of(
    record: dict[str, Any], capability: str, module: str, value: Any, store_root: Path | None
) -> Invocation:
    """An :class:`~murmur_nb.Invocation` rebuilt from a record, its artifacts in the store."""
    held = [a for a in record["artifacts"] if a.get("file")]
    roots = {"staged": Root(path=str(store_root), mode="ro")} if held and store_root else None
    request = Request(capability=capability, request_id=record["request_id"] or "-",
                      input=value, roots=roots)  # fmt: skip
    error = record["error"]
    execution = Execution(**record["execution"]) if record["execution"] else Execution()
    ended = record.get("evidence")  # journals written before it was kept have none
    evidence = RunEvidence(**ended) if ended else None
    return Invocation(
        module=module,
        capability=capability,
        request=request,
        ok=bool(record["ok"]),
        result=record["result"],
        error=None if error is None else Error(**error),
        warnings=list(record["warnings"]),
        execution=execution,
        artifacts=[VerifiedArtifact(**{k: v for k, v in a.items() if k != "location"})
                   for a in held],
        rejected_artifacts=[
            RejectedArtifact(Artifact(**r["artifact"]), r["code"], r["message"])
            for r in record["rejected"]
        ],
        duration_ms=float(record["duration_ms"] or 0.0),
        approval=record["approval"],
        confinement=record["confinement"],
        evidence=evidence,
        returncode=evidence.returncode if evidence is not None else None,
        stderr=evidence.stderr_tail if evidence is not None else "",
    )
