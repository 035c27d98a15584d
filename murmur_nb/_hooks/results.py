"""What a hook call returns (and how a call's raw outcome becomes it), what a configured hook
looks like, and the guest's captured output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from murmur_nb._hooks.config import HookLimits
from murmur_nb._hooks.diagnostics import explain, guest_reports_oom
from murmur_nb._rules import one_line, printable

__all__ = ["CAPTURE_LIMIT", "Capture", "HookInfo", "HookResult", "outcome"]

#: Bytes kept of each guest stream (stdout, stderr) per call.
CAPTURE_LIMIT = 64 * 1024


@dataclass(frozen=True)
class HookResult:
    """What one hook returned for one event.

    Attributes
    ----------
    hook_id, event : str
        Which hook, for which event (``task-start`` or ``compact``).
    ok : bool
        The hook returned ``ok``.
    value : str, list of Message, or None
        The ``ok`` payload: the operator note for ``task-start``, the kept messages for
        ``compact``.
    error : str or None
        The hook's ``err`` string, or what stopped it.
    code : str or None
        ``None`` when ``ok``; otherwise a stable code (see the module docstring).
    stdout, stderr : str
        What the guest wrote, at most 64 KiB each (a marker says when output was cut).
    duration_ms : float
        Wall time of the call from the instant its deadline counts from (store setup and
        instantiation included): a call stopped at its time limit never reports less.
    fuel_used : int
        Fuel the call consumed (0 when it never started).
    """

    hook_id: str
    event: str
    ok: bool
    value: Any = None
    error: str | None = None
    code: str | None = None
    stdout: str = ""
    stderr: str = ""
    duration_ms: float = 0.0
    fuel_used: int = 0

    def __repr__(self) -> str:
        # the hook's err (up to the result limit) on one line, cut, then its escapes escaped
        state = "ok" if self.ok else f"{self.code}: {printable(one_line(self.error or ''))}"
        return f"HookResult({self.hook_id!r}, {self.event}, {state}, {self.duration_ms:.2f} ms)"


@dataclass(frozen=True)
class HookInfo:
    """A configured hook as the host sees it: configuration, grant and load state.

    ``load_code`` says why a hook did not load: ``load_failed`` (missing or unreadable file, not
    a component, missing exports) or ``link_error`` (an import or export whose signature
    differs from the ``hook`` world, or an import the host does not provide).
    """

    id: str
    component: Path
    events: tuple[str, ...]
    read_granted: bool
    limits: HookLimits
    notes: tuple[str, ...] = ()
    load_error: str | None = None
    digest: str | None = None
    loaded_from: str | None = None
    load_code: str | None = None

    @property
    def loaded(self) -> bool:
        return self.load_error is None


class Capture:
    """A bounded byte sink for one guest stream."""

    __slots__ = ("chunks", "dropped", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        room = CAPTURE_LIMIT - self.size
        if room > 0:
            self.chunks.append(data[:room])
            self.size += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        out = b"".join(self.chunks).decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[murmur-nb: {self.dropped} more bytes not captured]"
        return out


def outcome(
    make: Callable[..., HookResult],
    ran: tuple[Any, str | None, str | None],
    limits: HookLimits,
    lift: Callable[[Any], Any],
    stderr: str,
) -> HookResult:
    """The result of a call that ran: ``ran`` is ``((ok, payload) or None, failure, code)``."""
    raw, failure, code = ran
    if code is not None:
        if code == "trap" and guest_reports_oom(failure or "", stderr):
            code = "memory_limit"
        return make(ok=False, error=explain(code, failure or "", limits, stderr), code=code)
    ok, value = raw
    if not ok:
        if guest_reports_oom(str(value)):
            error = explain("memory_limit", str(value), limits)
            return make(ok=False, error=error, code="memory_limit")
        return make(ok=False, error=str(value), code="guest_error")
    try:
        lifted = lift(value)
    except (TypeError, ValueError) as exc:
        error = f"the hook returned a value the host cannot use: {exc}"
        return make(ok=False, error=error, code="invalid_output")
    return make(ok=True, value=lifted)

