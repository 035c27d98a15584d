"""Schema validation whose cost a module cannot blow up: a work budget and linear keywords.

A module writes both a schema and the data checked against it, so a check must be bounded in
work, not time (a verdict never depends on the machine's load). :func:`check` counts two
budgets: *pattern bytes* scanned past :data:`FREE_BYTES` (default :data:`DEFAULT_BUDGET`,
4 MiB, about 40 ms of RE2 at worst) and *schema steps*, one per keyword evaluated (default
:data:`DEFAULT_STEPS`, one million: ``anyOf`` nesting and thousand-way ``allOf`` are
exponential otherwise). Past either it stops, says which budget and how to allow more, and
accepts nothing. ``uniqueItems`` is decided in linear time over canonical hashable forms.

:func:`fast_validator` (``jsonschema-rs``, offline) accepts bulk data in milliseconds; every
refusal and its message still comes from the one ``jsonschema`` validator, so host, result
check and form agree. Schemas the two engines could judge differently (any pattern; a
non-integer ``multipleOf``) never take the fast path.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_STEPS",
    "FREE_BYTES",
    "BudgetSpent",
    "charge",
    "check",
    "counted_keywords",
    "fast_validator",
    "unique_items",
]

#: Bytes one check may scan with patterns (past each search's first ``FREE_BYTES``).
DEFAULT_BUDGET = 4 << 20
#: Keyword evaluations one check may make.
DEFAULT_STEPS = 1_000_000
#: Bytes of each search that are not counted: its cost is the call's, not the scan's.
FREE_BYTES = 256


class BudgetSpent(Exception):
    """A check's budget is spent; the message says which, where, and how to allow more."""


@dataclass
class _Budget:
    limit: int
    max_steps: int
    spent: int = 0
    steps: int = 0


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "murmur_nb_validation_budget", default=None
)


def charge(text: str, pattern: str) -> None:
    """Count one search of ``pattern`` over ``text``; raise :class:`BudgetSpent` first if it
    would not fit. Outside :func:`check` nothing is counted."""
    budget = _BUDGET.get()
    if budget is None:
        return
    cost = max(0, (len(text) if text.isascii() else 4 * len(text)) - FREE_BYTES)
    if budget.spent + cost > budget.limit:
        raise BudgetSpent(
            f"checking pattern {pattern!r} against a {len(text):,}-character string would take "
            f"the check's pattern work to {budget.spent + cost:,} bytes, over its budget of "
            f"{budget.limit:,} (bytes scanned past the first {FREE_BYTES} of each string); the "
            "value is not accepted. If the module is trusted to send such values, raise "
            "Policy(max_pattern_work=...)"
        )
    budget.spent += cost


def _counted(keyword: str, function: Any) -> Any:
    """``function`` (a keyword's implementation) counting one step per evaluation."""

    def step(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget.steps += 1
            if budget.steps > budget.max_steps:
                raise BudgetSpent(
                    f"checking this value needed more than {budget.max_steps:,} keyword "
                    f"evaluations (stopped at {keyword!r}): the value is very large for its "
                    "schema, or the schema multiplies the work (a large allOf, many "
                    "patternProperties, nested anyOf/oneOf); the value is not accepted. If "
                    "the module is trusted, raise Policy(max_schema_steps=...)"
                )
        return function(validator, value, instance, schema)

    return step


def counted_keywords(keywords: dict[str, Any]) -> dict[str, Any]:
    """Every keyword of ``keywords`` counting its evaluations against the check's budget."""
    return {name: _counted(name, function) for name, function in keywords.items()}


def _fast_eligible(schema: Any) -> bool:
    """No keyword on which ``jsonschema-rs`` and ``jsonschema`` could judge differently."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if "pattern" in node or "patternProperties" in node:
                return False
            step = node.get("multipleOf")
            if isinstance(step, float) and not step.is_integer():
                return False
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return True


def fast_validator(schema: Any) -> Any | None:
    """A ``jsonschema-rs`` validator of ``schema`` for :func:`check`'s fast accept, or
    ``None`` when the schema is not eligible or the engine cannot compile it offline."""
    if not isinstance(schema, dict | bool) or not _fast_eligible(schema):
        return None
    try:
        import jsonschema_rs  # noqa: PLC0415 - optional accelerator
    except ImportError:  # pragma: no cover - a dependency, but the checks work without it
        return None
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=False, offline=True)
    except Exception:  # any refusal (unknown draft, a remote $ref): no fast path
        return None


def check(
    validator: Validator,
    instance: Any,
    *,
    budget: int = DEFAULT_BUDGET,
    steps: int = DEFAULT_STEPS,
    limit: int | None = None,
    fast: Any | None = None,
    fast_refusal: bool = False,
) -> list[ValidationError]:
    """The errors of ``instance`` (at most ``limit``), found within ``budget`` pattern bytes
    and ``steps`` keyword evaluations.

    A spent budget ends the list with one error saying so: the value is refused, never
    half-checked and accepted. ``fast`` (from :func:`fast_validator`) may accept the value
    first; a refusal is ``validator``'s, unless ``fast_refusal`` (the result check, which
    reports one problem as a warning) lets the fast engine name the first problem too, so
    a bulk result with one bad item at its end costs milliseconds, not seconds.
    """
    from jsonschema.exceptions import ValidationError  # noqa: PLC0415 - lazy, like jsonschema

    if fast is not None:
        try:
            if fast.is_valid(instance):
                return []
            first = next(iter(fast.iter_errors(instance)), None) if fast_refusal else None
        except (ValueError, TypeError, OverflowError):
            first = None  # a value the engine cannot take (an integer past 64 bits)
        if first is not None:
            return [ValidationError(_short(first.message), path=list(first.instance_path))]

    token = _BUDGET.set(_Budget(budget, steps))
    found: list[ValidationError] = []
    spent: ValidationError | None = None
    try:
        for error in validator.iter_errors(instance):
            found.append(error)
            if limit is not None and len(found) >= limit:
                break
    except BudgetSpent as exc:
        spent = ValidationError(str(exc))
    finally:
        _BUDGET.reset(token)
    for error in found:
        error.message = _short(error.message)
    return found if spent is None else [*found, spent]


def _short(message: str) -> str:
    """A message that quotes a huge value keeps its head and its verdict, not the value."""
    return message if len(message) <= 300 else f"{message[:150]} ... {message[-120:]}"


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal exactly when the values are equal as JSON."""
    if isinstance(value, bool) or value is None:
        key: Any = value
    elif isinstance(value, int | float):
        integral = isinstance(value, float) and value.is_integer()
        key = ("n", int(value) if integral else value)
    elif isinstance(value, str):
        key = ("s", value)
    elif isinstance(value, list | tuple):
        key = ("a", tuple(_canonical(v) for v in value))
    elif isinstance(value, dict):
        key = ("o", frozenset((k, _canonical(v)) for k, v in value.items()))
    else:
        key = ("?", repr(value))
    return key


def unique_items(
    validator: Validator, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """``uniqueItems`` in time linear in the array (the first repeated item is named)."""
    from jsonschema.exceptions import ValidationError  # noqa: PLC0415

    if not unique or not validator.is_type(instance, "array"):
        return
    seen: dict[Any, int] = {}
    for index, item in enumerate(instance):
        key = _canonical(item)
        first = seen.setdefault(key, index)
        if first != index:
            shown = repr(item)
            shown = shown if len(shown) <= 80 else f"{shown[:80]}..."
            yield ValidationError(
                f"items {first} and {index} are equal ({shown}): the array has non-unique "
                "elements"
            )
            return
