"""On-disk cache of compiled components, and of componentize-py builds.

Design notes
------------
Compiling an 18 MB componentize-py component takes seconds; deserializing the compiled artifact
takes milliseconds. An entry is keyed by the SHA-256 of the component bytes, the wasmtime version
and a fingerprint of the engine configuration, because wasmtime refuses (or worse, misreads)
artifacts made under another configuration. A changed file therefore misses, a changed
configuration misses, and an entry that fails to deserialize (truncated, corrupted, written by a
different build) is deleted and recompiled rather than failing the load. Entries are written to a
temporary file and renamed into place, so a crash never leaves a half-written entry under a valid
name.

wasmtime trusts a compiled artifact's machine code as it finds it: a byte changed inside the
code loads fine and runs changed code. Each entry therefore has a ``.sum`` sidecar holding the
SHA-256 of the entry and the stat signature (size, inode, mtime, ctime) it had when written or
last verified. A load whose signature matches deserializes at once (no 40 MB hash on the warm
path); any other signature (the file was rewritten) re-hashes the entry, and an entry without a
sidecar or with another hash is discarded and recompiled. Recency for pruning is the sidecar's
mtime, so marking a hit never touches the entry itself.

The cache directory is ``$MURMUR_NB_CACHE``, else ``$XDG_CACHE_HOME/murmur-nb``, else
``~/.cache/murmur-nb``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wasmtime import Engine
    from wasmtime.component import Component

__all__ = ["ComponentCache", "LoadedComponent", "cache_dir", "sha256_file"]


def cache_dir() -> Path:
    """The per-user cache directory of murmur-nb (created on first use)."""
    explicit = os.environ.get("MURMUR_NB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "murmur-nb"


def sha256_file(path: Path) -> str:
    """Lowercase hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _wasmtime_version() -> str:
    from importlib.metadata import version  # noqa: PLC0415

    return version("wasmtime")


