"""Files opened beneath a folder without following any link, hashed and copied from the fd.

Design notes
------------
* **No link is ever followed.** :func:`open_beneath` walks a relative path one component
  at a time from a folder's descriptor (``openat`` with ``O_NOFOLLOW``; folders with
  ``O_DIRECTORY``), so a component that is a symbolic link, or becomes one while the walk
  runs, fails the open instead of leading elsewhere. Callers pass the *canonical* path
  (links already resolved and confined), so a legitimate file never needs a link here.
* **Use what was checked.** The caller ``fstat``-checks the descriptor it got (regular
  file, one hard link, the expected size) and then hashes, copies or reads *that*
  descriptor: swapping the path afterwards changes nothing the host reads.
* **Bounded work.** Hashing is :func:`murmur_nb._rules.sha256_fd` (``BudgetSpent`` past a
  monotonic deadline); :func:`copy_sparse` copies only the data extents (``SEEK_DATA`` /
  ``SEEK_HOLE``), so a sparse file stays sparse.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["copy_sparse", "open_beneath", "proc_path"]

_BUF = 1 << 20
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_beneath(base: str | os.PathLike[str], rel: str) -> int:
    """A read-only descriptor of ``base/rel``, no component of ``rel`` (nor ``base``) a link.

    Raises ``OSError`` (``ELOOP``/``ENOTDIR`` when a link is in the way).
    """
    parts = rel.split("/")
    if not rel or any(p in {"", ".", ".."} for p in parts):
        raise OSError(errno.EINVAL, f"not a plain relative path: {rel!r}")
    fd = os.open(base, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """``(start, end)`` of every data extent of ``fd`` (the whole file if holes are unknown)."""
    extents: list[tuple[int, int]] = []
    offset = 0
    try:
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole is left
                    break
                raise
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            extents.append((start, end))
            offset = end
    except (OSError, AttributeError):
        return [(0, size)]
    return extents


def copy_sparse(src: int, dst: int, size: int) -> None:
    """Copy ``size`` bytes of ``src`` to ``dst``, data extents only; holes stay holes."""
    for start, end in _extents(src, size):
        offset = start
        while offset < end:
            try:
                n = os.copy_file_range(src, dst, end - offset, offset, offset)
            except OSError:
                n = 0
            if n == 0:
                chunk = os.pread(src, min(_BUF, end - offset), offset)
                if not chunk:
                    break
                n = os.pwrite(dst, chunk, offset)
            offset += n
    os.ftruncate(dst, size)


_FD_DIR = "/proc/self/fd" if Path("/proc/self/fd").is_dir() else "/dev/fd"


def proc_path(fd: int) -> str:
    """A path that opens the very file ``fd`` refers to, whatever its name is now.

    ``/proc/self/fd/N`` on Linux (a fresh open of that file); ``/dev/fd/N`` elsewhere.
    """
    return f"{_FD_DIR}/{fd}"
