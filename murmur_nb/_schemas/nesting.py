"""How deeply nested the JSON a module prints may be.

Arrays and objects in anything a module prints (the ``describe`` envelope with its schemas,
the ``invoke`` envelope with its result) nest at most :data:`MAX_JSON_DEPTH` levels, the
envelope being level 1: far beyond real documents, far below the recursion limit, so
pydantic, schema validation and the descriptor digest stay safe. A ``RecursionError`` from the
decoder is reported as a depth breach; depth is measured without recursion, and not at all
when the text holds fewer opening brackets than the limit.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "TooDeep", "decode_bounded"]

#: The deepest nesting of arrays and objects accepted in JSON a module prints.
MAX_JSON_DEPTH = 64

#: one decoder for every document (as ``json.loads`` keeps one): made once, not per call
_DECODER = json.JSONDecoder()


class TooDeep(ValueError):
    """The document nests arrays and objects deeper than the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"it nests arrays and objects deeper than {limit} levels, the host's limit "
            "for anything a module prints; flatten the data or write it to an artifact"
        )


def decode_bounded(text: str, limit: int = MAX_JSON_DEPTH) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode(text)`` refusing nesting deeper than ``limit``.

    Raises :class:`TooDeep` (a ``ValueError``) on a breach, ``ValueError`` on bad JSON.
    """
    try:
        value, end = _DECODER.raw_decode(text)
    except RecursionError:
        raise TooDeep(limit) from None
    if text.count("[", 0, end) + text.count("{", 0, end) > limit and _deeper_than(value, limit):
        raise TooDeep(limit)
    return value, end


def _deeper_than(value: Any, limit: int) -> bool:
    pending: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while pending:
        node, depth = pending.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                pending.append((child, depth + 1))
    return False
