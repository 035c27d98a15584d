"""The engine configuration hooks run under, and the child process that compiles for it.

Cranelift's cost is not bounded by anything a host can read cheaply off the bytes (a
component of empty functions costs ~70 µs a function, four bytes each), so a component is
compiled in a child process the kernel can kill (:mod:`.compile_bounds`): this file is that
child's program. It is run by path (``python -I compiler.py``), not as ``-m murmur_nb...``,
so it imports nothing of murmur-nb (an isolated interpreter may find another copy of the
package, or none) and only the stdlib and the very ``wasmtime`` the kernel imported (its
folder comes as an argument). The kernel imports :func:`engine_config` from here too: one
copy of the configuration, so the compiled bytes are for the kernel's engine (wasmtime
refuses them otherwise).

The protocol, on the socket that is the child's stdin and stdout (a socket, not a pipe: a
pipe can be opened again through ``/proc/<pid>/fd`` by any process of the user and written
into, a socket cannot): the kernel sends the component's bytes and shuts its side for
writing; the child answers one frame, a kind byte (``C``: compiled, ``E``: wasmtime refused
the component, the payload its message), the payload's length (8 bytes, big-endian) and the
payload, then exits 0. A child that ran out of memory in Python exits with
:data:`MEMORY_EXIT`; one whose allocation failed in wasmtime is aborted by Rust
(``SIGABRT``, "memory allocation of N bytes failed" on stderr).

The child imports wasmtime and makes its engine first (a fixed cost, ~12 MiB with the
interpreter: under a bound, too small a bound would fail there as an ``ImportError``, which
says nothing of the component), asking to die with the kernel; then it bounds its data
segment (``RLIMIT_DATA``: heap and private writable mappings, which cranelift's memory is,
counted from what the process already uses; not the address space, which a thread's malloc
arenas reserve 64 MiB at a time and which grows with the machine's cores), drops core dumps
(a crashed compile's would be hundreds of MiB), and only then reads the component.
"""

from __future__ import annotations

import os
import resource
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wasmtime import Config, Engine

__all__ = ["ENGINE_FINGERPRINT", "FRAME", "MEMORY_EXIT", "engine_config", "main"]

#: what :func:`engine_config` sets, for the compiled-component cache's key
ENGINE_FINGERPRINT = (
    "component-model;epoch_interruption;consume_fuel;no-gc;no-exceptions;no-unwind-info"
)

#: a reply's header: its kind byte and its payload's length
FRAME = struct.Struct(">cQ")

#: the exit status of a child that ran out of memory in Python (``MemoryError``)
MEMORY_EXIT = 3

_PR_SET_PDEATHSIG = 1


def engine_config() -> Config:
    """The configuration of every hook engine: the kernel's and the compiling child's."""
    from wasmtime import Config  # noqa: PLC0415 - wasmtime loads on first use

    config = Config()
    config.epoch_interruption = True
    config.consume_fuel = True
    # No GC heap (see "What a guest may allocate"): refused at load, never run.
    config.wasm_gc = False
    config.wasm_function_references = False
    config.wasm_exceptions = False
    # No .eh_frame: only outside unwinders (a native debugger's) read it, never wasmtime's
    # traps or backtraces; the demo hook's compiled entry is 1 MiB smaller (38 -> 37 MiB),
    # and a cached load copies every byte of it (:mod:`murmur_nb._hooks.cache`).
    config.native_unwind_info = False
    return config


def die_with(parent: int) -> bool:
    """Ask to be killed when ``parent`` ends (Linux); ``False`` when it is gone already."""
    if sys.platform == "linux":
        import ctypes  # noqa: PLC0415 - only here

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL
    return os.getppid() == parent


def bound(data_bytes: int) -> None:
    """Bound this process's data segment to ``data_bytes`` (what it uses already counts)
    and write no core file."""
    resource.setrlimit(resource.RLIMIT_DATA, (data_bytes, data_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def read_all(fd: int) -> bytes:
    """Everything ``fd`` holds until its writer shuts it."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def compiled(engine: Engine, data: bytes) -> tuple[bytes, bytes | bytearray]:
    """``(kind, payload)``: ``C`` and the serialized component, or ``E`` and why wasmtime
    refused ``data``."""
    from wasmtime import WasmtimeError  # noqa: PLC0415 - imported by the kernel's path
    from wasmtime.component import Component  # noqa: PLC0415

    try:
        component = Component(engine, data)
    except WasmtimeError as exc:
        return b"E", str(exc).encode("utf-8", "replace")
    return b"C", component.serialize()


def reply(fd: int, kind: bytes, payload: bytes | bytearray) -> None:
    """Write one frame to ``fd``."""
    for part in (FRAME.pack(kind, len(payload)), payload):
        remaining = memoryview(part)
        while remaining:
            remaining = remaining[os.write(fd, remaining) :]


def main(argv: list[str]) -> int:
    """``compiler.py WASMTIME_FOLDER DATA_BYTES PARENT_PID``: compile stdin's component."""
    folder, data_bytes, parent = argv[0], int(argv[1]), int(argv[2])
    if not die_with(parent):
        return 1
    sys.path.insert(0, folder)  # the kernel's own wasmtime, however it found it
    from wasmtime import Engine  # noqa: PLC0415 - from that folder

    engine = Engine(engine_config())
    try:
        bound(data_bytes)
        kind, payload = compiled(engine, read_all(0))
        reply(1, kind, payload)
    except MemoryError:
        return MEMORY_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