def _atomic_write(path: Path, data: bytes | bytearray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class LoadedComponent:
    """A compiled component and how it was obtained.

    ``source`` is ``"compiled"`` (cold: compiled and stored), ``"cache"`` (deserialized from
    disk), ``"memory"`` (already loaded in this process) or ``"recompiled"`` (a corrupt entry
    was discarded and replaced).
    """

    component: Component
    digest: str
    source: str
    entry: Path


class ComponentCache:
    """Compiled components on disk, keyed by digest, wasmtime version and engine config.

    Parameters
    ----------
    engine : wasmtime.Engine
        The engine every component is compiled for.
    engine_fingerprint : str
        A stable description of the engine configuration (features, fuel, epochs).
    directory : Path, optional
        Where entries live; defaults to ``cache_dir() / "components"``.
    keep_in_memory : int
        How many loaded components to keep in this process as well (most recent first), so
        loading the same hook again, from another entry or a re-run notebook cell, costs no
        deserialization. ``0`` keeps none.
    """

    def __init__(
        self,
        engine: Engine,
        engine_fingerprint: str,
        directory: Path | None = None,
        *,
        keep_in_memory: int = 0,
    ) -> None:
        self._engine = engine
        self._keep = keep_in_memory
        self._memory: dict[str, Component] = {}
        self._lock = threading.Lock()
        self._directory = directory if directory is not None else cache_dir() / "components"
        config_key = f"wasmtime={_wasmtime_version()};{engine_fingerprint}"
        self._config_key = hashlib.sha256(config_key.encode()).hexdigest()[:16]

    @property
    def directory(self) -> Path:
        return self._directory

    def entry_path(self, digest: str) -> Path:
        """Where the compiled form of the component with ``digest`` is stored."""
        return self._directory / f"{digest}-{self._config_key}.cwasm"

    @staticmethod
    def _sum_path(entry: Path) -> Path:
        return entry.with_name(entry.name + ".sum")

    @staticmethod
    def _signature(entry: Path) -> str:
        st = entry.stat()
        return f"{st.st_size} {st.st_ino} {st.st_mtime_ns} {st.st_ctime_ns}"

    def _seal(self, entry: Path, sha: str) -> None:
        """Record ``entry``'s hash and current stat signature in its sidecar."""
        _atomic_write(self._sum_path(entry), f"{sha} {self._signature(entry)}\n".encode())

    def _intact(self, entry: Path) -> bool:
        """Whether ``entry`` holds the bytes its sidecar vouches for (hashing only if touched)."""
        try:
            sha, _, signature = self._sum_path(entry).read_text(encoding="ascii").partition(" ")
            if len(sha) != 64:
                return False
            if signature.strip() == self._signature(entry):
                return True
            if sha256_file(entry) != sha:
                return False
        except (OSError, UnicodeDecodeError):
            return False
        with contextlib.suppress(OSError):
            self._seal(entry, sha)
        return True

    def _discard(self, entry: Path) -> None:
        entry.unlink(missing_ok=True)
        self._sum_path(entry).unlink(missing_ok=True)

    def _digest(self, path: Path) -> str:
        """SHA-256 of ``path``, memoized by its stat signature so a warm load reads no bytes.

        The memo is keyed by path, size, inode, mtime and ctime (as git's index is): any
        rewrite of the file changes one of them and forces a re-hash.
        """
        st = path.stat()
        signature = f"{path.resolve()}|{st.st_size}|{st.st_ino}|{st.st_mtime_ns}|{st.st_ctime_ns}"
        memo = self._directory / "digests" / hashlib.sha256(signature.encode()).hexdigest()[:40]
        try:
            known = memo.read_text(encoding="ascii").strip()
        except OSError:
            known = ""
        if len(known) == 64:
            return known
        digest = sha256_file(path)
        with contextlib.suppress(OSError):
            _atomic_write(memo, digest.encode("ascii"))
        return digest

    def load(self, path: Path) -> LoadedComponent:
        """Compile ``path``, or load its compiled form from the cache.

        Raises
        ------
        OSError
            The component file cannot be read.
        wasmtime.WasmtimeError
            The file is not a valid component.
        """
        digest = self._digest(path)
        entry = self.entry_path(digest)
        with self._lock:
            kept = self._memory.pop(digest, None)
            if kept is not None:
                self._memory[digest] = kept  # most recently used last
                return LoadedComponent(kept, digest, "memory", entry)
        loaded = self._load(path, digest, entry)
        if self._keep > 0:
            with self._lock:
                self._memory[digest] = loaded.component
                while len(self._memory) > self._keep:
                    del self._memory[next(iter(self._memory))]
        return loaded

    def _load(self, path: Path, digest: str, entry: Path) -> LoadedComponent:
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use
        from wasmtime.component import Component  # noqa: PLC0415

        source = "compiled"
        if entry.is_file():
            component = None
            if self._intact(entry):
                with contextlib.suppress(WasmtimeError):
                    component = Component.deserialize_file(self._engine, str(entry))
            if component is None:
                self._discard(entry)
                source = "recompiled"
            else:
                with contextlib.suppress(OSError):
                    os.utime(self._sum_path(entry))  # recency for pruning
                return LoadedComponent(component, digest, "cache", entry)
        data = path.read_bytes()
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:  # the file changed between the stat and the read
            digest, entry = actual, self.entry_path(actual)
        component = Component(self._engine, data)
        with contextlib.suppress(OSError):  # a read-only cache only costs a compile next time
            compiled = component.serialize()
            _atomic_write(entry, compiled)
            self._seal(entry, hashlib.sha256(compiled).hexdigest())
            self.prune()
        return LoadedComponent(component, digest, source, entry)

    def prune(self, max_bytes: int | None = None) -> list[Path]:
        """Delete the least recently used entries until the cache holds at most ``max_bytes``.

        Returns the deleted entries. The default budget is ``$MURMUR_NB_CACHE_MAX_MB`` MiB,
        else 2 GiB (a compiled componentize-py hook is about 40 MB).
        """
        if max_bytes is None:
            max_bytes = int(os.environ.get("MURMUR_NB_CACHE_MAX_MB", "2048")) * (1 << 20)
        entries = []
        for path in self._directory.glob("*.cwasm"):
            with contextlib.suppress(OSError):
                size = path.stat().st_size
                try:
                    used = self._sum_path(path).stat().st_mtime_ns
                except OSError:
                    used = 0  # no sidecar: unusable anyway, first to go
                entries.append((used, size, path))
        entries.sort(reverse=True)  # newest first
        total, deleted = 0, []
        for _, size, path in entries:
            total += size
            if total > max_bytes:
                with contextlib.suppress(OSError):
                    path.unlink()
                    deleted.append(path)
                self._sum_path(path).unlink(missing_ok=True)
        return deleted
