"""Bounding ``on-compact``'s result inside the guest, before wasmtime copies it out.

wasmtime lifts a ``list<message>`` into its own values (about 1.4 KiB and 3 µs a message)
after the guest returned and before the host sees a single one, so a guest could make the
host spend ~45 times its own memory and seconds past its deadline (issue 22, point 10).
The count is checked where it is still cheap: in the guest's code, between its
``on-compact`` and the lift.

:func:`bound_compact` rewrites the component's bytes before they are compiled. It follows the
export ``murmur:hook/handlers@0.8.0`` / ``on-compact`` back to the core function the
``canon lift`` takes (through an inline instance or a re-exporting shim component, as
wit-component makes them), adds to that core module a function that calls the original,
reads the list's length from the return area (``result<list<message>, string>``: tag byte at
0, list pointer and length at 4 and 8) and, past the bound, turns the result into the error
``result_too_large <count, 10 digits>`` written over the list's first bytes. The ``canon
lift``'s alias is pointed at that function, so index spaces stay as they were. The memory the
check reads is proven to be the one the lift reads, by following both through the core
instances. Anything laid out otherwise is refused (:class:`Unbounded`): the host then does not
load the hook for ``compact`` rather than lift an unbounded result.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from murmur_nb._hooks.guest_code.wasm_binary import (
    COMPONENT_HEADER,
    COMPONENT_SECTION,
    CORE_MODULE_SECTION,
    MODULE_HEADER,
    Malformed,
    Reader,
    Section,
    sections,
    uleb,
)

__all__ = ["MARKER", "VERSION", "Unbounded", "bound_compact", "refused_count", "rewrite_for"]

#: What the check leaves as the error text; ten digits of the count follow.
MARKER = b"result_too_large "
_REFUSED = re.compile(r"result_too_large (\d{10})")
#: Bumped whenever the rewrite changes, so compiled entries of an older rewrite are not reused.
VERSION = 2

_HANDLERS = "murmur:hook/handlers@0.8.0"
_EXPORT = "on-compact"
_CHECKED = "murmur-nb:bounded#on-compact"

# component-level sorts (a core item is 0x00 followed by its core sort)
_CORE, _FUNC, _TYPE, _COMPONENT_SORT, _INSTANCE = 0x00, 0x01, 0x03, 0x04, 0x05
# core sorts
_C_FUNC, _C_MEMORY, _C_MODULE, _C_INSTANCE = 0x00, 0x02, 0x11, 0x12


class Unbounded(Exception):
    """The component is not laid out so that its ``on-compact`` result can be bounded."""


def refused_count(text: str) -> int | None:
    """The message count when ``text`` is the check's error, else ``None``."""
    match = _REFUSED.fullmatch(text)
    return int(match.group(1)) if match else None


# ------------------------------------------------------------------------------ reading


class _Reader(Reader):
    """:class:`Reader` with what a component's sections add: names and sorts of items."""

    __slots__ = ()

    def extern_name(self) -> str:
        kind = self.byte()
        if kind not in (0x00, 0x01):
            raise Unbounded(f"unknown import or export name form 0x{kind:02x}")
        return self.name()

    def sort(self) -> int:
        sort = self.byte()
        return 0x100 | self.byte() if sort == _CORE else sort  # core sorts above 0xff


@dataclass
class _Component:
    """The index spaces of one component, each entry saying how it was made."""

    data: bytes
    spaces: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)
    exports: dict[str, tuple[int, int]] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)

    def add(self, sort: int, entry: tuple[Any, ...]) -> None:
        self.spaces.setdefault(sort, []).append(entry)

    def get(self, sort: int, index: int) -> tuple[Any, ...]:
        space = self.spaces.get(sort, [])
        seen = 0
        while True:
            if index >= len(space):
                raise Unbounded("an index points past its space")
            entry = space[index]
            if entry[0] != "reexport":
                return entry
            index, seen = entry[2], seen + 1  # an export is a new index for the same item
            if seen > 64:
                raise Unbounded("exports re-export each other too deep")


def _parse_component(data: bytes) -> _Component:
    comp = _Component(data, sections=list(sections(data, COMPONENT_HEADER)))
    for number, (sid, _start, begin, end) in enumerate(comp.sections):
        r = _Reader(data, begin, end)
        if sid == CORE_MODULE_SECTION:
            comp.add(0x100 | _C_MODULE, ("module", begin, end))
        elif sid == COMPONENT_SECTION:
            comp.add(_COMPONENT_SORT, ("component", begin, end))
        elif sid == 6:
            _aliases(comp, r, number)
        elif sid in _READERS:
            _READERS[sid](comp, r)
        elif sid in (9, 12):
            raise Unbounded("the component has values or a start function")
        # 0 custom, 3 core types, 7 types: no index this check follows
    return comp


