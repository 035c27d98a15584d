"""One row on this machine: one run of the batch's prepared call (or a start and its polls).

Each row runs the :class:`~murmur_nb.PreparedCall` the batch made once (resolved, approved,
its input already checked when the batch started), from a worker thread, audited like any
call. The batch's own look at the live module is the run's ``if_unchanged=True``: a module
that no longer hashes to what the batch was approved for, or no longer resolves at all, is
not run (``module_changed``); what runs is the prepared snapshot, so nothing of a new code
runs either way. Artifacts are staged as the row finishes, in parallel.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import InvocationCancelled, ModuleHostError

if TYPE_CHECKING:
    from murmur_nb._modules.host import Invocation, ModuleHost
from murmur_nb._batch.longrun import run_long
from murmur_nb._batch.plan import Plan
from murmur_nb._batch.record import error_record, invocation_record, not_run_record
from murmur_nb._modules.call import MODULE_CHANGED

__all__ = ["ROWS_PER_CORE", "RUN_OPTIONS", "run_row", "staged_artifacts"]

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


#: the batch options a row's run takes (``approve`` was decided when the call was prepared)
RUN_OPTIONS = ("deadline_ms", "max_output_bytes", "extra")


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
    prepared, poll = plan.prepared, plan.poll_prepared
    run_options = {k: options[k] for k in RUN_OPTIONS if k in options}

    def invoke(capability: str, request: Any) -> Invocation:
        # the row's input was checked when the batch started; a poll's request was not
        call = prepared if capability == plan.capability else poll
        assert call is not None, "a batch runs only once its call is prepared"
        return call.run(request, cancel=cancel, if_unchanged=True,
                        validate_input=call is not prepared, **run_options)  # fmt: skip

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
