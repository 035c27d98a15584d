"""Hook components hosted in the kernel with wasmtime.

Design notes
------------
* **One engine, one ticker.** Every :class:`HookHost` in the process shares one wasmtime
  ``Engine`` configured for epoch interruption and fuel metering (both must be set before
  instantiation, and both are part of the compiled-component cache key). One daemon thread
  advances the engine's epoch by wall time while hooks run and sleeps once they have been idle
  for a second; each call's store gets its own deadline in ticks. Calls are serialized by a
  process-wide lock, so the ticker always knows which call it is timing.
* **A fresh store per call.** After any trap a wasmtime store is unusable, so every call builds
  its own ``Store`` (limits, fuel, deadline, WASI with no preopens, no environment, no
  arguments and stdout/stderr captured into bounded buffers) and instantiates the component
  anew (~1 ms). A misbehaving hook therefore never poisons the next call, or another hook.
* **The conversation import is the Python reader.** ``read-messages`` is served by the same
  ``ConversationStore.reader`` the Python API uses, scoped to the record the current task's
  ``context-id`` names and gated by the hook's grant. Reader errors cross into the guest as
  the exact WIT strings; they are *returned*, never raised, because a raised exception traps the
  guest. An unexpected failure inside the host function is different: the call is aborted and
  reported with code ``host_error``. Pages are written straight into wasmtime's C values
  (:class:`_PageLowering`), because the binding's generic conversion costs ~25 µs a message.
* **Memory.** ``memory.grow`` past the store limit returns -1 rather than trapping (the
  wasmtime C API offers no trap-on-grow-failure switch), so a guest that runs out is stopped
  by its own abort: the result is a ``trap`` whose message names the memory limit. A
  component whose initial memory already exceeds the limit fails with ``memory_limit``.
* **Interrupts.** A hook call can run inside wasm for a long time, where Python's own SIGINT
  handler cannot run. While a call runs on the main thread, a flag-setting SIGINT handler and
  a wakeup fd are installed; the ticker thread sees the signal byte, advances the epoch past
  the store's deadline so the guest stops at its next check, and the call then raises
  ``KeyboardInterrupt`` with the host intact.

Result codes (``HookResult.code``): ``guest_error`` (the hook returned ``err``), ``trap``,
``deadline_exceeded``, ``fuel_exhausted``, ``memory_limit``, ``host_error``, ``load_failed``,
``invalid_output`` (a returned value the host cannot turn into its Python form).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import math
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from murmur_nb._conversations import ConversationStore, Message, check_context_id
from murmur_nb._exceptions import ConversationReadError, HookError, MissingDependency
from murmur_nb._hook_config import HookConfig, HookEntry, HookLimits, load_hook_config
from murmur_nb._wasm_cache import ComponentCache, cache_dir, sha256_file

if TYPE_CHECKING:
    from wasmtime import Engine, Store
    from wasmtime.component import Component, ExportIndex, Linker

__all__ = [
    "HOOK_WORLD",
    "HookHost",
    "HookInfo",
    "HookResult",
    "build_demo_hook",
    "build_python_hook",
    "wit_dir",
]

HOOK_WORLD = "hook"
HANDLERS = "murmur:hook/handlers@0.8.0"
READ_INTERFACE = "murmur:conversation/read@0.1.0"
_FUNCS = {"task-start": "on-task-start", "compact": "on-compact"}

_MIB = 1 << 20
_FUEL_UNLIMITED = (1 << 63) - 1
_CAPTURE_LIMIT = 64 * 1024
_TICK_S = 0.005
#: What a missing or changed private wasmtime-py API (``wasmtime._ffi``) raises while the fast
#: ``read-messages`` path is set up; any of them means: use the binding's public conversion.
_FAST_PATH_ERRORS = (ImportError, AttributeError, TypeError, ValueError, ctypes.ArgumentError)
_IDLE_S = 1.0


def wit_dir() -> Path:
    """The WIT folder shipped in the package (``world.wit`` plus ``deps/``)."""
    return Path(__file__).with_name("wit")


# --------------------------------------------------------------------------- results


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
        state = "ok" if self.ok else f"{self.code}: {self.error}"
        return f"HookResult({self.hook_id!r}, {self.event}, {state}, {self.duration_ms:.2f} ms)"


@dataclass(frozen=True)
class HookInfo:
    """A configured hook as the host sees it: configuration, grant and load state."""

    id: str
    component: Path
    events: tuple[str, ...]
    read_granted: bool
    limits: HookLimits
    notes: tuple[str, ...] = ()
    load_error: str | None = None
    digest: str | None = None
    loaded_from: str | None = None

    @property
    def loaded(self) -> bool:
        return self.load_error is None


# --------------------------------------------------------------------------- runtime


class _Capture:
    """A bounded byte sink for one guest stream."""

    __slots__ = ("chunks", "dropped", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        room = _CAPTURE_LIMIT - self.size
        if room > 0:
            self.chunks.append(data[:room])
            self.size += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        out = b"".join(self.chunks).decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[murmur-nb: {self.dropped} more bytes not captured]"
        return out


class _Ticker:
    """Advances the engine epoch in real time while hooks run; turns SIGINT into a deadline.

    The thread ticks every ``_TICK_S`` from the first call on and goes back to sleep once no
    call has run for ``_IDLE_S``, so back-to-back calls never pay for waking it. The epoch
    follows wall time (ticks are issued by elapsed time, not by wake-ups), so a late wake-up
    never stretches a deadline. Deadlines are relative to the epoch when each store is made.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._ctl_r, self._ctl_w = os.pipe()
        self._sig_r, self._sig_w = os.pipe()
        for fd in (self._ctl_r, self._ctl_w, self._sig_r, self._sig_w):
            os.set_blocking(fd, False)
        # Guards the clock state below: the call thread must never see a half-made wake-up
        # (an origin without its ``_sleeping = False``), and the thread must never go to
        # sleep after a call has started but before that call could wake it.
        self._lock = threading.Lock()
        self._active_ticks = 0
        self._last_active = 0.0
        self._origin = 0.0
        self._issued = 0
        self._sleeping = True
        self._forward_fd = -1
        self.interrupted = False
        self._thread = threading.Thread(target=self._run, name="murmur-nb-epoch", daemon=True)
        self._thread.start()

    @staticmethod
    def _drain(fd: int) -> bytes:
        out = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 4096):
                out += chunk
        return out

    def owed(self, now: float) -> int:
        """Ticks that wall time had earned at ``now`` (``time.monotonic()``) but the thread
        has not issued yet (it may lag)."""
        with self._lock:
            if self._sleeping:
                return 0
            return max(0, int((now - self._origin) / _TICK_S) - self._issued)

    def _run(self) -> None:
        while True:
            timeout = None if self._sleeping else _TICK_S
            ready, _, _ = select.select([self._ctl_r, self._sig_r], [], [], timeout)
            if self._ctl_r in ready:
                self._drain(self._ctl_r)
                with self._lock:
                    if self._sleeping:
                        self._origin, self._issued = time.monotonic(), 0
                        self._sleeping = False
            if self._sig_r in ready:
                data = self._drain(self._sig_r)
                if self._forward_fd >= 0:
                    with contextlib.suppress(OSError):
                        os.write(self._forward_fd, data)
                if self._active_ticks and signal.SIGINT in data:
                    self.stop_current()
            with self._lock:
                now = time.monotonic()
                due = int((now - self._origin) / _TICK_S)
                while self._issued < due:
                    self._engine.increment_epoch()
                    self._issued += 1
                if not self._active_ticks and now - self._last_active > _IDLE_S:
                    self._sleeping = True

    def stop_current(self) -> None:
        """Push the epoch past the running call's deadline."""
        self.interrupted = True
        for _ in range(self._active_ticks + 2):
            self._engine.increment_epoch()

    @contextlib.contextmanager
    def running(self, ticks: int) -> Iterator[None]:
        """Time one call whose store expires ``ticks`` ticks from now; route SIGINT to it.

        SIGINT is routed only on the main thread (where Python delivers signals).
        """
        self.interrupted = False
        with self._lock:
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
        if main:

            def on_sigint(signum: int, frame: FrameType | None) -> None:
                self.interrupted = True

            signal.signal(signal.SIGINT, on_sigint)
            self._forward_fd = signal.set_wakeup_fd(self._sig_w, warn_on_full_buffer=False)
        try:
            yield
        finally:
            with self._lock:
                self._active_ticks = 0
                self._last_active = time.monotonic()
            if main:
                signal.set_wakeup_fd(self._forward_fd)
                self._forward_fd = -1
                signal.signal(signal.SIGINT, previous)


