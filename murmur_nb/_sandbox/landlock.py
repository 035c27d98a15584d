"""Landlock through its three system calls: the fallback confinement when bubblewrap cannot run.

A binding of our own: the published one knows only ABI 1-3, and the host needs ABI 4 (TCP)
and ABI 6 (scopes), with the ruleset built in the host so the child makes just two calls
between ``fork`` and ``exec``. :func:`build_ruleset` opens every allowed path and adds its
rule; :meth:`Ruleset.preexec` (``preexec_fn``) sets ``PR_SET_NO_NEW_PRIVS`` and calls
``landlock_restrict_self``, which holds for every process the module starts. Enforced as far
as the kernel's ABI knows: read/execute beneath read paths and write beneath write paths
(``REFER``, ``TRUNCATE``, ``IOCTL_DEV`` when known); TCP ``bind``/``connect`` denied without a
network grant (not UDP); no signal to, or abstract socket of, a process outside. ``ptrace``
outside is never possible, but ``environ`` stays readable, so no ``/proc`` is granted at all.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from murmur_nb._files.libc import LIBC
from murmur_nb._sandbox import seccomp

__all__ = ["Ruleset", "abi_version", "build_ruleset"]

_SYS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 16, 32, 64, 128
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 256, 512, 1024, 2048, 4096
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2

_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_WRITE = (
    _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO
    | _MAKE_SYM | _REFER | _TRUNCATE
)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )




def abi_version() -> tuple[int, str]:
    """The kernel's Landlock ABI (0 when unavailable) and, when 0, why."""
    numbers = _SYS.get(platform.machine())
    if LIBC is None or numbers is None or platform.system() != "Linux":
        return 0, f"Landlock is a Linux feature; this is {platform.system()} {platform.machine()}"
    abi = int(LIBC.syscall(numbers[0], None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION))
    if abi < 0:
        err = ctypes.get_errno()
        return 0, f"the kernel refuses Landlock ({os.strerror(err)}); boot with lsm=...,landlock"
    return abi, ""


def _fs_mask(abi: int) -> int:
    mask = _READ | (_WRITE & ~(_REFER | _TRUNCATE)) | _MAKE_CHAR | _MAKE_BLOCK
    if abi >= 2:
        mask |= _REFER
    if abi >= 3:
        mask |= _TRUNCATE
    if abi >= 5:
        mask |= _IOCTL_DEV
    return mask


@dataclass
class Ruleset:
    """A Landlock ruleset built in the host; ``preexec`` applies it in the child, then the
    seccomp program, if one is given (built in the host too: the child only makes calls)."""

    fd: int
    abi: int
    restrict: int  # the landlock_restrict_self syscall number, looked up before fork
    seccomp: seccomp.Filter | None = None

    def preexec(self) -> None:
        """Run in the child between ``fork`` and ``exec`` (``subprocess`` ``preexec_fn``).

        First the child becomes the OOM killer's first choice (:func:`oom_first`)."""
        assert LIBC is not None
        oom_first()
        if LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if LIBC.syscall(self.restrict, self.fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
        if self.seccomp is not None:
            self.seccomp.apply()

    def close(self) -> None:
        """Close the ruleset (once: a second call closes nothing, so never a number reused
        meanwhile)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def oom_first(pid: int | None = None) -> None:
    """Raise the ``oom_score_adj`` of process ``pid`` (this one by default) to 1000, so a
    module that takes the machine's memory is killed before the kernel. Raising needs no
    privilege; a root kernel raising a child's also sets the floor the child cannot go below.
    Nothing changes where ``/proc`` cannot be written (a child that already switched to the
    sandbox uid cannot write its own: the switch made it non-dumpable, so the host writes it
    after the start). Safe between ``fork`` and ``exec``: two system calls and a close,
    nothing imported, no lock taken."""
    try:
        fd = os.open(f"/proc/{'self' if pid is None else pid}/oom_score_adj", os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, b"1000")
    except OSError:
        pass
    finally:
        os.close(fd)


def build_ruleset(
    abi: int,
    read: Iterable[str],
    write: Iterable[str],
    *,
    network: bool,
    socket_filter: seccomp.Filter | None = None,
) -> Ruleset:
    """A ruleset allowing reads beneath ``read``, reads and writes beneath ``write``.

    Missing paths are skipped. TCP is denied unless ``network``; signals and abstract UNIX
    sockets are scoped to the sandbox when the ABI knows scopes. ``socket_filter`` is loaded
    after the ruleset.
    """
    assert LIBC is not None
    create, add, restrict = _SYS[platform.machine()]
    fs = _fs_mask(abi)
    attr = _RulesetAttr(fs, 0, 0)
    size = 8
    if abi >= 4:
        size = 16
        if not network:
            attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        size = 24
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
    fd = int(LIBC.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), 0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        ruleset = Ruleset(fd, abi, restrict, socket_filter)
        for paths, rights in ((read, _READ), (write, _READ | _WRITE)):
            for path in paths:
                _add_path(ruleset, add, path, rights & fs)
    except BaseException:  # no caller will own the ruleset: close it here
        os.close(fd)
        raise
    return ruleset


def _add_path(ruleset: Ruleset, add: int, path: str, rights: int) -> None:
    assert LIBC is not None
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # absent on this machine: nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(pfd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(rights, pfd)
        if LIBC.syscall(add, ruleset.fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(pfd)
