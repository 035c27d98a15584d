"""A seccomp filter that leaves a module process no socket, no keyring, no setuid bit and no
namespace.

Without a network grant ``socket`` and ``socketcall`` fail (``EACCES``), which also closes
loopback and Unix sockets visible in a root, at microseconds instead of a network namespace's
millisecond; ``socketpair`` stays (it reaches nothing outside the tree). For every module:
``keyctl``, ``add_key``, ``request_key`` fail (the session keyring survives ``fork`` and uid
changes); ``chmod``-family calls and ``open``/``mkdir``/``mknod`` with a setuid or setgid mode
fail; ``openat2`` and ``io_uring_setup`` fail with ``ENOSYS`` (the filter cannot read their
arguments, and io_uring bypasses the rest). Another syscall ABI kills the process.

No namespace either (``EPERM``): ``unshare`` and ``clone`` with a namespace flag, and
``setns``. In a user namespace of its own a module holds every capability, and with them
the kernel code that only root could reach before (mounts, netfilter, BPF...): the kernel's
largest attack surface for an unprivileged process. ``clone3`` takes its flags in memory,
where a filter cannot read them, so it fails with ``ENOSYS``, and the C library falls back to
``clone`` (threads, ``posix_spawn``: Docker's default profile does the same). Thread and
process flags stay allowed; only the namespace bits are refused.

SysV IPC (``shmget``, ``semget``, ``msgget`` and the rest, the ``ipc`` multiplexer where the
architecture has it) and POSIX message queues fail (``EPERM``) in the filter of a sandbox
without an IPC namespace (``sysv_ipc=False``: Landlock and the subreaper, as in a default
Docker container): there their objects are the host's, outlive the call and the kernel (a
256 MiB segment stays pinned until ``ipcrm``), and another account's module, or the
module's own uid's processes, share them. Under bubblewrap and the zygote each call has an
IPC namespace of its own, gone with the call, so they stay allowed there.

bubblewrap loads the program (``--seccomp FD``); without it the child does, in
:meth:`Filter.apply`, after ``PR_SET_NO_NEW_PRIVS``. Known limit: ``/proc/net`` stays readable.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import socket
import tempfile
import threading
from typing import Any

from murmur_nb._files.libc import libc
from murmur_nb._files.sealed import sealed_bytes

__all__ = ["Filter", "kept_program_fd", "program", "program_fd"]

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


#: CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
#: CLONE_NEWNET (linux/sched.h); ``unshare`` also takes CLONE_NEWTIME, which in ``clone``'s
#: low byte would be the exit signal
_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                    0x40000000)
_CLONE_NEWTIME = 0x00000080
_CLONE3 = 435  # the same number on every architecture (Linux 5.3)


def _no_namespaces(rules: Any, pyseccomp: Any) -> None:
    """``unshare``/``clone`` with any namespace flag and ``setns`` fail; ``clone3`` is absent.

    Not skipped like other rules: a filter that cannot hold these is not built at all."""
    refuse = pyseccomp.ERRNO(errno.EPERM)
    # clone's flags: the first argument, but the second on s390 (stack pointer first)
    clone_flags = 1 if platform.machine().startswith("s390") else 0
    for flag in (*_NAMESPACE_FLAGS, _CLONE_NEWTIME):
        rules.add_rule(refuse, "unshare", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    for flag in _NAMESPACE_FLAGS:
        rules.add_rule(refuse, "clone",
                       pyseccomp.Arg(clone_flags, pyseccomp.MASKED_EQ, flag, flag))
    rules.add_rule(refuse, "setns")
    try:
        rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    except (ValueError, RuntimeError, OSError):  # a libseccomp older than the call's name
        rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), _CLONE3)


#: SysV IPC and POSIX message queue calls: objects of the IPC namespace, the host's own where
#: there is no namespace (``ipc`` is the multiplexer of 32-bit x86, s390, PowerPC...)
_IPC_CALLS = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semtimedop",
              "semtimedop_time64", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "ipc",
              "mq_open", "mq_unlink", "mq_timedsend", "mq_timedsend_time64",
              "mq_timedreceive", "mq_timedreceive_time64", "mq_notify", "mq_getsetattr")


#: ``SOCK_TYPE_MASK``: a socket type without its ``SOCK_NONBLOCK``/``SOCK_CLOEXEC`` flags
_SOCK_TYPE_MASK = 0xF


def _no_sockets(rules: Any, pyseccomp: Any) -> None:
    """The rules of a module without a network grant: no socket of its own, and nothing
    that names an address. It shares the host's network namespace (the Unix names under
    ``\\0`` with it), so a pair of datagram sockets (``socketpair``, which it may still make
    for its own processes) could send to any bound name (``sendto``, or ``sendmsg``, whose
    address a filter cannot read), or be bound to one and receive: only stream and
    seqpacket pairs (which refuse an address), and no ``connect``, ``bind``, ``listen`` or
    ``sendto`` with an address."""
    refuse = pyseccomp.ERRNO(errno.EACCES)
    for name in ("socket", "socketcall", "connect", "bind", "listen"):
        _add(rules, refuse, name)
    _add(rules, refuse, "socketpair",
         pyseccomp.Arg(1, pyseccomp.MASKED_EQ, _SOCK_TYPE_MASK, socket.SOCK_DGRAM))  # fmt: skip
    _add(rules, refuse, "sendto", pyseccomp.Arg(4, pyseccomp.NE, 0))


def _add(rules: Any, action: Any, name: str, *args: Any) -> None:
    # a name that is not a system call on this architecture (or this libseccomp) is skipped
    with contextlib.suppress(ValueError, RuntimeError, OSError):
        rules.add_rule(action, name, *args)


@functools.cache
def program(*, sockets: bool = False, sysv_ipc: bool = False) -> tuple[bytes | None, str]:
    """``(bpf, status)``: the compiled filter, or ``None`` and why it is not available.

    ``sockets=True`` is the filter of a module with a network grant: no socket rule, every
    other rule kept. ``sysv_ipc=True`` leaves SysV IPC and message queues allowed: for a
    sandbox with an IPC namespace of its own (bubblewrap, the zygote), never without one.
    """
    try:
        import pyseccomp  # noqa: PLC0415 - optional at run time: libseccomp may be missing
    except (ImportError, OSError) as exc:
        return None, f"libseccomp is not available ({exc})"
    try:
        rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
        if not sockets:
            _no_sockets(rules, pyseccomp)
        for name in ("io_uring_setup", "openat2"):
            _add(rules, pyseccomp.ERRNO(errno.ENOSYS), name)
        for name in ("keyctl", "add_key", "request_key"):
            _add(rules, pyseccomp.ERRNO(errno.EPERM), name)
        if not sysv_ipc:
            for name in _IPC_CALLS:
                _add(rules, pyseccomp.ERRNO(errno.EPERM), name)
        for name, index in _MODE_ARG.items():
            for bit in (0o4000, 0o2000):
                _add(rules, pyseccomp.ERRNO(errno.EPERM), name,
                     pyseccomp.Arg(index, pyseccomp.MASKED_EQ, bit, bit))
        _no_namespaces(rules, pyseccomp)
        with tempfile.TemporaryFile() as fh:
            rules.export_bpf(fh)
            fh.seek(0)
            bpf = fh.read()
    except (ValueError, RuntimeError, OSError) as exc:
        return None, f"libseccomp cannot build the filter ({exc})"
    what = "no keyring, no setuid bits, no namespaces" + ("" if sysv_ipc else ", no SysV IPC")
    what += "" if sockets else ", no sockets (stream pairs of its own only)"
    return bpf, f"seccomp filter, {len(bpf) // 8} BPF instructions: {what}"


_KEPT: dict[bytes, int] = {}
_KEPT_LOCK = threading.Lock()


def kept_program_fd(bpf: bytes) -> int:
    """A sealed ``memfd`` holding ``bpf``, made once per process and never closed: what the
    zygote reads a call's program from (with ``pread``, at offset 0, so one descriptor
    serves every call, where a pipe per call is about 11 us of the kernel's CPU). Not for
    bwrap, which reads its ``--seccomp`` descriptor to its end: :func:`program_fd`."""
    with _KEPT_LOCK:
        fd = _KEPT.get(bpf)
        if fd is None:
            fd = _KEPT[bpf] = sealed_bytes(bpf, "murmur-nb-seccomp")
        return fd


def program_fd(bpf: bytes) -> int:
    """A pipe's read end holding ``bpf`` (for ``bwrap --seccomp FD``); the caller closes it."""
    read, write = os.pipe()
    try:
        os.write(write, bpf)  # a few hundred bytes: always fits the pipe's buffer
    finally:
        os.close(write)
    return read
