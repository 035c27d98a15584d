"""The content-addressed staging store, and the per-invocation view a consumer receives.

Staging copies a verified file into a content-addressed store (``<store>/sha256/<hex><ext>``,
read-only), from a descriptor opened without following links, data extents only (a sparse
file stays sparse), and re-hashes the copy, so what is stored is what was verified. The
store is offered to a consumer module as a read-only root, and every staged file is
re-hashed before each use: a mutation is detected, not trusted. Nothing in the store is
opened, changed or removed through a link.

The folders murmur-nb makes for the store, and each call's view, are ``0700``: no other
account lists or reads them (a root kernel's view was read through a path ``/proc`` names).
A stored file stays ``0444``, not ``0400``: a view hard-links it, and on a root host the
sandbox uid reads it through that link, which gets no ACL entry (a file with more than one
link is never given one, :mod:`murmur_nb._sandbox.access`); the ``0700`` folders are what
keep it from other accounts.

**A root process's store** is made and used only where nobody else can change the way to
it (:mod:`murmur_nb._files.trust`; links only root can change are fine), checked before
anything is made: ``sudo -E`` keeps a user's ``HOME`` and a container may be given one, so
``<home>/artifact-store`` and ``<cache>/artifact-store`` may run through that user's
folders, where a link they plant would have root make the store wherever it points and
write staged files there (a module's outputs, for them to read; a store they made
themselves, ``0777``, works as well). The default store then goes to the cache's, else to a
private folder of the process (:func:`open_store`); a store the caller named is refused
with a ``ValueError``. A process that is not root is left as it was: it can be led to make
folders only where its user could make them anyway, and a home or cache another account
can write is its user's own arrangement (a group's shared home), where that account can
already change the modules and files the user works with.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._exceptions import (
    ArtifactRejected,
    ConfinementViolation,
    DigestMismatch,
    ModuleHostError,
    SizeMismatch,
)
from murmur_nb._files import own_state
from murmur_nb._files.artifacts import VerifiedArtifact, check_opened
from murmur_nb._files.beneath import copy_sparse, open_beneath
from murmur_nb._files.scratch import process_folder
from murmur_nb._files.trust import from_working_folder, why_open_way
from murmur_nb._rules import sha256_fd
from murmur_nb.protocol import Artifact

__all__ = [
    "STAGED_ROOT",
    "STORE_UNAVAILABLE",
    "ArtifactStore",
    "StagedArtifact",
    "open_store",
    "staged_view",
]

#: The root name under which a consumer module receives the staging store.
STAGED_ROOT = "staged"

_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class StagedArtifact:
    """A verified artifact copied into the host's content-addressed store.

    ``root`` and ``path`` are how a consumer module names it (the store is supplied to the
    consumer as the read-only root :data:`STAGED_ROOT`); ``file`` is the absolute path.
    """

    digest: str
    bytes: int
    media_type: str
    path: str
    file: Path
    artifact: Artifact
    root: str = STAGED_ROOT

    def ref(self) -> dict[str, str]:
        """``{"root": ..., "path": ...}``: a reference to put in the consumer's input."""
        return {"root": self.root, "path": self.path}