class _Runtime:
    """The process-wide engine, compiled-component cache and ticker."""

    _instance: _Runtime | None = None
    _create_lock = threading.Lock()

    def __init__(self) -> None:
        import wasmtime  # noqa: PLC0415 - wasmtime loads on first use
        import wasmtime.component  # noqa: PLC0415
        from wasmtime import Config, Engine  # noqa: PLC0415

        # The classes the per-call path needs, resolved once (no import machinery per call).
        self.Store = wasmtime.Store
        self.WasiConfig = wasmtime.WasiConfig
        self.WasmtimeError = wasmtime.WasmtimeError
        self.Record = wasmtime.component.Record
        config = Config()
        config.epoch_interruption = True
        config.consume_fuel = True
        self.fingerprint = "component-model;epoch_interruption;consume_fuel"
        self.engine = Engine(config)
        self.cache = ComponentCache(self.engine, self.fingerprint, keep_in_memory=16)
        self.ticker = _Ticker(self.engine)
        self.call_lock = threading.RLock()

    @classmethod
    def get(cls) -> _Runtime:
        with cls._create_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance


# --------------------------------------------------------------------------- readers


class _Reader(Protocol):
    def read_messages(self, cursor: str | None, limit: int) -> Any: ...


class _ReaderSource(Protocol):
    def reader(self, context_id: str | None, *, granted: bool = True) -> Any: ...


# --------------------------------------------------------------------------- fast lowering


