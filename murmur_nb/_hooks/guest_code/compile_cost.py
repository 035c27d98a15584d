"""What compiling a component may cost the kernel, bounded before wasmtime compiles it.

Cranelift compiles a component in the kernel, so its cost is the kernel's. Most of that cost
grows with the component's size, but not a function's locals: a function declares them as
``(count, type)`` groups, so 50,000 locals (wasmparser's ceiling for one function) take four
bytes, and cranelift gives each one a variable and a zero to start from. An 80 KB component
of 10,000 such functions held the kernel 40 s while it compiled (~80 ns a local), and
nothing in wasmtime refuses it: 1.2 MB of them is ten minutes.

Parameters are locals too (a function's first ones), and as cheap to multiply: a type of
1,000 parameters is written once and each function of it costs a few bytes (79 KB of them
held the kernel 2.6 s). So the locals every function of every core module has, parameters
included, are counted (one pass reading only the type, function and code sections' headers)
and a component past :func:`max_locals` is refused before it is compiled. Real hooks have
far fewer: a componentize-py hook ~79,000 in 13,000 functions, a componentize-js one ~86,000.
Bytes this parser cannot read are left to wasmtime, whose validator refuses them; the reading
itself is bounded against hostile bytes (:mod:`.wasm_binary`).
"""

from __future__ import annotations

import functools

from murmur_nb._exceptions import HookConfigWarning
from murmur_nb._hooks.guest_code.wasm_binary import Malformed, Reader, core_modules, sections
from murmur_nb._rules import whole_number as rules_whole_number

__all__ = [
    "DEFAULT_MAX_LOCALS",
    "TooCostly",
    "check_compile_cost",
    "declared_locals",
    "max_locals",
    "whole_number",
]

#: locals a component may declare over all its functions, unless ``$MURMUR_NB_HOOK_MAX_LOCALS``
#: says otherwise: 12 times the largest real hook's, ~0.1 s of compiling
DEFAULT_MAX_LOCALS = 1_000_000

_TYPE, _FUNCTION, _CODE = 1, 3, 10  # a core module's
_REF_TYPES = (0x63, 0x64)  # (ref null ht), (ref ht): a heap type follows
_VALUE_TYPES = frozenset((0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F, *range(0x69, 0x75)))


class TooCostly(ValueError):
    """A component whose compiling would cost more than the bound allows; never compiled."""


#: :func:`murmur_nb._rules.whole_number`, warning with :class:`~murmur_nb.HookConfigWarning`
#: (the hooks' variables); a partial adds no frame, so the warning still names the caller's
whole_number = functools.partial(rules_whole_number, category=HookConfigWarning)


def max_locals() -> int:
    """``$MURMUR_NB_HOOK_MAX_LOCALS``, else :data:`DEFAULT_MAX_LOCALS`."""
    return whole_number(
        "MURMUR_NB_HOOK_MAX_LOCALS", DEFAULT_MAX_LOCALS, "locals", "hooks are loaded with"
    )


def check_compile_cost(data: bytes, limit: int | None = None) -> None:
    """Raise :class:`TooCostly` when the functions of ``data`` (a component or a core
    module) have more locals, parameters included, than ``limit`` (default:
    :func:`max_locals`, this process's variable)."""
    if limit is None:
        limit = max_locals()
    count = declared_locals(data)
    if count > limit:
        raise TooCostly(
            f"its functions have {count:,} locals in all (parameters included), more than the "
            f"{limit:,} a hook may have ($MURMUR_NB_HOOK_MAX_LOCALS; cranelift spends time "
            "in the kernel on each one): it was not compiled. Rebuild it with fewer locals, "
            "or, if you trust it, raise $MURMUR_NB_HOOK_MAX_LOCALS before loading the hooks"
        )


def declared_locals(data: bytes) -> int:
    """The locals, parameters included, of all functions of all core modules in ``data`` (0
    for bytes that are not WebAssembly, or that break a rule of its binary format: wasmtime
    refuses those)."""
    total = 0
    try:
        for lo, hi in core_modules(data):
            total += _module_locals(data, lo, hi)
    except Malformed:  # outside a body: wasmtime's parser refuses it before compiling
        return 0
    return total


def _module_locals(data: bytes, lo: int, hi: int) -> int:
    """The locals of one core module's functions: their parameters, then what their bodies
    declare."""
    total = 0
    params: list[int] = []  # by type index
    for sid, _start, begin, end in sections(data, None, lo, hi):
        if sid == _TYPE:
            params = _params(Reader(data, begin, end))
        elif sid == _FUNCTION:
            reader = Reader(data, begin, end)
            for _ in reader.vec():  # a function's parameters are its first locals
                index = reader.u32()
                total += params[index] if index < len(params) else 0
        elif sid == _CODE:
            total += _code(Reader(data, begin, end))
    return total


def _skip_type(r: Reader) -> None:
    """Past one value or storage type (a reference type carries its heap type)."""
    if r.byte() in _REF_TYPES:
        r.s33()


def _params(r: Reader) -> list[int]:
    """The parameter count of each type of a type section (0 for a struct or array type);
    where the section ends inside a type, or holds a form this parser does not know, the
    types before it."""
    out: list[int] = []
    try:
        for _ in r.vec():
            members = 1
            if r.peek() == 0x4E:  # a recursive group of subtypes
                r.pos += 1
                members = r.u32()
            for _ in range(members):
                if r.peek() in (0x50, 0x4F):  # a subtype: its supertypes, then the type
                    r.pos += 1
                    for _ in r.vec():
                        r.u32()
                count = _composite(r)
                if count is None:
                    return out
                out.append(count)
    except Malformed:
        pass
    return out


def _composite(r: Reader) -> int | None:
    """One func, struct or array type: its parameter count (0 but for a func); ``None`` for
    a form this parser does not know."""
    form = r.byte()
    if form == 0x60:  # func: params, then results
        count = r.u32()
        for _ in range(count):
            _skip_type(r)
        for _ in r.vec():
            _skip_type(r)
        return count
    if form == 0x5F:  # struct: fields of a storage type and a mutability
        for _ in r.vec():
            _skip_type(r)
            r.byte()
        return 0
    if form == 0x5E:  # array: one field
        _skip_type(r)
        r.byte()
        return 0
    return None


def _code(r: Reader) -> int:
    """The locals a code section's function bodies declare."""
    total = 0
    try:
        for _ in r.vec():
            size = r.u32()
            end = min(r.pos + size, r.end)
            for _ in r.vec():
                total += r.u32()
                kind = r.peek()
                if kind not in _VALUE_TYPES and kind not in _REF_TYPES:
                    break  # a type this parser does not know: the count so far stands
                _skip_type(r)
                if r.pos > end:
                    break
            r.pos = end
    except Malformed:  # the section ends inside a body: wasmtime finds that only while it
        pass  # compiles the functions, so the bodies before it are counted
    return total
