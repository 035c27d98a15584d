"""Sealed in-memory copies of files: bytes that nobody can change once they are checked.

A file on disk can be rewritten in place after it was hashed (same inode, same size): a
descriptor held open stops a swap of the path, not a write. A copy in a ``memfd`` sealed
with ``F_SEAL_WRITE``, ``F_SEAL_SHRINK`` and ``F_SEAL_GROW`` cannot change any more, through
any descriptor or mapping, so what is hashed after the seal is what every later read gets.
Nothing before the seal is trusted: until then a process that may look into this one's
descriptors (``/proc/<pid>/fd``) could write into the copy, so the hash that counts is the
one taken of the sealed copy.
"""

from __future__ import annotations

import fcntl
import os

__all__ = ["AVAILABLE", "SEALS", "copy_file", "sealed_bytes", "sealed_copy"]

#: a sealed memfd: its size and bytes are fixed, and so are its seals
SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
#: whether sealed copies can be made here (Linux: ``memfd_create``, ``/proc/self/fd``)
AVAILABLE = hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")  # noqa: PTH112


def copy_file(source: int, copy: int) -> None:
    """Copy the open file ``source`` into ``copy`` from their starts, in the kernel
    (``sendfile``: the bytes never pass through this process), to the source's end as it is
    when the copy reaches it."""
    done = 0
    while sent := os.sendfile(copy, source, done, 1 << 30):
        done += sent


def sealed_bytes(data: bytes, name: str) -> int:
    """A new sealed ``memfd`` (named ``name``) holding ``data``, its offset at the start."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def sealed_copy(source: int, name: str) -> int:
    """A new sealed ``memfd`` (named ``name``) holding the bytes of the open file ``source``;
    ``OSError`` when it cannot be made (no memory, a writable mapping of it: ``EBUSY``)."""
    copy = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        copy_file(source, copy)
        fcntl.fcntl(copy, fcntl.F_ADD_SEALS, SEALS)
    except BaseException:
        os.close(copy)
        raise
    return copy
