"""Compiling a component in a child process, bounded in time and memory, that the kernel kills.

A compile in the kernel cannot be interrupted (Ctrl-C waits for cranelift), its memory is the
kernel's and a crash in the compiler takes the kernel with it; the static bound of
:mod:`.compile_cost` catches the cheapest amplifier (locals) but not the plain one, many
small functions (a component of empty functions compiles at ~40 ms a KiB: 4 MiB of them, a
few minutes). So :func:`compile_in_child` runs :mod:`.compiler` as ``sys.executable -I`` in a
session of its own, with no environment but ``LD_LIBRARY_PATH`` (what the interpreter itself
may need to start), and:

* bounds its wall-clock time by :func:`compile_seconds` (``$MURMUR_NB_HOOK_COMPILE_S``, as
  the kernel read it when it loaded ``murmur.yaml``: :class:`CompileBounds`): past
  it the child's process group is killed (``SIGKILL``) and :class:`TooCostly` raised;
* bounds its data segment by :func:`compile_megabytes` (``$MURMUR_NB_HOOK_COMPILE_MB``): an
  allocation past it fails in the child, which dies of it, and :class:`TooCostly` is raised;
* kills it and re-raises on ``KeyboardInterrupt`` (or anything else) while waiting;
* turns any other death (a signal, a crash, a reply that is not a frame) into
  :class:`CompileFailed`, with the last lines the child wrote to stderr.

The component goes to the child and its compiled form comes back over a Unix socket pair
(the demo hook's 37 MiB in ~50 ms; the child's fixed cost, spawn, ``import wasmtime`` and an
engine, is ~80 ms). What the child sends back is machine code to deserialize, so nobody but
it may write into the channel: a pipe's end can be reopened through ``/proc/<pid>/fd`` by
any process of the user, a socket's cannot.

Measured on the componentize-py demo hook (18 MiB): the same CPU as in the kernel (~15 s
on 2 cores, ~8 s of wall time when they are idle), and the kernel's peak RSS 470 -> 180 MiB.
Its compile fails with ``RLIMIT_DATA`` at 450 MiB and passes at 520 (the input and the
serialized output are in the child's memory too). The defaults, 120 s and 2,048 MiB, leave
room for a slower or busier machine and a hook a few times as large.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from murmur_nb._files.scratch import temp_folder
from murmur_nb._hooks.guest_code import compiler
from murmur_nb._hooks.guest_code.compile_cost import (
    DEFAULT_MAX_LOCALS,
    TooCostly,
    max_locals,
    whole_number,
)

__all__ = [
    "DEFAULT_COMPILE_MB",
    "DEFAULT_COMPILE_S",
    "MOST_COMPILE_MB",
    "MOST_COMPILE_S",
    "CompileBounds",
    "CompileFailed",
    "compile_in_child",
    "compile_megabytes",
    "compile_seconds",
]

#: seconds a compile may take unless ``$MURMUR_NB_HOOK_COMPILE_S`` says otherwise: the demo
#: hook takes ~8 s on 2 cores
DEFAULT_COMPILE_S = 120

#: MiB of data segment a compile may use unless ``$MURMUR_NB_HOOK_COMPILE_MB`` says otherwise:
#: the demo hook needs ~420
DEFAULT_COMPILE_MB = 2048

#: the most ``$MURMUR_NB_HOOK_COMPILE_S`` takes (11.6 days: no bound, in effect): a socket's
#: timeout stops near 9.2e9 s, and 1e10 raised ``OverflowError`` out of ``HookHost.from_config``
MOST_COMPILE_S = 1_000_000

#: the most ``$MURMUR_NB_HOOK_COMPILE_MB`` takes (1 PiB: no bound, in effect): ``RLIMIT_DATA``
#: in bytes must fit a C ``long``, and 2**43 MiB killed every compiling child at its start
MOST_COMPILE_MB = 1 << 30

_STDERR_TAIL = 2000  # the characters of the child's stderr a message quotes


class CompileFailed(RuntimeError):
    """The compiling child died (a signal, a crash) or answered what no compile does, or its
    compiled form is not for this engine; the component was not loaded."""


def compile_seconds() -> int:
    """``$MURMUR_NB_HOOK_COMPILE_S``, else :data:`DEFAULT_COMPILE_S`: the seconds one compile
    may take, spawning the child included."""
    return whole_number("MURMUR_NB_HOOK_COMPILE_S", DEFAULT_COMPILE_S, "seconds",
                        "hooks are compiled with", MOST_COMPILE_S)  # fmt: skip


def compile_megabytes() -> int:
    """``$MURMUR_NB_HOOK_COMPILE_MB``, else :data:`DEFAULT_COMPILE_MB`: the MiB of data
    segment (``RLIMIT_DATA``) the compiling child may use, the interpreter's own included."""
    return whole_number("MURMUR_NB_HOOK_COMPILE_MB", DEFAULT_COMPILE_MB, "MiB",
                        "hooks are compiled with", MOST_COMPILE_MB)  # fmt: skip


