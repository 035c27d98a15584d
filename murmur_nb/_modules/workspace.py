"""Where module processes run: a runs folder with per-call working folders.

Without a ``runs_dir`` the host gets a private temporary folder, removed by
:meth:`Workspace.close` or at exit, or, when the process is killed, by the next host made
(:mod:`murmur_nb._files.scratch`). Each run gets a new working folder, removed afterwards: an
emptied one would still carry extended attributes and timestamps to the next module. Under
bwrap the folder is made inside the sandbox, on its private tmpfs, and only its name is taken
here (no disk work per call). Otherwise it is made here: on a root host the runs folder is
``0711`` and each working folder is handed to the sandbox uid
(:mod:`murmur_nb._sandbox.identity`), and what the sandbox uid was given to reach the roots is
taken back when the last open host closes (:mod:`murmur_nb._sandbox.access`).

A call's folder (its fresh write roots, its staged view) is ``0700``
(:func:`murmur_nb._modules.call.call_folder`), and stays so until it is gone
(:func:`murmur_nb._files.scratch.remove_tree` never widens a folder it removes).

**A root process's named runs folder** is made and used only where nobody else can change
the way to it (:mod:`murmur_nb._files.trust`; links only root can change are fine), checked
before anything is made: ``mkdir(parents=True)`` follows a link, so a ``runs_dir`` in a
folder another account can write (``sudo -E`` keeps a user's ``HOME``; a container may be
given one) would have root make the call folders wherever that account points it, and the
module write its outputs there. Such a folder is refused with a ``ValueError``
(:func:`refuse_open_way`; the command's default ``<home>/runs`` then falls back to the
private folder instead). For root only, a named runs folder that does not exist yet right in
a sticky folder (``/tmp/runs``) is refused too: another account could take the name first.
A process that is not root is left as it was: it can be led to make folders only where its
user could make them anyway, and a home another account can write is its user's own
arrangement.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

from murmur_nb._exceptions import ModuleHostError
from murmur_nb._files import scratch
from murmur_nb._files.trust import why_open_way
from murmur_nb._sandbox import access, identity

__all__ = ["Workspace", "refuse_open_way"]


class Workspace:
    """The runs folder of one host (``runs_dir``, else private) and its working folders.

    A root process refuses a ``runs_dir`` another account could change the way to (a folder
    on it theirs or writable by them, above the runs folder or the folder itself), before
    anything is made there: see the module's notes. Another process uses it as before.
    """

    def __init__(self, runs_dir: str | os.PathLike[str] | None) -> None:
        self._given = runs_dir is not None
        self._runs: Path | None = Path(runs_dir) if runs_dir is not None else None
        self._ready = False
        self._closed = False
        self._exit_cleanup: functools.partial[None] | None = None
        #: what the sandbox id is given on a root host lasts until this (and every other
        #: host's) lease closes
        self._lease = access.hold()

    def runs_dir(self) -> Path:
        """The runs folder, created on first use; refused once the host is closed.

        Raises
        ------
        ModuleHostError
            The host is closed.
        ValueError
            For a root process, a ``runs_dir`` another account could change the way to
            (:func:`refuse_open_way`): nothing was made there.
        """
        if self._closed:
            raise ModuleHostError(
                "this ModuleHost is closed; create a new one to describe or invoke modules"
            )
        if self._runs is None:
            # a killed kernel's runs folder goes when the next one is made (its owner lock)
            self._runs = scratch.owned_folder("murmur-nb-runs-")
            if identity.is_root():
                self._runs.chmod(0o711)  # the sandbox id passes through, lists nothing
            # a host left open (a notebook kernel shut down mid-session) still leaves no
            # private folder behind when the interpreter exits; close() removes it sooner
            self._exit_cleanup = functools.partial(scratch.release, self._runs)
            atexit.register(self._exit_cleanup)
        elif not self._ready:
            refuse_open_way(self._runs, "nothing was made there")  # before the mkdir it leads
            self._runs.mkdir(parents=True, exist_ok=True)
            refuse_open_way(self._runs, "nothing was run there")  # as made: nothing changed it
        self._ready = True
        return self._runs

    @contextlib.contextmanager
    def cwd(self, *, in_sandbox: bool) -> Iterator[Path]:
        """A new, private, empty working folder for one run (never a recycled one), removed
        afterwards whatever the module left in it.

        ``in_sandbox``: the sandbox makes the folder itself (bwrap, on its own tmpfs, gone
        with it), so only a new name in the runs folder is chosen: nothing is made on the
        disk, nor removed from it.
        """
        if in_sandbox:
            yield self.runs_dir() / f"cwd-{secrets.token_hex(8)}"
            return
        made = tempfile.mkdtemp(prefix="cwd-", dir=self.runs_dir())
        try:  # removed on any way out, an interrupt before the run too
            cwd = Path(made)
            identity.hand_over(cwd)
            yield cwd
        finally:
            try:
                os.rmdir(made)  # noqa: PTH106 - most runs leave it empty: one system call
            except OSError:  # a tree of any depth the module left (never a recursive walk)
                scratch.remove_tree(Path(made))

    def close(self) -> None:
        """Remove the working folders and the private runs folder. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._lease.close()
        if self._runs is not None and not self._given:
            scratch.release(self._runs)
        if self._exit_cleanup is not None:
            atexit.unregister(self._exit_cleanup)
            self._exit_cleanup = None


def refuse_open_way(runs: str | os.PathLike[str], done: str = "nothing was made there") -> None:
    """Raise for a root process's runs folder ``runs`` when another account could change the
    way to it (:func:`~murmur_nb._files.trust.why_open_way`: the nearest part of it that
    exists, walked with its links); ``done`` says what became of it. Nothing for a process
    that is not root.

    Raises
    ------
    ValueError
        Naming the part of the way another account owns or can write, and the fix.
    """
    why = why_open_way(runs)
    if why is not None:
        raise ValueError(
            f"the runs folder {os.fspath(runs)} cannot be used by a root process: {why}. "
            "Root makes call folders, where modules write their outputs, only where nobody "
            "else can change the way to them (a link put there would have root make them "
            f"wherever it points); {done}. Name a folder only root can write (such as one "
            "under /root) as ModuleHost(runs_dir=...) or murmur-nb --runs-dir, or leave it "
            "unset: the calls then run where only root can write"
        )
