"""Describe-time validation: every SPEC §1 descriptor rule is refused with a path and a detail."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _modules import default_descriptor, write_descriptor

import murmur_nb as mnb

GOOD_DIGEST = "sha256:" + "ab" * 32
Desc = dict[str, Any]


FACET_MODULES = [("good",), ("other",)]  # installed into the facet_home fixture


@pytest.fixture
def base(facet_home: Path) -> Desc:
    return default_descriptor(facet_home, "good")


def _host(home: Path) -> mnb.ModuleHost:
    return mnb.ModuleHost(home=home, artifact_store=home.parent / "store")


def _errors(home: Path, desc: Desc) -> list[mnb.DescriptorError]:
    write_descriptor(home / "modules" / "good", desc)
    with _host(home) as host, pytest.raises(mnb.InvalidDescriptor) as err:
        host.describe("good")
    assert err.value.code == "invalid_descriptor"
    return err.value.errors


def test_fixture_descriptor_is_accepted(facet_home: Path) -> None:
    with _host(facet_home) as host:
        desc = host.describe("good")
        assert isinstance(desc, mnb.protocol.Descriptor)
        assert desc.module == "good" and desc.capability("good.echo") is not None
        infos = host.modules()
    assert [(i.id, i.ok, i.errors, i.needs_setup) for i in infos] == [
        ("good", True, [], False),
        ("other", True, [], False),
    ]


def _set(path: str, value: Any) -> Callable[[Desc], None]:
    def edit(desc: Desc) -> None:
        target: Any = desc
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = keys[-1]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return edit


def _overlay(path: str, digest: str = GOOD_DIGEST) -> Callable[[Desc], None]:
    def edit(desc: Desc) -> None:
        desc["agent_overlays"] = [{"id": "o", "title": "O", "path": path, "digest": digest,
                                   "tokens": 10}]

    return edit


def _skill(path: str, digest: str = GOOD_DIGEST) -> Callable[[Desc], None]:
    def edit(desc: Desc) -> None:
        desc["skills"] = [{"id": "s", "title": "S", "summary": "", "path": path,
                           "digest": digest, "tokens": 10}]

    return edit


def _duplicate(desc: Desc) -> None:
    desc["capabilities"].append(copy.deepcopy(desc["capabilities"][0]))


def _drop_versions(desc: Desc) -> None:
    del desc["protocol_versions"]


CASES: list[tuple[str, Callable[[Desc], None], str, str]] = [
    ("protocol id absent", _set("protocol_versions", ["modproto.v2"]), "protocol_versions",
     "does not contain 'modproto.v1'"),
    ("no protocol versions", _drop_versions, "protocol_versions", "modproto.v1"),
    ("module mismatch", _set("module", "other"), "module", "folder name"),
    ("not namespaced", _set("capabilities.0.id", "other.echo"), "capabilities[0].id",
     "not namespaced"),
    ("prefix without dot", _set("capabilities.0.id", "goodecho"), "capabilities[0].id",
     "not namespaced"),
    ("empty name", _set("capabilities.0.id", "good."), "capabilities[0].id", "not namespaced"),
    ("duplicate ids", _duplicate, "capabilities[9].id", "duplicate capability id 'good.echo'"),
    ("unknown request schema", _set("capabilities.1.request_schema", "nope"),
     "capabilities[1].request_schema", "'nope' is not a key of request_schemas"),
    ("unknown result schema", _set("capabilities.1.result_schema", "nope"),
     "capabilities[1].result_schema", "'nope' is not a key of result_schemas"),
    ("invalid request schema", _set("request_schemas.any_in", {"type": 12}),
     "request_schemas.any_in", "not a valid JSON Schema"),
    ("invalid result schema", _set("result_schemas.any", {"minimum": "zero"}),
     "result_schemas.any", "not a valid JSON Schema"),
    ("schema not an object", _set("result_schemas.any", [1, 2]), "result_schemas.any",
     "object or a boolean"),
    ("unknown $schema dialect", _set("request_schemas.any_in", {"$schema": "urn:nope"}),
     "request_schemas.any_in", "unknown $schema"),
    ("artifact schema not declared", _set("capabilities.2.artifact_schemas", ["image", "video"]),
     "capabilities[2].artifact_schemas[1]", "'video' is not declared in artifact_schemas"),
    ("long running without poll", _set("capabilities.7.poll_capability", ""),
     "capabilities[7].poll_capability", "must name its poll_capability"),
    ("poll capability missing", _set("capabilities.7.poll_capability", "good.gone"),
     "capabilities[7].poll_capability", "'good.gone' is not a capability"),
    ("overlay digest uppercase", _overlay("o.md", "sha256:" + "AB" * 32),
     "agent_overlays[0].digest", "64 lowercase hex"),
    ("overlay digest short", _overlay("o.md", "sha256:abc"), "agent_overlays[0].digest",
     "64 lowercase hex"),
    ("skill digest other algorithm", _skill("s.md", "md5:" + "ab" * 16), "skills[0].digest",
     "64 lowercase hex"),
    ("overlay climbs out", _overlay("docs/../../x.md"), "agent_overlays[0].path", "'..'"),
    ("overlay absolute", _overlay("/etc/passwd"), "agent_overlays[0].path", "absolute"),
    ("skill climbs out", _skill("../other/module"), "skills[0].path", "'..'"),
    ("skill absolute", _skill("/tmp/s.md"), "skills[0].path", "absolute"),
    ("requirement kind", _set("requirements", [{"kind": "service", "name": "db",
                                                "available": True}]),
     "requirements[0].kind", "'service' is not one of"),
]


@pytest.mark.parametrize(("label", "edit", "path", "detail"), CASES, ids=[c[0] for c in CASES])
def test_each_describe_rule(
    facet_home: Path,
    base: Desc,
    label: str,
    edit: Callable[[Desc], None],
    *,
    path: str,
    detail: str,
) -> None:
    desc = copy.deepcopy(base)
    edit(desc)
    errors = _errors(facet_home, desc)
    assert any(e.path == path and detail in e.detail for e in errors), errors


def test_every_describe_judges_its_schemas_by_their_exact_content(
    facet_home: Path, base: Desc
) -> None:
    """A schema's verdict is kept by its content (checking one costs about 1.5 ms a describe):
    the same schema is judged alike every time, and one differing from a judged schema in a
    single value (``1`` against ``true``, ``"string"`` against ``"strin"``) is judged itself,
    whichever was seen first and however often."""
    folder = facet_home / "modules" / "good"
    cases = [({"type": "string", "minLength": 1}, None),
             ({"type": "string", "minLength": True}, "not a valid JSON Schema"),
             ({"minLength": 1, "type": "string"}, None),
             ({"type": "strin", "minLength": 1}, "not a valid JSON Schema"),
             ({"type": "string", "minLength": True}, "not a valid JSON Schema"),
             ({"type": "string", "minLength": 1.5}, "not a valid JSON Schema"),
             ({"type": "string", "minLength": 1}, None)]  # fmt: skip
    with _host(facet_home) as host:
        for schema, refused in cases:
            base["request_schemas"]["any_in"] = schema
            write_descriptor(folder, base)
            if refused is None:
                assert host.describe("good").request_schemas["any_in"] == schema
                continue
            with pytest.raises(mnb.InvalidDescriptor) as err:
                host.describe("good")
            assert any(e.path == "request_schemas.any_in" and refused in e.detail
                       for e in err.value.errors), (schema, err.value.errors)  # fmt: skip


def test_membership_not_negotiation(facet_home: Path, base: Desc) -> None:
    base["protocol_versions"] = ["modproto.v9", "modproto.v1", "modproto.v0"]
    write_descriptor(facet_home / "modules" / "good", base)
    with _host(facet_home) as host:
        assert host.describe("good").protocol_versions == [
            "modproto.v9", "modproto.v1", "modproto.v0"
        ]


def test_paths_that_stay_inside_are_accepted(facet_home: Path, base: Desc) -> None:
    folder = facet_home / "modules" / "good"
    (folder / "docs").mkdir()
    (folder / "docs" / "o.md").write_text("overlay")
    (folder / "docs" / "link.md").symlink_to(folder / "docs" / "o.md")
    base["agent_overlays"] = [{"id": "o", "title": "", "path": "docs/o.md",
                               "digest": GOOD_DIGEST, "tokens": 1}]
    base["skills"] = [{"id": "s", "title": "", "summary": "", "path": "docs/link.md",
                       "digest": GOOD_DIGEST, "tokens": 1}]
    write_descriptor(folder, base)
    with _host(facet_home) as host:
        assert host.describe("good").skills is not None


@pytest.mark.parametrize("target", ["secret.md", "home/modules/good-twin/skill.md"])
def test_link_out_of_the_module_folder_is_refused(
    facet_home: Path, base: Desc, tmp_path: Path, target: str
) -> None:
    # a sibling folder whose name merely starts with the module's is outside it too
    outside = tmp_path / target
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text("not the module's")
    folder = facet_home / "modules" / "good"
    (folder / "skill.md").symlink_to(outside)
    _skill("skill.md")(base)
    errors = _errors(facet_home, base)
    # refused before describe runs: the host snapshots no link out of the folder
    assert [e.path for e in errors] == ["module"]
    assert "outside the module folder" in errors[0].detail


def test_every_breach_is_reported_at_once(facet_home: Path, base: Desc) -> None:
    base["protocol_versions"] = []
    base["capabilities"][0]["id"] = "x.echo"
    base["capabilities"][1]["request_schema"] = "nope"
    errors = _errors(facet_home, base)
    assert {e.path for e in errors} >= {
        "protocol_versions", "capabilities[0].id", "capabilities[1].request_schema"
    }
    assert all(str(e).startswith(e.path + ": ") for e in errors)


@pytest.mark.parametrize(
    ("envelope", "path"),
    [
        (b"hello, I am not JSON", "envelope"),
        (b'{"protocol": "modproto.v1"} trailing', "envelope"),
        (b"[]", "envelope"),
        ({"protocol": "modproto.v2"}, "envelope.protocol"),
        ({"module": "someone-else"}, "envelope.module"),
        ({"operation": "invoke"}, "envelope.operation"),
        ({"request_id": "abc"}, "envelope.request_id"),
        ({"ok": False, "error": {"code": "broken", "message": "no"}}, "envelope.ok"),
        ({"result": None}, "envelope.result"),
        ({"result": {"module": 5}}, "module"),
        (b"", "envelope"),
    ],
)
def test_describe_envelope_rules(facet_home: Path, base: Desc, envelope: Any, path: str) -> None:
    folder = facet_home / "modules" / "good"
    if isinstance(envelope, bytes):
        raw = envelope
    else:
        env = {"protocol": "modproto.v1", "module": "good", "operation": "describe",
               "request_id": "", "ok": True, "result": base, "warnings": [],
               "execution": {}}
        env.update(envelope)
        raw = json.dumps(env).encode()
    (folder / "describe.raw").write_bytes(raw)
    with _host(facet_home) as host:
        with pytest.raises(mnb.InvalidDescriptor) as err:
            host.describe("good")
        assert any(e.path == path for e in err.value.errors), err.value.errors
        # a refused module still lists, with its errors, beside the good one
        infos = {i.id: i for i in host.modules()}
    assert infos["good"].descriptor is None and infos["good"].errors == err.value.errors
    assert not infos["good"].ok and infos["other"].ok


def test_refused_module_cannot_be_invoked(facet_home: Path, base: Desc) -> None:
    base["protocol_versions"] = ["modproto.v2"]
    write_descriptor(facet_home / "modules" / "good", base)
    with _host(facet_home) as host, pytest.raises(mnb.InvalidDescriptor) as err:
        host.invoke("good.echo", {"count": 1})
    assert err.value.errors[0].path == "protocol_versions"
    assert host.audit()["outcome"].tolist() == ["invalid_descriptor"]


def test_capability_lookup_describes_the_module_now(facet_home: Path, base: Desc) -> None:
    with _host(facet_home) as host:
        descriptor, cap = host.capability("good.echo")
        assert (descriptor.module, cap.id) == ("good", "good.echo")
        assert cap.request_schema in (descriptor.request_schemas or {})
        base["capabilities"][0]["title"] = "Echo, renamed"
        write_descriptor(facet_home / "modules" / "good", base)
        assert host.capability("good.echo")[1].title == "Echo, renamed"
        with pytest.raises(mnb.ModuleNotFound, match=r"it offers: good\.echo"):
            host.capability("good.nope")
        with pytest.raises(mnb.ModuleNotFound, match="no installed module offers"):
            host.capability("absent.echo")
        # a module id where a capability id goes, and the other way round, are named as such
        # (they read "no installed module offers 'good'" and "no module 'good.echo'")
        with pytest.raises(mnb.ModuleNotFound, match=r"'good' is a module id, not a capability"):
            host.invoke("good", {})
        with pytest.raises(mnb.ModuleNotFound, match=r"'good.echo' is a capability id of module "
                           r"'good', not a module id: pass 'good'"):  # fmt: skip
            host.describe("good.echo")
        base["protocol_versions"] = ["modproto.v2"]
        write_descriptor(facet_home / "modules" / "good", base)
        with pytest.raises(mnb.InvalidDescriptor):
            host.capability("good.echo")


def test_descriptor_problems_are_records_under_both_names(facet_home: Path, base: Desc) -> None:
    base["protocol_versions"] = ["modproto.v2"]
    (problem,) = _errors(facet_home, base)
    assert isinstance(problem, mnb.DescriptorProblem)
    assert mnb.DescriptorError is mnb.DescriptorProblem
    assert not isinstance(problem, BaseException)
    assert str(problem) == f"protocol_versions: {problem.detail}"


def test_module_that_is_not_executable(facet_home: Path) -> None:
    (facet_home / "modules" / "good" / "module").chmod(0o644)
    (facet_home / "modules" / "empty").mkdir()
    with _host(facet_home) as host:
        infos = {i.id: i for i in host.modules()}
        with pytest.raises(mnb.ModuleNotFound):
            host.describe("absent")
    assert "chmod +x" in infos["good"].errors[0].detail
    assert "missing" in infos["empty"].errors[0].detail


def test_needs_setup(facet_home: Path, base: Desc) -> None:
    base["requirements"] = [
        {"kind": "binary", "name": "ffmpeg", "available": False,
         "detail": "install ffmpeg >= 6 (apt-get install ffmpeg)"},
        {"kind": "config", "name": "api", "available": True},
    ]
    write_descriptor(facet_home / "modules" / "good", base)
    with _host(facet_home) as host:
        info = next(i for i in host.modules() if i.id == "good")
        assert info.ok and info.needs_setup
        assert info.setup_instructions == [
            "binary ffmpeg: install ffmpeg >= 6 (apt-get install ffmpeg)"
        ]
        with pytest.raises(mnb.MissingRequirement, match="apt-get install ffmpeg") as err:
            host.invoke("good.echo", {"count": 1})
    assert err.value.code == "missing_requirement"


@pytest.mark.parametrize("how", ["invoke", "prepare", "map"])
def test_a_module_set_up_after_a_refusal_runs_at_the_next_call(
    facet_home: Path, base: Desc, how: str
) -> None:
    """Setup happens outside a module's folder (the detail says: install a binary): a call
    refused for an unmet requirement was refused again after the setup, for as long as the
    folder stayed unchanged, because the first describe's verdict was kept. The next call
    after the setup runs; before it, every call is refused and nothing of it runs."""
    ready_at = time.time() + 3.0
    base["requirements"] = [{"kind": "binary", "name": "ffmpeg", "available": False,
                             "available_after": ready_at, "detail": "install ffmpeg"}]  # fmt: skip
    write_descriptor(facet_home / "modules" / "good", base)
    out = facet_home.parent / "out"
    out.mkdir()
    policy = mnb.Policy(roots={"out": out})

    def call(host: mnb.ModuleHost) -> Any:
        if how == "invoke":
            return host.invoke("good.echo", {"count": 1})
        if how == "prepare":
            return host.prepare("good.echo").run({"count": 1})
        batch = host.map("good.echo", [{"count": 1}], progress=False, journal=None)
        return batch[0]

    with mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=out.parent / "s") as host:
        with pytest.raises(mnb.MissingRequirement, match="install ffmpeg"):
            call(host)
        assert not (out / "ran-echo").exists()
        time.sleep(max(0.0, ready_at - time.time()) + 0.2)
        inv = call(host)
        assert inv.ok, inv.error
        assert (out / "ran-echo").exists()
        assert not next(i for i in host.modules() if i.id == "good").needs_setup


def test_describe_output_is_bounded(facet_home: Path) -> None:
    (facet_home / "modules" / "good" / "describe.raw").write_bytes(b" " * 5000)
    policy = mnb.Policy(describe_max_output_bytes=1000)
    host = mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=facet_home / "s")
    with host, pytest.raises(mnb.InvalidDescriptor) as err:
        host.describe("good")
    assert "more than 1000 bytes" in err.value.errors[0].detail


# -- a describe output whose problems fan out (red-team review) ---------------------------


def _traced(run: Callable[[], Any]) -> tuple[Any, float, int]:
    """``run()``'s value, its seconds and the peak bytes Python allocated meanwhile."""
    import tracemalloc

    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        value = run()
        return value, time.perf_counter() - t0, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_capability_id_of_dots_costs_the_listing_no_memory(
    facet_home: Path, base: Desc
) -> None:
    """Which module owns a capability was asked of every dotted prefix of its id, all built at
    once: a 20,000-dot id took 192 MiB at each listing, so 200 KB of describe output was
    20 GB. Only a prefix as long as a module id can be one."""
    base["capabilities"][0]["id"] = "good.echo" + "." * 20_000
    write_descriptor(facet_home / "modules" / "good", base)
    with _host(facet_home) as host:
        host.modules()  # described once; a listing's own work is what is measured
        infos, _, peak = _traced(host.modules)
    assert [i.ok for i in infos] == [True, True]
    assert peak < 16 << 20, f"a listing allocated {peak >> 20} MiB for one id of dots"


