"""On-disk cache of compiled components, and of componentize-py builds.

Compiling a componentize-py component takes seconds, deserializing it milliseconds. An entry
is keyed by the component's SHA-256, the wasmtime version and the engine configuration;
anything else misses, and an entry that fails to deserialize is deleted and recompiled.
Entries are written to a temporary file and renamed into place.

A cold load compiles in a child process where the cache is given ``compile_in_child`` (the
hook runtime's is: :mod:`.guest_code.compile_bounds`, bounded in time and memory, killed on
Ctrl-C), and deserializes what the child sends back with its own engine (from memory: ~50 ms
for the demo hook's 37 MiB); a cache built with an engine alone (the tests') compiles in
this process. A component smaller than
:data:`IN_PROCESS_MAX_BYTES` (4 KiB) compiles here either way: the child's fixed cost
(spawn, ``import wasmtime``, an engine, the round trip) is ~80 ms, the suite compiles
WAT components of 1.5-2.2 KiB (a child each: +9 s over the 100 s of five hook test files'
cold run), and the worst under 4 KiB found costs about as much in the kernel: 0.06-0.09 s
and 11 MiB for 1,009 empty functions (4,094 bytes), 0.1 s and 34 MiB for 1,345 loops in one
function (4,095 bytes; cranelift's costliest bytes measured, ~25 µs a byte; nested blocks,
branches, calls, loads and results measured cheaper). Locals, the one cheap amplifier, are
bounded before either (:mod:`.guest_code.compile_cost`: 1,000,000 of them, ~0.1 s).

Deserializing runs the entry's machine code, so every entry is sealed with a keyed BLAKE3
MAC (:func:`entry_mac`) under a key derived from the per-user key of
:mod:`murmur_nb._files.sealing_key` (:func:`cache_key`, shared with the batch journal; where it
lives and how a root kernel trusts it are ruled there), kept in the entry's ``.sum`` sidecar,
itself HMACed. The entry is never mapped from its file (a later in-place rewrite would run): it
is copied once, in the kernel (``sendfile``), into a ``memfd``, sealed (``F_SEAL_WRITE``,
``F_SEAL_SHRINK``, ``F_SEAL_GROW``: nobody can change it any more), MACed on every load after
the seal, and deserialized from that file, which wasmtime maps lazily (a warm load of the
37 MiB demo hook takes about 1.5 times its bare copy, against about 100 ms deserializing from a
copy in Python's memory, which is the way where there is no ``memfd``). The MAC comes after
the seal because the copy can be opened through ``/proc/<pid>/fd`` by any process of the
user until then: MACing the bytes as they were written let one write its code into every copy
between a chunk's write and the seal (until 2026-12-06 it did, on every load it raced).

No load skips the MAC because the file's stat signature (size, inode, mtime, ctime) is the one
seen when it was last checked: a write through a shared writable mapping that is already dirty
changes neither time (ext4 updates them on a page's first write fault only; tmpfs never), so a
process that mapped the entry before a check could patch it after and keep the signature.
The path-to-digest memo does go by the component file's signature (a stale memo only loads the
compiled form of the component as it was, which was checked); it is MACed too.
Recency for pruning is the sidecar's mtime (an entry whose sidecar is not written yet is as
recent as its own); the budget is ``$MURMUR_NB_CACHE_MAX_MB`` (:func:`budget_bytes`).
A file being written (``.tmp-*``, :func:`_atomic_write`) is locked (``flock``) by its writer
until it is renamed into place, and pruning never takes one that is locked or younger than
:data:`ABANDONED_S`: kernels share the folder, and one kernel's prune took another's
temporary while it was written (a hidden ``.tmp-*.cwasm`` matches ``*.cwasm``), so that
kernel's rename failed and its compiled hook was not stored. An older one nobody holds is a
killed kernel's and is removed; before, those stayed (under the budget, forever).
The folder is ``$MURMUR_NB_CACHE``, else ``$XDG_CACHE_HOME/murmur-nb``, else
``~/.cache/murmur-nb`` (:func:`~murmur_nb._rules.cache_dir`; docs/configuration.md lists
every variable).

A root kernel runs the machine code it loads as root, so it does not let a seal alone vouch
for it: the key (:func:`~murmur_nb._files.sealing_key.sealing_key`), the entries' folder and
every file it reads there are used only when nobody else can write them or any folder above
them (:func:`~murmur_nb._files.trust.nobody_else_can_write`, the rule of every cache).
Otherwise (``sudo -E`` keeps a user's ``HOME``; a root container may be given a user's) it
uses a key of its own for this process and a fresh private folder, removed at exit, and
leaves what is in the other folder alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import hmac
import mmap
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from murmur_nb._files import own_state, sealed
from murmur_nb._files.scratch import process_folder
from murmur_nb._files.sealed import sealed_copy
from murmur_nb._files.sealing_key import key_dir, sealing_key
from murmur_nb._files.sealing_key import user_key as cache_key
from murmur_nb._files.trust import nobody_else_can_write, trusted_folder
from murmur_nb._hooks.guest_code.compile_bounds import CompileBounds, CompileFailed
from murmur_nb._hooks.guest_code.compile_cost import check_compile_cost, whole_number
from murmur_nb._rules import cache_dir, read_bounded, sha256_file

if TYPE_CHECKING:
    from wasmtime import Engine
    from wasmtime.component import Component

__all__ = [
    "ABANDONED_S",
    "DEFAULT_BUDGET_MB",
    "IN_PROCESS_MAX_BYTES",
    "Compile",
    "ComponentCache",
    "LoadedComponent",
    "Rewrite",
    "budget_bytes",
    "cache_dir",
    "cache_key",
    "entry_hasher",
    "entry_mac",
    "key_dir",
    "sha256_file",
]

#: the budget of :meth:`ComponentCache.prune` when ``$MURMUR_NB_CACHE_MAX_MB`` sets none
DEFAULT_BUDGET_MB = 2048


def budget_bytes() -> int:
    """How many bytes of compiled components the cache keeps: ``$MURMUR_NB_CACHE_MAX_MB``
    MiB, else (unset or empty) 2 GiB, room for about 50 compiled componentize-py hooks.

    A value that is not a whole number of MiB, at least 1, is warned about
    (:class:`~murmur_nb.HookConfigWarning`) and the default kept: a variable mistyped in a
    deployment must not stop every kernel's hooks from loading (``int('abc')`` did), nor
    make each one compile its hooks again (``0`` or ``-1`` deleted every entry right after
    it was compiled).
    """
    megabytes = whole_number("MURMUR_NB_CACHE_MAX_MB", DEFAULT_BUDGET_MB, "MiB",
                             "the compiled-component cache keeps")  # fmt: skip
    return megabytes << 20


@functools.cache
def _private_folder() -> Path:
    """A folder of this process's alone (``0700``), removed when the process exits."""
    return process_folder("murmur-nb-components-")


