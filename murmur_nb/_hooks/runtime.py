"""The process-wide wasmtime engine, compiled-component cache and epoch ticker for hooks.

Every :class:`HookHost` shares one ``Engine`` (epoch interruption and fuel, both part of the
cache key) and one daemon ticker that advances the epoch while hooks run and sleeps when they
are idle. Calls are serialized by a process-wide lock, so the ticker knows which call it
times; a call waiting for the lock spends its own time limit. A limit longer than 10 s is
armed in chunks (:mod:`murmur_nb._hooks.epochs`), so stopping a call never pushes the epoch
by more than one chunk. wasm GC, typed function references and exceptions are off, because
the store limits do not reach wasmtime's GC heap: such a component fails at load
(:data:`NO_GC_HINT`). While a call runs on the main thread,
SIGINT sets a flag the ticker turns into an epoch past the deadline, and the call raises
``KeyboardInterrupt`` with the host intact. Teardown has an order: :meth:`Runtime.shutdown`.
Every entry into a guest first puts wasmtime's trap handlers back if something replaced them
(:class:`TrapHandlers`).

Why the engine keeps wasmtime's default (on-demand) allocator, measured on the
componentize-py demo hook (issue 41): a fresh store per call costs its instantiation (about
0.8 ms, nearly all of it wasmtime filling the function references of CPython's imported
table, which no configuration and no component ``InstancePre`` in the C API avoids) and the
pages the guest dirties (about 265 copy-on-write faults, then their ``munmap``). Memory images
are copy-on-write already (the compiled form says so: it refuses an engine without it). The
pooling allocator, reachable only through wasmtime-py's private ``_bindings``, trades those
faults for resetting the kept pages: the same CPU time per call, no faster replay end to end,
and pool sizes that would cap what ``limits`` allow. Calls on two threads of one process were
slower than on one (the faults and unmaps share one address space), so a replay runs in
parallel across processes (``client=``), not threads.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import math
import os
import select
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import HookError
from murmur_nb._hooks.cache import ComponentCache
from murmur_nb._hooks.epochs import Chunks
from murmur_nb._hooks.guest_code.compile_bounds import compile_in_child
from murmur_nb._hooks.guest_code.compiler import ENGINE_FINGERPRINT, engine_config

if TYPE_CHECKING:
    from wasmtime import Engine
    from wasmtime._managed import Managed

#: Why a component using a switched-off proposal is refused (added to its load error).
NO_GC_HINT = (
    "hooks get core WebAssembly and the component model only: wasm GC, typed function "
    "references and exceptions are off, because their heap would not count towards "
    "`limits.memory_mib`; build the hook without them"
)

TICK_S = 0.005
IDLE_S = 1.0
DRAIN_S = 5.0  # at exit: how long to wait for a running call and the output callbacks


#: The signals a guest's trap raises: ``unreachable`` and friends (SIGILL), guard pages
#: (SIGSEGV, SIGBUS), integer division (SIGFPE).
TRAP_SIGNALS = (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE)


def close_whole(managed: Managed[Any]) -> None:
    """Close a wasmtime object (a store, a linker) with Ctrl-C held back until it is closed.

    wasmtime-py's ``close`` frees the object, then forgets its pointer. A ``KeyboardInterrupt``
    raised between the two (a SIGINT that lands as ``wasmtime_store_delete`` returns: it runs
    the store's WASI output finalizers, Python code, and takes a while for a large guest)
    kept the pointer, and the object was freed a second time when it was collected: the
    kernel died (SIGSEGV) after about one Ctrl-C in twenty during hook calls. On the main
    thread a SIGINT that comes while the object closes only sets a flag; the handler it
    replaced runs once the object is closed (for ``default_int_handler``: the
    ``KeyboardInterrupt``, now with nothing left half done).
    """
    if threading.current_thread() is not threading.main_thread():
        managed.close()
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # ignored, the default (the process ends), or not Python's
        managed.close()
        return
    pressed: list[FrameType | None] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(frame))
    try:
        managed.close()
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        run: Callable[[int, FrameType | None], Any] = previous
        run(signal.SIGINT, pressed[0])


class TrapHandlers:
    """wasmtime's handlers for the trap signals, saved once and put back when replaced.

    wasmtime turns a guest's trap into an error from signal handlers it installs with its
    engine. A handler installed after them that does not hand a trap back to them kills the
    process at the next trap ("Illegal instruction"): ``faulthandler.enable()`` called once
    the engine exists does exactly that, and pytest's in-process runs (``pytester``) call it.
    :meth:`ensure` reads each handler (one ``sigaction`` per signal, about a microsecond) and
    restores wasmtime's where another took its place. Faults outside a guest still reach
    whatever handled them before the engine existed, as wasmtime forwards those. Linux only;
    elsewhere this does nothing.
    """

    _SIZE = 256  # larger than any libc's ``struct sigaction``; the handler pointer comes first

    def __init__(self) -> None:
        self._libc: Any = None
        #: signal -> (wasmtime's whole ``struct sigaction``, its handler address)
        self._saved: dict[int, tuple[ctypes.Array[ctypes.c_char], int]] = {}
        self._now = ctypes.create_string_buffer(self._SIZE)  # calls run one at a time
        if os.uname().sysname != "Linux":
            return
        self._libc = ctypes.CDLL(None)
        for signum in TRAP_SIGNALS:
            action = ctypes.create_string_buffer(self._SIZE)
            self._libc.sigaction(signum, None, action)
            self._saved[signum] = (action, self._handler(action))

    @staticmethod
    def _handler(action: ctypes.Array[ctypes.c_char]) -> int:
        return ctypes.c_void_p.from_buffer(action).value or 0

    def ensure(self) -> None:
        """Put back wasmtime's handler for every trap signal whose handler was replaced."""
        for signum, (saved, handler) in self._saved.items():
            self._libc.sigaction(signum, None, self._now)
            if self._handler(self._now) != handler:
                self._libc.sigaction(signum, saved, None)


class Ticker:
    """Advances the engine epoch in real time while hooks run; turns SIGINT into a deadline.

    The thread ticks every ``TICK_S`` from the first call on and goes back to sleep once no
    call has run for ``IDLE_S``, so back-to-back calls never pay for waking it. The epoch
    follows wall time (ticks are issued by elapsed time, not by wake-ups), so a late wake-up
    never stretches a deadline. Deadlines are relative to the epoch when each store is made.
    """

    def __init__(self, engine: Engine, traps: TrapHandlers) -> None:
        self._engine = engine
        self._traps = traps
        self._ctl_r, self._ctl_w = os.pipe()
        self._sig_r, self._sig_w = os.pipe()
        for fd in (self._ctl_r, self._ctl_w, self._sig_r, self._sig_w):
            os.set_blocking(fd, False)
        # Guards the clock state below: the call thread must never see a half-made wake-up
        # (an origin without its ``_sleeping = False``), and the thread must never go to
        # sleep after a call has started but before that call could wake it.
        self._lock = threading.Lock()
        self._active_ticks = 0
        self._pushing = 0  # pushes of the epoch under way (:meth:`stop_current`)
        self._settled = threading.Condition(self._lock)
        self._last_active = 0.0
        self._origin = 0.0
        self._issued = 0
        self._sleeping = True
        self._forward_fd = -1
        self.interrupted = False
        #: the running call is being stopped (Ctrl-C or the exit drain): a store armed in
        #: chunks ends at its next one (:mod:`murmur_nb._hooks.epochs`)
        self.stopping_call = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="murmur-nb-epoch", daemon=True)
        self._thread.start()

    @staticmethod
    def _drain(fd: int) -> bytes:
        """What the pipe holds, read without raising: a call's end drains it while its
        exception unwinds, and an exception made there is chained to that one."""
        out = b""
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
        return out

    def owed(self, now: float) -> int:
        """Ticks that wall time had earned at ``now`` (``time.monotonic()``) but the thread
        has not issued yet (it may lag)."""
        with self._lock:
            return self._owed(now)

    def _owed(self, now: float) -> int:
        """:meth:`owed` with the lock held."""
        if self._sleeping:
            return 0
        return max(0, int((now - self._origin) / TICK_S) - self._issued)

    def deadline(self, time_ms: int, now: float) -> int:
        """The ticks for a store's epoch deadline set right after this, for a call that may
        run ``time_ms`` from ``now`` (``time.monotonic()``).

        The ticks the thread still owes at ``now`` are added, so that a lagging thread
        catching up cannot end the call early. A push that stopped an earlier call is waited
        for first (a deadline counts from the epoch when it is set), so none of it reaches
        this call; that wait is only ever after a stopped call.
        """
        # the lock's own ``with`` (C), not the condition's, whose ``__exit__`` is Python: a
        # Ctrl-C landing as that began kept the lock, and every later hook call waited for it
        with self._lock:
            if self._pushing:
                self._settled.wait_for(lambda: not self._pushing)
            owed = self._owed(now)
        return math.ceil(time_ms / 1000 / TICK_S) + 1 + owed

    def _run(self) -> None:
        while not self._stopping:
            timeout = None if self._sleeping else TICK_S
            ready, _, _ = select.select([self._ctl_r, self._sig_r], [], [], timeout)
            if self._ctl_r in ready:
                self._drain(self._ctl_r)
                with self._lock:
                    if self._sleeping:
                        self._origin, self._issued = time.monotonic(), 0
                        self._sleeping = False
            if self._sig_r in ready:
                # Under the lock: a signal is acted on only for the call it arrived in (the
                # call's end drains what is left, see ``running``), never for a later call.
                with self._lock:
                    ctrl_c = signal.SIGINT in self._take_signals()
                    ticks = self._stopping_current(interrupt=True) if ctrl_c else 0
                self._push(ticks)
            # Each tick is issued first and counted after (``owed`` may count one twice: a
            # deadline one tick later, never earlier), and never with the lock held: the
            # binding drops the GIL for every tick, and a call ending meanwhile would wait
            # for the lock behind each of those hand-overs.
            for _ in range(self.owed(time.monotonic())):
                self._engine.increment_epoch()
                with self._lock:
                    self._issued += 1
            with self._lock:
                idle = time.monotonic() - self._last_active > IDLE_S
                if not self._active_ticks and idle:
                    self._sleeping = True

    def stop(self) -> None:
        """End the thread and close its pipes (at exit; the engine outlives it)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            os.write(self._ctl_w, b"\0")
        self._thread.join(timeout=1.0)
        if not self._thread.is_alive():
            for fd in (self._ctl_r, self._ctl_w, self._sig_r, self._sig_w):
                os.close(fd)

    def stop_current(self, *, interrupt: bool = True) -> None:
        """Push the epoch past the running call's deadline; ``interrupt`` makes the call
        raise ``KeyboardInterrupt`` (SIGINT) rather than end at its deadline (exit)."""
        with self._lock:
            ticks = self._stopping_current(interrupt=interrupt)
        self._push(ticks)

    def _stopping_current(self, *, interrupt: bool) -> int:
        """With the lock held: mark the running call stopped (``interrupt``: by Ctrl-C) and
        return the ticks :meth:`_push` must issue (0 when no call runs)."""
        if not self._active_ticks:
            return 0
        if interrupt:
            self.interrupted = True
        self.stopping_call = True
        self._pushing += 1
        return self._active_ticks + 2

    def _push(self, ticks: int) -> None:
        """Advance the epoch ``ticks`` times, without the lock: the stopped call ends without
        waiting for it, and the next call's store waits (:meth:`deadline`)."""
        if not ticks:
            return
        try:
            for _ in range(ticks):
                self._engine.increment_epoch()
        finally:
            with self._settled:
                self._pushing -= 1
                self._settled.notify_all()

    def _take_signals(self) -> bytes:
        """Read what the wakeup fd wrote and hand it on to the fd it replaced (lock held)."""
        data = self._drain(self._sig_r)
        if data and self._forward_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self._forward_fd, data)
        return data

    @contextlib.contextmanager
    def running(self, ticks: int) -> Iterator[None]:
        """Time one call whose store expires ``ticks`` ticks from now; route SIGINT to it.

        SIGINT is routed only on the main thread (where Python delivers signals). Every entry
        into a guest passes here, so this is also where wasmtime's trap handlers are checked.
        A SIGINT belongs to the call it arrived in: the call's end takes back the wakeup fd and
        drains what the thread has not read yet, so a Ctrl-C that ended one call (its handler
        ran first) cannot stop the next one when the thread gets to it late.
        """
        self._traps.ensure()
        with self._lock:
            self.interrupted = self.stopping_call = False
            self._active_ticks = ticks
            self._last_active = time.monotonic()
            wake = self._sleeping
        if wake:
            os.write(self._ctl_w, b"\0")
        main = threading.current_thread() is threading.main_thread()
        previous: Any = None
        if main:
            previous = signal.getsignal(signal.SIGINT)
            if previous is signal.SIG_IGN or previous is None:  # ignored, or not ours to swap
                main = False
        routed = False
        try:
            if main:

                def on_sigint(signum: int, frame: FrameType | None) -> None:
                    self.interrupted = True

                signal.signal(signal.SIGINT, on_sigint)
                routed = True
                forward = signal.set_wakeup_fd(self._sig_w, warn_on_full_buffer=False)
                with self._lock:
                    self._forward_fd = forward
            yield
        finally:
            if routed:
                with self._lock:
                    signal.set_wakeup_fd(self._forward_fd)
                    self._take_signals()  # this call's, left unread: nobody else's to act on
                    self._forward_fd = -1
                signal.signal(signal.SIGINT, previous)
            with self._lock:
                self._active_ticks = 0
                self._last_active = time.monotonic()


