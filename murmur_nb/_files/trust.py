"""Whether anyone but this user and root could have written a path: the one rule for caches.

A root kernel runs or loads from its caches what it built there earlier (the sandbox's C
helpers, compiled hooks). The cache may sit where another account can write (``sudo -E``
keeps a user's ``HOME``; a root container may get a user's ``HOME`` mounted): then what is in
it may be that account's, whatever its name and content say. So a cached file is used only
when the file and every folder above it, up to ``/``, belong to this user or root and nobody
else can change or replace them; otherwise its user builds it again in a fresh private
folder. A folder above counts as much as the file: whoever can write a folder can rename
what is in it and put something else in its place. A root kernel's batch journal is held to
the same rule, links followed (:func:`open_to_others`), since SQLite writes wherever its path
leads, and so are its artifact store and its runs folder, checked before any folder of them
is made (:func:`why_open_way`), since a link on the way would have root make the folders and
write staged files or modules' outputs wherever it points.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "from_working_folder",
    "nearest_open_to_others",
    "nobody_else_can_move_in",
    "nobody_else_can_write",
    "open_to_others",
    "tool_environment",
    "trusted_folder",
    "trusted_path",
    "trusted_which",
    "why_open",
    "why_open_way",
]


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


def open_to_others(path: str | os.PathLike[str]) -> Path | None:
    """The first part of the way to ``path`` that someone but this user and root owns or can
    write, ``None`` when there is none: ``path`` walked one name at a time as the kernel
    walks it, following each link (``/usr/bin/node`` -> ``/etc/alternatives/node`` -> ...),
    every folder passed through, every link and what the path ends at are this user's or
    root's and nobody else can write them (:func:`_kept`; a sticky folder only above an entry
    of this user's). A link nobody else can change may lead anywhere nobody else can change:
    what the path names then stays put. ``path`` itself when it is relative; the part that
    cannot be read (missing, or not ours to look at) when one cannot. A ``..`` is the folder
    above the one the walk is in, as for the kernel."""
    if not Path(path).is_absolute():
        return Path(path)
    me = os.geteuid()
    todo = list(reversed(Path(path).parts[1:]))  # the names still to walk, next one last
    current = Path("/")
    below = current
    try:
        here = os.lstat(current)  # the folder ``current``, checked with the entry below it
        followed = 0
        while todo:
            name = todo.pop()
            if name == "..":  # a folder walked and checked already, as is its parent
                current = current.parent
                here = os.lstat(current)
                continue
            below = current / name
            st = os.lstat(below)
            if not _kept(here, me, below_is_ours=st.st_uid == me):
                return current
            if st.st_uid not in (me, 0):
                return below
            if stat.S_ISLNK(st.st_mode):
                followed += 1
                if followed > 40:  # the kernel's own bound on links followed
                    return below
                target = below.readlink()
                if target.is_absolute():
                    current, here = Path("/"), os.lstat("/")
                todo.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
                continue
            current, here = below, st
        return None if _kept(here, me, below_is_ours=False) else current
    except OSError:
        return below


def from_working_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` taken from the working folder when relative, nothing resolved: a ``..``
    stays, for a walk (:func:`open_to_others`) to take as the kernel does, not as the text
    reads."""
    given = Path(os.fspath(path))
    return given if given.is_absolute() else Path.cwd() / given


def nearest_open_to_others(path: Path) -> Path | None:
    """:func:`open_to_others` of the nearest of ``path`` (absolute) and the folders above it
    that exists: what must be nobody else's before anything is made on the way to ``path``
    (a link another account put there would have the folders made wherever it points)."""
    return open_to_others(next(p for p in (path, *path.parents) if os.path.lexists(p)))


def why_open(part: Path) -> str:
    """What about ``part`` (one :func:`open_to_others` named) lets another account change
    it, said for a message: ``"<part> belongs to another account (uid N)"``, ``"another
    account can write <part>"``, or that it is missing or cannot be looked at."""
    try:
        owner = os.lstat(part).st_uid
    except OSError:
        return f"{part} is missing or cannot be looked at"
    if owner != os.geteuid():
        return f"{part} belongs to another account (uid {owner})"
    return f"another account can write {part}"


def why_open_way(path: str | os.PathLike[str]) -> str | None:
    """For a root process, what lets another account change the way to ``path`` before
    anything is made on it (:func:`why_open` of :func:`nearest_open_to_others`; a relative
    ``path`` taken from the working folder, a ``..`` in it walked as the kernel walks it),
    ``None`` when nobody can. Always ``None`` for a process that is not root: it can be led
    to make folders only where its user could make them anyway."""
    if os.geteuid() != 0:
        return None
    culprit = nearest_open_to_others(from_working_folder(path))
    return None if culprit is None else why_open(culprit)


