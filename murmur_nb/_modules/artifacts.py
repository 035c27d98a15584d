"""Artifact re-validation and the content-addressed staging store.

A module's artifact is a *claim*: "file ``path`` under root ``root`` has ``bytes`` bytes and
digest ``digest``". The host trusts none of it. Before the file is touched:

1. ``root`` must name a root supplied to *this* invocation;
2. ``path`` must be relative, without ``..``, NUL or a trailing slash;
3. the real path (links followed, chains and loops included) must stay inside the real path
   of the root — compared by path components (``os.path.commonpath``), so a sibling folder
   that merely shares the root's name prefix is outside;
4. ``lstat`` of the real path must show a regular file (a FIFO is never opened, so it
   cannot block the host).

Only then is the file opened (``O_NOFOLLOW | O_NONBLOCK``), ``fstat`` must agree with the
``lstat`` (same inode, so a swap in between is caught), the size must equal ``bytes``, and
the SHA-256, streamed with a large buffer, must equal ``digest``.

Staging copies a verified file into a content-addressed store (``<store>/sha256/<hex><ext>``,
read-only) and re-hashes the copy, so what is stored is what was verified. The store is
offered to a consumer module as a read-only root, and every staged file is re-hashed before
each use: a mutation is detected, not trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from murmur_nb._exceptions import (
    ArtifactRejected,
    ConfinementViolation,
    DigestMismatch,
    SizeMismatch,
)
from murmur_nb._modules.descriptor import DIGEST_RE
from murmur_nb._render.presentation import PRIMITIVES
from murmur_nb.protocol import Artifact, Root

__all__ = [
    "STAGED_ROOT",
    "ArtifactStore",
    "RejectedArtifact",
    "StagedArtifact",
    "VerifiedArtifact",
    "hash_file",
    "staged_view",
    "verify_artifact",
]

#: The root name under which a consumer module receives the staging store.
STAGED_ROOT = "staged"

_BUF = 1 << 20


class VerifiedArtifact(Artifact):
    """An artifact whose file passed every re-validation; ``file`` is its absolute real path."""

    file: Path = Field(exclude=True)


@dataclass(frozen=True)
class RejectedArtifact:
    """An artifact that failed re-validation: never rendered, never staged."""

    artifact: Artifact
    code: str
    message: str

    @property
    def id(self) -> str:
        return self.artifact.id


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


def hash_file(fd: int) -> str:
    """Lowercase hex SHA-256 of everything readable from ``fd`` (streamed, 1 MiB buffer)."""
    digest = hashlib.sha256()
    buf = bytearray(_BUF)
    view = memoryview(buf)
    while True:
        n = os.readv(fd, [buf])
        if not n:
            break
        digest.update(view[:n])
    return digest.hexdigest()


def _relative_path_problem(path: str) -> str | None:
    if not path:
        return "the path is empty"
    if "\x00" in path:
        return "the path contains a NUL byte"
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path):
        return "the path is absolute; artifact paths are relative to their root"
    if path.endswith("/"):
        return "the path ends with '/'; an artifact names a file"
    parts = path.split("/")
    if ".." in parts:
        return "the path climbs out with '..'"
    if "" in parts:
        return "the path has an empty component ('//')"
    return None


def _inside(base: str, real: str) -> bool:
    return real != base and os.path.commonpath([base, real]) == base


def verify_artifact(
    artifact: Artifact,
    roots: Mapping[str, Root],
    *,
    declared_kinds: Collection[str] | None = None,
    warnings: list[str] | None = None,
) -> VerifiedArtifact:
    """Re-validate one produced artifact against the roots of *its* invocation.

    Raises
    ------
    ConfinementViolation
        Unknown root, bad path, escape through a link, missing file, or not a regular file.
    SizeMismatch, DigestMismatch
        The file is not the one the artifact describes.

    An undeclared ``kind`` or an unknown ``presentation`` only appends to ``warnings``.
    """
    aid = artifact.id
    label = f"artifact {aid!r} ({artifact.root}:{artifact.path})"
    root = roots.get(artifact.root)
    if root is None:
        raise ConfinementViolation(
            f"{label} names root {artifact.root!r}, which was not supplied to this invocation "
            f"(supplied: {sorted(roots)!r}); the module must write under a root it was given",
            artifact_id=aid,
        )
    problem = _relative_path_problem(artifact.path)
    if problem:
        raise ConfinementViolation(f"{label} is refused: {problem}", artifact_id=aid)
    base = os.path.realpath(root.path)
    try:
        real = os.path.realpath(Path(base, artifact.path), strict=True)
    except OSError as exc:
        raise ConfinementViolation(
            f"{label} cannot be resolved ({exc.strerror or exc}); the file must exist under "
            "its root",
            artifact_id=aid,
        ) from exc
    if not _inside(base, real):
        raise ConfinementViolation(
            f"{label} resolves to {real!r}, outside its root {base!r}; artifacts must stay "
            "inside the root they name, links included",
            artifact_id=aid,
        )
    try:
        st = os.lstat(real)
    except OSError as exc:
        raise ConfinementViolation(f"{label} vanished: {exc}", artifact_id=aid) from exc
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise ConfinementViolation(
            f"{label} is {kind}; an artifact must be a regular file", artifact_id=aid
        )
    if artifact.bytes != st.st_size:
        raise SizeMismatch(
            f"{label} declares {artifact.bytes} bytes but the file has {st.st_size}",
            artifact_id=aid,
        )
    if not DIGEST_RE.fullmatch(artifact.digest):
        raise DigestMismatch(
            f"{label} has digest {artifact.digest!r}, not 'sha256:' + 64 lowercase hex digits",
            artifact_id=aid,
        )
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfinementViolation(f"{label} cannot be opened: {exc}", artifact_id=aid) from exc
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(fst.st_mode):
            raise ConfinementViolation(
                f"{label} was replaced while being verified", artifact_id=aid
            )
        if fst.st_size != artifact.bytes:
            raise SizeMismatch(
                f"{label} declares {artifact.bytes} bytes but the file has {fst.st_size}",
                artifact_id=aid,
            )
        actual = "sha256:" + hash_file(fd)
    finally:
        os.close(fd)
    if actual != artifact.digest:
        raise DigestMismatch(
            f"{label} declares {artifact.digest} but its content hashes to {actual}",
            artifact_id=aid,
        )
    if warnings is not None:
        if declared_kinds is not None and artifact.kind not in declared_kinds:
            warnings.append(
                f"artifact {aid!r} has kind {artifact.kind!r}, which the capability does not "
                f"declare in artifact_schemas ({sorted(declared_kinds)!r})"
            )
        if artifact.presentation and artifact.presentation not in PRIMITIVES:
            warnings.append(
                f"artifact {aid!r} asks for unknown presentation {artifact.presentation!r}; "
                "ignored, its media type decides"
            )
    data: dict[str, Any] = artifact.model_dump()
    return VerifiedArtifact(**data, file=Path(real))


def rejection(artifact: Artifact, exc: ArtifactRejected) -> RejectedArtifact:
    return RejectedArtifact(artifact=artifact, code=exc.code, message=exc.message)


class ArtifactStore:
    """A content-addressed, read-only store of staged artifacts under ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.realpath(os.fspath(root)))
        (self.root / "sha256").mkdir(parents=True, exist_ok=True)

    def _name(self, artifact: Artifact) -> str:
        hexdigest = artifact.digest.removeprefix("sha256:")
        suffix = Path(artifact.path).suffix
        if not re.fullmatch(r"\.[A-Za-z0-9]{1,12}", suffix):
            suffix = ""
        return f"sha256/{hexdigest}{suffix}"

    def stage(self, artifact: VerifiedArtifact) -> StagedArtifact:
        """Copy a verified artifact into the store (once per content) and re-hash the copy."""
        name = self._name(artifact)
        target = self.root / name
        staged = StagedArtifact(
            digest=artifact.digest,
            bytes=artifact.bytes,
            media_type=artifact.media_type,
            path=name,
            file=target,
            artifact=Artifact(**artifact.model_dump()),
        )
        if target.exists():
            try:
                self.verify(staged)
                return staged
            except ArtifactRejected:
                with contextlib.suppress(OSError):
                    target.chmod(0o600)
                    target.unlink()
        fd, tmp = tempfile.mkstemp(dir=self.root / "sha256", prefix=".staging-")
        try:
            with os.fdopen(fd, "wb") as out, artifact.file.open("rb") as src:
                _copy(src.fileno(), out.fileno())
            tmp_fd = os.open(tmp, os.O_RDONLY)
            try:
                actual = "sha256:" + hash_file(tmp_fd)
                size = os.fstat(tmp_fd).st_size
            finally:
                os.close(tmp_fd)
            if size != artifact.bytes:
                raise SizeMismatch(
                    f"artifact {artifact.id!r} changed size while being staged "
                    f"({artifact.bytes} -> {size}); invoke the producer again",
                    artifact_id=artifact.id,
                )
            if actual != artifact.digest:
                raise DigestMismatch(
                    f"artifact {artifact.id!r} changed while being staged "
                    f"({artifact.digest} -> {actual}); invoke the producer again",
                    artifact_id=artifact.id,
                )
            Path(tmp).chmod(0o444)
            Path(tmp).replace(target)
        except BaseException:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
            raise
        return staged

    def verify(self, staged: StagedArtifact) -> None:
        """Re-hash a staged file; raise if it was mutated, replaced or removed."""
        label = f"staged artifact {staged.path}"
        try:
            fd = os.open(staged.file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise ConfinementViolation(
                f"{label} cannot be opened ({exc.strerror or exc}); stage the artifact again",
                artifact_id=staged.artifact.id,
            ) from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ConfinementViolation(
                    f"{label} is not a regular file; stage the artifact again",
                    artifact_id=staged.artifact.id,
                )
            if st.st_size != staged.bytes:
                raise SizeMismatch(
                    f"{label} has {st.st_size} bytes, expected {staged.bytes}: it was modified "
                    "after staging; stage the artifact again",
                    artifact_id=staged.artifact.id,
                )
            actual = "sha256:" + hash_file(fd)
        finally:
            os.close(fd)
        if actual != staged.digest:
            raise DigestMismatch(
                f"{label} hashes to {actual}, expected {staged.digest}: it was modified after "
                "staging and is not used; stage the artifact again",
                artifact_id=staged.artifact.id,
            )


def staged_view(view: Path, staged: Sequence[StagedArtifact], *, link: bool) -> Path:
    """A per-invocation folder ``view`` holding exactly ``staged``, at their store paths.

    The consumer's ``staged`` root is this view, never the whole store. Files are hard-linked
    when ``link`` (the sandbox keeps the root read-only, so no write reaches the store
    through the link), copied and made read-only otherwise.
    """
    view.mkdir(parents=True, exist_ok=True)
    for item in staged:
        dest = view / item.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            continue
        if link:
            try:
                os.link(item.file, dest)
                continue
            except OSError:
                pass  # another file system: copy
        shutil.copyfile(item.file, dest)
        dest.chmod(0o444)
    return view


def _copy(src: int, dst: int) -> None:
    """Copy all of ``src`` to ``dst`` in the kernel where possible."""
    size = os.fstat(src).st_size
    offset = 0
    try:
        while offset < size:
            n = os.copy_file_range(src, dst, size - offset)
            if n == 0:
                break
            offset += n
        return
    except OSError:
        pass
    os.lseek(src, offset, os.SEEK_SET)
    os.lseek(dst, offset, os.SEEK_SET)
    while True:
        chunk = os.read(src, _BUF)
        if not chunk:
            break
        os.write(dst, chunk)