def _root_key_and_folder(key: bytes | None, folder: Path) -> tuple[bytes, Path]:
    """A root kernel's key and entries' folder: the cache's own when nobody else can write
    them (nor any folder above), else a key for this process and a private folder."""
    if key is None:
        key, kept = sealing_key()
        if not kept:
            return key, _private_folder()
    return key, trusted_folder(folder, _private_folder)


#: ``(tag, function)``: bytes in, bytes to compile out; the tag names the function's variant.
Rewrite = tuple[str, Callable[[bytes], bytes]]

#: a component's bytes, its name in messages and the bounds of its compile in, its
#: serialized compiled form out
Compile = Callable[[bytes, str, CompileBounds], bytes | bytearray]

#: a component smaller than this compiles in the kernel even where a child could (the module
#: docstring says why)
IN_PROCESS_MAX_BYTES = 4096


#: the sidecar's first field: entries sealed another way (HMAC-SHA256 and a stat signature,
#: before 2026-12-06) are recompiled once
_SIDECAR_VERSION = "b3"
_MEMFD = sealed.AVAILABLE


#: how the sealed copy is mapped to be MACed: shared (a private mapping of a sealed file is
#: the same pages), its pages made present in one call where the platform has it
_POPULATED = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


#: what the entries' MAC key is derived under (BLAKE3's ``derive_key``): its own key, so a MAC
#: of an entry is never one of the HMACs made with the user key itself
_ENTRY_CONTEXT = "murmur-nb 2026-12-06 compiled component entry MAC"


