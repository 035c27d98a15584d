"""Where module processes run: a runs folder with per-call working folders.

Design notes
------------
* **Private by default.** Without a ``runs_dir`` the host gets a private temporary folder
  that :meth:`Workspace.close` removes, and an ``atexit`` hook removes too when a notebook
  kernel shuts down with the host still open.
* **Working folders are recycled.** ``mkdir``/``rmdir`` are slow next to a short module
  run, so a working folder the module left empty and untouched (mode ``0700``) goes back to
  a small pool; any other is removed.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from murmur_nb._exceptions import ModuleHostError

__all__ = ["Workspace"]

_POOL_SIZE = 8


class Workspace:
    """The runs folder of one host (``runs_dir``, else private) and its working folders."""

    def __init__(self, runs_dir: str | os.PathLike[str] | None) -> None:
        self._given = runs_dir is not None
        self._runs: Path | None = Path(runs_dir) if runs_dir is not None else None
        self._lock = threading.Lock()
        self._pool: list[Path] = []
        self._ready = False
        self._closed = False
        self._exit_cleanup: functools.partial[None] | None = None

    def runs_dir(self) -> Path:
        """The runs folder, created on first use; refused once the host is closed."""
        if self._closed:
            raise ModuleHostError(
                "this ModuleHost is closed; create a new one to describe or invoke modules"
            )
        if self._runs is None:
            self._runs = Path(tempfile.mkdtemp(prefix="murmur-nb-runs-"))
            # a host left open (a notebook kernel shut down mid-session) still leaves no
            # private folder behind when the interpreter exits; close() removes it sooner
            self._exit_cleanup = functools.partial(shutil.rmtree, self._runs, ignore_errors=True)
            atexit.register(self._exit_cleanup)
        elif not self._ready:
            self._runs.mkdir(parents=True, exist_ok=True)
        self._ready = True
        return self._runs

    def take_cwd(self) -> Path:
        """A private, empty working folder for one run (recycled: mkdir/rmdir are slow)."""
        with self._lock:
            if self._pool:
                return self._pool.pop()
        return Path(tempfile.mkdtemp(prefix="cwd-", dir=self.runs_dir()))

    def give_back_cwd(self, cwd: Path) -> None:
        """Recycle a working folder the module left empty and untouched; remove any other."""
        try:
            st = cwd.lstat()
            with os.scandir(cwd) as entries:
                empty = next(entries, None) is None
            clean = empty and stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        except OSError:
            clean = False
        with self._lock:
            if clean and not self._closed and len(self._pool) < _POOL_SIZE:
                self._pool.append(cwd)
                return
        shutil.rmtree(cwd, ignore_errors=True)

    def close(self) -> None:
        """Remove the working folders and the private runs folder. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for cwd in self._pool:
            shutil.rmtree(cwd, ignore_errors=True)
        self._pool.clear()
        if self._runs is not None and not self._given:
            shutil.rmtree(self._runs, ignore_errors=True)
        if self._exit_cleanup is not None:
            atexit.unregister(self._exit_cleanup)
            self._exit_cleanup = None
