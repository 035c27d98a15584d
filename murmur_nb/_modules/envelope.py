"""The SPEC §1 envelope rules, checked on a module's raw ``invoke`` output.

Design notes
------------
* **How the process ended comes first.** A run that was killed for its output or its
  deadline is refused by :func:`check_run` before its output is read as an envelope.
* **Raw JSON first.** The rules are checked on the decoded JSON, before the pydantic
  :class:`~murmur_nb.protocol.Envelope` is built, so ``warnings: null`` and a missing
  ``execution`` are seen, not defaulted away.
* **One rule per breach.** Each breach is a :class:`~murmur_nb.ProtocolViolation` whose
  ``rule`` names it; callers route on ``rule``/``code``, never on the message.
* **Keep what the module reported.** Whatever ``execution`` the module sent is kept on the
  :class:`~murmur_nb.Invocation` even when a later rule breaks, so costs stay visible.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from murmur_nb._exceptions import (
    DeadlineExceeded,
    InvocationCancelled,
    ModuleHostError,
    OutputTooLarge,
    ProtocolViolation,
)
from murmur_nb._modules.invocation import Invocation
from murmur_nb._sandbox import RunResult
from murmur_nb._schemas.nesting import TooDeep, decode_bounded
from murmur_nb.protocol import OPERATION_INVOKE, PROTOCOL_ID, Envelope, Execution

__all__ = ["check_envelope", "check_run", "read_envelope"]


def read_envelope(run: RunResult, inv: Invocation) -> None:
    """Check how the run ended and its envelope; copy the envelope onto ``inv``.

    A breach raises with ``exc.invocation`` set to ``inv``, so what the module reported
    (its ``execution``, its stderr) stays visible.
    """
    inv.stderr = run.stderr_text
    inv.returncode = run.returncode
    request = inv.request
    try:
        check_run(run, inv, request.deadline_ms, request.max_output_bytes)
        envelope = check_envelope(run.stdout, inv.module, request.request_id, inv)
    except ModuleHostError as exc:
        exc.invocation = inv
        raise
    inv.envelope = envelope
    inv.ok = envelope.ok
    inv.result = envelope.result
    inv.error = envelope.error
    inv.execution = envelope.execution
    inv.warnings = list(envelope.warnings) + inv.warnings


def check_run(run: RunResult, inv: Invocation, deadline: int, bound: int) -> None:
    """Refuse a run whose process tree was killed for its output size or its deadline."""
    tail = run.stderr_text.strip()[-300:]
    hint = f" Last stderr: {tail!r}." if tail else ""
    if run.output_exceeded:
        raise OutputTooLarge(
            f"{inv.capability} printed more than max_output_bytes={bound} bytes on "
            f"standard output; its process tree was killed.{hint} Large results belong "
            "in an artifact, not in the envelope",
            rule="max_output_bytes",
        )
    if run.cancelled:
        raise InvocationCancelled(
            f"{inv.capability} was cancelled while it ran; its whole process tree was "
            "killed. Run it again when you want its result"
        )
    if run.timed_out:
        raise DeadlineExceeded(
            f"{inv.capability} did not finish within deadline_ms={deadline}; its whole "
            f"process tree was killed.{hint} Raise the deadline or make the capability "
            "long-running with a poll capability"
        )


def _violation(inv: Invocation, rule: str, detail: str) -> ProtocolViolation:
    return ProtocolViolation(
        f"module {inv.module!r} broke the envelope rule {rule!r} answering {inv.capability}: "
        f"{detail}. The module must be fixed; the result was discarded",
        rule=rule,
    )


def check_envelope(stdout: bytes, module_id: str, request_id: str, inv: Invocation) -> Envelope:
    """Check every SPEC §1 envelope rule on the raw output, then build the model."""
    raw = _decode(stdout, inv)
    # keep whatever execution the module reported, even when a later rule breaks
    execution = raw.get("execution")
    if isinstance(execution, dict):
        with contextlib.suppress(PydanticValidationError):
            inv.execution = Execution.model_validate(execution)
    _check_header(raw, module_id, request_id, inv)
    _check_outcome(raw, inv)
    warnings = raw.get("warnings", None)
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _violation(
            inv, "warnings", f"warnings must be an array of strings, got {warnings!r:.60}"
        )
    if not isinstance(execution, dict):
        raise _violation(inv, "execution", "execution must be present (an object), also on failure")
    try:
        return Envelope.model_validate(raw)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise _violation(inv, "shape", f"{where}: {first['msg']}") from exc


def _decode(stdout: bytes, inv: Invocation) -> dict[str, Any]:
    """Standard output as exactly one JSON object, or the ``json``/``trailing_data`` breach."""
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _violation(inv, "json", f"standard output is not UTF-8 ({exc})") from exc
    body = text.lstrip()
    if not body:
        raise _violation(inv, "json", "standard output is empty; print exactly one envelope")
    try:
        raw, end = decode_bounded(body)
    except TooDeep as exc:
        raise _violation(inv, "depth", f"the envelope is refused: {exc}") from exc
    except ValueError as exc:
        raise _violation(inv, "json", f"standard output is not JSON ({exc})") from exc
    if body[end:].strip():
        raise _violation(
            inv,
            "trailing_data",
            f"standard output holds more than one JSON document (trailing "
            f"{body[end:].strip()[:40]!r}); only the envelope goes to stdout, diagnostics to "
            "stderr",
        )
    if not isinstance(raw, dict):
        raise _violation(inv, "json", "the envelope must be a JSON object")
    return raw


def _check_header(raw: dict[str, Any], module_id: str, request_id: str, inv: Invocation) -> None:
    """``protocol``, ``module``, ``operation`` and ``request_id`` echo what the host sent."""
    if raw.get("protocol") != PROTOCOL_ID:
        raise _violation(
            inv, "protocol", f"protocol is {raw.get('protocol')!r}, not {PROTOCOL_ID!r}"
        )
    if raw.get("module") != module_id:
        raise _violation(inv, "module", f"module is {raw.get('module')!r}, not {module_id!r}")
    if raw.get("operation") != OPERATION_INVOKE:
        raise _violation(inv, "operation", f"operation is {raw.get('operation')!r}, not 'invoke'")
    if raw.get("request_id") != request_id:
        raise _violation(
            inv,
            "request_id",
            f"request_id {raw.get('request_id')!r} is not the {request_id!r} the host sent; "
            "echo it verbatim",
        )


def _check_outcome(raw: dict[str, Any], inv: Invocation) -> None:
    """``ok`` is a boolean and exactly one of ``result``/``error`` agrees with it."""
    ok = raw.get("ok")
    if not isinstance(ok, bool):
        raise _violation(inv, "ok", f"ok must be true or false, got {ok!r}")
    has_result = raw.get("result") is not None
    has_error = raw.get("error") is not None
    if has_result and has_error:
        raise _violation(inv, "result_xor_error", "both result and error are present")
    if not has_result and not has_error:
        raise _violation(inv, "result_xor_error", "neither result nor error is present")
    if ok and not has_result:
        raise _violation(inv, "result_xor_error", "ok is true but only error is present")
    if not ok and not has_error:
        raise _violation(inv, "result_xor_error", "ok is false but only result is present")
