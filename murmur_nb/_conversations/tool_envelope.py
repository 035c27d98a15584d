"""The tool-message envelope (SPEC §3), encoded and decoded in one place.

For role ``"tool"`` a message's ``content`` is the compact JSON text of
``{"__murmur_tool_msg__": true, "tool_call_id": <string|null>, "is_error": <bool|null>,
"body": <the record line's content>}``, keys in that order. The reader encodes it for each
page, the frame builder for a whole record's tool rows at once, and the conversation
explorer decodes it for display; all three use this module, so they cannot drift.

*Bodies orjson does not write.* A tool body is any JSON value the runtime wrote, and
orjson refuses to serialise nesting deeper than it parses and integers beyond 64 bits;
:func:`encode` then falls back to an iterative writer (:func:`dumps_exact`) that
produces the same compact text without recursion, integers written exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["ENVELOPE_KEY", "decode", "dumps_exact", "encode", "encode_cleaned"]

ENVELOPE_KEY = "__murmur_tool_msg__"
"""The key whose ``true`` value marks a tool-message envelope."""

_dumps = orjson.dumps


@dataclass(frozen=True, slots=True)
class _Literal:
    text: bytes


def dumps_exact(value: Any, option: int = 0) -> bytes:
    """``value`` as compact JSON, as ``orjson.dumps(value, option=option)`` writes it.

    Not :func:`murmur_nb._rules.compact_json`, whose fallback is the stdlib's (it escapes
    non-ASCII and recurses): a record's lines keep orjson's spelling at any depth.

    Also for what orjson refuses to write but JSON carries: nesting deeper than orjson
    writes, and integers beyond 64 bits (written exactly). Other values orjson cannot
    write raise its ``JSONEncodeError`` (a ``TypeError``).
    """
    try:
        return _dumps(value, option=option)
    except orjson.JSONEncodeError:
        return _encode_deep(value, option)


def _encode_deep(value: Any, option: int = 0) -> bytes:
    """Compact JSON without recursion, integers exact, for what orjson does not write."""
    out: list[bytes] = []
    stack: list[Any] = [value]
    literal = _Literal
    while stack:
        item = stack.pop()
        if type(item) is literal:
            out.append(item.text)
        elif type(item) is dict:
            stack.append(literal(b"}"))
            pairs = list(item.items())
            for index in range(len(pairs) - 1, -1, -1):
                key, member = pairs[index]
                if type(key) is not str:
                    raise orjson.JSONEncodeError(f"Dict key must be str, not {type(key).__name__}")
                stack.append(member)
                stack.append(literal((b"," if index else b"") + _dumps(key) + b":"))
            out.append(b"{")
        elif type(item) is list or type(item) is tuple:
            stack.append(literal(b"]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(literal(b","))
            out.append(b"[")
        elif type(item) is int:
            out.append(str(item).encode())
        else:
            out.append(_dumps(item, option=option))
    return b"".join(out)


def encode(tool_call_id: Any, is_error: Any, body: Any) -> str:
    """The tool-message envelope for one tool result, as compact JSON text.

    ``tool_call_id`` that is not a string and ``is_error`` that is not a bool become
    ``null``; the keys keep the seed's order.

    Examples
    --------
    >>> encode("c1", False, {"rows": 2})
    '{"__murmur_tool_msg__":true,"tool_call_id":"c1","is_error":false,"body":{"rows":2}}'
    """
    envelope = {
        ENVELOPE_KEY: True,
        "tool_call_id": tool_call_id if type(tool_call_id) is str else None,
        "is_error": is_error if type(is_error) is bool else None,
        "body": body,
    }
    return dumps_exact(envelope).decode()


def encode_cleaned(call_ids: list[Any], errors: list[Any], bodies: list[Any]) -> list[str]:
    """:func:`encode` for many tool rows whose call ids and error flags are already cleaned.

    ``call_ids`` hold only ``str`` or ``None`` and ``errors`` only ``bool`` or ``None``;
    one envelope dict is reused for every row, which is what makes a whole record cheap.
    """
    dumps = _dumps
    encode_error = orjson.JSONEncodeError
    envelope = {ENVELOPE_KEY: True, "tool_call_id": None, "is_error": None, "body": None}
    out: list[str] = []
    append = out.append
    for call_id, is_error, body in zip(call_ids, errors, bodies, strict=True):
        envelope["tool_call_id"] = call_id
        envelope["is_error"] = is_error
        envelope["body"] = body
        try:
            append(dumps(envelope).decode())
        except encode_error:
            append(encode(call_id, is_error, body))
    return out


def decode(content: str) -> dict[str, Any] | None:
    """The ``tool_call_id``, ``is_error`` and ``body`` of a tool envelope, or ``None``.

    ``None`` when ``content`` is not JSON, nests deeper than the stdlib reads (its
    ``RecursionError``: a guest's ``[[[...`` is no envelope, not a crash of its reader), or is
    not an object whose ``__murmur_tool_msg__`` is ``true``.

    Examples
    --------
    >>> decode(encode("c1", None, [1]))
    {'tool_call_id': 'c1', 'is_error': None, 'body': [1]}
    >>> decode("plain text") is None
    True
    """
    try:
        value = json.loads(content)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or value.get(ENVELOPE_KEY) is not True:
        return None
    return {
        "tool_call_id": value.get("tool_call_id"),
        "is_error": value.get("is_error"),
        "body": value.get("body"),
    }
