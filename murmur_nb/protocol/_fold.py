"""Which request keys a Go decoder takes for a host field: the one folding rule.

SPEC §1 says ``extra`` is inlined at the request root and can never shadow a host field. A
module decoding the request with the seed's own Go types (``encoding/json``) matches an
object key to a struct field first exactly, then *case-insensitively under Unicode simple
case folding*: ``Roots``, ``ROOTS`` and ``roots`` spelled with U+017F LATIN SMALL LETTER
LONG S (which folds to ``s``) all land in ``Request.Roots``, and a Go map field is decoded
*into* the map already there, so a folded twin adds entries beside the host's.

:func:`go_fold` is Go's rule (``foldName`` in ``encoding/json``, the same equivalence as
``strings.EqualFold``): every rune is replaced by the smallest rune of its simple-fold
orbit. Two keys name the same Go field exactly when their folds are equal. Every place
that decides whether a key is host-owned uses :func:`shadowing_keys`: the ``Request``
serializer and parser here, and the host's check of ``extra`` before a request is built.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

__all__ = ["go_fold", "shadowing_keys"]

# Go lists these two explicitly as their own orbit (Turkish dotted/dotless i): neither
# folds to ASCII although Python upper-cases U+0131 to ``"I"``.
_OWN_ORBIT = frozenset({"\u0130", "\u0131"})


@functools.lru_cache(maxsize=4096)
def _orbit_min(ch: str) -> str:
    """The smallest character of ``ch``'s simple-fold orbit (Go's ``foldRune``).

    The orbit is the closure of ``ch`` under single-character lower/upper mappings, which
    is how Go's ``unicode.SimpleFold`` falls back when its orbit table has no entry; the
    characters Go pins to themselves are kept alone.
    """
    if ch in _OWN_ORBIT:
        return ch
    seen = {ch}
    pending = [ch]
    while pending:
        current = pending.pop()
        for mapped in (current.lower(), current.upper()):
            if len(mapped) == 1 and mapped not in seen and mapped not in _OWN_ORBIT:
                seen.add(mapped)
                pending.append(mapped)
    return min(seen)


def go_fold(name: str) -> str:
    """``name`` folded as Go's ``encoding/json`` folds object keys to match struct fields.

    Two keys name the same Go field exactly when their folds are equal.

    Examples
    --------
    >>> go_fold("root\u017f") == go_fold("roots") == go_fold("ROOTS")
    True
    >>> go_fold("deadline_MS") == go_fold("deadline_ms")
    True
    """
    return "".join(c.upper() if c < "\x80" else _orbit_min(c) for c in name)


@functools.lru_cache(maxsize=32)
def _folds(fields: frozenset[str]) -> frozenset[str]:
    """The folds of ``fields`` (the host's own field names: the same few sets every call)."""
    return frozenset(go_fold(f) for f in fields)


def shadowing_keys(keys: Iterable[str], host_fields: Iterable[str]) -> list[str]:
    """The keys of ``keys`` a Go decoder would take for one of ``host_fields``, sorted."""
    folded = _folds(frozenset(host_fields))
    return sorted(k for k in keys if go_fold(k) in folded)
