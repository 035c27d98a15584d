"""Long time limits armed one chunk at a time, so that stopping a call is a bounded push.

A store's epoch deadline counts the ticker's ticks (:data:`~murmur_nb._hooks.runtime.TICK_S`
each). Armed with a hook's whole ``time_ms``, stopping its call early (Ctrl-C, the exit
drain) means advancing the epoch past all of it, one ``increment_epoch`` a tick: 120,002 for
a 10-minute limit, 17 million (about 20 s) for a day, which the next call waits for as well
(:meth:`~murmur_nb._hooks.runtime.Ticker.deadline`). A store whose limit is longer than
:data:`CHUNK_TICKS` is armed with that many ticks instead; when the epoch reaches them,
wasmtime calls :func:`on_deadline` on the call's own thread, which ends the call when its
deadline has passed or the ticker is stopping it, and else arms the next chunk. A stop then
pushes at most ``CHUNK_TICKS + 2`` ticks, whatever the limit. A store of a shorter limit is
armed as before, with no callback.

wasmtime-py does not wrap ``wasmtime_store_epoch_deadline_callback`` publicly; its private
ctypes layer does, so chunks are armed only on the wasmtime versions the fast lowering was
tested on (:data:`~murmur_nb._hooks.lowering.TESTED_WASMTIME`), and only when that layer has
what is needed. Elsewhere every store gets its whole limit, as before.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable
from typing import Any

from murmur_nb._hooks.calls import CURRENT_CALL
from murmur_nb._hooks.lowering import FAST_PATH_ERRORS, fast_path_supported

__all__ = ["CHUNK_TICKS", "Chunks"]

#: the most ticks a store is armed with at a time (10 s of the ticker's 5 ms ticks: the
#: default limit of 5 s is armed whole, as before)
CHUNK_TICKS = 2000

#: ``wasmtime_update_deadline_kind_t``: go on with the new deadline (the other kind, yield,
#: is for async stores)
_CONTINUE = 0


class Chunks:
    """Arms stores in chunks; ``stopping`` says whether the ticker is stopping the running
    call, ``owed(now)`` the ticks the ticker owes (both the ticker's, see the runtime)."""

    def __init__(self, stopping: Callable[[], bool], owed: Callable[[float], int],
                 tick_s: float) -> None:  # fmt: skip
        from wasmtime import _bindings  # noqa: PLC0415 - wasmtime-py's private ctypes layer

        register = _bindings._wasmtime_store_epoch_deadline_callback
        self._register = register
        argtypes: Any = register.argtypes  # (store, callback, data, finalizer)
        callback_type, finalizer_type = argtypes[1], argtypes[3]
        self._error_new = _bindings.wasmtime_error_new
        self._stopping, self._owed, self._tick_s = stopping, owed, tick_s
        # kept for as long as this object: wasmtime may call it during any armed call
        self._callback = callback_type(self.on_deadline)
        self._no_finalizer = ctypes.cast(0, finalizer_type)

    @classmethod
    def made(cls, stopping: Callable[[], bool], owed: Callable[[float], int],
             tick_s: float) -> Chunks | None:  # fmt: skip
        """The chunks, or ``None`` where the private layer is not the tested one."""
        if not fast_path_supported():
            return None
        try:
            return cls(stopping, owed, tick_s)
        except FAST_PATH_ERRORS:
            return None

    def arm(self, store: Any, ticks: int) -> int:
        """Set ``store``'s epoch deadline for a call of ``ticks`` ticks from now; the ticks a
        stop must push to end it (its whole limit when that fits one chunk)."""
        if ticks <= CHUNK_TICKS:
            store.set_epoch_deadline(ticks)
            return ticks
        self._register(store.ptr(), self._callback, None, self._no_finalizer)
        store.set_epoch_deadline(CHUNK_TICKS)
        return CHUNK_TICKS

    def on_deadline(self, context: Any, data: Any, delta: Any, kind: Any) -> int:
        """wasmtime's epoch deadline callback: ``0`` to go on ``delta[0]`` more ticks, or an
        error (owned by wasmtime) that ends the call. Never raises: an exception here would
        make ctypes return 0 with no new deadline."""
        try:
            call = CURRENT_CALL.get()
            now = time.monotonic()
            if call is None or self._stopping() or now >= call.deadline:
                if call is not None:
                    call.deadline_hit = True
                return self._end("the hook call reached its time limit")
            wanted = math.ceil((call.deadline - now) / self._tick_s) + 1 + self._owed(now)
            delta[0] = min(CHUNK_TICKS, wanted)
            kind[0] = _CONTINUE
            return 0
        except BaseException:  # see the docstring: the call ends
            return self._end("the hook call was stopped (the host's deadline check failed)")

    def _end(self, text: str) -> int:
        error = self._error_new(text.encode())
        return ctypes.cast(error, ctypes.c_void_p).value or 0
