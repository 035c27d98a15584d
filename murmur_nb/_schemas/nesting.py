"""How deeply nested the JSON a module prints may be.

Arrays and objects in anything a module prints (the ``describe`` envelope with its schemas,
the ``invoke`` envelope with its result) nest at most :data:`MAX_JSON_DEPTH` levels, the
envelope being level 1: far beyond real documents, far below the recursion limit, so
pydantic, schema validation and the descriptor digest stay safe. A ``RecursionError`` from the
decoder is reported as a depth breach; depth is measured without recursion, and not at all
when the text holds fewer opening brackets than the limit.

Nor may it hold a number JSON cannot: ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's
reader takes and the runtime's Go decoder refuses, failing the whole document), or a number
too large for a 64-bit float (``1e999``: Go refuses it as out of range, Python made it an
infinity). The host refuses both in what it sends already (a request's input); until
2026-12-07 it took them in what a module printed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "TooDeep", "decode_bounded"]

#: The deepest nesting of arrays and objects accepted in JSON a module prints.
MAX_JSON_DEPTH = 64



def _no_constant(name: str) -> float:
    """Python's reader takes ``NaN``, ``Infinity`` and ``-Infinity``; JSON has none of them
    (RFC 8259), the runtime's Go decoder refuses the whole document, and the host refuses
    them in what it sends (a request's input): here too they are no JSON."""
    raise ValueError(
        f"{name} is not JSON (RFC 8259 has no NaN or infinities, and the runtime refuses the "
        "document); write null or a string for it (Python's json.dumps(..., allow_nan=False) "
        "finds them)"
    )


#: one decoder for every document (as ``json.loads`` keeps one): made once, not per call
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


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
    if _MAYBE_HUGE.search(text, 0, end) and _holds_infinity(value):
        raise ValueError(
            "a number in it is too large for a 64-bit float (the runtime refuses it as out of "
            "range; Python made it an infinity); write it as a string"
        )
    return value, end


#: what a number past a float's range (1.8e308) needs: an exponent of three digits, or 309
#: digits in a row; a document without either holds no such number, and is not walked
_MAYBE_HUGE = re.compile(r"[eE]\+?0*[1-9][0-9]{2}|[0-9]{309}")


def _holds_infinity(value: Any) -> bool:
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, float):
            if math.isinf(node):
                return True
        elif isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


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
