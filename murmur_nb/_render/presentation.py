"""Which rendering primitive an artifact gets: the module's hint, checked against its media type.

A module may name one of the thirteen primitives the host owns (SPEC §2); it never supplies
view code. The hint is advice, not a command, so resolution is forgiving in both directions:

* an unknown hint is ignored with a :class:`PresentationWarning` and the media type decides,
  by the SPEC table and nothing else;
* a known hint the file cannot honour (``video`` on ``text/csv``) falls back to the media
  type as well, with a warning, rather than drawing a broken player.

"Can honour" is judged from the media type alone, because resolution happens before the
file is opened. A renderer that later finds the *content* unusable for the hint (a JSON
``table`` that is not a list of records) falls back the same way; see ``render.py``.
"""

from __future__ import annotations

import reprlib
import warnings

from murmur_nb.protocol import PRIMITIVES

__all__ = [
    "PresentationWarning",
    "is_json",
    "is_textual",
    "media_type_primitive",
    "normalize_media_type",
    "resolve",
    "resolve_presentation",
]

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


_BY_TYPE: dict[str, str] = {
    "image/svg+xml": "diagram",
    "application/pdf": "document",
    "text/markdown": "markdown",
    "application/json": "json",
    **dict.fromkeys(_TABLE_TYPES, "table"),
}
_BY_MAJOR: dict[str, str] = {"video": "video", "audio": "audio", "image": "image", "text": "text"}

# What each primitive can honour, judged from the media type alone: a major type it takes
# whole, or exact media types. ``text``, ``json`` and ``download`` have rules of their own.
_HONOURED_MAJORS: dict[str, frozenset[str]] = {
    "video": frozenset({"video"}),
    "audio": frozenset({"audio"}),
    "image": frozenset({"image"}),
    "image_grid": frozenset({"image"}),
    "markdown": frozenset({"text"}),
}
_HONOURED_TYPES: dict[str, frozenset[str]] = {
    "image_grid": frozenset({"application/json"}),
    "timeline": frozenset({"application/json"}),
    "document": frozenset({"application/pdf"}),
    "diagram": _DIAGRAM_TYPES,
    "slides": frozenset({"application/pdf", "application/json", "text/markdown"}),
    "table": _TABLE_TYPES | {"application/json"},
}


def media_type_primitive(media_type: str) -> str:
    """The primitive the SPEC §2 table assigns to ``media_type`` when no usable hint is given.

    Exact media types first (``image/svg+xml`` is a diagram, ``text/csv`` a table), then the
    major type (``video/*``, ``audio/*``, ``image/*``, other ``text/*``), else ``download``.

    >>> media_type_primitive("image/svg+xml"), media_type_primitive("text/x-python")
    ('diagram', 'text')
    """
    mt = normalize_media_type(media_type)
    major, slash, _ = mt.partition("/")
    if not slash:  # not a type/subtype pair: "anything else"
        return "download"
    return _BY_TYPE.get(mt) or _BY_MAJOR.get(major, "download")


def is_json(media_type: str) -> bool:
    """Whether a (normalized) media type is JSON: ``application/json`` or ``application/*+json``."""
    mt = media_type
    return mt == "application/json" or (mt.startswith("application/") and mt.endswith("+json"))


def is_textual(media_type: str) -> bool:
    """Whether a file of this (normalized) media type is text a person can read as is.

    The one rule for "textual", used both to honour a ``text`` hint and to decide whether
    rendering may fall back to ``text``: any ``text/*``; JSON (``application/json`` and every
    ``+json`` type, RFC 6839); XML (``application/xml`` and every ``+xml`` type, SVG
    included); YAML, TOML, NDJSON and JavaScript. The SPEC §2 table still sends the
    non-``text/*`` ones to ``download`` when no hint asks for ``text``.

    >>> is_textual("application/yaml"), is_textual("application/ld+json"), is_textual("image/png")
    (True, True, False)
    """
    mt = media_type
    return (
        mt.startswith("text/")
        or mt in _TEXTUAL_APPLICATION_TYPES
        or is_json(mt)
        or mt.endswith("+xml")
    )


def _honours(primitive: str, mt: str) -> bool:
    """Whether a file of media type ``mt`` can be shown as ``primitive`` at all."""
    if primitive == "text":
        return is_textual(mt)
    if primitive == "json":
        return is_json(mt)
    if primitive == "download":
        return True
    major = mt.split("/", 1)[0] if "/" in mt else ""
    return major in _HONOURED_MAJORS.get(primitive, ()) or mt in _HONOURED_TYPES.get(primitive, ())


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

    Raises
    ------
    TypeError
        ``presentation`` is not a str (or None), or ``media_type`` not a str.

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
    if presentation is not None and not isinstance(presentation, str):
        raise TypeError(
            "resolve_presentation() takes presentation as a str such as 'table' (or None when "
            f"there is no hint), not {type(presentation).__name__} {reprlib.repr(presentation)}"
        )
    if not isinstance(media_type, str):
        raise TypeError(
            "resolve_presentation() takes media_type as a str such as 'image/png' ('' when "
            f"it is unknown), not {type(media_type).__name__} {reprlib.repr(media_type)}"
        )
    primitive, note = resolve(presentation, media_type)
    if note is not None:
        warnings.warn(note, PresentationWarning, stacklevel=2)
    return primitive
