"""The presentation primitives of modproto v1: what an artifact's ``presentation`` may name."""

__all__ = ["PRIMITIVES"]

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