class _PageLowering:
    """Writes a ``result<message-page, string>`` straight into wasmtime's C value structs.

    wasmtime-py's generic conversion re-reads each record type through the C API for every
    value (~25 µs a message), which would dominate a hook call that reads one page. This
    writer keeps pre-built templates (record field names included) and per call copies the
    template list for the page size in one C call, then fills each message's strings in
    place, about four C calls a message. It relies on wasmtime-py's ctypes layer, so it
    checks the layout it needs when built and :class:`HookHost` falls back to the generic
    binding when anything is missing.
    """

    def __init__(self) -> None:

        from wasmtime import _ffi as ffi  # noqa: PLC0415 - wasmtime loads on first use

        self._ffi = ffi
        val_t = ffi.wasmtime_component_val
        entry_t = ffi.wasmtime_component_valrecord_entry
        self.val_size = ctypes.sizeof(val_t)
        self.of = int(val_t.of.offset)
        self.entry_size = ctypes.sizeof(entry_t)
        self.entry_val_of = int(entry_t.val.offset) + self.of
        self.result_val = int(ffi.wasmtime_component_valresult.val.offset)  # type: ignore[attr-defined]
        self.k_string = ffi.WASMTIME_COMPONENT_STRING.value
        self.k_record = ffi.WASMTIME_COMPONENT_RECORD.value
        self.k_list = ffi.WASMTIME_COMPONENT_LIST.value
        self.k_option = ffi.WASMTIME_COMPONENT_OPTION.value
        self.k_result = ffi.WASMTIME_COMPONENT_RESULT.value
        self.k_u32 = ffi.WASMTIME_COMPONENT_U32.value
        self.k_bool = ffi.WASMTIME_COMPONENT_BOOL.value

        def raw(name: str, restype: Any, *argtypes: Any) -> Any:
            func = ffi.dll[name]  # a fresh function object; wasmtime-py's own stays untouched
            func.restype = restype
            func.argtypes = list(argtypes)
            return func

        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        self.byte_vec_new = raw("wasm_byte_vec_new", None, vp, sz, ctypes.c_char_p)
        self.byte_vec_delete = raw("wasm_byte_vec_delete", None, vp)
        self.val_new = raw("wasmtime_component_val_new", vp, vp)
        self.val_delete = raw("wasmtime_component_val_delete", None, vp)
        self.list_copy = raw("wasmtime_component_vallist_copy", None, vp, vp)
        self.record_copy = raw("wasmtime_component_valrecord_copy", None, vp, vp)
        self._ctypes = ctypes
        self.ptr_at = ctypes.c_uint64.from_address
        self._tmp = val_t()
        self._tmp_addr = ctypes.addressof(self._tmp)
        self._page_val = val_t()
        self._page_addr = ctypes.addressof(self._page_val)
        self._message = self._record_template(
            [
                ("id", self.k_string),
                ("role", self.k_string),
                ("content", self.k_string),
                ("name", self.k_option),
                ("created-at", self.k_option),
            ]
        )
        # Nearly every record line carries created_at: the template holds some("") there, so a
        # page copy already has the box and only its string is written (one C call, not two).
        self.ptr_at(
            ctypes.addressof(self._message.data.contents) + 4 * self.entry_size + self.entry_val_of
        ).value = self._boxed_string("")
        self._page = self._record_template(
            [("messages", self.k_list), ("next-cursor", self.k_option), ("total", self.k_u32)]
        )
        self._lists: dict[int, Any] = {}

    def _record_template(self, fields: list[tuple[str, int]]) -> Any:
        ffi = self._ffi
        record = ffi.wasmtime_component_valrecord_t()
        ffi.wasmtime_component_valrecord_new_uninit(self._ctypes.byref(record), len(fields))
        for i, (name, kind) in enumerate(fields):
            entry = record.data[i]
            entry.name = ffi.str_to_capi(name)
            entry.val.kind = kind
            if kind == self.k_string:
                ffi.wasm_byte_vec_new_empty(self._ctypes.byref(entry.val.of.string))
            elif kind == self.k_list:
                ffi.wasmtime_component_vallist_new_empty(self._ctypes.byref(entry.val.of.list))
            elif kind == self.k_option:
                entry.val.of.option = None
            else:
                entry.val.of.u32 = 0
        return record

    def _list_template(self, n: int) -> Any:
        template = self._lists.get(n)
        if template is None:
            ffi, ctypes = self._ffi, self._ctypes
            template = ffi.wasmtime_component_vallist_t()
            ffi.wasmtime_component_vallist_new_uninit(ctypes.byref(template), n)
            base = ctypes.cast(template.data, ctypes.c_void_p).value or 0
            message = ctypes.addressof(self._message)
            for i in range(n):
                addr = base + i * self.val_size
                ctypes.memset(addr, self.k_record, 1)
                self.record_copy(addr + self.of, message)
            self._lists[n] = template
        return template

    def _boxed_string(self, text: str) -> int:
        data = text.encode("utf-8")
        self._tmp.kind = self.k_string
        self.byte_vec_new(self._tmp_addr + self.of, len(data), data)
        boxed: int = self.val_new(self._tmp_addr)
        return boxed

    def read_args(self, args: Any) -> tuple[str | None, int]:
        """Decode ``(cursor: option<string>, limit: u32)``, freeing what the callee owns."""
        ctypes = self._ctypes
        first = args[0]
        cursor: str | None = None
        option = first.of.option
        if option:
            inner = option.contents
            vec = inner.of.string
            cursor = ctypes.string_at(vec.data, vec.size).decode("utf-8")
            self.byte_vec_delete(ctypes.addressof(vec))
            inner.kind = self.k_bool
            self.val_delete(ctypes.cast(option, ctypes.c_void_p).value)
        limit = int(args[1].of.u32)
        return cursor, limit

    def write_error(self, results: Any, text: str) -> None:
        self._write_result(results, ok=False, boxed=self._boxed_string(text))

    def write_page(self, results: Any, messages: Sequence[Any], cursor: Any, total: int) -> None:
        ctypes = self._ctypes
        c_void_p = ctypes.c_void_p
        of, entry_size, entry_val_of = self.of, self.entry_size, self.entry_val_of
        byte_vec_new = self.byte_vec_new
        boxed_string = self._boxed_string
        # Build the page record in its own scratch value, fill it, then box it.
        self._page_val.kind = self.k_record
        page_addr = self._page_addr
        self.record_copy(page_addr + of, ctypes.addressof(self._page))
        entries = c_void_p.from_address(page_addr + of + 8).value or 0
        n = len(messages)
        list_addr = entries + entry_val_of
        self.list_copy(list_addr, ctypes.addressof(self._list_template(n)))
        data = c_void_p.from_address(list_addr + 8).value or 0
        # One view over the copied list's values; each value's record data pointer sits at
        # word ``i * step + first`` of it.
        step, first = self.val_size // 8, (of + 8) // 8
        words = (ctypes.c_uint64 * (n * step)).from_address(data) if n else ()
        ptr_at, val_delete = self.ptr_at, self.val_delete
        name_at, created_at = 3 * entry_size, 4 * entry_size
        for i, message in enumerate(messages):
            at = words[i * step + first] + entry_val_of
            raw = message.id.encode("utf-8")
            byte_vec_new(at, len(raw), raw)
            raw = message.role.encode("utf-8")
            byte_vec_new(at + entry_size, len(raw), raw)
            content = message.content
            if type(content) is not str:
                content = _wire_content(message)
            raw = content.encode("utf-8")
            byte_vec_new(at + 2 * entry_size, len(raw), raw)
            name = message.name
            if name is not None:
                ptr_at(at + name_at).value = boxed_string(name)
            created = message.created_at
            slot = ptr_at(at + created_at)
            if created is None:
                val_delete(slot.value)
                slot.value = 0
            else:
                if type(created) is not str:
                    created = _timestamp(created)
                raw = created.encode("utf-8")
                byte_vec_new(slot.value + of, len(raw), raw)
        if cursor is not None:
            boxed = self._boxed_string(cursor)
            c_void_p.from_address(entries + entry_size + entry_val_of).value = boxed
        ctypes.c_uint32.from_address(entries + 2 * entry_size + entry_val_of).value = total
        self._write_result(results, ok=True, boxed=self.val_new(page_addr))

    def _write_result(self, results: Any, *, ok: bool, boxed: int) -> None:
        ctypes = self._ctypes
        addr = ctypes.cast(results, ctypes.c_void_p).value or 0
        ctypes.memset(addr, self.k_result, 1)
        ctypes.c_bool.from_address(addr + self.of).value = ok
        ctypes.c_void_p.from_address(addr + self.of + self.result_val).value = boxed


