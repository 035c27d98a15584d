"""A form over a JSON Schema, without any user-interface library.

:class:`SchemaForm` turns a capability's request schema into a tree of :class:`FieldSpec`
(strings, numbers, integers, booleans, enums, arrays of those, nested objects; anything
else is edited as JSON text), keeps one *raw* value per field — what a person typed —
coerces raw values into JSON values, and reports per-field errors: coercion errors first
("not a number"), then the schema's own verdict from ``jsonschema`` mapped back onto the
field it concerns. The widget in :mod:`murmur_nb.widgets` is a thin view over this class,
so the same checks run headless, in tests and in scripts.

Design notes:

* Numbers and integers are edited as text, not as numeric widgets: a numeric widget
  cannot be *empty*, so an optional number would always be sent as ``0``, and it cannot
  hold ``"abc"``, so the person never sees why a value was refused.
* An empty field is left out of the request (the module applies its own default, or
  the schema reports "required"); a field is only sent when it holds something. The
  one value a form therefore cannot send is an empty string.
* ``UNSET`` marks "no value" for booleans and enums, so that ``null`` can still be a
  real enum member.
* The form never runs anything; the host re-validates the input anyway. The form only
  makes the host's refusal visible beside the field before the run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from jsonschema import SchemaError
from jsonschema.protocols import Validator

from murmur_nb._modules.descriptor import schema_validator_class

__all__ = ["UNSET", "FieldKind", "FieldSpec", "SchemaForm", "build_fields"]

FieldKind = Literal["string", "number", "integer", "boolean", "enum", "array", "object", "json"]

_SCALARS: Final = frozenset({"string", "number", "integer", "boolean"})
_MAX_REF_DEPTH: Final = 32


class _Unset:
    """The single "no value" marker; falsy, and stable in reprs."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()


@dataclass(frozen=True)
class FieldSpec:
    """One field of a generated form.

    Attributes
    ----------
    path : tuple of str
        Property names from the root object; ``()`` is the root itself.
    kind : str
        ``string``, ``number``, ``integer``, ``boolean``, ``enum``, ``array`` (of
        ``item_kind``), ``object`` (with ``children``) or ``json`` (free JSON text).
    title, description : str
        The label and the help text (the schema's ``description``).
    required : bool
        Whether the parent object lists this property in ``required``.
    default : Any
        The schema default, or ``UNSET``.
    options : tuple
        Enum members, for ``enum`` fields and arrays of enums.
    item_kind : str or None
        For arrays: the kind of each item (a scalar kind or ``enum``).
    nullable : bool
        The schema also allows ``null``.
    children : tuple of FieldSpec
        For objects: one field per property, in schema order.
    schema : Mapping
        The resolved sub-schema.
    """

    path: tuple[str, ...]
    kind: FieldKind
    title: str
    description: str = ""
    required: bool = False
    default: Any = UNSET
    options: tuple[Any, ...] = ()
    item_kind: FieldKind | None = None
    nullable: bool = False
    children: tuple[FieldSpec, ...] = ()
    schema: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        """The dotted path, ``""`` for the root."""
        return ".".join(self.path)

    @property
    def label(self) -> str:
        """The title with a ``*`` when the field is required."""
        return f"{self.title} *" if self.required else self.title

    @property
    def hint(self) -> str:
        """The schema's constraints in words (``≥ 1, ≤ 10``), for the help line."""
        s = self.schema
        raw_items = s.get("items")
        items: Mapping[str, Any] = raw_items if isinstance(raw_items, Mapping) else {}
        parts: list[str] = []
        sources: tuple[tuple[Mapping[str, Any], str], ...] = ((s, ""), (items, "each "))
        for src, prefix in sources:
            if src is not s and self.kind != "array":
                break
            for word, sym in (
                ("minimum", "≥"),
                ("exclusiveMinimum", ">"),
                ("maximum", "≤"),
                ("exclusiveMaximum", "<"),
            ):
                bound = src.get(word)
                if isinstance(bound, int | float) and not isinstance(bound, bool):
                    parts.append(f"{prefix}{sym} {bound}")
            if isinstance(src.get("multipleOf"), int | float):
                parts.append(f"{prefix}multiple of {src['multipleOf']}")
            if isinstance(src.get("minLength"), int):
                parts.append(f"{prefix}at least {src['minLength']} characters")
            if isinstance(src.get("maxLength"), int):
                parts.append(f"{prefix}at most {src['maxLength']} characters")
            if isinstance(src.get("pattern"), str):
                parts.append(f"{prefix}matches {src['pattern']}")
            if isinstance(src.get("format"), str):
                parts.append(f"{prefix}format {src['format']}")
        if self.kind == "array":
            if isinstance(s.get("minItems"), int):
                parts.append(f"at least {s['minItems']} items")
            if isinstance(s.get("maxItems"), int):
                parts.append(f"at most {s['maxItems']} items")
            if s.get("uniqueItems") is True:
                parts.append("no duplicates")
        return ", ".join(parts)

    def walk(self) -> Iterator[FieldSpec]:
        """This field, then every descendant, depth first in schema order."""
        yield self
        for child in self.children:
            yield from child.walk()


