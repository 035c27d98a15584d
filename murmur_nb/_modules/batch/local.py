"""One row on this machine: exactly one ``invoke`` (or a start and its polls), as a record.

Each row is an ``invoke`` of the batch's host from a worker thread, audited like any call.
Before each call the host's resolved target (:meth:`ModuleHost.resolve`, cached) is compared
with the batch's plan (a ``stat``, no describe): a module that no longer hashes to what the
batch was approved for is not run (``module_changed``); a change in the instant after that
check still runs from a verified snapshot, and the next row sees it. Artifacts are staged as
the row finishes, in parallel.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import InvocationCancelled, ModuleHostError

if TYPE_CHECKING:
    from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.batch.longrun import run_long
from murmur_nb._modules.batch.plan import Plan
from murmur_nb._modules.batch.record import error_record, invocation_record, not_run_record

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


def _changed(host: ModuleHost, plan: Plan) -> bool:
    now = host.resolve(plan.capability)
    return (now.digest, now.code) != (plan.descriptor_digest, plan.code)


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
    try:
        if _changed(host, plan):
            return not_run_record(
                "module_changed",
                f"module {plan.module!r} changed after the batch started (its descriptor or "
                "code digest differs): this row was not run; run map() again to approve and "
                "run the new code",
            )
        if plan.poll is not None:
            inv = run_long(host, plan.capability, value, plan.poll, cancel=cancel, **options)
        else:
            inv = host.invoke(plan.capability, value, cancel=cancel, **options)
        return invocation_record(inv, staged_artifacts(host, inv), attempt)
    except InvocationCancelled as exc:
        return not_run_record("cancelled", exc.message or "cancelled")
    except ModuleHostError as exc:
        return error_record(exc, attempt)
    except Exception as exc:
        return not_run_record("host_error", f"{type(exc).__name__}: {exc}")
