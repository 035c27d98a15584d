"""One row on this machine: exactly one ``invoke`` (or a start and its polls), as a record.

Each row is an ``invoke`` of the batch's host from a worker thread, audited like any call.
The call itself compares the target it resolves (cached while the folder's ``stat`` is
unchanged, no describe) with the batch's plan: a module that no longer hashes to what the
batch was approved for, or no longer resolves at all, is not run (``module_changed``). The
snapshot that runs is the one so compared, so no change slips in between. Artifacts are
staged as the row finishes, in parallel.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import InvocationCancelled, ModuleHostError

if TYPE_CHECKING:
    from murmur_nb._modules.host import Invocation, ModuleHost
from murmur_nb._modules.batch.longrun import run_long
from murmur_nb._modules.batch.plan import Plan
from murmur_nb._modules.batch.record import error_record, invocation_record, not_run_record
from murmur_nb._modules.call import MODULE_CHANGED

__all__ = ["ROWS_PER_CORE", "run_row", "staged_artifacts"]

#: rows in flight per usable core: one in its sandboxed process, one in the host's Python part
ROWS_PER_CORE = 2


def staged_artifacts(host: ModuleHost, inv: Any) -> list[dict[str, Any]]:
    """Each verified artifact of ``inv`` copied into the host's store, as record entries."""
    out = []
    for artifact in inv.artifacts:
        staged = host.stage(artifact)
        entry = artifact.model_dump(mode="json")
        entry.update(root="staged", path=staged.path, file=str(staged.file))
        out.append(entry)
    return out


def run_row(
    host: ModuleHost,
    plan: Plan,
    value: Any,
    attempt: int,
    *,
    cancel: threading.Event,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Run one row; return its record (``ok``, ``failed`` or ``not_run``). Never raises for
    a row's own failure; a bug of the host surfaces as a ``host_error`` row, not run."""
    expect = (plan.descriptor_digest, plan.code)

    def invoke(capability: str, request: Any) -> Invocation:
        return host._invoke_planned(capability, request, expect, cancel=cancel, **options)

    try:
        if plan.poll is not None:
            inv = run_long(invoke, plan.capability, value, plan.poll, cancel=cancel)
        else:
            inv = invoke(plan.capability, value)
        return invocation_record(inv, staged_artifacts(host, inv), attempt)
    except InvocationCancelled as exc:
        return not_run_record("cancelled", exc.message or "cancelled")
    except ModuleHostError as exc:
        if exc.code == MODULE_CHANGED:
            return not_run_record(MODULE_CHANGED, exc.message)
        return error_record(exc, attempt)
    except Exception as exc:
        return not_run_record("host_error", f"{type(exc).__name__}: {exc}")