class ArtifactStore:
    """A content-addressed, read-only store of staged artifacts under ``root``.

    Nothing in the store is ever opened, changed or removed through a link: entries are
    opened beneath the store's ``sha256`` folder with ``O_NOFOLLOW``, and created, renamed
    and removed relative to that folder's descriptor.

    A root process refuses a store another account could change the way to (a folder on it
    theirs or writable by them, above the store or the store itself), before anything is
    made there: see the module's notes. Another process uses ``root`` as before.

    Raises
    ------
    ValueError
        For a root process: naming the part of the way another account owns or can write.
    """

    def __init__(self, root: str | os.PathLike[str], *, max_bytes: int | None = None) -> None:
        given = from_working_folder(root)
        _refuse_open_way(given, "nothing was made or staged there")  # before any mkdir
        self.root = Path(os.path.realpath(given))
        self.max_bytes = max_bytes
        folder = self.root / "sha256"
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        _refuse_open_way(given, "nothing was staged there")  # as made: nothing changed it
        own_state.keep(self.root)  # a module sees what it is handed, never the store
        if not os.access(folder, os.W_OK | os.X_OK):  # made by another account, or read-only
            raise PermissionError(errno.EACCES, "cannot be written", str(folder))

    def _name(self, artifact: Artifact) -> str:
        hexdigest = artifact.digest.removeprefix("sha256:")
        suffix = Path(artifact.path).suffix
        if not re.fullmatch(r"\.[A-Za-z0-9]{1,12}", suffix):
            suffix = ""
        return f"sha256/{hexdigest}{suffix}"

    def _folder(self) -> int:
        """The descriptor of ``<store>/sha256``, refused if it (or the store) is a link."""
        try:
            root = os.open(self.root, _DIR_FLAGS)
            try:
                return os.open("sha256", _DIR_FLAGS, dir_fd=root)
            finally:
                os.close(root)
        except OSError as exc:
            raise ConfinementViolation(
                f"the artifact store {self.root} cannot be used ({exc.strerror or exc}); its "
                "sha256 folder must be a real folder, not a link"
            ) from exc

    def stage(self, artifact: VerifiedArtifact) -> StagedArtifact:
        """Copy a verified artifact into the store (once per content) and re-hash the copy.

        The source is opened beneath ``/`` along its canonical path without following any
        link, ``fstat``-checked, and copied from that descriptor (holes stay holes).
        """
        if not hasattr(artifact, "digest") or not hasattr(artifact, "model_dump"):
            raise TypeError(
                f"stage() takes a VerifiedArtifact (one of an Invocation's artifacts), not a "
                f"{type(artifact).__name__}: only what the host verified is staged"
            )
        name = self._name(artifact)
        staged = StagedArtifact(
            digest=artifact.digest,
            bytes=artifact.bytes,
            media_type=artifact.media_type,
            path=name,
            file=self.root / name,
            artifact=Artifact(**artifact.model_dump()),
        )
        entry = name.removeprefix("sha256/")
        folder = self._folder()
        try:
            if self._reuse(staged, folder, entry):
                return staged
            src = self._open_source(artifact)
            try:
                self._write(artifact, src, folder, entry)
            finally:
                os.close(src)
        finally:
            os.close(folder)
        return staged

    def _reuse(self, staged: StagedArtifact, folder: int, entry: str) -> bool:
        """Whether a good copy is already stored; anything else at the name is removed."""
        try:
            st = os.stat(entry, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISREG(st.st_mode):
            try:
                self.verify(staged)
                return True
            except ArtifactRejected:
                pass
        # never chmod or follow: unlinking the name removes the entry (or the planted link)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry, dir_fd=folder)
        return False

    def _open_source(self, artifact: VerifiedArtifact) -> int:
        label = f"artifact {artifact.id!r}"
        if self.max_bytes is not None and artifact.bytes > self.max_bytes:
            raise ArtifactRejected(
                f"{label} has {artifact.bytes} bytes, above this host's artifact limit of "
                f"{self.max_bytes}; it is not staged",
                artifact_id=artifact.id,
                code="artifact_too_large",
            )
        try:
            fd = open_beneath("/", str(artifact.file).lstrip("/"))
        except OSError as exc:
            raise not_opened(label, exc, artifact.id, "invoke the producer again") from exc
        try:
            check_opened(os.fstat(fd), label, artifact.id, artifact.bytes)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _write(self, artifact: VerifiedArtifact, src: int, folder: int, entry: str) -> None:
        tmp = f".staging-{secrets.token_hex(8)}"
        out = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=folder,
        )
        try:
            try:
                copy_sparse(src, out, artifact.bytes)
                os.fchmod(out, 0o444)
                size = os.fstat(out).st_size
            finally:
                os.close(out)
            copy = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            try:
                actual = "sha256:" + sha256_fd(copy)
            finally:
                os.close(copy)
            if size != artifact.bytes or actual != artifact.digest:
                raise DigestMismatch(
                    f"artifact {artifact.id!r} changed while being staged ({artifact.bytes} "
                    f"bytes, {artifact.digest} -> {size} bytes, {actual}); invoke the "
                    "producer again",
                    artifact_id=artifact.id,
                )
            os.rename(tmp, entry, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise

    def open_staged(self, staged: StagedArtifact) -> int:
        """A descriptor of the staged file, re-hashed: read the bytes from it (caller closes)."""
        label = f"staged artifact {staged.path}"
        aid = staged.artifact.id
        try:
            fd = open_beneath(self.root, staged.path)
        except OSError as exc:
            raise not_opened(label, exc, aid, "stage the artifact again") from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ConfinementViolation(
                    f"{label} is not a regular file; stage the artifact again", artifact_id=aid
                )
            if st.st_size != staged.bytes:
                raise SizeMismatch(
                    f"{label} has {st.st_size} bytes, expected {staged.bytes}: it was modified "
                    "after staging; stage the artifact again",
                    artifact_id=aid,
                )
            actual = "sha256:" + sha256_fd(fd)
            if actual != staged.digest:
                raise DigestMismatch(
                    f"{label} hashes to {actual}, expected {staged.digest}: it was modified "
                    "after staging and is not used; stage the artifact again",
                    artifact_id=aid,
                )
        except BaseException:
            os.close(fd)
            raise
        return fd

    def verify(self, staged: StagedArtifact) -> None:
        """Re-hash a staged file; raise if it was mutated, replaced or removed."""
        os.close(self.open_staged(staged))


#: The code of a staging refused because no artifact store can be written.
STORE_UNAVAILABLE = "store_unavailable"


def open_store(root: Path, *, private: Path | None, max_bytes: int | None = None) -> ArtifactStore:
    """The store at ``root``; where it cannot be made or written, the store at ``private``
    (made ``0700``), unless that is ``None`` (a store the caller named: no other is taken).

    A module home is often shared and read-only (a JupyterHub's modules installed once for
    every user): its default store, ``<home>/artifact-store``, is then no one's to write, and
    a user who stages expects it to work, not a ``PermissionError`` on a folder they never
    chose. So the default falls back to a store of the user's own (the caller passes one in
    the murmur-nb cache); a store named explicitly is used or refused, never replaced.

    A root process takes the default ``root``, else ``private``, only where nobody else can
    change the way to it (checked before anything is made there), else a fresh private store
    of the process, gone when it exits (:func:`_root_default`).

    Raises
    ------
    ModuleHostError
        ``store_unavailable``: no store can be written; the message names the folder and
        the fix.
    ValueError
        For a root process, a named store (``private`` is ``None``) another account could
        change the way to: nothing is made or staged there.
    """
    if private is not None and os.geteuid() == 0:
        return _root_default(root, private, max_bytes)
    try:
        return ArtifactStore(root, max_bytes=max_bytes)
    except OSError as exc:
        if private is None:
            raise _unavailable(root, exc, "") from exc
        first = exc
    try:
        private.mkdir(mode=0o700, parents=True, exist_ok=True)
        return ArtifactStore(private, max_bytes=max_bytes)
    except OSError as exc:
        tried = f" (nor the default {root}: {first.strerror or first})"
        raise _unavailable(private, exc, tried) from exc


def _root_default(root: Path, private: Path, max_bytes: int | None) -> ArtifactStore:
    """A root process's default store: the first of ``root`` and ``private`` that nobody
    else can change the way to (:func:`_open_way`, before anything is made there) and that
    can be made, else a fresh ``0700`` one of this process (removed when it exits)."""
    for place in (root, private):
        if _open_way(from_working_folder(place)) is None:
            with contextlib.suppress(OSError):  # a file in the way, a read-only file system
                return ArtifactStore(place, max_bytes=max_bytes)
    return ArtifactStore(process_folder("murmur-nb-artifact-store-"), max_bytes=max_bytes)


def _open_way(given: Path) -> str | None:
    """For a root process, what lets another account change the way to the store at
    ``given`` (absolute): its ``sha256`` folder, or the nearest part of the way to it that
    exists, walked with its links (:func:`~murmur_nb._files.trust.why_open_way`); ``None``
    when nobody can, and for a process that is not root."""
    return why_open_way(given / "sha256")


def _refuse_open_way(given: Path, done: str) -> None:
    """Raise for a root process's store at ``given`` another account could change the way
    to (:func:`_open_way`); ``done`` says what became of it."""
    why = _open_way(given)
    if why is not None:
        raise ValueError(
            f"the artifact store {given} cannot be used by a root process: {why}. Root "
            "stages only where nobody else can change the way to the store (a link put "
            "there would have root make folders and write staged files wherever it "
            f"points); {done}. Name a folder only root can write (such as one under /root) "
            "as ModuleHost(artifact_store=...) or murmur-nb --store, or leave it unset: "
            "the default store then goes where only root can write"
        )


def _unavailable(root: Path, exc: OSError, tried: str) -> ModuleHostError:
    return ModuleHostError(
        f"the artifact store {root} cannot be made or written ({exc.strerror or exc}){tried}, "
        "so nothing was staged. Pass ModuleHost(artifact_store=...) a folder you can write "
        "(murmur-nb --store)",
        code=STORE_UNAVAILABLE,
    )


def staged_view(view: Path, staged: Sequence[StagedArtifact], *, link: bool) -> Path:
    """A per-invocation folder ``view`` holding exactly ``staged``, at their store paths.

    The consumer's ``staged`` root is this view, never the whole store; its folders are made
    ``0700`` (on a root host the sandbox uid reads it by its ACL entry). Files are hard-linked
    when ``link`` (the sandbox keeps the root read-only, so no write reaches the store
    through the link), copied and made read-only otherwise: copied from a descriptor opened
    without following links and ``fstat``-checked, holes kept.
    """
    view.mkdir(mode=0o700, parents=True, exist_ok=True)
    for item in staged:
        dest = view / item.path
        dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if dest.exists():
            continue
        if link:
            try:
                os.link(item.file, dest)  # linkat without AT_SYMLINK_FOLLOW: never a target
                continue
            except OSError:
                pass  # another file system: copy
        _copy_staged(item, dest)
    return view


def not_opened(label: str, exc: OSError, artifact_id: str, fix: str) -> ArtifactRejected:
    """Why an artifact's file could not be opened: gone (``missing_file``: deleted, or its
    folder removed with the host that made it), else a link or a folder in the way
    (``confinement_violation``: it is never followed)."""
    if isinstance(exc, FileNotFoundError):
        return ArtifactRejected(f"{label}: its file no longer exists; {fix}",
                                artifact_id=artifact_id, code="missing_file")  # fmt: skip
    return ConfinementViolation(
        f"{label} cannot be opened without following a link ({exc.strerror or exc}); {fix}",
        artifact_id=artifact_id,
    )


def _copy_staged(item: StagedArtifact, dest: Path) -> None:
    label = f"staged artifact {item.path}"
    try:
        src = open_beneath("/", str(item.file).lstrip("/"))
    except OSError as exc:
        raise not_opened(label, exc, item.artifact.id, "stage the artifact again") from exc
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode) or st.st_size != item.bytes:
            raise SizeMismatch(
                f"{label} changed after it was verified; stage the artifact again",
                artifact_id=item.artifact.id,
            )
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        try:
            copy_sparse(src, out, item.bytes)
        finally:
            os.close(out)
    finally:
        os.close(src)
