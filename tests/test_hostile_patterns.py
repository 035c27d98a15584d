"""Issue 13, point 7: a module's regexes are evaluated in linear time, everywhere."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import write_descriptor

import murmur_nb as mnb
from murmur_nb._schemas.bounded import (  # private: the bounded check, timed on its own
    check,
    fast_validator,
)
from murmur_nb._schemas.schemas import (  # private: the factory, timed against the 50 ms goal
    validator_class as schema_validator_class,
)
from murmur_nb.widgets import CapabilityForm

EVIL = "^(a+)+$"  # exponential for a backtracking engine on "aaa...a!"
# 40 characters: Python's re would need about 2**40 steps (days); RE2 needs 41
NEAR_MISS = "a" * 40 + "!"


def _descriptor(request: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    def cap(name: str, req: str, res: str) -> dict[str, Any]:
        return {"id": f"hostile.{name}", "title": name, "summary": name, "request_schema": req,
                "result_schema": res, "artifact_schemas": [], "skills": [],
                "long_running": False,
                "effects": {"local": True, "network": False, "external_writes": False,
                            "provider": "", "cost_known": True}}

    return {
        "module": "hostile", "name": "Hostile", "version": "1.0.0",
        "protocol_versions": ["modproto.v1"],
        "capabilities": [cap("result", "evil_in", "evil_out"), cap("echo", "evil_in", "any")],
        "request_schemas": {"evil_in": request}, "result_schemas": {"evil_out": result,
                                                                    "any": {}},
        "artifact_schemas": {}, "agent_overlays": [], "skills": [],
        "permissions": {"filesystem_read": [], "filesystem_write": [], "network": [],
                        "credentials": [], "paid_providers": [], "publish": False,
                        "subprocess": []},
        "requirements": [],
    }


REQUEST = {
    "type": "object",
    "properties": {
        "result": {},
        "name": {"type": "string", "pattern": EVIL, "default": NEAR_MISS},
        "tags": {"type": "object", "patternProperties": {EVIL: {"type": "integer"}},
                 "additionalProperties": False},
    },
}
RESULT = {
    "type": "object",
    "properties": {"text": {"type": "string", "pattern": EVIL}},
    "patternProperties": {EVIL: {"type": "integer"}},
}


FACET_MODULES = [("hostile", "hostile_output")]


@pytest.fixture
def facet_home(facet_home: Path) -> Path:
    """The hostile module, described with the catastrophic patterns of this file."""
    write_descriptor(facet_home / "modules" / "hostile", _descriptor(REQUEST, RESULT))
    return facet_home


@pytest.fixture
def host(facet_home: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home) as h:
        yield h


def test_catastrophic_pattern_in_the_result_check_is_linear(host: mnb.ModuleHost) -> None:
    result = {"text": NEAR_MISS, NEAR_MISS: "not an integer", "a" * 30: 1}
    started = time.perf_counter()
    inv = host.invoke("hostile.result", {"result": result})
    elapsed = time.perf_counter() - started
    assert inv.ok and inv.result == result
    (warning,) = [w for w in inv.warnings if "result_schema" in w]
    assert "does not match '^(a+)+$'" in warning
    assert elapsed < 10  # a backtracking engine would still be at it in a year


def test_catastrophic_pattern_in_the_request_check_is_linear(host: mnb.ModuleHost) -> None:
    started = time.perf_counter()
    with pytest.raises(mnb.InvalidInput, match=r"does not match '\^\(a\+\)\+\$'"):
        host.invoke("hostile.echo", {"name": NEAR_MISS})
    with pytest.raises(mnb.InvalidInput, match="do not match any of the regexes"):
        host.invoke("hostile.echo", {"tags": {NEAR_MISS: 1}})
    assert host.invoke("hostile.echo", {"name": "a" * 5000, "tags": {"aaaa": 2}}).ok
    assert time.perf_counter() - started < 10


def test_form_with_a_catastrophic_default_builds_at_once(host: mnb.ModuleHost) -> None:
    started = time.perf_counter()
    form = CapabilityForm(host, "hostile.echo")
    assert "name" in form.form.errors()
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("size", [1 << 10, 1 << 20])
def test_validation_stays_under_50_ms(size: int) -> None:
    """The 50 ms goal on the factory's validator itself (best of three: the machine is shared)."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}},
              "patternProperties": {EVIL: {}, "^(a|aa)+$": {}}, "additionalProperties": False}
    validator = schema_validator_class(schema)(schema)
    instance = {"s": "a" * size + "!", "a" * 64 + "!": 1}
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        errors = list(validator.iter_errors(instance))
        best = min(best, time.perf_counter() - started)
    assert len(errors) == 2
    assert best < 0.050, f"{best * 1000:.1f} ms"


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "string", "pattern": "(a)\\1"}, "uses a back-reference ('\\\\1'"),
        ({"type": "string", "pattern": "^(?=a)a$"}, "uses a lookahead ('(?=' at position 1)"),
        ({"patternProperties": {"(?<!x)y": {}}}, "uses a lookbehind ('(?<!'"),
        ({"type": "string", "pattern": "^(?!admin$)"}, "not: {pattern: ...}"),
        ({"type": "string", "pattern": "\\p{Emoji}"}, "not binary properties"),
    ],
)
def test_patterns_re2_cannot_run_refuse_the_module(
    facet_home: Path, schema: Any, words: str
) -> None:
    write_descriptor(facet_home / "modules" / "hostile", _descriptor(schema, {}))
    with mnb.ModuleHost(home=facet_home) as host:
        (info,) = host.modules()
        assert not info.ok
        assert any(words in e.detail and e.path == "request_schemas.evil_in"
                   for e in info.errors), info.errors
        with pytest.raises(mnb.InvalidDescriptor):
            host.invoke("hostile.echo", {})


