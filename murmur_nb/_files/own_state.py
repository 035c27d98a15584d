"""murmur-nb's own private folders: what no module is given through a root, whatever it holds.

A policy root is the user's folder, but a root of the home folder (``~``, ``/root``) or of
``/tmp`` also holds what murmur-nb keeps for itself: the sealing key, which vouches for the
compiled hook components a kernel maps and runs, for their sidecars and a batch journal's rows
(:mod:`.sealing_key`); the module snapshot store, with every module's copy of its private
``config.env``; the cache (compiled components, the sandbox's helpers, the private artifact
store); an artifact store given elsewhere; and the private folders of murmur-nb's processes in
the temporary folder (a host's runs folder, a root kernel's grant journal, a fallback store).
A module given any of these could read another module's secrets, or with the key and a write
to a cache plant code the kernel runs. So the sandbox carves them out of every root
(:mod:`murmur_nb._sandbox.access` skips them on a root host, bubblewrap lays an empty tmpfs
over them, and on Landlock alone, which cannot carve a folder out of a root, the call is
refused).

What the folders are: the key folder and the cache folder where the environment puts them
now, every folder a host of this process was opened on (:func:`keep`: a snapshot store or an
artifact store given by path, a component cache), the folders this process holds in the
temporary folder (:func:`.scratch.held`), and those of another murmur-nb process of this user
there that keep its state (:data:`_PREFIXES`: a runs folder, a grant journal, a store, a Dask
worker's shipped modules; not the checker's scratch, whose roots a module is given). A folder
is known by device and inode (:func:`identities`), not by its path text.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from murmur_nb._files import scratch
from murmur_nb._files.sealing_key import key_dir
from murmur_nb._rules import cache_dir

__all__ = ["folders", "identities", "keep"]

_kept: dict[Path, None] = {}
_kept_lock = threading.Lock()
#: the process folders in the temporary folder that hold murmur-nb's own state (a host's runs
#: folder, a root kernel's grant journal, a fallback store, cache or journal, built helpers,
#: uid holds, a Dask worker's copy of the modules shipped to it, each with its private
#: ``config.env``: another root kernel's module given ``/tmp`` read them); not the folders
#: murmur-nb makes *for* a module (the checker's scratch with the roots it maps, a CLI module
#: home), which a root may be or lie in
_PREFIXES = tuple(f"murmur-nb-{kind}-" for kind in (
    "runs", "grants", "snapshots", "artifact-store", "components", "builds", "journal",
    "helpers", "uid", "worker"))


def keep(folder: Path) -> None:
    """Count ``folder`` (a store or cache a host of this process uses) as murmur-nb's own."""
    with _kept_lock:
        _kept[Path(os.path.abspath(folder))] = None  # noqa: PTH100 - no link resolved yet


def _process_folders() -> list[Path]:
    """This user's murmur-nb process folders in the temporary folder (this process's and
    other kernels')."""
    base = scratch.temp_folder()
    found: list[Path] = []
    try:
        with os.scandir(base) as it:
            for entry in it:
                if not entry.name.startswith(_PREFIXES):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
                    found.append(base / entry.name)
    except OSError:
        pass
    return found


def _candidates() -> list[Path]:
    with _kept_lock:
        kept = list(_kept)
    return [key_dir(), cache_dir(), *kept, *scratch.held(), *_process_folders()]


def folders() -> list[str]:
    """The real paths of murmur-nb's own folders that exist now, none inside another."""
    real: set[str] = set()
    for folder in _candidates():
        path = os.path.realpath(folder)
        if Path(path).is_dir():
            real.add(path)
    return sorted(p for p in real if not any(p.startswith(q.rstrip("/") + "/") for q in real))


def identities() -> dict[tuple[int, int], str]:
    """``(st_dev, st_ino)`` of each of :func:`folders` (and of those inside the others),
    and its path: what a walk by descriptor compares each folder it opens with."""
    out: dict[tuple[int, int], str] = {}
    for folder in _candidates():
        try:
            st = folder.stat()
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            out.setdefault((st.st_dev, st.st_ino), str(folder))
    return out