def _imports(comp: _Component, r: _Reader) -> None:
    for _ in r.vec():
        name = r.extern_name()
        comp.add(_extern_desc(r), ("import", name))


def _exports(comp: _Component, r: _Reader) -> None:
    for _ in r.vec():
        name = r.extern_name()
        sort, index = r.sort(), r.u32()
        if r.byte() == 0x01:
            _extern_desc(r)
        comp.exports[name] = (sort, index)
        comp.add(sort, ("reexport", sort, index))


def _core_arg(r: _Reader) -> int:
    if r.byte() != _C_INSTANCE:
        raise Unbounded("a core instantiation argument is not an instance")
    return r.u32()


def _core_sortidx(r: _Reader) -> tuple[int, int]:
    return 0x100 | r.byte(), r.u32()


def _sortidx(r: _Reader) -> tuple[int, int]:
    return r.sort(), r.u32()


def _instance_section(
    comp: _Component,
    r: _Reader,
    space: int,
    *,
    arg: Callable[[_Reader], Any],
    export_name: Callable[[_Reader], str],
    item: Callable[[_Reader], tuple[int, int]],
) -> None:
    """A core instance or instance section: instantiations (with their arguments) and
    instances made of exports, in ``space``."""
    for _ in r.vec():
        kind = r.byte()
        if kind == 0x00:
            made = r.u32()
            args = {r.name(): arg(r) for _ in r.vec()}
            comp.add(space, ("instantiate", made, args))
        elif kind == 0x01:
            comp.add(space, ("exports", {export_name(r): item(r) for _ in r.vec()}))
        else:
            raise Unbounded(f"unknown instance form 0x{kind:02x}")


def _core_instances(comp: _Component, r: _Reader) -> None:
    _instance_section(comp, r, 0x100 | _C_INSTANCE, arg=_core_arg, export_name=_Reader.name,
                      item=_core_sortidx)  # fmt: skip


def _instances(comp: _Component, r: _Reader) -> None:
    _instance_section(comp, r, _INSTANCE, arg=_sortidx, export_name=_Reader.extern_name,
                      item=_sortidx)  # fmt: skip


def _aliases(comp: _Component, r: _Reader, section: int) -> None:
    for _ in r.vec():
        sort, target = r.sort(), r.byte()
        if target in (0x00, 0x01):
            instance, start = r.u32(), r.pos
            name = r.name()
            kind = "core-export" if target == 0x01 else "export"
            # where the name lies, so the lift's alias can be pointed elsewhere
            comp.add(sort, (kind, instance, name, section, (start, r.pos)))
        elif target == 0x02:
            comp.add(sort, ("outer", r.u32(), r.u32()))
        else:
            raise Unbounded(f"unknown alias target 0x{target:02x}")


def _canon_options(r: _Reader) -> dict[str, int]:
    opts: dict[str, int] = {}
    for _ in r.vec():
        opt = r.byte()
        if opt in (0x00, 0x01, 0x02, 0x06):
            continue
        if opt in (0x03, 0x04, 0x05, 0x07):
            opts[{3: "memory", 4: "realloc", 5: "post-return", 7: "callback"}[opt]] = r.u32()
        else:
            raise Unbounded(f"unknown canonical option 0x{opt:02x}")
    return opts


def _canons(comp: _Component, r: _Reader) -> None:
    for _ in r.vec():
        kind = r.byte()
        if kind in (0x00, 0x01):
            if r.byte() != 0x00:
                raise Unbounded("unknown canonical function form")
            func = r.u32()
            opts = _canon_options(r)
            if kind == 0x00:
                comp.add(_FUNC, ("lift", func, opts, r.u32()))
            else:
                comp.add(0x100 | _C_FUNC, ("lower", func))
        elif kind in (0x02, 0x03, 0x04, 0x07):
            r.u32()
            comp.add(0x100 | _C_FUNC, ("resource", kind))
        else:
            raise Unbounded(f"canonical built-in 0x{kind:02x} is not one this check knows")


_READERS: dict[int, Callable[[_Component, _Reader], None]] = {
    2: _core_instances, 5: _instances, 8: _canons, 10: _imports, 11: _exports,
}  # fmt: skip