@dataclass(frozen=True)
class CompileBounds:
    """What compiling one hook component may cost: its locals (checked before, in this
    process: :mod:`.compile_cost`), the child's seconds and MiB.

    Read from the environment once (:meth:`from_environment`), when a ``murmur.yaml`` is
    loaded (``HookConfig.compile_bounds``), and carried from there to whatever compiles its
    hooks: a replay's Dask workers apply the kernel's bounds, not their own environment's.
    """

    max_locals: int = DEFAULT_MAX_LOCALS
    seconds: int = DEFAULT_COMPILE_S
    megabytes: int = DEFAULT_COMPILE_MB

    @classmethod
    def from_environment(cls) -> CompileBounds:
        """``$MURMUR_NB_HOOK_MAX_LOCALS``, ``$MURMUR_NB_HOOK_COMPILE_S`` and
        ``$MURMUR_NB_HOOK_COMPILE_MB``, each its default when unset or not a bound."""
        return cls(max_locals(), compile_seconds(), compile_megabytes())


def child_command(megabytes: int) -> list[str]:
    """The compiling child's command line: the kernel's interpreter, isolated, running
    :mod:`.compiler` with the kernel's ``wasmtime`` folder, the bound and the kernel's pid."""
    import wasmtime  # noqa: PLC0415 - loaded already: the kernel's engine exists

    if not sys.executable:
        raise CompileFailed(
            "this Python reports no interpreter (sys.executable is empty) to compile hooks in; "
            "run the kernel from a regular Python installation"
        )
    folder = str(Path(wasmtime.__file__).resolve().parent.parent)
    script = str(Path(compiler.__file__).resolve())
    return [sys.executable, "-I", script, folder, str(megabytes << 20), str(os.getpid())]


def child_environment() -> dict[str, str]:
    """What the child inherits: ``LD_LIBRARY_PATH`` alone, when set (a shared ``libpython``
    outside the loader's paths needs it to start at all); ``-I`` ignores ``PYTHON*``."""
    kept = os.environ.get("LD_LIBRARY_PATH")
    return {"LD_LIBRARY_PATH": kept} if kept else {}


def spawn(command: list[str], end: socket.socket, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start the child in a session of its own (its process group is what is killed),
    ``end`` its stdin and stdout."""
    return subprocess.Popen(
        command,
        stdin=end.fileno(),
        stdout=end.fileno(),
        stderr=stderr,
        env=child_environment(),
        cwd="/",
        start_new_session=True,
    )


def kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the child's process group, then reap the child (until then its pid, and so its
    group id, cannot be reused)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def remaining(deadline: float) -> float:
    """Seconds until ``deadline`` (``time.monotonic()``); ``TimeoutError`` once past it."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def receive(sock: socket.socket, size: int, deadline: float) -> bytearray:
    """Exactly ``size`` bytes from ``sock`` (fewer when it ends first), by ``deadline``."""
    out = bytearray(size)
    view, got = memoryview(out), 0
    while got < size:
        sock.settimeout(remaining(deadline))
        count = sock.recv_into(view[got:])
        if not count:
            return out[:got]
        got += count
    return out


def exchange(
    sock: socket.socket, data: bytes, limit: int, deadline: float
) -> tuple[bytes, bytearray]:
    """Send ``data``, then read the child's one frame: ``(kind, payload)``; a kind of
    ``b""`` when the child ended without a whole frame (its exit status says how), or with
    a payload past ``limit``."""
    try:
        sock.settimeout(remaining(deadline))
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        header = receive(sock, compiler.FRAME.size, deadline)
        if len(header) < compiler.FRAME.size:
            return b"", bytearray()
        kind, size = compiler.FRAME.unpack(header)
        payload = receive(sock, size, deadline) if size <= limit else bytearray()
    except (BrokenPipeError, ConnectionResetError):  # it died with our bytes unread
        return b"", bytearray()
    return (kind, payload) if len(payload) == size else (b"", bytearray())


def run_child(
    data: bytes, seconds: int, megabytes: int, stderr: IO[bytes]
) -> tuple[bytes, bytearray, int]:
    """Compile ``data`` in a child: ``(kind, payload, exit status)``. Past ``seconds`` the
    child is killed and ``TimeoutError`` raised; on any exception (``KeyboardInterrupt``
    too) it is killed, then the exception goes on."""
    deadline = time.monotonic() + seconds
    ours, theirs = socket.socketpair()
    with ours:
        try:
            process = spawn(child_command(megabytes), theirs, stderr)
        finally:
            theirs.close()
        try:
            kind, payload = exchange(ours, data, megabytes << 20, deadline)
            status = process.wait(timeout=remaining(deadline))
        except subprocess.TimeoutExpired:
            kill(process)
            raise TimeoutError from None
        except BaseException:
            kill(process)
            raise
    return kind, payload, status


def stderr_tail(stderr: IO[bytes]) -> str:
    """The last lines the child wrote to ``stderr``, as one line."""
    stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, stderr.tell() - _STDERR_TAIL))
    text = stderr.read().decode("utf-8", "replace").strip()
    return " | ".join(line for line in text.splitlines() if line.strip())


