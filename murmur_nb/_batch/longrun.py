"""A long-running capability as one row: start it, poll until the job says it is finished.

The poll gets the started result's keys its request schema names; when the job is finished is
decided by :func:`murmur_nb._modules.request.poll_finished`, the rule ``widgets.LiveRun``
uses too. Every start and poll is an ``invoke`` (sandboxed, verified, audited); the row is the
last poll's invocation with the costs of every call summed (unknown if any was) and their
warnings kept. At most ``poll_timeout`` seconds (then ``deadline_exceeded``); Cancel or Ctrl-C
between polls ends the row as ``cancelled``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from murmur_nb._exceptions import DeadlineExceeded, InvocationCancelled
from murmur_nb._modules.invocation import Invocation
from murmur_nb._modules.request import poll_finished

__all__ = ["Poll", "poll_input", "run_long"]



@dataclass(frozen=True)
class Poll:
    """How a batch polls: the poll capability, the keys its schema names, and the pacing."""

    capability: str
    fields: Sequence[str]
    every: float = 0.2
    timeout: float = 600.0


def poll_input(fields: Sequence[str], result: Any) -> dict[str, Any]:
    """The poll capability's request: the started result's keys its request schema names."""
    if not isinstance(result, Mapping):
        return {}
    return {k: result[k] for k in fields if k in result}


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)


def _combined(calls: list[Invocation]) -> Invocation:
    """The last call, carrying the costs, warnings and duration of all of them."""
    last = calls[-1]
    execution = last.execution.model_copy(update={
        "estimated_cost": _sum([c.execution.estimated_cost for c in calls]),
        "actual_cost": _sum([c.execution.actual_cost for c in calls]),
    })  # fmt: skip
    warnings = [w for c in calls for w in c.warnings]
    if len(calls) > 1:
        warnings.append(f"long-running: started, then polled {len(calls) - 1} time(s)")
    return dataclasses.replace(
        last,
        execution=execution,
        warnings=warnings,
        duration_ms=sum(c.duration_ms for c in calls),
    )


def run_long(
    invoke: Callable[[str, Any], Invocation],
    capability: str,
    value: Any,
    poll: Poll,
    *,
    cancel: threading.Event,
) -> Invocation:
    """Start ``capability`` on ``value`` and poll until finished; one combined invocation.

    ``invoke(capability, request)`` is the row's call (the batch's options bound in)."""
    calls = [invoke(capability, value)]
    end = time.monotonic() + poll.timeout
    while calls[-1].ok and not (len(calls) > 1 and poll_finished(calls[-1].result)):
        if time.monotonic() > end:
            raise DeadlineExceeded(
                f"{capability}: the job was not finished after polling {poll.capability} for "
                f"{poll.timeout:g} s; raise poll_timeout= or look at the job"
            )
        if len(calls) > 1 and cancel.wait(poll.every):
            raise InvocationCancelled(f"{capability}: cancelled while polling {poll.capability}")
        request = poll_input(poll.fields, calls[-1].result)
        calls.append(invoke(poll.capability, request))
    return _combined(calls)
