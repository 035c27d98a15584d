"""The key that seals what murmur-nb keeps on disk and trusts when it reads it back.

What murmur-nb writes and later acts on (compiled hook components, whose machine code runs;
a batch's journal rows, reported as results) is sealed with an HMAC-SHA256 under one
per-user key (:func:`user_key`: ``$MURMUR_NB_KEYS``, else ``$XDG_STATE_HOME/murmur-nb``,
else ``~/.local/state/murmur-nb``; ``0600`` in a ``0700`` folder, replaced when anyone else
could have read it, never inside the cache folder or the facet-studio home, which modules
and cache writers reach). Each user of the key seals its own kind of data under a message of
its own, so a seal made for one never passes for the other.

A root kernel does not let a seal alone vouch for what it reads: it uses the kept key only
when nobody else can write it or any folder above it (:func:`.trust.nobody_else_can_write`),
and where someone else could write the key's folder (or the nearest folder of it that exists)
it makes, changes and reads nothing there: a link in another account's ``HOME`` would have it
make, ``chmod`` and write wherever the link points;
otherwise (``sudo -E`` keeps a user's ``HOME``; a root container may be given a user's) it
seals with a key of this process's alone, kept nowhere (:func:`sealing_key` says which), so
what it sealed lasts as long as the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from murmur_nb._exceptions import HookError
from murmur_nb._files.trust import nobody_else_can_write
from murmur_nb._rules import cache_dir, env_folder, facet_studio_home

__all__ = ["KEY_BYTES", "KEY_FILE", "key_dir", "sealing_key", "user_key"]

KEY_FILE = "cache.key"
KEY_BYTES = 32


def key_dir() -> Path:
    """Where the key lives (see the module docstring); a relative ``$MURMUR_NB_KEYS`` or
    ``$XDG_STATE_HOME`` is made absolute at its first use (:func:`murmur_nb._rules.env_folder`)."""
    explicit = env_folder("MURMUR_NB_KEYS")
    if explicit is not None:
        return explicit
    state = env_folder("XDG_STATE_HOME")
    return (state if state is not None else Path.home() / ".local" / "state") / "murmur-nb"


def _forbidden_homes() -> list[Path]:
    return [cache_dir(), facet_studio_home()]


def _private(st: os.stat_result, mode: int) -> bool:
    return st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == mode


def user_key(directory: Path | None = None) -> bytes:
    """The kept key: read from ``directory`` (default :func:`key_dir`), made if absent.

    Raises
    ------
    HookError
        ``insecure_cache_key``: the folder lies inside the cache folder or the facet-studio
        home, or is not a folder this user owns (a file, too, or under one).
    """
    folder = (directory if directory is not None else key_dir()).expanduser().resolve()
    for home in _forbidden_homes():
        if folder.is_relative_to(home.expanduser().resolve()):
            raise HookError(
                f"the cache key folder {folder} is inside {home}, which others (modules, anyone "
                "who can write the cache) can reach; point $MURMUR_NB_KEYS elsewhere",
                code="insecure_cache_key",
            )
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:  # it, or a folder above it, is a file
        raise HookError(
            f"the cache key folder {folder} is not a folder: it, or one above it, is a file; "
            "remove that file or point $MURMUR_NB_KEYS elsewhere",
            code="insecure_cache_key",
        ) from exc
    st = folder.stat()
    if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode):
        raise HookError(
            f"the cache key folder {folder} is not a folder owned by this user; remove it or "
            "point $MURMUR_NB_KEYS elsewhere",
            code="insecure_cache_key",
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        folder.chmod(0o700)
    path = folder / KEY_FILE
    key = _kept(path)
    if key is not None:
        return key
    with _made_alone(folder):  # two processes making it at once: one makes, the other reads
        key = _kept(path)
        if key is not None:
            return key
        key = secrets.token_bytes(KEY_BYTES)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")  # mkstemp creates it 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        Path(tmp).replace(path)
    return key


def _kept(path: Path) -> bytes | None:
    """The key in ``path`` when it is one: ``0600``, this user's, :data:`KEY_BYTES` long."""
    with contextlib.suppress(FileNotFoundError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            key = handle.read(KEY_BYTES + 1)
            if _private(os.fstat(handle.fileno()), 0o600) and len(key) == KEY_BYTES:
                return key
    return None


@contextlib.contextmanager
def _made_alone(folder: Path) -> Iterator[None]:
    """Hold the key folder's lock (``flock``) while the key is made: two kernels starting at
    once each made a key of their own, and what the one whose file was replaced sealed (its
    batch journal's rows, its compiled hooks) failed its seal everywhere after."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@functools.cache
def _process_key() -> bytes:
    """A key of this process's alone, kept nowhere: what it seals lasts as long as we do."""
    return secrets.token_bytes(KEY_BYTES)


def sealing_key() -> tuple[bytes, bool]:
    """The key to seal and check with, and whether it is the kept :func:`user_key` (``False``:
    a root kernel whose kept key someone else could write, sealing with this process's own).

    Raises
    ------
    HookError
        ``insecure_cache_key``, as :func:`user_key`.
    """
    if os.geteuid() != 0:
        return user_key(), True
    # a root kernel touches nothing in a folder someone else could write (another account's
    # HOME: a link there would have it make, chmod or write wherever the link points)
    folder = key_dir().expanduser()
    existing = next(f for f in (folder, *folder.parents) if f.exists() or f.is_symlink())
    if not nobody_else_can_write(existing):
        return _process_key(), False
    key = user_key()
    if nobody_else_can_write(folder.resolve() / KEY_FILE):
        return key, True
    return _process_key(), False
