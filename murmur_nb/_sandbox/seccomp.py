"""A seccomp filter that leaves a module process no socket, no keyring and no setuid bit.

Design notes
------------
* **What it refuses.** ``socket`` (every address family: IP, loopback, Unix, abstract Unix,
  netlink, packet) fails with ``EACCES``; ``socketcall`` (the multiplexed form on
  architectures that have it) the same; ``io_uring_setup`` fails with ``ENOSYS``, since an
  io_uring can create sockets without the ``socket`` system call. ``socketpair`` stays
  allowed: the pair it makes reaches nothing outside the process tree (event loops use it).
  A system call of another ABI (32-bit ``int 0x80``, x32) kills the process, so the filter
  cannot be walked around.
* **Also with a network grant.** Every module gets the same filter minus the socket rules:
  ``keyctl``, ``add_key`` and ``request_key`` fail with ``EPERM`` (the kernel's session
  keyring is inherited across ``fork``, and a uid change does not leave it: this is what
  keeps a secret the notebook put there out of reach, and two modules from passing one
  through it); ``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``, and ``open``, ``openat``,
  ``creat``, ``mkdir``, ``mkdirat``, ``mknod``, ``mknodat`` with a mode holding the setuid
  or setgid bit fail with ``EPERM`` (no setuid file is left behind for someone on the host
  to run); ``openat2`` (whose mode sits in a struct the filter cannot read) fails with
  ``ENOSYS``, so libraries fall back to ``openat``; ``io_uring_setup`` fails with ``ENOSYS``
  (an io_uring opens files and sockets without these system calls).
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

import contextlib
import ctypes
import errno
import functools
import os
import tempfile
from typing import Any

from murmur_nb._sandbox.libc import libc

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
        self._libc = libc()
        self._buffer = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buffer, ctypes.c_void_p))

    def apply(self) -> None:
        """Load the filter into the calling process (a ``preexec_fn``: no lock, no import)."""
        if self._libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        prog = ctypes.byref(self._prog)
        if self._libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, prog, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


_PRIVILEGED_BITS = 0o6000  # S_ISUID | S_ISGID
#: system call -> index of its mode argument
_MODE_ARG = {
    "chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "open": 2, "openat": 3,
    "creat": 1, "mkdir": 1, "mkdirat": 2, "mknod": 1, "mknodat": 2,
}


def _add(rules: Any, action: Any, name: str, *args: Any) -> None:
    # a name that is not a system call on this architecture (or this libseccomp) is skipped
    with contextlib.suppress(ValueError, RuntimeError, OSError):
        rules.add_rule(action, name, *args)


@functools.cache
def program(*, sockets: bool = False) -> tuple[bytes | None, str]:
    """``(bpf, status)``: the compiled filter, or ``None`` and why it is not available.

    ``sockets=True`` is the filter of a module with a network grant: no socket rule, every
    other rule kept.
    """
    try:
        import pyseccomp  # noqa: PLC0415 - optional at run time: libseccomp may be missing
    except (ImportError, OSError) as exc:
        return None, f"libseccomp is not available ({exc})"
    try:
        rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
        if not sockets:
            for name in ("socket", "socketcall"):
                _add(rules, pyseccomp.ERRNO(errno.EACCES), name)
        for name in ("io_uring_setup", "openat2"):
            _add(rules, pyseccomp.ERRNO(errno.ENOSYS), name)
        for name in ("keyctl", "add_key", "request_key"):
            _add(rules, pyseccomp.ERRNO(errno.EPERM), name)
        for name, index in _MODE_ARG.items():
            for bit in (0o4000, 0o2000):
                _add(rules, pyseccomp.ERRNO(errno.EPERM), name,
                     pyseccomp.Arg(index, pyseccomp.MASKED_EQ, bit, bit))
        with tempfile.TemporaryFile() as fh:
            rules.export_bpf(fh)
            fh.seek(0)
            bpf = fh.read()
    except (ValueError, RuntimeError, OSError) as exc:
        return None, f"libseccomp cannot build the filter ({exc})"
    what = "no keyring, no setuid bits" + ("" if sockets else ", no sockets")
    return bpf, f"seccomp filter, {len(bpf) // 8} BPF instructions: {what}"


def program_fd(bpf: bytes) -> int:
    """A pipe's read end holding ``bpf`` (for ``bwrap --seccomp FD``); the caller closes it."""
    read, write = os.pipe()
    try:
        os.write(write, bpf)  # a few hundred bytes: always fits the pipe's buffer
    finally:
        os.close(write)
    return read
