"""A request schema as a tree of form fields (:class:`FieldSpec`), without any UI library.

Strings, numbers, integers, booleans, enums, arrays of those and nested objects each get a
field of their own kind; an object that admits no property (``properties: {}``) has no
fields, so its value is ``{}``; anything else (``anyOf``, tuples, free objects) is edited as
JSON text. ``$ref`` is followed inside the schema (to a bounded depth), ``null`` in a type
union or ``anyOf`` makes a field nullable, and a recursive object is cut at its first
repetition. :mod:`.form` keeps the values and the errors of such a tree.

A schema is a module's to write, so what it makes a form draw is bounded: an enum of more
than :data:`MAX_OPTIONS` members is typed, not chosen from a list (a JSON Schema enum of
100,000 options was a dropdown of 100,000), and a form draws at most :data:`MAX_FIELDS`
fields: an object whose properties do not fit in what is left is edited as JSON text (a
schema of 5,000 properties drew 25,000 widgets in 22 s, and ``$ref`` fan-out multiplies
them level by level). Such a field's ``note`` says why and where the schema lists them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from murmur_nb._rules import clipped

__all__ = ["MAX_FIELDS", "MAX_OPTIONS", "SCALARS", "UNSET", "FieldKind", "FieldSpec",
           "build_fields"]  # fmt: skip

FieldKind = Literal["string", "number", "integer", "boolean", "enum", "array", "object", "json"]

SCALARS: Final = frozenset({"string", "number", "integer", "boolean"})
_MAX_REF_DEPTH: Final = 32
#: Members of an enum a field offers as a list; a longer enum is typed.
MAX_OPTIONS: Final = 500
#: Fields one form draws at most; an object past them is edited as JSON text.
MAX_FIELDS: Final = 100


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
    note : str
        Why the field is simpler than its schema (an enum too long to list, an object past
        the form's fields), said first in :attr:`hint`.
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
    note: str = ""

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
        parts = [self.note] if self.note else []
        parts += _value_words(s, "")
        if self.kind == "array":
            raw_items = s.get("items")
            parts += _value_words(raw_items if isinstance(raw_items, Mapping) else {}, "each ")
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


def _count_words(prefix: str, bound: str, n: int) -> str:
    """``at least 1`` character reads "not empty"; other counts say how many characters."""
    if bound == "at least" and n == 1:
        return "no empty items" if prefix else "not empty"
    return f"{prefix}{bound} {n} character{'' if n == 1 else 's'}"


def _value_words(src: Mapping[str, Any], prefix: str) -> list[str]:
    """A value schema's constraints in words (bounds, lengths, pattern, format)."""
    parts: list[str] = []
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
    if isinstance(src.get("minLength"), int) and src["minLength"] > 0:
        parts.append(_count_words(prefix, "at least", src["minLength"]))
    if isinstance(src.get("maxLength"), int):
        parts.append(_count_words(prefix, "at most", src["maxLength"]))
    if isinstance(src.get("pattern"), str):
        parts.append(f"{prefix}matches {src['pattern']}")
    if isinstance(src.get("format"), str):
        parts.append(f"{prefix}format {src['format']}")
    return parts


class _Budget:
    """The fields a form may still draw (:data:`MAX_FIELDS` at first)."""

    def __init__(self) -> None:
        self.left = MAX_FIELDS


def _typed(path: tuple[str, ...], options: tuple[Any, ...]) -> tuple[FieldKind, str]:
    """The kind of a field whose enum is too long to list (``string`` when every member is
    one, else JSON text) and the note that says so."""
    kind: FieldKind = "string" if all(isinstance(o, str) for o in options) else "json"
    where = _schema_of(path)
    return kind, (f"one of {len(options):,} choices, typed (a list offers at most "
                  f"{MAX_OPTIONS:,}; {where} lists them all)")  # fmt: skip


def _schema_of(path: tuple[str, ...]) -> str:
    """Where a note sends the reader for a field's whole schema (its path cut: a schema's
    keys are the module's)."""
    return f"form.field({clipped('.'.join(path))!r}).schema"


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
    *,
    seen: frozenset[int],
    budget: _Budget,
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
    if options is not None and len(options) > MAX_OPTIONS:
        kind_of, note = _typed(path, options)
        return FieldSpec(path, kind_of, nullable=nullable, schema=resolved, note=note, **base)
    if options is not None:
        return FieldSpec(path, "enum", options=options, nullable=nullable, schema=resolved, **base)

    kind, null_too = _type_of(resolved)
    nullable = nullable or null_too
    if kind in SCALARS and not any(k in resolved for k in ("anyOf", "oneOf", "allOf", "not")):
        return FieldSpec(path, kind, nullable=nullable, schema=resolved, **base)  # type: ignore[arg-type]

    spec: FieldSpec | None = None
    if kind == "array":
        spec = _array_spec(path, resolved, root, nullable, base)
    elif kind == "object":
        spec = _object_spec(path, resolved, root, nullable, base, seen=seen, budget=budget)
    return spec or FieldSpec(path, "json", nullable=nullable, schema=resolved, **base)


