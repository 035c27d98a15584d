"""The batch journal: every finished row, in SQLite, so a batch re-run skips what is done.

Rows are keyed by the capability, the module's approval digest (descriptor and verified
snapshot) and the SHA-256 of the canonical input, so a changed module reuses nothing. The
digest column also holds the run options a row ran with, when any was given
(:func:`~murmur_nb._batch.options.run_key`: ``extra``, ``deadline_ms``,
``max_output_bytes`` change a row's outcome), so a batch run with other options reuses none
of them either; rows run without any keep the bare module digest, as before. The rows
a batch settles are committed in groups (WAL, ``synchronous=NORMAL``): a group is committed
once it is :data:`GROUP_S` old, by the next row to settle or by the batch's waiting thread
(which looks every 0.1 s), so a killed kernel loses only rows still running or settled in
the last 0.15 s or so, and those run again. Only ``ok`` and ``failed`` rows are kept;
a row not run is run again. Results live here, not in Python objects, so 100,000 rows keep
the kernel small; ``:memory:`` when the caller asked for no journal.

**Sealed rows.** A journal row is reported as that row's result on resume, so anyone who
can write the file could otherwise put words in a module's mouth. Each row is sealed with an
HMAC-SHA256 over its key, status, cost and record, under the user's sealing key
(:func:`~murmur_nb._files.sealing_key.sealing_key`, the hook cache's key and rule), with a
message of the journal's own. A row whose seal does not match (edited, planted, written by a
version that did not seal, or sealed on another machine or by a root kernel's process key)
is treated as absent: it runs again and its entry is replaced. Its artifacts were never
trusted from here anyway (each is re-checked against its digest in the store). The seals
cover rows, not the file, and SQL in the file runs when it is read or written, so a journal
holding anything but its own table (a view, a trigger, an index, a ``CHECK``) is refused
before anything runs (:func:`_layout`).

**A root kernel's journal.** SQLite follows links and Python cannot ask it not to, so a
root kernel given a journal in a folder another account can write would write wherever
that account points it (a file it reads, or one only root may write). A root kernel's
journal is used only where the way to it, its folder and the file are root's alone (the
caches' rule, :mod:`murmur_nb._files.trust`; links root made there are fine), and the
default one goes where that holds (:func:`default_path`).

**One batch at a time.** A batch holds the journal's rows of its key and inputs for its
whole run (:meth:`Journal.hold`, :mod:`.hold`), so a second batch of both on the same file
(another kernel, or this one's background batch) is refused instead of running every
unfinished row again; other keys, and other inputs, stay free.

**What a row spent.** Each row keeps ``spent``: the sum of the ``actual_cost`` of every
attempt of that input under this key (``NULL`` when one of them was unknown), so a resumed
batch counts what its journal already spent against ``max_cost``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from murmur_nb._batch.hold import Hold, hold_journal
from murmur_nb._files.scratch import process_folder
from murmur_nb._files.sealing_key import sealing_key
from murmur_nb._files.trust import (
    from_working_folder,
    nearest_open_to_others,
    open_to_others,
    why_open,
)
from murmur_nb._rules import cache_dir, clipped

__all__ = ["BUSY_S", "READ_CHUNK", "Finished", "Journal", "JournalKey", "default_path"]

#: A rowid table: a row (its record is most of a kilobyte) is too big for ``WITHOUT ROWID``,
#: which SQLite advises only for rows under a twentieth of a page; with it each group's commit
#: wrote about twice the pages (35 vs 17 us of the kernel's CPU a row, a file journal).
#: Journals made before keep their table: both answer the same statements.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    capability TEXT NOT NULL,
    module_digest TEXT NOT NULL,
    input_key TEXT NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    finished REAL NOT NULL,
    spent REAL,
    seal TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (capability, module_digest, input_key)
)
"""
#: columns a journal written before rows were sealed lacks (its rows then fail their seal)
_ADDED = (("spent", "REAL"), ("seal", "TEXT NOT NULL DEFAULT ''"))
#: what a journal holds: its table and the index of its key, nothing else
_OBJECTS = {("table", "rows"), ("index", "sqlite_autoindex_rows_1")}
#: the table's columns as ``PRAGMA table_xinfo`` gives them (name, type, not null, default,
#: key, hidden), journals made before rows were sealed included once :data:`_ADDED` ran
_COLUMNS = [
    ("capability", "TEXT", 1, None, 1, 0), ("module_digest", "TEXT", 1, None, 2, 0),
    ("input_key", "TEXT", 1, None, 3, 0), ("status", "TEXT", 1, None, 0, 0),
    ("record", "TEXT", 1, None, 0, 0), ("finished", "REAL", 1, None, 0, 0),
    ("spent", "REAL", 0, None, 0, 0), ("seal", "TEXT", 1, "''", 0, 0),
]
#: what the journal's seals are made under, apart from any other use of the sealing key
_PURPOSE = b"murmur-nb batch journal row v1"

