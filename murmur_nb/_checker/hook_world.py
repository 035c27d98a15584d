"""Whether a compiled component implements the ``hook`` world exactly, read from its types.

Nothing runs here: the exports and imports are read from the component's type (wasmtime's
public component-type API), and the signatures are rendered and compared by the host's own
:mod:`murmur_nb._hooks.signatures`, so the checker and the loader cannot disagree.
"""

from __future__ import annotations

import re
from typing import Any

from murmur_nb._hooks.host import FUNCS
from murmur_nb._hooks.signatures import (
    EXPECTED_EXPORTS,
    HANDLERS,
    READ_INTERFACE,
    check_imports,
    served_interface,
    signature,
)

__all__ = ["export_problems", "import_problems"]

#: WASI preview 2, which the host links (without files, environment or network).
_WASI = re.compile(r"^wasi:[a-z-]+/[a-z-]+@0\.2\.\d+$")
_LIFECYCLE = re.compile(r"^murmur:hook/lifecycle@0\.8\.\d+$")


def export_problems(component: Any, engine: Any) -> tuple[list[str], list[str]]:
    """``(problems, other exports)``: what is wrong with the handlers, what else is exported."""
    from wasmtime import component as c  # noqa: PLC0415 - wasmtime loads on first use

    exports = component.type.exports(engine)
    others = sorted(name for name in exports if name != HANDLERS)
    handlers = exports.get(HANDLERS)
    if handlers is None or not isinstance(handlers.ty, c.ComponentInstanceType):
        return [f"it does not export {HANDLERS} (it exports {', '.join(others) or 'nothing'})"], []
    funcs = {
        name: item.ty
        for name, item in handlers.ty.exports(engine).items()
        if isinstance(item.ty, c.FuncType)
    }
    problems = []
    for event, name in FUNCS.items():
        if name not in funcs:
            problems.append(f"{HANDLERS} has no {name}")
            continue
        found = signature(funcs[name])
        if found != EXPECTED_EXPORTS[event]:
            problems.append(
                f"{name} has the signature {found}, but the world wants {EXPECTED_EXPORTS[event]}"
            )
    return problems, others


def import_problems(component: Any, engine: Any) -> tuple[list[str], list[str]]:
    """``(problems, imports)``: imports the host does not link or links with another type."""
    from wasmtime import component as c  # noqa: PLC0415 - wasmtime loads on first use

    imports = component.type.imports(engine)
    problems = []
    for name, item in imports.items():
        if served_interface(name) == served_interface(READ_INTERFACE) or _WASI.match(name):
            continue
        if _LIFECYCLE.match(name) and isinstance(item.ty, c.ComponentInstanceType):
            funcs = [n for n, e in item.ty.exports(engine).items() if isinstance(e.ty, c.FuncType)]
            if funcs:
                problems.append(f"it imports functions {', '.join(funcs)} from {name}, which "
                                "only defines types")  # fmt: skip
            continue
        problems.append(f"it imports {name}, which the host does not link")
    mismatch = check_imports(component, engine)
    if mismatch is not None:
        problems.append(f"it {mismatch}")
    return problems, sorted(imports)
