"""The headless form: JSON Schema -> fields, raw values -> JSON, errors beside each field.

``SchemaForm`` is internal: it is everything ``CapabilityForm`` does except drawing widgets,
tested here without ipywidgets; the widget tests cover the same behaviour through the widget.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from murmur_nb._forms.form import (  # private: the form without ipywidgets
    UNSET,
    SchemaForm,
    build_fields,
)

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["prompt", "count"],
    "properties": {
        "prompt": {"type": "string", "description": "What to draw.", "minLength": 1},
        "count": {"type": "integer", "minimum": 1, "maximum": 16, "default": 4},
        "scale": {"type": "number", "exclusiveMinimum": 0},
        "sharp": {"type": "boolean", "default": False},
        "mode": {"enum": ["fast", "best"], "default": "fast"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "sizes": {"type": "array", "items": {"type": "integer", "minimum": 8}},
        "channels": {"type": "array", "items": {"enum": ["r", "g", "b"]}, "uniqueItems": True},
        "style": {
            "type": "object",
            "description": "Colours.",
            "required": ["palette"],
            "properties": {
                "palette": {"$ref": "#/$defs/palette"},
                "gamma": {"type": ["number", "null"]},
            },
        },
        "extra": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "$defs": {"palette": {"type": "string", "enum": ["warm", "cold"], "title": "Palette"}},
}


def test_fields_follow_the_schema() -> None:
    root = build_fields(SCHEMA)
    got = [(f.key, f.kind, f.required) for f in root.walk()]
    assert got == [
        ("", "object", True),
        ("prompt", "string", True),
        ("count", "integer", True),
        ("scale", "number", False),
        ("sharp", "boolean", False),
        ("mode", "enum", False),
        ("tags", "array", False),
        ("sizes", "array", False),
        ("channels", "array", False),
        ("style", "object", False),
        ("style.palette", "enum", True),
        ("style.gamma", "number", False),
        ("extra", "json", False),
    ]
    form = SchemaForm(SCHEMA)
    assert form.field("prompt").description == "What to draw."
    assert form.field("prompt").label == "prompt *"
    assert form.field("count").hint == "≥ 1, ≤ 16"
    assert form.field("count").default == 4
    assert form.field("style.palette").title == "Palette"
    assert form.field("style.palette").options == ("warm", "cold")
    assert form.field("style.gamma").nullable
    assert form.field("channels").item_kind == "enum"
    assert form.field("sizes").item_kind == "integer"
    assert form.field("sizes").hint == "each ≥ 8"


def test_defaults_fill_the_form_and_required_fields_are_reported() -> None:
    form = SchemaForm(SCHEMA)
    assert form.raw("count") == "4"
    assert form.raw("sharp") is False
    assert form.raw("mode") == "fast"
    assert form.raw("scale") == ""
    assert form.value() == {"count": 4, "sharp": False, "mode": "fast"}
    assert form.errors() == {"prompt": "required"}
    form.set("prompt", "a cat")
    assert form.errors() == {}
    assert form.is_valid()


def test_invalid_values_are_reported_beside_their_field() -> None:
    form = SchemaForm(SCHEMA)
    form.set("prompt", "")
    form.set("count", "lots")
    form.set("scale", "-1")
    form.set("tags", "a\nb\nc\nd")
    form.set("sizes", "16\nbig\n32")
    form.set("style.gamma", "2.2")
    form.set("extra", "{not json")
    errors = form.errors()
    assert errors["prompt"] == "required"
    assert errors["count"] == "'lots' is not a number"
    assert errors["scale"] == "-1 is less than or equal to the minimum of 0"
    assert "is too long" in errors["tags"]
    assert errors["sizes"] == "item 2: 'big' is not a number"
    assert errors["style.palette"] == "required"
    assert errors["extra"].startswith("not valid JSON")
    assert set(errors) == {"prompt", "count", "scale", "tags", "sizes", "style.palette", "extra"}
    # a field that cannot be read is left out of the value, not sent half-parsed
    assert "count" not in form.value()


def test_array_item_schema_errors_name_the_item() -> None:
    form = SchemaForm(SCHEMA)
    form.set("prompt", "x")
    form.set("sizes", "16\n4")
    assert form.errors() == {"sizes": "item 2: 4 is less than the minimum of 8"}
    form.set("channels", ("r", "r"))
    assert "non-unique" in form.errors()["channels"]


def test_a_valid_form_gives_exactly_the_typed_request() -> None:
    form = SchemaForm(SCHEMA)
    form.set("prompt", "a cat")
    form.set("count", "8")
    form.set("scale", "0.5")
    form.set("sharp", True)
    form.set("mode", "best")
    form.set("tags", "x\n\ny\n")
    form.set("sizes", [8, "12"])
    form.set("channels", ("g", "b"))
    form.set("style.palette", "cold")
    form.set("extra", '{"k": "v"}')
    value = form.value()
    assert value == {
        "prompt": "a cat",
        "count": 8,
        "scale": 0.5,
        "sharp": True,
        "mode": "best",
        "tags": ["x", "y"],
        "sizes": [8, 12],
        "channels": ["g", "b"],
        "style": {"palette": "cold"},
        "extra": {"k": "v"},
    }
    assert form.errors() == {}
    jsonschema.validate(value, SCHEMA)
    form.reset()
    assert form.value() == {"count": 4, "sharp": False, "mode": "fast"}


def test_unset_optional_values_are_left_out() -> None:
    form = SchemaForm(SCHEMA)
    form.set("prompt", "p")
    form.set("mode", UNSET)
    form.set("sharp", UNSET)
    form.set("count", "  ")
    assert form.value() == {"prompt": "p"}
    assert form.errors() == {"count": "required"}


def test_enum_values_keep_their_json_type() -> None:
    form = SchemaForm({"type": "object", "properties": {"level": {"enum": [1, "1", None, True]}}})
    form.set("level", None)
    assert form.value() == {"level": None}
    form.set("level", 1)
    assert form.value() == {"level": 1}
    form.set("level", 2)
    assert form.errors() == {"level": "2 is not one of the choices"}


def test_integers_accept_whole_floats_and_refuse_fractions() -> None:
    form = SchemaForm({"type": "object", "properties": {"n": {"type": "integer"}}})
    form.set("n", "3.0")
    assert form.value() == {"n": 3}
    form.set("n", "3.5")
    assert form.errors() == {"n": "'3.5' is not a whole number"}
    form.set("n", "nan")
    assert form.errors() == {"n": "'nan' is not a finite number"}
    form.set("n", True)
    assert form.errors() == {"n": "True is not a number"}


@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers())
def test_numbers_round_trip_through_text(number: float) -> None:
    form = SchemaForm({"type": "object", "properties": {"x": {"type": "number"}}})
    form.set("x", json.dumps(number))
    assert form.errors() == {}
    got = form.value()["x"]
    assert got == number or math.isclose(got, number)


@given(st.text())
def test_any_text_in_a_number_field_gives_a_value_or_an_error(text: str) -> None:
    form = SchemaForm({"type": "object", "properties": {"x": {"type": "integer", "maximum": 9}}})
    form.set("x", text)
    errors = form.errors()
    value = form.value()
    if text.strip() == "":
        assert value == {} and errors == {}
    elif "x" in errors:
        assert "x" not in value or value["x"] > 9
    else:
        jsonschema.validate(value, form.schema)
        assert isinstance(value["x"], int)


def test_non_object_and_unusual_schemas_fall_back_to_json_text() -> None:
    form = SchemaForm({"type": "string", "maxLength": 3})
    assert form.root.kind == "string"
    form.set("", "abcd")
    assert form.errors() == {"": "'abcd' is too long"}
    alternatives = {"oneOf": [{"type": "integer"}, {"type": "string"}]}
    one_of = SchemaForm({"type": "object", "properties": {"v": alternatives}})
    assert one_of.field("v").kind == "json"
    one_of.set("v", "7")
    assert one_of.value() == {"v": 7}
    cyclic = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
    }
    assert [f.key for f in SchemaForm(cyclic).fields][:2] == ["node", "node.next"]
    remote = SchemaForm({"type": "object", "properties": {"r": {"$ref": "other.json"}}})
    assert remote.field("r").kind == "json"
    nullable = SchemaForm(
        {"type": "object", "properties": {"t": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    )
    assert nullable.field("t").kind == "string"
    assert nullable.field("t").nullable


def test_unknown_field_names_say_which_fields_exist() -> None:
    form = SchemaForm(SCHEMA)
    try:
        form.set("nope", 1)
    except KeyError as exc:
        assert "no field 'nope'" in str(exc)
        assert "prompt" in str(exc)
    else:
        raise AssertionError("setting an unknown field must fail")


def test_schema_form_does_not_import_ipywidgets() -> None:
    code = "import sys, murmur_nb._forms.form; print('ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_empty_schema_is_one_json_field() -> None:
    form = SchemaForm({})
    assert form.root.kind == "json"
    assert form.value() is None
    form.set("", '{"anything": [1, 2]}')
    assert form.value() == {"anything": [1, 2]}
    assert form.errors() == {}
    assert SchemaForm(True).root.kind == "json"


def test_booleans_without_a_default_start_unset() -> None:
    form = SchemaForm(
        {"type": "object", "required": ["on"], "properties": {"on": {"type": "boolean"}}}
    )
    assert form.raw("on") is UNSET
    assert form.errors() == {"on": "required"}
    form.set("on", "yes")
    assert form.value() == {"on": True}
    form.set("on", "maybe")
    assert form.errors() == {"on": "'maybe' is not true or false"}


_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), min_size=1
).filter(lambda t: t.strip() != "")
_finite = st.floats(allow_nan=False, allow_infinity=False, width=32)


_CASES = st.fixed_dictionaries(
    {
        "prompt": _line,
        "count": st.integers(1, 16),
        "scale": st.none() | st.floats(min_value=0.001, max_value=1e6),
        "sharp": st.booleans(),
        "mode": st.sampled_from(["fast", "best"]),
        "tags": st.lists(_line, max_size=3),
        "sizes": st.lists(st.integers(8, 10**9), max_size=5),
        "channels": st.lists(st.sampled_from(["r", "g", "b"]), unique=True),
        "palette": st.sampled_from(["warm", "cold"]),
        "gamma": st.none() | _finite,
    }
)


@given(_CASES)
def test_typed_text_round_trips_to_the_value_a_person_meant(case: dict[str, Any]) -> None:
    form = SchemaForm(SCHEMA)
    form.set("prompt", case["prompt"])
    form.set("count", str(case["count"]))
    form.set("scale", "" if case["scale"] is None else repr(case["scale"]))
    form.set("sharp", case["sharp"])
    form.set("mode", case["mode"])
    form.set("tags", "\n".join(case["tags"]))
    form.set("sizes", "\n".join(str(n) for n in case["sizes"]))
    form.set("channels", tuple(case["channels"]))
    form.set("style.palette", case["palette"])
    form.set("style.gamma", "" if case["gamma"] is None else repr(case["gamma"]))
    expected: dict[str, Any] = {k: case[k] for k in ("prompt", "count", "sharp", "mode")}
    for key in ("scale", "tags", "sizes", "channels"):
        if case[key]:
            expected[key] = case[key]
    gamma = {} if case["gamma"] is None else {"gamma": case["gamma"]}
    expected["style"] = {"palette": case["palette"], **gamma}
    assert form.value() == expected
    assert form.errors() == {}
    jsonschema.validate(form.value(), SCHEMA)


def test_an_object_that_admits_no_property_has_no_fields_and_is_empty() -> None:
    closed = SchemaForm({"type": "object", "properties": {}, "additionalProperties": False})
    assert closed.root.kind == "object" and closed.fields == []
    assert (closed.value(), closed.errors(), repr(closed)) == ({}, {}, "SchemaForm(no fields)")
    for schema in (
        {"type": "object", "properties": {}},
        {"type": "object", "additionalProperties": False},
    ):
        assert build_fields(schema).kind == "object"
    nested = SchemaForm(
        {
            "type": "object",
            "required": ["must"],
            "properties": {
                "must": {"type": "object", "properties": {}},
                "may": {"type": "object", "properties": {}},
            },
        }
    )
    assert [(f.key, f.kind) for f in nested.fields] == [("must", "object"), ("may", "object")]
    assert nested.value() == {"must": {}} and nested.errors() == {}
    # open to properties the form cannot name: still edited as JSON text
    typed = {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}
    assert build_fields(typed).kind == "json"
    assert build_fields({"type": "object", "patternProperties": {"^x": {}}}).kind == "json"


def test_an_untouched_free_object_input_is_an_empty_object() -> None:
    """``invoke`` reads ``None`` as ``{}``; the form agrees, so an empty root is not an error."""
    form = SchemaForm({"type": "object"})
    assert form.root.kind == "json"
    assert form.value() == {} and form.errors() == {}
    form.set("", "[1]")
    assert form.errors() == {"": "[1] is not of type 'object'"}


def test_a_number_too_long_to_quote_is_cut_and_called_out_of_range() -> None:
    form = SchemaForm({"type": "object", "properties": {"n": {"type": "number"}}})
    form.set("n", "9" * 5000)
    assert form.errors() == {
        "n": f"'{'9' * 40}…' (5,000 characters) is too large: out of the range of numbers"
    }
    form.set("n", "-1e999")
    assert form.errors() == {"n": "'-1e999' is too small: out of the range of numbers"}
    form.set("n", "x" * 300)
    assert form.errors() == {"n": f"'{'x' * 40}…' (300 characters) is not a number"}
    form.set("n", "Infinity")
    assert form.errors() == {"n": "'Infinity' is not a finite number"}