#: (capability, module digest with the run options: ``run_key``); the input key completes
#: a row's key
JournalKey = tuple[str, str]


class Finished(NamedTuple):
    """A journaled row as a resumed batch needs it: its status and what it spent."""

    status: str
    spent: float | None

#: Rows read per query (SQLite's bound on a statement's parameters is 32,766 or 999)
READ_CHUNK = 500
#: How long a kernel waits for another's hold on the journal before giving up
BUSY_S = 30.0
#: How old a group of settled rows gets before it is committed (a transaction per row was a
#: quarter of the host's bookkeeping CPU per row)
GROUP_S = 0.05


class Journal:
    """One SQLite journal file (or ``None``: in memory, nothing kept past the process).

    Thread-safe: one connection behind a lock (a batch's worker threads write; a view or
    ``to_pandas`` may read from another thread, and sees the rows of an open group too).

    A root kernel uses a journal file only where nobody but root can change the way to it,
    its folder or the file (:func:`_placed`), and refuses any other with a ``ValueError``
    before anything runs; a kernel that is not root opens the path it is given, as before
    (a folder its group shares is a fine place for a project's journal: nobody there can
    have it write where its user could not).
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, key: bytes | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._key = hmac.new(key if key is not None else sealing_key()[0], _PURPOSE,
                             hashlib.sha256).digest()  # fmt: skip
        self._mac = hmac.new(self._key, digestmod=hashlib.sha256)  # copied for each seal
        #: the path SQLite opens: ``path``, or for a root kernel where it leads (:func:`_placed`)
        self._file = _placed(self.path) if self.path is not None else None
        self._lock = threading.RLock()
        self._groups = 0
        self._opened = 0.0
        try:
            self._conn: sqlite3.Connection | None = self._connect()
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def _connect(self) -> sqlite3.Connection:
        if self._file is not None:
            _create_private(self._file)
        db = sqlite3.connect(
            str(self._file) if self._file is not None else ":memory:",
            check_same_thread=False, isolation_level=None, timeout=BUSY_S,
        )  # fmt: skip
        db.execute("PRAGMA trusted_schema=OFF")  # the file is not ours alone: see _layout
        if self.path is not None:
            _write_ahead(db)
        db.execute("PRAGMA synchronous=NORMAL")
        self._create(db)
        return db

    def _unusable(self, exc: sqlite3.DatabaseError) -> ValueError:
        """Why this path cannot be opened as a journal, and what to pass instead."""
        where = str(self.path)
        why = "it is a folder" if self.path is not None and self.path.is_dir() else f"SQLite: {exc}"
        return ValueError(
            f"journal={where!r} cannot be used as a batch journal ({why}); nothing was run "
            "and nothing was written there. Pass the path of a journal file (made if missing), "
            "or journal=None to keep nothing past this batch"
        )

    @property
    def _db(self) -> sqlite3.Connection:
        """The open connection (lock held): a file journal closed by :meth:`close` opens
        again on its next use; an in-memory one's rows went with it."""
        if self._conn is None:
            if self.path is None:
                raise RuntimeError("this batch's in-memory journal was closed (batch.close()); "
                                   "its rows are gone: run map() again")  # fmt: skip
            self._conn = self._connect()
        return self._conn

    @staticmethod
    def _create(db: sqlite3.Connection) -> None:
        """The table, with the columns of sealed rows (added to a journal made without)."""
        db.execute("BEGIN IMMEDIATE")  # two kernels opening one journal: one at a time
        try:
            _layout(db)
            db.execute(_SCHEMA)
            have = {row[1] for row in db.execute("PRAGMA table_info(rows)")}
            for name, declared in _ADDED:
                if name not in have:
                    db.execute(f"ALTER TABLE rows ADD COLUMN {name} {declared}")
            _layout(db, made=True)
        finally:
            db.execute("COMMIT")

    def hold(self, key: tuple[str, ...], what: str) -> Hold | None:
        """This journal's rows of ``key`` held for one batch's run (:mod:`.hold`), so no
        other batch runs them at once; ``None`` for an in-memory journal (no one else's).

        Raises
        ------
        ModuleHostError
            ``journal_busy``: another batch runs them now (naming it), or the lock beside
            the journal cannot be taken.
        """
        return None if self._file is None else hold_journal(self._file, key, what)

    @property
    def closed(self) -> bool:
        """Whether no connection is open now (a file journal opens one again when used)."""
        return self._conn is None

    def close(self) -> None:
        """Commit what is pending and close the connection (the batch does when its run
        ends, and :meth:`Batch.close <murmur_nb.Batch.close>`). Idempotent."""
        with self._lock:
            if self._conn is None:
                return
            self._commit()
            self._conn.close()
            self._conn = None

    def _seal(self, key: JournalKey, input_key: str, status: str, spent: float | None,
              record: str) -> str:  # fmt: skip
        message = json.dumps([*key, input_key, status, spent, record], separators=(",", ":"))
        mac = self._mac.copy()  # the key's padded state, made once
        mac.update(message.encode())
        return mac.hexdigest()

    def _sealed(self, key: JournalKey, row: tuple[str, str, float | None, str, str]) -> bool:
        """Whether ``(input_key, status, spent, record, seal)`` is a row this key sealed."""
        input_key, status, spent, record, seal = row
        return hmac.compare_digest(self._seal(key, input_key, status, spent, record), seal)

    def done(self, key: JournalKey, input_keys: Sequence[str]) -> dict[str, Finished]:
        """``input_key -> (status, spent)`` for the rows of ``input_keys`` already journaled
        under a valid seal (one that fails its seal is left out, so it runs again)."""
        found: dict[str, Finished] = {}
        with self._lock:
            for start in range(0, len(input_keys), READ_CHUNK):
                chunk = list(dict.fromkeys(input_keys[start : start + READ_CHUNK]))
                marks = ",".join("?" * len(chunk))
                cursor = self._db.execute(
                    "SELECT input_key, status, spent, record, seal FROM rows WHERE "
                    f"capability=? AND module_digest=? AND input_key IN ({marks})",
                    (*key, *chunk),
                )
                found.update((row[0], Finished(row[1], row[2])) for row in cursor
                             if self._sealed(key, row))  # fmt: skip
        return found

    @contextlib.contextmanager
    def grouped(self) -> Iterator[None]:
        """Inside, :meth:`write` adds to one open transaction, committed by :meth:`commit_due`
        once it is :data:`GROUP_S` old, and in any case when the (outermost) block ends."""
        with self._lock:
            self._groups += 1
        try:
            yield
        finally:
            with self._lock:
                self._groups -= 1
                if not self._groups:
                    self._commit()

    def commit_due(self) -> None:
        """Commit the open group of writes if it is :data:`GROUP_S` old."""
        if time.monotonic() - self._opened < GROUP_S:
            return  # not due (looked at without the lock: the workers ask after every row)
        with self._lock:
            db = self._conn
            if db is not None and db.in_transaction and time.monotonic() - self._opened >= GROUP_S:
                self._commit()

    def _commit(self) -> None:
        if self._conn is not None and self._conn.in_transaction:
            self._conn.execute("COMMIT")

    def write(self, key: JournalKey, input_key: str, status: str, record: str,
              spent: float | None) -> None:  # fmt: skip
        """Keep one finished row, sealed (replacing an earlier outcome of the same input);
        ``spent``: what every attempt of it cost, ``None`` when one cost was unknown."""
        spent = None if spent is None else float(spent)  # as SQLite's REAL gives it back
        seal = self._seal(key, input_key, status, spent, record)
        with self._lock:
            if self._groups and not self._db.in_transaction:
                self._db.execute("BEGIN")
                self._opened = time.monotonic()
            self._db.execute(
                "INSERT OR REPLACE INTO rows (capability, module_digest, input_key, status, "
                "record, finished, spent, seal) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (*key, input_key, status, record, time.time(), spent, seal),
            )

    def records(self, key: JournalKey, input_keys: Sequence[str]) -> dict[str, str]:
        """``input_key -> record`` (JSON text) for the rows of ``input_keys`` journaled under
        a valid seal, read :data:`READ_CHUNK` keys per query (a missing or unsealed row is left
        out)."""
        found: dict[str, str] = {}
        for start in range(0, len(input_keys), READ_CHUNK):
            chunk = list(dict.fromkeys(input_keys[start : start + READ_CHUNK]))
            marks = ",".join("?" * len(chunk))
            with self._lock:  # per query: the batch's workers write in between
                rows = self._db.execute(
                    "SELECT input_key, status, spent, record, seal FROM rows WHERE "
                    f"capability=? AND module_digest=? AND input_key IN ({marks})",
                    (*key, *chunk),
                ).fetchall()
            found.update((row[0], str(row[3])) for row in rows if self._sealed(key, row))
        return found

    def record(self, key: JournalKey, input_key: str) -> str | None:
        """The stored record (JSON text) of one row, or ``None`` (none, or not sealed)."""
        return self.records(key, [input_key]).get(input_key)


