"""Inputs for the module checker: examples drawn from a request schema, and broken ones.

Valid examples come from ``hypothesis-jsonschema`` under a fixed seed, so a report is
reproducible: the same schema, seed and count give the same inputs. Hypothesis is driven
through ``@given`` with only the *generate* phase (no shrinking, no example database), which is
how a library may use it outside a test run without touching the user's ``.hypothesis`` folder.

Invalid examples are derived from the schema by hand, one per way an input can be wrong that a
module must survive: not an object at all, a required property missing, a property of the
wrong type. They are only sent to a module by the checker, never by a normal invocation.
"""

from __future__ import annotations

import json
from typing import Any

from murmur_nb._exceptions import MissingDependency

__all__ = ["invalid_examples", "valid_examples"]


def valid_examples(schema: Any, *, count: int, seed: int) -> list[Any]:
    """Up to ``count`` distinct inputs that match ``schema``, the same for the same seed.

    Raises
    ------
    MissingDependency
        ``hypothesis-jsonschema`` is not installed.
    """
    try:
        import hypothesis  # noqa: PLC0415 - only the checker needs hypothesis
        from hypothesis_jsonschema import from_schema  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - a declared dependency of [check]
        raise MissingDependency(
            "hypothesis-jsonschema", "check", "the module checker's input generation"
        ) from exc
    strategy = from_schema(schema if isinstance(schema, dict | bool) else {})
    found: dict[str, Any] = {}

    def keep(value: Any) -> None:
        key = json.dumps(value, sort_keys=True)
        if len(found) < count:
            found.setdefault(key, value)

    runner = hypothesis.given(strategy)(keep)
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
    runner()
    return list(found.values())[:count]


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
