"""Hook components hosted in the kernel with wasmtime.

Design notes
------------
* **A fresh store per call.** After any trap a wasmtime store is unusable, so every call builds
  its own ``Store`` (limits, fuel, deadline, WASI with no preopens, no environment, no
  arguments and stdout/stderr captured into bounded buffers) and instantiates the component
  anew (~1 ms). A misbehaving hook therefore never poisons the next call, or another hook.
* **The conversation import is the Python reader.** ``read-messages`` is served by the same
  ``ConversationStore.reader`` the Python API uses, scoped to the record the current task's
  ``context-id`` names and gated by the hook's grant. Reader errors cross into the guest as
  the exact WIT strings; they are *returned*, never raised, because a raised exception traps the
  guest. An unexpected failure inside the host function is different: the call is aborted and
  reported with code ``host_error``. How pages are lowered into wasmtime values is in
  :mod:`murmur_nb._hooks.lowering`.
* **Memory.** ``memory.grow`` past the store limit returns -1 rather than trapping (the
  wasmtime C API offers no trap-on-grow-failure switch), so a guest that runs out is stopped
  by its own abort: the result is a ``trap`` whose message names the memory limit. A
  component whose initial memory already exceeds the limit fails with ``memory_limit``.
* The shared engine, the epoch ticker and SIGINT handling are in
  :mod:`murmur_nb._hooks.runtime`; building components is in :mod:`murmur_nb._hooks.build`.

Result codes (``HookResult.code``): ``guest_error`` (the hook returned ``err``), ``trap``,
``deadline_exceeded``, ``fuel_exhausted``, ``memory_limit``, ``host_error``, ``load_failed``,
``invalid_output`` (a returned value the host cannot turn into its Python form).
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import os
import re
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from murmur_nb._conversations.store import ConversationStore, Message, check_context_id
from murmur_nb._exceptions import ConversationReadError, HookError
from murmur_nb._hooks.build import HOOK_WORLD, build_demo_hook, build_python_hook, wit_dir
from murmur_nb._hooks.config import HookConfig, HookEntry, HookLimits, load_hook_config
from murmur_nb._hooks.lowering import _FAST_PATH_ERRORS, _message_record, _PageLowering
from murmur_nb._hooks.runtime import _TICK_S, _Runtime

if TYPE_CHECKING:
    from wasmtime import Store
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

HANDLERS = "murmur:hook/handlers@0.8.0"
READ_INTERFACE = "murmur:conversation/read@0.1.0"
_FUNCS = {"task-start": "on-task-start", "compact": "on-compact"}

_MIB = 1 << 20
_FUEL_UNLIMITED = (1 << 63) - 1
_CAPTURE_LIMIT = 64 * 1024


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


# --------------------------------------------------------------------------- captured output


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


# --------------------------------------------------------------------------- readers


class _Reader(Protocol):
    def read_messages(self, cursor: str | None, limit: int) -> Any: ...


class _ReaderSource(Protocol):
    def reader(self, context_id: str | None, *, granted: bool = True) -> Any: ...


# --------------------------------------------------------------------------- signatures


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