def _write_ahead(db: sqlite3.Connection) -> None:
    """Put the journal in WAL mode, waiting up to :data:`BUSY_S` for other kernels.

    SQLite takes the lock this needs without its busy handler: while another kernel's
    connection makes the same new file WAL, it says "database is locked" at once (six kernels
    opening one new journal together: one was refused in about every tenth start, told the
    file "cannot be used as a batch journal"), so it is asked again until the connection's
    own timeout.
    """
    end = time.monotonic() + BUSY_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > end:
                raise
            time.sleep(0.005)


def _layout(db: sqlite3.Connection, *, made: bool = False) -> None:
    """Refuse a journal holding anything but its table (``made``: its columns too, once it
    is made or brought up to date): SQL its file holds runs in the kernel whenever the
    journal is read or written, and the seals cover rows, not the file. A ``rows`` view of
    an endless recursive query held ``map`` for good (Ctrl-C does not reach a running
    statement); a trigger wrote 200 MB with each row; a column's ``CHECK`` or ``AS`` is
    code too.

    Raises
    ------
    sqlite3.DatabaseError
        Naming what is there (:meth:`Journal._unusable` says what to pass instead).
    """
    objects = db.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    extra = sorted(f"{kind} {name!r}" for kind, name, _ in objects
                   if (kind, name) not in _OBJECTS)  # fmt: skip
    sql = next((sql for kind, name, sql in objects if (kind, name) == ("table", "rows")), "")
    code = re.search(r"\b(CHECK|AS|COLLATE|REFERENCES)\b", sql or "", re.IGNORECASE)
    columns = [tuple(row[1:]) for row in db.execute("PRAGMA table_xinfo(rows)")] if made else []
    if extra or code or (made and columns != _COLUMNS):
        what = "; ".join(extra) or (f"a column's {code[1]}" if code else "other columns")
        raise sqlite3.DatabaseError(
            f"the file holds what no batch journal holds ({clipped(what)}); SQL a journal "
            "holds would run in this kernel, so only the journal's own table is read"
        )