@functools.lru_cache(maxsize=8)
def _entry_key(key: bytes) -> bytes:
    return blake3.blake3(key, derive_key_context=_ENTRY_CONTEXT).digest()


def entry_hasher(key: bytes, prefix: str) -> blake3.blake3:
    """The keyed BLAKE3 hasher of an entry MAC, fed ``prefix``: its key is derived from
    ``key`` (BLAKE3 rather than HMAC-SHA256 for its speed: the demo hook's 37 MiB take a
    third of the time or less)."""
    return blake3.blake3(prefix.encode(), key=_entry_key(key))


def entry_mac(key: bytes, prefix: str, data: bytes | bytearray | memoryview) -> str:
    """The MAC every load checks: the keyed BLAKE3 of ``prefix`` and ``data``."""
    mac = entry_hasher(key, prefix)
    mac.update(data)
    return mac.hexdigest()


def _keyed(digest: str, rewrite: Rewrite | None) -> str:
    """The entry key: the file's digest, or its digest and the rewrite's tag hashed."""
    if rewrite is None:
        return digest
    return hashlib.sha256(f"{digest}|{rewrite[0]}".encode()).hexdigest()


def _wasmtime_version() -> str:
    from importlib.metadata import version  # noqa: PLC0415

    return version("wasmtime")


#: how a file of the cache being written is named at first (:func:`_atomic_write`)
_TEMPORARY = ".tmp-"

#: how old (its mtime, in seconds) a temporary file of the cache is before
#: :meth:`ComponentCache.prune` takes it, and then only when no writer holds its lock: a
#: kernel killed while writing left it (a write of the demo hook's 37 MiB takes milliseconds)
ABANDONED_S = 600

#: how many digest memos (:meth:`ComponentCache._digest`, about 150 bytes each)
#: :meth:`ComponentCache.prune` keeps, the newest: each rewrite of a hook file adds one, and
#: a memo removed only costs one hash of its file again
MEMOS_KEPT = 4096


