"""Hook components hosted in the kernel with wasmtime.

Every call gets a fresh ``Store`` (limits, fuel, deadline, WASI with nothing preopened and
output captured into bounded buffers) and instantiates the component anew (~1 ms), so a trap
never poisons the next call. A component loads only when its exports and imports have the
``hook`` world's signatures (:mod:`murmur_nb._hooks.signatures`) and a probe instantiation
succeeds. ``read-messages`` is the Python ``ConversationStore.reader``, scoped to the task's
``context-id`` and gated by the grant (:mod:`murmur_nb._hooks.linking`). Engine, ticker and
SIGINT: :mod:`murmur_nb._hooks.runtime`; codes and messages: :mod:`murmur_nb._hooks.diagnostics`.

Result codes (``HookResult.code``): ``guest_error`` (the hook returned ``err``), ``trap``,
``deadline_exceeded``, ``fuel_exhausted``, ``memory_limit``, ``table_limit``,
``instance_limit``, ``host_error``, ``load_failed`` / ``link_error`` (the hook did not load),
``invalid_output`` (a value with no Python form), ``result_too_large`` (past
``limits.result_messages`` or ``limits.result_mib``; see :mod:`murmur_nb._hooks.lifting`
and, for the count checked in the guest, :mod:`murmur_nb._hooks.guest_code.bounding`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import os
import re
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from murmur_nb._conversations.store import (
    ConversationStore,
    Message,
    check_as_of,
    check_context_id,
)
from murmur_nb._exceptions import HookConfigWarning, HookError
from murmur_nb._hooks.build import HOOK_WORLD, build_demo_hook, build_python_hook, wit_dir
from murmur_nb._hooks.cache import LoadedComponent, Rewrite
from murmur_nb._hooks.calls import CURRENT_CALL, HookCall, Reader, ReaderSource
from murmur_nb._hooks.config import HookConfig, HookEntry, HookLimits, load_hook_config
from murmur_nb._hooks.diagnostics import classify, explain, reason
from murmur_nb._hooks.guest_code.bounding import Unbounded, refused_count, rewrite_for
from murmur_nb._hooks.guest_code.compile_bounds import CompileFailed
from murmur_nb._hooks.guest_code.compile_cost import TooCostly
from murmur_nb._hooks.lifting import (
    Budget,
    LiftStopped,
    call_and_lift,
    public_lift,
    too_many,
)
from murmur_nb._hooks.linking import HostFunctions, make_linker
from murmur_nb._hooks.lowering import (
    FAST_PATH_ERRORS,
    Messages,
    PageLowering,
    TaskStart,
    fast_path_supported,
    message_record,
)
from murmur_nb._hooks.results import Capture, HookInfo, HookResult, outcome
from murmur_nb._hooks.runtime import NO_GC_HINT, Runtime, close_whole
from murmur_nb._hooks.signatures import (
    EXPECTED_EXPORTS,
    HANDLERS,
    READ_INTERFACE,
    check_imports,
    clock_imports,
    signature,
)
from murmur_nb._rules import LONE_SURROGATE, NotReadable, read_bounded

if TYPE_CHECKING:
    from wasmtime import Store
    from wasmtime.component import Component, ExportIndex

__all__ = [
    "HOOK_WORLD",
    "HookHost",
    "HookInfo",
    "HookResult",
    "build_demo_hook",
    "build_python_hook",
    "chosen_hooks",
    "wit_dir",
]

FUNCS = {"task-start": "on-task-start", "compact": "on-compact"}
#: what a call reads: its context id (``None``: no record) and its ``as_of`` (``None``: all)
Scope = tuple[str | None, int | None]
#: wasmtime's words for a proposal the engine has switched off (see :data:`NO_GC_HINT`).
NEEDS_OFF_FEATURE = re.compile(r"not supported without the [a-z ]+ feature|proposal not enabled")
FUEL_UNLIMITED = (1 << 63) - 1
#: The first bytes of every WebAssembly binary, component or core module.
WASM_MAGIC = b"\0asm"


@dataclass
class Loaded:
    info: HookInfo
    component: Component | None = None
    funcs: dict[str, ExportIndex] = field(default_factory=dict)
    data: bytes = b""  # the component's bytes as loaded: SHA-256 ``info.digest``


def _not_a_message(item: Any) -> str | None:
    """Why ``item`` cannot be offered to ``compact`` as a message, or ``None``. (Asked of
    every message of every replayed window: the usual answer comes first, in one test.)"""
    if (
        isinstance(item, Message)
        and isinstance(item.id, str) and isinstance(item.role, str)
        and isinstance(item.content, str)
        and (item.name is None or isinstance(item.name, str))
        and (item.created_at is None or isinstance(item.created_at, str))
    ):  # fmt: skip
        return None  # text with a lone surrogate: :func:`_unencodable`, asked after
    if not isinstance(item, Message):
        return f"is a {type(item).__name__}"
    for name in ("id", "role", "content", "name", "created_at"):
        value = getattr(item, name)
        if not isinstance(value, str) and not (value is None and name in {"name", "created_at"}):
            return f"has {name}={value!r}, a {type(value).__name__}"
    return None


def _unencodable(item: Message) -> str | None:
    """The first field of ``item`` (of the right types) holding a lone surrogate, shown with
    where, or ``None``. ``str.isascii`` is a flag lookup, so ASCII text costs no scan."""
    for name in ("id", "role", "content", "name", "created_at"):
        value = getattr(item, name)
        if value is not None and not value.isascii():
            found = LONE_SURROGATE.search(value)
            if found is not None:
                return f"{name} holds {found.group()!r} at index {found.start()}"
    return None


def check_text(value: object, argument: str) -> str:
    """``value`` when it is text a hook can be given (a WIT string: ``str`` with a UTF-8
    form), else raise naming ``argument``; no hook has run then."""
    if not isinstance(value, str):
        raise TypeError(
            f"{argument} must be text (str), got {value!r} ({type(value).__name__}); no hook "
            f"ran. Pass the id as the runtime reported it, e.g. {argument}=str(...)"
        )
    if not value.isascii() and (found := LONE_SURROGATE.search(value)) is not None:
        raise ValueError(
            f"{argument} holds a lone surrogate {found.group()!r} at index {found.start()}, "
            "which has no UTF-8 form, so no hook can be given it; no hook ran. Decode the "
            "bytes it came from with errors='replace' (or drop the character)"
        )
    return value


def chosen_hooks(known: Collection[str], hooks: Collection[str] | str | None) -> tuple[str, ...]:
    """The hook ids a call runs: every one of ``known`` for ``None``, else those ``hooks``
    names, in its order (a ``str`` is one id, never a set of letters).

    One rule for every caller that takes ``hooks=`` (``task_start``, ``compact``,
    ``component_bytes``, a replay), so a misspelt id is an error wherever it is given.

    Raises
    ------
    HookError
        ``unknown_hook``: an id ``known`` does not hold; the message names the known ones.
    TypeError
        ``hooks`` is not a hook id, a collection of them, or ``None``.
    """
    if hooks is None:
        return tuple(known)
    if isinstance(hooks, str):
        wanted: tuple[Any, ...] = (hooks,)
    elif isinstance(hooks, Collection) and not isinstance(hooks, bytes):
        wanted = tuple(hooks)
    else:
        wanted = (None,)
    if not all(isinstance(h, str) for h in wanted):
        raise TypeError(
            f"hooks= takes a hook id or a list of them (str), got {hooks!r}; e.g. "
            f"hooks={next(iter(known), 'summarize')!r}"
        )
    unknown = [h for h in wanted if h not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise HookError(
            f"no hook {', '.join(map(repr, unknown))} in this HookHost; it has "
            f"{', '.join(known) or 'none'} (ids from murmur.yaml's hooks:){hint}",
            code="unknown_hook",
        )
    return wanted


def compact_items(messages: object) -> list[Message]:
    """``compact``'s ``messages`` as a list, each item checked (types, then text with a UTF-8
    form), else raise naming the item and the fix; no hook has run then."""
    if (
        isinstance(messages, Message)
        or not isinstance(messages, Iterable)
        or isinstance(messages, str | bytes | Mapping)
    ):
        one = " (one Message: pass [message])" if isinstance(messages, Message) else ""
        raise TypeError(
            f"compact() takes a list of mnb.Message as messages, got {_shown(messages)} "
            f"({type(messages).__name__}){one}; no hook ran. Read them with "
            "mnb.ConversationStore(home).reader(context_id).read_messages(...)"
        )
    items = list(messages)
    for i, item in enumerate(items):
        if (why := _not_a_message(item)) is not None:
            raise TypeError(
                f"compact() takes mnb.Message objects, but messages[{i}] {why}; no hook "
                "ran. Build them with mnb.Message(id, role, content, name=None, "
                "created_at=None), all text, or read them with "
                "mnb.ConversationStore(home).reader(context_id).read_messages(...)"
            )
        if (bad := _unencodable(item)) is not None:
            raise ValueError(
                f"messages[{i}].{bad}, a lone surrogate with no UTF-8 form, so no hook can "
                "be given it; no hook ran. Decode the bytes the text came from with "
                "errors='replace' (or drop the character)"
            )
    return items


def reader_source(conversations: object) -> ReaderSource:
    """What serves ``read-messages``: a store as given, a home folder's store, or the
    default home's; anything else is refused when the host is made, not at its first call."""
    if conversations is None:
        return ConversationStore()
    if isinstance(conversations, str | os.PathLike):
        return ConversationStore(conversations)
    if not callable(getattr(conversations, "reader", None)):
        raise TypeError(
            f"conversations= takes a ConversationStore or a murmur home folder, got "
            f"{type(conversations).__name__} {_shown(conversations)}; pass "
            "conversations=mnb.ConversationStore(home) or the home's path"
        )
    return cast(ReaderSource, conversations)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def record_message(record: dict[str, Any]) -> Message:
    """A lifted ``message`` record (keys are the WIT field names) as a :class:`Message`."""
    return Message(
        id=record["id"],
        role=record["role"],
        content=record["content"],
        name=record["name"],
        created_at=record["created-at"],
    )


