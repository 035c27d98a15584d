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

Invalid examples are derived from the schema by hand, one per way an input can be wrong that a
module must survive: not an object at all, a required property missing, a property of the
wrong type. They are only sent to a module by the checker, never by a normal invocation.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from murmur_nb._exceptions import MissingDependency
from murmur_nb._rules import cache_dir

__all__ = ["invalid_examples", "valid_examples"]


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


def valid_examples(schema: Any, *, count: int, seed: int) -> list[Any]:
    """Up to ``count`` distinct inputs that match ``schema``, the same for the same seed.

    Raises
    ------
    MissingDependency
        ``hypothesis-jsonschema`` is not installed.
    """
    found: dict[str, Any] = {}

    def keep(value: Any) -> None:
        key = json.dumps(value, sort_keys=True)
        if len(found) < count:
            found.setdefault(key, value)

    with hypothesis_storage():  # hypothesis writes its character map as it imports regexes
        try:
            import hypothesis  # noqa: PLC0415 - only the checker needs hypothesis
            from hypothesis_jsonschema import from_schema  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - a declared dependency of [check]
            raise MissingDependency(
                "hypothesis-jsonschema", "check", "the module checker's input generation"
            ) from exc
        strategy = from_schema(schema if isinstance(schema, dict | bool) else {})
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