def _atomic_write(path: Path, data: bytes | bytearray) -> None:
    """Write ``data`` to a temporary file beside ``path``, locked until it is renamed to
    ``path`` (a prune in another kernel leaves a locked one alone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TEMPORARY, suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.write(data)
            handle.flush()
            Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_abandoned(folder: Path) -> None:
    """Remove the temporary files in ``folder`` older than :data:`ABANDONED_S` whose lock
    can be taken (their writer is gone)."""
    oldest = time.time() - ABANDONED_S
    for path in folder.glob(f"{_TEMPORARY}*"):
        with contextlib.suppress(OSError):  # young, held, gone already, or no file
            if path.lstat().st_mtime > oldest:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    path.unlink()
            finally:
                os.close(fd)


def _keep_newest(folder: Path, kept: int) -> None:
    """Remove all but the ``kept`` newest files of ``folder`` (by mtime; not its temporary
    files, which :func:`_remove_abandoned` takes)."""
    found = []
    for path in folder.glob("[!.]*"):
        with contextlib.suppress(OSError):
            found.append((path.lstat().st_mtime_ns, path))
    found.sort(reverse=True)
    for _, path in found[kept:]:
        with contextlib.suppress(OSError):
            path.unlink()


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
    key : bytes, optional
        The HMAC key entries are sealed with; defaults to :func:`cache_key`.
    compile_in_child : callable, optional
        ``(bytes, name) -> compiled bytes``: compiles a component of at least
        :data:`IN_PROCESS_MAX_BYTES` in a bounded child process
        (:func:`~.guest_code.compile_bounds.compile_in_child`, what the hook runtime passes),
        whose serialized form is deserialized with ``engine``. ``None`` (the default)
        compiles every component in this process.
    """

    def __init__(
        self,
        engine: Engine,
        engine_fingerprint: str,
        directory: Path | None = None,
        *,
        keep_in_memory: int = 0,
        key: bytes | None = None,
        compile_in_child: Compile | None = None,
    ) -> None:
        self._engine = engine
        self._compile_in_child = compile_in_child
        folder = directory if directory is not None else cache_dir() / "components"
        #: a root kernel reads a file of the cache only when nobody else can write it
        self._as_root = os.geteuid() == 0
        if self._as_root:
            key, folder = _root_key_and_folder(key, folder)
        self._key = key if key is not None else cache_key()
        self._keep = keep_in_memory
        self._memory: dict[str, Component] = {}
        self._lock = threading.Lock()
        self._directory = folder
        own_state.keep(folder)  # a module given a root that holds it is never given it
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

    def _readable(self, *paths: Path) -> bool:
        """Whether these files of the cache may be read: always, but for a root kernel only
        when nobody else can write them (their folder was checked when the cache was made;
        a file in it may still be another account's)."""
        return not self._as_root or all(nobody_else_can_write(p) for p in paths)

    def _mac(self, *parts: str) -> str:
        return hmac.new(self._key, "|".join(parts).encode(), hashlib.sha256).hexdigest()

    def _entry_prefix(self, digest: str) -> str:
        return f"{self._config_key}|{digest}|"

    def _entry_mac(self, digest: str, data: bytes | bytearray | memoryview) -> str:
        """The entry MAC (:func:`entry_mac`) of the configuration key, the source digest and
        the entry's bytes."""
        return entry_mac(self._key, self._entry_prefix(digest), data)

    def _seal(self, entry: Path, mac: str) -> None:
        """Record ``entry``'s MAC in its sidecar, itself HMACed with the entry's name."""
        seal = self._mac(_SIDECAR_VERSION, entry.name, mac)
        _atomic_write(self._sum_path(entry), f"{_SIDECAR_VERSION} {mac} {seal}\n".encode())

    def _verified_bytes(self, entry: Path, digest: str) -> bytes | None:
        """``entry``'s bytes, read once, when they are the bytes sealed under our key.

        The caller deserializes exactly these bytes from memory: a file can change after any
        check (wasmtime's ``deserialize_file`` maps it and runs the mapping), memory cannot.
        """
        sealed = self._sidecar(entry)
        if sealed is None:
            return None
        try:
            fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        if not hmac.compare_digest(self._entry_mac(digest, data=data), sealed):
            return None
        return data

    def _sealed_copy(self, entry: Path, digest: str) -> int | None:
        """A sealed ``memfd`` holding ``entry``'s bytes, when they are the bytes sealed under
        our key: MACed after it is sealed, so what is checked is what wasmtime maps; ``None``
        when they are not (raises ``OSError`` when the entry cannot be read or is not).

        Nothing before the seal is trusted: until then any process that may look into this
        one's descriptors (``/proc/<pid>/fd``: its own user's, whatever ``ptrace_scope`` says)
        can open the copy and write into it, and a MAC of the bytes as they were written
        would vouch for what it wrote. One holding a writable mapping of it makes the seal
        fail (``EBUSY``), which is a refused entry too."""
        sealed = self._sidecar(entry)
        if sealed is None:
            return None
        fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            copy = sealed_copy(fd, "murmur-nb-component")
        finally:
            os.close(fd)
        try:
            if not hmac.compare_digest(self._sealed_mac(copy, digest), sealed):
                raise OSError("the entry is not the one sealed")
        except BaseException:
            os.close(copy)
            raise
        return copy

    def _sealed_mac(self, copy: int, digest: str) -> str:
        """The entry MAC of the sealed ``copy``, read through a read-only mapping made present
        in one call (``MAP_POPULATE``: a fault per page costs about a fifth more)."""
        size = os.fstat(copy).st_size
        if size == 0:
            raise OSError("an empty entry")
        mac = entry_hasher(self._key, self._entry_prefix(digest))
        with mmap.mmap(copy, size, flags=_POPULATED, prot=mmap.PROT_READ) as mapped:
            mac.update(mapped)
        return mac.hexdigest()

    def _sidecar(self, entry: Path) -> str | None:
        """The entry MAC from the entry's sidecar, if the sidecar is of this version and its
        own HMAC holds."""
        try:
            fields = self._sum_path(entry).read_text(encoding="ascii").split()
        except (OSError, UnicodeDecodeError):
            return None
        if len(fields) != 3 or fields[0] != _SIDECAR_VERSION:
            return None
        version, mac, seal = fields
        if not hmac.compare_digest(seal, self._mac(version, entry.name, mac)):
            return None
        return mac

    def _deserialized(self, entry: Path, digest: str) -> Component | None:
        """The entry's component from a sealed copy; else (no ``memfd``, no ``/proc``) from
        verified bytes in memory; ``None`` when the entry is not ours or not valid."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use
        from wasmtime.component import Component  # noqa: PLC0415

        if _MEMFD:
            try:
                copy = self._sealed_copy(entry, digest)
            except OSError:
                return None
            if copy is None:
                return None
            try:
                return Component.deserialize_file(self._engine, f"/proc/self/fd/{copy}")
            except WasmtimeError:
                pass  # not ours to tell: the copy in memory says whether the entry is bad
            finally:
                os.close(copy)
        data = self._verified_bytes(entry, digest)
        if data is None:
            return None
        try:
            return Component.deserialize(self._engine, data)
        except WasmtimeError:
            return None

    def _discard(self, entry: Path) -> None:
        entry.unlink(missing_ok=True)
        self._sum_path(entry).unlink(missing_ok=True)

    def _digest(self, path: Path) -> str:
        """SHA-256 of ``path``, memoized by its stat signature so a warm load reads no bytes.

        The memo is keyed by path, size, inode, mtime and ctime (as git's index is): any
        rewrite of the file changes one of them and forces a re-hash. It is MACed, so a
        planted memo cannot point a path at another component's digest.
        """
        st = path.stat()
        signature = f"{path.resolve()}|{st.st_size}|{st.st_ino}|{st.st_mtime_ns}|{st.st_ctime_ns}"
        memo = self._directory / "digests" / hashlib.sha256(signature.encode()).hexdigest()[:40]
        known = seal = ""
        if self._readable(memo):
            with contextlib.suppress(OSError):
                known, _, seal = memo.read_text(encoding="ascii").strip().partition(" ")
        if len(known) == 64 and hmac.compare_digest(seal, self._mac(signature, known)):
            return known
        digest = sha256_file(path)
        with contextlib.suppress(OSError):
            _atomic_write(memo, f"{digest} {self._mac(signature, digest)}".encode("ascii"))
        return digest

    def load(
        self, path: Path, *, rewrite: Rewrite | None = None, bounds: CompileBounds | None = None
    ) -> LoadedComponent:
        """Compile ``path``, or load its compiled form from the cache.

        ``rewrite`` is ``(tag, function)``: the component's bytes go through ``function``
        before they are compiled, and the entry is keyed by the file's digest and ``tag``
        (the returned ``digest`` is still the file's). ``bounds`` are what a compile
        may cost (:class:`~.guest_code.compile_bounds.CompileBounds`; default: this
        process's environment, read now); a compiled form already cached costs no compile
        and loads.

        Raises
        ------
        OSError
            The component file cannot be read.
        murmur_nb._rules.NotReadable
            It is no regular file, or larger than ``bounds.megabytes`` (no compile could
            hold it).
        wasmtime.WasmtimeError
            The file is not a valid component.
        TooCostly
            Compiling it would cost more than the bound allows (:mod:`.guest_code.compile_cost`); it
            was not compiled. Or its compile in a child ran past the child's time or memory
            bound (:mod:`.guest_code.compile_bounds`); the child was killed.
        CompileFailed
            The compiling child died otherwise, or its compiled form is not for ``engine``.
        Exception
            Whatever ``rewrite`` raises.
        """
        digest = self._digest(path)
        key = _keyed(digest, rewrite)
        entry = self.entry_path(key)
        with self._lock:
            kept = self._memory.pop(key, None)
            if kept is not None:
                self._memory[key] = kept  # most recently used last
                return LoadedComponent(kept, digest, "memory", entry)
        loaded = self._load(path, digest, entry, rewrite, bounds)
        if self._keep > 0:
            with self._lock:
                self._memory[_keyed(loaded.digest, rewrite)] = loaded.component
                while len(self._memory) > self._keep:
                    del self._memory[next(iter(self._memory))]
        return loaded

    def _load(
        self, path: Path, digest: str, entry: Path, rewrite: Rewrite | None,
        bounds: CompileBounds | None,
    ) -> LoadedComponent:  # fmt: skip
        source = "compiled"
        if entry.is_file():
            component = None
            if self._readable(entry, self._sum_path(entry)):
                component = self._deserialized(entry, _keyed(digest, rewrite))
            if component is None:
                self._discard(entry)
                source = "recompiled"
            else:
                with contextlib.suppress(OSError):
                    os.utime(self._sum_path(entry))  # recency for pruning
                return LoadedComponent(component, digest, "cache", entry)
        if bounds is None:
            bounds = CompileBounds.from_environment()
        data = read_bounded(path, bounds.megabytes << 20)  # more could never compile
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:  # the file changed between the stat and the read
            digest, entry = actual, self.entry_path(_keyed(actual, rewrite))
        if rewrite is not None:
            data = rewrite[1](data)
        check_compile_cost(data, bounds.max_locals)  # the very bytes compiled, before cranelift
        component, compiled = self._compiled(data, path.name, bounds)
        with contextlib.suppress(OSError):  # a read-only cache only costs a compile next time
            if compiled is None:
                compiled = component.serialize()
            _atomic_write(entry, compiled)
            self._seal(entry, self._entry_mac(_keyed(digest, rewrite), data=bytes(compiled)))
            self.prune()
        return LoadedComponent(component, digest, source, entry)

    def _compiled(
        self, data: bytes, name: str, bounds: CompileBounds
    ) -> tuple[Component, bytes | bytearray | None]:
        """``data`` compiled, and its serialized form when it was compiled in a child (``None``
        when in this process: ``data`` is smaller than :data:`IN_PROCESS_MAX_BYTES`, or the
        cache has no ``compile_in_child``)."""
        from wasmtime import WasmtimeError  # noqa: PLC0415 - wasmtime loads on first use
        from wasmtime.component import Component  # noqa: PLC0415

        if self._compile_in_child is None or len(data) < IN_PROCESS_MAX_BYTES:
            return Component(self._engine, data), None
        compiled = self._compile_in_child(data, name, bounds)
        try:
            return Component.deserialize(self._engine, compiled), compiled
        except WasmtimeError as exc:
            raise CompileFailed(
                f"the compiled form of {name} made by the compiling process is not for this "
                f"cache's engine ({exc}): a cache given `compile_in_child` needs an engine "
                "made from `engine_config()` and the wasmtime the child imports; the hook was "
                "not loaded"
            ) from exc

    def prune(self, max_bytes: int | None = None) -> list[Path]:
        """Delete the least recently used entries until the cache holds at most ``max_bytes``.

        Returns the deleted entries. The default budget is :func:`budget_bytes`. A file
        being written (in this kernel or another) is no entry yet and is left alone; one
        abandoned by a killed kernel is removed (the module docstring). Of the digest memos,
        the :data:`MEMOS_KEPT` newest are kept.
        """
        if max_bytes is None:
            max_bytes = budget_bytes()
        for folder in (self._directory, self._directory / "digests"):
            _remove_abandoned(folder)
        _keep_newest(self._directory / "digests", MEMOS_KEPT)
        entries = []
        for path in self._directory.glob("[!.]*.cwasm"):
            with contextlib.suppress(OSError):
                st = path.stat()
                try:
                    used = self._sum_path(path).stat().st_mtime_ns
                except OSError:
                    used = st.st_mtime_ns  # its sidecar not written yet (or lost: refused on load)
                entries.append((used, st.st_size, path))
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
