"""Artifact re-validation: a module's claim about a file is checked before the file is used.

A module's artifact is a *claim*: "file ``path`` under root ``root`` has ``bytes`` bytes and
digest ``digest``". The host trusts none of it. Before the file is touched:

1. ``root`` must name a root supplied to *this* invocation;
2. ``path`` must be relative, without ``..``, NUL or a trailing slash;
3. the real path (links followed, chains and loops included) must stay inside the real path
   of the root — compared by path components (``os.path.commonpath``), so a sibling folder
   that merely shares the root's name prefix is outside;
4. the claimed ``bytes`` must be within the policy's ``max_artifact_bytes``;
5. ``lstat`` of the real path must show a regular file (a FIFO is never opened, so it
   cannot block the host) with exactly one hard link (a second link may be a name outside
   the root for the same file) and the claimed size.

Only then is the file opened, beneath the root along its canonical path with ``O_NOFOLLOW``
on every component (:mod:`.beneath`), so a link that appears meanwhile fails the open;
``fstat`` must agree with the ``lstat`` (same inode, one link, the claimed size), and the
SHA-256, read from that descriptor within the invocation's verification budget, must equal
``digest``. The budget covers the whole check: once it is spent, a claim is rejected before
its path is resolved. :func:`open_verified` hands the descriptor on, so whoever renders reads the
bytes that were hashed, not whatever the path holds later.

Staging the verified files is :mod:`murmur_nb._modules.staging`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable, Collection, Mapping
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
from murmur_nb._files.beneath import one_file_problem, open_beneath
from murmur_nb._rules import DIGEST_RE, BudgetSpent, sha256_fd
from murmur_nb.protocol import PRIMITIVES, Artifact, Root

__all__ = [
    "RejectedArtifact",
    "VerifiedArtifact",
    "artifact_warnings",
    "check_opened",
    "open_verified",
    "verify_artifact",
]


#: How a verified artifact draws itself in a notebook (``text/html``, ``text/plain``). The
#: rendering layer above sets them when it is imported; this layer draws nothing itself.
DISPLAY: dict[str, Callable[[Any], str]] = {}


class VerifiedArtifact(Artifact):
    """An artifact whose file passed every re-validation; ``file`` is its absolute real path.

    In a notebook it displays as a one-line card: title, kind, type, size, root and path,
    digest.
    """

    file: Path = Field(exclude=True)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {mime: draw(self) for mime, draw in DISPLAY.items()}


@dataclass(frozen=True)
class RejectedArtifact:
    """The record of an :class:`~murmur_nb.ArtifactRejected`: the artifact that failed
    re-validation, with the error's ``code`` and ``message``. Never rendered, never staged."""

    artifact: Artifact
    code: str
    message: str

    @property
    def id(self) -> str:
        return self.artifact.id



def _relative_path_problem(path: str) -> str | None:
    parts = path.split("/")
    checks = (
        (not path, "the path is empty"),
        ("\x00" in path, "the path contains a NUL byte"),
        (
            path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path) is not None,
            "the path is absolute; artifact paths are relative to their root",
        ),
        (path.endswith("/"), "the path ends with '/'; an artifact names a file"),
        (".." in parts, "the path climbs out with '..'"),
        ("" in parts, "the path has an empty component ('//')"),
    )
    return next((why for broken, why in checks if broken), None)


def _inside(base: str, real: str) -> bool:
    return real != base and os.path.commonpath([base, real]) == base


def _missing_inside(base: str, path: str) -> bool:
    """Whether the missing file ``path`` would lie inside ``base`` (links followed as far as
    they go): a dangling link out of the root stays a confinement problem."""
    try:
        return _inside(base, os.path.realpath(Path(base, path)))
    except OSError:  # a link loop, or a path swapped meanwhile
        return False


def verify_artifact(
    artifact: Artifact,
    roots: Mapping[str, Root],
    *,
    max_bytes: int | None = None,
    deadline: float | None = None,
) -> VerifiedArtifact:
    """Re-validate one produced artifact against the roots of *its* invocation.

    ``max_bytes`` caps the artifact's size (claim and ``fstat``, before any hashing);
    ``deadline`` (a :func:`time.monotonic` instant) bounds the hashing.

    Raises
    ------
    ConfinementViolation
        Unknown root, bad path, escape through a link, not a regular file, or a file
        with more than one hard link.
    SizeMismatch, DigestMismatch
        The file is not the one the artifact describes.
    ArtifactRejected
        ``artifact_missing`` when no file is at the claimed path (inside the root);
        ``artifact_too_large`` past ``max_bytes``; ``verification_budget_exceeded`` past
        ``deadline``.

    What is only odd about an admitted artifact is :func:`artifact_warnings`.
    """
    verified, fd = open_verified(artifact, roots, max_bytes=max_bytes, deadline=deadline)
    os.close(fd)
    return verified


