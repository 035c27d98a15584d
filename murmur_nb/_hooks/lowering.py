"""Lowering ``read-messages`` pages into wasmtime values for hook calls.

:class:`PageLowering` writes pages straight into wasmtime's C values: 1.8 ms for a 100-message
page against 73 ms through the public binding. It is the only module on wasmtime-py's private
API (``wasmtime._ffi``, struct layouts), where a layout change could write through wrong
offsets without raising, so it runs only on :data:`TESTED_WASMTIME` (``[tool.murmur-nb]
fast-lowering-wasmtime`` in ``pyproject.toml``); otherwise, or on :data:`FAST_PATH_ERRORS`,
:func:`message_record` builds the same values with the public binding. The untyped callback
still checks the count and kinds of its arguments; the world's signature is checked at load
(:mod:`murmur_nb._hooks.signatures`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FAST_PATH_ERRORS",
    "Messages",
    "TEMPLATE_MAX",
    "TESTED_WASMTIME",
    "PageLowering",
    "TaskStart",
    "add_fast_read",
    "fast_path_supported",
    "message_record",
]

#: The longest list kept as a template (a full ``read-messages`` page): templates for every
#: length up to it hold at most 5,050 message records.
TEMPLATE_MAX = 100

#: The wasmtime versions the fast path was tested against (``pyproject.toml`` says the same).
TESTED_WASMTIME = ">=50,<52"

#: What a missing or changed private wasmtime-py API (``wasmtime._ffi``) raises while the fast
#: ``read-messages`` path is set up; any of them means: use the binding's public conversion.
FAST_PATH_ERRORS = (ImportError, AttributeError, TypeError, ValueError, ctypes.ArgumentError)


def fast_path_supported(version: str | None = None) -> bool:
    """Whether wasmtime ``version`` (default: the installed one) is in :data:`TESTED_WASMTIME`."""
    from importlib.metadata import version as installed  # noqa: PLC0415

    from packaging.specifiers import SpecifierSet  # noqa: PLC0415
    from packaging.version import InvalidVersion, Version  # noqa: PLC0415

    try:
        found = Version(version if version is not None else installed("wasmtime"))
    except InvalidVersion:
        return False
    return found in SpecifierSet(TESTED_WASMTIME)


class PageLowering:
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
        self._event = self._record_template(
            [("task-id", self.k_string), ("context-id", self.k_string)]
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
        # Build the page record in its own scratch value, fill it, then box it.
        self._page_val.kind = self.k_record
        page_addr = self._page_addr
        self.record_copy(page_addr + of, ctypes.addressof(self._page))
        entries = c_void_p.from_address(page_addr + of + 8).value or 0
        self._fill_list(entries + entry_val_of, messages, self._list_template(len(messages)))
        if cursor is not None:
            boxed = self._boxed_string(cursor)
            c_void_p.from_address(entries + entry_size + entry_val_of).value = boxed
        ctypes.c_uint32.from_address(entries + 2 * entry_size + entry_val_of).value = total
        self._write_result(results, ok=True, boxed=self.val_new(page_addr))

    def write_messages(self, addr: int, messages: Sequence[Any]) -> None:
        """Write ``messages`` as a ``list<message>`` into the C value at ``addr``.

        The ``on-compact`` argument: 10,000 messages take the public binding seconds, which
        count against the hook's own time limit; written here they take milliseconds. A list
        of at most :data:`TEMPLATE_MAX` messages is copied from the page templates in one C
        call (a quarter less time for a 100-message window, issue 41); a longer one is made
        for its length and not kept.
        """
        ctypes = self._ctypes
        n = len(messages)
        ctypes.memset(addr, self.k_list, 1)
        if n <= TEMPLATE_MAX:
            self._fill_list(addr + self.of, messages, self._list_template(n))
            return
        fresh = self._ffi.wasmtime_component_vallist_t()
        self._ffi.wasmtime_component_vallist_new_uninit(ctypes.byref(fresh), n)
        base = ctypes.cast(fresh.data, ctypes.c_void_p).value or 0
        message = ctypes.addressof(self._message)
        for i in range(n):
            ctypes.memset(base + i * self.val_size, self.k_record, 1)
            self.record_copy(base + i * self.val_size + self.of, message)
        # the fresh list's (size, data) pair moves into the value as it is: no copy
        ctypes.memmove(addr + self.of, ctypes.addressof(fresh), ctypes.sizeof(fresh))
        self._fill(addr + self.of, messages)

    def write_event(self, addr: int, event: TaskStart) -> None:
        """Write ``event`` as a ``task-start-event`` record into the C value at ``addr``: one
        copy of the template and two strings, where the binding looks up the record type's
        fields through the C API on every call (about 40 µs)."""
        ctypes = self._ctypes
        ctypes.memset(addr, self.k_record, 1)
        self.record_copy(addr + self.of, ctypes.addressof(self._event))
        entries = ctypes.c_void_p.from_address(addr + self.of + 8).value or 0
        for at, text in ((0, event.task_id), (self.entry_size, event.context_id)):
            raw = text.encode("utf-8")
            self.byte_vec_new(entries + at + self.entry_val_of, len(raw), raw)

    def _fill_list(self, list_addr: int, messages: Sequence[Any], template: Any) -> None:
        self.list_copy(list_addr, self._ctypes.addressof(template))
        self._fill(list_addr, messages)

    def _fill(self, list_addr: int, messages: Sequence[Any]) -> None:
        """Write each message's strings into the records of the list at ``list_addr``."""
        ctypes = self._ctypes
        of, entry_size, entry_val_of = self.of, self.entry_size, self.entry_val_of
        byte_vec_new = self.byte_vec_new
        boxed_string = self._boxed_string
        n = len(messages)
        data = ctypes.c_void_p.from_address(list_addr + 8).value or 0
        # One view over the list's values; each value's record data pointer sits at
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
            raw = message.content.encode("utf-8")
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

    def _write_result(self, results: Any, *, ok: bool, boxed: int) -> None:
        ctypes = self._ctypes
        addr = ctypes.cast(results, ctypes.c_void_p).value or 0
        ctypes.memset(addr, self.k_result, 1)
        ctypes.c_bool.from_address(addr + self.of).value = ok
        ctypes.c_void_p.from_address(addr + self.of + self.result_val).value = boxed


