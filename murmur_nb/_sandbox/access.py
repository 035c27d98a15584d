"""What the sandbox id may reach on a root host: given by file descriptor, taken back after.

On a root host a module runs as :func:`.identity.sandbox_id`, which owns none of the user's
files. A policy root it must use gets a POSIX ACL entry for that id alone (``rwx``/``rw-``
on an ``rw`` root; ``r-x``/``r--`` on an ``ro`` root others cannot read); on the Landlock
path, where the module sees real paths, each folder above gets ``--x``. These rules hold:

- **Every walk goes by file descriptor.** A root is opened without following any link
  (one ``openat2`` with ``RESOLVE_NO_SYMLINKS``; where that is refused, one component at a
  time with ``O_NOFOLLOW``); each entry below is opened from its folder's descriptor with
  ``O_NOFOLLOW`` and changed through that descriptor (``fstat``, ``fsetxattr``). A folder
  swapped for a link mid-walk is never followed: the walk cannot leave the root.
- **No other entry wakes up.** Once a file has named entries, its ACL mask (the mode's
  group bits) bounds all of them and the owning group: ``chmod 600`` switches a
  ``user:alice:rw-`` entry off. The sandbox id's entry needs the mask to hold what it is
  given, so the mask gains those bits, and only where that gives no other entry (a named
  user or group, the owning group) anything it lacks now; where it would, the file is not
  given, and a warning names it. Take-back removes the sandbox id's entry and takes the
  bits the mask gained off again (what was gained on a file that already had a mask is in
  the journal too), so the mask comes back as it was, or narrower where the owner narrowed
  it meanwhile; never wider. Bits another entry uses stay (another kernel's sandbox id,
  until that kernel takes its entry back; an entry given since). Where no named entry is
  left the ACL is minimal again, the owning group keeping only what the mask let it have
  (a ``chmod g-r`` made while the grant was in force holds). Before, the mask was set to
  the union of every entry when giving and when taking back: a masked-off entry of another
  account's came back for good.
- **Nor is one switched off.** A folder this library keeps its owner's alone (the snapshot
  store, which every root kernel of a machine shares and each kernel's sandbox id may hold
  an entry on) is made private by its owning group's and others' entries
  (:func:`make_private`), never by ``chmod 700``, which set the mask to ``---``: a running
  kernel's modules lost their way in, and every later passage was refused.
- **Only the root owner's files.** In a root, only what the root's owner, root or a module
  owns is given (a module's files: this kernel's sandbox id's, which it reaches anyway, or
  another root kernel's, a sandbox id no account has, which in a root of root's keep that
  id: the next kernel's modules, or a Dask worker's beside this one, use the same root).
  Another account's file or folder (a shared ``1777`` root like ``/tmp``, where anyone may
  leave one) is skipped, a folder with what is in it, and a warning names it: the module
  must not read or change what that account keeps ``0600``, through an entry the host
  gave.
- **Never murmur-nb's own folders.** A root that holds one of murmur-nb's private folders
  (:mod:`murmur_nb._files.own_state`: the sealing key's, the snapshot store, the cache, a
  store a host uses, the process folders in the temporary folder) is given without it: the
  walk compares each folder it opens (device and inode) with those folders, each looked up
  once per walk, and skips a match, a folder with what is in it, and a warning names it. A
  root of the home folder gave the sandbox id ``r--`` on the sealing key (with a write to a
  cache, code the kernel runs) and every module's snapshot; a root that *is* one of them is
  refused.
- **One file cannot refuse a root.** An entry that cannot be given (an ACL with no room for
  one more entry, ``ENOSPC``; an immutable file) or listed is skipped and named in the
  warning; only a failure on the root itself refuses the call, naming the root.
- **No default entry.** What the user makes in a root later keeps the user's umask; each
  call walks the root again, rescanning only the folders whose listing changed.
- **Nothing lasts.** Everything given is recorded; when the last open host closes (or is
  garbage collected unclosed), and at interpreter exit, each recorded root is walked again
  (by descriptor) and every entry for the sandbox id is removed, the mode's group bits put
  back, and what the module made (owned by the sandbox id) handed to the root's owner,
  unless that is root (a module's file never becomes root's). Each kernel process has its
  own sandbox id, so this never takes anything from another kernel's running call.
- **Not even past a killed kernel.** Before giving anything, a root kernel writes what it
  will give into a journal in a private folder it holds locked
  (:func:`murmur_nb._files.scratch.process_folder`). A kernel killed with ``SIGKILL``
  takes nothing back; the first host of every root kernel takes back what each dead
  kernel's journal lists. Where the journal is gone too (a container made again, its
  roots on a volume), what is left is for an id drawn at random, which no later kernel
  draws while another holds it (:func:`.identity.sandbox_id`).
- **Not even past a kernel short of descriptors.** Taking back opens a descriptor per
  folder: at exit the descriptor limit is first raised to its hard limit, and what still
  cannot be taken back for want of descriptors or memory stays in the ledger (the next
  take-back tries again) and in the journal, which is then left, unlocked, for the next
  root kernel's first host (so is a dead kernel's that the sweeping kernel is short for).
  Before, a kernel out of descriptors emptied its journal as if all had gone back.

A regular file with more than one link is never given (it may be a hard link to a file
outside the root).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import functools
import json
import os
import pwd
import resource
import stat
import struct
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from murmur_nb._files import own_state, scratch
from murmur_nb._files.beneath import open_beneath
from murmur_nb._sandbox.identity import is_root, is_sandbox_id, sandbox_id

__all__ = [
    "ACL_BUDGET",
    "Lease",
    "grant_passage",
    "grant_root",
    "hold",
    "make_private",
    "revoke",
    "take_passage",
]

#: entries of one root the host walks (beyond it: the folders already seen)
ACL_BUDGET = 20_000
#: a folder whose listing changed this recently (seconds) is scanned again next time: a
#: file system's timestamps may not move for an entry made in the same clock tick
_SETTLED_S = 1.0

# POSIX ACL extended attributes (linux/posix_acl_xattr.h): a version, then tag/perm/id
_ACL_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NO_ID = 0xFFFFFFFF
_ACCESS, _DEFAULT = "system.posix_acl_access", "system.posix_acl_default"
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_DIR = _OPEN | os.O_DIRECTORY

Acl = dict[tuple[int, int], int]

#: errors that say the kernel process is short of something (descriptors, memory), not that
#: a root cannot be given or taken back
_KERNEL_SHORT = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


# -- the ACL entries of one open file --------------------------------------------------------


def _read_acl(fd: int, name: str, mode: int) -> Acl:
    try:
        raw = os.getxattr(fd, name)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
            raise
        raw = b""
    entries: Acl = {}
    for tag, perm, ident in struct.iter_unpack("<HHI", raw[4:]):
        entries[(tag, ident if tag in (_USER, _GROUP) else _NO_ID)] = perm
    if not entries and name == _ACCESS:
        entries = {(_USER_OBJ, _NO_ID): (mode >> 6) & 7, (_GROUP_OBJ, _NO_ID): (mode >> 3) & 7,
                   (_OTHER, _NO_ID): mode & 7}  # fmt: skip
    return entries


def _encode(entries: Acl) -> bytes:
    """The xattr value of ``entries`` as they are (the mask is the caller's to set)."""
    body = b"".join(struct.pack("<HHI", tag, perm, ident)
                    for (tag, ident), perm in sorted(entries.items()))  # fmt: skip
    return struct.pack("<I", _ACL_VERSION) + body


def _mask(entries: Acl) -> int:
    """What bounds the named entries and the owning group: the mask, else (a minimal ACL)
    the owning group's own bits."""
    return entries.get((_MASK, _NO_ID), entries.get((_GROUP_OBJ, _NO_ID), 0))


def _woken(entries: Acl, uid: int, raised: int) -> list[str]:
    """The entries other than ``uid``'s that mask bits ``raised`` would give something."""
    names = {_USER: "user:{}", _GROUP: "group:{}", _GROUP_OBJ: "the owning group"}
    return [names[tag].format(ident) + f" ({_rwx(perm)})"
            for (tag, ident), perm in sorted(entries.items())
            if tag in names and (tag, ident) != (_USER, uid) and perm & raised]  # fmt: skip


def _rwx(perm: int) -> str:
    return "".join(c if perm & bit else "-" for c, bit in (("r", 4), ("w", 2), ("x", 1)))


def _effective(entries: Acl, uid: int) -> int:
    """What a named-user entry grants once the mask applies."""
    return entries.get((_USER, uid), 0) & entries.get((_MASK, _NO_ID), 7)


#: where root kernels take turns changing ACLs: a folder only root may write, in ``/run``
_TURNS_FOLDER, _TURNS_FILE = "murmur-nb", "acl.lock"
#: how long a change waits for its turn before it goes ahead: a kernel's turn lasts
#: microseconds (read, change, write back), so a lock held longer is not a turn
_TURN_WAIT_S = 2.0


@functools.cache
def _turns() -> int | None:
    """The lock root kernels take turns on (``/run/murmur-nb/acl.lock``, opened once), or
    ``None`` where ``/run`` is missing or not root's alone.

    Only root can write that folder, so no other account can hold the lock. A file's own
    ``flock`` would do as well between kernels, but anyone who can open the file can hold
    it: another account's ``0600`` file in a shared root (``/tmp``), or a running kernel's
    ``.owner.lock``, kept locked for its whole life, stopped every call that walked it.
    """
    try:
        run = os.open("/run", _DIR)
    except OSError:
        return None
    try:
        if not _root_only(os.fstat(run), 0o022):
            return None
        with contextlib.suppress(FileExistsError):
            os.mkdir(_TURNS_FOLDER, 0o700, dir_fd=run)
        folder = os.open(_TURNS_FOLDER, _DIR, dir_fd=run)
        try:
            if not _root_only(os.fstat(folder), 0o077):
                return None
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(_TURNS_FILE, flags, 0o600, dir_fd=folder)
        finally:
            os.close(folder)
    except OSError:
        return None
    finally:
        os.close(run)


# A forked child takes its turns on a lock of its own: a shared open file is one holder.
os.register_at_fork(after_in_child=_turns.cache_clear)


def _root_only(st: os.stat_result, others: int) -> bool:
    return stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & others


def _take_turn(fd: int) -> bool:
    """``flock`` ``fd`` within :data:`_TURN_WAIT_S`; whether it is held."""
    deadline = time.monotonic() + _TURN_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    """An ACL is read, changed and written back whole: two kernels changing the same file
    (a shared root, ``/tmp``) take turns, or one would write back the other's entry lost.

    The turn is taken on :func:`_turns`' lock, else (no ``/run``) on the file's own. Either
    is waited for :data:`_TURN_WAIT_S` at most, then the change goes ahead: a lock held
    that long is not another kernel's turn, and a call must never wait on a lock someone
    else holds (it waited forever on a locked file in its root).
    """
    turns = _turns()
    lock = fd if turns is None else turns
    held = _take_turn(lock)
    try:
        yield
    finally:
        if held:
            fcntl.flock(lock, fcntl.LOCK_UN)


class _Withheld(Exception):
    """A file the sandbox id is not given; the message says why (without the path)."""


class _OwnRoot(_Withheld):
    """A root that is one of murmur-nb's own folders: never given, nothing to fix but the
    root."""


def _give(fd: int, st: os.stat_result, uid: int, perm: int, *, record: bool = True) -> bool:
    """Add ``perm`` for ``uid`` to the file's access ACL; whether anything changed.

    The mask gains ``perm`` only where no other entry gains anything by it, else
    :class:`_Withheld`. What it gains is recorded (``record``) for :func:`_take`: in the
    ledger, and in the journal where the file had a mask already (a minimal ACL comes back
    from its owning group's bits alone).
    """
    if _effective(_read_acl(fd, _ACCESS, st.st_mode), uid) & perm == perm:
        return False
    with _locked(fd):
        access = _read_acl(fd, _ACCESS, st.st_mode)
        mask = _mask(access)
        raised = perm & ~mask
        woken = _woken(access, uid, raised)
        if woken:
            raise _Withheld(
                f"its ACL mask is {_rwx(mask)}: raising it to {_rwx(mask | perm)} for the "
                f"sandbox uid would also give {', '.join(woken)}, which the mask holds off"
            )
        key = (st.st_dev, st.st_ino)
        if record and raised:
            _LEDGER.raised[key] = _LEDGER.raised.get(key, 0) | raised
            if (_MASK, _NO_ID) in access:
                _note(raised=raised, file=list(key))
        access[(_USER, uid)] = access.get((_USER, uid), 0) | perm
        access[(_MASK, _NO_ID)] = mask | perm
        os.setxattr(fd, _ACCESS, _encode(access))
    return True


def _take(fd: int, st: os.stat_result, uid: int, raised: int = 0) -> None:
    """Remove every entry for ``uid`` (access and default) from the open file, and the
    bits ``raised`` the access mask gained for it (:func:`_without`)."""
    for name in (_ACCESS, _DEFAULT) if stat.S_ISDIR(st.st_mode) else (_ACCESS,):
        if not _names(_read_acl(fd, name, st.st_mode), uid):
            continue
        with _locked(fd):
            entries = _read_acl(fd, name, st.st_mode)
            if _names(entries, uid):
                gained = raised if name == _ACCESS else 0
                os.setxattr(fd, name, _encode(_without(entries, uid, gained)))


def _without(entries: Acl, uid: int, raised: int) -> Acl:
    """``entries`` without ``uid``'s, the mask never wider than it is now: less the bits
    ``raised`` for ``uid``, but those another named entry uses (another kernel's sandbox id,
    or any entry given since: a bit was raised only when no other entry had it, so one
    that has it now was given it after, on purpose, and keeps it); with no named entry left,
    the minimal ACL, the owning group keeping what the mask let it have."""
    out = {key: perm for key, perm in entries.items() if key not in ((_USER, uid), (_GROUP, uid))}
    named = {key: perm for key, perm in out.items() if key[0] in (_USER, _GROUP)}
    mask = out.pop((_MASK, _NO_ID), None)
    if mask is None:
        return out
    if not named:
        out[(_GROUP_OBJ, _NO_ID)] = out.get((_GROUP_OBJ, _NO_ID), 0) & mask
        return out
    others = 0  # what the entries left use: theirs, not ours to take back
    for perm in named.values():
        others |= perm
    out[(_MASK, _NO_ID)] = mask & ~(raised & ~others)
    return out


def _names(entries: Acl, uid: int) -> bool:
    return (_USER, uid) in entries or (_GROUP, uid) in entries


def _reachable(st: os.stat_result, uid: int, write: bool) -> bool:
    if st.st_uid == uid:
        return True
    need = stat.S_IROTH | stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else stat.S_IROTH
    return not write and st.st_mode & need == need


# -- opening by descriptor -------------------------------------------------------------------


def _open_path(path: str) -> int:
    """``path`` (absolute) opened never through a link
    (:func:`~murmur_nb._files.beneath.open_beneath` from ``/``)."""
    if path.strip("/") == "":
        return os.open("/", _DIR)
    return open_beneath("/", path.strip("/"))


def _children(fd: int) -> Iterator[tuple[str, bool]]:
    """``(name, is_folder)`` of each folder or regular file in the open folder."""
    with os.scandir(fd) as it:
        for entry in it:
            try:
                if entry.is_dir(follow_symlinks=False):
                    yield entry.name, True
                elif entry.is_file(follow_symlinks=False):
                    yield entry.name, False
            except OSError:
                continue  # gone meanwhile


def _open_child(parent: int, name: str, folder: bool) -> tuple[int, os.stat_result] | None:
    """The entry opened from its folder's descriptor, if it is still what was listed."""
    try:
        fd = os.open(name, _DIR if folder else _OPEN, dir_fd=parent)
    except OSError as exc:
        if exc.errno in _KERNEL_SHORT:
            raise  # this process's want: a walk cut short is not a walk done
        return None  # gone, or swapped for a link (ELOOP), a device, a socket
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode) != folder or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(
            st.st_mode)):
        os.close(fd)
        return None
    return fd, st


