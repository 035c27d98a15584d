"""One input widget per form field, mirrored into :class:`SchemaForm` (CapabilityForm's parts).

:class:`Field` builds the ipywidgets control for a :class:`FieldSpec` (text, number, checkbox,
dropdown for enums, a JSON text area for what has no simpler control) and shows the form's
verdict under it (beside it, a message would take the field's width away as it appears);
:func:`flatten` turns a nested initial value into per-field raw values.

The visible label is an HTML widget of its own (bold title, red ``*``) in a fixed-width column,
so each control is named for a screen reader by its ``tooltip`` instead of a ``description``:
ipywidgets 8 puts the tooltip in the control's ``title`` when the description is empty, and
the ``title`` names a control that has no ``<label>`` (WCAG technique H65). A description
would draw the name a second time beside the control, and the static HTML would repeat it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import ipywidgets as w

from murmur_nb._forms.form import UNSET, FieldSpec, SchemaForm
from murmur_nb._render.card import said
from murmur_nb._rules import clipped, printable
from murmur_nb.widgets._file_picker import is_file_ref
from murmur_nb.widgets._html import FG_MUTED, esc, field_label, tone_colour

__all__ = [
    "NOT_SET",
    "Field",
    "accessible_name",
    "error_html",
    "flatten",
    "help_text",
    "option_label",
]

NOT_SET = "— not set —"


def option_label(value: Any) -> str:
    """An enum's value as its option reads, cut to a label's length, its control characters
    and bidirectional overrides written as escapes (:func:`~murmur_nb._rules.printable`)."""
    return printable(clipped(value if isinstance(value, str) else json.dumps(value)))


def flatten(
    values: Mapping[str, Any], form: SchemaForm, prefix: str = ""
) -> Iterator[tuple[str, Any]]:
    """``(dotted key, raw)`` pairs; a mapping given for an object field is descended into."""
    for name, raw in values.items():
        key = f"{prefix}{name}"
        spec = form.field(key)
        if spec.kind == "object" and isinstance(raw, Mapping) and not is_file_ref(spec):
            yield from flatten(raw, form, f"{key}.")
        else:
            yield key, raw


def help_text(spec: FieldSpec) -> str:
    """The line under a field: the schema's description, then its constraints in words."""
    return said(" — ".join(x for x in (spec.description, spec.hint) if x))


def accessible_name(spec: FieldSpec) -> str:
    """What a screen reader announces for a field's control (also its hover tooltip): the
    title, ``required`` when it is, then the help line; plain text, so escaped as text is
    (:func:`~murmur_nb._rules.printable`)."""
    name = f"{clipped(spec.title)} (required)" if spec.required else clipped(spec.title)
    line = help_text(spec)
    return printable(f"{name}: {line}" if line else name)


def error_html(message: str | None) -> str:
    if not message:
        return ""
    return f'<span style="color:{tone_colour("error")}">✗ {esc(message)}</span>'


class Field:
    """One input widget bound to one field of the schema form."""

    def __init__(self, spec: FieldSpec, form: SchemaForm) -> None:
        self.spec = spec
        raw = form.raw(spec.key)
        desc = w.Layout(width="auto")
        self.widget: w.Widget
        if spec.kind == "boolean" and isinstance(raw, bool):  # a default: a checkbox
            self.widget = w.Checkbox(value=bool(raw), indent=False, layout=desc)
        elif spec.kind == "boolean":
            self.widget = w.Dropdown(options=[(NOT_SET, -1), ("true", 1), ("false", 0)], value=-1)
        elif spec.kind == "enum":
            options = [(NOT_SET, -1)] + [(option_label(v), i) for i, v in enumerate(spec.options)]
            index = self._index_of(raw)
            self.widget = w.Dropdown(options=options, value=index)
        elif spec.kind == "array" and spec.item_kind == "enum":
            options = [(option_label(v), i) for i, v in enumerate(spec.options)]
            chosen = tuple(i for i, v in enumerate(spec.options) if v in tuple(raw))
            self.widget = w.SelectMultiple(options=options, value=chosen, rows=min(6, len(options)))
        elif spec.kind in ("array", "json"):
            hint = "one item per line" if spec.kind == "array" else "JSON"
            self.widget = w.Textarea(value=str(raw), placeholder=hint, rows=3)
        elif spec.kind == "string" and int(spec.schema.get("maxLength", 0) or 0) > 200:
            self.widget = w.Textarea(value=str(raw), rows=3)
        else:
            placeholder = {"number": "number", "integer": "whole number"}.get(spec.kind, "")
            self.widget = w.Text(value=str(raw), placeholder=placeholder)
        self.widget.tooltip = accessible_name(spec)
        self.error = w.HTML()
        line = help_text(spec)
        label = w.HTML(field_label(spec.title, required=spec.required))
        label.layout.width = "160px"
        row = w.HBox([label, self.widget])
        self.box = w.VBox(
            [row, w.HTML(f'<small style="color:{FG_MUTED}">{esc(line)}</small>'), self.error]
            if line
            else [row, self.error]
        )

    def _index_of(self, raw: Any) -> int:
        for i, v in enumerate(self.spec.options):
            if raw is not UNSET and v == raw and type(v) is type(raw):
                return i
        return -1

    def raw(self) -> Any:
        """The widget's value in the form's raw vocabulary."""
        value = self.widget.value
        spec = self.spec
        if spec.kind == "boolean":
            if isinstance(self.widget, w.Checkbox):
                return bool(value)
            return UNSET if value == -1 else bool(value)
        if spec.kind == "enum":
            return UNSET if value == -1 else spec.options[value]
        if spec.kind == "array" and spec.item_kind == "enum":
            return tuple(spec.options[i] for i in value)
        return value

    def show(self, raw: Any) -> None:
        """Put a raw value into the widget (the inverse of :meth:`raw`)."""
        spec = self.spec
        if spec.kind == "boolean":
            if isinstance(self.widget, w.Checkbox):
                self.widget.value = bool(raw)
            else:
                self.widget.value = -1 if raw is UNSET or raw is None else int(bool(raw))
        elif spec.kind == "enum":
            index = self._index_of(raw)
            if index == -1 and raw is not UNSET:
                raise ValueError(f"{raw!r} is not one of the choices for {spec.key!r}")
            self.widget.value = index
        elif spec.kind == "array" and spec.item_kind == "enum":
            values = list(raw)
            bad = [v for v in values if v not in spec.options]
            if bad:
                raise ValueError(f"{bad[0]!r} is not one of the choices for {spec.key!r}")
            self.widget.value = tuple(i for i, v in enumerate(spec.options) if v in values)
        elif isinstance(raw, list | tuple) and spec.kind == "array":
            self.widget.value = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in raw)
        elif spec.kind == "json" and not isinstance(raw, str):
            self.widget.value = json.dumps(raw)
        else:
            self.widget.value = "" if raw is UNSET or raw is None else str(raw)