def test_ecma_unicode_escapes_still_match() -> None:
    schema = {"type": "string", "pattern": "^\\u00e9+$"}
    validator = schema_validator_class(schema)(schema)
    assert validator.is_valid("éé") and not validator.is_valid("e")


# -- bounded work: the pattern budget and a linear uniqueItems ------------------------------

DFA_HOSTILE = "[ab]*a[ab]{20}$"  # about 2**21 DFA states: RE2 runs it at its slowest
MIB = 1 << 20


def _result_home(facet_home: Path, result: dict[str, Any]) -> Path:
    write_descriptor(facet_home / "modules" / "hostile", _descriptor(REQUEST, result))
    return facet_home


def test_a_result_at_the_output_bound_under_a_dfa_hostile_pattern_is_not_scanned(
    facet_home: Path,
) -> None:
    """The module prints a 15 MiB string under a pattern built to defeat RE2's DFA: the
    result check refuses to scan past the budget and says why; nothing stalls."""
    home = _result_home(facet_home, {"properties": {"text": {"pattern": DFA_HOSTILE}}})
    policy = mnb.Policy(max_output_bytes=32 * MIB)
    with mnb.ModuleHost(home=home, policy=policy) as host:
        inv = host.invoke("hostile.result", {"generate": {"alphabet": "ab", "length": 15 * MIB}})
    assert inv.ok and len(inv.result["text"]) == 15 * MIB
    (warning,) = [w for w in inv.warnings if "result_schema" in w]
    assert "over its budget of 4,194,304" in warning and "max_pattern_work" in warning
    roomy = mnb.Policy(max_output_bytes=32 * MIB, max_pattern_work=64 * MIB)
    with mnb.ModuleHost(home=home, policy=roomy) as host:  # trusted: checked in full
        inv = host.invoke("hostile.result", {"generate": {"alphabet": "ab", "length": 15 * MIB}})
    assert inv.ok and not [w for w in inv.warnings if "result_schema" in w]