def artifact_warnings(artifact: Artifact, declared_kinds: Collection[str]) -> list[str]:
    """What is odd but allowed about an artifact: a ``kind`` its capability does not
    declare, a ``presentation`` that names no primitive."""
    aid = artifact.id
    found: list[str] = []
    if artifact.kind not in declared_kinds:
        found.append(
            f"artifact {aid!r} has kind {artifact.kind!r}, which the capability does not "
            f"declare in artifact_schemas ({sorted(declared_kinds)!r})"
        )
    if artifact.presentation and artifact.presentation not in PRIMITIVES:
        found.append(
            f"artifact {aid!r} asks for unknown presentation {artifact.presentation!r}; "
            "ignored, its media type decides"
        )
    return found


def _resolve_claim(artifact: Artifact, roots: Mapping[str, Root], label: str) -> tuple[str, str]:
    """``(root real path, file real path)`` of a claim, confined to its root, links resolved."""
    aid = artifact.id
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
        if exc.errno == errno.ENOENT and _missing_inside(base, artifact.path):
            raise ArtifactRejected(
                f"{label} names a file that does not exist under its root; the module "
                "must write the file before it reports it",
                artifact_id=aid,
                code="artifact_missing",
            ) from exc
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
    return base, real


def _check_claim(artifact: Artifact, label: str, max_bytes: int | None) -> None:
    aid = artifact.id
    if max_bytes is not None and artifact.bytes > max_bytes:
        raise ArtifactRejected(
            f"{label} declares {artifact.bytes} bytes, above this host's artifact limit of "
            f"{max_bytes} (Policy.max_artifact_bytes); it was not read. Produce a smaller "
            "file or raise the limit",
            artifact_id=aid,
            code="artifact_too_large",
        )
    if not DIGEST_RE.fullmatch(artifact.digest):
        raise DigestMismatch(
            f"{label} has digest {artifact.digest!r}, not 'sha256:' + 64 lowercase hex digits",
            artifact_id=aid,
        )


def check_opened(fst: os.stat_result, label: str, aid: str, expected_bytes: int) -> None:
    """The ``fstat`` rules on a descriptor about to be read: regular, one link, right size."""
    problem = one_file_problem(fst)
    if problem is not None:
        raise ConfinementViolation(
            f"{label} {problem}; an artifact must be a regular file reachable only from its "
            "root. Write the artifact as a new file (copy it, do not link it)",
            artifact_id=aid,
        )
    if fst.st_size != expected_bytes:
        raise SizeMismatch(
            f"{label} declares {expected_bytes} bytes but the file has {fst.st_size}",
            artifact_id=aid,
        )


def open_verified(
    artifact: Artifact,
    roots: Mapping[str, Root],
    *,
    max_bytes: int | None = None,
    deadline: float | None = None,
) -> tuple[VerifiedArtifact, int]:
    """:func:`verify_artifact`'s checks, returning the verified file's open descriptor too.

    The descriptor was opened beneath the root without following links, ``fstat``-checked
    and hashed; read the bytes from it (the caller closes it), never from the path again.
    """
    aid = artifact.id
    label = f"artifact {aid!r} ({artifact.root}:{artifact.path})"
    if deadline is not None and time.monotonic() >= deadline:
        # before the path is resolved: resolving is work too (a path of 200 folders, claimed
        # 20,000 times, kept the kernel resolving for 85 s past a 60 s budget)
        raise _budget_spent(label, aid, "before it was opened")
    base, real = _resolve_claim(artifact, roots, label)
    _check_claim(artifact, label, max_bytes)
    try:
        st = os.lstat(real)
    except OSError as exc:
        raise ConfinementViolation(f"{label} vanished: {exc}", artifact_id=aid) from exc
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise ConfinementViolation(
            f"{label} is {kind}; an artifact must be a regular file", artifact_id=aid
        )
    check_opened(st, label, aid, artifact.bytes)
    try:
        fd = open_beneath(base, os.path.relpath(real, base))
    except OSError as exc:
        raise ConfinementViolation(
            f"{label} was replaced while being verified ({exc.strerror or exc}); a link "
            "appeared on its path. Not used",
            artifact_id=aid,
        ) from exc
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            raise ConfinementViolation(
                f"{label} was replaced while being verified", artifact_id=aid
            )
        check_opened(fst, label, aid, artifact.bytes)
        actual = "sha256:" + _hash_within(fd, deadline, label, aid)
        if actual != artifact.digest:
            raise DigestMismatch(
                f"{label} declares {artifact.digest} but its content hashes to {actual}",
                artifact_id=aid,
            )
    except BaseException:
        os.close(fd)
        raise
    data: dict[str, Any] = artifact.model_dump()
    return VerifiedArtifact(**data, file=Path(real)), fd


def _hash_within(fd: int, deadline: float | None, label: str, aid: str) -> str:
    try:
        return sha256_fd(fd, deadline=deadline)
    except BudgetSpent as exc:
        raise _budget_spent(label, aid, str(exc)) from None


def _budget_spent(label: str, aid: str, when: str) -> ArtifactRejected:
    return ArtifactRejected(
        f"{label} was not verified: the verification budget of this invocation was spent "
        f"({when}); raise Policy.verify_budget_ms or produce fewer or smaller artifacts",
        artifact_id=aid,
        code="verification_budget_exceeded",
    )


def rejection(artifact: Artifact, exc: ArtifactRejected) -> RejectedArtifact:
    return RejectedArtifact(artifact=artifact, code=exc.code, message=exc.message)
