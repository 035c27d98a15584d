"""A form over a JSON Schema, without any user-interface library.

:class:`SchemaForm` turns a request schema into a tree of :class:`FieldSpec`, keeps one raw
value per field (what a person typed), coerces raw values into JSON, and reports errors per
field: coercion first ("not a number"), then the ``jsonschema`` verdict mapped onto its field.
The widget in :mod:`murmur_nb.widgets` is a thin view over it. Numbers are edited as text (a
numeric widget can be neither empty nor wrong, so the person would never see why); an empty
field is left out of the request, so an empty string is the one value a form cannot send;
``UNSET`` means no value for booleans and enums, so ``null`` can be a member. The form runs
nothing; the host validates again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from murmur_nb._forms.fields import UNSET, FieldKind, FieldSpec, build_fields
from murmur_nb._schemas.bounded import check
from murmur_nb._schemas.schemas import form_validator

__all__ = [
    "QUOTE_CHARS",
    "UNSET",
    "FieldKind",
    "FieldSpec",
    "SchemaForm",
    "build_fields",
    "coerce",
    "quoted",
]

#: Characters of a value an error message quotes; a longer value is cut (``'12345…'``).
QUOTE_CHARS = 40


def quoted(value: Any) -> str:
    """``repr(value)``, cut to its first :data:`QUOTE_CHARS` characters and ``…`` when
    longer: an error message names what was typed without repeating a pasted page.

    >>> quoted("9" * 50)
    "'9999999999999999999999999999999999999999…' (50 characters)"
    >>> quoted(1.5)
    '1.5'
    """
    if isinstance(value, str):
        if len(value) <= QUOTE_CHARS:
            return repr(value)
        head = repr(value[:QUOTE_CHARS])
        return f"{head[:-1]}…{head[-1]} ({len(value):,} characters)"
    text = repr(value)
    if len(text) <= QUOTE_CHARS:
        return text
    return f"{text[:QUOTE_CHARS]}… ({len(text):,} characters)"


# --- raw values -> JSON values ------------------------------------------------------


def initial_raw(spec: FieldSpec) -> Any:
    """What the field shows before anyone touches it: the default, or empty."""
    d = spec.default
    if spec.kind in ("boolean", "enum"):
        return d
    if spec.kind == "array" and spec.item_kind == "enum":
        return tuple(d) if isinstance(d, list) else ()
    if d is UNSET or d is None:
        return ""
    return _default_text(spec.kind, d)


def _default_text(kind: str, d: Any) -> str:
    """A default value as the text a text field shows."""
    if kind == "string":
        return str(d)
    if kind in ("number", "integer"):
        return json.dumps(d)
    if kind == "array" and isinstance(d, list):
        return "\n".join(x if isinstance(x, str) else json.dumps(x) for x in d)
    return json.dumps(d, indent=2)


def _coerce_scalar(kind: str, raw: Any) -> Any:
    """One scalar from text (or an already-typed value); raises ValueError with a reason."""
    if kind == "string":
        return raw if isinstance(raw, str) else str(raw)
    if kind == "boolean":
        return _coerce_boolean(raw)
    return _coerce_number(kind, raw)


def _coerce_boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"{quoted(raw)} is not true or false")


def _coerce_number(kind: str, raw: Any) -> int | float:
    """A number (``kind`` ``integer``: a whole one) from text or an already-typed value."""
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number")
    if isinstance(raw, int | float):
        number: int | float = raw
    else:
        number = _parse_number(str(raw).strip())
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError(f"{quoted(raw)} is not a finite number")
    if kind == "integer" and isinstance(number, float):
        if not number.is_integer():
            raise ValueError(f"{quoted(raw)} is not a whole number")
        number = int(number)
    return number


def _parse_number(text: str) -> int | float:
    """An int, else a float, from text; a numeral past what a float holds (``1e400``, or
    more than 4,300 digits: Python's limit for ``int()`` of text) is out of range."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{quoted(text)} is not a number") from None
    if math.isinf(number) and not text.lstrip("+-")[:1].isalpha():  # a numeral, not "inf"
        size = "large" if number > 0 else "small"
        raise ValueError(f"{quoted(text)} is too {size}: out of the range of numbers")
    return number


def _is_blank(raw: Any) -> bool:
    return raw is UNSET or raw is None or (isinstance(raw, str) and raw.strip() == "")


def coerce(spec: FieldSpec, raw: Any) -> Any:
    """The JSON value of a non-object field, or ``UNSET``; raises ValueError with a reason."""
    if spec.kind in ("boolean", "enum"):
        return _coerce_choice(spec, raw)
    if spec.kind == "array":
        return _coerce_array(spec, raw)
    if spec.kind == "string":
        blank = raw is UNSET or raw is None or raw == ""
        return UNSET if blank else _coerce_scalar("string", raw)
    if _is_blank(raw):
        return UNSET
    if spec.kind == "json":
        return _coerce_json(raw)
    return _coerce_scalar(spec.kind, raw)


def _coerce_choice(spec: FieldSpec, raw: Any) -> Any:
    """A boolean or an enum member (``UNSET`` when none is chosen)."""
    if raw is UNSET:
        return UNSET
    if spec.kind == "enum":
        if not any(raw == o and type(raw) is type(o) for o in spec.options):
            raise ValueError(f"{quoted(raw)} is not one of the choices")
        return raw
    if raw is None:
        return UNSET
    return _coerce_scalar("boolean", raw)


def _coerce_array(spec: FieldSpec, raw: Any) -> Any:
    """Enum members as chosen, or one scalar per non-blank line of text."""
    if spec.item_kind == "enum":
        values = list(raw) if isinstance(raw, list | tuple) else [raw]
        for v in values:
            if v not in spec.options:
                raise ValueError(f"{quoted(v)} is not one of the choices")
        return values if values or spec.required else UNSET
    if isinstance(raw, list | tuple):
        lines = list(raw)
    elif _is_blank(raw):
        return [] if spec.required else UNSET
    else:
        lines = [ln for ln in str(raw).splitlines() if ln.strip() != ""]
    out = []
    for i, item in enumerate(lines, start=1):
        try:
            out.append(_coerce_scalar(str(spec.item_kind), item))
        except ValueError as exc:
            raise ValueError(f"item {i}: {exc}") from None
    return out


def _coerce_json(raw: Any) -> Any:
    """Free JSON text parsed (an already-parsed value is kept)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} (line {exc.lineno})") from None


# --- the form -----------------------------------------------------------------------


class SchemaForm:
    """Raw values for every field of a schema, their JSON value and their errors.

    Parameters
    ----------
    schema : Mapping or bool
        A JSON Schema document (a capability's request schema).

    Examples
    --------
    >>> form = SchemaForm({"type": "object", "required": ["count"],
    ...                    "properties": {"count": {"type": "integer", "minimum": 1}}})
    >>> form.set("count", "two")
    >>> form.errors()
    {'count': "'two' is not a number"}
    >>> form.set("count", "0")
    >>> form.errors()
    {'count': '0 is less than the minimum of 1'}
    >>> form.set("count", "3")
    >>> form.value(), form.errors()
    ({'count': 3}, {})
    """

    def __init__(self, schema: Mapping[str, Any] | bool) -> None:
        self.schema: Mapping[str, Any] | bool = schema
        self.root: FieldSpec = build_fields(schema)
        self._by_key: dict[str, FieldSpec] = {f.key: f for f in self.root.walk()}
        self._raw: dict[tuple[str, ...], Any] = {
            f.path: initial_raw(f) for f in self.root.walk() if f.kind != "object"
        }
        self._validator = form_validator(schema)

    # fields and raw values

    @property
    def fields(self) -> list[FieldSpec]:
        """Every field, depth first; objects included, the root object excluded."""
        return [f for f in self.root.walk() if f.path or f.kind != "object"]

    def field(self, key: str | Sequence[str]) -> FieldSpec:
        """The field with this dotted key (or path tuple)."""
        k = key if isinstance(key, str) else ".".join(key)
        try:
            return self._by_key[k]
        except KeyError:
            known = ", ".join(sorted(x for x in self._by_key if x)) or "(none)"
            raise KeyError(f"no field {k!r} in this form; fields: {known}") from None

    def set(self, key: str | Sequence[str], raw: Any) -> None:
        """Set what the person typed or chose for a field (``UNSET`` clears it)."""
        spec = self.field(key)
        if spec.kind == "object":
            raise ValueError(f"{spec.key!r} is an object; set its fields one by one")
        self._raw[spec.path] = raw

    def raw(self, key: str | Sequence[str]) -> Any:
        """The raw value held for a field."""
        return self._raw[self.field(key).path]

    def reset(self) -> None:
        """Put every field back to its default."""
        for f in self.root.walk():
            if f.kind != "object":
                self._raw[f.path] = initial_raw(f)

    # values and errors

    def _build(self, spec: FieldSpec, errors: dict[str, str]) -> Any:
        if spec.kind == "object":
            out: dict[str, Any] = {}
            for child in spec.children:
                v = self._build(child, errors)
                if v is not UNSET:
                    out[child.path[-1]] = v
            if not out and not spec.required:
                return UNSET
            return out
        try:
            return coerce(spec, self._raw[spec.path])
        except ValueError as exc:
            errors[spec.key] = str(exc)
            return UNSET

    def value(self) -> Any:
        """The JSON value the form holds now (fields that cannot be read are left out)."""
        v = self._build(self.root, {})
        return self._unset_root() if v is UNSET else v

    def errors(self) -> dict[str, str]:
        """Field key -> the reason its value is refused; ``""`` names the whole input.

        Coercion errors come first; a schema error for a field that already has one is
        not repeated. An empty dict means the host will accept the input's shape.
        """
        errors: dict[str, str] = {}
        value = self._build(self.root, errors)
        unreadable = set(errors)
        if value is UNSET:
            value = self._unset_root()
        found = check(self._validator, value)
        for err in sorted(found, key=lambda e: [str(p) for p in e.absolute_path]):
            for key, message in self._locate(err):
                if key in unreadable:
                    continue
                if key not in errors:
                    errors[key] = message
                elif message not in errors[key].split("; "):
                    errors[key] = f"{errors[key]}; {message}"
        return errors

    def _unset_root(self) -> Any:
        """The input when the root holds nothing: ``{}`` for an object (as ``invoke`` reads
        ``None``), else ``None``."""
        is_object = self.root.kind == "object" or self.root.schema.get("type") == "object"
        return {} if is_object else None

    def is_valid(self) -> bool:
        return not self.errors()

    def _locate(self, err: Any) -> list[tuple[str, str]]:
        """Map one jsonschema error onto (field key, message) pairs."""
        path = [str(p) if isinstance(p, str) else p for p in err.absolute_path]
        if err.validator == "required" and isinstance(err.instance, Mapping):
            missing = [p for p in err.validator_value if p not in err.instance]
            return [(self._nearest([*path, name])[0], "required") for name in missing] or [
                (self._nearest(path)[0], err.message)
            ]
        key, rest = self._nearest(path)
        message = str(err.message)
        if rest and isinstance(rest[0], int):
            message = f"item {rest[0] + 1}: {message}"
        return [(key, message)]

    def _nearest(self, path: list[Any]) -> tuple[str, list[Any]]:
        """The deepest field whose path is a prefix of ``path`` and what is left over."""
        best: tuple[str, ...] = ()
        for n in range(len(path), 0, -1):
            prefix = path[:n]
            if all(isinstance(p, str) for p in prefix) and ".".join(prefix) in self._by_key:
                best = tuple(prefix)
                break
        return ".".join(best), path[len(best) :]

    def __repr__(self) -> str:
        return f"SchemaForm({', '.join(f.label for f in self.fields) or 'no fields'})"
