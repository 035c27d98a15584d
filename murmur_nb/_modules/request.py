"""Rules on what a caller hands to :meth:`ModuleHost.invoke` before it becomes a request.

Design notes
------------
* **Go decides what a key means.** SPEC §1 says ``extra`` is inlined at the request root and
  can never shadow a host field. A module decoding the request with the seed's own Go types
  (``encoding/json``) matches an object key to a struct field first exactly, then
  *case-insensitively under Unicode simple case folding*: ``Roots``, ``ROOTS`` and
  ``roots`` spelled with U+017F LATIN SMALL LETTER LONG S (which folds to ``s``) all land
  in ``Request.Roots``, and a Go map field is decoded *into* the map already there, so a
  folded twin adds entries beside the host's. :func:`go_fold` is Go's rule (``foldName``
  in ``encoding/json``, the same equivalence as ``strings.EqualFold``): every rune is
  replaced by the smallest rune of its simple-fold orbit. An ``extra`` key whose fold
  equals a host field's fold is dropped with a warning, exactly like the exact name.
* **Strict JSON text.** The request is UTF-8 JSON (RFC 8259): a lone surrogate cannot be
  encoded and ``NaN``/``Infinity`` are not JSON. Both are refused as ``invalid_input``
  before anything runs, never discovered later as a host crash.
* **Bounds a Go ``int`` can hold.** ``deadline_ms`` and ``max_output_bytes`` are positive
  and at most the policy's ``deadline_ms_limit`` / ``max_output_bytes_limit``.
* **Canonical roots.** Every root path sent is ``realpath``'d, whatever on the host side is
  a link (the runs folder, ``TMPDIR``, the home): the seed's "canonicalized absolute paths".
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from murmur_nb._exceptions import InvalidInput

__all__ = ["canonical_path", "check_bounds", "go_fold", "shadowing_keys", "strict_json"]

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


def shadowing_keys(keys: Iterable[str], host_fields: Iterable[str]) -> list[str]:
    """The keys of ``keys`` a Go decoder would take for one of ``host_fields``, sorted."""
    folded = {go_fold(f) for f in host_fields}
    return sorted(k for k in keys if go_fold(k) in folded)


def strict_json(value: Any, what: str, capability: str) -> Any:
    """``value`` round-tripped through strict UTF-8 JSON text, or ``invalid_input`` saying why."""
    hint = (
        f"pass {'a dict of ' if what == 'extra' else ''}plain dicts, lists, strings, numbers, "
        "booleans and None; nothing was run"
    )
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(
            f"{what} is not JSON-serializable as strict JSON for {capability} ({exc}); {hint}"
        ) from exc
    except RecursionError as exc:
        raise InvalidInput(f"{what} for {capability} is nested too deeply; {hint}") from exc
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise InvalidInput(
            f"{what} is not JSON-serializable as strict UTF-8 JSON for {capability}: it holds "
            f"{bad!r}, a lone surrogate; {hint} (decode bytes with errors='replace' first)"
        ) from exc
    return json.loads(encoded)


def check_bounds(values: Mapping[str, int], limits: Mapping[str, int]) -> None:
    """Each bound positive and at most its limit; otherwise ``invalid_input`` naming it."""
    for name, value in values.items():
        limit = limits[name]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InvalidInput(
                f"{name} must be a positive integer, got {value!r}; pass a positive "
                f"{name}= to invoke, or leave it None to use Policy.{name}"
            )
        if value > limit:
            raise InvalidInput(
                f"{name}={value} is above this host's bound of {limit} for {name}; nothing "
                f"was run. Pass at most {limit}, or raise the bound in the Policy"
            )


def canonical_path(path: str | os.PathLike[str]) -> str:
    """The canonical absolute form of ``path`` (links resolved), as roots are sent."""
    return os.path.realpath(os.fspath(path))
