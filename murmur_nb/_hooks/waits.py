"""Host versions of the WASI monotonic clock whose waits end at the call's deadline.

Epoch interruption fires only inside wasm; a guest blocked in ``poll`` on a clock pollable
waits in wasmtime's host code, out of reach of the deadline and Ctrl-C. In a hook's sandbox
the clock is the only thing a pollable can wait for, so the linker shadows
``wasi:clocks/monotonic-clock``: ``subscribe-duration`` and ``subscribe-instant`` wait here, in
short slices watching the deadline and the interrupt flag, then return an already ready
pollable (made by the helper component :data:`HELPER_WAT`). A wait past the deadline raises a
``WasmtimeError`` (``deadline_exceeded``), which crosses the callback without leaving anything
in the binding's last-exception slot. ``now`` is ``time.monotonic_ns()``. The one difference
from wasmtime's clock: time passes at ``subscribe``, not at ``poll``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from murmur_nb._hooks.calls import HookCall
from murmur_nb._hooks.signatures import CLOCK_INTERFACE

__all__ = ["HELPER_WAT", "BoundedClock"]

#: Longest uninterrupted sleep inside a wait: how late Ctrl-C or the deadline can be seen.
SLICE_S = 0.005

HELPER_WAT = """
(component
  (import "wasi:io/poll@0.2.0" (instance $poll (export "pollable" (type (sub resource)))))
  (alias export $poll "pollable" (type $pollable))
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
    (alias outer 1 $pollable (type $p))
    (export "pollable" (type (eq $p)))
    (export "subscribe-duration" (func (param "when" u64) (result (own $p))))))
  (alias export $clock "subscribe-duration" (func $subscribe))
  (core func $subscribe-lowered (canon lower (func $subscribe)))
  (core module $m
    (import "clock" "subscribe-duration" (func $subscribe (param i64) (result i32)))
    (func (export "ready") (result i32) (call $subscribe (i64.const 0))))
  (core instance $clock-core (export "subscribe-duration" (func $subscribe-lowered)))
  (core instance $i (instantiate $m (with "clock" (instance $clock-core))))
  (func (export "ready-pollable") (result (own $pollable)) (canon lift (core func $i "ready"))))
"""


class BoundedClock:
    """``wasi:clocks/monotonic-clock`` for one linker, bounded by the current call's deadline.

    Parameters
    ----------
    engine : wasmtime.Engine
        The engine the helper component is compiled for.
    current : callable
        Returns the call in progress (``None`` outside a call).
    interrupted : callable
        Whether Ctrl-C arrived during the call.
    """

    def __init__(
        self,
        engine: Any,
        current: Callable[[], HookCall | None],
        interrupted: Callable[[], bool],
    ) -> None:
        self._engine = engine
        self._current = current
        self._interrupted = interrupted
        self._helper: Any = None
        self._helper_linker: Any = None

    def define(self, root: Any, name: str = CLOCK_INTERFACE) -> None:
        """Define the four clock functions as ``name`` on a linker root (shadowing allowed)."""
        with root.add_instance(name) as clock:
            clock.add_func("now", lambda store: time.monotonic_ns())
            clock.add_func("resolution", lambda store: 1)
            clock.add_func(
                "subscribe-duration",
                lambda store, ns: self.wait_until(store, time.monotonic_ns() + ns),
            )
            clock.add_func("subscribe-instant", self.wait_until)

    def wait_until(self, store: Any, when_ns: int) -> Any:
        """Sleep until ``when_ns`` or the deadline, whichever is first; a ready pollable."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use

        call = self._current()
        if call is None:
            raise WasmtimeError("a clock wait outside any hook call")
        deadline_ns = int(call.deadline * 1e9)
        target = min(when_ns, deadline_ns)
        while (now := time.monotonic_ns()) < target and not self._interrupted():
            time.sleep(min(SLICE_S, (target - now) / 1e9))
        if self._interrupted():
            raise WasmtimeError("the hook call was interrupted during a clock wait")
        if when_ns > deadline_ns:
            call.deadline_hit = True
            raise WasmtimeError(
                f"the guest waited on a clock {max(0, when_ns - deadline_ns) / 1e6:.0f} ms "
                "past its time limit"
            )
        return self._ready_pollable(store, call)

    def _ready_pollable(self, store: Any, call: HookCall) -> Any:
        if call.helper is None:
            call.helper = self._helper_instance(store)
        func = call.helper.get_func(store, "ready-pollable")
        pollable = func(store)
        func.post_return(store)
        return pollable

    def _helper_instance(self, store: Any) -> Any:
        if self._helper is None:
            import wasmtime  # noqa: PLC0415 - wasmtime loads on first use
            from wasmtime.component import Component, Linker  # noqa: PLC0415

            linker = Linker(self._engine)
            linker.add_wasip2()
            self._helper = Component(self._engine, wasmtime.wat2wasm(HELPER_WAT))
            self._helper_linker = linker
        return self._helper_linker.instantiate(store, self._helper)