def _extern_desc(r: _Reader) -> int:
    """Read an import's or export's type; return the sort it adds to."""
    kind = r.byte()
    if kind == 0x00:
        if r.byte() != _C_MODULE:
            raise Unbounded("a core import other than a module")
        r.u32()
        return 0x100 | _C_MODULE
    if kind in (0x01, 0x04, 0x05):
        r.u32()
        return {0x01: _FUNC, 0x04: _COMPONENT_SORT, 0x05: _INSTANCE}[kind]
    if kind == 0x03:
        if r.byte() == 0x00:
            r.u32()
        return _TYPE
    raise Unbounded("a value import or export")


# ------------------------------------------------------------------------------ core module


@dataclass
class _Module:
    data: bytes
    sections: list[Section]
    func_types: list[int]  # imported functions first
    memories: list[tuple[str, str] | None]  # (module, name) when imported, None when defined
    exports: dict[str, tuple[int, int]]


def _limits(r: Reader) -> None:
    flags = r.byte()  # 0x01 a maximum, 0x02 shared, 0x04 64-bit, 0x08 a custom page size
    r.u32()
    if flags & 0x01:
        r.u32()
    if flags & 0x08:
        r.u32()


def _ref_type(r: Reader) -> None:
    if r.byte() in (0x63, 0x64):
        r.s33()


def _module_imports(r: Reader, func_types: list[int], memories: list[Any]) -> None:
    """Read a core import section: the functions' types and the memories, in order."""
    for _ in r.vec():
        module, name, kind = r.name(), r.name(), r.byte()
        if kind == 0x00:
            func_types.append(r.u32())
        elif kind == 0x01:
            _ref_type(r)
            _limits(r)
        elif kind == 0x02:
            _limits(r)
            memories.append((module, name))
        elif kind == 0x03:
            _ref_type(r)
            r.byte()
        elif kind == 0x04:
            r.byte()
            r.u32()
        else:
            raise Unbounded(f"unknown core import kind 0x{kind:02x}")


def _parse_module(data: bytes) -> _Module:
    module_sections = list(sections(data, MODULE_HEADER))
    func_types: list[int] = []
    memories: list[tuple[str, str] | None] = []
    exports: dict[str, tuple[int, int]] = {}
    for sid, _start, begin, end in module_sections:
        r = Reader(data, begin, end)
        if sid == 2:
            _module_imports(r, func_types, memories)
        elif sid == 3:
            func_types += [r.u32() for _ in r.vec()]
        elif sid == 5:
            for _ in r.vec():
                _limits(r)
                memories.append(None)
        elif sid == 7:
            for _ in r.vec():
                name = r.name()
                exports[name] = (r.byte(), r.u32())
    return _Module(data, module_sections, func_types, memories, exports)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        done = (value == 0 and not b & 0x40) or (value == -1 and b & 0x40)
        out.append(b if done else b | 0x80)
        if done:
            return bytes(out)


def _section(sid: int, payload: bytes) -> bytes:
    return bytes([sid]) + uleb(len(payload)) + payload


def _get(local: int) -> bytes:
    return bytes([0x20, local])


def _put(local: int) -> bytes:
    return bytes([0x21, local])


def _tee(local: int) -> bytes:
    return bytes([0x22, local])


def _check_body(original: int, bound: int) -> bytes:
    """``(param i32 i32) (result i32)``: call ``original``, refuse a list past ``bound``."""
    const = bound if bound < 1 << 31 else bound - (1 << 32)
    at, n, p, i = 2, 3, 4, 5  # locals after the two parameters
    code = _get(0) + _get(1) + b"\x10" + uleb(original) + _put(at)
    code += _get(at) + b"\x2d\x00\x00" + b"\x45" + b"\x04\x40"  # ok tag?
    code += _get(at) + b"\x28\x02\x08" + _tee(n) + b"\x41" + _sleb(const) + b"\x4b" + b"\x04\x40"
    code += _get(at) + b"\x28\x02\x04" + _put(p)
    for offset, char in enumerate(MARKER):
        code += _get(p) + b"\x41" + _sleb(char) + b"\x3a\x00" + uleb(offset)
    code += b"\x41\x0a" + _put(i) + b"\x03\x40"  # ten digits, last first
    code += _get(i) + b"\x41\x01\x6b" + _put(i)
    code += _get(p) + _get(i) + b"\x6a"
    code += _get(n) + b"\x41\x0a\x70\x41\x30\x6a" + b"\x3a\x00" + uleb(len(MARKER))
    code += _get(n) + b"\x41\x0a\x6e" + _put(n)
    code += _get(i) + b"\x0d\x00" + b"\x0b"
    code += _get(at) + b"\x41\x01\x3a\x00\x00"  # err
    code += _get(at) + _get(p) + b"\x36\x02\x04"
    code += _get(at) + b"\x41" + _sleb(len(MARKER) + 10) + b"\x36\x02\x08"
    code += b"\x0b\x0b" + _get(at) + b"\x0b"
    body = b"\x01\x04\x7f" + code  # four i32 locals
    return uleb(len(body)) + body


