"""The one handle on the C library that the package calls into (the sandbox's ``prctl``,
``unshare`` and Landlock system calls; ``openat2`` for :mod:`.beneath`), loaded once at
import."""

from __future__ import annotations

import ctypes
import errno
import os

__all__ = ["LIBC", "libc", "open_no_links"]


def _load() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


#: ``None`` where no C library can be loaded (no mechanism that needs one is then offered).
LIBC = _load()


def libc() -> ctypes.CDLL:
    """:data:`LIBC`, or ``OSError`` when there is none (for a mechanism the caller needs)."""
    if LIBC is None:
        raise OSError("no C library could be loaded (ctypes.CDLL(None))")
    return LIBC


class _OpenHow(ctypes.Structure):
    """``struct open_how`` (linux/openat2.h)."""

    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]  # fmt: skip


#: ``openat2``'s number: one table for every architecture from 424 on (x86-64, arm64, ...)
_SYS_OPENAT2 = 437
#: no link at all on the way, magic ones (``/proc/<pid>/fd/N``) neither; and never above
#: the folder it starts from (linux/openat2.h)
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
#: what says ``openat2`` is not there to use: an older kernel (``ENOSYS``), a seccomp
#: profile that refuses it (``EPERM``, a container's), flags it does not know
_ABSENT = frozenset({errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG})
_OPENAT2: list[bool] = [LIBC is not None]


def open_no_links(folder: int, rel: str, flags: int) -> int | None:
    """``rel`` opened with ``flags`` from the open ``folder`` in one ``openat2`` call that
    refuses a symbolic link anywhere in it and any step above ``folder`` (``ELOOP``,
    ``EXDEV``, raised as ``OSError``); ``None`` where ``openat2`` cannot be used (then it is
    never tried again in this process)."""
    if not _OPENAT2[0] or LIBC is None:
        return None
    how = _OpenHow(flags, 0, _RESOLVE_NO_SYMLINKS | _RESOLVE_BENEATH)
    fd = LIBC.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_long(folder),
                      ctypes.c_char_p(os.fsencode(rel)), ctypes.byref(how),
                      ctypes.c_size_t(ctypes.sizeof(how)))  # fmt: skip
    if fd >= 0:
        return int(fd)
    code = ctypes.get_errno()
    if code in _ABSENT:
        _OPENAT2[0] = False
        return None
    raise OSError(code, os.strerror(code), rel)