def test_many_patterns_share_one_budget_in_the_request_check(host: mnb.ModuleHost) -> None:
    """200 patterns over one 100 kB name: the budget is per check, not per pattern."""
    schema = {"allOf": [{"properties": {"name": {"pattern": f"^a*{i}?a$"}}} for i in range(200)]}
    validator = schema_validator_class(schema)(schema)
    errors = check(validator, {"name": "a" * 100_000})
    assert len(errors) < 200 and "over its budget" in errors[-1].message  # stopped early
    started = time.perf_counter()
    with pytest.raises(mnb.InvalidInput, match="over its budget"):
        host.invoke("hostile.echo", {"name": "a" * 5 * MIB})
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("pattern", [EVIL, DFA_HOSTILE])
@pytest.mark.parametrize("size", [1 << 10, MIB, 4 * MIB - 1024, 16 * MIB])
def test_a_check_with_hostile_patterns_scans_at_most_its_budget(pattern: str, size: int) -> None:
    """Up to the budget the string is matched (RE2, linear); past it, nothing is scanned and
    the check says so. Its speed (under 50 ms at the worst) is measured by
    ``benchmarks/bench_checks.py``; here only a regression to seconds would fail."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}},
              "patternProperties": {pattern: {}, "^(a|aa)+$": {}}, "additionalProperties": False}
    validator = schema_validator_class(schema)(schema)
    text = "a" * size + "!" if pattern == EVIL else ("ab" * size)[:size]
    instance = {"s": text, "a" * 64 + "!": 1}
    started = time.perf_counter()
    errors = check(validator, instance)
    assert time.perf_counter() - started < 1.0
    spent = [e for e in errors if "over its budget" in e.message]
    assert bool(spent) is (size > 4 * MIB), [e.message[:80] for e in errors]


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([1, True], True),
        ([0, False, None, ""], True),
        ([{"a": 1, "b": [1, 2]}, {"b": [1.0, 2], "a": 1}], False),
        ([[1, 2], [2, 1]], True),
        ([{"a": None}, {"a": None}], False),
        (["x", "x "], True),
    ],
)
def test_unique_items_keeps_json_equality(items: list[Any], unique: bool) -> None:
    validator = schema_validator_class({})({"uniqueItems": True})
    assert (check(validator, items) == []) is unique


def test_unique_items_over_a_large_result_is_linear(facet_home: Path) -> None:
    """100,000 distinct objects under ``uniqueItems`` (``jsonschema`` alone compares every
    pair: 4,000 took 26 s), then the same with the first object repeated at the end."""
    home = _result_home(facet_home, {"properties": {"items": {"uniqueItems": True}}})
    with mnb.ModuleHost(home=home) as host:
        started = time.perf_counter()
        fine = host.invoke("hostile.result", {"generate": {"objects": 100_000}})
        elapsed = time.perf_counter() - started
        repeated = host.invoke(
            "hostile.result", {"generate": {"objects": 100_000, "repeat_first": True}}
        )
    assert fine.ok and not [w for w in fine.warnings if "result_schema" in w]
    assert elapsed < 20, f"{elapsed:.1f} s"
    (warning,) = [w for w in repeated.warnings if "result_schema" in w]
    assert "non-unique" in warning and len(warning) < 500


def test_unique_items_with_a_pattern_in_the_schema_is_linear_too(facet_home: Path) -> None:
    """A pattern in the schema keeps the fast engine out: ``jsonschema`` itself, with the
    linear ``uniqueItems``, checks 100,000 objects and names the repeated pair."""
    home = _result_home(facet_home, {"properties": {
        "items": {"uniqueItems": True, "items": {"properties": {"name": {"pattern": "^item"}}}}}})
    with mnb.ModuleHost(home=home) as host:
        started = time.perf_counter()
        repeated = host.invoke(
            "hostile.result", {"generate": {"objects": 100_000, "repeat_first": True}}
        )
        elapsed = time.perf_counter() - started
    (warning,) = [w for w in repeated.warnings if "result_schema" in w]
    assert "items 0 and 100000 are equal" in warning
    assert elapsed < 60, f"{elapsed:.1f} s"


#: ``anyOf`` whose first branch recurses all the way down, then fails: every level checks
#: everything below it twice, 2**depth work for ``jsonschema`` without a budget.
EXPONENTIAL = {
    "$defs": {"n": {"anyOf": [
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["never"]},
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/n"},
                                          "tag": {"pattern": "^t"}}},
    ]}},
    "$ref": "#/$defs/n",
}


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


def test_a_schema_that_multiplies_the_work_stops_at_the_step_budget(facet_home: Path) -> None:
    """40 levels: 2**40 keyword evaluations unbounded; the check stops at the policy's step
    budget and says so, in the result check of a real module's output."""
    validator = schema_validator_class(EXPONENTIAL)(EXPONENTIAL)
    assert check(validator, _nested(6)) == []  # small values check as usual
    started = time.perf_counter()
    (error,) = check(validator, _nested(40), steps=200_000)
    assert time.perf_counter() - started < 10
    assert "more than 200,000 keyword evaluations" in error.message
    home = _result_home(facet_home, EXPONENTIAL)
    with mnb.ModuleHost(home=home, policy=mnb.Policy(max_schema_steps=200_000)) as host:
        started = time.perf_counter()
        inv = host.invoke("hostile.result", {"result": _nested(40)})
        elapsed = time.perf_counter() - started
    (warning,) = [w for w in inv.warnings if "result_schema" in w]
    assert "keyword evaluations" in warning and "max_schema_steps" in warning
    assert elapsed < 20, f"{elapsed:.1f} s"