def _with_check(module: _Module, export: str, bound: int) -> tuple[bytes, str]:
    """The module with the checked function exported under a name of its own."""
    kind, original = module.exports.get(export, (None, 0))
    if kind != 0x00:
        raise Unbounded(f"the core export {export!r} is not a function")
    name = _CHECKED
    while name in module.exports:
        name += "'"
    added = {  # one more entry in the function, export and code sections
        3: uleb(module.func_types[original]),
        7: uleb(len(name.encode())) + name.encode() + b"\x00" + uleb(len(module.func_types)),
        10: _check_body(original, bound),
    }
    if not added.keys() <= {sid for sid, *_ in module.sections}:
        raise Unbounded("the core module lacks a function, export or code section")
    out = bytearray(module.data[:8])
    for sid, start, begin, end in module.sections:
        if sid in added:
            r = Reader(module.data, begin, end)
            count = r.u32()
            out += _section(sid, uleb(count + 1) + module.data[r.pos : end] + added[sid])
        else:
            out += module.data[start:end]
    return bytes(out), name


# ------------------------------------------------------------------------------ following


def _handlers_export(comp: _Component) -> str:
    """The export wasmtime takes for :data:`_HANDLERS`: that name, else the one export of
    another version of the interface (wasmtime matches a semver-compatible one, such as
    ``@0.8.1``: left unbounded, its result was copied out whole); :class:`Unbounded` when
    there are several."""
    if _HANDLERS in comp.exports:
        return _HANDLERS
    family = _HANDLERS.partition("@")[0] + "@"
    others = sorted(name for name in comp.exports if name.startswith(family))
    if len(others) > 1:
        raise Unbounded(f"it exports {', '.join(others)}: one of them, not several")
    return others[0] if others else _HANDLERS


def _lifted(comp: _Component) -> tuple[int, dict[str, int]] | None:
    """The core function index and options of the ``canon lift`` behind ``on-compact``;
    ``None`` when there is no such export (the host reports the missing export itself)."""
    sort, index = comp.exports.get(_handlers_export(comp), (None, 0))
    if sort != _INSTANCE:
        return None
    instance = comp.get(_INSTANCE, index)
    if instance[0] == "exports":
        sort, func = instance[1].get(_EXPORT, (None, 0))
    elif instance[0] == "instantiate":
        sort, func = _through_shim(comp, instance[1], instance[2])
    else:
        raise Unbounded(f"{_HANDLERS} is neither built from exports nor a shim's instance")
    if sort is None:
        return None
    if sort != _FUNC:
        raise Unbounded(f"{_HANDLERS}'s {_EXPORT} is not a function")
    lift = comp.get(_FUNC, func)
    if lift[0] != "lift":
        raise Unbounded(f"{_EXPORT} is not a lifted core function")
    return lift[1], lift[2]


def _through_shim(
    comp: _Component, component: int, args: dict[str, tuple[int, int]]
) -> tuple[int | None, int]:
    """A nested component that re-exports one of its imports: the argument given for it."""
    nested = comp.get(_COMPONENT_SORT, component)
    if nested[0] != "component":
        raise Unbounded(f"{_HANDLERS} comes from a component that is not nested in this one")
    inner = _parse_component(comp.data[nested[1] : nested[2]])
    sort, func = inner.exports.get(_EXPORT, (None, 0))
    if sort is None:
        return None, 0
    if sort != _FUNC:
        raise Unbounded(f"the shim component's {_EXPORT} is not a function")
    made = inner.get(_FUNC, func)
    if made[0] != "import" or made[1] not in args:
        raise Unbounded(f"the shim component's {_EXPORT} is not one of its imports")
    return args[made[1]]


