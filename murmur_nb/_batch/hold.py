"""A running batch's hold on its journal's rows: one batch at a time per key and inputs.

Two batches on one journal at once (one notebook in two kernels; a cell run again while its
background batch runs) each read the rows the other had not finished yet and ran them as
well: every such row's module ran twice, and the journal's ``spent`` kept one of the two
costs. A batch therefore holds, for its whole run (its journal read, its rows run and
committed), an exclusive ``flock`` on a lock file beside the journal, named for its key
(capability, module digest and run options: :data:`~.journal.JournalKey`) and the digest of
its inputs; a second batch of both is refused at once (:data:`JOURNAL_BUSY`), naming the
journal, the holder's process and the way out. Batches of other keys share no row, and
batches over other inputs (another DataFrame) are other work, so they keep other files and
run side by side on one journal (the default journal is every batch's); two over inputs
that overlap each run the rows they share, as before.

``flock`` belongs to an open file, not to a thread or a process id: a background batch of
the same kernel holds it against a second one opened there, and a process that dies
(SIGKILL too) lets go of it, so a killed holder never stands in the way. The holder writes
its pid, host and start into the file, which the refusal quotes (and nothing else reads).

The holder unlinks the file as it lets go (still holding the lock), so a journal's folder
keeps no file per capability it ever ran; one who locked a file that was unlinked
meanwhile opens the path again, so two never both hold it. A killed holder's file stays
until the next batch of its key takes it and removes it in turn.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from pathlib import Path

from murmur_nb._exceptions import ModuleHostError
from murmur_nb._rules import clipped

__all__ = ["JOURNAL_BUSY", "Hold", "hold_journal"]

#: the code of the refusal of a batch whose journal rows another running batch holds
JOURNAL_BUSY = "journal_busy"
#: how many times a file unlinked by its holder between the open and the lock is opened again
_AGAIN = 100
#: what of a holder's note is read back
_NOTE_BYTES = 4096


#: the lock files this process holds open, closed in a forked child (:func:`_forget_in_child`)
_open_here: set[int] = set()


class Hold:
    """A journal's lock file, locked by this batch: :meth:`release` lets go (idempotent)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    def release(self) -> None:
        """Remove the file and let go of it (unlinked first, while it is still held)."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        _open_here.discard(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)  # a child forked meanwhile holds nothing either
        finally:
            os.close(fd)


def _forget_in_child() -> None:
    """A forked child (``multiprocessing``'s default) closes the lock files it inherited: the
    lock is the kernel's, and a child left running after the kernel was killed would
    otherwise hold its journal for good."""
    for fd in _open_here:
        with contextlib.suppress(OSError):
            os.close(fd)
    _open_here.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def hold_journal(journal: Path, key: tuple[str, ...], what: str) -> Hold:
    """Take ``journal``'s rows of ``key`` for one batch's run (``what`` is named to a second).

    Raises
    ------
    ModuleHostError
        ``journal_busy``: another batch holds them now (its process named), or the lock
        file cannot be made or locked (why); nothing was run.
    """
    real = Path(os.path.realpath(journal))  # two names for one journal share its lock
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    path = real.with_name(f"{real.name}-{digest}.lock")
    for _ in range(_AGAIN):
        try:
            fd = _open(path, real)
        except OSError as exc:
            raise ModuleHostError(_unlockable(journal, path, exc), code=JOURNAL_BUSY) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            note = os.pread(fd, _NOTE_BYTES, 0)
            os.close(fd)
            if isinstance(exc, BlockingIOError):
                raise ModuleHostError(_busy(journal, what, note), code=JOURNAL_BUSY) from None
            raise ModuleHostError(_unlockable(journal, path, exc), code=JOURNAL_BUSY) from exc
        try:
            if _still_there(path, fd):
                _write_note(fd, what)
                _open_here.add(fd)
                return Hold(path, fd)
        except BaseException:  # a Ctrl-C here must not leave the lock held until exit
            os.close(fd)
            raise
        os.close(fd)  # its holder removed it as this one opened it: the path's file now
    raise ModuleHostError(_unlockable(journal, path, OSError("it kept being replaced")),
                          code=JOURNAL_BUSY)  # fmt: skip


def _open(path: Path, journal: Path) -> int:
    """The lock file, made with the journal's permissions (whoever may use the journal may
    take its lock, a killed holder's file included); a link there is refused."""
    try:
        mode = journal.stat().st_mode & 0o666 | 0o600
    except OSError:
        mode = 0o600
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return os.open(path, flags)
    with contextlib.suppress(OSError):
        os.fchmod(fd, mode)  # past the umask
    return fd


def _still_there(path: Path, fd: int) -> bool:
    """Whether the locked file is still the one at ``path`` (not unlinked by its holder)."""
    held = os.fstat(fd)
    try:
        now = path.lstat()
    except FileNotFoundError:
        return False
    return held.st_nlink > 0 and (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def _write_note(fd: int, what: str) -> None:
    note = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
            "batch": what}  # fmt: skip
    with contextlib.suppress(OSError):  # the note only words a refusal
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(note).encode(), 0)


def _holder(note: bytes) -> str:
    """Who holds the lock, from its note: ``pid 123 on host h, since 12:00:01``."""
    try:
        said = json.loads(note)
        pid, host, since = int(said["pid"]), str(said["host"]), float(said["since"])
    except (ValueError, TypeError, KeyError):
        return "a process that has not said which"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
    if pid == os.getpid() and host == socket.gethostname():
        return (f"pid {pid}, this process: a batch in the background, or still running in "
                f"another thread, since {when}")  # fmt: skip
    return f"pid {pid} on host {clipped(host)}, since {when}"


def _busy(journal: Path, what: str, note: bytes) -> str:
    return (
        f"journal={str(journal)!r} is in use: another batch ({_holder(note)}) is running "
        f"its rows of {what} now, so this one would run them a second time (and pay for "
        "them twice); nothing was run. Wait for that batch to end (batch.wait() in its "
        "kernel; batch.cancel() stops it, keeping its finished rows) and run this map() "
        "again: it resumes from the rows that batch kept. Or pass another journal= to run "
        "apart from it"
    )


def _unlockable(journal: Path, path: Path, exc: OSError) -> str:
    return (
        f"journal={str(journal)!r} cannot be held for this batch: its lock file {path} "
        f"cannot be made or locked ({exc}); nothing was run. A batch holds it so that no "
        "other batch runs the same rows at once. Make the journal's folder writable, or "
        "pass another journal= (or journal=None to keep nothing past this batch)"
    )
