"""Inputs for the module checker: examples drawn from a request schema, and broken ones.

Valid examples come from ``hypothesis-jsonschema`` under a fixed seed, so a report is
reproducible: the same schema, seed and count give the same inputs. Hypothesis is driven
through ``@given`` with only the *generate* phase (no shrinking, no example database), which is
how a library may use it outside a test run. Hypothesis still writes caches (the constants of
local modules, a character map) under its storage folder, by default ``.hypothesis`` in the
working folder: the checked module's own folder when ``murmur-nb check .`` runs there, which
would change the folder under check. While the checker generates, that storage is
``<murmur-nb cache>/hypothesis`` (:func:`hypothesis_storage`), and the user's setting is put
back afterwards.

A schema is untrusted input to the generator, so generating never raises for one:
:func:`valid_examples` returns what it found with why there is no more (:class:`Examples`).
A schema no value satisfies (``minLength`` above ``maxLength``, an empty ``enum``, a
``minimum`` above ``maximum``, in the input or a required property of it) is said to be so,
with where, before hypothesis is asked (its "unsatisfiable" is also what it says of a schema
it merely cannot follow); a schema it cannot follow is a ``problem`` in words, not an
exception.

Patterns are ECMA-262 and run by RE2 (:mod:`murmur_nb._schemas.patterns`); hypothesis reads
them with Python's ``re``, which knows no ``\\p{...}``. :func:`python_pattern` rewrites one
for the generator: the host's own rewrite to RE2 first
(:func:`~murmur_nb._schemas.ecma_regex.to_re2`, so a pattern the host refuses is refused here
too), then each Unicode property as ranges RE2 gives it, ``\\x{...}`` as ``\\U...``, and
``\\d``/``\\w`` as ECMA's ASCII classes (a property as a sample of its ranges: the generator
spells a class out character by character). Where a schema has patterns, every generated value
is judged by the host's validator before it is kept, so a corner where ``re`` and RE2 differ
costs a value, never a wrong input.

Invalid examples are derived from the schema by hand, one per way an input can be wrong that a
module must survive: not an object at all, a required property missing, a property of the
wrong type. They are only sent to a module by the checker, never by a normal invocation.
"""

from __future__ import annotations

import contextlib
import functools
import json
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from murmur_nb._exceptions import MissingDependency
from murmur_nb._rules import cache_dir
from murmur_nb._schemas.bounded import check
from murmur_nb._schemas.ecma_regex import to_re2
from murmur_nb._schemas.schemas import validator_for

__all__ = ["Examples", "invalid_examples", "python_pattern", "unsatisfiable", "valid_examples"]

#: How much of a schema a message quotes.
_SHOWN_CHARS = 160


@dataclass(frozen=True, slots=True)
class Examples:
    """What :func:`valid_examples` found, and why there is no more.

    ``unsatisfiable`` says where no value can satisfy the schema (``/text: {...} admits no
    value``); ``problem`` why the generator gave fewer values than asked (it cannot follow
    the schema: a pattern Python's ``re`` reads otherwise, a keyword it does not know).
    Both are empty when it gave them all.
    """

    values: list[Any]
    unsatisfiable: str = ""
    problem: str = ""


@contextlib.contextmanager
def hypothesis_storage() -> Iterator[None]:
    """Hypothesis's storage folder is murmur-nb's own while the block runs, never the working
    folder's ``.hypothesis``; the folder it had before is put back. Without hypothesis, the
    block just runs."""
    try:
        from hypothesis.configuration import (  # noqa: PLC0415 - only the checker needs it
            set_hypothesis_home_dir,
            storage_directory,
        )
    except ImportError:  # pragma: no cover - a declared dependency of [check]
        yield
        return
    before = storage_directory(intent_to_write=False).home_directory
    set_hypothesis_home_dir(cache_dir() / "hypothesis")
    try:
        yield
    finally:
        set_hypothesis_home_dir(before)


