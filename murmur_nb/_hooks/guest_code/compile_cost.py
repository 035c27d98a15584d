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
Bytes this parser cannot read are left to wasmtime, whose validator refuses them.
"""

from __future__ import annotations

import os
import warnings

from murmur_nb._exceptions import HookConfigWarning

__all__ = ["DEFAULT_MAX_LOCALS", "TooCostly", "check_compile_cost", "declared_locals", "max_locals"]

#: locals a component may declare over all its functions, unless ``$MURMUR_NB_HOOK_MAX_LOCALS``
#: says otherwise: 12 times the largest real hook's, ~0.1 s of compiling
DEFAULT_MAX_LOCALS = 1_000_000

_CORE_MODULE, _COMPONENT = 1, 4  # a component's section ids
_TYPE, _FUNCTION, _CODE = 1, 3, 10  # a core module's
_REF_TYPES = (0x63, 0x64)  # (ref null ht), (ref ht): a heap type follows
_VALUE_TYPES = frozenset((0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F, *range(0x69, 0x75)))


class TooCostly(ValueError):
    """A component whose compiling would cost more than the bound allows; never compiled."""


def max_locals() -> int:
    """``$MURMUR_NB_HOOK_MAX_LOCALS``, else :data:`DEFAULT_MAX_LOCALS`; a value that is not
    a whole number of at least 1 is warned about and the default kept."""
    value = os.environ.get("MURMUR_NB_HOOK_MAX_LOCALS", "")
    if not value.strip():
        return DEFAULT_MAX_LOCALS
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        warnings.warn(
            f"$MURMUR_NB_HOOK_MAX_LOCALS={value!r} is not a count: it takes a whole number, at "
            f"least 1 (hooks are loaded with the default, {DEFAULT_MAX_LOCALS:,}, meanwhile); "
            "fix or unset it",
            HookConfigWarning,
            stacklevel=2,
        )
        return DEFAULT_MAX_LOCALS
    return count


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
    for bytes that are not WebAssembly, or that end before their sections do: wasmtime
    refuses those)."""
    view = memoryview(data)
    try:
        return _binary(view, 0, len(view))
    except IndexError:  # malformed outside a body: wasmtime refuses it before compiling
        return 0


def _leb(b: memoryview, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = b[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def _binary(b: memoryview, lo: int, hi: int) -> int:
    """A component (nested ones and their core modules) or a core module, from its preamble."""
    if bytes(b[lo : lo + 4]) != b"\0asm":
        return 0
    component = bytes(b[lo + 4 : lo + 8]) != b"\x01\0\0\0"
    total, i = 0, lo + 8
    params: list[int] = []  # a core module's parameters, by type index
    while i < hi:
        section = b[i]
        size, i = _leb(b, i + 1)
        end = min(i + size, hi)
        if component and section in (_CORE_MODULE, _COMPONENT):
            total += _binary(b, i, end)
        elif not component and section == _TYPE:
            params = _params(b, i, end)
        elif not component and section == _FUNCTION:
            count, j = _leb(b, i)
            for _ in range(count):  # a function's parameters are its first locals
                index, j = _leb(b, j)
                total += params[index] if index < len(params) else 0
        elif not component and section == _CODE:
            total += _code(b, i, end)
        i = end
    return total


def _skip_type(b: memoryview, j: int) -> int:
    """Past one value or storage type (a reference type carries its heap type)."""
    kind = b[j]
    j += 1
    if kind in _REF_TYPES:
        while b[j] & 0x80:
            j += 1
        j += 1
    return j


def _params(b: memoryview, i: int, hi: int) -> list[int]:
    """The parameter count of each type of a type section (0 for a struct or array type)."""
    out: list[int] = []
    entries, i = _leb(b, i)
    for _ in range(entries):
        members = 1
        if b[i] == 0x4E:  # a recursive group of subtypes
            members, i = _leb(b, i + 1)
        for _ in range(members):
            if b[i] in (0x50, 0x4F):  # a subtype: its supertypes, then the type
                supers, i = _leb(b, i + 1)
                for _ in range(supers):
                    _, i = _leb(b, i)
            read = _composite(b, i)
            if read is None:  # a form this parser does not know: what it read stands
                return out
            count, i = read
            out.append(count)
            if i > hi:
                return out
    return out


def _composite(b: memoryview, i: int) -> tuple[int, int] | None:
    """One func, struct or array type: its parameter count (0 but for a func) and where
    it ends; ``None`` for a form this parser does not know."""
    form = b[i]
    i += 1
    if form == 0x60:  # func: params, then results
        count, i = _leb(b, i)
        for _ in range(count):
            i = _skip_type(b, i)
        results, i = _leb(b, i)
        for _ in range(results):
            i = _skip_type(b, i)
        return count, i
    if form == 0x5F:  # struct: fields of a storage type and a mutability
        fields, i = _leb(b, i)
        for _ in range(fields):
            i = _skip_type(b, i) + 1
        return 0, i
    if form == 0x5E:  # array: one field
        return 0, _skip_type(b, i) + 1
    return None


def _code(b: memoryview, i: int, hi: int) -> int:
    """The locals a code section's function bodies declare."""
    total = 0
    bodies, i = _leb(b, i)
    try:
        for _ in range(bodies):
            size, i = _leb(b, i)
            end = min(i + size, hi)
            groups, j = _leb(b, i)
            for _ in range(groups):
                count, j = _leb(b, j)
                total += count
                if b[j] not in _VALUE_TYPES and b[j] not in _REF_TYPES:
                    break  # a type this parser does not know: the count so far stands
                j = _skip_type(b, j)
                if j > end:
                    break
            i = end
    except IndexError:  # the binary ends inside a body: wasmtime finds that only while it
        pass  # compiles the functions, so the bodies before it are counted
    return total
