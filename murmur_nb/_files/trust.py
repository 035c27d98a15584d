"""Whether anyone but this user and root could have written a path: the one rule for caches.

A root kernel runs or loads from its caches what it built there earlier (the sandbox's C
helpers, compiled hooks). The cache may sit where another account can write (``sudo -E``
keeps a user's ``HOME``; a root container may get a user's ``HOME`` mounted): then what is in
it may be that account's, whatever its name and content say. So a cached file is used only
when the file and every folder above it, up to ``/``, belong to this user or root and nobody
else can change or replace them; otherwise its user builds it again in a fresh private
folder. A folder above counts as much as the file: whoever can write a folder can rename
what is in it and put something else in its place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["nobody_else_can_move_in", "nobody_else_can_write", "trusted_folder", "trusted_which"]


def nobody_else_can_write(path: Path) -> bool:
    """``path`` and every folder above it: this user's or root's, no link, and not writable
    by group or others; only a folder above may be a sticky one (``/tmp``), when its entry
    below is this user's.

    ``False`` also when a part cannot be read (it is missing, or not ours to look at).
    """
    return _held(path, below_is_ours=False)


def nobody_else_can_move_in(folder: Path) -> bool:
    """Whether what this user makes in ``folder`` stays as made: the rule of
    :func:`nobody_else_can_write` for an entry of this user's in ``folder``, so ``folder``
    itself may be a sticky one (``/tmp``: only an entry's owner may move it)."""
    return _held(folder, below_is_ours=True)


def _held(path: Path, *, below_is_ours: bool) -> bool:
    me = os.geteuid()
    try:
        current = Path(os.path.abspath(path))  # noqa: PTH100 - no link resolved
        while True:
            st = os.lstat(current)
            if stat.S_ISLNK(st.st_mode) or st.st_uid not in (me, 0):
                return False
            open_to_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            if open_to_others and not (st.st_mode & stat.S_ISVTX and below_is_ours):
                return False
            if current.parent == current:
                return True
            below_is_ours = st.st_uid == me
            current = current.parent
    except OSError:
        return False


def trusted_folder(shared: Path, private: Callable[[], Path]) -> Path:
    """``shared`` (made ``0700`` where missing) when nobody else can write it or a folder
    above it; else ``private()``. Nothing is made where someone else could write: the
    nearest folder of ``shared`` that exists is checked before anything is made below it (a
    link in another account's ``HOME`` would have it made wherever the link points)."""
    nearest = shared
    while not os.path.lexists(nearest) and nearest.parent != nearest:
        nearest = nearest.parent
    if nobody_else_can_write(nearest):
        with contextlib.suppress(OSError):
            shared.mkdir(mode=0o700, parents=True, exist_ok=True)
        if nobody_else_can_write(shared):
            return shared
    return private()


def trusted_which(name: str) -> str | None:
    """``shutil.which(name)``, but for a root process the first ``name`` on ``PATH`` that
    nobody else can write nor replace (:func:`nobody_else_can_write`, the file and every
    folder above it): a root kernel runs it unconfined, and ``PATH`` may name another
    account's folder first (``sudo --preserve-env``, an image whose ``bin`` folder its user
    owns). An untrusted one earlier on ``PATH`` is passed over, not run."""
    if os.geteuid() != 0:
        return shutil.which(name)
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not folder:
            continue
        found = shutil.which(name, path=folder)
        if found is not None and _trusted_chain(found):
            return found
    return None


def _trusted_chain(path: str) -> bool:
    """Whether nobody else can write the folder of each link ``path`` leads through
    (``/usr/bin/node`` -> ``/etc/alternatives/node`` -> ...), nor the file it ends at (nor
    a folder above it)."""
    current = Path(os.path.abspath(path))  # noqa: PTH100 - no link resolved
    try:
        for _ in range(40):  # the kernel's own bound on links followed
            if not current.is_symlink():
                return nobody_else_can_write(current)
            if not nobody_else_can_write(current.parent):
                return False
            current = Path(os.path.normpath(current.parent / current.readlink()))
    except OSError:
        pass
    return False
