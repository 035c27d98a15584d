"""Calling a hook export and lifting its result within the call's limits.

wasmtime-py's ``Func.__call__`` builds the whole result in Python after the guest returned,
outside every limit (a 300,000-message result ran 13-20 s past a 300 ms limit). Here the same
C function is called and the result read from wasmtime's C values with bounds first: the
message count, then each string's size, the deadline and Ctrl-C checked every
:data:`CHECK_EVERY` values; past ``limits.result_messages`` or ``result_mib`` it is
``result_too_large`` before any Python object exists. wasmtime's own copy out of guest memory
(about 3 µs and 1.4 KiB per message) comes before all of this: the message count is checked
in the guest first (:mod:`.guest_code.bounding`), so that copy holds at most
``result_messages``. Each value's kind is checked against the world's type
(``invalid_output`` otherwise). Like :mod:`.lowering`, this uses ``wasmtime._ffi`` and is
pinned to the same tested versions.
"""

from __future__ import annotations

import ctypes
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from murmur_nb._hooks.lowering import Messages, PageLowering, TaskStart

__all__ = ["CHECK_EVERY", "Budget", "LiftStopped", "call_and_lift", "public_lift", "too_many"]

#: How many values are read between two looks at the deadline and the Ctrl-C flag.
CHECK_EVERY = 512

#: A string's or list's ``(size, data pointer)`` and a ``some`` box's pointer, as wasmtime's C
#: values hold them.
_WORDS = struct.Struct("@NP")

#: The record fields of ``message``, in the world's order.
MESSAGE_FIELDS = ("id", "role", "content", "name", "created-at")