def _create_private(path: Path) -> None:
    """Make a missing journal file ``0600``: it holds every row's result, and SQLite makes
    its ``-wal`` and ``-shm`` files with the database's mode (it made the database with the
    umask's, ``0644``: another account read a root kernel's rows in a ``0755`` home).

    A journal that exists (a link to one included) is left as it is; what cannot be made
    here SQLite reports when it opens the path (:meth:`Journal._unusable`).
    """
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def default_path(home: Path) -> Path:
    """Where a batch keeps its journal when ``map`` names none:
    ``<home>/batches/journal.sqlite``.

    A root kernel whose home another account could write or own (``sudo -E`` keeps a
    user's ``HOME``; a container may be given one) keeps it where only root can write, as
    the caches do: the murmur-nb cache's ``batches`` folder (kept: the batch resumes), else
    a folder of this process's (gone when it exits). A journal named there is refused
    (:func:`_placed`): the default one goes where it is safe instead.
    """
    if os.geteuid() != 0:
        return home / "batches" / "journal.sqlite"
    for folder in (home / "batches", cache_dir() / "batches"):
        if _open_part(from_working_folder(folder / "journal.sqlite")) is None:
            return folder / "journal.sqlite"
    return process_folder("murmur-nb-journal-") / "journal.sqlite"


