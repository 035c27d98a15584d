"""Reading a WebAssembly binary (a component or a core module) nobody has validated yet.

The host reads a hook's bytes before wasmtime does (:mod:`.bounding` to rewrite them,
:mod:`.compile_cost` to count what compiling them costs), so every read here is bounded as
if the bytes were hostile: a read never passes the end of the section (or binary) it is in,
a section whose size runs past its binary is refused, a number takes at most ten bytes (a
u64's LEB128; a longer one would make Python build an ever larger integer), and nested
components are walked with a stack of at most :data:`MAX_NESTING` levels, never by
recursion. What breaks a rule raises :class:`Malformed`; each caller decides what that
means to it (bounding refuses the component, the count keeps what it read and leaves the
refusal to wasmtime's validator).
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = [
    "COMPONENT_HEADER",
    "COMPONENT_SECTION",
    "CORE_MODULE_SECTION",
    "MAGIC",
    "MAX_NESTING",
    "MODULE_HEADER",
    "Malformed",
    "Reader",
    "core_modules",
    "sections",
    "uleb",
]

MAGIC = b"\x00asm"
COMPONENT_HEADER = b"\x00asm\x0d\x00\x01\x00"
MODULE_HEADER = b"\x00asm\x01\x00\x00\x00"
#: a component's sections that hold a whole binary: a core module, a component
CORE_MODULE_SECTION, COMPONENT_SECTION = 1, 4
#: components nested deeper are refused (wasmtime refuses past 999: "modules and components
#: count exceeds limit of 1000")
MAX_NESTING = 1000

#: ``(id, section start, payload start, payload end)``
Section = tuple[int, int, int, int]


class Malformed(ValueError):
    """Bytes that break a rule of the binary format (the message says which)."""


class Reader:
    """A cursor over ``data[pos:end]`` that never reads past ``end``."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data, self.pos = data, pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise Malformed("the binary ends inside a section")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def peek(self) -> int:
        """The next byte, left unread."""
        if self.pos >= self.end:
            raise Malformed("the binary ends inside a section")
        return self.data[self.pos]

    def u32(self) -> int:
        """An unsigned LEB128 number (a u32's or a u64's: up to ten bytes)."""
        data, pos, end = self.data, self.pos, self.end
        if pos < end and data[pos] < 0x80:  # most numbers are one byte
            self.pos = pos + 1
            return data[pos]
        result = shift = 0
        while True:
            if pos >= end:
                raise Malformed("the binary ends inside a section")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 63:
                raise Malformed("a number is too long")

    def s33(self) -> None:
        """Skip a signed LEB128 number (a heap type)."""
        while self.byte() & 0x80:
            pass

    def name(self) -> str:
        size = self.u32()
        start, self.pos = self.pos, self.pos + size
        if self.pos > self.end:
            raise Malformed("a name runs past its section")
        return self.data[start : self.pos].decode("utf-8", "replace")

    def vec(self) -> range:
        return range(self.u32())


def uleb(value: int) -> bytes:
    """``value`` (at least 0) in unsigned LEB128, as :meth:`Reader.u32` reads it."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sections(
    data: bytes, header: bytes | None = None, lo: int = 0, hi: int | None = None
) -> Iterator[Section]:
    """Each section of the binary in ``data[lo:hi]``, read one at a time.

    ``header``, when given, is the preamble the binary must start with; without it the
    caller has checked the preamble.
    """
    hi = len(data) if hi is None else hi
    if header is not None and data[lo : lo + 8] != header:
        raise Malformed("not a component" if header == COMPONENT_HEADER else "not a core module")
    reader = Reader(data, lo + 8, hi)
    while reader.pos < hi:
        start, sid = reader.pos, reader.byte()
        size = reader.u32()
        begin = reader.pos
        reader.pos += size
        if reader.pos > hi:
            raise Malformed("a section runs past the end")
        yield sid, start, begin, reader.pos


def core_modules(data: bytes) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each core module in ``data``, in order: ``data`` itself when it is
    one, else those of the component, its nested components' included.

    A binary that does not start with ``\\0asm`` holds none; one of any version but a core
    module's is read as a component.
    """
    if data[:4] != MAGIC:
        return
    if data[4:8] == MODULE_HEADER[4:]:
        yield 0, len(data)
        return
    stack = [sections(data, None, 0, len(data))]
    while stack:
        for sid, _start, begin, end in stack[-1]:
            if sid not in (CORE_MODULE_SECTION, COMPONENT_SECTION):
                continue
            if data[begin : begin + 4] != MAGIC:
                continue
            if data[begin + 4 : begin + 8] == MODULE_HEADER[4:]:
                yield begin, end
                continue
            if len(stack) >= MAX_NESTING:
                raise Malformed(f"components nested more than {MAX_NESTING} deep")
            stack.append(sections(data, None, begin, end))
            break
        else:
            stack.pop()
