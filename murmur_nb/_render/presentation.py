"""Which rendering primitive an artifact gets: the module's hint, checked against its media type.

A module may name one of the thirteen primitives the host owns (SPEC §2); it never supplies
view code. The hint is advice, not a command, so resolution is forgiving in both directions:

* an unknown hint is ignored with a :class:`PresentationWarning` and the media type decides,
  by the SPEC table and nothing else;
* a known hint the file cannot honour (``video`` on ``text/csv``) falls back to the media
  type as well, with a warning, rather than drawing a broken player.

"Can honour" is judged from the media type alone, because resolution happens before the
file is opened. A renderer that later finds the *content* unusable for the hint (a JSON
``table`` that is not a list of records) falls back the same way; see ``_render.py``.
"""

from __future__ import annotations

import warnings

__all__ = [
    "PRIMITIVES",
    "PresentationWarning",
    "media_type_primitive",
    "normalize_media_type",
    "resolve",
    "resolve_presentation",
]

#: The primitives the host owns, in SPEC order.
PRIMITIVES: tuple[str, ...] = (
    "video",
    "audio",
    "image",
    "image_grid",
    "timeline",
    "document",
    "diagram",
    "slides",
    "table",
    "markdown",
    "text",
    "json",
    "download",
)

_TABLE_TYPES = frozenset(
    {"text/csv", "text/tab-separated-values", "application/vnd.apache.parquet"}
)
_DIAGRAM_TYPES = frozenset({"image/svg+xml", "text/vnd.mermaid", "text/vnd.graphviz"})
_TEXTUAL_APPLICATION_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/javascript",
        "application/x-ndjson",
        "application/toml",
        "image/svg+xml",
    }
)


class PresentationWarning(UserWarning):
    """A presentation hint was ignored: unknown, or not one the file can honour."""


def normalize_media_type(media_type: str) -> str:
    """``media_type`` lower-cased without parameters (``"Text/CSV; charset=x"`` -> ``text/csv``)."""
    return media_type.split(";", 1)[0].strip().lower()


def media_type_primitive(media_type: str) -> str:
    """The primitive the SPEC §2 table assigns to ``media_type`` when no usable hint is given.

    >>> media_type_primitive("image/svg+xml"), media_type_primitive("text/x-python")
    ('diagram', 'text')
    """
    mt = normalize_media_type(media_type)
    major, slash, _ = mt.partition("/")
    if not slash:  # not a type/subtype pair: "anything else"
        return "download"
    if major == "video":
        return "video"
    if major == "audio":
        return "audio"
    if mt == "image/svg+xml":
        return "diagram"
    if major == "image":
        return "image"
    if mt == "application/pdf":
        return "document"
    if mt == "text/markdown":
        return "markdown"
    if mt in _TABLE_TYPES:
        return "table"
    if mt == "application/json":
        return "json"
    if major == "text":
        return "text"
    return "download"


def _is_json(mt: str) -> bool:
    return mt == "application/json" or (mt.startswith("application/") and mt.endswith("+json"))


def _is_textual(mt: str) -> bool:
    return (
        mt.startswith("text/")
        or mt in _TEXTUAL_APPLICATION_TYPES
        or _is_json(mt)
        or mt.endswith("+xml")
    )


def _honours(primitive: str, mt: str) -> bool:
    """Whether a file of media type ``mt`` can be shown as ``primitive`` at all."""
    major = mt.split("/", 1)[0] if "/" in mt else ""
    match primitive:
        case "video" | "audio":
            return major == primitive
        case "image":
            return major == "image"
        case "image_grid":
            return major == "image" or mt == "application/json"
        case "timeline":
            return mt == "application/json"
        case "document":
            return mt == "application/pdf"
        case "diagram":
            return mt in _DIAGRAM_TYPES
        case "slides":
            return mt in {"application/pdf", "application/json", "text/markdown"}
        case "table":
            return mt in _TABLE_TYPES or mt == "application/json"
        case "markdown":
            return major == "text"
        case "text":
            return _is_textual(mt)
        case "json":
            return _is_json(mt)
        case _:  # download
            return True


def resolve(presentation: str | None, media_type: str) -> tuple[str, str | None]:
    """Resolve without warning: ``(primitive, note)``, ``note`` saying why a hint was ignored."""
    mt = normalize_media_type(media_type)
    fallback = media_type_primitive(mt)
    hint = (presentation or "").strip()
    if not hint:
        return fallback, None
    if hint not in PRIMITIVES:
        return fallback, (
            f"unknown presentation hint {hint!r} ignored; media type {mt or '(none)'} "
            f"decides: {fallback}"
        )
    if not _honours(hint, mt):
        return fallback, (
            f"presentation hint {hint!r} cannot be honoured for media type "
            f"{mt or '(none)'}; shown as {fallback}"
        )
    return hint, None


def resolve_presentation(presentation: str | None, media_type: str) -> str:
    """The primitive an artifact renders as, per SPEC §2.

    Parameters
    ----------
    presentation
        The module's hint (``Artifact.presentation``); ``""`` or ``None`` when absent.
    media_type
        The artifact's declared media type; parameters such as ``charset`` are ignored.

    Returns
    -------
    str
        One of :data:`PRIMITIVES`.

    Warns
    -----
    PresentationWarning
        When the hint is unknown, or names a primitive this media type cannot honour;
        the media type then decides.

    Examples
    --------
    >>> resolve_presentation("timeline", "application/json")
    'timeline'
    >>> resolve_presentation("", "text/csv")
    'table'
    """
    primitive, note = resolve(presentation, media_type)
    if note is not None:
        warnings.warn(note, PresentationWarning, stacklevel=2)
    return primitive