def valid_examples(schema: Any, *, count: int, seed: int) -> Examples:
    """Up to ``count`` distinct inputs that match ``schema``, the same for the same seed, and
    why there are fewer (:class:`Examples`); never raises for a schema.

    Raises
    ------
    MissingDependency
        ``hypothesis-jsonschema`` is not installed.
    """
    schema = schema if isinstance(schema, dict | bool) else {}
    with hypothesis_storage():  # importing hypothesis (its proof below too) writes there
        none = unsatisfiable(schema)
    if none is not None:
        return Examples([], unsatisfiable=none)
    generated, patterned = generation_schema(schema)
    judge = _host_judge(schema) if patterned else None
    found: dict[str, Any] = {}
    drawn = 0

    def keep(value: Any) -> None:
        nonlocal drawn
        drawn += 1
        if len(found) < count and (judge is None or judge(value)):
            found.setdefault(json.dumps(value, sort_keys=True), value)

    with hypothesis_storage(), warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")  # hypothesis-jsonschema says why it gave up as one
        problem = _run_generator(generated, keep, count=count, seed=seed)
    if not found and not problem:
        problem = _why_none(said, drawn, patterned)
    return Examples(list(found.values())[:count], problem=problem)


def _run_generator(schema: Any, keep: Callable[[Any], None], *, count: int, seed: int) -> str:
    """Feed ``keep`` the values hypothesis draws from ``schema``; what stopped it, in words."""
    try:
        import hypothesis  # noqa: PLC0415 - only the checker needs hypothesis
        from hypothesis_jsonschema import from_schema  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - a declared dependency of [check]
        raise MissingDependency(
            "hypothesis-jsonschema", "check", "the module checker's input generation"
        ) from exc
    runner = hypothesis.given(from_schema(schema))(keep)
    runner = hypothesis.seed(seed)(runner)
    runner = hypothesis.settings(
        max_examples=max(count * 3, 1),
        database=None,
        deadline=None,
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
        derandomize=False,
        print_blob=False,
    )(runner)
    try:
        runner()
    except Exception as exc:  # an untrusted schema the generator cannot follow
        # (Unsatisfiable, InvalidArgument, or what from_schema raised for it): said, not raised
        return f"{type(exc).__name__}: {_first_line(str(exc))}"
    return ""


def _why_none(said: list[warnings.WarningMessage], drawn: int, patterned: bool) -> str:
    """Why the generator ran to its end without a value (fewer than asked is no problem: a
    schema may allow fewer distinct values)."""
    for warning in said:
        if "pattern" in str(warning.message):
            return _first_line(str(warning.message))
    if patterned and drawn:
        return (f"none of the {drawn} values generated matched the schema's patterns as the "
                "host reads them (RE2)")  # fmt: skip
    return "" if drawn else "the generator drew no value"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def _host_judge(schema: Any) -> Callable[[Any], bool] | None:
    """Whether the host's validator accepts a value (``None``: no validator for ``schema``)."""
    try:
        validator = validator_for(schema)
    except Exception:  # a schema the host refuses was refused at describe
        return None
    return lambda value: not check(validator, value, limit=1)


def unsatisfiable(schema: Any, where: str = "") -> str | None:
    """Where no value can satisfy ``schema`` and what admits none (``/text: {...} admits no
    value``), looking into the required properties of an object; ``None`` when a value may.

    Proven by crossed length bounds, or by ``hypothesis-jsonschema``'s canonical form
    (contradictory bounds, an empty ``enum``, types that exclude each other); ``None`` when
    neither can tell.

    >>> unsatisfiable({"type": "object", "required": ["n"],
    ...                "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}}})
    '/n: {"type": "integer", "minimum": 5, "maximum": 1} admits no value'
    """
    if schema is False:
        return f"{where or '/'}: false admits no value"
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if schema.get("type") == "object" and isinstance(properties, dict):
        for name in schema.get("required") or []:
            if isinstance(name, str) and name in properties:
                found = unsatisfiable(properties[name], f"{where}/{name}")
                if found is not None:
                    return found
    try:
        from hypothesis_jsonschema._canonicalise import (  # noqa: PLC0415 - the generator's own proof
            FALSEY,
            canonicalish,
        )

        never = _crossed(schema) or canonicalish(schema) == FALSEY
    except Exception:  # it cannot tell: the generator will say what it can
        return None
    if not never:
        return None
    shown = json.dumps(schema, ensure_ascii=False)
    shown = shown if len(shown) <= _SHOWN_CHARS else shown[:_SHOWN_CHARS] + "..."
    return f"{where or '(the input)'}: {shown} admits no value"


