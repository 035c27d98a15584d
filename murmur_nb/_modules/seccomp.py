"""A seccomp filter that leaves a module process no way to open a socket.

Design notes
------------
* **What it refuses.** ``socket`` (every address family: IP, loopback, Unix, abstract Unix,
  netlink, packet) fails with ``EACCES``; ``socketcall`` (the multiplexed form on
  architectures that have it) the same; ``io_uring_setup`` fails with ``ENOSYS``, since an
  io_uring can create sockets without the ``socket`` system call. ``socketpair`` stays
  allowed: the pair it makes reaches nothing outside the process tree (event loops use it).
  A system call of another ABI (32-bit ``int 0x80``, x32) kills the process, so the filter
  cannot be walked around.
* **Why not only a network namespace.** Without a socket, a module reaches neither the
  network, nor loopback, nor a Unix socket that happens to be visible in one of its roots
  (a network namespace leaves path-named Unix sockets reachable). Loading the filter costs
  microseconds, where creating a network namespace costs about a millisecond per call
  (measured side by side by ``benchmarks/bench_invoke.py``).
* **Who loads it.** bubblewrap (``--seccomp FD``, the program handed over through a pipe),
  right before it starts the module; without bubblewrap, the child itself between ``fork``
  and ``exec`` (:meth:`Filter.apply`, after Landlock when there is Landlock). Either way
  after ``PR_SET_NO_NEW_PRIVS``; the filter is inherited by every process the module starts
  and cannot be lifted. The program is compiled once per process with libseccomp (through
  ``pyseccomp``).
* **Known limit.** The module can still read the machine's socket tables under
  ``/proc/net`` (which ports are open, like any local user); it cannot use them.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import tempfile

__all__ = ["Filter", "program", "program_fd"]

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    """``struct sock_fprog``: a BPF program as ``prctl(PR_SET_SECCOMP)`` takes it."""

    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class Filter:
    """A compiled program, laid out in the host so that the child only makes system calls."""

    def __init__(self, bpf: bytes) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._buffer = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buffer, ctypes.c_void_p))

    def apply(self) -> None:
        """Load the filter into the calling process (a ``preexec_fn``: no lock, no import)."""
        if self._libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        prog = ctypes.byref(self._prog)
        if self._libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, prog, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


@functools.cache
def program() -> tuple[bytes | None, str]:
    """``(bpf, status)``: the compiled filter, or ``None`` and why it is not available."""
    try:
        import pyseccomp  # noqa: PLC0415 - optional at run time: libseccomp may be missing
    except (ImportError, OSError) as exc:
        return None, f"libseccomp is not available ({exc})"
    try:
        rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
        rules.add_rule(pyseccomp.ERRNO(errno.EACCES), "socket")
        for name, code in (("socketcall", errno.EACCES), ("io_uring_setup", errno.ENOSYS)):
            try:
                rules.add_rule(pyseccomp.ERRNO(code), name)
            except (ValueError, RuntimeError, OSError):
                continue  # not a system call on this architecture
        with tempfile.TemporaryFile() as fh:
            rules.export_bpf(fh)
            fh.seek(0)
            bpf = fh.read()
    except (ValueError, RuntimeError, OSError) as exc:
        return None, f"libseccomp cannot build the filter ({exc})"
    return bpf, f"seccomp filter, {len(bpf) // 8} BPF instructions: no sockets"


def program_fd(bpf: bytes) -> int:
    """A pipe's read end holding ``bpf`` (for ``bwrap --seccomp FD``); the caller closes it."""
    read, write = os.pipe()
    try:
        os.write(write, bpf)  # a few hundred bytes: always fits the pipe's buffer
    finally:
        os.close(write)
    return read