def test_many_capabilities_are_checked_in_linear_time(facet_home: Path, base: Desc) -> None:
    """Each capability's poll check built the set of every capability id: 20,000 capabilities
    (5 MB of describe output) took 124 s to list, 10,000 about 30 s."""
    cap = base["capabilities"][0]
    base["capabilities"] = [{**cap, "id": f"good.c{i}"} for i in range(10_000)]
    write_descriptor(facet_home / "modules" / "good", base)
    with _host(facet_home) as host:
        t0 = time.perf_counter()
        infos = host.modules()
        seconds = time.perf_counter() - t0
    desc = infos[0].descriptor
    assert infos[0].ok and desc is not None and len(desc.capabilities or []) == 10_000
    assert seconds < 10, f"listing 10,000 capabilities took {seconds:.1f} s"


def test_a_problem_names_a_few_of_the_ids_it_knows(facet_home: Path, base: Desc) -> None:
    """Each capability naming an undeclared schema was told every declared one: 1,000
    capabilities and 10,000 schemas (0.5 MB of describe output) made 170 MiB of messages in
    22 s, and 8 MB of output could ask for tens of gigabytes."""
    cap = base["capabilities"][0]
    base["capabilities"] = [{**cap, "id": f"good.c{i}", "request_schema": "missing"}
                            for i in range(1_000)]  # fmt: skip
    base["request_schemas"] = {f"s{j:05}": True for j in range(10_000)}
    write_descriptor(facet_home / "modules" / "good", base)
    with _host(facet_home) as host:
        infos, _, peak = _traced(host.modules)
    errors = infos[0].errors
    assert len(errors) == 1_000 and not infos[0].ok
    assert errors[0].path == "capabilities[0].request_schema"
    assert "known: ['s00000', 's00001'," in errors[0].detail
    assert errors[0].detail.endswith("'s00009'] and 9990 more)")
    assert sum(len(e.detail) for e in errors) < 1 << 20
    assert peak < 64 << 20, f"the listing allocated {peak >> 20} MiB"


def test_problems_about_one_capability_do_not_repeat_its_whole_id(
    facet_home: Path, base: Desc
) -> None:
    """A warning per unknown skill a capability lists named the capability's whole id: an id
    of 100,000 characters listing 2,000 skills (200 KB of describe output) made 191 MiB of
    warnings."""
    cap = base["capabilities"][0]
    cap["id"] = "good.e" + "x" * 100_000
    cap["skills"] = [""] * 2_000
    write_descriptor(facet_home / "modules" / "good", base)
    with _host(facet_home) as host:
        infos, _, peak = _traced(host.modules)
    warnings = infos[0].warnings
    assert len(warnings) == 2_000 and infos[0].ok
    assert "capability good.exxx" in warnings[0].detail and "…" in warnings[0].detail
    assert sum(len(w.detail) for w in warnings) < 2 << 20
    assert peak < 64 << 20, f"the listing allocated {peak >> 20} MiB"