class LiftStopped(Exception):
    """The result was refused while being lifted: ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Budget:
    """What lifting one result may spend: values, string bytes, time, and the Ctrl-C flag."""

    max_messages: int
    max_bytes: int
    deadline: float
    interrupted: Callable[[], bool]
    used_bytes: int = 0
    seen: int = 0

    def check(self) -> None:
        self.seen += 1
        if self.seen % CHECK_EVERY:
            return
        if self.interrupted():  # the caller raises KeyboardInterrupt once the store is closed
            raise LiftStopped("interrupted", "Ctrl-C arrived while its result was lifted")
        if time.monotonic() > self.deadline:
            raise LiftStopped(
                "deadline_exceeded",
                f"lifting its result ran past the time limit after {self.seen} values",
            )

    def take(self, size: int) -> None:
        self.used_bytes += size
        if self.used_bytes > self.max_bytes:
            raise LiftStopped(
                "result_too_large",
                f"its result holds more than {self.max_bytes} bytes of text",
            )


def too_many(count: int, bound: int) -> str:
    """Why a result of ``count`` messages was refused."""
    return f"its result holds {count} messages, more than the {bound} allowed"


def call_and_lift(
    func: Any, store: Any, args: tuple[Any, ...], budget: Budget, lowering: PageLowering
) -> tuple[bool, Any]:
    """Call ``func`` (a hook export) and lift its ``result<T, string>`` within ``budget``.

    A :class:`~murmur_nb._hooks.lowering.Messages` or
    :class:`~murmur_nb._hooks.lowering.TaskStart` argument is written by ``lowering``; any
    other goes through the binding's conversion. wasmtime checks every argument against the
    export's type before the guest runs.

    Returns ``(ok, payload)``: the ``err`` string, the ``ok`` string (``on-task-start``) or a
    list of message dicts keyed by the WIT field names (``on-compact``).

    Raises
    ------
    wasmtime.WasmtimeError
        The guest trapped or was stopped (the call itself).
    LiftStopped
        The result is too large (``result_too_large``), lifting it ran past the deadline
        (``deadline_exceeded``) or Ctrl-C arrived meanwhile (``interrupted``).
    ValueError
        The result is not of the world's shape.
    """
    from wasmtime import _ffi as ffi  # noqa: PLC0415 - wasmtime loads on first use
    from wasmtime.component._enter import enter_wasm  # noqa: PLC0415

    params = None  # the export's parameter types, read only for an argument the binding lowers
    c_args = (ffi.wasmtime_component_val_t * max(1, len(args)))()
    made = 0
    result = ffi.wasmtime_component_val_t()
    called = False
    try:
        for value in args:
            if isinstance(value, Messages):
                lowering.write_messages(ctypes.addressof(c_args[made]), value.items)
            elif isinstance(value, TaskStart):
                lowering.write_event(ctypes.addressof(c_args[made]), value)
            else:
                if params is None:
                    params = func.type(store).params
                    if len(params) != len(args):
                        raise ValueError(f"the export takes {len(params)} arguments")
                params[made][1].convert_to_c(store, value, ctypes.pointer(c_args[made]))
            made += 1

        def run() -> Any:
            return ffi.wasmtime_component_func_call(
                ctypes.byref(func._func), store._context(), c_args, made, ctypes.byref(result), 1
            )

        enter_wasm(run)
        called = True
        return lift_result(result, budget, ffi, lowering)
    finally:
        for i in range(made):
            ffi.wasmtime_component_val_delete(ctypes.byref(c_args[i]))
        if called:
            ffi.wasmtime_component_val_delete(ctypes.byref(result))


def lift_result(val: Any, budget: Budget, ffi: Any, layout: PageLowering) -> tuple[bool, Any]:
    if val.kind != ffi.WASMTIME_COMPONENT_RESULT.value:
        raise ValueError("the export did not return a result<_, string>")
    outcome = val.of.result
    inner = outcome.val.contents if outcome.val else None
    if inner is None:
        raise ValueError("the result has no payload")
    if not outcome.is_ok or inner.kind == ffi.WASMTIME_COMPONENT_STRING.value:
        return bool(outcome.is_ok), lift_string(inner, budget, ffi)
    return True, lift_messages(inner, budget, ffi, layout)


def lift_string(val: Any, budget: Budget, ffi: Any) -> str:
    if val.kind != ffi.WASMTIME_COMPONENT_STRING.value:
        raise ValueError("expected a string")
    vec = val.of.string
    budget.take(vec.size)
    return ctypes.string_at(vec.data, vec.size).decode("utf-8")


def lift_messages(
    val: Any, budget: Budget, ffi: Any, layout: PageLowering
) -> list[dict[str, str | None]]:
    """A ``list<message>``: its length is checked before any message is read, the size of
    every string before any text is decoded.

    Read from wasmtime's C values by address with the offsets ``layout`` checked when it was
    built (one read of a record's five fields, one of each ``some`` box, one of each
    string): the ctypes structs cost an object per field access, about 17 µs a message.
    """
    if val.kind != ffi.WASMTIME_COMPONENT_LIST.value:
        raise ValueError("expected a list of messages")
    items = val.of.list
    count = items.size
    if count > budget.max_messages:
        raise LiftStopped("result_too_large", too_many(count, budget.max_messages))
    data = ctypes.cast(items.data, ctypes.c_void_p).value or 0
    if count and not data:
        raise ValueError("a list of messages without its values")
    # Sizes first, then text: a result past the byte bound is refused before decoding any.
    fields = [read_fields(data + i * layout.val_size, layout, budget) for i in range(count)]
    string_at = ctypes.string_at
    messages = []
    for strings in fields:
        budget.check()
        messages.append(
            {
                name: None if vec is None else string_at(vec[1], vec[0]).decode("utf-8")
                for name, vec in zip(MESSAGE_FIELDS, strings, strict=True)
            }
        )
    return messages


def read_fields(addr: int, layout: PageLowering, budget: Budget) -> list[tuple[int, int] | None]:
    """The ``(size, address)`` of each string of the ``message`` record at ``addr`` (``None``
    for a ``none``), its sizes taken from ``budget``."""
    budget.check()
    of, val_of, entry_size = layout.of, layout.entry_val_of, layout.entry_size
    head = ctypes.string_at(addr, of + _WORDS.size)
    kind = head[0]
    size, entries = _WORDS.unpack_from(head, of)
    if kind != layout.k_record or size != len(MESSAGE_FIELDS) or not entries:
        raise ValueError("expected a message record")
    block = ctypes.string_at(entries, size * entry_size)
    out: list[tuple[int, int] | None] = []
    for at in range(0, size * entry_size, entry_size):
        kind = block[at + val_of - of]
        size_or_box, text = _WORDS.unpack_from(block, at + val_of)
        if kind == layout.k_option:
            if not size_or_box:
                out.append(None)
                continue
            boxed = ctypes.string_at(size_or_box, of + _WORDS.size)
            kind = boxed[0]
            size_or_box, text = _WORDS.unpack_from(boxed, of)
        if kind != layout.k_string or (size_or_box and not text):
            raise ValueError("expected a string")
        budget.take(size_or_box)
        out.append((size_or_box, text))
    return out


def public_lift(value: Any, budget: Budget) -> tuple[bool, Any]:
    """The same bounds over a value the public binding already lifted (``func(store)``).

    Used only where the private layer is missing or untested (:class:`HookHost` gives up the
    fast paths together): the sizes are still refused, but only after the binding has built
    every object, so this path bounds neither the time nor the memory of the lift itself.
    """
    # result<string, string> comes as a Variant; result<list, string> as the bare list or str.
    tag = getattr(value, "tag", None)
    if tag in ("ok", "err"):
        ok, payload = tag == "ok", value.payload
    else:
        ok, payload = not isinstance(value, str), value
    if isinstance(payload, str):
        budget.take(len(payload.encode("utf-8")))
        return ok, payload
    if len(payload) > budget.max_messages:
        raise LiftStopped(
            "result_too_large",
            f"its result holds {len(payload)} messages, more than the {budget.max_messages} "
            "allowed",
        )
    messages = []
    for record in payload:
        budget.check()
        message = {name: getattr(record, name) for name in MESSAGE_FIELDS}
        for text in message.values():
            budget.take(len(text.encode("utf-8")) if isinstance(text, str) else 0)
        messages.append(message)
    return ok, messages
