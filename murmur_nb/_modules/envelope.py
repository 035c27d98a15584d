"""The SPEC §1 envelope rules, checked on a module's raw ``invoke`` output.

* **How the process ended comes first.** A run that was killed for its output or its
  deadline is refused by :func:`check_run` before its output is read as an envelope.
* **Raw JSON first.** The rules are checked on the decoded JSON, before the pydantic
  :class:`~murmur_nb.protocol.Envelope` is built, so ``warnings: null`` and a missing
  ``execution`` are seen, not defaulted away.
* **One rule per breach.** Each breach is a :class:`~murmur_nb.ProtocolViolation` whose
  ``rule`` names it; callers route on ``rule``/``code``, never on the message.
* **Keep what the module reported.** Whatever ``execution`` the module sent is kept on the
  :class:`~murmur_nb.Invocation` even when a later rule breaks, so costs stay visible.
* **A cost is a cost** (:func:`cost_problem`): ``estimated_cost`` and ``actual_cost`` are
  ``null`` (*unknown*) or a finite JSON number of at least 0. A negative cost would pay for
  other rows under a batch's ``max_cost``, and NaN compares false with every budget; Go's
  ``encoding/json`` never writes NaN or infinities, Python's ``json`` does unless told not to
  (as written, ``NaN`` and ``Infinity`` make the envelope no JSON at all, the ``json`` breach:
  :mod:`murmur_nb._schemas.nesting`; the check here holds for any other way one arrives).
  A breach is the ``cost`` rule, and the kept ``execution`` says *unknown* for the lying
  field, never the lie: a budget then stops rather than trusting it.
* **A refusal carries its evidence.** Each error is built with the partial
  :class:`~murmur_nb.Invocation` (:meth:`Ran.invocation`), whose ``evidence`` holds the exit
  status or signal, the stderr tail and, when stdout was no envelope, its start. The message
  says which way the fix points: a crash (a non-zero status, a signal) is fixed in the
  module's code, a stray print by moving it to stderr.
* **Unless the sandbox caused it** (:func:`sandbox_hint`). A module that reaches for what
  its sandbox withholds fails with an error that reads like an ordinary bug: a name that
  does not resolve or a ``PermissionError`` on a socket (no network grant: "it reaches the
  network only when ``grants.network`` is non-empty"), ``KeyError: 'HOME'`` ("an empty
  environment (no variable at all is inherited)"), and "fix that error in the module" sends
  its author to the wrong place. When, and only when, the stderr evidence shows such an
  error, the message ends with a note naming the rule and the fix. The patterns are narrow:
  a hint on an unrelated failure is worse than none. ``describe`` uses the same hint.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from murmur_nb._exceptions import (
    DeadlineExceeded,
    InvocationCancelled,
    ModuleHostError,
    OutputTooLarge,
    ProtocolViolation,
)
from murmur_nb._modules.invocation import Ran
from murmur_nb._sandbox import RunEvidence
from murmur_nb._schemas.nesting import TooDeep, decode_bounded
from murmur_nb.protocol import OPERATION_INVOKE, PROTOCOL_ID, Envelope, Execution

__all__ = [
    "COST_FIELDS",
    "check_envelope",
    "check_run",
    "cost_problem",
    "read_envelope",
    "sandbox_hint",
]

#: The two cost fields of ``execution``; ``null`` is *unknown*, ``0`` is free.
COST_FIELDS = ("estimated_cost", "actual_cost")


def read_envelope(ran: Ran) -> Envelope:
    """Check how the run ended, then its envelope; the checked :class:`Envelope`.

    A breach raises with ``exc.invocation`` built from ``ran`` (what the module reported, its
    ``execution`` and its evidence stay visible).
    """
    check_run(ran)
    return check_envelope(ran.run.stdout, ran)


def check_run(ran: Ran) -> None:
    """Refuse a run whose process tree was killed for its output size, a cancel or its
    deadline."""
    run, request, capability = ran.run, ran.request, ran.capability
    tail = ran.evidence.last_line
    said = f" Its stderr ends with {tail[:200]!r}." if tail else ""
    error: ModuleHostError | None = None
    if run.output_exceeded:
        error = OutputTooLarge(
            f"{capability} printed more than max_output_bytes={request.max_output_bytes} bytes "
            f"on standard output; its process tree was killed.{said} Large results belong in "
            "an artifact, not in the envelope",
            rule="max_output_bytes",
            invocation=ran.invocation(evidence=ran.evidence.with_stdout(run.stdout)),
        )
    elif run.cancelled:
        error = InvocationCancelled(
            f"{capability} was cancelled while it ran; its whole process tree was "
            "killed. Run it again when you want its result",
            invocation=ran.invocation(),
        )
    elif run.timed_out:
        error = DeadlineExceeded(
            f"{capability} did not finish within deadline_ms={request.deadline_ms}; its whole "
            f"process tree was killed.{said} Raise the deadline or make the capability "
            "long-running with a poll capability" + _ended(_crash_hint(ran)),
            invocation=ran.invocation(),
        )
    if error is not None:
        raise error


@dataclass(frozen=True)
class _Reading:
    """One envelope being checked: the run, and the ``execution`` its module reported."""

    ran: Ran
    reported: Execution | None = None

    def violation(
        self, rule: str, detail: str, *, stdout: bytes = b"", hint: str = ""
    ) -> ProtocolViolation:
        ran = self.ran
        evidence = ran.evidence.with_stdout(stdout) if stdout else ran.evidence
        fields: dict[str, Any] = {"evidence": evidence}
        if self.reported is not None:
            fields["execution"] = self.reported
        return ProtocolViolation(
            f"module {ran.module!r} broke the envelope rule {rule!r} answering "
            f"{ran.capability}: {detail}. The module must be fixed; the result was discarded"
            + _ended(hint),
            rule=rule,
            invocation=ran.invocation(**fields),
        )


def check_envelope(stdout: bytes, ran: Ran) -> Envelope:
    """Check every SPEC §1 envelope rule on the raw output, then build the model."""
    raw = _decode(stdout, _Reading(ran))
    # keep whatever execution the module reported, even when a later rule breaks
    execution = raw.get("execution")
    reported = None
    costs: dict[str, str] = {}
    if isinstance(execution, dict):
        costs = _cost_problems(execution)
        with contextlib.suppress(PydanticValidationError):
            reported = Execution.model_validate({**execution, **dict.fromkeys(costs)})
    reading = _Reading(ran, reported)
    _check_header(raw, reading)
    _check_outcome(raw, reading)
    warnings = raw.get("warnings", None)
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise reading.violation(
            "warnings", f"warnings must be an array of strings, got {warnings!r:.60}"
        )
    if not isinstance(execution, dict):
        raise reading.violation(
            "execution", "execution must be present (an object), also on failure"
        )
    if costs:
        raise reading.violation("cost", "; ".join(costs.values()))
    try:
        # the execution checked above is taken as it is (pydantic keeps a model instance)
        return Envelope.model_validate(raw if reported is None else {**raw, "execution": reported})
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise reading.violation("shape", f"{where}: {first['msg']}") from exc


def cost_problem(value: Any) -> str | None:
    """Why ``value`` (a decoded ``estimated_cost`` / ``actual_cost``) is no cost, or ``None``
    when it is one: ``null`` (unknown) or a finite number of at least 0.

    Examples
    --------
    >>> cost_problem(None), cost_problem(0), cost_problem(2.5)
    (None, None, None)
    >>> cost_problem(-1e9), cost_problem(float("nan")), cost_problem("1")
    ('is negative', 'is not finite', 'is a string, not a number')
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is a {_json_kind(value)}, not a number"
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer past float's range
        finite = False
    if not finite:
        return "is not finite"
    return "is negative" if value < 0 else None


