"""Boundary inputs for the module checker: the edge cases of a request schema, tried first.

Schemas and code disagree most at their edges, which random examples reach rarely. Each
boundary input is a base value (the schema's valid ``default``, else a small value built from
its keywords) with one thing changed (a number at its ``maximum``, a property absent, astral
text), so a failure points at one keyword. Every candidate is judged by the host's own
validator (:func:`murmur_nb._schemas.schemas.validator_for`, within the budgets of
:func:`murmur_nb._schemas.bounded.check`); one it refuses is dropped. Bounded by
:data:`MAX_DEPTH`, :data:`MAX_SIZE` and :data:`MAX_CANDIDATES`; at most ``limit`` inputs are
kept, round-robin over the kinds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from murmur_nb._schemas.bounded import check
from murmur_nb._schemas.schemas import jsonschema_module, validator_for

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["BOUNDARY_BUDGET_S", "KINDS", "MAX_BOUNDARIES", "Boundary", "boundary_examples"]

#: The kinds of boundary input, in the order the report lists them.
KINDS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "big-integer", "minLength", "maxLength", "empty", "non-ascii", "astral",
    "minItems", "maxItems", "enum", "const", "boolean", "required-only", "all-properties",
    "branch",
)  # fmt: skip
#: Boundary inputs kept per capability by default.
MAX_BOUNDARIES = 200
#: Seconds a capability's calls may take by default (the checker's time budget).
BOUNDARY_BUDGET_S = 10.0
#: Levels of nested objects and arrays whose edges are derived.
MAX_DEPTH = 4
#: The longest string (characters) or array (items) built for a length bound.
MAX_SIZE = 4096
#: Candidates judged per schema (most are cheap; the cap bounds a huge schema's cost).
MAX_CANDIDATES = 2000
#: ``enum`` values tried per enum.
MAX_ENUM = 64

_NONE: Any = object()  # no base value could be derived
_BIG = 2**53 + 1  # the first integer a double cannot hold


@dataclass(frozen=True, slots=True)
class Boundary:
    """One boundary input: its ``kind`` (a :data:`KINDS` entry), where in the input the
    edge is (a JSON path such as ``/n``, empty for the input itself) and the input."""

    kind: str
    where: str
    value: Any


def boundary_examples(schema: Any, *, limit: int = MAX_BOUNDARIES) -> list[Boundary]:
    """The boundary inputs of ``schema`` that it accepts, at most ``limit``, always the same.

    Examples
    --------
    >>> [b.value for b in boundary_examples({"type": "integer", "minimum": 0, "maximum": 10})]
    [0, 10]
    >>> [b.value for b in boundary_examples({"type": "number", "exclusiveMinimum": 0})]
    [5e-324, 9007199254740993]
    """
    if not isinstance(schema, dict) or limit <= 0:
        return []
    try:
        validator = validator_for(schema)
    except jsonschema_module().SchemaError:
        return []
    deriver = _Deriver(validator, schema)
    by_kind: dict[str, list[Boundary]] = {}
    seen: set[str] = set()
    for count, (kind, where, value) in enumerate(deriver.edges(schema, "", 0)):
        if count >= MAX_CANDIDATES:
            break
        key = _key(value)
        if key in seen:
            continue
        seen.add(key)
        if deriver.valid(schema, value):
            by_kind.setdefault(kind, []).append(Boundary(kind, where, value))
    return _round_robin(by_kind, limit)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr) + type(value).__name__


def _round_robin(by_kind: dict[str, list[Boundary]], limit: int) -> list[Boundary]:
    """Up to ``limit`` boundaries, one of each kind in turn (kinds in :data:`KINDS` order)."""
    queues = [by_kind[k] for k in KINDS if k in by_kind]
    out: list[Boundary] = []
    index = 0
    while len(out) < limit and any(index < len(q) for q in queues):
        out.extend(q[index] for q in queues if index < len(q))
        index += 1
    return out[:limit]


_Edge = tuple[str, str, Any]


class _Deriver:
    """Derives candidate values for one schema (its ``$ref`` resolved against the root)."""

    def __init__(self, validator: Validator, root: dict[str, Any]) -> None:
        self.validator = validator
        self.root = root

    def valid(self, schema: Any, value: Any) -> bool:
        if value is _NONE:
            return False
        sub = self.validator if schema is self.root else self.validator.evolve(schema=schema)
        return not check(sub, value, limit=1)

    def resolve(self, schema: Any, depth: int = 0) -> Any:
        """``schema`` with a local ``$ref`` (``#/$defs/x``) followed, and ``allOf`` merged."""
        if not isinstance(schema, Mapping):
            return {} if schema is True else schema
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and depth < MAX_DEPTH:
            target: Any = self.root
            for raw in [p for p in ref[1:].split("/") if p]:
                part = raw.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return _merge(self.resolve(target, depth + 1), rest) if target is not None else rest
        if isinstance(schema.get("allOf"), list):
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged = _merge(merged, self.resolve(part, depth + 1))
            return merged
        return dict(schema)

    # -- base values ----------------------------------------------------------------------

    def base(self, schema: Any, depth: int) -> Any:
        """A small value ``schema`` accepts (its default when valid), or ``_NONE``."""
        s = self.resolve(schema)
        if not isinstance(s, dict):
            return _NONE
        for candidate in self.base_candidates(s, depth):
            if self.valid(s, candidate):
                return candidate
        return _NONE

    def base_candidates(self, s: dict[str, Any], depth: int) -> Iterator[Any]:
        if "default" in s:
            yield s["default"]
        if "const" in s:
            yield s["const"]
        if isinstance(s.get("enum"), list) and s["enum"]:
            yield s["enum"][0]
        for key in ("oneOf", "anyOf"):
            for branch in s.get(key) or []:
                rest = {k: v for k, v in s.items() if k != key}
                yield self.base(_merge(rest, self.resolve(branch)), depth + 1)
        for kind in _types(s):
            yield self.typed_base(s, kind, depth)

    def typed_base(self, s: dict[str, Any], kind: str, depth: int) -> Any:
        if kind in {"integer", "number"}:
            low, high = _bounds(s, kind == "integer")
            value = 0 if low is None else low
            value = value if high is None else min(value, high)
            return _multiple_near(value, s.get("multipleOf"), up=True) if value is not None else 0
        if kind == "string":
            return "a" * min(_int(s.get("minLength"), 0), MAX_SIZE)
        if kind in {"array", "object"} and depth >= MAX_DEPTH:
            return _NONE
        if kind == "array":
            item = self.base(s.get("items", {}), depth + 1)
            size = min(_int(s.get("minItems"), 0), MAX_SIZE)
            return [] if size == 0 else ([item] * size if item is not _NONE else _NONE)
        if kind == "object":
            return self.object_base(s, depth, everything=False)
        return {"boolean": False, "null": None}.get(kind, _NONE)

    def object_base(self, s: dict[str, Any], depth: int, *, everything: bool) -> Any:
        """The required properties' bases (and the optional ones' with ``everything``)."""
        props = _properties(s)
        required = [r for r in s.get("required") or [] if isinstance(r, str)]
        names = list(dict.fromkeys([*required, *(props if everything else [])]))
        out: dict[str, Any] = {}
        for name in names:
            value = self.base(props.get(name, {}), depth + 1)
            if value is _NONE:
                if name in required:
                    return _NONE
                continue
            out[name] = value
        return out

    # -- edges ----------------------------------------------------------------------------

    def edges(self, schema: Any, where: str, depth: int) -> Iterator[_Edge]:
        """Every candidate boundary value of ``schema`` (unjudged), with its kind."""
        s = self.resolve(schema)
        if not isinstance(s, dict) or depth > MAX_DEPTH:
            return
        if "const" in s:
            yield "const", where, s["const"]
        enum = s.get("enum")
        for value in enum[:MAX_ENUM] if isinstance(enum, list) else []:
            yield "enum", where, value
        for key in ("oneOf", "anyOf"):
            for branch in s.get(key) or []:
                merged = _merge({k: v for k, v in s.items() if k != key}, self.resolve(branch))
                yield "branch", where, self.base(merged, depth + 1)
                yield from self.edges(merged, where, depth + 1)
        for kind in _types(s):
            if kind in {"integer", "number"}:
                yield from ((k, where, v) for k, v in _number_edges(s, kind == "integer"))
            elif kind == "string":
                yield from ((k, where, v) for k, v in _string_edges(s))
            elif kind == "boolean":
                yield from (("boolean", where, v) for v in (False, True))
            elif kind == "array":
                yield from self.array_edges(s, where, depth)
            elif kind == "object":
                yield from self.object_edges(s, where, depth)

    def array_edges(self, s: dict[str, Any], where: str, depth: int) -> Iterator[_Edge]:
        items = s.get("items", {})
        item = self.base(items, depth + 1)
        low = min(_int(s.get("minItems"), 0), MAX_SIZE)
        high = s.get("maxItems")
        if low == 0:
            yield "empty", where, []
        if item is _NONE:
            return
        nested = list(self.edges(items, where + "/0", depth + 1))
        distinct = list({_key(v): v for _, _, v in [("", "", item), *nested]}.values())
        for kind, size in (("minItems", low), ("maxItems", high)):
            if isinstance(size, int) and 0 < size <= MAX_SIZE:
                yield kind, where, [item] * size
                if s.get("uniqueItems") is True and len(distinct) >= size:
                    yield kind, where, distinct[:size]
        padding = [item] * max(low - 1, 0)
        for kind, inner, value in nested:
            yield kind, inner, [value, *padding]

    def object_edges(self, s: dict[str, Any], where: str, depth: int) -> Iterator[_Edge]:
        props = _properties(s)
        least = self.object_base(s, depth, everything=False)
        full = self.object_base(s, depth, everything=True)
        if least is _NONE or full is _NONE:
            return
        for name, sub in props.items():  # the most specific kinds first: a value found
            for kind, inner, value in self.edges(sub, f"{where}/{name}", depth + 1):
                yield kind, inner, {**full, name: value}  # twice keeps its first kind
        yield ("empty" if least == {} else "required-only"), where, least
        yield "all-properties", where, full


def _properties(s: dict[str, Any]) -> Mapping[str, Any]:
    props = s.get("properties")
    return props if isinstance(props, Mapping) else {}


def _merge(one: Any, two: Any) -> dict[str, Any]:
    """Two schemas as one (shallow; ``properties`` and ``required`` united): a guess the
    validator judges, never trusted."""
    a = dict(one) if isinstance(one, Mapping) else {}
    b = dict(two) if isinstance(two, Mapping) else {}
    merged = {**a, **b}
    if isinstance(a.get("properties"), Mapping) and isinstance(b.get("properties"), Mapping):
        merged["properties"] = {**a["properties"], **b["properties"]}
    if isinstance(a.get("required"), list) and isinstance(b.get("required"), list):
        merged["required"] = list(dict.fromkeys([*a["required"], *b["required"]]))
    return merged


def _types(s: dict[str, Any]) -> list[str]:
    kind = s.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return [
        t for t, keys in (
            ("object", ("properties", "required", "additionalProperties")),
            ("array", ("items", "minItems", "maxItems", "prefixItems")),
            ("string", ("minLength", "maxLength", "pattern")),
            ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                        "multipleOf")),
        ) if any(k in s for k in keys)
    ]  # fmt: skip


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _num(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _bounds(s: dict[str, Any], integer: bool) -> tuple[Any, Any]:
    """The least and greatest values the bounds allow (``None`` when unbounded)."""
    low, high = _num(s.get("minimum")), _num(s.get("maximum"))
    ex_low, ex_high = _num(s.get("exclusiveMinimum")), _num(s.get("exclusiveMaximum"))
    if integer:
        low = None if low is None else math.ceil(low)
        high = None if high is None else math.floor(high)
        if ex_low is not None:
            low = max(low if low is not None else -math.inf, math.floor(ex_low) + 1)
        if ex_high is not None:
            high = min(high if high is not None else math.inf, math.ceil(ex_high) - 1)
    else:
        if ex_low is not None:
            low = max(low if low is not None else -math.inf, math.nextafter(ex_low, math.inf))
        if ex_high is not None:
            high = min(high if high is not None else math.inf,
                       math.nextafter(ex_high, -math.inf))  # fmt: skip
    return low, high


def _multiple_near(value: Any, step: Any, *, up: bool) -> Any:
    """The multiple of ``step`` nearest ``value`` (at or above with ``up``, else below)."""
    step = _num(step)
    if not step or step <= 0:
        return value
    if isinstance(step, int) and isinstance(value, int):
        return -((-value) // step) * step if up else (value // step) * step
    quotient = value / step
    count = math.ceil(quotient - 1e-9) if up else math.floor(quotient + 1e-9)
    found = count * step
    return int(found) if isinstance(value, int) and float(found).is_integer() else found


def _number_edges(s: dict[str, Any], integer: bool) -> Iterator[tuple[str, Any]]:
    """Each bound at its edge; ``multipleOf`` at the bounds; 2**53+1 and its negative.

    The edge of an inclusive bound is the bound itself; of an exclusive one, the first value
    inside it (the next integer, or the next double). One step further in is an ordinary
    value: a comparison written the wrong way round (``<`` for ``<=``) breaks at the edge,
    and the random examples cover the inside.
    """
    for key, inward in (("minimum", 1), ("maximum", -1)):
        bound = _num(s.get(key))
        if bound is not None:
            edge = math.ceil(bound) if inward > 0 else math.floor(bound)
            yield key, edge if integer else bound
    for key, inward in (("exclusiveMinimum", 1), ("exclusiveMaximum", -1)):
        bound = _num(s.get(key))
        if bound is not None and integer:
            yield key, math.floor(bound) + 1 if inward > 0 else math.ceil(bound) - 1
        elif bound is not None:
            yield key, math.nextafter(bound, inward * math.inf)
    if _num(s.get("multipleOf")):
        low, high = _bounds(s, integer)
        if low is None and high is None:
            yield "multipleOf", s["multipleOf"]
            yield "multipleOf", -s["multipleOf"]
        if low is not None:
            yield "multipleOf", _multiple_near(low, s["multipleOf"], up=True)
        if high is not None:
            yield "multipleOf", _multiple_near(high, s["multipleOf"], up=False)
    yield "big-integer", _BIG
    yield "big-integer", -_BIG


def _string_edges(s: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Lengths at their bounds, the empty string, non-ASCII and astral text."""
    low = min(_int(s.get("minLength"), 0), MAX_SIZE)
    high = _int(s.get("maxLength"), -1)
    if low == 0:
        yield "empty", ""
    else:
        yield "minLength", "a" * low
    if 0 < high <= MAX_SIZE:
        yield "maxLength", "a" * high
    # one string each, at maxLength when there is one: a module that counts bytes or UTF-16
    # code units where the schema counts characters breaks exactly there
    size = high if 0 < high <= MAX_SIZE else max(low, 1)
    for kind, text in (("non-ascii", "é日Ω"), ("astral", "\U0001f600\U00020000")):
        yield kind, (text * size)[:size]