def failed(info: HookInfo, error: str, code: str = "load_failed") -> Loaded:
    return Loaded(dataclasses.replace(info, load_error=error, load_code=code))


class HookHost:
    """Hosts the hook components ``murmur.yaml`` names and dispatches lifecycle events.

    Parameters
    ----------
    config : HookConfig
        Validated hook configuration (see :meth:`from_config`, which takes a path).
    conversations : ConversationStore, str or path-like, optional
        Serves ``read-messages``: the same reader the Python API uses, so cursors and errors
        are the same. A murmur home folder is read through a ``ConversationStore`` of it.
        Defaults to the store of ``$MURMUR_HOME`` (else ``~/.murmur``).
    fast_lowering : bool
        Write pages straight into wasmtime's C values (the default, and only with the wasmtime
        versions it was tested against); ``False`` uses wasmtime-py's public conversion,
        about three times slower for a full page.

    Examples
    --------
    >>> hooks = HookHost.from_config("murmur.yaml", conversations=store)  # doctest: +SKIP
    >>> hooks.task_start(task_id="t1", context_id="ctx-1")["summarize"].value  # doctest: +SKIP
    """

    def __init__(
        self,
        config: HookConfig,
        *,
        conversations: ReaderSource | str | os.PathLike[str] | None = None,
        fast_lowering: bool = True,
    ) -> None:
        if not isinstance(config, HookConfig):
            raise TypeError(
                f"HookHost takes a loaded HookConfig, not {_shown(config)}; to load a "
                "murmur.yaml use HookHost.from_config(path)"
            )
        self._config = config
        self._conversations: ReaderSource = reader_source(conversations)
        self.runtime = Runtime.get()
        self._context_id: str | None = None  # the current task's: compact's default record
        self._closed = False
        lowering: PageLowering | None = None
        if fast_lowering and fast_path_supported():
            try:
                lowering = PageLowering()
            except FAST_PATH_ERRORS:  # a wasmtime-py whose private ctypes layer differs
                lowering = None
        self._linked = make_linker(self.runtime.engine, HostFunctions(self), lowering)
        self.lowering = self._linked.lowering
        self.runtime.hosts.add(self)
        self._hooks: dict[str, Loaded] = {}
        where = str(config.path) if config.path is not None else "murmur.yaml"
        for entry in config.hooks:
            for note in entry.notes:
                warnings.warn(f"{where}: {note} (hook {entry.id!r} loads and runs without "
                              "that grant)", HookConfigWarning, stacklevel=2)  # fmt: skip
            self._hooks[entry.id] = self._load(entry)
        if any(loaded.info.read_granted for loaded in self._hooks.values()):
            # read-messages indexes records with numpy: imported here (80 ms cold), not inside
            # the time limit of a hook's first read
            import numpy  # noqa: F401, PLC0415

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str],
        *,
        conversations: ReaderSource | str | os.PathLike[str] | None = None,
    ) -> HookHost:
        """Load ``murmur.yaml`` and every hook it names.

        A hook whose component cannot be loaded is kept, with its ``load_error``; the others
        load. A configuration error raises :class:`HookConfigError`. ``conversations`` is a
        :class:`ConversationStore` or a murmur home folder (see the class).
        """
        return cls(load_hook_config(Path(path)), conversations=conversations)

    # ----------------------------------------------------------------- loading

    def _load(self, entry: HookEntry) -> Loaded:

        info = HookInfo(
            id=entry.id,
            component=entry.component,
            events=entry.events,
            read_granted=entry.read_granted,
            limits=entry.limits,
            notes=entry.notes,
        )
        if (absent := _no_file(entry.component)) is not None:
            return failed(info, absent)
        compiled = self._compiled(entry, info)
        if isinstance(compiled, Loaded):
            return compiled
        loaded, data = compiled
        info = dataclasses.replace(info, digest=loaded.digest, loaded_from=loaded.source)
        component = loaded.component
        handlers = component.get_export_index(HANDLERS)
        funcs: dict[str, ExportIndex] = {}
        missing = []
        for event in entry.events:
            index = (
                component.get_export_index(FUNCS[event], handlers) if handlers is not None else None
            )
            if index is None:
                missing.append(FUNCS[event])
            else:
                funcs[event] = index
        if missing:
            return failed(
                info,
                f"{entry.component} does not export {', '.join(missing)} from {HANDLERS}; "
                f"build it against the `{HOOK_WORLD}` world in {wit_dir()} or drop those events",
            )
        mismatch = check_imports(component, self.runtime.engine)
        if mismatch is not None:
            return failed(info, f"{entry.component} {mismatch}", "link_error")
        self._linked.shadow_clock(clock_imports(component, self.runtime.engine))
        probe = self._instantiate_probe(component, entry.limits, funcs)
        if probe is not None:
            return failed(info, *probe)
        return Loaded(info, component, funcs, data)

    def _compiled(  # noqa: PLR0911 - one refusal per failure, each with its own message
        self, entry: HookEntry, info: HookInfo
    ) -> tuple[LoadedComponent, bytes] | Loaded:
        """The compiled component and the bytes it was compiled from (read once, before: a
        file that changed meanwhile fails the load), or the failed :class:`Loaded`."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use

        bounds = self._config.compile_bounds
        try:
            data = read_bounded(entry.component, bounds.megabytes << 20)
            if not data.startswith(WASM_MAGIC):
                return failed(
                    info,
                    f"{entry.component} is not a WebAssembly binary (it does not start with "
                    "\\0asm; a .wat text or another file?); build the hook to a .wasm "
                    "component (wasm-tools parse turns .wat text into one) and point "
                    "`component:` at it",
                )
            loaded = self.runtime.cache.load(entry.component, rewrite=_bounded(entry),
                                             bounds=bounds)  # fmt: skip
        except NotReadable as exc:
            return failed(
                info,
                f"{entry.component} cannot be loaded: {exc}; point `component:` in murmur.yaml "
                "at the hook's .wasm file (at most what its compile may use, "
                f"$MURMUR_NB_HOOK_COMPILE_MB: {bounds.megabytes:,} MiB)",
            )
        except Unbounded as exc:
            return failed(
                info,
                f"{entry.component} cannot run `compact`: its on-compact result cannot be "
                f"bounded before wasmtime copies it out ({exc}); build it with "
                "componentize-py or componentize-js, or drop `compact` from its events",
            )
        except TooCostly as exc:
            return failed(info, f"{entry.component} is refused: {exc}")
        except CompileFailed as exc:
            return failed(info, f"{entry.component} could not be compiled: {exc}")
        except (OSError, WasmtimeError) as exc:
            why = reason(str(exc))
            hint = f"; {NO_GC_HINT}" if NEEDS_OFF_FEATURE.search(why) else ""
            return failed(
                info, f"{entry.component} is not a loadable WebAssembly component: {why}{hint}"
            )
        if hashlib.sha256(data).hexdigest() != loaded.digest:
            return failed(
                info, f"{entry.component} changed while it was being loaded; load the hooks again"
            )
        return loaded, data

    def _instantiate_probe(
        self, component: Component, limits: HookLimits, funcs: dict[str, ExportIndex]
    ) -> tuple[str, str] | None:
        """Instantiate once, so export signatures, WASI imports and limits fail at load time."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use

        with self.runtime.call_lock:
            # no call runs here for a chunk's callback to ask about: armed whole
            store, ticks = self._new_store(limits, Capture(), Capture(), chunked=False)
            try:
                with self.runtime.ticker.running(ticks):
                    instance = self._linked.linker.instantiate(store, component)
                for event, index in funcs.items():
                    func = instance.get_func(store, index)
                    found = signature(func.type(store)) if func is not None else "not a function"
                    if found != EXPECTED_EXPORTS[event]:
                        return (
                            f"{FUNCS[event]} has the signature {found}, but the "
                            f"`{HOOK_WORLD}` world wants {EXPECTED_EXPORTS[event]}; rebuild the "
                            f"hook against the WIT folder in {wit_dir()}",
                            "link_error",
                        )
            except WasmtimeError as exc:
                code = classify(str(exc))
                if code != "trap":
                    return "cannot instantiate: " + explain(code, str(exc), limits), code
                return (
                    f"cannot instantiate: {reason(str(exc))}. Hooks get WASI without files, "
                    f"environment or network, and {READ_INTERFACE}; nothing else is linked",
                    "link_error",
                )
            finally:
                close_whole(store)
        return None

    # ----------------------------------------------------------------- public API

    @property
    def hooks(self) -> dict[str, HookInfo]:
        """Every configured hook by id: component path, events, grant, limits, load error."""
        return {hook_id: loaded.info for hook_id, loaded in self._hooks.items()}

    @property
    def config(self) -> HookConfig:
        return self._config

    def component_bytes(self, hook_id: str) -> bytes | None:
        """The bytes of ``hook_id``'s component exactly as this host loaded them.

        Their SHA-256 is ``hooks[hook_id].digest``; the file changing on disk since does not
        change them (:func:`murmur_nb.replay` with ``client=`` ships these to the workers).
        ``None`` when the hook did not load.

        Raises
        ------
        HookError
            ``unknown_hook``: no hook ``hook_id``; or the host is closed.
        """
        self._check_open()
        (hook_id,) = chosen_hooks(self._hooks, check_text(hook_id, "hook_id"))
        loaded = self._hooks[hook_id]
        return loaded.data if loaded.component is not None else None

    @property
    def conversations(self) -> Any:
        """The store that serves ``read-messages`` (the one the Python API reads too)."""
        return self._conversations

    @property
    def context_id(self) -> str | None:
        """The ``context-id`` of the current task (``None`` before the first task)."""
        return self._context_id

    def task_start(
        self,
        *,
        task_id: str,
        context_id: str,
        hooks: Collection[str] | None = None,
        as_of: int | None = None,
    ) -> dict[str, HookResult]:
        """Dispatch ``on-task-start`` to every hook subscribed to ``task-start``.

        ``hooks`` limits the call to those hook ids (default: every hook; a ``str`` is one
        id). Reads during this call are scoped to ``context_id``'s record, whatever another
        thread starts meanwhile; it also becomes the current task's record, which ``compact``
        reads when given no ``context_id``, until the next task starts. With ``as_of`` the
        reads see the record as it stood when it held its first ``as_of`` messages
        (:meth:`ConversationStore.reader <murmur_nb.ConversationStore.reader>`).

        Raises
        ------
        InvalidContextId
            ``context_id`` is not a plain context name; no hook ran.
        TypeError, ValueError
            ``task_id`` is not text, or holds a lone surrogate (no UTF-8 form); no hook ran.
        HookError
            ``unknown_hook``: ``hooks`` names a hook this host does not have; no hook ran.
        """
        check_text(task_id, "task_id")
        check_context_id(context_id)
        check_as_of(as_of)
        chosen = self._chosen(hooks)
        self._context_id = context_id

        def make_args() -> tuple[Any, ...]:
            if self.lowering is not None:  # written straight into wasmtime's C values
                return (TaskStart(task_id, context_id),)
            event: Any = self.runtime.Record()
            setattr(event, "task-id", task_id)
            setattr(event, "context-id", context_id)
            return (event,)

        return self._dispatch("task-start", make_args, lift_note, chosen, (context_id, as_of))

    def compact(
        self,
        messages: Sequence[Message],
        *,
        hooks: Collection[str] | None = None,
        context_id: str | None = None,
        as_of: int | None = None,
    ) -> dict[str, HookResult]:
        """Dispatch ``on-compact``; each ``ok`` value is the list of messages that hook keeps.

        ``hooks`` limits the call to those hook ids (default: every hook; a ``str`` is one
        id). Reads a hook makes
        during compaction are scoped to ``context_id``'s record; without it, to the current
        task's record as this call starts (an empty page before the first task). Pass
        ``context_id`` when several threads drive one host: the current task is the host's,
        the ``context_id`` of a call is that call's. With ``as_of`` the reads see the
        record as it stood when it held its first ``as_of`` messages: a replay offering the
        record's first ``as_of`` messages passes it, so the hook cannot read what came after.

        Raises
        ------
        InvalidContextId
            ``context_id`` is not a plain context name; no hook ran.
        TypeError
            ``messages`` is not a sequence of :class:`~murmur_nb.Message`; no hook ran.
        ValueError
            A message's text holds a lone surrogate (no UTF-8 form); no hook ran.
        HookError
            ``unknown_hook``: ``hooks`` names a hook this host does not have; no hook ran.
        """
        if context_id is not None:
            check_context_id(context_id)
        check_as_of(as_of)
        items = compact_items(messages)
        chosen = self._chosen(hooks)
        context = context_id if context_id is not None else self._context_id

        def make_args() -> tuple[Any, ...]:
            if self.lowering is not None:  # written straight into wasmtime's C values
                return (Messages(items),)
            return ([message_record(m) for m in items],)

        return self._dispatch("compact", make_args, lift_messages, chosen, (context, as_of))

    def close(self) -> None:
        """Release the compiled components and the linker; the host cannot dispatch afterwards.

        Safe to call twice. A host never closed is released when it is collected, or at
        interpreter exit (with every store and the engine, in that order).
        """
        with self.runtime.call_lock:
            self._closed = True
            self._hooks = {k: Loaded(v.info) for k, v in self._hooks.items()}
            close_whole(self._linked.linker)

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

    def _reader_for(self, info: HookInfo, scope: Scope) -> Reader:
        """The reader for one call: its record (as of its first ``as_of`` messages, when
        given), or none (SPEC §3)."""
        context_id, as_of = scope
        context = None if self._config.transport == "process" else context_id
        if as_of is None:  # a source of the caller's own need not know as_of
            reader: Reader = self._conversations.reader(context, granted=info.read_granted)
            return reader
        source: Any = self._conversations
        bounded: Reader = source.reader(context, granted=info.read_granted, as_of=as_of)
        return bounded

    def _check_open(self) -> None:
        if self._closed:
            raise HookError("this HookHost is closed; create a new one with HookHost.from_config")

    def _chosen(self, hooks: Collection[str] | str | None) -> frozenset[str]:
        """The ids a call runs (:func:`chosen_hooks`), on an open host; raises before any
        hook runs."""
        self._check_open()
        return frozenset(chosen_hooks(self._hooks, hooks))

    def _dispatch(
        self,
        event: str,
        make_args: Callable[[], tuple[Any, ...]],
        lift: Callable[[Any], Any],
        only: frozenset[str],
        scope: Scope,
    ) -> dict[str, HookResult]:
        """``event`` to each subscribed hook of ``only``, each reading the record ``scope``
        names (``(context_id, as_of)``)."""
        self._check_open()
        results: dict[str, HookResult] = {}
        for hook_id, loaded in self._hooks.items():
            info = loaded.info
            if event not in info.events or hook_id not in only:
                continue
            if loaded.component is None:
                code = info.load_code or "load_failed"
                results[hook_id] = HookResult(
                    hook_id, event, ok=False, error=info.load_error, code=code
                )
                continue
            results[hook_id] = self._call(loaded, event, make_args(), lift, scope)
        return results

    def _new_store(
        self, limits: HookLimits, out: Capture, err: Capture, started: float | None = None,
        *, chunked: bool = True,
    ) -> tuple[Store, int]:
        """A fresh store for one call, and the ticks from the current epoch that stop it (its
        deadline, or with ``chunked`` a long limit's first chunk: :mod:`.epochs`).

        The deadline counts from ``started`` (``time.monotonic()``, default now): the caller
        measures the call's duration from the same instant, so time lost before the guest
        runs (a preempted thread, the GIL held elsewhere) is the guest's, never taken from it.
        """
        runtime = self.runtime
        store: Store = runtime.Store(runtime.engine)
        runtime.stores.add(store)  # closed by the caller; at exit by the runtime if not
        # Only wasmtime-py's handle table keeps these callbacks, until wasmtime releases the
        # streams: the runtime's weak set tells it when that has happened.
        write_out, write_err = out.write, err.write
        runtime.outputs.update((write_out, write_err))
        wasi = runtime.WasiConfig()
        wasi.stdout_custom = write_out
        wasi.stderr_custom = write_err
        store.set_wasi(wasi)
        store.set_limits(
            memory_size=limits.memory_bytes_each,
            table_elements=limits.table_elements,
            instances=limits.instances,
            tables=limits.tables,
            memories=limits.memories,
        )
        store.set_fuel(limits.fuel if limits.fuel is not None else FUEL_UNLIMITED)
        now = time.monotonic() if started is None else started
        ticks = runtime.ticker.deadline(limits.time_ms, now)  # relative to the epoch now
        if not chunked or runtime.chunks is None:
            store.set_epoch_deadline(ticks)
            return store, ticks
        return store, runtime.chunks.arm(store, ticks)  # a long limit: one chunk at a time

    def _call(
        self,
        loaded: Loaded,
        event: str,
        args: tuple[Any, ...],
        lift: Callable[[Any], Any],
        scope: Scope,
    ) -> HookResult:
        """One call within its time limit, counted from now: waiting for the engine included.

        Calls share one engine and run one at a time (see :mod:`murmur_nb._hooks.runtime`). A call
        that waits for another hook's call spends its own time limit waiting, so no hook can
        hold another past that hook's limit: a call that could not start in time ends with
        ``deadline_exceeded`` and nothing of it ran.
        """
        queued = time.monotonic()
        if not self.runtime.call_lock.acquire(timeout=loaded.info.limits.time_ms / 1000):
            waited = (time.monotonic() - queued) * 1000
            return HookResult(
                loaded.info.id, event, False,
                error=f"hook {loaded.info.id!r} waited its whole time limit "
                f"({loaded.info.limits.time_ms} ms) for another hook's call to end; it did not "
                "run. Raise limits.time_ms for this hook in murmur.yaml, or lower the other's",
                code="deadline_exceeded", duration_ms=waited,
            )  # fmt: skip
        try:
            return self._call_started(loaded, event, args, lift, queued, scope=scope)
        finally:
            self.runtime.call_lock.release()

    def _call_started(
        self,
        loaded: Loaded,
        event: str,
        args: tuple[Any, ...],
        lift: Callable[[Any], Any],
        queued: float,
        *,
        scope: Scope,
    ) -> HookResult:
        """The call itself, with the engine's call lock held (taken by :meth:`_call`)."""
        info = loaded.info
        waited_ms = (time.monotonic() - queued) * 1000
        limits = info.limits
        if waited_ms >= 1:  # what is left of this call's limit after waiting for the engine
            limits = limits.model_copy(update={"time_ms": max(1, int(limits.time_ms - waited_ms))})
        out, err = Capture(), Capture()
        started = time.monotonic()
        reader = self._reader_for(info, scope)
        call = HookCall(
            reader, deadline=started + limits.time_ms / 1000, memory_bytes=limits.memory_mib << 20
        )
        store, ticks = self._new_store(limits, out, err, started)
        token = CURRENT_CALL.set(call)  # what the host functions serve, on this thread only
        try:
            raw, failure, code = self._run(store, ticks, loaded, event, args=args, call=call)
        finally:
            CURRENT_CALL.reset(token)
            duration = (time.monotonic() - started) * 1000 + waited_ms
        interrupted = self.runtime.ticker.interrupted
        fuel_used = self._fuel_used(store, limits)
        close_whole(store)  # here, on this thread: see "Teardown" in the runtime module
        if interrupted or isinstance(call.host_failure, KeyboardInterrupt):
            raise KeyboardInterrupt(f"hook {info.id!r} interrupted during {event}")
        if call.host_failure is not None:
            code = "host_error"
            failure = (
                f"the host's read-messages failed while serving hook {info.id!r}: "
                f"{type(call.host_failure).__name__}: {call.host_failure}"
            )

        make = functools.partial(
            HookResult,
            info.id,
            event,
            stdout=out.text(),
            stderr=err.text(),
            duration_ms=duration,
            fuel_used=fuel_used,
        )
        return outcome(make, (raw, failure, code), info.limits, lift, err.text())

    def _run(
        self,
        store: Store,
        ticks: int,
        loaded: Loaded,
        event: str,
        *,
        args: tuple[Any, ...],
        call: HookCall,
    ) -> tuple[Any, str | None, str | None]:
        """Instantiate and call: ``(raw result, failure text, code)``."""
        ticker = self.runtime.ticker
        limits = loaded.info.limits
        budget = Budget(
            max_messages=limits.result_messages,
            max_bytes=limits.result_mib << 20,
            deadline=call.deadline,
            interrupted=lambda: ticker.interrupted,
        )
        stage = f"instantiating hook {loaded.info.id!r}"
        try:
            with ticker.running(ticks):
                instance = self._linked.linker.instantiate(store, loaded.component)
                func = instance.get_func(store, loaded.funcs[event])
                assert func is not None
                stage = (
                    f"passing hook {loaded.info.id!r} the arguments of {FUNCS[event]}, or "
                    "taking its result"
                )
                if self.lowering is not None:
                    raw = call_and_lift(func, store, args, budget, self.lowering)
                else:  # no tested private layer: the binding lifts, the sizes are checked after
                    raw = public_lift(func(store, *args), budget)
                stage = f"ending the {FUNCS[event]} call of hook {loaded.info.id!r} (post-return)"
                func.post_return(store)
            if event == "compact" and not raw[0] and (count := refused_count(raw[1])) is not None:
                why = too_many(count, budget.max_messages) + " (counted in the guest: none copied)"
                return None, why, "result_too_large"
        except self.runtime.WasmtimeError as exc:
            # wasmtime-py's enter_wasm holds this error in a frame of its own traceback: cut
            # the cycle so the call's frames go now, not at some later collection.
            exc.__traceback__ = None
            return None, str(exc), "deadline_exceeded" if call.deadline_hit else classify(str(exc))
        except LiftStopped as exc:
            return None, str(exc), exc.code
        except Exception as exc:
            if call.host_failure is not None:  # the binding's, after read-messages failed
                return None, None, None
            # outside any read: the host's own step, named by where it failed
            failure = f"the host failed while {stage}: {type(exc).__name__}: {exc}"
            return None, failure, "host_error"
        return raw, None, None

    def _fuel_used(self, store: Store, limits: HookLimits) -> int:
        start = limits.fuel if limits.fuel is not None else FUEL_UNLIMITED
        try:
            return start - store.get_fuel()
        except self.runtime.WasmtimeError:
            return 0


def _no_file(component: Path) -> str | None:
    """Why there is no component file at ``component`` to read, or ``None``."""
    if component.is_dir():
        return (
            f"component {component} is a folder, not a component file; point `component:` "
            "in murmur.yaml at the hook's .wasm file"
        )
    if component.exists() and not component.is_file():
        return (
            f"component {component} is not a regular file (a FIFO, a device or a socket); "
            "point `component:` in murmur.yaml at the hook's .wasm file"
        )
    if not component.is_file():
        return (
            f"component file {component} does not exist; build the hook "
            "(mnb.build_python_hook) or fix `component:` in murmur.yaml"
        )
    return None


def _bounded(entry: HookEntry) -> Rewrite | None:
    """A hook that runs ``compact`` is compiled with its result bounded in the guest."""
    return rewrite_for(entry.limits.result_messages) if "compact" in entry.events else None


def lift_note(value: Any) -> str:
    return str(value)


def lift_messages(value: Any) -> list[Message]:
    return [record_message(r) for r in value]
