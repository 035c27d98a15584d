"""JSON Schema ``pattern`` and ``patternProperties`` evaluated in linear time (RE2).

Design notes
------------
* **Why.** A module controls both a schema and the data checked against it. Python's
  ``re`` backtracks, so ``"pattern": "^(a+)+$"`` against 26 ``a`` and a ``!`` takes
  seconds and doubles with each character. RE2 (``google-re2``) matches in time linear in
  the input whatever the pattern, and bounds the memory a compiled pattern may take.
* **Where.** :func:`linear_time_validator` turns a ``jsonschema`` validator class into one
  whose ``pattern``, ``patternProperties`` and ``additionalProperties`` keywords match with
  RE2; the one validator factory (:func:`murmur_nb._schemas.descriptor.schema_validator_class`)
  applies it, so the host's request check, its result check and the form all use it.
* **What RE2 cannot express is refused, never run by ``re``.** Backreferences and
  lookaround have no linear-time evaluation: :func:`pattern_problems` names every such
  pattern when a module is described (the descriptor is refused with the reason), and a
  schema that reaches validation anyway (a form built on a hand-written schema) reports the
  pattern as a validation error instead of evaluating it. ``unevaluatedProperties`` beside
  ``patternProperties`` is refused the same way, because ``jsonschema`` evaluates that pair
  with ``re`` internally. ECMA-262's ``\\uXXXX`` escape is rewritten to RE2's ``\\x{XXXX}``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from murmur_nb._schemas.bounded import charge, counted_keywords, unique_items

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["PatternRefused", "compile_pattern", "linear_time_validator", "pattern_problems"]

#: Memory one compiled pattern may take (RE2 refuses larger ones): 8 MiB, RE2's default.
MAX_PATTERN_MEMORY = 8 << 20

_ECMA_U = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9A-Fa-f]{4})")


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
        return re2.compile(_ECMA_U.sub(r"\1\\x{\2}", pattern), options)
    except re2.error as exc:
        raise PatternRefused(
            f"pattern {pattern!r} cannot be evaluated by the host's linear-time regex engine "
            f"(RE2: {exc}); backreferences and lookaround are not supported, rewrite it "
            "without them"
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
    if unevaluated and keyed:
        problems.append(
            "unevaluatedProperties in a schema that also uses patternProperties is not "
            "supported: jsonschema would evaluate those patterns with a backtracking regex "
            "engine; use additionalProperties instead"
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


@functools.cache
def linear_time_validator(cls: type[Validator]) -> type[Validator]:
    """``cls`` with ``pattern``, ``patternProperties`` and ``additionalProperties`` on RE2
    (each search charged to the validation's budget, :mod:`.bounded`), and ``uniqueItems``
    in linear time."""
    from jsonschema import validators  # noqa: PLC0415

    keywords: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional,
        "uniqueItems": unique_items,
    }
    counted = counted_keywords({**cls.VALIDATORS, **keywords})
    extended: type[Validator] = validators.extend(cls, counted)  # type: ignore[no-untyped-call]
    return extended