# --- schema -> fields ---------------------------------------------------------------


def _resolve(schema: Any, root: Mapping[str, Any], depth: int = 0) -> Mapping[str, Any] | None:
    """Follow local ``$ref`` pointers (``#/...``); ``None`` when one cannot be followed."""
    if not isinstance(schema, Mapping):
        return {} if schema is True else None
    ref = schema.get("$ref")
    if ref is None:
        return schema
    if depth >= _MAX_REF_DEPTH or not isinstance(ref, str) or not ref.startswith("#"):
        return None
    target: Any = root
    for raw_part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = raw_part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    resolved = _resolve(target, root, depth + 1)
    if resolved is None:
        return None
    siblings = {k: v for k, v in schema.items() if k != "$ref"}
    return {**resolved, **siblings} if siblings else resolved


def _unwrap_nullable(schema: Mapping[str, Any], root: Mapping[str, Any]) -> tuple[Any, bool]:
    """``anyOf``/``oneOf`` of one schema and ``{"type": "null"}`` -> (that schema, True)."""
    for word in ("anyOf", "oneOf"):
        alts = schema.get(word)
        if isinstance(alts, list) and len(alts) == 2:
            resolved = [_resolve(a, root) for a in alts]
            nulls = [r for r in resolved if r is not None and r.get("type") == "null"]
            others = [r for r in resolved if r is not None and r.get("type") != "null"]
            if len(nulls) == 1 and len(others) == 1:
                rest = {k: v for k, v in schema.items() if k != word}
                return {**others[0], **rest}, True
    return schema, False


