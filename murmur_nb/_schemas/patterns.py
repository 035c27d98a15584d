"""JSON Schema ``pattern`` and ``patternProperties`` evaluated in linear time (RE2).

A module controls both a schema and the data checked against it, and Python's ``re``
backtracks (``^(a+)+$`` doubles with each character). :func:`linear_time_validator` makes a
``jsonschema`` validator class match ``pattern``, ``patternProperties`` and
``additionalProperties`` with RE2; the one validator factory
(:func:`murmur_nb._schemas.schemas.validator_class`) applies it everywhere. :func:`to_re2`
rewrites ECMA-262 escapes that have an RE2 form (``\\uXXXX``, ``\\cX``, Unicode property
names); what RE2 cannot express (back-references, look-around) is never run by ``re``:
:func:`pattern_problems` refuses it at describe with what to write instead, and at validation
it is an error. ``unevaluatedProperties`` finds evaluated properties through RE2 as well, each
search charged to the same budget.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from murmur_nb._schemas.bounded import charge, counted_keywords, unique_items
from murmur_nb._schemas.ecma_regex import EcmaRefused, to_re2

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [
    "PatternRefused",
    "compile_pattern",
    "linear_time_validator",
    "pattern_problems",
]

#: Memory one compiled pattern may take (RE2 refuses larger ones): 8 MiB, RE2's default.
MAX_PATTERN_MEMORY = 8 << 20


class PatternRefused(ValueError):
    """A pattern the linear-time engine cannot evaluate; the message says why."""


@functools.lru_cache(maxsize=2048)
def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2, or :class:`PatternRefused` saying why it cannot be."""
    import re2  # noqa: PLC0415 - lazy: only schemas with patterns need it

    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.log_errors = False
    options.never_capture = True  # a yes/no answer lets RE2 run its DFA
    try:
        translated = to_re2(pattern)
    except EcmaRefused as exc:
        raise PatternRefused(str(exc)) from None
    try:
        return re2.compile(translated, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise PatternRefused(
            f"pattern {pattern!r} cannot be evaluated by the host's linear-time regex engine "
            f"(RE2: {reason}); write it with the ECMA-262 syntax RE2 shares (no "
            "back-references, no look-around)"
        ) from None


def _search(pattern: str, text: str) -> bool:
    compiled = compile_pattern(pattern)
    charge(text, pattern)
    return compiled.search(text) is not None


def _schemas(schema: Any) -> Iterator[Mapping[str, Any]]:
    """Every (sub)schema object in ``schema``, without recursion."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, Mapping):
            yield node
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def pattern_problems(schema: Any) -> list[str]:
    """Why each pattern of ``schema`` cannot be evaluated in linear time; empty when all can."""
    problems: list[str] = []
    found: list[Any] = []
    unevaluated = keyed = False
    for node in _schemas(schema):
        if isinstance(node.get("pattern"), str):
            found.append(node["pattern"])
        props = node.get("patternProperties")
        if isinstance(props, Mapping):
            found.extend(props)
            keyed = True
        unevaluated = unevaluated or "unevaluatedProperties" in node
    draft = schema.get("$schema", "") if isinstance(schema, Mapping) else ""
    if unevaluated and keyed and "2019-09" in str(draft):
        problems.append(
            "unevaluatedProperties beside patternProperties is supported in Draft 2020-12 "
            "(the default), not in Draft 2019-09, whose evaluation would run those patterns "
            "with a backtracking regex engine; drop $schema or use the 2020-12 URI"
        )
    for pattern in dict.fromkeys(found):
        try:
            compile_pattern(pattern)
        except PatternRefused as exc:
            problems.append(str(exc))
    return problems


def _pattern(validator: Validator, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError  # noqa: PLC0415

    if not validator.is_type(instance, "string"):
        return
    try:
        matched = _search(pattern, instance)
    except PatternRefused as exc:
        yield ValidationError(str(exc))
        return
    if not matched:
        shown = (
            repr(instance)
            if len(instance) <= 80
            else f"{instance[:80]!r}... ({len(instance)} characters)"
        )
        yield ValidationError(f"{shown} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, props: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError  # noqa: PLC0415

    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in props.items():
        try:
            compiled = compile_pattern(pattern)
        except PatternRefused as exc:
            yield ValidationError(str(exc))
            continue
        for key, value in instance.items():
            charge(key, pattern)
            if compiled.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(validator: Any, aP: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError  # noqa: PLC0415

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    try:
        compiled = [(p, compile_pattern(p)) for p in patterns]
    except PatternRefused as exc:
        yield ValidationError(str(exc))
        return
    extras = [
        key for key in instance if key not in properties and not _any_match(compiled, key)
    ]
    if validator.is_type(aP, "object"):
        for key in extras:
            yield from validator.descend(instance[key], aP, path=key)
    elif aP is False and extras:
        shown = ", ".join(repr(k) for k in sorted(extras)[:20])
        more = f" (+{len(extras) - 20} more)" if len(extras) > 20 else ""
        if patterns:
            listed = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{shown}{more} do not match any of the regexes: {listed}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({shown}{more} {verb} unexpected)"
            )


def _any_match(compiled: list[tuple[str, Any]], key: str) -> bool:
    for pattern, regex in compiled:
        charge(key, pattern)
        if regex.search(key) is not None:
            return True
    return False


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any) -> set[str]:
    """The properties of ``instance`` that ``schema`` evaluates, as ``jsonschema`` decides
    them for ``unevaluatedProperties`` (its ``find_evaluated_property_keys_by_schema``), with
    ``patternProperties`` matched by RE2 within the check's budget."""
    if not isinstance(schema, Mapping):
        return set()
    keys: set[str] = set()
    for keyword in ("$ref", "$dynamicRef"):
        if isinstance(schema.get(keyword), str):
            resolved = validator._resolver.lookup(schema[keyword])
            inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys |= _evaluated_keys(inner, instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (sub := schema.get(keyword)) is not None:
            keys |= {k for k, v in instance.items() if _valid(validator.descend(v, sub))}
    patterns = schema.get("patternProperties")
    if isinstance(patterns, Mapping):
        compiled = [(p, compile_pattern(p)) for p in patterns]
        keys |= {k for k in instance if _any_match(compiled, k)}
    return keys | _applied_keys(validator, instance, schema)


def _applied_keys(validator: Any, instance: dict[str, Any], schema: Mapping[str, Any]) -> set[str]:
    """The evaluated properties contributed by ``schema``'s in-place applicators."""
    keys: set[str] = set()
    for name, sub in (schema.get("dependentSchemas") or {}).items():
        if name in instance:
            keys |= _evaluated_keys(validator, instance, sub)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(keyword) or []:
            if _valid(validator.descend(instance, sub)):
                keys |= _evaluated_keys(validator, instance, sub)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            keys |= _evaluated_keys(validator, instance, schema.get("then"))
        else:
            keys |= _evaluated_keys(validator, instance, schema.get("else"))
    return keys


def _valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    """``unevaluatedProperties`` with ``patternProperties`` seen through RE2."""
    from jsonschema.exceptions import ValidationError  # noqa: PLC0415

    if not validator.is_type(instance, "object"):
        return
    try:
        evaluated = _evaluated_keys(validator, instance, schema)
    except PatternRefused as exc:
        yield ValidationError(str(exc))
        return
    bad = [
        key for key in instance if key not in evaluated
        and not _valid(validator.descend(instance[key], unevaluated, path=key,
                                         schema_path=key))
    ]  # fmt: skip
    if not bad:
        return
    shown = ", ".join(repr(k) for k in sorted(bad, key=str)[:20])
    verb = "was" if len(bad) == 1 else "were"
    if unevaluated is False:
        yield ValidationError(f"Unevaluated properties are not allowed ({shown} {verb} unexpected)")
    else:
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({shown} {verb} unevaluated and invalid)"
        )


def _is_2020_keyword(function: Any) -> bool:
    """Whether ``function`` is jsonschema's 2020-12 ``unevaluatedProperties`` (the one
    :func:`_evaluated_keys` reproduces; Draft 2019-09 decides evaluated keys differently)."""
    from jsonschema import _keywords  # noqa: PLC0415

    return function is getattr(_keywords, "unevaluatedProperties", None)


@functools.cache
def linear_time_validator(cls: type[Validator]) -> type[Validator]:
    """``cls`` with ``pattern``, ``patternProperties``, ``additionalProperties`` and
    ``unevaluatedProperties`` on RE2 (each search charged to the validation's budget,
    :mod:`.bounded`), and ``uniqueItems`` in linear time."""
    from jsonschema import validators  # noqa: PLC0415

    keywords: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional,
        "uniqueItems": unique_items,
    }
    if _is_2020_keyword(cls.VALIDATORS.get("unevaluatedProperties")):
        keywords["unevaluatedProperties"] = _unevaluated_properties
    counted = counted_keywords({**cls.VALIDATORS, **keywords})
    extended: type[Validator] = validators.extend(cls, counted)  # type: ignore[no-untyped-call]
    return extended
