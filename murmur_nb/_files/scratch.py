"""Private temporary folders that a killed process does not leave behind for good.

A process makes folders of its own in the temporary folder: a host's runs folder, the
snapshot store, the sandbox helpers and the compiled components when the shared cache cannot
be trusted, a Dask worker's copy of what a kernel ships it (a module's snapshot, a replay's
components). It removes them when it closes or exits. A process killed with ``SIGKILL`` (the
OOM killer, a notebook kernel stopped at once, as nbval and a culling server may do, a nanny
giving up) runs no exit handler, so its folders would stay in the temporary folder forever.

Each folder made here therefore holds a lock file its process keeps locked (``flock``) for as
long as the folder is in use; the kernel drops a process's locks when it dies, however it
dies. Before making a folder, a process removes the folders of the same kind whose lock it
can take: their owner is gone.

The lock file appears under its name only once it is locked (made under another name, then
renamed), so a folder being made is never taken for an abandoned one. Only folders of this
user are looked at, never a link, and a folder without a lock file (made by an older version,
or being made) is left alone. A lock held on a shared file system works across containers
and PID namespaces, where a process id would not say whether its owner lives.

The folders go in Python's temporary folder (``TMPDIR``), but a root process's only where
nobody else can move what it makes (:func:`temp_folder`): ``sudo -E`` keeps a user's
``TMPDIR`` (``pam_tmpdir`` gives every user one of their own), and that user could rename a
folder root made there and put their own in its place, with the sandbox helper root runs
next in it. There a root process uses ``/tmp`` (or ``/var/tmp``) instead.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import secrets
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from murmur_nb._files.trust import nobody_else_can_move_in

__all__ = [
    "LOCK", "NotYet", "Settle", "held", "leave", "owned_folder", "process_folder", "release",
    "remove_tree", "sweep", "temp_folder",
]  # fmt: skip

#: the lock file in each folder, held by the folder's process
LOCK = ".owner.lock"

_held: dict[Path, int] = {}
_held_lock = threading.Lock()


#: what to do with an abandoned folder before it is removed (its owner died with work undone)
Settle = Callable[[Path], None]


class NotYet(Exception):
    """Raised by a :data:`Settle` that could not finish its folder's work for now (this
    process short of descriptors or memory): the folder stays for the next sweep."""


def temp_folder() -> Path:
    """The temporary folder this process makes its folders in: Python's
    (:func:`tempfile.gettempdir`: ``TMPDIR``, else ``/tmp``), unless this is a root process
    and someone else could move what it makes there
    (:func:`~murmur_nb._files.trust.nobody_else_can_move_in`); then ``/tmp`` or ``/var/tmp``,
    the first where nobody can."""
    base = Path(tempfile.gettempdir())
    if os.geteuid() != 0 or nobody_else_can_move_in(base):
        return base
    for other in (Path("/tmp"), Path("/var/tmp")):
        if nobody_else_can_move_in(other):
            return other
    return base  # no better place on this machine


def owned_folder(
    prefix: str, where: Path | None = None, *, settle: Settle | None = None
) -> Path:
    """A new ``0700`` folder in ``where`` (default :func:`temp_folder`), locked by this
    process (abandoned folders of the same ``prefix`` there settled and removed first);
    :func:`release` removes it."""
    sweep(prefix, where, settle=settle)
    base = where if where is not None else temp_folder()
    made = tempfile.mkdtemp(prefix=prefix, dir=base)
    fd = -1
    try:  # a folder without its lock file would never be swept: removed on any way out
        folder = Path(made)
        named = folder / f".lock-{secrets.token_hex(8)}"
        fd = os.open(named, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)  # fmt: skip
        fcntl.flock(fd, fcntl.LOCK_EX)
        named.rename(folder / LOCK)  # seen only once locked
        with _held_lock:
            _held[folder] = fd
    except BaseException:
        with _held_lock:  # an interrupt as the with block ended: held already
            _held.pop(Path(made), None)
        if fd >= 0:
            os.close(fd)
        remove_tree(Path(made))
        raise
    return folder


def held() -> list[Path]:
    """The folders this process holds now (made by :func:`owned_folder`, not yet released)."""
    with _held_lock:
        return list(_held)


def process_folder(prefix: str, *, settle: Settle | None = None) -> Path:
    """An :func:`owned_folder` that lasts as long as this process: released at exit."""
    folder = owned_folder(prefix, settle=settle)
    atexit.register(_release_at_exit, folder, os.getpid())
    return folder


def _release_at_exit(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child that exits through Python
        release(folder)


def release(folder: Path) -> None:
    """Remove ``folder`` (one of :func:`owned_folder`'s), then drop its lock."""
    remove_tree(folder)
    leave(folder)


def leave(folder: Path) -> None:
    """Drop ``folder``'s lock and keep it: abandoned, for the next :func:`sweep` to settle
    (the work it records is not done)."""
    with _held_lock:
        fd = _held.pop(folder, None)
    if fd is not None:
        os.close(fd)


def sweep(prefix: str, where: Path | None = None, *, settle: Settle | None = None) -> list[Path]:
    """Remove the folders named ``prefix*`` in ``where`` (the temporary folder) whose owner
    is gone (their lock can be taken), each passed to ``settle`` first; the folders removed."""
    base = where if where is not None else temp_folder()
    me = os.geteuid()
    removed: list[Path] = []
    for folder in base.glob(f"{prefix}*"):
        with _held_lock:
            if folder in _held:
                continue
        try:
            st = folder.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != me:
            continue
        claim = _claim(folder)
        if claim is None:
            continue
        try:  # the lock held while settling and removing: one sweeper has it, not two
            if settle is not None:
                try:
                    settle(folder)
                except NotYet:
                    continue  # left for the next sweep
                except (OSError, ValueError):
                    pass  # unreadable: nothing more can be done with it
            remove_tree(folder)
            removed.append(folder)
        finally:
            os.close(claim)
    return removed


def _claim(folder: Path) -> int | None:
    """The lock of an abandoned ``folder``, taken (a descriptor to close when done with it),
    or None: no lock file, its lock held by a living owner or by another sweeper, or the
    folder already removed by a sweeper that held it before (its lock file unlinked)."""
    try:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = os.open(LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
    except OSError:
        return None
    finally:
        os.close(top)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_nlink == 0:
            raise FileNotFoundError(LOCK)  # swept while this one waited to look
    except OSError:
        os.close(fd)
        return None
    return fd


#: how many folders :func:`remove_tree` holds open down one path; a tree deeper than this is
#: taken apart in pieces (what lies below is moved up under the top first)
OPEN_FOLDERS = 64

#: the most passes of :func:`remove_tree` (64 levels each: 6.4 million levels, more than any
#: file system was found to hold; a bound against a writer still adding to the tree)
_PASSES = 100_000

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path) -> None:
    """Remove a tree that may hold read-only folders (a module snapshot) and any depth of
    folders (a module's working folder): its folders are made the owner's to change on the
    way down, ``0700`` and never wider (a root kernel's call folders, whose paths ``/proc``
    names to every account, were read by another account while ``0755`` made them
    removable), each through a descriptor opened without following a link, relative to the
    one above it. What cannot be removed is left; nothing is raised.

    It walks without recursion and holds at most :data:`OPEN_FOLDERS` folders open: a
    module's chain of 3,000 nested folders made ``os.fwalk`` and ``shutil.rmtree`` raise
    ``RecursionError`` (out of the call that ran it, and out of every later kernel's sweep,
    which then met the same tree left in the temporary folder). A folder deeper than that is
    moved up under the top (renamed, never copied: the same file system, the same tree) and
    taken apart from there, so no ``..`` is ever followed.
    """
    try:
        top = os.open(path, _DIRECTORY)
    except OSError:
        return  # gone already, or no folder (a link is never followed, nor removed here)
    try:
        with contextlib.suppress(OSError):
            os.fchmod(top, 0o700)
        for _ in range(_PASSES):  # each pass takes OPEN_FOLDERS levels off what is left
            if not _empty_pass(top):
                break
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        path.rmdir()


def _listing(fd: int) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as entries:
            return list(entries)
    except OSError:
        return []


def _empty_pass(top: int) -> bool:
    """Remove what lies in ``top`` down to :data:`OPEN_FOLDERS` levels, moving each folder
    found below that up under ``top``; whether any was moved (another pass is needed)."""
    moved = False
    stack = [(top, iter(_listing(top)))]
    names: list[str] = []  # each open folder's name in the one above it (stack[1:])
    try:
        while stack:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:  # all of fd's entries handled: remove fd itself, from its parent
                stack.pop()
                if stack:
                    os.close(fd)
                    with contextlib.suppress(OSError):
                        os.rmdir(names.pop(), dir_fd=stack[-1][0])
                continue
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            if not is_folder:
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=fd)
                continue
            if len(stack) > OPEN_FOLDERS:
                moved = _move_up(entry.name, fd, top) or moved
                continue
            try:
                child = os.open(entry.name, _DIRECTORY, dir_fd=fd)
            except OSError:
                continue
            with contextlib.suppress(OSError):
                os.fchmod(child, 0o700)
            stack.append((child, iter(_listing(child))))
            names.append(entry.name)
    finally:  # an interrupt midway: the folders still open are closed, not leaked
        for fd, _ in stack[1:]:
            os.close(fd)
    return moved


def _move_up(name: str, fd: int, top: int) -> bool:
    """Rename folder ``name`` of ``fd`` to a name free in ``top``; whether it moved. The
    folder is made its owner's to change first: moving a folder rewrites its ``..``."""
    try:
        moving = os.open(name, _DIRECTORY, dir_fd=fd)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.fchmod(moving, 0o700)
    os.close(moving)
    for attempt in range(100):
        free = f".deep-{os.getpid()}-{attempt}"
        try:
            os.lstat(free, dir_fd=top)
        except FileNotFoundError:
            try:
                os.rename(name, free, src_dir_fd=fd, dst_dir_fd=top)
            except OSError:
                return False
            return True
        except OSError:
            return False
    return False
