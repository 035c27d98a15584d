"""The batch journal: every finished row, in SQLite, so a batch re-run skips what is done.

Rows are keyed by the capability, the module's approval digest (descriptor and verified
snapshot) and the SHA-256 of the canonical input, so a changed module reuses nothing. The rows
a batch settles are committed in groups (WAL, ``synchronous=NORMAL``): a group is committed
once it is :data:`GROUP_S` old, by the next row to settle or by the batch's waiting thread
(which looks every 0.1 s), so a killed kernel loses only rows still running or settled in
the last 0.15 s or so, and those run again. Only ``ok`` and ``failed`` rows are kept;
a row not run is run again. Results live here, not in Python objects, so 100,000 rows keep
the kernel small; ``:memory:`` when the caller asked for no journal.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["Journal", "JournalKey"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    capability TEXT NOT NULL,
    module_digest TEXT NOT NULL,
    input_key TEXT NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    finished REAL NOT NULL,
    PRIMARY KEY (capability, module_digest, input_key)
) WITHOUT ROWID
"""

#: (capability, module digest); the input key completes a row's key
JournalKey = tuple[str, str]

_CHUNK = 500
#: How old a group of settled rows gets before it is committed (a transaction per row was a
#: quarter of the host's bookkeeping CPU per row)
GROUP_S = 0.05


class Journal:
    """One SQLite journal file (or ``None``: in memory, nothing kept past the process).

    Thread-safe: one connection behind a lock (a batch's worker threads write; a view or
    ``to_pandas`` may read from another thread, and sees the rows of an open group too).
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(
            str(self.path) if self.path is not None else ":memory:",
            check_same_thread=False, isolation_level=None, timeout=30.0,
        )  # fmt: skip
        if self.path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._groups = 0
        self._opened = 0.0

    def close(self) -> None:
        with self._lock:
            self._commit()
            self._db.close()

    def done(self, key: JournalKey, input_keys: Sequence[str]) -> dict[str, str]:
        """``input_key -> status`` for the rows of ``input_keys`` already journaled."""
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(input_keys), _CHUNK):
                chunk = list(dict.fromkeys(input_keys[start : start + _CHUNK]))
                marks = ",".join("?" * len(chunk))
                cursor = self._db.execute(
                    "SELECT input_key, status FROM rows WHERE capability=? AND module_digest=? "
                    f"AND input_key IN ({marks})",
                    (*key, *chunk),
                )
                found.update(cursor.fetchall())
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
        with self._lock:
            if self._db.in_transaction and time.monotonic() - self._opened >= GROUP_S:
                self._commit()

    def _commit(self) -> None:
        if self._db.in_transaction:
            self._db.execute("COMMIT")

    def write(self, key: JournalKey, input_key: str, status: str, record: str) -> None:
        """Keep one finished row (replacing an earlier outcome of the same input)."""
        with self._lock:
            if self._groups and not self._db.in_transaction:
                self._db.execute("BEGIN")
                self._opened = time.monotonic()
            self._db.execute(
                "INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?, ?)",
                (*key, input_key, status, record, time.time()),
            )

    def record(self, key: JournalKey, input_key: str) -> str | None:
        """The stored record (JSON text) of one row, or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT record FROM rows WHERE capability=? AND module_digest=? AND input_key=?",
                (*key, input_key),
            ).fetchone()
        return None if row is None else str(row[0])

    def records(self, key: JournalKey, input_keys: Sequence[str]) -> Iterator[tuple[str, str]]:
        """``(input_key, record)`` of the journaled rows among ``input_keys``, chunk by chunk."""
        for start in range(0, len(input_keys), _CHUNK):
            chunk = list(dict.fromkeys(input_keys[start : start + _CHUNK]))
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = self._db.execute(
                    "SELECT input_key, record FROM rows WHERE capability=? AND "
                    f"module_digest=? AND input_key IN ({marks})",
                    (*key, *chunk),
                ).fetchall()
            yield from rows
