"""The one handle on the C library that the sandbox calls into (``prctl``, ``unshare``, the
Landlock system calls), loaded once at import."""

from __future__ import annotations

import ctypes

__all__ = ["LIBC", "libc"]


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
