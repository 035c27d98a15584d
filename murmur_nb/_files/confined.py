"""Open a file beneath a folder without following links out of it.

The kernel's ``openat2(RESOLVE_BENEATH)`` is not reachable from Python, so the walk is done
here, one path component at a time, each opened relative to its parent's descriptor
(``dir_fd``) with ``O_NOFOLLOW``. A component that is a link is read (``readlink``) and
spliced into the rest of the path, so links are followed only while they stay inside: ``..``
never climbs above the folder, an absolute target must lie inside the folder's real path,
and at most 40 links are followed. A component swapped for a link between the check and the
open fails the ``O_NOFOLLOW`` open. The final file is opened ``O_NONBLOCK``, so a FIFO never
blocks the host; the caller checks with ``fstat`` that it is a regular file.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from pathlib import Path

__all__ = ["Outside", "open_beneath", "read_at_most"]

_MAX_LINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Outside(Exception):
    """The path would leave the module folder (or names no file); the message says how."""


def open_beneath(folder: Path, path: str) -> int:
    """A read-only fd of ``path`` beneath ``folder``; links are followed only inside it.

    Raises
    ------
    Outside
        The path leaves the folder or names a folder; the message says how.
    OSError
        A component is missing, not a folder, or was swapped for a link.
    """
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
            stack.append(os.open(name, _DIR_FLAGS, dir_fd=stack[-1]))
            continue
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