_MESSAGE_SIG = (
    "record{id: string, role: string, content: string, name: option<string>, "
    "created-at: option<string>}"
)
_EXPECTED = {
    "task-start": "func(record{task-id: string, context-id: string}) -> result<string, string>",
    "compact": f"func(list<{_MESSAGE_SIG}>) -> result<list<{_MESSAGE_SIG}>, string>",
}


def _signature(ty: Any) -> str:
    """A WIT-like rendering of a component value or function type (parameter names left out)."""
    from wasmtime import component as c  # noqa: PLC0415 - wasmtime loads on first use

    if isinstance(ty, c.FuncType):
        params = ", ".join(_signature(t) for _, t in ty.params)
        result = ty.result
        return f"func({params})" + ("" if result is None else f" -> {_signature(result)}")
    if isinstance(ty, c.ListType):
        return f"list<{_signature(ty.element)}>"
    if isinstance(ty, c.OptionType):
        return f"option<{_signature(ty.payload)}>"
    if isinstance(ty, c.ResultType):
        ok, err = ty.ok, ty.err
        return (
            f"result<{'_' if ok is None else _signature(ok)}, "
            f"{'_' if err is None else _signature(err)}>"
        )
    if isinstance(ty, c.RecordType):
        return "record{" + ", ".join(f"{n}: {_signature(t)}" for n, t in ty.fields) + "}"
    return type(ty).__name__.lower()


def _timestamp(value: Any) -> str:
    if isinstance(value, str):
        return value
    iso = getattr(value, "isoformat", None)
    if callable(iso):
        return str(iso()).replace("+00:00", "Z")
    return str(value)


# --------------------------------------------------------------------------- the host


@dataclass
class _Loaded:
    info: HookInfo
    component: Component | None = None
    funcs: dict[str, ExportIndex] = field(default_factory=dict)


@dataclass
class _Call:
    reader: _Reader
    host_failure: BaseException | None = None


def _message_record(message: Any) -> Any:
    from wasmtime.component import Record  # noqa: PLC0415 - wasmtime loads on first use

    record: Any = Record()
    record.id = message.id
    record.role = message.role
    content = message.content
    record.content = content if isinstance(content, str) else _wire_content(message)
    record.name = message.name
    created = message.created_at
    setattr(record, "created-at", None if created is None else _timestamp(created))
    return record


def _wire_content(message: Any) -> str:
    wire = getattr(message, "wire_content", None)
    if callable(wire):
        return str(wire())
    raise TypeError(f"message {message.id!r} has non-string content and no wire form")


def _record_message(record: Any) -> Message:
    return Message(
        id=record.id,
        role=record.role,
        content=record.content,
        name=record.name,
        created_at=getattr(record, "created-at"),
    )


def _classify(message: str) -> str:
    if "all fuel consumed" in message:
        return "fuel_exhausted"
    if "wasm trap: interrupt" in message:
        return "deadline_exceeded"
    if "exceeds memory limits" in message or "memory minimum size" in message:
        return "memory_limit"
    return "trap"


