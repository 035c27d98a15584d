"""The function types of the ``hook`` world, and the load-time check of a component against them.

wasmtime-py registers Python host functions untyped: any function type a guest's import
declares is accepted and handed to the callback. So before a component is instantiated,
:func:`check_imports` compares every function it imports from an interface the host serves
with that interface's one signature; a mismatch, or a function the host does not serve, is a
``link_error`` naming both. WASI functions are typed by wasmtime itself. Signatures compare
as text (:func:`signature`, parameter names left out); which resource a handle is of is
checked by wasmtime when it crosses.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "CLOCK_INTERFACE",
    "EXPECTED_EXPORTS",
    "HANDLERS",
    "HOST_IMPORTS",
    "READ_INTERFACE",
    "check_imports",
    "clock_imports",
    "signature",
]

HANDLERS = "murmur:hook/handlers@0.8.0"
READ_INTERFACE = "murmur:conversation/read@0.1.0"
#: The clock is shadowed under this name, which semver-compatible imports resolve to (the
#: highest 0.2 version wins), and under each exact name a loaded component imports (an exact
#: name would otherwise find the version wasmtime itself defines).
CLOCK_INTERFACE = "wasi:clocks/monotonic-clock@0.2.999"

MESSAGE = (
    "record{id: string, role: string, content: string, name: option<string>, "
    "created-at: option<string>}"
)
PAGE = f"record{{messages: list<{MESSAGE}>, next-cursor: option<string>, total: u32}}"

#: The exported handlers, by event.
EXPECTED_EXPORTS = {
    "task-start": "func(record{task-id: string, context-id: string}) -> result<string, string>",
    "compact": f"func(list<{MESSAGE}>) -> result<list<{MESSAGE}>, string>",
}

#: Every function the host serves from Python, by interface (name without its patch version).
HOST_IMPORTS: dict[str, dict[str, str]] = {
    "murmur:conversation/read@0.1": {
        "read-messages": f"func(option<string>, u32) -> result<{PAGE}, string>",
    },
    "wasi:clocks/monotonic-clock@0.2": {
        "now": "func() -> u64",
        "resolution": "func() -> u64",
        "subscribe-duration": "func(u64) -> own<resource>",
        "subscribe-instant": "func(u64) -> own<resource>",
    },
}

_PATCH = re.compile(r"^(?P<base>[^@]+@\d+\.\d+)\.\d+(?:[-+].*)?$")


def signature(ty: Any) -> str:
    """A WIT-like rendering of a component value or function type (parameter names left out)."""
    from wasmtime import component as c  # noqa: PLC0415 - wasmtime loads on first use

    if isinstance(ty, c.FuncType):
        params = ", ".join(signature(t) for _, t in ty.params)
        result = ty.result
        return f"func({params})" + ("" if result is None else f" -> {signature(result)}")
    if isinstance(ty, c.ListType):
        return f"list<{signature(ty.element)}>"
    if isinstance(ty, c.OptionType):
        return f"option<{signature(ty.payload)}>"
    if isinstance(ty, c.ResultType):
        ok, err = ty.ok, ty.err
        return (
            f"result<{'_' if ok is None else signature(ok)}, "
            f"{'_' if err is None else signature(err)}>"
        )
    return _aggregate_signature(ty)


def _aggregate_signature(ty: Any) -> str:
    """The rendering of records, tuples and resource handles (the rest of :func:`signature`)."""
    from wasmtime import component as c  # noqa: PLC0415 - wasmtime loads on first use

    if isinstance(ty, c.RecordType):
        return "record{" + ", ".join(f"{n}: {signature(t)}" for n, t in ty.fields) + "}"
    if isinstance(ty, c.TupleType):
        return "tuple<" + ", ".join(signature(t) for t in ty.elements) + ">"
    if isinstance(ty, c.OwnType):
        return "own<resource>"
    if isinstance(ty, c.BorrowType):
        return "borrow<resource>"
    return type(ty).__name__.lower()


def served_interface(name: str) -> str | None:
    """The :data:`HOST_IMPORTS` key serving the import ``name`` (any patch version), if any."""
    match = _PATCH.match(name)
    base = match.group("base") if match else name
    return base if base in HOST_IMPORTS else None


def clock_imports(component: Any, engine: Any) -> list[str]:
    """The exact names under which ``component`` imports the monotonic clock."""
    return [
        name
        for name in component.type.imports(engine)
        if served_interface(name) == "wasi:clocks/monotonic-clock@0.2"
    ]


def check_imports(component: Any, engine: Any) -> str | None:
    """``None`` when every Python-served import of ``component`` has the world's signature.

    Otherwise a message naming the first import that differs, both signatures, and the fix.
    """
    from wasmtime import component as c  # noqa: PLC0415 - wasmtime loads on first use

    for name, extern in component.type.imports(engine).items():
        served = served_interface(name)
        if served is None:
            continue
        instance = extern.ty
        if not isinstance(instance, c.ComponentInstanceType):
            return f"imports {name} as a {type(instance).__name__}, but it is an interface"
        wanted = HOST_IMPORTS[served]
        for func_name, item in instance.exports(engine).items():
            ty = item.ty
            if not isinstance(ty, c.FuncType):
                continue  # a type export (a record, a resource): checked by use
            if func_name not in wanted:
                return (
                    f"imports `{func_name}` from {name}, which the host does not provide "
                    f"(it provides {', '.join(sorted(wanted))}); rebuild the hook against "
                    "the WIT folder murmur-nb ships"
                )
            found = signature(ty)
            if found != wanted[func_name]:
                return (
                    f"imports `{func_name}` from {name} as {found}, but the host provides "
                    f"{wanted[func_name]}; rebuild the hook against the WIT folder "
                    "murmur-nb ships"
                )
    return None
