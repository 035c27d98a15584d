"""Verified, read-only snapshots of module folders: what was hashed is what runs.

The host copies a module folder once, hashing the bytes as it writes them, into a folder named
by that digest; ``describe`` and ``invoke`` run the copy and approvals pin its digest, so a
change to the live folder is never executed under an old approval. ``__pycache__`` is neither
hashed nor copied and the copy is read-only, so no ``.pyc`` can be planted. A link leaving the
folder refuses the module; one inside becomes a relative link within the snapshot. FIFOs,
sockets and devices are left out. Entries and bytes are counted from ``lstat`` before a byte is
read (``module_too_large``; sparse files too, and folders nested past :data:`MAX_DEPTH`). Files
are hashed once per ``(dev, inode, size, mtime_ns, ctime_ns)``; snapshots are built in a
temporary folder and renamed into place. Where: ``$MURMUR_NB_SNAPSHOTS``, else
``<cache>/module-snapshots``; the store is private to its owner (``0700``: a module's ``0600``
secrets stay its owner's) and each file keeps its own mode, less the write bits. On a root host
the module runs as another uid, which is given read access for the host's life
(:mod:`murmur_nb._sandbox.access`).

**The store is bounded** (:meth:`SnapshotStore.prune`, after each build): each changed
version of a module added a whole copy for good, so a module edited and run again in a
notebook filled the disk. The least recently used snapshots go past
``$MURMUR_NB_SNAPSHOTS_MAX_MB`` (:func:`budget_bytes`), but never one in use: every
:class:`Snapshot` handed out, and every ``Target`` and prepared call made from it, keeps a
shared ``flock`` on the snapshot's folder (:class:`Hold`) until the last of them is gone,
and a snapshot is removed only under an exclusive lock taken without waiting. A process
that runs or may still run a snapshot (a prepared call, a batch, a module running now), in
this kernel or another, so keeps it; a killed one drops its locks with its descriptors. The
lock is taken before a snapshot is checked (and waits for a removal under way), so one
checked is one kept. Recency is the folder's mtime, set each time a process takes it up.
Only this account's snapshots are looked at (a root kernel removes no other account's).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from murmur_nb._files import own_state
from murmur_nb._files.beneath import real_path
from murmur_nb._files.scratch import LOCK, leave, owned_folder, process_folder, release, remove_tree
from murmur_nb._files.trust import trusted_folder
from murmur_nb._rules import cache_dir, whole_number
from murmur_nb._sandbox import access

__all__ = [
    "DEFAULT_BUDGET_MB", "Entry", "Hold", "Refused", "Snapshot", "SnapshotStore",
    "budget_bytes", "snapshots_dir", "walk",
]  # fmt: skip

#: Below this size a file is never called sparse (small files may live inside the inode).
SPARSE_MIN_BYTES = 1 << 20
#: A file holding fewer than 1/8 of its size on disk is sparse.
SPARSE_RATIO = 8
#: Folders nested deeper than this refuse a module folder (``module_too_large``). Far past
#: any real module (a venv's site-packages is about 8 levels down, nested ``node_modules``
#: a few dozen); a chain of 1,200 was described and run, and then raised ``RecursionError``
#: out of ``host.map(..., client=)`` (``os.walk`` ships the snapshot to Dask workers), and
#: past about 2,000 levels the folder was refused with a 4 KB ``File name too long`` path.
MAX_DEPTH = 256
_CHUNK = 1 << 20
_PYCACHE = "__pycache__"
#: the prefix of a snapshot's build folder in the store, until it is renamed into place
_BUILD = ".build-"
#: how many times :meth:`SnapshotStore.intact` removes a ``__pycache__`` and looks again
_PYCACHE_TRIES = 5
#: the budget of :meth:`SnapshotStore.prune` when ``$MURMUR_NB_SNAPSHOTS_MAX_MB`` sets none
DEFAULT_BUDGET_MB = 4096
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def budget_bytes() -> int:
    """How many bytes of module snapshots the store keeps: ``$MURMUR_NB_SNAPSHOTS_MAX_MB``
    MiB, else (unset or empty) 4 GiB, eight times the largest module folder the default
    policy snapshots (``Policy.max_module_bytes``). Snapshots in use are kept past it.

    A value that is not a whole number of MiB, at least 1, is warned about (``UserWarning``)
    and the default kept.
    """
    megabytes = whole_number("MURMUR_NB_SNAPSHOTS_MAX_MB", DEFAULT_BUDGET_MB, "MiB",
                             "the module snapshot store keeps")  # fmt: skip
    return megabytes << 20


class Refused(Exception):
    """The host will not snapshot this folder: ``code``, where, and what to do."""

    def __init__(self, code: str, where: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.where, self.detail = code, where, detail


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a folder listing; ``sig`` is ``(dev, ino, size, mtime_ns, ctime_ns)``."""

    rel: str
    kind: str  # "D" folder, "F" regular file, "L" link (``target``: relative, inside)
    sig: tuple[int, int, int, int, int]
    executable: bool = False
    target: str = ""