def _json_kind(value: Any) -> str:
    kinds = {bool: "boolean", str: "string", list: "array", dict: "object"}
    return next((name for kind, name in kinds.items() if isinstance(value, kind)), "value")


def _cost_problems(execution: dict[str, Any]) -> dict[str, str]:
    """Each cost field of ``execution`` that is no cost, with what the module must send."""
    found: dict[str, str] = {}
    for name in COST_FIELDS:
        problem = cost_problem(execution.get(name))
        if problem is not None:
            found[name] = (
                f"execution.{name} {problem} ({str(execution[name])[:40]}): a cost is a "
                "finite number of at least 0, or null when it is unknown (0 is free)"
            )
    return found


def _ended(hint: str) -> str:
    """A hint appended to a message: after a full stop, or nothing."""
    return f".{hint}" if hint else ""


def _crash_hint(ran: Ran) -> str:
    """:func:`sandbox_hint` of a process that failed (a non-zero status, a signal),
    when its stderr shows a failure the sandbox caused; else ``""``."""
    if not ran.evidence.crashed:
        return ""
    return sandbox_hint(ran.evidence, network_granted=bool(ran.request.grants.network))


def _no_envelope(reading: _Reading) -> str:
    """Why an empty standard output is no envelope, pointing the fix the right way."""
    evidence = reading.ran.evidence
    if evidence.crashed:
        return (
            f"standard output is empty: {evidence.summary()}. Fix that error in the module "
            "(or catch it and print an error envelope with ok: false); its traceback belongs "
            "on stderr"
        )
    return f"standard output is empty ({evidence.summary()}); print exactly one envelope"


def _not_json(reading: _Reading, why: str, stdout: bytes) -> ProtocolViolation:
    evidence = reading.ran.evidence
    head = evidence.with_stdout(stdout).stdout_head.splitlines() or [""]
    crash = f"; {evidence.summary()}" if evidence.crashed else ""
    return reading.violation(
        "json",
        f"standard output is not JSON ({why}); it starts with {head[0][:80]!r}{crash}. Only the "
        "envelope goes to stdout: print diagnostics (debug lines, progress) to stderr",
        stdout=stdout,
        hint=_crash_hint(reading.ran),
    )


