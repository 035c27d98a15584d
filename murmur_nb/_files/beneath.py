"""Files opened beneath a folder, never leaving it; copied and read from the descriptor.

:func:`open_beneath` opens a relative path from a folder descriptor in one ``openat2`` that
refuses any link (``RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH``), or where a kernel or a
container's seccomp profile refuses ``openat2``, one component at a time (``openat`` with
``O_NOFOLLOW``), so a component that is or becomes a link fails the open. By
default it follows no link (for canonical paths the host resolved and confined); with
``inner_links=True`` it follows links only while they stay inside (for paths a module wrote,
such as a skill's): ``..`` never climbs out, an absolute target must lie inside, at most 40
links, and :class:`Outside` says how a path would leave. The final file is opened
``O_NONBLOCK`` (a FIFO never blocks). Callers check the descriptor (:func:`one_file_problem`:
regular file, one link) and then hash, copy or read that descriptor, never the path again.
Hashing is :func:`murmur_nb._rules.sha256_fd`; :func:`copy_sparse` copies data extents only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from pathlib import Path

from murmur_nb._files.libc import open_no_links
from murmur_nb._rules import NotReadable, file_kind

__all__ = [
    "Outside",
    "copy_sparse",
    "one_file_problem",
    "open_beneath",
    "proc_path",
    "read_at_most",
    "real_path",
]

_BUF = 1 << 20
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Outside(Exception):
    """The path would leave the folder (or names no file); the message says how."""


def one_file_problem(st: os.stat_result) -> str | None:
    """The one rule for a file opened beneath a folder to be read or written: a regular file
    with exactly one link (another link would reach it from outside the folder).

    ``None`` when it holds, else what is wrong, e.g. ``"has 2 hard links (it is also a file
    elsewhere)"``; callers put their subject in front.
    """
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink != 1:
        return f"has {st.st_nlink} hard links (it is also a file elsewhere)"
    return None


def open_beneath(base: str | os.PathLike[str], rel: str, *, inner_links: bool = False) -> int:
    """A read-only descriptor of ``base/rel`` that never leaves ``base``.

    ``inner_links=False``: ``rel`` is a plain relative path and no component of it (nor
    ``base``) may be a link. ``inner_links=True``: links inside ``base`` are followed.

    Raises
    ------
    Outside
        (``inner_links=True``) The path leaves the folder or names a folder.
    NotReadable
        (``inner_links=True``) The file is not a regular file (a FIFO, a device, a folder):
        found by ``lstat`` and never opened, since the open of a FIFO releases a writer
        waiting on it and the open of some devices does something (a watchdog's arms it).
    OSError
        A component is missing, not a folder, or a link in the way (``ELOOP``/``ENOTDIR``).
    """
    if inner_links:
        return _open_following_inner_links(Path(base), rel)
    parts = rel.split("/")
    if not rel or any(p in {"", ".", ".."} for p in parts):
        raise OSError(errno.EINVAL, f"not a plain relative path: {rel!r}")
    fd = os.open(base, _DIR_FLAGS)
    try:
        try:
            opened = open_no_links(fd, rel, _FILE_FLAGS)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            opened = None  # a link on the way: the walk says where (ENOTDIR before the end)
        if opened is not None:
            return opened
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


def real_path(path: str | os.PathLike[str]) -> str:
    """``os.path.realpath(path)``, resolved by the kernel where it can be.

    For a path that exists, one ``open(O_PATH)`` and the ``readlink`` of its
    ``/proc/self/fd`` entry: three system calls instead of an ``lstat`` and a Python step
    per component (the host resolves a few paths on every call). Anything else (no
    ``/proc``, a missing path, a link loop) is ``os.path.realpath``'s.
    """
    try:
        fd = os.open(path, _PATH_FLAGS)
    except OSError:
        return os.path.realpath(path)
    try:
        real = os.readlink(f"{_FD_DIR}/{fd}")  # noqa: PTH115 - a str path, no Path made
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)
    return real if real.startswith("/") and not real.endswith(" (deleted)") else (
        os.path.realpath(path))


_PATH_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC
_MAX_LINKS = 40
_INNER_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_following_inner_links(folder: Path, path: str) -> int:
    """``open_beneath(folder, path, inner_links=True)``: one component at a time, a link
    read (``readlink``) and spliced into the rest of the path while it stays inside."""
    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    stack = [root]
    try:
        return _walk(stack, deque(path.split("/")), os.path.realpath(folder))
    finally:
        for fd in stack:
            os.close(fd)


def _walk(stack: list[int], parts: deque[str], root_real: str) -> int:
    links = 0
    while parts:
        name = parts.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            if len(stack) == 1:
                raise Outside("it climbs above the module folder")
            os.close(stack.pop())
            continue
        st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise Outside(f"it goes through more than {_MAX_LINKS} links")
            target = os.readlink(name, dir_fd=stack[-1])
            if target.startswith("/"):
                if os.path.commonpath([root_real, target]) != root_real:
                    raise Outside(f"a link in it points to {target!r}, outside the folder")
                while len(stack) > 1:
                    os.close(stack.pop())
                target = os.path.relpath(target, root_real)
            parts.extendleft(reversed(target.split("/")))
            continue
        if any(p not in ("", ".") for p in parts):
            stack.append(os.open(name, _INNER_DIR_FLAGS, dir_fd=stack[-1]))
            continue
        if not stat.S_ISREG(st.st_mode):  # never opened: the open itself can do something
            raise NotReadable(f"it is {file_kind(st)}, not a regular file")
        return os.open(name, _FILE_FLAGS, dir_fd=stack[-1])
    raise Outside("it names a folder, not a file")


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of ``fd``: one more than allowed tells the caller it is too big."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = os.read(fd, min(1 << 16, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)