class HookHost:
    """Hosts the hook components ``murmur.yaml`` names and dispatches lifecycle events.

    Parameters
    ----------
    config : HookConfig
        Validated hook configuration (see :meth:`from_config`).
    conversations : ConversationStore, optional
        Serves ``read-messages``: the same reader the Python API uses, so cursors and errors
        are the same. Defaults to the store of ``$MURMUR_HOME`` (else ``~/.murmur``).
    fast_lowering : bool
        Write pages straight into wasmtime's C values (the default); ``False`` uses
        wasmtime-py's generic conversion, about ten times slower for a full page.

    Examples
    --------
    >>> hooks = HookHost.from_config("murmur.yaml", conversations=store)  # doctest: +SKIP
    >>> hooks.task_start(task_id="t1", context_id="ctx-1")["summarize"].value  # doctest: +SKIP
    """

    def __init__(
        self,
        config: HookConfig,
        *,
        conversations: _ReaderSource | None = None,
        fast_lowering: bool = True,
    ) -> None:
        self._config = config
        self._conversations: _ReaderSource = (
            conversations if conversations is not None else ConversationStore()
        )
        self._runtime = _Runtime.get()
        self._context_id: str | None = None
        self._current: _Call | None = None
        self._closed = False
        self._keepalive: tuple[Any, ...] = ()
        self._lowering: _PageLowering | None = None
        if fast_lowering:
            try:
                self._lowering = _PageLowering()
            except _FAST_PATH_ERRORS:  # a wasmtime-py whose private ctypes layer differs
                self._lowering = None
        self._linker = self._make_linker()
        self._hooks: dict[str, _Loaded] = {}
        for entry in config.hooks:
            self._hooks[entry.id] = self._load(entry)

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str], *, conversations: _ReaderSource | None = None
    ) -> HookHost:
        """Load ``murmur.yaml`` and every hook it names.

        A hook whose component cannot be loaded is kept, with its ``load_error``; the others
        load. A configuration error raises :class:`HookConfigError`.
        """
        return cls(load_hook_config(Path(path)), conversations=conversations)

    # ----------------------------------------------------------------- setup

    def _make_linker(self) -> Linker:
        """The linker: WASI without preopens plus ``read-messages`` (fast path if it links)."""
        if self._lowering is not None:
            try:
                return self._build_linker(self._lowering)
            except _FAST_PATH_ERRORS:  # wasmtime-py's private ctypes layer changed: go generic
                self._lowering = None
                self._keepalive = ()
        return self._build_linker(None)

    def _build_linker(self, lowering: _PageLowering | None) -> Linker:
        from wasmtime.component import Linker  # noqa: PLC0415 - wasmtime loads on first use

        linker = Linker(self._runtime.engine)
        linker.add_wasip2()
        with linker.root() as root, root.add_instance(READ_INTERFACE) as read:
            if lowering is not None:
                self._add_fast_read(read, lowering)
            else:
                # wasmtime-py keeps host functions in a process-wide table until the linker
                # is freed; a weak reference keeps that table from keeping this host alive.
                method = weakref.WeakMethod(self._read_messages)

                def read_messages(store: Any, cursor: str | None, limit: int) -> Any:
                    bound = method()
                    if bound is None:
                        return "unavailable: the hook host is gone"
                    return bound(store, cursor, limit)

                read.add_func("read-messages", read_messages)
        return linker

    def _add_fast_read(self, read: Any, lowering: _PageLowering) -> None:
        """Define ``read-messages`` with a ctypes callback that lowers pages directly."""

        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use
        from wasmtime import _ffi as ffi  # noqa: PLC0415 - wasmtime loads on first use

        def callback(*raw: Any) -> int:
            # (data, context, func type, args, nargs, results, nresults)
            args, results = raw[3], raw[5]
            try:
                cursor, limit = lowering.read_args(args)
                outcome = self._serve(cursor, limit)
                if isinstance(outcome, str):
                    lowering.write_error(results, outcome)
                else:
                    lowering.write_page(
                        results, outcome.messages, outcome.next_cursor, int(outcome.total)
                    )
            except BaseException as exc:  # nothing may escape a C callback
                call = self._current
                if call is not None and call.host_failure is None:
                    call.host_failure = exc
                error = WasmtimeError(f"host function read-messages failed: {exc!r}")
                return ctypes.cast(error._consume(), ctypes.c_void_p).value or 0
            return 0

        c_callback = ffi.wasmtime_component_func_callback_t(callback)
        c_finalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda data: None)
        self._keepalive = (c_callback, c_finalizer)
        name = b"read-messages"
        error = ffi.wasmtime_component_linker_instance_add_func(
            read.ptr(),
            ctypes.create_string_buffer(name),
            len(name),
            c_callback,
            None,
            c_finalizer,
        )
        if error:
            raise WasmtimeError._from_ptr(error)

    def _serve(self, cursor: str | None, limit: int) -> Any:
        """One ``read-messages``: a page, or the exact WIT error string (never raised)."""
        call = self._current
        if call is None:
            return "unavailable: no hook call is in progress"
        try:
            return call.reader.read_messages(cursor, limit)
        except ConversationReadError as exc:
            return str(exc)

    def _load(self, entry: HookEntry) -> _Loaded:
        info = HookInfo(
            id=entry.id,
            component=entry.component,
            events=entry.events,
            read_granted=entry.read_granted,
            limits=entry.limits,
            notes=entry.notes,
        )
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use

        if not entry.component.is_file():
            return _Loaded(
                dataclasses.replace(
                    info,
                    load_error=f"component file {entry.component} does not exist; build the "
                    "hook (mnb.build_python_hook) or fix `component:` in murmur.yaml",
                )
            )
        try:
            loaded = self._runtime.cache.load(entry.component)
        except (OSError, WasmtimeError) as exc:
            return _Loaded(
                dataclasses.replace(
                    info,
                    load_error=f"{entry.component} is not a loadable WebAssembly component: "
                    f"{_reason(str(exc))}",
                )
            )
        info = dataclasses.replace(info, digest=loaded.digest, loaded_from=loaded.source)
        component = loaded.component
        handlers = component.get_export_index(HANDLERS)
        funcs: dict[str, ExportIndex] = {}
        missing = []
        for event in entry.events:
            index = (
                component.get_export_index(_FUNCS[event], handlers)
                if handlers is not None
                else None
            )
            if index is None:
                missing.append(_FUNCS[event])
            else:
                funcs[event] = index
        if missing:
            return _Loaded(
                dataclasses.replace(
                    info,
                    load_error=f"{entry.component} does not export {', '.join(missing)} from "
                    f"{HANDLERS}; build it against the `{HOOK_WORLD}` world in "
                    f"{wit_dir()} or drop those events",
                )
            )
        probe = self._instantiate_probe(component, entry.limits, funcs)
        if probe is not None:
            return _Loaded(dataclasses.replace(info, load_error=probe))
        return _Loaded(info, component, funcs)

    def _instantiate_probe(
        self, component: Component, limits: HookLimits, funcs: dict[str, ExportIndex]
    ) -> str | None:
        """Instantiate once, so missing imports or wrong signatures fail at load time."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use

        with self._runtime.call_lock:
            store, deadline = self._new_store(limits, _Capture(), _Capture())
            try:
                with self._runtime.ticker.running(deadline):
                    instance = self._linker.instantiate(store, component)
                for event, index in funcs.items():
                    func = instance.get_func(store, index)
                    found = _signature(func.type(store)) if func is not None else "not a function"
                    if found != _EXPECTED[event]:
                        return (
                            f"{_FUNCS[event]} has the signature {found}, but the "
                            f"`{HOOK_WORLD}` world wants {_EXPECTED[event]}; rebuild the hook "
                            f"against the WIT folder in {wit_dir()}"
                        )
            except WasmtimeError as exc:
                if _classify(str(exc)) == "memory_limit":
                    return "cannot instantiate: " + _explain("memory_limit", str(exc), limits)
                return (
                    f"cannot instantiate: {_reason(str(exc))}. Hooks get WASI without files, "
                    f"environment or network, and {READ_INTERFACE}; nothing else is linked"
                )
        return None

    # ----------------------------------------------------------------- public API

    @property
    def hooks(self) -> dict[str, HookInfo]:
        """Every configured hook by id: component path, events, grant, limits, load error."""
        return {hook_id: loaded.info for hook_id, loaded in self._hooks.items()}

    @property
    def config(self) -> HookConfig:
        return self._config

    @property
    def conversations(self) -> Any:
        """The store that serves ``read-messages`` (the one the Python API reads too)."""
        return self._conversations

    @property
    def context_id(self) -> str | None:
        """The ``context-id`` of the current task (``None`` before the first task)."""
        return self._context_id

    def task_start(self, *, task_id: str, context_id: str) -> dict[str, HookResult]:
        """Dispatch ``on-task-start`` to every hook subscribed to ``task-start``.

        The task's ``context_id`` becomes the record that reads are scoped to, for this call and
        for later ``compact`` calls, until the next task starts.

        Raises
        ------
        InvalidContextId
            ``context_id`` is not a plain context name; no hook ran.
        """
        check_context_id(context_id)
        self._context_id = context_id

        def make_args() -> tuple[Any, ...]:
            event: Any = self._runtime.Record()
            setattr(event, "task-id", task_id)
            setattr(event, "context-id", context_id)
            return (event,)

        return self._dispatch("task-start", make_args, _lift_note)

    def compact(self, messages: Sequence[Message]) -> dict[str, HookResult]:
        """Dispatch ``on-compact``; each ``ok`` value is the list of messages that hook keeps.

        Reads a hook makes during compaction are scoped to the current task's record (an
        empty page before the first task).
        """
        items = list(messages)

        def make_args() -> tuple[Any, ...]:
            return ([_message_record(m) for m in items],)

        return self._dispatch("compact", make_args, _lift_messages)

    def close(self) -> None:
        """Drop the compiled components; the host cannot dispatch afterwards."""
        self._closed = True
        self._hooks = {k: _Loaded(v.info) for k, v in self._hooks.items()}

    def __enter__(self) -> HookHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        names = ", ".join(
            f"{k}{'' if v.info.loaded else ' (not loaded)'}" for k, v in self._hooks.items()
        )
        return f"HookHost({names})"

    # ----------------------------------------------------------------- dispatch

    def _reader_for(self, info: HookInfo) -> _Reader:
        """The reader for one call: the current task's record, or none (SPEC §3)."""
        context = None if self._config.transport == "process" else self._context_id
        reader: _Reader = self._conversations.reader(context, granted=info.read_granted)
        return reader

    def _dispatch(
        self,
        event: str,
        make_args: Callable[[], tuple[Any, ...]],
        lift: Callable[[Any], Any],
    ) -> dict[str, HookResult]:
        if self._closed:
            raise HookError("this HookHost is closed; create a new one with HookHost.from_config")
        results: dict[str, HookResult] = {}
        for hook_id, loaded in self._hooks.items():
            if event not in loaded.info.events:
                continue
            if loaded.component is None:
                results[hook_id] = HookResult(
                    hook_id, event, ok=False, error=loaded.info.load_error, code="load_failed"
                )
                continue
            results[hook_id] = self._call(loaded, event, make_args(), lift)
        return results

    def _ticks(self, limits: HookLimits) -> int:
        return math.ceil(limits.time_ms / 1000 / _TICK_S) + 1

    def _new_store(
        self, limits: HookLimits, out: _Capture, err: _Capture, started: float | None = None
    ) -> tuple[Store, int]:
        """A fresh store for one call, and its deadline in ticks from the current epoch.

        The deadline counts from ``started`` (``time.monotonic()``, default now): the caller
        measures the call's duration from the same instant, so time lost before the guest
        runs (a preempted thread, the GIL held elsewhere) is the guest's, never taken from it.
        """
        runtime = self._runtime
        store: Store = runtime.Store(runtime.engine)
        wasi = runtime.WasiConfig()
        wasi.stdout_custom = out.write
        wasi.stderr_custom = err.write
        store.set_wasi(wasi)
        store.set_limits(memory_size=limits.memory_mib * _MIB)
        store.set_fuel(limits.fuel if limits.fuel is not None else _FUEL_UNLIMITED)
        # Relative to the engine's epoch now; add the ticks the ticker still owes so that a
        # lagging ticker catching up cannot end this call early.
        now = time.monotonic() if started is None else started
        deadline = self._ticks(limits) + runtime.ticker.owed(now)
        store.set_epoch_deadline(deadline)
        return store, deadline

    def _call(
        self, loaded: _Loaded, event: str, args: tuple[Any, ...], lift: Callable[[Any], Any]
    ) -> HookResult:
        WasmtimeError = self._runtime.WasmtimeError

        assert loaded.component is not None
        info = loaded.info
        limits = info.limits
        fuel_start = limits.fuel if limits.fuel is not None else _FUEL_UNLIMITED
        out, err = _Capture(), _Capture()
        runtime = self._runtime
        with runtime.call_lock:
            call = _Call(self._reader_for(info))
            self._current = call
            started = time.monotonic()
            store, deadline = self._new_store(limits, out, err, started)
            raw: Any = None
            failure: str | None = None
            code: str | None = None
            try:
                with runtime.ticker.running(deadline):
                    instance = self._linker.instantiate(store, loaded.component)
                    func = instance.get_func(store, loaded.funcs[event])
                    assert func is not None
                    raw = func(store, *args)
                    func.post_return(store)
            except WasmtimeError as exc:
                failure = str(exc)
                code = _classify(failure)
            except Exception as exc:  # raised by the binding after a host-function failure
                if call.host_failure is None:
                    call.host_failure = exc
            finally:
                self._current = None
                duration = (time.monotonic() - started) * 1000
            interrupted = runtime.ticker.interrupted
            try:
                fuel_used = fuel_start - store.get_fuel()
            except WasmtimeError:
                fuel_used = 0
        if interrupted or isinstance(call.host_failure, KeyboardInterrupt):
            raise KeyboardInterrupt(f"hook {info.id!r} interrupted during {event}")
        host_failure = call.host_failure
        if host_failure is not None:
            code = "host_error"
            failure = (
                f"the host's read-messages failed while serving hook {info.id!r}: "
                f"{type(host_failure).__name__}: {host_failure}"
            )

        def result(
            ok: bool, value: Any = None, error: str | None = None, code: str | None = None
        ) -> HookResult:
            return HookResult(
                info.id,
                event,
                ok=ok,
                value=value,
                error=error,
                code=code,
                stdout=out.text(),
                stderr=err.text(),
                duration_ms=duration,
                fuel_used=fuel_used,
            )

        if code is not None:
            return result(False, error=_explain(code, failure or "", limits), code=code)
        ok, value = _unwrap_result(raw)
        if not ok:
            return result(False, error=str(value), code="guest_error")
        try:
            lifted = lift(value)
        except (TypeError, ValueError) as exc:
            return result(
                False,
                error=f"the hook returned a value the host cannot use: {exc}",
                code="invalid_output",
            )
        return result(True, value=lifted)

    # ----------------------------------------------------------------- host function

    def _read_messages(self, store: Any, cursor: str | None, limit: int) -> Any:
        """``read-messages`` through wasmtime-py's generic conversion (the fallback path)."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use
        from wasmtime.component import Record  # noqa: PLC0415 - wasmtime loads on first use

        try:
            outcome = self._serve(cursor, limit)
            if isinstance(outcome, str):
                return outcome
            out: Any = Record()
            out.messages = [_message_record(m) for m in outcome.messages]
            setattr(out, "next-cursor", outcome.next_cursor)
            out.total = int(outcome.total)
        except Exception as exc:
            call = self._current
            if call is not None and call.host_failure is None:
                call.host_failure = exc
            raise WasmtimeError(f"host function read-messages failed: {exc!r}") from exc
        return out


def _unwrap_result(raw: Any) -> tuple[bool, Any]:
    """``result<T, string>``: a ``Variant`` when T is string, else a bare value or bare str."""
    tag = getattr(raw, "tag", None)
    if tag in ("ok", "err"):
        return tag == "ok", raw.payload
    if isinstance(raw, str):
        return False, raw
    return True, raw


def _lift_note(value: Any) -> str:
    return str(value)


def _lift_messages(value: Any) -> list[Any]:
    return [_record_message(r) for r in value]


def _reason(text: str) -> str:
    """A one-line reason from a wasmtime error: the trap for traps, else the causal chain."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "unknown failure"
    causes: list[str] = []
    if "Caused by:" in lines:
        at = lines.index("Caused by:")
        causes = [re.sub(r"^\d+:\s*", "", line) for line in lines[at + 1 :]]
        lines = lines[:at]
    if lines[0].startswith("error while executing at wasm backtrace") and causes:
        return causes[-1]
    return ": ".join([lines[0], *causes])


