"""Issue 13, point 7: a module's regexes are evaluated in linear time, everywhere."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import write_descriptor

import murmur_nb as mnb
from murmur_nb._modules.schemas import validator_class as schema_validator_class
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
        ({"type": "string", "pattern": "(a)\\1"}, "backreferences"),
        ({"type": "string", "pattern": "^(?=a)a$"}, "lookaround"),
        ({"patternProperties": {"(?<!x)y": {}}}, "RE2"),
        ({"patternProperties": {"^a": {}}, "unevaluatedProperties": False},
         "unevaluatedProperties"),
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
