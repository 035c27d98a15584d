"""What rendering accepts, and how an input becomes a :class:`~.core.Source`.

Artifacts and invocations are read through small protocols (``id``, ``path``,
``media_type``, ``bytes``, ``digest``, ``file``...), so anything shaped like the host's
``VerifiedArtifact`` / ``Invocation`` renders, and this package never imports the host.
A plain file has no declared media type; :func:`guess_media_type` names one from its
suffix, with this package's own table ahead of :mod:`mimetypes` (whose answers vary by
platform for ``.md``, ``.csv`` or ``.parquet``).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from murmur_nb._render.core import Source
from murmur_nb._render.presentation import normalize_media_type

__all__ = [
    "ArtifactLike",
    "InvocationLike",
    "RejectedLike",
    "guess_media_type",
    "roots_of",
    "source_of",
]


@runtime_checkable
class ArtifactLike(Protocol):
    """What rendering reads of a verified artifact (the host's ``VerifiedArtifact``)."""

    @property
    def id(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def root(self) -> str: ...
    @property
    def presentation(self) -> str: ...
    @property
    def media_type(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    @property
    def digest(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def file(self) -> Path: ...


@runtime_checkable
class RejectedLike(Protocol):
    """A rejected artifact as the host reports it."""

    @property
    def id(self) -> str: ...
    @property
    def code(self) -> str: ...
    @property
    def message(self) -> str: ...


@runtime_checkable
class InvocationLike(Protocol):
    """What rendering reads of an invocation (the host's ``Invocation``)."""

    @property
    def artifacts(self) -> Sequence[ArtifactLike]: ...
    @property
    def rejected_artifacts(self) -> Sequence[RejectedLike]: ...
    @property
    def module(self) -> str: ...
    @property
    def capability(self) -> str: ...


_EXTRA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".parquet": "application/vnd.apache.parquet",
    ".json": "application/json",
    ".mmd": "text/vnd.mermaid",
    ".mermaid": "text/vnd.mermaid",
    ".dot": "text/vnd.graphviz",
    ".gv": "text/vnd.graphviz",
    ".svg": "image/svg+xml",
    ".wav": "audio/wav",
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".txt": "text/plain",
    ".log": "text/plain",
}


def guess_media_type(path: Path) -> str:
    """A media type from the file name: this package's table first, then :mod:`mimetypes`."""
    ext = path.suffix.lower()
    if ext in _EXTRA_TYPES:
        return _EXTRA_TYPES[ext]
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "application/octet-stream"


def _title(artifact: ArtifactLike) -> str:
    return artifact.title or PurePosixPath(artifact.path).name or artifact.id


def _root_dir(artifact: ArtifactLike, roots: dict[str, Path]) -> Path | None:
    if artifact.root in roots:
        return roots[artifact.root]
    parts = PurePosixPath(artifact.path).parts
    file_parts = Path(artifact.file).parts
    if parts and len(file_parts) > len(parts) and file_parts[-len(parts) :] == parts:
        return Path(*file_parts[: -len(parts)])
    return None


def source_of(artifact: ArtifactLike, roots: dict[str, Path]) -> Source:
    """The :class:`Source` to render for ``artifact``, whose roots are ``roots`` (may be empty)."""
    return Source(
        id=artifact.id,
        title=_title(artifact),
        media_type=normalize_media_type(artifact.media_type),
        bytes=artifact.bytes,
        digest=artifact.digest,
        file=Path(artifact.file),
        rel_path=artifact.path,
        root_dir=_root_dir(artifact, roots),
        root=artifact.root,
    )


def roots_of(inv: Any) -> dict[str, Path]:
    """Root name -> folder, from ``inv.request.roots`` when the invocation carries them."""
    request = getattr(inv, "request", None)
    roots = getattr(request, "roots", None)
    if not isinstance(roots, dict):
        return {}
    out: dict[str, Path] = {}
    for name, root in roots.items():
        path = getattr(root, "path", None)
        if isinstance(path, str) and path:
            out[str(name)] = Path(path)
    return out