def _explain(code: str, failure: str, limits: HookLimits) -> str:
    head = _reason(failure)
    if code == "deadline_exceeded":
        return (
            f"stopped at its time limit of {limits.time_ms} ms; raise `limits.time_ms` for "
            "this hook in murmur.yaml if it needs longer"
        )
    if code == "fuel_exhausted":
        return (
            f"stopped after using its fuel limit of {limits.fuel}; raise `limits.fuel` for "
            "this hook in murmur.yaml if it needs more"
        )
    if code == "memory_limit":
        return (
            f"needs more memory than its limit of {limits.memory_mib} MiB ({head}); raise "
            "`limits.memory_mib` for this hook in murmur.yaml"
        )
    if code == "trap":
        return (
            f"the guest trapped: {head} (memory.grow past the {limits.memory_mib} MiB limit "
            "fails, and most guests abort with a trap when it does)"
        )
    return failure


# --------------------------------------------------------------------------- building


def _componentize_available() -> bool:
    try:
        import componentize_py  # noqa: F401, PLC0415 - only probing that it is installed
    except ImportError:
        return False
    return True


def _tool_version() -> str:
    from importlib.metadata import version  # noqa: PLC0415

    return version("componentize-py")


def _wit_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(wit_dir().rglob("*.wit")):
        digest.update(path.relative_to(wit_dir()).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _precheck(source: Path) -> None:
    """Catch the common mistakes in milliseconds instead of a failed build's tens of seconds."""
    import ast  # noqa: PLC0415 - only when building

    text = source.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, filename=str(source))
    except SyntaxError as exc:
        raise HookError(
            f"{source} has a syntax error at line {exc.lineno}: {exc.msg}; fix it and build again",
            code="hook_build_failed",
        ) from exc
    if not any(isinstance(node, ast.ClassDef) and node.name == "Handlers" for node in tree.body):
        raise HookError(
            f"{source} defines no top-level `class Handlers(exports.Handlers)`; a hook module "
            "implements on_task_start and on_compact on that class "
            "(`from wit_world import exports`)",
            code="hook_build_failed",
        )