# -- the fast accept: same verdicts, bulk results in milliseconds ------------------------------

VERDICT_TABLE: list[tuple[dict[str, Any], list[Any]]] = [
    ({"multipleOf": 0.01}, [0.07, 1.1, 19.99, 3]),  # jsonschema divides floats: not eligible
    ({"type": "integer"}, [1.0, 2**70, -(2**70), 1.5, True]),
    ({"maximum": 2**64}, [2**65, 2**63]),
    ({"enum": [1, "a", {"x": 1}]}, [1.0, True, {"x": 1.0}, "a"]),
    ({"const": [1, {"a": 1}]}, [[1.0, {"a": 1.0}], [True, {"a": 1}]]),
    ({"uniqueItems": True}, [[1, 1.0], [1, True], [{"a": 1, "b": 2}, {"b": 2, "a": 1}]]),
    ({"minLength": 2, "maxLength": 2}, ["\U0001f600\U0001f600", "\U0001f600", "ab"]),
    ({"format": "email"}, ["not an address"]),
    ({"dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}]),
    ({"unevaluatedProperties": False, "properties": {"a": {}}}, [{"a": 1}, {"b": 1}]),
    ({"$defs": {"n": {"type": "number"}}, "items": {"$ref": "#/$defs/n"}}, [[1, "x"], [1, 2]]),
    ({"if": {"type": "string"}, "then": {"minLength": 3}, "else": {"type": "number"}},
     ["ab", "abc", None, 1]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}],
      "additionalItems": False}, [["a"], ["a", 1]]),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 5,
      "exclusiveMaximum": True}, [5, 4]),
    ({"contains": {"type": "string"}, "minContains": 2}, [["a", 1], ["a", "b"]]),
    ({"properties": {"s": {"pattern": "^a+$"}}}, [{"s": "aa"}, {"s": "ab"}]),  # not eligible
    ({"$ref": "http://example.invalid/schema.json"}, [1]),  # never fetched
]


@pytest.mark.parametrize(("schema", "instances"), VERDICT_TABLE)
def test_the_fast_accept_never_changes_a_verdict(
    schema: dict[str, Any], instances: list[Any]
) -> None:
    """Internal (:mod:`murmur_nb._schemas.bounded`): with and without the fast accept, the
    same values are refused, with the same messages."""
    validator = schema_validator_class(schema)(schema)
    fast = fast_validator(schema)
    for value in instances:
        try:
            plain = [e.message for e in check(validator, value)]
        except Exception as exc:
            with pytest.raises(type(exc)):
                check(validator, value, fast=fast)
            continue
        assert [e.message for e in check(validator, value, fast=fast)] == plain, value


def test_a_bulk_result_is_checked_in_milliseconds() -> None:
    """300,000 small objects (15 MiB of JSON): ``jsonschema`` alone takes seconds."""
    schema = {"type": "array", "items": {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}}
    items = [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(300_000)]
    validator = schema_validator_class(schema)(schema)
    fast = fast_validator(schema)
    assert fast is not None
    # CPU time, best of three: other jobs on a shared CI machine do not stretch it
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        assert check(validator, items, fast=fast) == []
        best = min(best, time.process_time() - started)
    assert best < 0.5, f"{best * 1000:.0f} ms"
    items[-1]["tags"] = ["a", "a"]  # a refusal is still jsonschema's, with its message
    (error,) = check(validator, items, fast=fast, limit=1, steps=10_000_000)
    assert "items 0 and 1 are equal" in error.message and list(error.path) == [299_999, "tags"]
    # the result check lets the fast engine name the problem: no walk through 300,000 items
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        (error,) = check(validator, items, fast=fast, limit=1, fast_refusal=True)
        best = min(best, time.process_time() - started)
    assert "non-unique" in error.message and list(error.path) == [299_999, "tags"]
    assert best < 0.5, f"{best * 1000:.0f} ms"
    # without the fast engine's help the default step budget ends the walk, and says so
    (error,) = check(validator, items, fast=fast, limit=1)
    assert "more than 1,000,000 keyword evaluations" in error.message
    items[0] = {"id": "x" * 1_000_000}  # a huge bad value is not copied into the message
    for refusal in (True, False):
        (error,) = check(validator, items, fast=fast, limit=1, fast_refusal=refusal)
        assert len(error.message) < 400 and list(error.path) == [0, "id"]


