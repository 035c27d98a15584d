"""The one reading of a hook's WebAssembly bytes that the host does before wasmtime does.

:mod:`murmur_nb._hooks.guest_code.wasm_binary` holds the rules both of its readers follow
(the count of locals before compiling, the rewrite of ``on-compact``), so its bounds on
hostile bytes are tested here, on the reader and through each caller: numbers of any
length, bytes cut anywhere, sizes that point past the end, components nested past what
recursion allows. Tests of internals: no public call reads a binary without compiling it.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hook_cache import locals_bomb
from test_hook_guard import flood_guest

from murmur_nb._hooks.guest_code.bounding import (  # private: the rewrite reads the bytes
    Unbounded,
    bound_compact,
)
from murmur_nb._hooks.guest_code.compile_cost import (  # private: the count before compiling
    declared_locals,
)
from murmur_nb._hooks.guest_code.wasm_binary import (  # private: the reader itself
    COMPONENT_HEADER,
    MAX_NESTING,
    MODULE_HEADER,
    Malformed,
    Reader,
    core_modules,
    sections,
    uleb,
)


def section(sid: int, payload: bytes) -> bytes:
    return bytes([sid]) + uleb(len(payload)) + payload


def padded(value: int, extra: int) -> bytes:
    """``value`` in LEB128 with ``extra`` redundant bytes (continuation bits and zeros)."""
    data = bytearray(uleb(value))
    for _ in range(extra):
        data[-1] |= 0x80
        data.append(0)
    return bytes(data)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 64) - 1), st.integers(0, 9), st.binary(max_size=4))
def test_a_number_of_up_to_ten_bytes_is_read_and_the_rest_left(
    value: int, extra: int, after: bytes
) -> None:
    encoded = padded(value, extra)
    if len(encoded) > 10:
        with pytest.raises(Malformed, match="too long"):
            Reader(encoded + after).u32()
        return
    reader = Reader(encoded + after)
    assert reader.u32() == value and reader.pos == len(encoded)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 64) - 1), st.integers(0, 9), st.data())
def test_a_number_cut_short_is_malformed(value: int, extra: int, data: st.DataObject) -> None:
    encoded = padded(value, extra)[:10]
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(Malformed):  # the section ends at the cut: the bytes after are not read
        Reader(encoded + b"\x00", 0, cut).u32()


def test_a_number_of_eleven_bytes_is_malformed() -> None:
    with pytest.raises(Malformed, match="a number is too long"):
        Reader(b"\xff" * 10 + b"\x01").u32()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused_as_malformed(tail: bytes) -> None:
    """Never an ``IndexError``, never a range past the end."""
    for data in (COMPONENT_HEADER + tail, MODULE_HEADER + tail):
        try:
            for _sid, start, begin, end in sections(data):
                assert 8 <= start < begin <= end <= len(data)
            for begin, end in core_modules(data):
                assert 0 <= begin <= end <= len(data)
        except Malformed:
            pass


FLOOD = flood_guest(3)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(FLOOD) - 1))
def test_a_component_cut_anywhere_is_counted_no_higher_and_refused_bounding(cut: int) -> None:
    """Each caller keeps its meaning of malformed bytes: the count keeps what it read, the
    rewrite refuses the component."""
    assert declared_locals(FLOOD[:cut]) <= declared_locals(FLOOD)
    try:
        bound_compact(FLOOD[:cut], 10)  # cut between sections: no on-compact, left as it is
    except Unbounded as exc:
        assert "could not be followed" not in str(exc)  # the reader's bounds, not an accident


def test_a_section_past_the_end_is_malformed() -> None:
    data = COMPONENT_HEADER + b"\x00" + uleb(100) + b"\x01x"
    with pytest.raises(Malformed, match="a section runs past the end"):
        list(sections(data))
    with pytest.raises(Unbounded, match="a section runs past the end"):
        bound_compact(data, 10)


def test_a_code_section_claiming_billions_of_bodies_is_read_in_no_time() -> None:
    """A core module whose code section says 3,000,000 bodies and holds none: the count read
    on past the section, one body a step, a local each (4,294,967,295 bodies held the
    host ~1.5 h). Now the section's end ends it."""
    module = MODULE_HEADER + section(10, uleb(3_000_000))
    data = COMPONENT_HEADER + section(1, module) + section(0, b"\x01x")
    started = time.perf_counter()
    assert declared_locals(data) == 0
    assert time.perf_counter() - started < 0.5


def test_a_number_of_300_000_bytes_is_refused_in_no_time() -> None:
    """A section size of 300,000 bytes of 0xff: an ever larger integer, 4 s to read."""
    data = COMPONENT_HEADER + b"\x00" + b"\xff" * 300_000 + b"\x00"
    started = time.perf_counter()
    assert declared_locals(data) == 0
    assert time.perf_counter() - started < 0.5


def nested(depth: int, module: bytes) -> bytes:
    """``module`` inside ``depth`` components, each the only section of the next."""
    data = COMPONENT_HEADER + section(1, module)
    for _ in range(depth - 1):
        data = COMPONENT_HEADER + section(4, data)
    return data


def test_a_bomb_nested_990_deep_is_counted() -> None:
    """wasmtime compiles components nested up to 999 deep; the count recursed, and raised
    ``RecursionError`` past Python's limit (about 990 with pytest's frames): the hook host
    knew no such error."""
    bomb = locals_bomb(3)
    module = bomb[bomb.index(MODULE_HEADER) : bomb.index(b"\x04salt") - 2]  # its custom section
    assert declared_locals(nested(990, module)) == 150_000


def test_components_nested_past_the_limit_are_malformed() -> None:
    data = nested(MAX_NESTING + 1, MODULE_HEADER)
    with pytest.raises(Malformed, match="nested more than"):
        list(core_modules(data))
    assert declared_locals(data) == 0
    assert len(list(core_modules(nested(MAX_NESTING, MODULE_HEADER)))) == 1