@dataclass
class _Memories:
    """Resolves a core memory to where it is defined: ``(core instance, memory index)``."""

    comp: _Component
    load: Callable[[int], _Module]

    def of_memory(self, index: int, depth: int = 0) -> tuple[int, int]:
        entry = self.comp.get(0x100 | _C_MEMORY, index)
        if entry[0] != "core-export":
            raise Unbounded("a memory that is not a core instance's export")
        return self.of_export(entry[1], entry[2], depth + 1)

    def of_export(self, instance: int, name: str, depth: int) -> tuple[int, int]:
        if depth > 64:
            raise Unbounded("memories re-exported too deep")
        entry = self.comp.get(0x100 | _C_INSTANCE, instance)
        if entry[0] == "exports":
            sort, index = entry[1].get(name, (None, 0))
            if sort != 0x100 | _C_MEMORY:
                raise Unbounded(f"core instance {instance} exports no memory {name!r}")
            return self.of_memory(index, depth + 1)
        module = self.load(entry[1])
        kind, index = module.exports.get(name, (None, 0))
        if kind != 0x02:
            raise Unbounded(f"core module {entry[1]} exports no memory {name!r}")
        return self.in_module(instance, index, depth + 1)

    def in_module(self, instance: int, index: int, depth: int) -> tuple[int, int]:
        entry = self.comp.get(0x100 | _C_INSTANCE, instance)
        module = self.load(entry[1])
        if index >= len(module.memories):
            raise Unbounded("a memory index past the module's memories")
        imported = module.memories[index]
        if imported is None:
            return instance, index
        source = entry[2].get(imported[0])
        if source is None:
            raise Unbounded(f"core instance {instance} has no argument {imported[0]!r}")
        return self.of_export(source, imported[1], depth + 1)


def rewrite_for(bound: int) -> tuple[str, Callable[[bytes], bytes]]:
    """The cache's ``rewrite`` for a hook running ``compact`` with ``result_messages=bound``."""
    return f"bounded-compact-v{VERSION}-{bound}", functools.partial(bound_compact, bound=bound)


def bound_compact(data: bytes, bound: int) -> bytes:
    """``data`` (a component) with ``on-compact`` refusing more than ``bound`` messages.

    Raises
    ------
    Unbounded
        The component is laid out otherwise (see the module docstring), or is not one this
        reading can follow (a malformed one: wasmtime has not validated it yet): the host
        cannot bound the result, and says so instead of loading the hook for ``compact``.
    """
    try:
        return _bound_compact(data, bound)
    except Unbounded:
        raise
    except Malformed as exc:  # the reader's rule, said as this check's refusal
        raise Unbounded(str(exc)) from exc
    except Exception as exc:  # a hostile binary: no error of this reading may escape
        raise Unbounded(f"its layout could not be followed ({type(exc).__name__}: {exc})"
                        ) from exc  # fmt: skip


def _bound_compact(data: bytes, bound: int) -> bytes:
    if data[:8] != COMPONENT_HEADER:
        return data  # not a component: wasmtime says what it is instead
    comp = _parse_component(data)
    lifted = _lifted(comp)
    if lifted is None:
        return data
    core_func, opts = lifted
    alias = comp.get(0x100 | _C_FUNC, core_func)
    if alias[0] != "core-export":
        raise Unbounded(f"{_EXPORT}'s core function is not a core instance's export")
    instance = comp.get(0x100 | _C_INSTANCE, alias[1])
    if instance[0] != "instantiate":
        raise Unbounded(f"{_EXPORT}'s core function comes from an instance of no module")
    modules: dict[int, _Module] = {}

    def load(index: int) -> _Module:
        if index not in modules:
            entry = comp.get(0x100 | _C_MODULE, index)
            if entry[0] != "module":
                raise Unbounded("a core module that is not defined in the component")
            modules[index] = _parse_module(data[entry[1] : entry[2]])
        return modules[index]

    memories = _Memories(comp, load)
    if "memory" not in opts:
        raise Unbounded(f"{_EXPORT} is lifted without a memory")
    if memories.in_module(alias[1], 0, 0) != memories.of_memory(opts["memory"]):
        raise Unbounded(f"{_EXPORT}'s module reads another memory than the lift")
    module_index = instance[1]
    checked, name = _with_check(load(module_index), alias[2], bound)
    module_begin = comp.get(0x100 | _C_MODULE, module_index)[1]
    section, (name_start, name_end) = alias[3], alias[4]
    encoded = uleb(len(name.encode())) + name.encode()
    out = bytearray(data[:8])
    for number, (sid, start, begin, end) in enumerate(comp.sections):
        if sid == CORE_MODULE_SECTION and begin == module_begin:
            out += _section(1, checked)
        elif number == section:
            out += _section(6, data[begin:name_start] + encoded + data[name_end:end])
        else:
            out += data[start:end]
    return bytes(out)