# -- the record of what was given ------------------------------------------------------------


@dataclass
class _Root:
    """One root given to the sandbox id: where, whose, and what each folder listed."""

    path: str
    write: bool
    owner: tuple[int, int]
    #: folder (dev, ino) -> (mtime_ns when scanned, sub-folder names, when scanned)
    scanned: dict[tuple[int, int], tuple[int, tuple[str, ...], float]] = field(
        default_factory=dict
    )
    #: the entries skipped (dev, ino) that a warning named already
    withheld: set[tuple[int, int]] = field(default_factory=set)


class _Ledger:
    """Everything this process gave the sandbox id, and the hosts that still need it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.roots: dict[tuple[str, bool], _Root] = {}
        self.passages: dict[str, tuple[int, int]] = {}
        #: file (dev, ino) -> the bits its ACL mask gained for the sandbox id
        self.raised: dict[tuple[int, int], int] = {}
        self.holders = 0
        self.pid = os.getpid()
        self.hooked = False
        #: the journal of what this process gives (append-only), once opened
        self.journal: int | None = None
        #: the folders passed through that the journal already lists
        self.noted: set[str] = set()
        #: the folder the journal is in, once made
        self.journal_folder: Path | None = None
        #: whether the last take-back left something given (this process short of
        #: descriptors or memory): the journal is kept for the next kernel
        self.owed = False

    def reset(self) -> None:
        """In a forked child: nothing given is its own (its parent takes it back)."""
        self.lock = threading.RLock()
        self.roots, self.passages, self.holders, self.pid = {}, {}, 0, os.getpid()
        self.raised = {}
        self.journal = None  # the parent's: the child writes a journal of its own
        self.noted = set()
        self.journal_folder, self.owed = None, False


_LEDGER = _Ledger()
os.register_at_fork(after_in_child=_LEDGER.reset)


def _at_exit() -> None:
    """Take everything back; the journal goes with it, unless something could not be taken
    back (then a later root kernel's first host takes it back from the journal)."""
    if _LEDGER.pid != os.getpid():
        return
    if _LEDGER.roots or _LEDGER.passages:
        _room_to_take_back()
    revoke()
    folder = _LEDGER.journal_folder
    if folder is not None:
        (scratch.leave if _LEDGER.owed else scratch.release)(folder)


def _room_to_take_back() -> None:
    """At exit, the descriptor limit raised to its hard limit: taking back opens a
    descriptor per folder, and a kernel that ran out of them (and exits for it) would
    otherwise leave everything given."""
    with contextlib.suppress(OSError, ValueError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _remember() -> None:
    if not _LEDGER.hooked:
        _LEDGER.hooked = True
        atexit.register(_at_exit)


# -- the journal: what a killed kernel gave, for the next one to take back --------------------

_JOURNALS = "murmur-nb-grants-"
_GIVEN = "given.jsonl"
#: the most of a dead kernel's journal read (a line per root and per folder passed)
_JOURNAL_MAX = 4 << 20


def _journal() -> int | None:
    """This process's journal (opened once; first, the dead kernels' are taken back)."""
    if _LEDGER.journal is None:
        _remember()  # removed at exit, once everything is taken back (:func:`_at_exit`)
        try:
            if _LEDGER.journal_folder is None:
                _LEDGER.journal_folder = scratch.owned_folder(
                    _JOURNALS, settle=_take_back_abandoned
                )
            _LEDGER.journal = os.open(_LEDGER.journal_folder / _GIVEN,
                                      os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
                                      | os.O_CLOEXEC, 0o600)  # fmt: skip
        except OSError:
            return None  # nothing to write to: given things still go back at close and exit
    return _LEDGER.journal


def _note(**entry: object) -> None:
    """Write one thing about to be given into the journal (before it is given)."""
    fd = _journal()
    if fd is not None:
        with contextlib.suppress(OSError):
            os.write(fd, json.dumps({"uid": sandbox_id(), **entry}).encode() + b"\n")


def _take_back_abandoned(folder: Path) -> None:
    """Take back what a dead kernel's journal in ``folder`` says it gave its sandbox id
    (entries for an id outside the sandbox range are ignored: never an account's), and the
    mask bits it raised on files that had a mask; :class:`~murmur_nb._files.scratch.NotYet`
    when this process is short of descriptors or memory for some of it (the journal stays
    for the next kernel)."""
    try:
        fd = os.open(folder / _GIVEN, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in _KERNEL_SHORT:
            raise scratch.NotYet(str(exc)) from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        lines = handle.read(_JOURNAL_MAX).splitlines()
    roots, passages, raised = _read_journal(lines)
    owed = False
    for uid, record in roots:
        owed |= not _root_taken(record, uid, raised.get(uid, {}))
    for uid, path, ident in passages:
        owed |= not _take_passage_at(path, ident, uid, raised.get(uid, {}).get(ident, 0))
    if owed:
        raise scratch.NotYet(f"{folder}: not everything could be taken back yet")


def _read_journal(
    lines: list[bytes],
) -> tuple[list[tuple[int, _Root]], list[tuple[int, str, tuple[int, int]]],
           dict[int, dict[tuple[int, int], int]]]:  # fmt: skip
    """The roots, the passages and the raised mask bits (per uid, per file) of a journal."""
    roots: list[tuple[int, _Root]] = []
    passages: list[tuple[int, str, tuple[int, int]]] = []
    raised: dict[int, dict[tuple[int, int], int]] = {}
    for line in lines:
        try:
            entry = json.loads(line)
            uid = int(entry["uid"])
            if not is_sandbox_id(uid):
                continue
            if "root" in entry:
                owner = (int(entry["owner"][0]), int(entry["owner"][1]))
                roots.append((uid, _Root(str(entry["root"]), bool(entry["write"]), owner)))
            elif "passage" in entry:
                ident = (int(entry["ident"][0]), int(entry["ident"][1]))
                passages.append((uid, str(entry["passage"]), ident))
            elif "raised" in entry:
                key = (int(entry["file"][0]), int(entry["file"][1]))
                bits = raised.setdefault(uid, {})
                bits[key] = bits.get(key, 0) | int(entry["raised"]) & 7
        except (ValueError, KeyError, TypeError, IndexError):
            continue  # a line cut short by the kill
    return roots, passages, raised


# -- giving ----------------------------------------------------------------------------------


def grant_root(path: str, *, write: bool) -> str:
    """Let the sandbox id use the policy root ``path`` (root hosts only); a problem, or ``""``.

    The root and what is in it (up to :data:`ACL_BUDGET` entries) get ``rwx``/``rw-`` for
    an ``rw`` root, ``r-x``/``r--`` for an ``ro`` root others cannot read. A folder whose
    listing is unchanged since the last walk is not listed again. An entry below the root
    that is not given (another account's, a mask that would wake another entry, a failure
    such as a full ACL) is skipped, and one warning per walk names those not named before;
    a problem with the root itself is returned.
    """
    if not is_root():
        return ""
    uid = sandbox_id()
    try:
        with _LEDGER.lock:
            _remember()
            fd = _open_path(path)
            try:
                st = os.fstat(fd)
                record = _LEDGER.roots.get((path, write))
                if record is None:
                    record = _Root(path, write, (st.st_uid, st.st_gid))
                    _note(root=path, write=write, owner=record.owner)
                    _LEDGER.roots[(path, write)] = record
                withheld = _walk_giving(fd, st, record, uid)
            finally:
                os.close(fd)
    except (OSError, _Withheld) as exc:
        if isinstance(exc, OSError) and exc.errno in _KERNEL_SHORT:
            raise  # the kernel process's own want, not the root's: the caller says so
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        if isinstance(exc, _OwnRoot):
            return f"{path} is not given to the sandbox uid {uid}: {why}; map the root elsewhere"
        return (
            f"the sandbox uid {uid} cannot be given access to {path} ({why}); as "
            f"root, modules run as uid {uid}: make the root {'writable' if write else 'readable'}"
            f" for it (chown {uid} or setfacl -m u:{uid}:{'rwx' if write else 'rx'})"
        )
    if withheld:
        _warn_withheld(path, uid, withheld)
    return ""


#: the most skipped entries one warning names
_NAMED = 10


def _warn_withheld(path: str, uid: int, withheld: list[str]) -> None:
    more = len(withheld) - _NAMED
    named = "; ".join(withheld[:_NAMED]) + (f"; and {more} more" if more > 0 else "")
    warnings.warn(
        f"root {path}: the sandbox uid {uid} was not given {len(withheld)} "
        f"entr{'y' if len(withheld) == 1 else 'ies'} in it: the module gets no more of "
        f"{'it' if len(withheld) == 1 else 'them'} than every account has: {named}",
        UserWarning,
        stacklevel=3,
    )


#: an open folder or file of a walk, and its path
_Open = tuple[int, os.stat_result, str]


def _walk_giving(top: int, top_st: os.stat_result, record: _Root, uid: int) -> list[str]:
    """Give the open root and what is in it, but murmur-nb's own folders
    (:func:`~murmur_nb._files.own_state.identities`, looked up once); what was skipped and
    why, not said before."""
    own = own_state.identities()
    if (top_st.st_dev, top_st.st_ino) in own:
        raise _OwnRoot(f"it is murmur-nb's own folder {own[(top_st.st_dev, top_st.st_ino)]}: "
                       f"{_OWN_WHY}")  # fmt: skip
    _give_one(top, top_st, uid, record)
    if not stat.S_ISDIR(top_st.st_mode):
        return []
    seen, withheld = 0, []
    pending: list[_Open] = [(os.dup(top), top_st, record.path.rstrip("/") or "/")]
    try:
        while pending:
            fd, st, where = pending.pop()
            try:
                folders, seen, skipped = _give_folder((fd, st, where), record, uid, seen, own)
            finally:
                os.close(fd)
            pending += folders
            withheld += skipped
    finally:
        for fd, _, _ in pending:
            os.close(fd)
    return withheld


def _give_folder(
    opened: _Open, record: _Root, uid: int, seen: int, own: dict[tuple[int, int], str]
) -> tuple[list[_Open], int, list[str]]:
    """Give what the open folder holds; its sub-folders to walk (opened), the entries seen
    so far, and what was skipped (:func:`_give_below`; a folder in ``own``, murmur-nb's
    own, is skipped whole, without a look inside).

    A folder whose listing has not changed since a scan made after it had settled is not
    listed again: only its known sub-folders are opened, to look at theirs.
    """
    fd, st, where = opened
    key, now = (st.st_dev, st.st_ino), time.time()
    known = record.scanned.get(key)
    fresh = not (known is not None and known[0] == st.st_mtime_ns
                 and known[2] - st.st_mtime_ns / 1e9 > _SETTLED_S)  # fmt: skip
    if not fresh:
        assert known is not None
        listing = [(name, True) for name in known[1]]
    else:
        listing, seen = _listing(fd, seen)
    folders: list[_Open] = []
    withheld: list[str] = []
    try:
        for name, folder in listing:
            child = _open_child(fd, name, folder)
            if child is None:
                continue
            try:
                why = _own_folder(child[1], own) or (
                    _give_below(child, record, uid) if fresh else "")
            except BaseException:
                os.close(child[0])
                raise
            if why and (child[1].st_dev, child[1].st_ino) not in record.withheld:
                record.withheld.add((child[1].st_dev, child[1].st_ino))
                withheld.append(f"{where.rstrip('/')}/{name} ({why})")
            if folder and not why and _owned(child[1], record, uid):
                folders.append((*child, f"{where.rstrip('/')}/{name}"))
            else:
                os.close(child[0])
    except BaseException:
        for other, _, _ in folders:
            os.close(other)
        raise
    if fresh and seen <= ACL_BUDGET:
        names = tuple(path.rsplit("/", 1)[1] for _, _, path in folders)
        record.scanned[key] = (st.st_mtime_ns, names, now)
    return folders, seen, withheld


#: why a folder of murmur-nb's own is never given through a root
_OWN_WHY = ("murmur-nb's private state (the sealing key, the module snapshots, the caches) "
            "is never given to a module through a root")


def _own_folder(st: os.stat_result, own: dict[tuple[int, int], str]) -> str:
    """Why the folder is skipped when it is one of murmur-nb's own, else ``""``."""
    if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) not in own:
        return ""
    return f"murmur-nb's own folder {own[(st.st_dev, st.st_ino)]}: {_OWN_WHY}"


def _listing(fd: int, seen: int) -> tuple[list[tuple[str, bool]], int]:
    """The open folder's entries (none past :data:`ACL_BUDGET`), and the count seen now."""
    listing = list(_children(fd)) if seen < ACL_BUDGET else []
    return listing, seen + len(listing)


def _give_below(opened: tuple[int, os.stat_result], record: _Root, uid: int) -> str:
    """Give one entry below the root; why it is skipped, or ``""``. A file with more than
    one link is left as it is (never given, nothing said: it may be a link to a file
    outside the root)."""
    fd, st = opened
    if not stat.S_ISDIR(st.st_mode) and st.st_nlink != 1:
        return ""
    try:
        _give_one(fd, st, uid, record)
    except _Withheld as exc:
        return str(exc)
    except OSError as exc:
        if exc.errno in _KERNEL_SHORT:
            raise
        return f"{exc.strerror or exc}: it is skipped, the rest of the root is given"
    return ""


def _owned(st: os.stat_result, record: _Root, uid: int) -> bool:
    """Whether the entry is the root owner's, root's, or a module's: this kernel's, or one
    another root kernel's module left (a sandbox id no account has: in a root of root's a
    module's files stay its id's, and the same operator's next kernel, or a Dask worker
    beside this one, runs its modules in the same root)."""
    if st.st_uid in (record.owner[0], 0, uid):
        return True
    if not is_sandbox_id(st.st_uid):
        return False
    try:
        pwd.getpwuid(st.st_uid)
    except KeyError:
        return True
    return False  # an account that happens to have an id in the range


def _give_one(fd: int, st: os.stat_result, uid: int, record: _Root) -> None:
    if _reachable(st, uid, record.write):
        return
    if not _owned(st, record, uid):
        raise _Withheld(f"owned by uid {st.st_uid}, neither the root's owner "
                        f"({record.owner[0]}), root nor a module: another account's entries "
                        f"are never given")  # fmt: skip
    folder = stat.S_ISDIR(st.st_mode)
    write = record.write
    _give(fd, st, uid, (7 if folder else 6) if write else (5 if folder else 4))


def grant_passage(path: str, *, uid: int | None = None) -> None:
    """Let the sandbox id (or ``uid``) pass through each folder above ``path`` (``--x``).

    Only for confinement without a mount namespace (Landlock), where the module reaches its
    files by their real paths: passing through a folder lists nothing, and Landlock still
    refuses every path it was not given. Given for ``uid`` (a test's account), nothing is
    recorded: the caller puts the folders back itself.
    """
    if not is_root():
        return
    who = sandbox_id() if uid is None else uid
    with _LEDGER.lock:
        if uid is None:
            _remember()
        fd = os.open("/", _DIR)
        where = ""
        try:
            for part in [*[p for p in path.split("/") if p][:-1], ""]:
                st = os.fstat(fd)
                ident = (st.st_dev, st.st_ino)
                passable = st.st_uid == who or st.st_mode & stat.S_IXOTH
                if not passable and uid is None and (where or "/") not in _LEDGER.noted:
                    _note(passage=where or "/", ident=ident)
                    _LEDGER.noted.add(where or "/")
                if not passable and _give(fd, st, who, 1, record=uid is None) and uid is None:
                    _LEDGER.passages.setdefault(where or "/", ident)
                if part:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                    os.close(fd)
                    fd, where = nxt, f"{where}/{part}"
        except OSError:
            return  # a folder missing or swapped: the module will not reach through it
        except _Withheld as exc:
            if uid is None:
                warnings.warn(f"the sandbox uid {who} cannot pass through {where or '/'} to "
                              f"{path}: {exc}", UserWarning, stacklevel=2)  # fmt: skip
        finally:
            os.close(fd)


def take_passage(path: str, *, uid: int) -> None:
    """Remove ``uid``'s entries from each folder above ``path`` (what :func:`grant_passage`
    gave a test's account), leaving every other entry as it is at that moment."""
    if not is_root():
        return
    with _LEDGER.lock:
        fd = os.open("/", _DIR)
        try:
            for part in [*[p for p in path.split("/") if p][:-1], ""]:
                _take(fd, os.fstat(fd), uid)
                if part:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                    os.close(fd)
                    fd = nxt
        except OSError:
            pass
        finally:
            os.close(fd)


# -- a folder of its owner's alone -----------------------------------------------------------


def make_private(path: Path) -> None:
    """Leave the folder ``path`` to its owner alone, as ``chmod 700`` would, but never
    through its ACL mask: the owning group's and others' bits go, the named entries and the
    mask stay as they are.

    On a folder with named entries the mode's group bits are the mask, and ``chmod 700``
    sets it to ``---``: every named entry is switched off. The snapshot store is shared by
    the root kernels of a machine, each of whose sandbox ids may hold an entry on it
    (``--x`` to pass to its module; a root that holds the store no longer gives it, as
    murmur-nb's own folder): a new kernel's ``chmod`` took their way in from a running
    kernel's modules, and every
    later passage through the store was refused, since raising the mask again would have
    woken the entry switched off. There the owning group's and others' own entries are
    cleared instead, in turn with the kernels changing the folder's ACL (:func:`_locked`).
    """
    fd = os.open(path, _DIR)
    try:
        with _LEDGER.lock:
            if _open_bits(fd):
                with _locked(fd):
                    _close_bits(fd)
    finally:
        os.close(fd)


def _open_bits(fd: int) -> bool:
    """Whether the owning group or others may do anything with the open folder (the
    owning group's own entry, not the mask, where the folder has named entries)."""
    st = os.fstat(fd)
    if not hasattr(os, "getxattr"):  # no POSIX ACL here (macOS): the mode says it all
        return bool(st.st_mode & 0o077)
    access = _read_acl(fd, _ACCESS, st.st_mode)
    return bool(access.get((_GROUP_OBJ, _NO_ID), 0) or access.get((_OTHER, _NO_ID), 0))


def _close_bits(fd: int) -> None:
    """The owning group's and others' bits off the open folder; the mask left alone."""
    st = os.fstat(fd)
    access = _read_acl(fd, _ACCESS, st.st_mode) if hasattr(os, "getxattr") else {}
    if (_MASK, _NO_ID) not in access:  # plain mode bits: the group bits are the group's
        os.fchmod(fd, 0o700)
        return
    access[(_GROUP_OBJ, _NO_ID)] = access[(_OTHER, _NO_ID)] = 0
    os.setxattr(fd, _ACCESS, _encode(access))


# -- taking back -----------------------------------------------------------------------------


class Lease:
    """One host's need for what the sandbox id was given; :meth:`close` gives it up, and so
    does a lease dropped unclosed (a host a notebook cell made and never closed) once it is
    garbage collected. At interpreter exit everything is taken back anyway."""

    def __init__(self) -> None:
        self._finalizer = weakref.finalize(self, _give_up, os.getpid())
        self._finalizer.atexit = False

    def close(self) -> None:
        """Give the lease up; the last one open takes back everything given. Idempotent."""
        self._finalizer()  # a finalizer runs once


def _give_up(pid: int) -> None:
    """One lease given up (closed, or collected unclosed); the last one takes it all back."""
    with _LEDGER.lock:
        if _LEDGER.pid != pid:
            return  # a lease a forked child inherited: its parent's, not the child's
        _LEDGER.holders -= 1
        if _LEDGER.holders == 0:
            revoke()


def hold() -> Lease:
    """A lease that keeps what is given to the sandbox id until it (and every other) closes.

    The first on a root host takes back what dead kernels gave (their journals).
    """
    with _LEDGER.lock:
        if is_root():
            _journal()
        _LEDGER.holders += 1
        return Lease()


def revoke() -> None:
    """Take back from the sandbox id everything this process gave it (root hosts only)."""
    if not is_root():
        return
    uid = sandbox_id()
    with _LEDGER.lock:
        roots, passages = dict(_LEDGER.roots), dict(_LEDGER.passages)
        raised = dict(_LEDGER.raised)
        _LEDGER.roots.clear()
        _LEDGER.passages.clear()
        _LEDGER.raised.clear()
        for key, record in roots.items():
            if not _root_taken(record, uid, raised):
                _LEDGER.roots[key] = record  # the next take-back (at exit) tries again
        for path, ident in passages.items():
            if not _take_passage_at(path, ident, uid, raised.get(ident, 0)):
                _LEDGER.passages[path] = ident
        _LEDGER.owed = bool(_LEDGER.roots or _LEDGER.passages)
        if _LEDGER.owed:
            _LEDGER.raised.update(raised)  # taking a taken file's bits back again is a no-op
            return  # the journal still lists all of it, for the next kernel if not for us
        _LEDGER.noted.clear()
        if _LEDGER.journal is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(_LEDGER.journal, 0)  # all taken back: nothing for the next one


def _root_taken(record: _Root, uid: int, raised: dict[tuple[int, int], int]) -> bool:
    """:func:`_walk_taking`; ``False`` when this process was short of descriptors or memory
    for it (anything else, such as a root gone, leaves nothing that can be taken back)."""
    try:
        _walk_taking(record, uid, raised)
    except OSError as exc:
        return exc.errno not in _KERNEL_SHORT
    return True


def _take_passage_at(path: str, ident: tuple[int, int], uid: int, raised: int) -> bool:
    """Remove ``uid``'s entries (and the mask bits ``raised`` for them) from the folder
    ``path``, if it is still the one passed; ``False`` when this process was short of
    descriptors or memory for it."""
    try:
        fd = _open_path(path)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == ident:
                _take(fd, st, uid, raised)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc.errno not in _KERNEL_SHORT
    return True


def _walk_taking(record: _Root, uid: int, raised: dict[tuple[int, int], int]) -> None:
    """Remove the sandbox id's entries from the root and what is in it (by descriptor), and
    the mask bits ``raised`` for them (by file); what the module made there becomes the
    root owner's (unless the owner is root)."""
    top = _open_path(record.path)
    pending = [(top, os.fstat(top))]
    seen = 0
    try:
        while pending:
            fd, st = pending.pop()
            try:
                _take(fd, st, uid, raised.get((st.st_dev, st.st_ino), 0))
                if st.st_uid == uid and record.owner[0] != 0:
                    os.fchown(fd, *record.owner)
                if not stat.S_ISDIR(st.st_mode) or seen >= ACL_BUDGET:
                    continue
                for name, folder in _children(fd):
                    seen += 1
                    opened = _open_child(fd, name, folder)
                    if opened is not None:
                        pending.append(opened)
                if record.owner[0] != 0:
                    _links_to_owner(fd, uid, record.owner)
            finally:
                os.close(fd)
    finally:
        for fd, _ in pending:
            os.close(fd)


def _links_to_owner(fd: int, uid: int, owner: tuple[int, int]) -> None:
    """Links the module made in the open folder become the root owner's (never followed)."""
    with os.scandir(fd) as it:
        for entry in it:
            with contextlib.suppress(OSError):
                if entry.is_symlink() and entry.stat(follow_symlinks=False).st_uid == uid:
                    os.chown(entry.name, *owner, dir_fd=fd, follow_symlinks=False)

