"""The modproto wire models: JSON round-trips by the Go ``json:`` tags."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murmur_nb.protocol import (
    PROTOCOL_ID,
    Artifact,
    Capability,
    Descriptor,
    Envelope,
    Error,
    Execution,
    Grants,
    Overlay,
    Permissions,
    Request,
    Requirement,
    Root,
    Skill,
)
from murmur_nb.protocol._fold import shadowing_keys  # private: the oracle of host-owned keys

DIGEST = "sha256:" + "0123456789abcdef" * 4

# Documents as the Go seed marshals them: struct fields in declaration order, every
# non-omitempty field present, nil slices and maps as null.
GO_DOCUMENTS: list[tuple[type[Any], str]] = [
    (Artifact, '{"id":"a","kind":"image","path":"p/a.png","root":"out","media_type":"image/png",'
               f'"bytes":3,"digest":"{DIGEST}"}}'),
    (Artifact, '{"id":"a","kind":"k","path":"t.json","root":"out","presentation":"timeline",'
               f'"media_type":"application/json","bytes":0,"digest":"{DIGEST}","title":"T"}}'),
    (Capability, '{"id":"m.c","title":"","summary":"","request_schema":"in","result_schema":"out",'
                 '"artifact_schemas":null,"effects":{"local":false,"network":false,'
                 '"external_writes":false,"provider":"","cost_known":false},"skills":null,'
                 '"long_running":false}'),
    (Capability, '{"id":"m.c","title":"C","summary":"s","request_schema":"in",'
                 '"result_schema":"out","artifact_schemas":[],"effects":{"local":true,"network":true,'
                 '"external_writes":false,"provider":"p","cost_known":true},"skills":["k"],'
                 '"long_running":true,"poll_capability":"m.poll"}'),
    (Overlay, f'{{"id":"o","title":"","path":"o.md","digest":"{DIGEST}","tokens":0}}'),
    (Skill, f'{{"id":"s","title":"","summary":"","path":"s.md","digest":"{DIGEST}","tokens":7}}'),
    (Permissions, '{"filesystem_read":null,"filesystem_write":["out"],"network":[],'
                  '"credentials":null,"paid_providers":null,"publish":true,"subprocess":["ffmpeg"]}'),
    (Requirement, '{"kind":"binary","name":"ffmpeg","available":false}'),
    (Requirement, '{"kind":"env","name":"X","available":true,"detail":"set X"}'),
    (Error, '{"code":"c","message":"","retryable":false,"details":null}'),
    (Error, '{"code":"c","message":"m","retryable":true,"details":{"a":[1,{"b":null}]}}'),
    (Execution, '{"local":false,"network":false,"external_writes":false,"provider":"",'
                '"estimated_cost":null,"actual_cost":null,"artifacts":null}'),
    (Execution, '{"local":true,"network":true,"external_writes":true,"provider":"p",'
                '"estimated_cost":0,"actual_cost":0.5,"artifacts":[]}'),
    (Grants, '{"network":null,"credentials":[],"paid_providers":null,"publish":false,'
             '"subprocess":["ffmpeg"]}'),
    (Root, '{"path":"/data","mode":"ro"}'),
    (Envelope, '{"protocol":"modproto.v1","module":"m","operation":"invoke","request_id":"r",'
               '"ok":true,"result":{"n":1},"warnings":[],"execution":{"local":false,'
               '"network":false,"external_writes":false,"provider":"","estimated_cost":null,'
               '"actual_cost":0,"artifacts":null}}'),
    (Envelope, '{"protocol":"modproto.v1","module":"m","operation":"invoke","request_id":"r",'
               '"ok":false,"error":{"code":"x","message":"y","retryable":false,"details":null},'
               '"warnings":["w"],"execution":{"local":false,"network":false,'
               '"external_writes":false,"provider":"","estimated_cost":1.5,"actual_cost":null,'
               '"artifacts":null}}'),
    (Envelope, '{"protocol":"modproto.v1","module":"m","operation":"invoke","request_id":"r",'
               '"ok":true,"result":0,"warnings":[],"execution":{"local":false,"network":false,'
               '"external_writes":false,"provider":"","estimated_cost":null,"actual_cost":null,'
               '"artifacts":null}}'),
    (Request, '{"protocol":"modproto.v1","capability":"m.c","request_id":"r","input":{"k":[1]},'
              '"roots":{"a":{"path":"/a","mode":"ro"},"b":{"path":"/b","mode":"rw"}},'
              '"grants":{"network":null,"credentials":null,"paid_providers":null,'
              '"publish":false,"subprocess":null},"binaries":{"ffmpeg":"/usr/bin/ffmpeg"},'
              '"deadline_ms":1000,"max_output_bytes":4096}'),
]


@pytest.mark.parametrize(("model", "text"), GO_DOCUMENTS,
                         ids=[f"{m.__name__}-{i}" for i, (m, _) in enumerate(GO_DOCUMENTS)])
def test_go_documents_round_trip_exactly(model: type[Any], text: str) -> None:
    value = model.from_json(text)
    assert value.to_json() == text
    assert list(json.loads(value.to_json())) == list(json.loads(text))  # Go field order


def test_descriptor_round_trips() -> None:
    doc = {
        "module": "m", "name": "M", "version": "1", "protocol_versions": [PROTOCOL_ID],
        "capabilities": [json.loads(GO_DOCUMENTS[3][1])],
        "request_schemas": {"in": {"type": "object"}}, "result_schemas": {"out": True},
        "artifact_schemas": None, "agent_overlays": [], "skills": None,
        "permissions": json.loads(GO_DOCUMENTS[6][1]),
        "requirements": [{"kind": "binary", "name": "ffmpeg", "available": False}],
    }
    text = json.dumps(doc, separators=(",", ":"))
    assert Descriptor.from_json(text).to_json() == text


def test_omitempty_fields_are_left_out_when_empty() -> None:
    art = Artifact(id="a", kind="k", path="p", root="r", media_type="t", bytes=0, digest=DIGEST)
    assert "presentation" not in art.to_json() and "title" not in art.to_json()
    cap = Capability(id="m.c")
    assert "poll_capability" not in cap.to_json()
    assert "detail" not in Requirement(kind="env", name="X").to_json()
    env = Envelope(protocol=PROTOCOL_ID, module="m", operation="invoke", request_id="r", ok=True)
    dumped = json.loads(env.to_json())
    assert "result" not in dumped and "error" not in dumped
    assert dumped["warnings"] == []  # an array, never null


def test_null_cost_and_zero_cost_stay_distinct() -> None:
    unknown = Execution.from_json('{"estimated_cost":null,"actual_cost":null}')
    free = Execution.from_json('{"estimated_cost":0,"actual_cost":0}')
    assert unknown.estimated_cost is None and unknown.actual_cost is None
    assert free.estimated_cost == 0 and free.actual_cost == 0
    assert json.loads(unknown.to_json())["actual_cost"] is None
    assert json.loads(free.to_json())["actual_cost"] == 0
    missing = Execution.from_json("{}")
    assert missing.estimated_cost is None  # absent is unknown, never free


@given(
    est=st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False),
    act=st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False),
)
def test_property_costs_round_trip(est: float | None, act: float | None) -> None:
    back = Execution.from_json(Execution(estimated_cost=est, actual_cost=act).to_json())
    assert back.estimated_cost == est and back.actual_cost == act
    assert (back.estimated_cost is None) == (est is None)


def test_extra_is_inline_and_host_fields_win() -> None:
    req = Request(
        capability="m.c", request_id="r", input={"a": 1}, deadline_ms=5, max_output_bytes=6,
        extra={"tool": "convert", "args": ["-x"], "protocol": "evil", "roots": {}, "input": 0,
               "deadline_ms": 10**9, "Roots": {"x": {"path": "/", "mode": "rw"}},
               "root\u017f": {}, "INPUT": 1, "Deadline_MS": 1},
    )
    out = json.loads(req.to_json())
    assert out["tool"] == "convert" and out["args"] == ["-x"]
    assert out["protocol"] == PROTOCOL_ID and out["input"] == {"a": 1}
    assert out["deadline_ms"] == 5 and out["roots"] is None
    assert "extra" not in out
    assert sorted(out) == sorted([*(set(Request.model_fields) - {"extra"}), "tool", "args"])
    back = Request.from_json(req.to_json())
    assert back.extra == {"tool": "convert", "args": ["-x"]}
    assert back.to_json() == req.to_json()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=8,
)


@given(
    extra=st.dictionaries(st.text(min_size=1, max_size=12), _JSON, max_size=6),
    warnings=st.lists(st.text(max_size=10), max_size=3),
    result=_JSON,
)
def test_property_request_and_envelope_round_trip(
    extra: dict[str, Any], warnings: list[str], result: Any
) -> None:
    """Uses the internal fold rule (``shadowing_keys``) as the oracle of host-owned keys."""
    req = Request(capability="m.c", request_id="r", input=result, extra=extra)
    text = req.to_json()
    back = Request.from_json(text)
    assert back.to_json() == text
    host_fields = set(Request.model_fields) - {"extra"}
    assert json.loads(text)["input"] == result
    for key, value in extra.items():
        # a key Go would decode into a host field (exact or folded, "Input") never goes out
        assert (key in json.loads(text)) is not shadowing_keys([key], host_fields)
        if key in json.loads(text):
            assert json.loads(text)[key] == value
    env = Envelope(protocol=PROTOCOL_ID, module="m", operation="invoke", request_id="r",
                   ok=True, result=result if result is not None else {}, warnings=warnings)
    assert Envelope.from_json(env.to_json()).to_json() == env.to_json()
    assert json.loads(env.to_json())["warnings"] == warnings


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_NAMES = st.sampled_from(["out", "in", "data", "staged"])


@given(
    extra=st.dictionaries(
        st.sampled_from(["note", "Protocol", "INPUT", "roots", "k\u212a", "deadline_MS", "x"]),
        _JSON, max_size=4),
    value=_JSON,
    roots=st.none() | st.dictionaries(_NAMES, st.tuples(st.text(min_size=1),
                                                        st.sampled_from(["ro", "rw"]))),
    binaries=st.none() | st.dictionaries(st.sampled_from(["git", "sh"]), st.text()),
    network=st.none() | st.lists(st.text(), max_size=2),
    publish=st.booleans(),
)  # fmt: skip
def test_a_requests_wire_is_its_json_dump_key_for_key_and_in_order(
    *, extra: dict[str, Any], value: Any, roots: dict[str, tuple[str, str]] | None,
    binaries: dict[str, str] | None, network: list[str] | None, publish: bool,
) -> None:  # fmt: skip
    """``Request.wire`` (what a host sends at every call, built directly) is what pydantic's
    ``model_dump(mode="json")`` gives: the same keys in the same order (extra fields first,
    none that a Go decoder would take for a host field), the same values, the same bytes."""
    request = Request(
        capability="m.run", request_id="r1", input=value, extra=extra,
        roots=None if roots is None else {n: Root(path=p, mode=m) for n, (p, m) in roots.items()},
        grants=Grants(network=network, publish=publish), binaries=binaries,
        deadline_ms=1000, max_output_bytes=2**24,
    )  # fmt: skip
    wire, dumped = request.wire(), request.model_dump(mode="json")
    assert wire == dumped
    assert list(wire) == list(dumped)
    assert json.dumps(wire) == json.dumps(dumped)


_COST = st.none() | st.floats() | st.integers(-(10**22), 10**22).map(float)


@given(
    local=st.booleans(), provider=st.text(max_size=8), estimated=_COST, actual=_COST,
    artifacts=st.none() | st.just([]),
)  # fmt: skip
def test_an_executions_effects_wire_is_its_json_dump_without_artifacts(
    *, local: bool, provider: str, estimated: float | None, actual: float | None,
    artifacts: list[Any] | None,
) -> None:  # fmt: skip
    """``Execution.effects_wire`` (what a batch keeps of each row's execution, built
    directly) is ``model_dump(mode="json", exclude={"artifacts"})``: the same keys in the same
    order, an integral cost written as Go writes it (``3``, not ``3.0``), one JSON cannot
    hold as ``null``, as pydantic writes it."""
    execution = Execution(
        local=local, network=not local, provider=provider, estimated_cost=estimated,
        actual_cost=actual, artifacts=artifacts,
    )  # fmt: skip
    wire = execution.effects_wire()
    dumped = execution.model_dump(mode="json", exclude={"artifacts"})
    assert wire == dumped
    assert list(wire) == list(dumped)
    assert json.dumps(wire) == json.dumps(dumped)


@given(
    lists=st.tuples(*[st.none() | st.lists(st.text(max_size=6), max_size=3)] * 4),
    publish=st.booleans(),
)
def test_grants_wire_is_their_json_dump_and_owns_its_lists(
    lists: tuple[list[str] | None, ...], publish: bool
) -> None:
    """``Grants.wire`` is ``model_dump(mode="json")`` key for key and in order, and a change
    to what it returned never reaches the grants it came from."""
    network, credentials, paid, binaries = lists
    grants = Grants(network=network, credentials=credentials, paid_providers=paid,
                    publish=publish, subprocess=binaries)  # fmt: skip
    wire, dumped = grants.wire(), grants.model_dump(mode="json")
    assert wire == dumped and list(wire) == list(dumped)
    for value in wire.values():
        if isinstance(value, list):
            value.append("planted")
    assert grants.model_dump(mode="json") == dumped