def _placed(path: Path) -> Path:
    """The journal's folder made, and the path SQLite is to open: ``path`` itself for a
    kernel that is not root (a folder its group shares is a fine place for its journal); for
    a root kernel, where ``path`` leads, once nobody else can change the way there, its
    folder or the file (:func:`_open_part`).

    SQLite follows links (its ``-wal`` and ``-shm`` go beside the target) and Python cannot
    ask it not to, so a root kernel's journal where another account can make names would be
    theirs to point anywhere, between any check and the open: at a file of theirs (every
    row's result written where they read it) or at one only root may write. Once every part
    of the way is root's alone, nothing can change it after the check.

    Raises
    ------
    ValueError
        For a root kernel: naming the folder or file another account can write or owns.
    """
    if os.geteuid() != 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path
    given = from_working_folder(path)
    why = _open_part(given)  # before anything is made: a link there would lead the mkdir
    if why is None:
        given.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        why = _open_part(given)
    if why is not None:
        raise ValueError(
            f"journal={str(path)!r} cannot be used as a batch journal: {why}. A root kernel "
            "writes its journal only where nobody else can change the way to it (a link put "
            "there would have root write the rows into any file); nothing was run and nothing "
            "was written there. Keep it in a folder only root can write (such as under "
            "/root), or pass journal=None to keep nothing past this batch"
        )
    return Path(os.path.realpath(given))


def _open_part(given: Path) -> str | None:
    """Why another account could change where ``given`` (absolute) leads or what it holds,
    else ``None``: the nearest of it and the folders above it that exists, walked as the
    kernel walks it (:func:`~murmur_nb._files.trust.nearest_open_to_others`: links only root
    can change are fine); for a journal that exists, also the folder it is in after every
    link (SQLite makes its ``-wal`` and ``-shm`` there: not a sticky ``/tmp`` either), and
    that it is a file (a folder is left for SQLite to refuse, as it is for any kernel)."""
    culprit = nearest_open_to_others(given)
    if culprit is not None or not os.path.lexists(given):
        return None if culprit is None else why_open(culprit)
    resolved = Path(os.path.realpath(given))
    culprit = open_to_others(resolved.parent)
    if culprit is not None:
        return why_open(culprit)
    try:
        kind = os.lstat(resolved).st_mode
    except OSError:
        return f"{resolved} is missing or cannot be looked at"
    return None if stat.S_ISREG(kind) or stat.S_ISDIR(kind) else f"{resolved} is not a file"