class Hold:
    """A shared lock (``flock``) on one snapshot's folder in the store: no prune removes the
    snapshot while it is held. Dropped by :meth:`close`, or once nothing refers to it (a
    prepared call that is dropped needs no closing)."""

    def __init__(self, fd: int) -> None:
        self._close = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        """Drop the lock now."""
        self._close()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A verified read-only copy of a module folder and the digest it was copied under;
    ``hold`` keeps it in the store while this (or a ``Target`` given it) lives."""

    path: Path
    digest: str
    hold: Hold | None = field(default=None, compare=False, repr=False)


def _sig(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _too_large(what: str, knob: str, limit: int) -> Refused:
    return Refused(
        "module_too_large",
        "module",
        f"{what}, above the host's budget for hashing a module folder (Policy.{knob}="
        f"{limit}); shrink the module folder, or raise Policy.{knob} if you trust it",
    )


def walk(
    folder: Path, *, max_entries: int, max_bytes: int, skip: str = _PYCACHE
) -> list[Entry]:
    """Every entry of ``folder`` (entries named ``skip`` left out), sorted, within the budget.

    Reads no file: sizes come from ``lstat``, so an oversized or sparse folder is refused
    before any work is spent on it. A snapshot is walked with ``skip=""``: a ``__pycache__``
    planted in one makes it differ from what was verified.
    """
    root = real_path(folder)
    out: list[Entry] = []
    total = 0
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        with os.scandir(os.path.join(root, rel_dir)) as it:  # noqa: PTH118 - a walk of str
            names = sorted(e.name for e in it if e.name != skip)
        for name in names:
            if len(out) >= max_entries:
                raise _too_large(f"{folder} holds more than {max_entries} entries",
                                 "max_module_entries", max_entries)  # fmt: skip
            rel = os.path.join(rel_dir, name)  # noqa: PTH118
            st = os.lstat(os.path.join(root, rel))  # noqa: PTH118
            if stat.S_ISDIR(st.st_mode):
                if rel.count(os.sep) >= MAX_DEPTH:
                    raise _too_deep(folder, rel)
                out.append(Entry(rel, "D", _sig(st)))
                pending.append(rel)
            elif stat.S_ISLNK(st.st_mode):
                out.append(Entry(rel, "L", _sig(st), target=_inner_target(root, rel, folder)))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > max_bytes:
                    raise _too_large(f"{folder} holds more than {max_bytes} bytes",
                                     "max_module_bytes", max_bytes)  # fmt: skip
                _refuse_sparse(st, folder, rel)
                out.append(Entry(rel, "F", _sig(st), bool(st.st_mode & 0o111)))
            # a FIFO, socket or device is never code and reading one may block: left out
    return out


def _too_deep(folder: Path, rel: str) -> Refused:
    shown = str(Path(*Path(rel).parts[:3]))
    return Refused(
        "module_too_large",
        "module",
        f"{folder} nests folders more than {MAX_DEPTH} levels deep ({shown!r}/...): the "
        "host walks, hashes and copies the whole module folder, and no module needs that "
        "depth; remove or flatten that folder",
    )


def _inner_target(root: str, rel: str, folder: Path) -> str:
    """The target of link ``rel`` relative to its own folder, or :class:`Refused` if it
    leaves the module folder."""
    resolved = os.path.realpath(os.path.join(root, rel))  # noqa: PTH118
    if resolved != root and not resolved.startswith(root + os.sep):
        raise Refused(
            "invalid_descriptor",
            "module",
            f"{folder / rel} is a link to {resolved}, outside the module folder; a module "
            "runs only what was hashed, so replace the link with the file itself",
        )
    return os.path.relpath(resolved, Path(root, rel).parent)


def _refuse_sparse(st: os.stat_result, folder: Path, rel: str) -> None:
    on_disk = st.st_blocks * 512
    if st.st_size >= SPARSE_MIN_BYTES and on_disk * SPARSE_RATIO < st.st_size:
        raise Refused(
            "module_too_large",
            "module",
            f"{folder / rel} is a sparse file ({st.st_size} bytes, {on_disk} on disk): the "
            "host would read and copy every byte of it (see Policy.max_module_bytes); "
            "remove it from the module folder",
        )


def _record(entry: Entry, size: int, executable: bool, hex_digest: str) -> bytes:
    rel = entry.rel.encode("utf-8", "surrogateescape")
    if entry.kind == "D":
        return b"D" + rel + b"\0"
    if entry.kind == "L":
        return b"L" + rel + b"\0" + entry.target.encode("utf-8", "surrogateescape") + b"\0"
    mode = b"x" if executable else b"-"
    return b"F" + rel + b"\0" + mode + str(size).encode() + b"\0" + hex_digest.encode() + b"\0"


def snapshots_dir() -> Path:
    """``$MURMUR_NB_SNAPSHOTS``, else ``<cache>/module-snapshots``."""
    explicit = os.environ.get("MURMUR_NB_SNAPSHOTS")
    if explicit:
        return Path(explicit).expanduser()
    return cache_dir() / "module-snapshots"


def _private_store() -> Path:
    """A fresh store nobody else can have prepared, for a store path that is squatted or
    unusable; removed when this process exits."""
    return process_folder("murmur-nb-snapshots-")


class SnapshotStore:
    """The content-addressed snapshots of one process, and the per-file digests it knows."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root
        self._ready: Path | None = None
        self._lock = threading.Lock()
        #: file stat signature -> SHA-256 hex of its bytes (bounded, see _remember)
        self._files: dict[tuple[int, int, int, int, int], str] = {}
        #: snapshot path -> the snapshot's own listing when this process verified it
        self._verified: dict[Path, list[Entry]] = {}
        #: a snapshot folder's name -> the bytes of its files (its name is its content's)
        self._sizes: dict[str, int] = {}

    def root(self) -> Path:
        """The store folder, ``0700``, made on first use; a fresh private one if anyone
        else could write it or a folder above it (what is in it is run, as root on a root
        host: :func:`~murmur_nb._files.trust.trusted_folder`, which makes nothing before
        the nearest existing part of the way is found to be nobody else's: a link there
        would have the folders made wherever it points). Made private again by
        :func:`~murmur_nb._sandbox.access.make_private`, which leaves alone the ACL entries
        the sandbox uids of other root kernels sharing the store hold on it."""
        if self._ready is not None:
            return self._ready
        root = trusted_folder(self._root if self._root is not None else snapshots_dir(),
                              _private_store)  # fmt: skip
        if not root.is_dir():  # a file of this user's where the store goes
            root = _private_store()
        # a store an earlier version made 0755: private now, through the owning group's
        # and others' bits, never the ACL mask other root kernels' sandbox uids need
        access.make_private(root)
        own_state.keep(root)  # a module reads its own snapshot, never the store
        self._ready = root
        return root

    def snapshot(self, folder: Path, listing: list[Entry], *, max_bytes: int) -> Snapshot:
        """The verified snapshot of ``folder`` as ``listing`` (from :func:`walk`) saw it.

        Its path ends in the folder's own name (a module knows its id by it):
        ``<store>/<digest>-<name>/<name>``.
        """
        predicted = self._predict(listing)
        if predicted is not None:
            found = self._reusable(predicted, folder.name, len(listing) + 1, max_bytes)
            if found is not None:
                return found
        snap = self._build(folder, listing, max_bytes)
        self.prune()  # the new one is held: never the one removed
        return snap

    def prune(self, max_bytes: int | None = None) -> list[Path]:
        """Remove the least recently used snapshots of the store past ``max_bytes`` (default
        :func:`budget_bytes`) of their files' bytes, never one in use (:class:`Hold`, by any
        process) nor one of another account; the snapshot folders removed."""
        if max_bytes is None:
            max_bytes = budget_bytes()
        root, me = self.root(), os.geteuid()
        found = []
        with contextlib.suppress(OSError), os.scandir(root) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if (not entry.name.startswith(".") and stat.S_ISDIR(st.st_mode)
                            and st.st_uid == me):  # fmt: skip
                        found.append((st.st_mtime_ns, entry.name))
        found.sort(reverse=True)  # most recently used first
        total, removed = 0, []
        for _, name in found:
            total += self._size(root / name)
            if total > max_bytes and _removed_unless_held(root / name):
                removed.append(root / name)
                self._verified.pop(root / name / name.partition("-")[2], None)
        return removed

    def _size(self, top: Path) -> int:
        known = self._sizes.get(top.name)
        if known is None:
            try:
                listing = walk(top, max_entries=1 << 62, max_bytes=1 << 62, skip="")
            except (OSError, Refused):
                return 0
            known = sum(entry.sig[2] for entry in listing if entry.kind == "F")
            if len(self._sizes) >= 100_000:
                self._sizes.clear()
            self._sizes[top.name] = known
        return known

    def intact(self, snap: Snapshot) -> bool:
        """Whether ``snap`` is still exactly the folder this process verified (``stat`` only).

        A ``__pycache__`` in it (the interpreter of a module run unconfined as root writes
        one: :func:`_clean_pycache`) is removed and the folder looked at again; a batch's
        modules may write it again as they start meanwhile, so up to :data:`_PYCACHE_TRIES`
        times."""
        known = self._verified.get(snap.path)
        if known is None:
            return False
        for tries_left in range(_PYCACHE_TRIES, -1, -1):
            try:
                now = walk(snap.path, max_entries=len(known) + 64, max_bytes=1 << 62, skip="")
            except (OSError, Refused):
                return False
            if _same(now, known):
                return True  # the common case: one stat walk
            if not tries_left or not any(Path(e.rel).name == _PYCACHE for e in now):
                return False
            with contextlib.suppress(OSError):  # one being written meanwhile: look again
                _clean_pycache(snap.path, len(known))
        return False

    def _predict(self, listing: list[Entry]) -> str | None:
        digest = hashlib.sha256()
        for entry in listing:
            hex_digest = ""
            if entry.kind == "F":
                known = self._files.get(entry.sig)
                if known is None:
                    return None
                hex_digest = known
            digest.update(_record(entry, entry.sig[2], entry.executable, hex_digest))
        return "sha256:" + digest.hexdigest()

    def _top(self, digest: str, name: str) -> Path:
        return self.root() / f"{digest.removeprefix('sha256:')}-{name}"

    def _reusable(
        self, digest: str, name: str, max_entries: int, max_bytes: int
    ) -> Snapshot | None:
        top = self._top(digest, name)
        hold = _hold(top)  # before any check: a snapshot checked is one kept
        if hold is None:
            return None
        snap = Snapshot(top / name, digest, hold)
        if self.intact(snap):
            return snap
        # made by another host process (or changed since): trust only what hashes to its name
        try:
            _clean_pycache(snap.path, max_entries)
            listing = walk(snap.path, max_entries=max_entries, max_bytes=max_bytes, skip="")
            if self._hash_copy(snap.path, listing, None, max_bytes) == digest and _same(
                listing, walk(snap.path, max_entries=max_entries, max_bytes=max_bytes, skip="")
            ):
                self._verified[snap.path] = listing
                return snap
        except (OSError, Refused):
            pass
        hold.close()
        remove_tree(top)
        return None

    def _build(self, folder: Path, listing: list[Entry], max_bytes: int) -> Snapshot:
        """Copy ``folder`` into a build folder of the store and rename it into place.

        The build folder is locked by this process while it fills
        (:func:`~murmur_nb._files.scratch.owned_folder`):
        a kernel killed mid-copy (the OOM killer, a restart) ran no clean-up, and its partial
        copy, up to ``max_module_bytes`` in the persistent store, stayed there for good; now
        the next build in the store removes it. Its lock file goes just before the rename,
        so no snapshot holds one (a sweep leaves a folder without one alone)."""
        tmp = owned_folder(_BUILD, self.root())
        try:
            inner = tmp / folder.name
            inner.mkdir(mode=0o755)
            digest = self._hash_copy(Path(os.path.realpath(folder)), listing, inner, max_bytes)
            for entry in listing:  # every file is written: seal the folders
                if entry.kind == "D":
                    (inner / entry.rel).chmod(0o555)
            inner.chmod(0o555)
            (tmp / LOCK).unlink()  # held until the rename: no sweep takes it meanwhile
            tmp.chmod(0o555)
            top = self._top(digest, folder.name)
            hold = _hold(tmp)  # held from before the rename: no prune takes it meanwhile
            try:
                tmp.rename(top)
            except OSError:  # another host made it first: use theirs once it hashes right
                found = self._reusable(digest, folder.name, len(listing) + 1, max_bytes)
                if found is not None:
                    if hold is not None:
                        hold.close()
                    release(tmp)
                    return found
                tmp.rename(top)  # theirs did not hash right and is gone: ours takes its place
            leave(tmp)
            snap = Snapshot(top / folder.name, digest, hold)
            self._verified[snap.path] = walk(snap.path, max_entries=len(listing) + 1,
                                             max_bytes=max_bytes, skip="")  # fmt: skip
            return snap
        except BaseException:
            if tmp.exists():
                remove_tree(tmp)
            leave(tmp)
            raise

    def _hash_copy(self, src: Path, listing: list[Entry], dest: Path | None, max_bytes: int
                   ) -> str:  # fmt: skip
        """The folder digest of what is read from ``src`` (and written to ``dest`` if given)."""
        digest = hashlib.sha256()
        budget = max_bytes
        for entry in listing:
            size, executable, hex_digest = 0, False, ""
            if entry.kind == "D" and dest is not None:
                (dest / entry.rel).mkdir(mode=0o755)
            elif entry.kind == "L" and dest is not None:
                (dest / entry.rel).symlink_to(entry.target)
            elif entry.kind == "F":
                size, executable, hex_digest = self._file(src / entry.rel, dest, entry, budget)
                budget -= size
            digest.update(_record(entry, size, executable, hex_digest))
        return "sha256:" + digest.hexdigest()

    def _file(self, src: Path, dest: Path | None, entry: Entry, budget: int
              ) -> tuple[int, bool, str]:  # fmt: skip
        """``(size, executable, sha256 hex)`` of the bytes read (and written) for one file."""
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise Refused("invalid_descriptor", "module",
                              f"{src} changed into something other than a file; try again")
            executable = bool(before.st_mode & 0o111)
            digest = hashlib.sha256()
            size = 0
            with self._target(dest, entry, stat.S_IMODE(before.st_mode)) as out:
                for chunk in _chunks(fd):
                    size += len(chunk)
                    if size > budget:
                        raise _too_large(f"{src} grew past the bytes left in the budget",
                                         "max_module_bytes", budget)  # fmt: skip
                    digest.update(chunk)
                    if out is not None:
                        out.write(chunk)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        hex_digest = digest.hexdigest()
        if _sig(before) == _sig(after) == entry.sig and size == entry.sig[2]:
            self._remember(entry.sig, hex_digest)
        return size, executable, hex_digest

    @contextlib.contextmanager
    def _target(self, dest: Path | None, entry: Entry, mode: int
                ) -> Iterator[_Writer | None]:  # fmt: skip
        """Where a copied file's bytes go; it keeps its mode, less the write bits (the
        owner may always read: the host just did)."""
        if dest is None:
            yield None
            return
        fd = os.open(dest / entry.rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                     0o600)  # fmt: skip
        try:
            yield _Writer(fd)
            os.fchmod(fd, mode & 0o555 | 0o400)
        finally:
            os.close(fd)

    def _remember(self, sig: tuple[int, int, int, int, int], hex_digest: str) -> None:
        with self._lock:
            if len(self._files) >= 1_000_000:
                self._files.clear()
            self._files[sig] = hex_digest