class Runtime:
    """The process-wide engine, compiled-component cache and ticker, and what lives on them.

    ``hosts``, ``stores`` and ``outputs`` (each store's stdout and stderr callbacks, which
    only wasmtime-py holds) are weak sets: they keep nothing alive, and tell :meth:`shutdown`
    what is still open at exit.
    """

    _instance: Runtime | None = None
    _shut_down = False
    _create_lock = threading.Lock()

    def __init__(self) -> None:
        import wasmtime  # noqa: PLC0415 - wasmtime loads on first use
        import wasmtime.component  # noqa: PLC0415
        from wasmtime import Engine  # noqa: PLC0415

        # The classes the per-call path needs, resolved once (no import machinery per call).
        self.Store = wasmtime.Store
        self.WasiConfig = wasmtime.WasiConfig
        self.WasmtimeError = wasmtime.WasmtimeError
        self.Record = wasmtime.component.Record
        self.fingerprint = ENGINE_FINGERPRINT
        # No GC heap (see "What a guest may allocate"), no unwind info: engine_config says why.
        self.engine = Engine(engine_config())
        # wasmtime has installed its trap handlers with the engine: these are what to keep.
        self.traps = TrapHandlers()
        self.cache = ComponentCache(
            self.engine, self.fingerprint, keep_in_memory=16, compile_in_child=compile_in_child
        )
        self.ticker = Ticker(self.engine, self.traps)
        ticker = self.ticker
        #: long limits armed in chunks (``None``: every store armed whole)
        self.chunks = Chunks.made(lambda: ticker.stopping_call, ticker.owed, TICK_S)
        self.call_lock = threading.RLock()
        self.hosts: weakref.WeakSet[Any] = weakref.WeakSet()
        self.stores: weakref.WeakSet[Any] = weakref.WeakSet()
        self.outputs: weakref.WeakSet[Any] = weakref.WeakSet()
        # Registered after wasmtime's import: exit hooks run last-registered first, so this
        # one runs before any hook registered while wasmtime loaded.
        atexit.register(self.shutdown)

    @classmethod
    def get(cls) -> Runtime:
        with cls._create_lock:
            if cls._shut_down:
                raise HookError(
                    "the Python interpreter is exiting and the hook runtime has shut down; "
                    "hooks cannot be loaded or called any more",
                    code="hook_runtime_closed",
                )
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def shutdown(self, wait_s: float = DRAIN_S) -> None:
        """Release everything in order; runs at interpreter exit (an ``atexit`` hook).

        New hosts are refused from here on. A call running on another thread is stopped at its
        next epoch check; if it has not ended within ``wait_s`` the teardown is left to the
        interpreter rather than pulling a store from under it. Then every host and any store
        still open is closed, the workers are waited for until they release every output
        callback, the ticker stops, and only then the engine closes.

        Why the order: wasmtime-wasi serves a guest's stdout/stderr from a tokio worker thread
        that holds a clone of the custom output stream; when the last clone drops, the worker
        calls wasmtime-py's ``custom_finalize``, Python code. Once the interpreter finalizes,
        a foreign thread taking the GIL is ended by ``pthread_exit``, whose unwind crosses
        Rust's no-unwind entry: "panic in a function that cannot unwind", then abort (issue
        16). Exit hooks run before finalization, so draining here is safe; each store is also
        closed on its calling thread as its call ends, a trap's traceback cycle cut. Seen
        with wasmtime-py up to 50.0.1 (``WasiConfig.stdout_custom``); drop the wait once the
        finalizer runs on the deleting thread.
        """
        with Runtime._create_lock:
            if Runtime._shut_down:
                return
            Runtime._shut_down = True
            Runtime._instance = None
        deadline = time.monotonic() + wait_s
        if not self.call_lock.acquire(blocking=False):
            self.ticker.stop_current(interrupt=False)
            if not self.call_lock.acquire(timeout=wait_s):
                return
        try:
            for host in list(self.hosts):
                host.close()
            for store in list(self.stores):
                close_whole(store)
            # Each output callback is released by a tokio worker once the task that owned it
            # is dropped; wait for all of them while Python can still run those finalizers.
            while len(self.outputs) and time.monotonic() < deadline:
                time.sleep(0.002)
            self.ticker.stop()
            self.engine.close()
        finally:
            self.call_lock.release()
