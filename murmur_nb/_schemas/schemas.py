"""The one JSON Schema validator factory: descriptors, the host and the form all use it.

``$schema`` picks the validator class (Draft 2020-12 without one); an unknown one is a
:class:`jsonschema.SchemaError`, so describe refuses it. ``pattern``, ``patternProperties``
and ``additionalProperties`` match with RE2 (:mod:`.patterns`), and the metaschema's
``format: regex`` check (Python's ``re``) is left out: :func:`~.patterns.pattern_problems`
judges every pattern with the engine that runs it. No format checker is attached, so
``format`` never refuses a value, in the form or the host. ``jsonschema`` (about 0.2 s) is
imported on first use.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import threading
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from murmur_nb._schemas.bounded import fast_validator
from murmur_nb._schemas.patterns import linear_time_validator, pattern_problems

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [
    "ValidatorCache",
    "form_validator",
    "jsonschema_module",
    "schema_problem",
    "validator_class",
    "validator_for",
]

_UNKNOWN: Any = object()
_IMPORTING = threading.Lock()  # held while jsonschema_module imports jsonschema


def jsonschema_module() -> ModuleType:
    """``jsonschema``, imported on first use and without ``rfc3987_syntax``.

    ``jsonschema`` imports ``rfc3987_syntax`` when it is installed only to offer an ``iri``
    format checker, and that package builds a parser grammar at import time (over two
    seconds here). No format is ever asserted, so the import is skipped for the duration
    of the ``jsonschema`` import; anyone importing ``rfc3987_syntax`` later gets it.

    Thread-safe: while one thread imports, ``sys.modules`` already holds the partly
    initialized module, so a second caller waits on the lock instead of taking it from there.
    """
    with _IMPORTING:
        if "jsonschema" in sys.modules:
            return sys.modules["jsonschema"]
        blocked = "rfc3987_syntax" not in sys.modules
        if blocked:
            sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
        try:
            import jsonschema  # noqa: PLC0415 - lazy: about 0.2 s

            return jsonschema
        finally:
            if blocked and sys.modules.get("rfc3987_syntax", 0) is None:
                del sys.modules["rfc3987_syntax"]


def validator_class(schema: Any) -> type[Validator]:
    """The jsonschema validator class for ``schema``, chosen by its ``$schema``.

    Draft 2020-12 when ``$schema`` is absent (or ``schema`` is a boolean). An unknown
    ``$schema`` URI raises :class:`jsonschema.SchemaError` instead of silently falling back.
    """
    jsonschema = jsonschema_module()
    if isinstance(schema, Mapping) and "$schema" in schema:
        uri = schema["$schema"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            try:
                cls = jsonschema.validators.validator_for(schema, default=_UNKNOWN)
            except DeprecationWarning:
                cls = _UNKNOWN
        if cls is _UNKNOWN:
            raise jsonschema.SchemaError(f"unknown $schema {uri!r}; use a JSON Schema draft URI")
        return linear_time_validator(cls)
    return linear_time_validator(jsonschema.Draft202012Validator)


def validator_for(schema: Any) -> Validator:
    """A validator of ``schema`` (see :func:`validator_class`); the schema is not re-checked."""
    return validator_class(schema)(schema)


def form_validator(schema: Any) -> Validator:
    """:func:`validator_for` for a form: an unknown ``$schema`` falls back to the default
    draft, so a form still helps (describe has refused such a module anyway)."""
    try:
        return validator_for(schema)
    except jsonschema_module().SchemaError:
        return validator_class({})(schema)


#: :func:`schema_problem`'s verdicts by the SHA-256 of the schema's canonical JSON, most
#: recently used last. Checking a schema against its metaschema takes about 1.5 ms, and a
#: module hands the same schemas to every ``describe`` (each ``map``, each ``describe()``,
#: each call under a standing approval). Canonical JSON tells apart every value a describe
#: can decode (``1``, ``1.0`` and ``true`` are three texts; keys are strings), and key order
#: is no part of a schema's meaning.
_VERDICTS: dict[bytes, str | None] = {}
_VERDICTS_MAX = 512
_VERDICTS_LOCK = threading.Lock()


def schema_problem(schema: Any) -> str | None:
    """``None`` when ``schema`` is a valid JSON Schema document, else why not."""
    if not isinstance(schema, dict | bool):
        return f"a JSON Schema is an object or a boolean, not {type(schema).__name__}"
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return _schema_problem(schema)  # not JSON (a caller's own object): judged, not kept
    key = hashlib.sha256(text.encode("ascii")).digest()  # dumps escaped every non-ASCII
    with _VERDICTS_LOCK:
        if key in _VERDICTS:
            verdict = _VERDICTS.pop(key)
            _VERDICTS[key] = verdict
            return verdict
    verdict = _schema_problem(schema)
    with _VERDICTS_LOCK:
        _VERDICTS[key] = verdict
        while len(_VERDICTS) > _VERDICTS_MAX:
            del _VERDICTS[next(iter(_VERDICTS))]
    return verdict


def _schema_problem(schema: dict[str, Any] | bool) -> str | None:
    schema_error = jsonschema_module().SchemaError
    try:
        cls = validator_class(schema)
        formats = _metaschema_formats(cls)
        cls.check_schema(schema, format_checker=formats)  # type: ignore[arg-type, call-arg]
    except schema_error as exc:
        where = "/".join(str(p) for p in exc.path)
        return f"not a valid JSON Schema: {exc.message}" + (f" (at {where})" if where else "")
    problems = pattern_problems(schema)
    if problems:
        return "; ".join(problems)
    return None


@functools.cache
def _metaschema_formats(cls: type[Validator]) -> Any:
    """The format checker ``cls.check_schema`` uses, without ``regex`` (see above)."""
    meta = jsonschema_module().validators.validator_for(cls.META_SCHEMA, default=cls)
    checker = jsonschema_module().FormatChecker(())
    checker.checkers = {
        name: found for name, found in meta.FORMAT_CHECKER.checkers.items() if name != "regex"
    }
    return checker


class ValidatorCache:
    """Validators kept per ``(descriptor digest, kind, schema id)``: a pinned schema never
    changes under its digest, so building each validator once is safe."""

    def __init__(self) -> None:
        self._validators: dict[tuple[str, str, str], Validator] = {}
        self._fast: dict[tuple[str, str, str], Any] = {}
        self._lock = threading.Lock()

    def fast(self, digest: str, kind: str, schema_id: str, schema: Any) -> Any | None:
        """The fast accept of ``schema`` (:func:`~murmur_nb._schemas.bounded.fast_validator`)."""
        key = (digest, kind, schema_id)
        with self._lock:
            if key in self._fast:
                return self._fast[key]
        found = fast_validator(schema)
        with self._lock:
            self._fast[key] = found
        return found

    def get(self, digest: str, kind: str, schema_id: str, schema: Any) -> Validator:
        """The validator of ``schema``, known to the descriptor ``digest`` as ``schema_id``."""
        key = (digest, kind, schema_id)
        with self._lock:
            validator = self._validators.get(key)
        if validator is None:
            validator = validator_for(schema)
            with self._lock:
                self._validators[key] = validator
        return validator