def build_python_hook(
    path: str | os.PathLike[str], *, output: str | os.PathLike[str] | None = None
) -> Path:
    """Build a hook written in Python into a WebAssembly component with componentize-py.

    The module must define ``class Handlers(exports.Handlers)`` implementing
    ``on_task_start`` and ``on_compact`` (bindings: ``from wit_world import exports``; the
    conversation import is ``from wit_world.imports import read``). Builds are cached by the
    digest of the source, the WIT folder and the componentize-py version, so rebuilding an
    unchanged hook returns at once.

    Parameters
    ----------
    path : path-like
        The hook's ``.py`` file. Other modules in the same folder are importable from it.
    output : path-like, optional
        Where to copy the built ``.wasm``; by default the cached build is returned.

    Returns
    -------
    Path
        The built component.

    Raises
    ------
    MissingDependency
        componentize-py is not installed.
    HookError
        The source is missing or componentize-py failed (its output is in the message).
    """
    source = Path(path).expanduser().resolve()
    if not source.is_file() or source.suffix != ".py":
        raise HookError(
            f"{source} is not a Python source file; pass the .py file that defines the "
            "hook's Handlers class",
            code="hook_build_failed",
        )
    _precheck(source)
    if not _componentize_available():
        raise MissingDependency("componentize-py", "hooks", "Building a Python hook")
    key = hashlib.sha256()
    key.update(f"componentize-py={_tool_version()};wit={_wit_digest()};".encode())
    for file in sorted(source.parent.rglob("*.py")):
        if "__pycache__" in file.parts:
            continue
        key.update(file.relative_to(source.parent).as_posix().encode() + b"\0")
        key.update(file.read_bytes() + b"\0")
    key.update(source.name.encode())
    built = cache_dir() / "builds" / f"{source.stem}-{key.hexdigest()[:24]}.wasm"
    if not built.is_file():
        built.parent.mkdir(parents=True, exist_ok=True)
        tmp = built.with_name(f".tmp-{os.getpid()}-{built.name}")
        command = [
            sys.executable,
            "-c",
            "import sys; from componentize_py import script; "
            "sys.argv[0] = 'componentize-py'; sys.exit(script())",
            "-d",
            str(wit_dir()),
            "-w",
            HOOK_WORLD,
            "componentize",
            source.stem,
            "-p",
            str(source.parent),
            "-o",
            str(tmp),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            output = (done.stderr or done.stdout).split("Stack backtrace:")[0].strip()
            raise HookError(
                f"componentize-py could not build {source} (exit {done.returncode}):\n"
                f"{output[-3000:]}",
                code="hook_build_failed",
            )
        tmp.replace(built)
    if output is None:
        return built
    target = Path(output).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or sha256_file(target) != sha256_file(built):
        target.write_bytes(built.read_bytes())
    return target


def build_demo_hook(dest_dir: str | os.PathLike[str]) -> Path:
    """Build the demo ``summarize`` hook into ``dest_dir/hooks/summarize.wasm``.

    ``dest_dir`` is a capsule folder (where ``murmur.yaml`` lives); the returned path is the
    one the demo ``murmur.yaml`` names as ``component: hooks/summarize.wasm``.
    """
    source = Path(__file__).with_name("hooks_src") / "summarize" / "app.py"
    return build_python_hook(source, output=Path(dest_dir) / "hooks" / "summarize.wasm")