def out_of_memory(status: int, said: str) -> bool:
    """Whether the child died of its memory bound: ``MemoryError`` in Python, or Rust's
    failed allocation (its message, then ``abort``)."""
    if status == compiler.MEMORY_EXIT:
        return True
    return status == -signal.SIGABRT and "memory allocation of" in said


def ending(status: int) -> str:
    """How a child with this exit status ended: ``killed by SIGSEGV``, ``exit status 1``."""
    if status >= 0:
        return f"exit status {status}"
    try:
        return f"killed by {signal.Signals(-status).name}"
    except ValueError:  # a number Python has no name for
        return f"killed by signal {-status}"


def death(name: str, status: int, said: str, megabytes: int) -> Exception:
    """What a child that sent no whole frame died of, as the error to raise."""
    if out_of_memory(status, said):
        return TooCostly(
            f"compiling {name} needed more than the {megabytes:,} MiB a hook's compile may use "
            "($MURMUR_NB_HOOK_COMPILE_MB), so it failed in its compiler process and the hook "
            "was not loaded; if you trust the hook, raise $MURMUR_NB_HOOK_COMPILE_MB before "
            "loading the hooks, else fix it (many or large functions cost memory to compile)"
        )
    return CompileFailed(
        f"the process compiling {name} ended without a compiled component ({ending(status)}"
        + (f"; it said: {said}" if said else "")
        + "); the hook was not loaded. Load the hooks again; if it happens again, report "
        "it with this message"
    )


def too_slow(name: str, seconds: int) -> TooCostly:
    return TooCostly(
        f"compiling {name} took longer than the {seconds:,} s a hook's compile may take "
        "($MURMUR_NB_HOOK_COMPILE_S), so its compiler process was killed and the hook was not "
        "loaded; if you trust the hook, raise $MURMUR_NB_HOOK_COMPILE_S before loading the "
        "hooks, else fix it (many or large functions compile slowly)"
    )


def compile_in_child(data: bytes, name: str, bounds: CompileBounds) -> bytearray:
    """The serialized compiled form of the component ``data`` (named ``name`` in messages),
    compiled for :func:`~.compiler.engine_config` in a child process bounded by ``bounds``.

    Raises
    ------
    TooCostly
        The compile ran past ``bounds.seconds`` or ``bounds.megabytes``.
    wasmtime.WasmtimeError
        wasmtime refused the component.
    CompileFailed
        The child could not be started, or died otherwise.
    """
    from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use

    seconds, megabytes = bounds.seconds, bounds.megabytes
    with tempfile.TemporaryFile(dir=temp_folder()) as stderr:
        try:
            kind, payload, status = run_child(data, seconds, megabytes, stderr)
        except TimeoutError:
            raise too_slow(name, seconds) from None
        except OSError as exc:  # the child could not be started, or the socket failed
            raise CompileFailed(
                f"the process to compile {name} in could not be run ({exc}); the hook was not "
                "loaded"
            ) from exc
        if kind == b"C" and status == 0:
            return payload
        if kind == b"E" and status == 0:
            raise WasmtimeError(payload.decode("utf-8", "replace"))
        raise death(name, status, stderr_tail(stderr), megabytes)