def _plain(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names the same file by its text as the kernel finds by walking it:
    absolute (a relative one names another file once the working folder changes) and
    without ``..`` (after a link, ``..`` is the folder above the link's target, not above
    the link: ``<theirs>/link/../../usr/bin`` is ``/usr/bin`` by its text only)."""
    given = Path(path)
    return given.is_absolute() and ".." not in given.parts


def _held(path: Path, *, below_is_ours: bool) -> bool:
    if not _plain(path):
        return False
    me = os.geteuid()
    try:
        current = Path(path)
        while True:
            st = os.lstat(current)
            if stat.S_ISLNK(st.st_mode) or not _kept(st, me, below_is_ours):
                return False
            if current.parent == current:
                return True
            below_is_ours = st.st_uid == me
            current = current.parent
    except OSError:
        return False


def _kept(st: os.stat_result, me: int, below_is_ours: bool) -> bool:
    """Whether nobody but ``me`` and root can change the file or folder of ``st``: theirs,
    and not writable by group or others, unless it is a sticky folder whose entry below is
    ``me``'s (only an entry's owner may move it)."""
    if st.st_uid not in (me, 0):
        return False
    open_to_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return not open_to_others or bool(st.st_mode & stat.S_ISVTX and below_is_ours)


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
    for folder in trusted_path().split(os.pathsep):
        found = shutil.which(name, path=folder)
        if found is not None and _trusted_chain(found):
            return found
    return None


#: the proxy settings a root process's tools keep (a download goes the machine's way out; a
#: proxy cannot read or change what TLS carries)
_PROXIES = frozenset({"http_proxy", "https_proxy", "no_proxy", "all_proxy"})
#: variables naming a certificate bundle a tool adds to the ones it trusts: a root process's
#: tools keep one only when nobody else can write the file
_BUNDLES = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE")


def tool_environment(tmp: Path, home: Callable[[], Path] | None = None) -> dict[str, str]:
    """The environment of a build tool this process runs (the C compiler, componentize-py,
    node, npm), with ``tmp`` its temporary folder (``TMPDIR``, ``TMP``, ``TEMP``).

    A process that is not root: its own environment. A root process: only what nobody else
    can have put there for the tool to follow, since ``sudo --preserve-env`` may have handed
    it another account's: ``PATH`` of :func:`trusted_path`; ``HOME`` when nobody else can
    write it (else ``home()``, or none); ``LANG=C.UTF-8``; the proxy variables; a certificate
    bundle (``NODE_EXTRA_CA_CERTS``, ``SSL_CERT_FILE``) and the ``PYTHONPATH`` folders that
    nobody else can write. The rest stays out: ``NODE_OPTIONS=--require <file>`` runs that
    file in node, gcc's ``DEPENDENCIES_OUTPUT`` appends to any file, ``COMPILER_PATH`` picks
    its assembler, ``npm_config_registry`` where packages come from.
    """
    folder = os.fspath(tmp)
    if os.geteuid() != 0:
        return {**os.environ, "TMPDIR": folder, "TMP": folder, "TEMP": folder}
    env = {k: v for k, v in os.environ.items() if k.lower() in _PROXIES}
    env.update(PATH=trusted_path(), LANG="C.UTF-8", TMPDIR=folder, TMP=folder, TEMP=folder)
    given = os.environ.get("HOME", "")
    if given and nobody_else_can_write(Path(given)):
        env["HOME"] = given
    elif home is not None:
        env["HOME"] = os.fspath(home())
    for name in _BUNDLES:
        bundle = os.environ.get(name, "")
        if bundle and nobody_else_can_write(Path(bundle)):
            env[name] = bundle
    python_path = [
        f for f in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if f and nobody_else_can_write(Path(f))
    ]  # fmt: skip
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(python_path)
    return env


def trusted_path() -> str:
    """``PATH`` for what a root process runs: the folders of its ``PATH`` that nobody else
    can write (absolute, no ``..``, no link, :func:`nobody_else_can_write`), in their order;
    ``/usr/bin:/bin`` when none is. A tool found on it (``#!/usr/bin/env node``, gcc's
    ``as`` and ``ld``) is one nobody else put there. Another process's ``PATH`` as it is."""
    given = os.environ.get("PATH", os.defpath)
    if os.geteuid() != 0:
        return given
    kept = [f for f in dict.fromkeys(given.split(os.pathsep)) if nobody_else_can_write(Path(f))]
    return os.pathsep.join(kept) if kept else "/usr/bin:/bin"


def _trusted_chain(path: str) -> bool:
    """Whether nobody else can change where ``path`` (absolute, without ``..``) leads nor what
    it holds (:func:`open_to_others`)."""
    return _plain(path) and open_to_others(path) is None
