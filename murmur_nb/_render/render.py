"""Render verified artifacts inline: ``render(invocation)``, ``render(artifact)``, ``render_file``.

Design notes
------------
* **Verification first.** Every artifact is re-checked (regular file, size, SHA-256) right
  before it is rendered, because the file may have changed since the host verified it. A
  failure yields a visible error card naming the artifact, the rule and the reason; the
  content is never shown.
* **The hint proposes, the media type disposes.** :func:`~murmur_nb._render.presentation.resolve`
  picks the primitive. If the renderer then finds the content unusable for it (a ``table``
  hint on JSON that is not records), rendering falls back along a fixed chain — the media
  type's primitive, then ``text`` for textual files, then ``download`` — with a
  :class:`PresentationWarning` and a note on the card. A broken player is never drawn.
* **Structural inputs.** Artifacts and invocations are read through small protocols
  (``id``, ``path``, ``media_type``, ``bytes``, ``digest``, ``file``...), so anything shaped
  like the host's ``VerifiedArtifact`` / ``Invocation`` renders, and a gallery is just
  ``render([...])`` over artifacts and invocations from several calls.
* **Grids group.** The ``image_grid`` images of one invocation become one grid, in order,
  placed where the first of them was.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from murmur_nb._exceptions import MissingDependency
from murmur_nb._render.core import (
    Body,
    CannotRender,
    RenderBudget,
    Rendering,
    Source,
    card,
    error_card,
    esc,
    format_size,
    short_digest,
    source_card,
    summary_line,
)
from murmur_nb._render.diagram import render_diagram
from murmur_nb._render.media import (
    GridItem,
    grid_html,
    render_audio,
    render_download,
    render_image,
    render_video,
)
from murmur_nb._render.pdf import render_document
from murmur_nb._render.presentation import (
    PresentationWarning,
    media_type_primitive,
    normalize_media_type,
    resolve,
)
from murmur_nb._render.slides import image_list, render_slides
from murmur_nb._render.table import render_table
from murmur_nb._render.text import load_json, render_json, render_markdown, render_text
from murmur_nb._render.timeline import render_timeline
from murmur_nb._render.verify import VerificationFailure, file_digest, recheck

__all__ = ["RenderBudget", "Rendering", "render", "render_file"]


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


_Renderer = Callable[[Source, RenderBudget], Body]

_RENDERERS: dict[str, _Renderer] = {
    "video": render_video,
    "audio": render_audio,
    "image": render_image,
    "timeline": render_timeline,
    "document": render_document,
    "diagram": render_diagram,
    "slides": render_slides,
    "table": render_table,
    "markdown": render_markdown,
    "text": render_text,
    "json": render_json,
    "download": render_download,
}

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


def _source(artifact: ArtifactLike, roots: dict[str, Path]) -> Source:
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


def _label(source: Source) -> str:
    return f"artifact {source.id!r} ({source.rel_path})"


def _verify(source: Source) -> Source | Rendering:
    """The source to render (its file as re-verified now), or an error card."""
    result = recheck(
        artifact_id=source.id,
        path=source.rel_path,
        root=source.root,
        root_dir=source.root_dir,
        file=source.file,
        declared_bytes=source.bytes,
        declared_digest=source.digest,
    )
    if isinstance(result, VerificationFailure):
        return _error(source.title, result.code, result.message, source, detail=result.detail)
    return dataclasses.replace(source, file=result.file)


def _error(
    title: str, code: str, message: str, source: Source | None = None, *, detail: str = ""
) -> Rendering:
    extra: dict[str, str] = {}
    lines = [f"error · {title} · {code}", f"  {message}"]
    if source is not None:
        extra = {
            "id": source.id,
            "path": source.rel_path,
            "declared": f"{source.bytes} bytes, {short_digest(source.digest)}",
        }
    if detail:
        extra["host says"] = detail
    return Rendering(
        primitive="error",
        text="\n".join(lines),
        html=error_card(title, code, message, extra),
        error_code=code,
    )


def _is_textual(media_type: str) -> bool:
    return media_type.startswith("text/") or media_type in {"application/json", "image/svg+xml"}


def _chain(primitive: str, media_type: str) -> list[str]:
    chain = [primitive, media_type_primitive(media_type)]
    if _is_textual(media_type):
        chain.append("text")
    chain.append("download")
    out: list[str] = []
    for p in chain:
        if p not in out:
            out.append(p)
    return out


def _finish(primitive: str, source: Source, body: Body) -> Rendering:
    lines = [summary_line(primitive, source)]
    lines += [f"  {d}" for d in body.details]
    lines += [f"  note: {n}" for n in body.notes]
    return Rendering(
        primitive=primitive,
        text="\n".join(lines),
        html=source_card(primitive, source, body),
        slides=body.slides,
    )


def _render_verified(source: Source, presentation: str, budget: RenderBudget) -> Rendering:
    """Render a source already verified, following the fallback chain."""
    primitive, note = resolve(presentation, source.media_type)
    notes: list[str] = []
    if note is not None:
        warnings.warn(note, PresentationWarning, stacklevel=3)
        notes.append(note)
    if primitive == "image_grid":
        if source.media_type == "application/json":
            try:
                return _json_grid(source, budget, notes)
            except CannotRender as exc:
                primitive = _fallback_note(notes, "image_grid", source, str(exc))
        else:
            return _grid([source], budget, notes)
    chain = _chain(primitive, source.media_type)
    for i, candidate in enumerate(chain):
        try:
            body = _RENDERERS[candidate](source, budget)
        except (CannotRender, MissingDependency) as exc:
            if i + 1 == len(chain):
                raise
            reason = exc.message if isinstance(exc, MissingDependency) else str(exc)
            _fallback_note(notes, candidate, source, reason, chain[i + 1])
            continue
        body.notes[:0] = notes
        return _finish(candidate, source, body)
    raise AssertionError("unreachable: download always renders")  # pragma: no cover


def _fallback_note(
    notes: list[str], primitive: str, source: Source, reason: str, instead: str | None = None
) -> str:
    instead = instead or media_type_primitive(source.media_type)
    note = f"could not show as {primitive}: {reason}; shown as {instead}"
    warnings.warn(note, PresentationWarning, stacklevel=4)
    notes.append(note)
    return instead


def _render_one(source: Source, presentation: str, budget: RenderBudget, verify: bool) -> Rendering:
    if verify:
        checked = _verify(source)
        if isinstance(checked, Rendering):
            return checked
        source = checked
    try:
        return _render_verified(source, presentation, budget)
    except OSError as exc:
        return _error(
            source.title,
            "render_failed",
            f"{_label(source)}: reading the file failed ({exc.strerror or exc}); "
            "check that it is still readable.",
            source,
        )


def _grid(sources: list[Source], budget: RenderBudget, notes: list[str]) -> Rendering:
    items = [GridItem(s.title, s.file, s.media_type) for s in sources]
    body_html, grid_notes = grid_html(items, budget)
    body = Body(html=body_html, notes=[*notes, *grid_notes])
    if len(sources) == 1:
        return _finish("image_grid", sources[0], body)
    total = sum(s.bytes for s in sources)
    body.details = _cap_listing(
        [
            f"{n}. {s.title} · {format_size(s.bytes)} · {short_digest(s.digest)}"
            for n, s in enumerate(sources, 1)
        ]
    )
    title = f"{len(sources)} images"
    lines = [f"image_grid · {title} · {format_size(total)}"]
    lines += [f"  {d}" for d in body.details]
    lines += [f"  note: {n}" for n in body.notes]
    html = card("image_grid", body, title=title, size=total)
    return Rendering(primitive="image_grid", text="\n".join(lines), html=html)


def _cap_listing(listing: list[str], keep: int = 50) -> list[str]:
    if len(listing) <= keep:
        return listing
    return [*listing[:keep], f"… {len(listing) - keep} more"]


def _json_grid(source: Source, budget: RenderBudget, notes: list[str]) -> Rendering:
    entries = image_list(load_json(source, budget), source.root_dir)
    items = [
        GridItem(label, path, guess_media_type(path) if path else "", problem)
        for label, path, problem in entries
    ]
    body_html, grid_notes = grid_html(items, budget)
    body = Body(html=body_html, notes=[*notes, *grid_notes])
    body.details = _cap_listing(
        [
            f"{n}. {label}" + (f" ({problem})" if problem else "")
            for n, (label, _, problem) in enumerate(entries, 1)
        ]
    )
    body.details.insert(0, f"{len(entries)} images listed")
    return _finish("image_grid", source, body)


def _roots_of(inv: Any) -> dict[str, Path]:
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


def _rejected(rejected: RejectedLike) -> Rendering:
    return Rendering(
        primitive="error",
        text=f"error · {rejected.id} · {rejected.code} (rejected by the host)",
        html=error_card(rejected.id, rejected.code, rejected.message),
        error_code=rejected.code,
    )


def _render_invocation(inv: InvocationLike, budget: RenderBudget) -> Rendering:
    roots = _roots_of(inv)
    parts: list[Rendering] = []
    grid_sources: list[Source] = []
    grid_at: int | None = None
    for artifact in inv.artifacts:
        source = _source(artifact, roots)
        hint = (artifact.presentation or "").strip()
        if hint == "image_grid" and source.media_type.startswith("image/"):
            checked = _verify(source)
            if isinstance(checked, Rendering):
                parts.append(checked)
                continue
            if grid_at is None:
                grid_at = len(parts)
                parts.append(Rendering(primitive="placeholder", text="", html=""))
            grid_sources.append(checked)
            continue
        parts.append(_render_one(source, artifact.presentation, budget, verify=True))
    if grid_at is not None:
        parts[grid_at] = _grid(grid_sources, budget, [])
    parts.extend(_rejected(rejected) for rejected in inv.rejected_artifacts)
    n_ok = len(inv.artifacts)
    n_rej = len(inv.rejected_artifacts)
    header = f"invocation · {inv.capability} · {n_ok} artifact{'s' if n_ok != 1 else ''}"
    if n_rej:
        header += f", {n_rej} rejected"
    text = "\n".join([header, *(p.text for p in parts)])
    html = (
        f'<div class="murmur-invocation"><div style="font-family:system-ui,sans-serif;'
        f'font-size:13px;font-weight:600">{esc(header)}</div>'
        + "".join(p.html for p in parts)
        + "</div>"
    )
    return Rendering(primitive="invocation", text=text, html=html, parts=tuple(parts))


def render(obj: Any, *, budget: RenderBudget | None = None) -> Rendering:
    """Render an invocation's artifacts, one artifact, or a list of either (a gallery).

    Parameters
    ----------
    obj
        An ``Invocation`` (all its verified artifacts in order, ``image_grid`` images grouped
        into one grid, rejected artifacts as error cards), a ``VerifiedArtifact``, a
        ``RejectedArtifact`` (its error card), or an iterable of those.
    budget
        Size limits; :class:`RenderBudget` defaults when ``None``.

    Returns
    -------
    Rendering
        Displays itself in Jupyter; ``text/plain`` is stable across runs.

    Warns
    -----
    PresentationWarning
        When a presentation hint is unknown or cannot be honoured and the media type decides.

    Examples
    --------
    A gallery of several calls, one cell::

        with home.host() as host:
            runs = [host.invoke("gallery.thumbs", {"count": 4}), host.invoke("docs.report")]
        mnb.render(runs)
    """
    budget = budget or RenderBudget()
    if isinstance(obj, InvocationLike):
        return _render_invocation(obj, budget)
    if isinstance(obj, ArtifactLike):
        return _render_one(_source(obj, {}), obj.presentation, budget, verify=True)
    if isinstance(obj, RejectedLike):
        return _rejected(obj)
    if isinstance(obj, Iterable) and not isinstance(obj, str | bytes | os.PathLike):
        parts = [render(item, budget=budget) for item in obj]
        text = "\n".join([f"gallery · {len(parts)} items", *(p.text for p in parts)])
        html = '<div class="murmur-gallery">' + "".join(p.html for p in parts) + "</div>"
        return Rendering(primitive="gallery", text=text, html=html, parts=tuple(parts))
    raise TypeError(
        f"render() takes an Invocation, a VerifiedArtifact or a list of them, not "
        f"{type(obj).__name__}; for a plain file use render_file(path)"
    )


def render_file(
    path: str | os.PathLike[str],
    media_type: str | None = None,
    presentation: str | None = None,
    *,
    budget: RenderBudget | None = None,
) -> Rendering:
    """Render any local file as an artifact would be, computing its size and digest.

    Parameters
    ----------
    path
        The file. JSON lists of image paths (grids, slides) are resolved against its folder.
    media_type
        Its media type; guessed from the file name when ``None``.
    presentation
        A presentation hint, as a module would give it.
    budget
        Size limits; :class:`RenderBudget` defaults when ``None``.

    Raises
    ------
    FileNotFoundError
        ``path`` is not an existing regular file.
    """
    file = Path(path).expanduser().absolute()
    if not file.is_file():
        raise FileNotFoundError(f"render_file: {os.fspath(path)!r} is not an existing file")
    source = Source(
        id=file.name,
        title=file.name,
        media_type=normalize_media_type(media_type or guess_media_type(file)),
        bytes=file.stat().st_size,
        digest=file_digest(file),
        file=file,
        rel_path=file.name,
        root_dir=file.parent,
    )
    return _render_one(source, presentation or "", budget or RenderBudget(), verify=False)