@dataclass(frozen=True)
class Messages:
    """An ``on-compact`` argument the call writes with :meth:`PageLowering.write_messages`."""

    items: Sequence[Any]


@dataclass(frozen=True)
class TaskStart:
    """An ``on-task-start`` argument the call writes with :meth:`PageLowering.write_event`."""

    task_id: str
    context_id: str


def message_record(message: Any) -> Any:
    from wasmtime.component import Record  # noqa: PLC0415 - wasmtime loads on first use

    record: Any = Record()
    record.id = message.id
    record.role = message.role
    record.content = message.content
    record.name = message.name
    created = message.created_at
    setattr(record, "created-at", None if created is None else _timestamp(created))
    return record


def _timestamp(value: Any) -> str:
    if isinstance(value, str):
        return value
    iso = getattr(value, "isoformat", None)
    if callable(iso):
        return str(iso()).replace("+00:00", "Z")
    return str(value)


#: One C finalizer for every fast ``read-messages``, alive for the whole process: wasmtime
#: calls it when a linker is freed, whatever order a host's attributes are released in.
FINALIZER: list[Any] = []


def no_finalizer() -> Any:
    if not FINALIZER:
        FINALIZER.append(ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda data: None))
    return FINALIZER[0]


def add_fast_read(
    read: Any,
    lowering: PageLowering,
    serve: Callable[[str | None, int], Any],
    fail: Callable[[BaseException], None],
) -> tuple[Any, ...]:
    """Define ``read-messages`` on ``read`` with a ctypes callback that lowers pages directly.

    ``serve(cursor, limit)`` returns a page or the WIT error string; ``fail(exc)`` records a
    host failure. Returns the C callback the caller must keep alive as long as the linker.
    """
    from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use
    from wasmtime import _ffi as ffi  # noqa: PLC0415 - wasmtime loads on first use

    k_option, k_u32 = lowering.k_option, lowering.k_u32

    def callback(*raw: Any) -> int:
        # (data, context, func type, args, nargs, results, nresults)
        args, nargs, results, nresults = raw[3], raw[4], raw[5], raw[6]
        try:
            if nargs != 2 or nresults != 1 or (args[0].kind, args[1].kind) != (k_option, k_u32):
                raise TypeError(
                    "read-messages was called with a signature other than the world's "
                    f"({nargs} arguments, {nresults} results)"
                )
            cursor, limit = lowering.read_args(args)
            outcome = serve(cursor, limit)
            if isinstance(outcome, str):
                lowering.write_error(results, outcome)
            else:
                lowering.write_page(
                    results, outcome.messages, outcome.next_cursor, int(outcome.total)
                )
        except BaseException as exc:  # nothing may escape a C callback
            fail(exc)
            error = WasmtimeError(f"host function read-messages failed: {exc!r}")
            return ctypes.cast(error._consume(), ctypes.c_void_p).value or 0
        return 0

    c_callback = ffi.wasmtime_component_func_callback_t(callback)
    c_finalizer = no_finalizer()
    name = b"read-messages"
    error = ffi.wasmtime_component_linker_instance_add_func(
        read.ptr(), ctypes.create_string_buffer(name), len(name), c_callback, None, c_finalizer
    )
    if error:
        raise WasmtimeError._from_ptr(error)
    return (c_callback,)