def _array_spec(
    path: tuple[str, ...],
    resolved: Mapping[str, Any],
    root: Mapping[str, Any],
    nullable: bool,
    base: dict[str, Any],
) -> FieldSpec | None:
    """An array of enum members or of scalars; ``None`` for any other array (JSON text)."""
    if not isinstance(resolved.get("items"), Mapping | bool):
        return None
    items = _resolve(resolved["items"], root)
    if items is None:
        return None
    items, _ = _unwrap_nullable(items, root)
    item_options = _enum_of(items)
    item_kind, _ = _type_of(items)
    note = ""
    if item_options is not None and len(item_options) > MAX_OPTIONS:
        item_kind, note = _typed(path, item_options)  # one typed item a line
        if item_kind == "json":
            return None
        item_options = None
    if item_options is not None:
        item_kind = "enum"
    elif item_kind not in SCALARS:
        return None
    return FieldSpec(
        path,
        "array",
        item_kind=item_kind,  # type: ignore[arg-type]
        options=item_options or (),
        nullable=nullable,
        schema=resolved,
        note=note,
        **base,
    )


def _object_spec(
    path: tuple[str, ...],
    resolved: Mapping[str, Any],
    root: Mapping[str, Any],
    nullable: bool,
    base: dict[str, Any],
    *,
    seen: frozenset[int],
    budget: _Budget,
) -> FieldSpec | None:
    """An object with properties (one child each), or with none when it admits no property;
    ``None`` (JSON text) for a free object or one that recurses; JSON text too, with a note,
    when its properties do not fit in the fields the form may still draw."""
    props = resolved.get("properties")
    if id(resolved) in seen:
        return None
    if not (isinstance(props, Mapping) and props):
        return _fieldless(path, resolved, props, nullable, base)
    if len(props) > budget.left:
        where = _schema_of(path)
        note = (f"{len(props):,} properties, more than the {budget.left:,} fields left of the "
                f"{MAX_FIELDS:,} a form draws: type it as JSON ({where} lists them)")  # fmt: skip
        return FieldSpec(path, "json", nullable=nullable, schema=resolved, note=note, **base)
    budget.left -= len(props)
    req = resolved.get("required")
    required_names = set(req) if isinstance(req, list) else set()
    within = seen | {id(resolved)}
    children = tuple(
        _spec(sub, root, (*path, str(pname)), pname in required_names, seen=within, budget=budget)
        for pname, sub in props.items()
    )
    return FieldSpec(path, "object", children=children, nullable=nullable, schema=resolved, **base)


def _fieldless(
    path: tuple[str, ...],
    resolved: Mapping[str, Any],
    props: Any,
    nullable: bool,
    base: dict[str, Any],
) -> FieldSpec | None:
    """An object without fields: ``properties: {}`` (and no schema for other properties),
    or ``additionalProperties: false`` and no ``properties``; ``None`` (JSON text) for an
    object open to properties the form cannot name."""
    if props not in (None, {}) or "patternProperties" in resolved:
        return None
    if "additionalProperties" in resolved:
        open_to_more = resolved["additionalProperties"] is not False
    else:  # unsaid: ``properties: {}`` means "none", a bare object means "any"
        open_to_more = props is None
    if open_to_more:
        return None
    return FieldSpec(path, "object", nullable=nullable, schema=resolved, **base)


def build_fields(schema: Mapping[str, Any] | bool) -> FieldSpec:
    """The field tree for a request schema; the root is always required.

    >>> root = build_fields({"type": "object", "required": ["n"],
    ...                      "properties": {"n": {"type": "integer", "default": 3}}})
    >>> [(f.key, f.kind, f.required, f.default) for f in root.children]
    [('n', 'integer', True, 3)]
    """
    root_schema: Mapping[str, Any] = schema if isinstance(schema, Mapping) else {}
    return _spec(root_schema, root_schema, (), True, seen=frozenset(), budget=_Budget())
