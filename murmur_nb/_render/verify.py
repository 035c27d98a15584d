"""Re-check an artifact's file against its declared size and digest, right before rendering.

The host verified the file when the invocation returned, but a notebook renders later, and
the file may have been replaced, truncated or deleted since. When the artifact's root is known
(from the request, or recovered from the verified path), the host's own
:func:`murmur_nb._files.artifacts.open_verified` runs again: confinement, regular file, one
link, size, digest, the rules that admitted it; otherwise :func:`verify_file` checks the file
alone. Either way the hash is streamed, a size mismatch is caught from ``fstat`` before a byte
is read, and the checked descriptor is handed back (:class:`Verified`): the renderer reads
through it, so swapping the path after the check changes nothing shown.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._exceptions import ArtifactRejected, ConfinementViolation
from murmur_nb._files.artifacts import open_verified
from murmur_nb._files.beneath import open_beneath, proc_path
from murmur_nb._rules import DIGEST_RE, sha256_fd
from murmur_nb.protocol import Artifact, Root

__all__ = ["Verified", "VerificationFailure", "file_digest", "recheck", "verify_file"]


@dataclass(frozen=True)
class VerificationFailure:
    """Why a file may not be rendered: a stable ``code`` and a message saying which and why."""

    code: str
    message: str
    #: The host's full wording, when it may name absolute paths (shown in HTML only).
    detail: str = ""


@dataclass(frozen=True)
class Verified:
    """The file passed; ``fd`` is the open descriptor that was verified (read only from it).

    ``file`` is the file's real path, for links shown to the reader; ``readable`` opens the
    very file ``fd`` refers to, whatever the path holds by now. :meth:`close` releases it.
    """

    file: Path
    fd: int

    @property
    def readable(self) -> Path:
        return Path(proc_path(self.fd))

    def close(self) -> None:
        os.close(self.fd)


def file_digest(path: Path) -> str:
    """``"sha256:<hex>"`` of the file at ``path``, streamed."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return "sha256:" + sha256_fd(fd)
    finally:
        os.close(fd)


def verify_file(
    path: Path, declared_bytes: int, declared_digest: str, *, label: str
) -> VerificationFailure | Verified:
    """Check that ``path`` is a regular file of ``declared_bytes`` hashing to ``declared_digest``.

    ``label`` names the artifact in the message (its id and relative path, never an absolute
    temporary path, so the message is stable across runs). The file is opened along its
    canonical path without following any link, and the :class:`Verified` holds that open
    descriptor.
    """
    try:
        fd = open_beneath("/", os.path.realpath(path).lstrip("/"))
    except FileNotFoundError:
        if not path.parent.exists():
            return _folder_gone(label, "the folder it was written to")
        return VerificationFailure(
            "missing_file",
            f"{label}: the file no longer exists; re-run the invocation that produced it.",
        )
    except OSError as exc:
        return VerificationFailure(
            "missing_file", f"{label}: the file cannot be read ({exc.strerror}); check permissions."
        )
    failure = _check_fd(fd, declared_bytes, declared_digest, label)
    if failure is not None:
        os.close(fd)
        return failure
    return Verified(Path(os.path.realpath(path)), fd)


def _folder_gone(label: str, folder: str) -> VerificationFailure:
    """A missing file whose folder went too: most often its host was closed, which removes
    the run folders of its calls (the end of a ``with home.host() as host:`` block)."""
    return VerificationFailure(
        "missing_file",
        f"{label}: {folder} no longer exists. A ModuleHost removes its calls' folders when "
        "it closes: render while it is open (inside its `with` block), or re-run the "
        "invocation.",
    )


def _check_fd(
    fd: int, declared_bytes: int, declared_digest: str, label: str
) -> VerificationFailure | None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return VerificationFailure(
            "missing_file", f"{label}: the path is no longer a regular file; re-run the invocation."
        )
    if st.st_size != declared_bytes:
        return VerificationFailure(
            "size_mismatch",
            f"{label}: the file has {st.st_size} bytes but the artifact declares "
            f"{declared_bytes}; it changed after it was produced. Re-run the invocation.",
        )
    if not DIGEST_RE.fullmatch(declared_digest):
        return VerificationFailure(
            "digest_mismatch",
            f"{label}: declared digest {declared_digest!r} is not 'sha256:' followed by "
            "64 lowercase hex digits, so the file cannot be verified; fix the producing module.",
        )
    try:
        actual = "sha256:" + sha256_fd(fd)
    except OSError as exc:
        return VerificationFailure(
            "missing_file", f"{label}: the file cannot be read ({exc.strerror}); check permissions."
        )
    if actual != declared_digest:
        return VerificationFailure(
            "digest_mismatch",
            f"{label}: the file's content hashes to {actual} but the artifact declares "
            f"{declared_digest}; it changed after it was produced. Re-run the invocation.",
        )
    return None


def recheck(
    *,
    artifact_id: str,
    path: str,
    root: str,
    root_dir: Path | None,
    file: Path,
    declared_bytes: int,
    declared_digest: str,
) -> Verified | VerificationFailure:
    """Re-verify an artifact as the host did; absolute root paths never reach the message."""
    label = f"artifact {artifact_id!r} ({path})"
    if root_dir is None:
        return verify_file(file, declared_bytes, declared_digest, label=label)
    if not os.path.lexists(root_dir):
        return _folder_gone(label, f"the folder of root {root!r}")
    if not os.path.lexists(root_dir / path):
        return VerificationFailure(
            "missing_file",
            f"{label}: no such file under root {root!r} any more; "
            "re-run the invocation that produced it.",
        )
    claim = Artifact(
        id=artifact_id,
        kind="",
        path=path,
        root=root or "root",
        media_type="",
        bytes=declared_bytes,
        digest=declared_digest,
    )
    base = str(root_dir)
    real_base = os.path.realpath(root_dir)
    try:
        verified, fd = open_verified(claim, {claim.root: Root(path=base, mode="ro")})
    except ArtifactRejected as exc:
        message = exc.message
        for prefix in sorted({real_base, base}, key=len, reverse=True):
            message = message.replace(prefix, f"<root {claim.root}>")
        if isinstance(exc, ConfinementViolation):
            # the host names where the path now leads: useful, but absolute and unstable
            return VerificationFailure(
                exc.code,
                f"{label}: the path no longer passes the host's confinement check "
                "(a link or the file type changed); not rendered.",
                detail=message,
            )
        return VerificationFailure(exc.code, message)
    return Verified(verified.file, fd)