# -- issue 25: every valid 2020-12 schema is accepted and judged as jsonschema judges it ---

UNEVALUATED = {
    "type": "object",
    "properties": {"id": {"type": "integer"}},
    "patternProperties": {"^x-": {"type": "string"}, "^n_[0-9]+$": {"type": "number"}},
    "allOf": [{"patternProperties": {"^meta_": {"type": "boolean"}}}],
    "unevaluatedProperties": False,
}
UNEVALUATED_TABLE = [
    {}, {"id": 1}, {"id": 1, "x-a": "s"}, {"x-a": 3}, {"n_12": 1.5}, {"n_1a": 1},
    {"meta_ok": True}, {"meta_ok": "no"}, {"other": 1}, {"id": 1, "x-": "", "n_0": 0},
    {"X-a": "s"}, [], "text",
]


def test_unevaluated_properties_beside_pattern_properties_is_judged_as_jsonschema_does() -> None:
    """The host's validator (RE2) and plain jsonschema (``re``, safe on these patterns) agree
    on every instance of the table; and a module using the idiom is accepted."""
    import jsonschema

    ours = schema_validator_class(UNEVALUATED)(UNEVALUATED)
    reference = jsonschema.Draft202012Validator(UNEVALUATED)
    verdicts = [ours.is_valid(i) for i in UNEVALUATED_TABLE]
    assert verdicts == [reference.is_valid(i) for i in UNEVALUATED_TABLE]
    assert True in verdicts and False in verdicts


def test_unevaluated_properties_patterns_run_in_linear_time() -> None:
    schema = {"patternProperties": {EVIL: {}}, "unevaluatedProperties": False}
    validator = schema_validator_class(schema)(schema)
    started = time.perf_counter()
    assert not validator.is_valid({NEAR_MISS: 1})
    assert validator.is_valid({"a" * 40: 1})
    assert time.perf_counter() - started < 0.5


def _unicode_truth(text: str, categories: tuple[str, ...]) -> bool:
    import unicodedata

    return bool(text) and all(unicodedata.category(c).startswith(categories) for c in text)


PROPERTY_SCHEMAS = [
    ("^\\p{Letter}+$", ("L",)),
    ("^\\p{L}+$", ("L",)),
    ("^\\p{General_Category=Decimal_Number}+$", ("Nd",)),
    ("^\\p{gc=Lu}+$", ("Lu",)),
    ("^[\\p{Lowercase_Letter}\\p{Nd}]+$", ("Ll", "Nd")),
    ("^\\p{Cased_Letter}+$", ("Lu", "Ll", "Lt")),
]
TEXTS = ["abc", "ÉCOLE", "日本語", "Ωμέγα", "٣٤٥", "123", "a1", "a b", "", "😀", "Ǆ", "x-y"]


@pytest.mark.parametrize(("pattern", "categories"), PROPERTY_SCHEMAS)
def test_unicode_property_escapes_are_accepted_and_match_unicode(
    facet_home: Path, pattern: str, categories: tuple[str, ...]
) -> None:
    schema = {"type": "string", "pattern": pattern}
    write_descriptor(facet_home / "modules" / "hostile", _descriptor(
        {"type": "object", "properties": {"name": schema}}, {}))
    with mnb.ModuleHost(home=facet_home) as host:
        (info,) = host.modules()
        assert info.ok, info.errors
    validator = schema_validator_class(schema)(schema)
    assert [validator.is_valid(t) for t in TEXTS] == [
        _unicode_truth(t, categories) for t in TEXTS
    ]


def test_script_escapes_match_their_script() -> None:
    for pattern in ("^\\p{Script=Greek}+$", "^\\p{sc=Grek}+$"):
        schema = {"type": "string", "pattern": pattern}
        validator = schema_validator_class(schema)(schema)
        assert validator.is_valid("Ωμέγα") and not validator.is_valid("omega")
    negated = {"type": "string", "pattern": "^\\P{ASCII}+$"}
    validator = schema_validator_class(negated)(negated)
    assert validator.is_valid("日本") and not validator.is_valid("a日")
