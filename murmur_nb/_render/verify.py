"""Re-check an artifact's file against its declared size and digest, right before rendering.

The host verified the file when the invocation returned, but a notebook renders later, and
the file may have been replaced, truncated or deleted since. When the artifact's root is known
(from the request, or recovered from the verified path), the host's own
:func:`murmur_nb._files.artifacts.open_verified` runs again: confinement, regular file, one
link, size, digest, the rules that admitted it; otherwise :func:`verify_file` checks the file
alone. Either way the hash is streamed, a size mismatch is caught from ``fstat`` before a byte
is read, and the checked descriptor is handed back (:class:`Verified`): the renderer reads
through it, so swapping the path after the check changes nothing shown.

A descriptor does not stop a write into the same file, though: a module of another call
that may write where the artifact lies (a shared ``rw`` root) rewrote it in place, same
size, while the notebook rendered it, and the card showed its bytes under the digest that
was checked (a red-team review: 392 of about 35,000 renderings in a race). So a file of up
to :data:`SNAPSHOT_BYTES` is rendered from a sealed copy in memory
(:mod:`murmur_nb._files.sealed`), hashed once sealed: what is shown is what was checked.
Copies held at once take at most :data:`SNAPSHOTS_HELD` bytes (a grid holds many images
open until it is drawn); a larger file, or one past that total, is read where it lies, as
before (most such files are linked, and a link is read by the browser later anyway).
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._exceptions import ArtifactRejected, ConfinementViolation
from murmur_nb._files import sealed
from murmur_nb._files.artifacts import open_verified
from murmur_nb._files.beneath import open_beneath, proc_path
from murmur_nb._rules import DIGEST_RE, sha256_fd
from murmur_nb.protocol import Artifact, Root

__all__ = [
    "SNAPSHOTS_HELD", "SNAPSHOT_BYTES", "Verified", "VerificationFailure", "file_digest",
    "recheck", "verify_file",
]  # fmt: skip

#: largest file rendered from a sealed copy (the default budget's ``parse_bytes``: what a
#: renderer decodes whole)
SNAPSHOT_BYTES = 32 << 20
#: most bytes of sealed copies held at once by this process
SNAPSHOTS_HELD = 256 << 20


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
    #: bytes of :data:`SNAPSHOTS_HELD` this sealed copy takes (0: ``fd`` is the file itself)
    copied: int = 0

    @property
    def readable(self) -> Path:
        return Path(proc_path(self.fd))

    def close(self) -> None:
        os.close(self.fd)
        _HELD.give_back(self.copied)


class _Held:
    """The bytes of sealed copies open in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bytes = 0

    def take(self, size: int) -> bool:
        with self.lock:
            if self.bytes + size > SNAPSHOTS_HELD:
                return False
            self.bytes += size
            return True

    def give_back(self, size: int) -> None:
        with self.lock:
            self.bytes -= size


_HELD = _Held()


def _verified(file: Path, fd: int, size: int, digest: str,
              label: str) -> Verified | VerificationFailure:  # fmt: skip
    """The checked ``fd`` (closed here) as a sealed copy hashed again, when it is small
    enough and the copies held leave room; else ``fd`` itself."""
    if not sealed.AVAILABLE or size > SNAPSHOT_BYTES or not _HELD.take(size):
        return Verified(file, fd)
    try:
        copy = sealed.sealed_copy(fd, "murmur-nb-artifact")
    except OSError:
        _HELD.give_back(size)
        return Verified(file, fd)  # no memory for a copy: read where it lies
    os.close(fd)
    failure = _check_fd(copy, size, digest, label)
    if failure is not None:
        os.close(copy)
        _HELD.give_back(size)
        return VerificationFailure(
            failure.code, f"{label}: the file changed while it was being checked (it is being "
            "written to); re-run the invocation once nothing writes to it."
        )  # fmt: skip
    return Verified(file, copy, size)


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
    return _verified(Path(os.path.realpath(path)), fd, declared_bytes, declared_digest, label)


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
    return _verified(verified.file, fd, declared_bytes, declared_digest, label)
