"""The linker every hook call instantiates against: what a hook may import, and nothing else.

Design notes
------------
* WASI preview 2 without preopens, environment, arguments or network, with the monotonic
  clock shadowed by :class:`murmur_nb._hooks.waits.BoundedClock` so that no wait outlives the
  call; plus ``murmur:conversation/read`` served by the host. Any other import fails
  instantiation, which the host reports as ``link_error``.
* wasmtime-py keeps host functions in a process-wide table until the linker is freed, so the
  functions defined here reach the host through :class:`HostFunctions`, which holds it weakly:
  the linker never keeps a dropped host alive.
"""

from __future__ import annotations

import weakref
from typing import Any

from murmur_nb._exceptions import ConversationReadError
from murmur_nb._hooks.calls import Call
from murmur_nb._hooks.lowering import FAST_PATH_ERRORS, PageLowering, add_fast_read, message_record
from murmur_nb._hooks.signatures import READ_INTERFACE
from murmur_nb._hooks.waits import BoundedClock

__all__ = ["HostFunctions", "make_linker"]


class HostFunctions:
    """What the linked functions need from the host, reached through a weak reference."""

    def __init__(self, host: Any) -> None:
        self._host = weakref.ref(host)

    def current(self) -> Call | None:
        host = self._host()
        call: Call | None = None if host is None else host.current_call
        return call

    def interrupted(self) -> bool:
        host = self._host()
        return host is None or bool(host.runtime.ticker.interrupted)

    def fail(self, exc: BaseException) -> None:
        call = self.current()
        if call is not None and call.host_failure is None:
            call.host_failure = exc

    def serve(self, cursor: str | None, limit: int) -> Any:
        """One ``read-messages``: a page, or the exact WIT error string (never raised)."""
        call = self.current()
        if call is None:
            return "unavailable: no hook call is in progress"
        try:
            return call.reader.read_messages(cursor, limit)
        except ConversationReadError as exc:
            return str(exc)

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


def make_linker(
    engine: Any, functions: HostFunctions, lowering: PageLowering | None
) -> tuple[Any, tuple[Any, ...], PageLowering | None]:
    """The linker, the C objects to keep alive with it, and the lowering actually in use.

    The fast ``read-messages`` is used when ``lowering`` is given and registers; if
    wasmtime-py's private layer refuses it, the public binding is used instead.
    """
    if lowering is not None:
        try:
            linker, keepalive = build_linker(engine, functions, lowering)
        except FAST_PATH_ERRORS:  # wasmtime-py's private ctypes layer changed: go generic
            pass
        else:
            return linker, keepalive, lowering
    linker, keepalive = build_linker(engine, functions, None)
    return linker, keepalive, None


def build_linker(
    engine: Any, functions: HostFunctions, lowering: PageLowering | None
) -> tuple[Any, tuple[Any, ...]]:
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
    return linker, keepalive