def _hold(folder: Path) -> Hold | None:
    """A shared lock on ``folder``, the snapshot there marked used now; ``None`` when there
    is none. Waits while a prune removes it, and then says ``None``: it is gone."""
    try:
        fd = os.open(folder, _FOLDER)
    except OSError:
        return None
    hold = Hold(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        held, now = os.fstat(fd), os.lstat(folder)
    except OSError:
        hold.close()
        return None
    if held.st_nlink == 0 or (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
        hold.close()  # removed while this waited (another may stand in its place)
        return None
    with contextlib.suppress(OSError):  # its recency, for the prune
        os.utime(fd)
    return hold


def _removed_unless_held(top: Path) -> bool:
    """Remove snapshot folder ``top`` if no process holds it (an exclusive lock taken
    without waiting); whether it was removed."""
    try:
        fd = os.open(top, _FOLDER)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held, now = os.fstat(fd), os.lstat(top)
        if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
            return False
        remove_tree(top)  # under the lock: one taking it up meanwhile waits, then finds it gone
        return not top.exists()
    except OSError:  # in use
        return False
    finally:
        os.close(fd)


def _same(now: list[Entry], known: list[Entry]) -> bool:
    """The same files and links, unchanged, and the same folders (whose own times move
    whenever an entry is added or removed, which the listing shows anyway)."""
    return len(now) == len(known) and all(
        a.rel == b.rel and a.kind == b.kind and (a.kind == "D" or a == b)
        for a, b in zip(now, known, strict=True)
    )


def _clean_pycache(snapshot: Path, max_entries: int) -> None:
    """Remove any ``__pycache__`` from a snapshot: the interpreter writes one there when it
    runs unconfined as root (mode bits do not stop root), and nothing in it was hashed."""
    listing = walk(snapshot, max_entries=max_entries + 64, max_bytes=1 << 62, skip="")
    for entry in listing:
        if Path(entry.rel).name != _PYCACHE or _PYCACHE in Path(entry.rel).parent.parts:
            continue
        parent = (snapshot / entry.rel).parent
        parent.chmod(0o755)
        try:
            if entry.kind == "D":
                remove_tree(snapshot / entry.rel)
            else:
                (snapshot / entry.rel).unlink()
        finally:
            parent.chmod(0o555)


class _Writer:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]


def _chunks(fd: int) -> Iterator[bytes]:
    while chunk := os.read(fd, _CHUNK):
        yield chunk