#: Length bounds by the type they bound (canonicalish leaves them crossed).
_LENGTHS = (("string", "minLength", "maxLength"), ("array", "minItems", "maxItems"),
            ("object", "minProperties", "maxProperties"))  # fmt: skip


def _crossed(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` takes one type only and crosses that type's length bounds."""
    for kind, low, high in _LENGTHS:
        least, most = schema.get(low), schema.get(high)
        if schema.get("type") in (kind, [kind]) and isinstance(least, int) \
                and isinstance(most, int) and least > most:  # fmt: skip
            return True
    return False


#: JSON Schema keywords whose value is a schema, or a list or map of schemas (the names of a
#: map are property names, never rewritten).
_ONE_SCHEMA = frozenset({
    "items", "additionalItems", "additionalProperties", "unevaluatedItems",
    "unevaluatedProperties", "contains", "propertyNames", "not", "if", "then", "else",
})  # fmt: skip
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})


def generation_schema(schema: Any) -> tuple[Any, bool]:
    """``schema`` with every ``pattern`` and ``patternProperties`` name rewritten for the
    generator (:func:`python_pattern`), and whether it has any; a pattern that cannot be
    rewritten is kept (the generator then says it cannot follow it)."""
    if not isinstance(schema, dict):
        return schema, False
    out: dict[str, Any] = {}
    patterned = False
    for key, value in schema.items():
        parts: list[tuple[Any, bool]] = []
        if key == "pattern" and isinstance(value, str):
            out[key], patterned = _rewritten(value), True
            continue
        if key == "patternProperties" and isinstance(value, dict):
            parts = [generation_schema(v) for v in value.values()]
            out[key] = {_rewritten(k): new for k, (new, _) in zip(value, parts, strict=True)}
            patterned = patterned or bool(value)
        elif key in _ONE_SCHEMA and isinstance(value, dict):
            parts = [generation_schema(value)]
            out[key] = parts[0][0]
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            parts = [generation_schema(v) for v in value]
            out[key] = [new for new, _ in parts]
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            parts = [generation_schema(v) for v in value.values()]
            out[key] = {k: new for k, (new, _) in zip(value, parts, strict=True)}
        else:
            out[key] = value
        patterned = patterned or any(has for _, has in parts)
    return out, patterned


def _rewritten(pattern: str) -> str:
    try:
        return python_pattern(pattern)
    except ValueError:  # EcmaRefused: the host refused it at describe already
        return pattern


#: ECMA's ``\d`` and ``\w`` are ASCII (Python's are Unicode): as class contents.
_ASCII_CLASSES = {"d": "0-9", "w": "A-Za-z0-9_"}


def python_pattern(pattern: str) -> str:
    r"""``pattern`` (ECMA-262) as Python's ``re`` reads it, for the generator.

    Raises :class:`ValueError` (:class:`~murmur_nb._schemas.ecma_regex.EcmaRefused`) for a
    pattern the host refuses.

    >>> python_pattern(r"^\u00e9\d+$")
    '^\\U000000e9[0-9]+$'
    >>> python_pattern(r"[\p{Script=Greek}_]")[:22]
    '[\\U00000370-\\U00000373'
    """
    text = to_re2(pattern)
    out: list[str] = []
    i, in_class = 0, False
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            piece, i = _python_escape(text, i, in_class)
            out.append(piece)
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)


def _python_escape(text: str, i: int, in_class: bool) -> tuple[str, int]:
    """The ``re`` text for the RE2 escape at ``text[i]`` and the index after it."""
    kind = text[i + 1]
    if kind == "x" and text.startswith("{", i + 2) and "}" in text[i + 3 :]:
        end = text.index("}", i + 3)
        return f"\\U{int(text[i + 3 : end], 16):08x}", end + 1
    body, after = None, i + 2
    if kind in "pP":
        if text.startswith("{", i + 2) and "}" in text[i + 3 :]:
            end = text.index("}", i + 3)
            name, after = text[i + 3 : end], end + 1
        else:
            name, after = text[i + 2 : i + 3], i + 3
        ranges = property_ranges(name)
        body = _ranges_text(_sampled(_complement(ranges) if kind == "P" else ranges))
    elif kind in _ASCII_CLASSES:
        body = _ASCII_CLASSES[kind]
    elif kind in "DW" and not in_class:
        return f"[^{_ASCII_CLASSES[kind.lower()]}]", after
    if body is None:
        return text[i : i + 2], after
    return (body if in_class else f"[{body}]"), after


#: A property becomes at most this many of its ranges, each cut to this many code points:
#: hypothesis enumerates a class character by character (``\\p{Letter}``'s 140,000 took a
#: second per draw), and a sample from across the property is variety enough.
_SAMPLED_RANGES, _SAMPLED_WIDTH = 48, 16


def _sampled(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Up to :data:`_SAMPLED_RANGES` ranges spread over ``ranges`` (the first included), each
    cut to :data:`_SAMPLED_WIDTH` code points."""
    step = max(1, -(-len(ranges) // _SAMPLED_RANGES))
    return tuple((lo, min(hi, lo + _SAMPLED_WIDTH - 1)) for lo, hi in ranges[::step])


def _ranges_text(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}"
                   for lo, hi in ranges)  # fmt: skip


_SURROGATES = (0xD800, 0xDFFF)


@functools.cache
def _every_character() -> str:
    """Every code point but the surrogates (which UTF-8, and so RE2, cannot hold), in order."""
    low, high = _SURROGATES
    return "".join(chr(c) for c in range(0x110000) if not low <= c <= high)


@functools.lru_cache(maxsize=256)
def property_ranges(name: str) -> tuple[tuple[int, int], ...]:
    """The code point ranges of RE2's ``\\p{name}`` (a general category, a script, ``Any``),
    found by RE2 itself, so a property means here what it means to the host's validator."""
    import re2  # noqa: PLC0415 - lazy: only patterns with properties need it

    low, high = _SURROGATES
    gap = high - low + 1

    def code_point(index: int) -> int:
        return index if index < low else index + gap

    out: list[tuple[int, int]] = []
    for match in re2.compile(f"[\\p{{{name}}}]+").finditer(_every_character()):
        first, last = code_point(match.start()), code_point(match.end() - 1)
        if first < low <= last:  # a run across the surrogates: two ranges
            out += [(first, low - 1), (high + 1, last)]
        else:
            out.append((first, last))
    return tuple(out)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= 0x10FFFF:
        out.append((start, 0x10FFFF))
    return tuple(out)


def invalid_examples(schema: Any, valid: Any) -> list[tuple[str, Any]]:
    """Inputs that break ``schema`` in one way each, with a word on how; derived from ``valid``.

    Only shapes a JSON object schema can refuse are produced: a value that is not an object,
    a required property dropped, a typed property given a value of another type.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return []
    out: list[tuple[str, Any]] = [("not an object (a list)", ["not", "an", "object"])]
    base = valid if isinstance(valid, dict) else {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    if required and required[0] in base:
        broken = dict(base)
        del broken[required[0]]
        out.append((f"required property {required[0]!r} missing", broken))
    for name, prop in (schema.get("properties") or {}).items():
        wrong = _wrong_type_value(prop)
        if wrong is not None:
            out.append((f"property {name!r} of the wrong type", {**base, name: wrong[0]}))
            break
    return out


_WRONG_TYPE: dict[str, Any] = {
    "string": {"not": "a string"},
    "integer": "not a number",
    "number": "not a number",
    "boolean": "not a boolean",
    "object": "not an object",
    "array": "not an array",
}


def _wrong_type_value(prop: Any) -> tuple[Any] | None:
    """A one-tuple holding a value ``prop``'s ``type`` refuses, or ``None`` if none is sure."""
    if not isinstance(prop, dict):
        return None
    kind = prop.get("type")
    if isinstance(kind, str) and kind in _WRONG_TYPE:  # a list of types refuses nothing surely
        return (_WRONG_TYPE[kind],)
    return None