def _type_of(schema: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The single non-null JSON type and whether ``null`` is allowed too."""
    t = schema.get("type")
    if isinstance(t, str):
        return t, t == "null"
    if isinstance(t, list):
        kinds = [x for x in t if x != "null"]
        return (kinds[0] if len(kinds) == 1 else None), "null" in t
    if "properties" in schema:
        return "object", False
    return None, False


def _enum_of(schema: Mapping[str, Any]) -> tuple[Any, ...] | None:
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return tuple(schema["enum"])
    if "const" in schema:
        return (schema["const"],)
    return None


def _spec(
    schema: Any,
    root: Mapping[str, Any],
    path: tuple[str, ...],
    required: bool,
    seen: frozenset[int],
) -> FieldSpec:
    name = path[-1] if path else "input"
    resolved = _resolve(schema, root)
    if resolved is None:
        return FieldSpec(path, "json", name, required=required, schema={})
    resolved, nullable = _unwrap_nullable(resolved, root)
    title = str(resolved.get("title") or name)
    description = str(resolved.get("description") or "")
    default = resolved.get("default", UNSET)
    base = {"title": title, "description": description, "required": required, "default": default}

    options = _enum_of(resolved)
    if options is not None:
        return FieldSpec(path, "enum", options=options, nullable=nullable, schema=resolved, **base)

    kind, null_too = _type_of(resolved)
    nullable = nullable or null_too
    if kind in _SCALARS and not any(k in resolved for k in ("anyOf", "oneOf", "allOf", "not")):
        return FieldSpec(path, kind, nullable=nullable, schema=resolved, **base)  # type: ignore[arg-type]

    if kind == "array" and isinstance(resolved.get("items"), Mapping | bool):
        items = _resolve(resolved["items"], root)
        if items is not None:
            items, _ = _unwrap_nullable(items, root)
            item_options = _enum_of(items)
            item_kind, _ = _type_of(items)
            if item_options is not None:
                return FieldSpec(
                    path,
                    "array",
                    item_kind="enum",
                    options=item_options,
                    nullable=nullable,
                    schema=resolved,
                    **base,
                )
            if item_kind in _SCALARS:
                return FieldSpec(
                    path,
                    "array",
                    item_kind=item_kind,  # type: ignore[arg-type]
                    nullable=nullable,
                    schema=resolved,
                    **base,
                )

    props = resolved.get("properties")
    if kind == "object" and isinstance(props, Mapping) and props and id(resolved) not in seen:
        req = resolved.get("required")
        required_names = set(req) if isinstance(req, list) else set()
        children = tuple(
            _spec(sub, root, (*path, str(pname)), pname in required_names, seen | {id(resolved)})
            for pname, sub in props.items()
        )
        return FieldSpec(
            path, "object", children=children, nullable=nullable, schema=resolved, **base
        )

    return FieldSpec(path, "json", nullable=nullable, schema=resolved, **base)


def build_fields(schema: Mapping[str, Any] | bool) -> FieldSpec:
    """The field tree for a request schema; the root is always required.

    >>> root = build_fields({"type": "object", "required": ["n"],
    ...                      "properties": {"n": {"type": "integer", "default": 3}}})
    >>> [(f.key, f.kind, f.required, f.default) for f in root.children]
    [('n', 'integer', True, 3)]
    """
    root_schema: Mapping[str, Any] = schema if isinstance(schema, Mapping) else {}
    return _spec(root_schema, root_schema, (), True, frozenset())


# --- raw values -> JSON values ------------------------------------------------------


def _initial_raw(spec: FieldSpec) -> Any:
    """What the field shows before anyone touches it: the default, or empty."""
    d = spec.default
    if spec.kind in ("boolean", "enum"):
        return d
    if spec.kind == "array" and spec.item_kind == "enum":
        return tuple(d) if isinstance(d, list) else ()
    if d is UNSET or d is None:
        return ""
    if spec.kind == "string":
        return str(d)
    if spec.kind in ("number", "integer"):
        return json.dumps(d)
    if spec.kind == "array" and isinstance(d, list):
        return "\n".join(x if isinstance(x, str) else json.dumps(x) for x in d)
    return json.dumps(d, indent=2)


def _coerce_scalar(kind: str, raw: Any) -> Any:
    """One scalar from text (or an already-typed value); raises ValueError with a reason."""
    if kind == "string":
        return raw if isinstance(raw, str) else str(raw)
    if kind == "boolean":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "yes", "1"):
            return True
        if text in ("false", "no", "0"):
            return False
        raise ValueError(f"{raw!r} is not true or false")
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number")
    if isinstance(raw, int | float):
        number: int | float = raw
    else:
        text = str(raw).strip()
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a number") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError(f"{raw!r} is not a finite number")
    if kind == "integer":
        if isinstance(number, float):
            if not number.is_integer():
                raise ValueError(f"{raw!r} is not a whole number")
            number = int(number)
        return number
    return number


def _is_blank(raw: Any) -> bool:
    return raw is UNSET or raw is None or (isinstance(raw, str) and raw.strip() == "")


def coerce(spec: FieldSpec, raw: Any) -> Any:
    """The JSON value of a non-object field, or ``UNSET``; raises ValueError with a reason."""
    if spec.kind in ("boolean", "enum"):
        if raw is UNSET:
            return UNSET
        if spec.kind == "enum":
            if not any(raw == o and type(raw) is type(o) for o in spec.options):
                raise ValueError(f"{raw!r} is not one of the choices")
            return raw
        if raw is None:
            return UNSET
        return _coerce_scalar("boolean", raw)
    if spec.kind == "array":
        if spec.item_kind == "enum":
            values = list(raw) if isinstance(raw, list | tuple) else [raw]
            for v in values:
                if v not in spec.options:
                    raise ValueError(f"{v!r} is not one of the choices")
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
    if spec.kind == "string":
        if raw is UNSET or raw is None or raw == "":
            return UNSET
        return _coerce_scalar("string", raw)
    if _is_blank(raw):
        return UNSET
    if spec.kind == "json":
        if not isinstance(raw, str):
            return raw
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg} (line {exc.lineno})") from None
    return _coerce_scalar(spec.kind, raw)


# --- the form -----------------------------------------------------------------------


def form_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """The host's one validator factory applied to a form schema.

    An unknown ``$schema`` falls back to the default draft: a form still helps.
    """
    try:
        cls = schema_validator_class(schema)
    except SchemaError:
        cls = schema_validator_class({})
    return cls(schema)


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
            f.path: _initial_raw(f) for f in self.root.walk() if f.kind != "object"
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
                self._raw[f.path] = _initial_raw(f)

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
        return {} if v is UNSET and self.root.kind == "object" else (None if v is UNSET else v)

    def errors(self) -> dict[str, str]:
        """Field key -> the reason its value is refused; ``""`` names the whole input.

        Coercion errors come first; a schema error for a field that already has one is
        not repeated. An empty dict means the host will accept the input's shape.
        """
        errors: dict[str, str] = {}
        value = self._build(self.root, errors)
        unreadable = set(errors)
        if value is UNSET:
            value = {} if self.root.kind == "object" else None
        found = self._validator.iter_errors(value)
        for err in sorted(found, key=lambda e: [str(p) for p in e.absolute_path]):
            for key, message in self._locate(err):
                if key in unreadable:
                    continue
                if key not in errors:
                    errors[key] = message
                elif message not in errors[key].split("; "):
                    errors[key] = f"{errors[key]}; {message}"
        return errors

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
