"""A long-running capability as one row: start it, poll until the job says it is finished.

The poll gets the started result's keys its request schema names; when the job is finished is
decided by :func:`murmur_nb._modules.request.poll_finished`, the rule ``widgets.LiveRun``
uses too. Every start and poll is an ``invoke`` (sandboxed, verified, audited); the row is the
last poll's invocation with the costs of every call summed (unknown if any was) and their
warnings kept. At most ``poll_timeout`` seconds (then ``deadline_exceeded``); Cancel or Ctrl-C
between polls ends the row as ``cancelled``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import DeadlineExceeded, InvocationCancelled
from murmur_nb._modules.invocation import Invocation
from murmur_nb._modules.request import poll_finished

if TYPE_CHECKING:
    from murmur_nb._modules.host import ModuleHost

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
    last = calls[-1]
    last.execution = last.execution.model_copy(update={
        "estimated_cost": _sum([c.execution.estimated_cost for c in calls]),
        "actual_cost": _sum([c.execution.actual_cost for c in calls]),
    })  # fmt: skip
    last.warnings = [w for c in calls for w in c.warnings]
    last.duration_ms = sum(c.duration_ms for c in calls)
    if len(calls) > 1:
        last.warnings.append(f"long-running: started, then polled {len(calls) - 1} time(s)")
    return last


def run_long(
    host: ModuleHost,
    capability: str,
    value: Any,
    poll: Poll,
    *,
    cancel: threading.Event,
    **options: Any,
) -> Invocation:
    """Start ``capability`` on ``value`` and poll until finished; one combined invocation."""
    calls = [host.invoke(capability, value, cancel=cancel, **options)]
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
        calls.append(host.invoke(poll.capability, request, cancel=cancel, **options))
    return _combined(calls)