def _decode(stdout: bytes, reading: _Reading) -> dict[str, Any]:
    """Standard output as exactly one JSON object, or the ``json``/``trailing_data`` breach."""
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_json(reading, f"not UTF-8: {exc}", stdout) from exc
    body = text.lstrip()
    if not body:
        raise reading.violation("json", _no_envelope(reading), hint=_crash_hint(reading.ran))
    try:
        raw, end = decode_bounded(body)
    except TooDeep as exc:
        raise reading.violation("depth", f"the envelope is refused: {exc}") from exc
    except ValueError as exc:
        raise _not_json(reading, str(exc), stdout) from exc
    if body[end:].strip():
        raise reading.violation(
            "trailing_data",
            f"standard output holds more than one JSON document (trailing "
            f"{body[end:].strip()[:40]!r}); only the envelope goes to stdout, diagnostics to "
            "stderr",
            stdout=stdout,
        )
    if not isinstance(raw, dict):
        raise reading.violation("json", "the envelope must be a JSON object", stdout=stdout)
    return raw


def _check_header(raw: dict[str, Any], reading: _Reading) -> None:
    """``protocol``, ``module``, ``operation`` and ``request_id`` echo what the host sent."""
    module_id, request_id = reading.ran.module, reading.ran.request.request_id
    if raw.get("protocol") != PROTOCOL_ID:
        raise reading.violation(
            "protocol", f"protocol is {raw.get('protocol')!r}, not {PROTOCOL_ID!r}"
        )
    if raw.get("module") != module_id:
        raise reading.violation("module", f"module is {raw.get('module')!r}, not {module_id!r}")
    if raw.get("operation") != OPERATION_INVOKE:
        raise reading.violation(
            "operation", f"operation is {raw.get('operation')!r}, not 'invoke'"
        )
    if raw.get("request_id") != request_id:
        raise reading.violation(
            "request_id",
            f"request_id {raw.get('request_id')!r} is not the {request_id!r} the host sent; "
            "echo it verbatim",
        )


def _check_outcome(raw: dict[str, Any], reading: _Reading) -> None:
    """``ok`` is a boolean and exactly one of ``result``/``error`` agrees with it."""
    ok = raw.get("ok")
    if not isinstance(ok, bool):
        raise reading.violation("ok", f"ok must be true or false, got {ok!r}")
    has_result = raw.get("result") is not None
    has_error = raw.get("error") is not None
    problem = ""
    if has_result and has_error:
        problem = "both result and error are present"
    elif not has_result and not has_error:
        problem = "neither result nor error is present"
    elif ok and not has_result:
        problem = "ok is true but only error is present"
    elif not ok and not has_error:
        problem = "ok is false but only result is present"
    if problem:
        raise reading.violation("result_xor_error", problem)


#: stderr of a failed name lookup, an unreachable network or a socket the sandbox refused
#: (Python, curl, Go, Node spell them so)
_NETWORK = re.compile(
    r"name resolution|name or service not known|could not resolve host|nodename nor servname"
    r"|no address associated with hostname|getaddrinfo|gaierror|network is unreachable"
    r"|(?:socket|connect|connection|urlopen error)\b[^\n]*"
    r"(?:permission denied|operation not permitted|\beacces\b|\beperm\b)",
    re.IGNORECASE,
)
#: a refusal on the last line, when a socket shows in the frames above it (Python's
#: ``PermissionError: [Errno 13] Permission denied`` under ``socket.py``)
_DENIED = re.compile(r"permission denied|operation not permitted|\beacces\b|\beperm\b", re.I)
_SOCKET = re.compile(r"\bsocket\b")
#: ``KeyError: 'HOME'``: the last line of a Python module reading an unset variable
_ENV_KEY = re.compile(r"KeyError: '([A-Za-z_][A-Za-z0-9_]{0,63})'")


def sandbox_hint(evidence: RunEvidence | None, *, network_granted: bool) -> str:
    """``" Note: ..."`` when ``evidence`` shows a failure the sandbox caused, else ``""``.

    Examples
    --------
    >>> tail = "Traceback ...\\n  File \\"<frozen os>\\", in __getitem__\\nKeyError: 'HOME'"
    >>> sandbox_hint(RunEvidence(1, stderr_tail=tail), network_granted=False)[:62]
    ' Note: modules run with an empty environment, so HOME is unset'
    >>> sandbox_hint(RunEvidence(1, stderr_tail="ZeroDivisionError"), network_granted=False)
    ''
    """
    if evidence is None:
        return ""
    tail, last = evidence.stderr_tail, evidence.last_line
    if not network_granted and (
        _NETWORK.search(tail) or (_DENIED.search(last) and _SOCKET.search(tail))
    ):
        return (
            " Note: this call had no network grant (grants.network is empty), so the sandbox "
            "let the module open no socket: declare permissions.network and allow it in the "
            "Policy (mnb.Policy(network=[...]), or --grant network=NAME)"
        )
    found = _ENV_KEY.fullmatch(last)
    if found is not None and ("environ" in tail or "<frozen os>" in tail):
        return (
            f" Note: modules run with an empty environment, so {found.group(1)} is unset "
            "(no variable is inherited, not even HOME or PATH): pass what the module needs "
            "in the request (its input, or extra= fields beside it) and read paths from its "
            "roots and binaries"
        )
    return ""
