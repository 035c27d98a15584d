"""What stopped a hook call: a stable code and a message that names the real cause.

Codes come from wasmtime's own words (the C API has no structured trap codes for component
calls): ``fuel_exhausted``, ``deadline_exceeded``, ``memory_limit``, ``table_limit``,
``instance_limit``, ``result_too_large`` (wasmtime's own bound on copying the values out of the
guest), else ``trap``. A trap names its cause plus the last line of the guest's
stderr (where tracebacks and panics end up). ``memory.grow`` past the limit returns -1 rather
than trapping, so a trap or ``err`` saying the guest ran out of memory while a memory limit
was in force is ``memory_limit``, with the limit; any other trap never mentions memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from murmur_nb._hooks.config import HookLimits

__all__ = ["classify", "explain", "guest_reports_oom", "reason", "stderr_cause"]

_OOM = re.compile(
    r"out of memory|MemoryError|memory allocation of \d+ bytes failed|"
    r"allocation failed|cannot allocate memory|\boom\b",
    re.IGNORECASE,
)

_LIMITS = (
    ("all fuel consumed", "fuel_exhausted"),
    ("wasm trap: interrupt", "deadline_exceeded"),
    ("instance count too high", "instance_limit"),
    ("table count too high", "table_limit"),
    ("table minimum size", "table_limit"),
    ("memory count too high", "memory_limit"),
    ("memory minimum size", "memory_limit"),
    ("exceeds memory limits", "memory_limit"),
    # wasmtime's own bound on copying a call's values out of the guest (strings that all
    # point at one big region are copied once each): the result is too large for the host
    ("fuel allocated for hostcalls has been exhausted", "result_too_large"),
)
_HOSTCALL_FUEL = _LIMITS[-1][0]


def classify(message: str) -> str:
    """The stable code for a wasmtime error or trap message, read from wasmtime's own words
    only (:func:`wasmtime_words`)."""
    words = wasmtime_words(message)
    for needle, code in _LIMITS:
        if needle in words:
            return code
    return "trap"


_BACKTRACE = "wasm backtrace:"
_CAUSED_BY = "Caused by:"


def wasmtime_words(message: str) -> str:
    """The part of a wasmtime error that is wasmtime's own. A trap's backtrace names the
    guest's functions and modules, in the guest's words: a function named after a limit's
    message (``all fuel consumed by WebAssembly``), even one holding line breaks and a
    ``Caused by:`` of its own, chose its call's code. The backtrace comes before the real
    cause, so where there is one only what follows the last ``Caused by:`` counts (before,
    the whole text was searched)."""
    if _BACKTRACE not in message:
        return message
    at = message.rfind(_CAUSED_BY)
    return message[at:] if at >= 0 else message.split(_BACKTRACE, 1)[0]


def guest_reports_oom(*texts: str) -> bool:
    """Whether the guest said it ran out of memory (in its error, trap or stderr)."""
    return any(_OOM.search(text) for text in texts if text)


#: Lines toolchains print around the real cause (Rust's panic frame, componentize-py's wrapper).
_NOISE = re.compile(
    r"^(?:\[murmur-nb:|note: run with `RUST_BACKTRACE|thread '.*' (?:\(\d+\) )?panicked at|"
    r"Python function threw an unexpected exception|lost sys\.stderr|stack backtrace:)"
)


def stderr_cause(stderr: str) -> str | None:
    """The last meaningful line the guest wrote to stderr: its exception, panic or abort."""
    for raw in reversed(stderr.strip().splitlines()):
        line = raw.strip()
        if line and not _NOISE.match(line):
            return line[:500]
    return None


def reason(text: str) -> str:
    """A one-line reason from a wasmtime error: the trap for traps, else the causal chain."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "unknown failure"
    causes: list[str] = []
    if _CAUSED_BY in lines:
        at = len(lines) - 1 - lines[::-1].index(_CAUSED_BY)  # the last: see wasmtime_words
        causes = [re.sub(r"^\d+:\s*", "", line) for line in lines[at + 1 :]]
        lines = lines[:at]
    if lines[0].startswith("error while executing at wasm backtrace") and causes:
        return causes[-1]
    return ": ".join([lines[0], *causes])


def _deadline_advice(limits: HookLimits, head: str) -> str:
    return (
        f"stopped at its time limit of {limits.time_ms} ms; raise `limits.time_ms` for "
        "this hook in murmur.yaml if it needs longer"
    )


def _fuel_advice(limits: HookLimits, head: str) -> str:
    return (
        f"stopped after using its fuel limit of {limits.fuel}; raise `limits.fuel` for "
        "this hook in murmur.yaml if it needs more"
    )


def _memory_advice(limits: HookLimits, head: str) -> str:
    return (
        f"needs more memory than its limit of {limits.memory_mib} MiB in "
        f"{limits.memories} memor{'y' if limits.memories == 1 else 'ies'} ({head}); raise "
        "`limits.memory_mib` (or `limits.memories`) for this hook in murmur.yaml"
    )


def _table_advice(limits: HookLimits, head: str) -> str:
    return (
        f"needs more tables or table elements than its limits of {limits.tables} tables "
        f"of {limits.table_elements} elements ({head}); raise `limits.tables` or "
        "`limits.table_elements` for this hook in murmur.yaml"
    )


def _instance_advice(limits: HookLimits, head: str) -> str:
    return (
        f"needs more core instances than its limit of {limits.instances} ({head}); raise "
        "`limits.instances` for this hook in murmur.yaml"
    )


def _result_advice(limits: HookLimits, head: str) -> str:
    return (
        f"{head} (limits: {limits.result_messages} messages, {limits.result_mib} MiB of text); "
        "return fewer or shorter messages, or raise `limits.result_messages` / "
        "`limits.result_mib` for this hook in murmur.yaml"
    )


# What to change for each limit a call can run into, keyed by the stop code.
_LIMIT_ADVICE: dict[str, Callable[[HookLimits, str], str]] = {
    "deadline_exceeded": _deadline_advice,
    "fuel_exhausted": _fuel_advice,
    "memory_limit": _memory_advice,
    "table_limit": _table_advice,
    "instance_limit": _instance_advice,
    "result_too_large": _result_advice,
}


def explain(code: str, failure: str, limits: HookLimits, stderr: str = "") -> str:
    """The message for a stopped call: what stopped it, and what to change."""
    head = reason(failure)
    if code == "result_too_large" and _HOSTCALL_FUEL in failure:
        return (
            "the result is too large to copy out of the guest: wasmtime stops copying a call's "
            "values past its own bound (strings that all point at one region are copied once "
            "each), which murmur.yaml cannot raise; return fewer or shorter messages"
        )
    advice = _LIMIT_ADVICE.get(code)
    if advice is not None:
        return advice(limits, head)
    if code == "trap":
        cause = stderr_cause(stderr)
        said = f"; its stderr ends with: {cause}" if cause else ""
        return f"the guest trapped: {head}{said}"
    return failure
