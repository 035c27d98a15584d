"""The linker every hook call instantiates against: what a hook may import, and nothing else.

WASI preview 2 without preopens, environment, arguments or network, the monotonic clock
shadowed by :class:`murmur_nb._hooks.waits.BoundedClock` (no wait outlives the call), and
``murmur:conversation/read`` served by the host; any other import is a ``link_error``.
wasmtime-py keeps host functions until the linker is freed, so they reach the host through
:class:`HostFunctions`, which holds it weakly.

``read-messages`` runs in the kernel, out of reach of the store's limits and its epoch
deadline, so it reads within the call's :class:`~murmur_nb._conversations.budget.ReadBudget`:
a page no larger than the guest's memory (``limits.memory_mib``) and a fixed ceiling, and no
work past the call's deadline, which then ends as ``deadline_exceeded`` (as a clock wait
does). A reader of another kind (a ``conversations=`` object of the caller's own whose
``read_messages`` takes no ``budget``) is called as before: its work is its owner's.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, cast

from murmur_nb._conversations.budget import ReadBudget, ReadDeadline
from murmur_nb._exceptions import ConversationReadError
from murmur_nb._hooks.calls import CURRENT_CALL, BoundedReader, HookCall
from murmur_nb._hooks.lowering import FAST_PATH_ERRORS, PageLowering, add_fast_read, message_record
from murmur_nb._hooks.signatures import READ_INTERFACE
from murmur_nb._hooks.waits import BoundedClock

__all__ = ["HostFunctions", "Linked", "make_linker"]


class HostFunctions:
    """What the linked functions need: the call running on their thread, and whether the
    host's runtime was interrupted (the host reached through a weak reference)."""

    def __init__(self, host: Any) -> None:
        self._host = weakref.ref(host)

    def current(self) -> HookCall | None:
        """The call these functions serve now: the one running on this thread."""
        return CURRENT_CALL.get()

    def interrupted(self) -> bool:
        host = self._host()
        return host is None or bool(host.runtime.ticker.interrupted)

    def fail(self, exc: BaseException) -> None:
        """Record ``exc`` as the call's host failure; a read that reached the call's deadline
        is not one (the call ends as ``deadline_exceeded``)."""
        call = self.current()
        if call is not None and call.host_failure is None and not isinstance(exc, ReadDeadline):
            call.host_failure = exc

    def serve(self, cursor: str | None, limit: int) -> Any:
        """One ``read-messages``: a page, or the exact WIT error string (never raised).

        Raises ``ReadDeadline`` (marking the call's ``deadline_hit``) when the call's deadline
        passed during the read.
        """
        call = self.current()
        if call is None:
            return "unavailable: no hook call is in progress"
        reader = call.reader
        try:
            if takes_budget(type(reader)):
                budget = ReadBudget(call.memory_bytes, call.deadline)
                return cast(BoundedReader, reader).read_messages(cursor, limit, budget=budget)
            return reader.read_messages(cursor, limit)
        except ConversationReadError as exc:
            return str(exc)
        except ReadDeadline:
            call.deadline_hit = True
            raise

    def read_messages(self, store: Any, cursor: str | None, limit: int) -> Any:
        """``read-messages`` through wasmtime-py's public conversion."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use
        from wasmtime.component import Record  # noqa: PLC0415 - wasmtime loads on first use

        try:
            if not (cursor is None or isinstance(cursor, str)) or type(limit) is not int:
                raise TypeError(
                    "read-messages was called with a signature other than the world's "
                    f"(cursor {type(cursor).__name__}, limit {type(limit).__name__})"
                )
            outcome = self.serve(cursor, limit)
            if isinstance(outcome, str):
                return outcome
            out: Any = Record()
            out.messages = [message_record(m) for m in outcome.messages]
            setattr(out, "next-cursor", outcome.next_cursor)
            out.total = int(outcome.total)
        except Exception as exc:
            self.fail(exc)
            raise WasmtimeError(f"host function read-messages failed: {exc!r}") from exc
        return out


@functools.cache
def takes_budget(kind: type[Any]) -> bool:
    """Whether readers of class ``kind`` take a ``budget`` keyword in ``read_messages``."""
    try:
        return "budget" in inspect.signature(kind.read_messages).parameters
    except (AttributeError, TypeError, ValueError):
        return False


class Linked:
    """A linker, the C objects to keep alive with it, and the lowering actually in use.

    ``keepalive`` holds the fast path's C callback, called only during calls; the finalizer
    wasmtime calls when the linker is freed lives for the whole process
    (:func:`murmur_nb._hooks.lowering.no_finalizer`), so release order does not matter.
    """

    def __init__(
        self, linker: Any, keepalive: tuple[Any, ...], lowering: PageLowering | None, clock: Any
    ) -> None:
        self.linker = linker
        self.keepalive = keepalive
        self.lowering = lowering
        self._clock = clock
        self._clock_names: set[str] = set()

    def shadow_clock(self, names: list[str]) -> None:
        """Serve the bounded clock under each exact import name not yet served."""
        new = [name for name in names if name not in self._clock_names]
        if not new:
            return
        self.linker.allow_shadowing = True
        with self.linker.root() as root:
            for name in new:
                self._clock.define(root, name)
        self.linker.allow_shadowing = False
        self._clock_names.update(new)


def make_linker(engine: Any, functions: HostFunctions, lowering: PageLowering | None) -> Linked:
    """The linker: the fast ``read-messages`` when ``lowering`` is given and registers, else
    (wasmtime-py's private layer refused it) the public binding."""
    if lowering is not None:
        try:
            return build_linker(engine, functions, lowering)
        except FAST_PATH_ERRORS:  # wasmtime-py's private ctypes layer changed: go generic
            pass
    return build_linker(engine, functions, None)


def build_linker(engine: Any, functions: HostFunctions, lowering: PageLowering | None) -> Linked:
    from wasmtime.component import Linker  # noqa: PLC0415 - wasmtime loads on first use

    linker = Linker(engine)
    linker.add_wasip2()
    linker.allow_shadowing = True
    keepalive: tuple[Any, ...] = ()
    clock = BoundedClock(engine, functions.current, functions.interrupted)
    with linker.root() as root:
        clock.define(root)
        with root.add_instance(READ_INTERFACE) as read:
            if lowering is not None:
                keepalive = add_fast_read(read, lowering, functions.serve, functions.fail)
            else:
                read.add_func("read-messages", functions.read_messages)
    linker.allow_shadowing = False
    return Linked(linker, keepalive, lowering, clock)
