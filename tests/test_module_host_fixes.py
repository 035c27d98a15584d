"""Module-host defects from a user trial, each reproduced with a real module executable.

Every module here is the trial's own ``base.py`` (stdlib only: capability ``<folder>.run``,
input ``{"text": str}``, writes ``note.txt`` in its ``out`` root as an artifact), edited the
way the trial edited it, installed under a temporary home and run in the sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from _users import test_user

import murmur_nb as mnb
from murmur_nb.protocol import Artifact, Capability, Descriptor, Envelope, Request

BASE = r'''
import sys, json, hashlib
from pathlib import Path
MOD = Path(__file__).parent.name
SCHEMA = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 20}},
          "required": ["text"], "additionalProperties": False}
EFF = {"local": True, "network": False, "external_writes": False, "provider": "",
       "cost_known": True}
CAP = MOD + ".run"
DESC = {"module": MOD, "name": "B", "version": "1", "protocol_versions": ["modproto.v1"],
        "capabilities": [{"id": CAP, "title": "Run", "summary": "s", "request_schema": "in",
                          "result_schema": "out", "artifact_schemas": ["note"], "skills": [],
                          "long_running": False, "effects": EFF}],
        "request_schemas": {"in": SCHEMA}, "result_schemas": {"out": {"type": "object"}},
        "artifact_schemas": {"note": {}}, "agent_overlays": [], "skills": [],
        "requirements": [],
        "permissions": {"filesystem_read": [], "filesystem_write": ["out"], "network": [],
                        "credentials": [], "paid_providers": [], "publish": False,
                        "subprocess": []}}
def env(op, rid, arts=(), **kw):
    return {"protocol": "modproto.v1", "module": MOD, "operation": op, "request_id": rid,
            "warnings": [], "execution": {"local": True, "network": False,
            "external_writes": False, "provider": "", "estimated_cost": 0, "actual_cost": 0,
            "artifacts": list(arts)}, **kw}
def note(root, data, **over):
    (Path(root) / "note.txt").write_bytes(data)
    return {"id": "note", "kind": "note", "root": "out", "path": "note.txt",
            "media_type": "text/plain", "bytes": len(data),
            "digest": "sha256:" + hashlib.sha256(data).hexdigest(), **over}
def run(req):
    rid, inp = req.get("request_id", ""), req.get("input")
    # PATCH-INVOKE
    arts = [note(req["roots"]["out"]["path"], inp["text"].encode())]
    return env("invoke", rid, arts, ok=True, result={"n": len(inp["text"])})
if sys.argv[1] == "describe":
    # PATCH-DESCRIBE
    print(json.dumps(env("describe", "", ok=True, result=DESC)))
else:
    print(json.dumps(run(json.loads(sys.stdin.read()))))
    # PATCH-EXIT
'''


def make(home: Path, folder: str, *edits: tuple[str, str], shebang: str = "-IS") -> Path:
    """``<home>/modules/<folder>/module``: :data:`BASE` with each ``(old, new)`` replaced."""
    text = BASE
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    where = home / "modules" / folder
    where.mkdir(parents=True)
    (where / "module").write_text(f"#!{sys.executable} {shebang}\n{text}")
    (where / "module").chmod(0o755)
    return where


def invoking(line: str) -> tuple[str, str]:
    """An edit that runs ``line`` first thing in ``invoke``."""
    return "    # PATCH-INVOKE", f"    {line}"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def host(home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    policy = mnb.Policy(deadline_ms=20_000)
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "store") as h:
        yield h


# -- 2. the protocol's constructors refuse a misspelled keyword ------------------------------


def test_a_misspelled_keyword_is_refused_by_the_constructor() -> None:
    digest = "sha256:" + "0" * 64
    with pytest.raises(TypeError, match=r"'presentaton' \(did you mean 'presentation'\?\)"):
        Artifact(id="a", kind="k", path="a.csv", root="out", media_type="text/csv", bytes=1,
                 digest=digest, presentaton="table")  # fmt: skip
    with pytest.raises(TypeError, match=r"Capability\(\) got unexpected keyword argument "
                                        r"'request_shema' \(did you mean 'request_schema'\?\)"):
        Capability(id="m.x", request_shema="in")
    with pytest.raises(TypeError, match="'colour'"):
        Envelope(protocol="modproto.v1", module="m", operation="invoke", request_id="r",
                 ok=True, colour="red")  # fmt: skip
    spelled = Artifact(id="a", kind="k", path="a.csv", root="out", media_type="text/csv",
                       bytes=1, digest=digest, presentation="table")  # fmt: skip
    assert json.loads(spelled.to_json())["presentation"] == "table"


def test_reading_a_module_output_still_ignores_keys_it_does_not_know() -> None:
    """SPEC: the Go seed decodes with encoding/json, which ignores unknown keys; a module may
    send fields a host does not know, and decoding them must not fail."""
    cap = Capability.from_json('{"id": "m.x", "request_schema": "in", "added_in_v2": 1}')
    assert cap.request_schema == "in"
    assert Capability.model_validate({"id": "m.x", "later": True}).id == "m.x"
    desc = Descriptor.model_validate({"module": "m", "capabilities": [{"id": "m.x", "y": 1}],
                                      "future": {}})  # fmt: skip
    assert desc.capabilities is not None and desc.capabilities[0].id == "m.x"
    env = Envelope.from_json('{"protocol": "modproto.v1", "module": "m", "operation": "invoke",'
                             ' "request_id": "r", "ok": true, "result": 1, "trace": "x"}')
    assert env.result == 1
    request = Request.from_json('{"capability": "m.x", "request_id": "r", "tool": "t"}')
    assert request.extra == {"tool": "t"}


# -- 5. an invocation whose artifacts were rejected is a warning -----------------------------


def test_an_ok_call_whose_artifacts_were_all_rejected_is_a_warning(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "wd", ('"digest": "sha256:" + hashlib.sha256(data).hexdigest()',
                      '"digest": "sha256:" + "0" * 64'))  # fmt: skip
    inv = host.invoke("wd.run", {"text": "hi"})
    assert inv.ok and inv.artifacts == []
    assert [(r.id, r.code) for r in inv.rejected_artifacts] == [("note", "digest_mismatch")]
    assert inv.state == "warning"
    said = "1 of 1 artifacts the module reported was rejected"
    assert [w for w in inv.warnings if said in w] and inv.problems == [
        w for w in inv.warnings if said in w]
    row = host.audit().iloc[-1]
    assert row["outcome"] == "ok" and said in row["message"] and row["warnings"] == 1
    assert 'data-state="warning"' in inv._repr_html_()
    # the card, its text and the widget say what it is, not "result breaks its schema"
    assert "ok, with warnings" in inv._repr_html_()
    assert "result breaks its schema" not in inv._repr_html_()
    view = mnb.widgets.InvocationView(inv)
    assert view.status == "warning" and f"warning: {said}" in view.text()


# -- 6. a module that exits non-zero after printing its envelope -----------------------------


def test_a_non_zero_exit_after_an_ok_envelope_is_a_warning(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "ex", ("    # PATCH-EXIT", "    sys.stdout.flush(); sys.exit(3)"))
    inv = host.invoke("ex.run", {"text": "hi"})
    assert inv.ok and inv.returncode == 3 and inv.state == "warning"
    (warning,) = inv.warnings
    assert "the module exited with status 3 after printing its envelope" in warning
    assert inv.problems == [warning]
    assert "exited with status 3 after printing its envelope" in host.audit().iloc[-1]["message"]


def test_an_error_envelope_and_a_non_zero_exit_is_just_the_error(
    host: mnb.ModuleHost, home: Path
) -> None:
    """A module that answers ``ok: false`` and exits 1 says the same thing twice: no
    warning is added to its error."""
    make(home, "ef", invoking('return env("invoke", rid, ok=False, error={"code": "nope", '
                              '"message": "no"})'),
         ("    # PATCH-EXIT", "    sys.exit(1)"))  # fmt: skip
    inv = host.invoke("ef.run", {"text": "hi"})
    assert inv.state == "error" and inv.error is not None and inv.error.code == "nope"
    assert inv.returncode == 1 and inv.warnings == [] and inv.problems == []


def test_a_clean_call_is_still_a_plain_ok(host: mnb.ModuleHost, home: Path) -> None:
    make(home, "okmod")
    inv = host.invoke("okmod.run", {"text": "hi"})
    assert inv.state == "ok" and inv.warnings == [] and inv.problems == []
    assert host.audit().iloc[-1]["message"] == ""


# -- 8. stray stdout before the describe envelope --------------------------------------------


def test_a_stray_line_before_the_describe_envelope_is_named_as_invoke_names_it(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "dd", ("    # PATCH-DESCRIBE", '    print("loading descriptor...")'))
    (info,) = host.modules()
    assert not info.ok
    (error,) = info.errors
    assert error.path == "envelope"
    assert "it starts with 'loading descriptor...'" in error.detail
    assert "print diagnostics (debug lines, progress) to standard error" in error.detail
    assert "Expecting value" not in error.detail
    assert info.evidence is not None and info.evidence.returncode == 0
    assert info.evidence.stdout_head.startswith("loading descriptor...\n{")
    with pytest.raises(mnb.InvalidDescriptor, match=r"it starts with 'loading descriptor\.\.\.'"
                       ) as raised:  # fmt: skip
        host.describe("dd")
    assert raised.value.evidence is not None  # as an invoke's error carries it
    assert raised.value.evidence.stdout_head.startswith("loading descriptor...")


# -- 11. failures the sandbox caused say so ---------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        'import urllib.request; urllib.request.urlopen("http://example.com", timeout=3)',
        'import socket; socket.create_connection(("93.184.215.14", 80), timeout=3)',
    ],
    ids=["name", "address"],
)
def test_a_call_without_a_network_grant_that_reaches_out_gets_a_hint(
    host: mnb.ModuleHost, home: Path, line: str
) -> None:
    make(home, "nw", invoking(line))
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("nw.run", {"text": "hi"})
    message = err.value.message
    assert "Fix that error in the module" in message  # the module's own error, as before
    assert message.endswith(
        "Note: this call had no network grant (grants.network is empty), so the sandbox let "
        "the module open no socket: declare permissions.network and allow it in the Policy "
        "(mnb.Policy(network=[...]), or --grant network=NAME)"
    )


def test_reading_an_environment_variable_gets_a_hint(host: mnb.ModuleHost, home: Path) -> None:
    make(home, "ev", invoking('import os; os.environ["HOME"]'))
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("ev.run", {"text": "hi"})
    assert "its stderr ends with \"KeyError: 'HOME'\"" in err.value.message
    assert err.value.message.endswith(
        "Note: modules run with an empty environment, so HOME is unset (no variable is "
        "inherited, not even HOME or PATH): pass what the module needs in the request (its "
        "input, or extra= fields beside it) and read paths from its roots and binaries"
    )


def test_describe_reading_an_environment_variable_gets_the_hint_too(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "ed", ("    # PATCH-DESCRIBE", '    import os; os.environ["API_TOKEN"]'))
    (info,) = host.modules()
    assert "modules run with an empty environment, so API_TOKEN is unset" in str(info.errors)


@pytest.mark.parametrize(
    "line",
    ['{}["HOME"]', "1 / 0", 'open("/etc/shadow")'],
    ids=["dict", "zero", "file"],
)
def test_a_failure_the_sandbox_did_not_cause_gets_no_hint(
    host: mnb.ModuleHost, home: Path, line: str
) -> None:
    make(home, "bug", invoking(line))
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("bug.run", {"text": "hi"})
    assert "Note:" not in err.value.message


# -- 12. a folder whose name is no module id --------------------------------------------------


def test_a_folder_that_is_no_module_id_is_listed_refused(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "my module")
    make(home, "okmod")
    (home / "modules" / ".ipynb_checkpoints").mkdir()  # no module: left out
    infos = host.modules()
    assert [(i.id, i.ok) for i in infos] == [("my module", False), ("okmod", True)]
    (error,) = infos[0].errors
    assert "the folder name 'my module' is not a valid module id" in error.detail
    assert "rename the folder, e.g. to 'my-module'" in error.detail
    listed = subprocess.run(
        [sys.executable, "-m", "murmur_nb", "--home", str(home), "list"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert rows["my module"]["ok"] is False
    assert "rename the folder" in rows["my module"]["errors"][0]["detail"]


# -- 13. two modules offering the same capability id -----------------------------------------


def test_a_capability_another_module_takes_is_reported_naming_both(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "a", ('CAP = MOD + ".run"', 'CAP = "a.b.run"'))
    make(home, "a.b")
    infos = {i.id: i for i in host.modules()}
    assert infos["a"].ok and infos["a.b"].ok and infos["a.b"].warnings == []
    (warning,) = infos["a"].warnings
    assert warning.path == "capabilities[0].id"
    assert "'a.b.run' cannot be invoked" in warning.detail
    assert "module 'a.b' offers 'a.b.run' too, and that one runs" in warning.detail
    assert host.invoke("a.b.run", {"text": "hi"}).module == "a.b"


def test_a_capability_shadowed_by_a_module_that_lacks_it_says_who_declares_it(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "c", ('CAP = MOD + ".run"', 'CAP = "c.d.run"'))
    make(home, "c.d", ('CAP = MOD + ".run"', 'CAP = "c.d.other"'))
    (warning,) = {i.id: i for i in host.modules()}["c"].warnings
    assert "invoking it reaches module 'c.d', which does not offer it" in warning.detail
    with pytest.raises(mnb.ModuleNotFound, match="module 'c' declares it, but a capability "
                                                  "goes to the module whose id is its longest"):
        host.invoke("c.d.run", {"text": "hi"})


# -- 4. a module importing murmur_nb.protocol from an editable install ------------------------

HELPER_MODULE = r'''
import json, sys
from pathlib import Path
from murmur_nb.protocol import PROTOCOL_ID, Descriptor, Envelope

import murmur_nb
package = Path(murmur_nb.__file__).parent
tried = {}
try:
    (package.parent / "pyproject.toml").read_bytes()
    tried["checkout"] = "read"
except OSError as exc:
    tried["checkout"] = type(exc).__name__
try:
    (package / "planted.py").write_text("x = 1")
    tried["write"] = "written"
except OSError as exc:
    tried["write"] = type(exc).__name__
desc = Descriptor(module="pm", name="P", version="1", protocol_versions=[PROTOCOL_ID],
                  capabilities=[], request_schemas={}, result_schemas={}, artifact_schemas={},
                  agent_overlays=[], skills=[], requirements=[])
result = {**desc.model_dump(mode="json"), "name": json.dumps(tried, sort_keys=True)}
print(Envelope(protocol=PROTOCOL_ID, module="pm", operation="describe", request_id="",
               ok=True, result=result).to_json())
'''


def test_a_module_imports_the_protocol_helpers_of_an_editable_install(
    host: mnb.ModuleHost, home: Path
) -> None:
    """``scripts/demo`` and ``scripts/test`` install murmur-nb editable; a module run by
    that interpreter imports ``murmur_nb.protocol`` through the package bound read-only,
    and sees nothing else of the checkout."""
    package = Path(mnb.__file__).parent
    if "site-packages" in package.parts:
        pytest.skip("murmur-nb is not an editable install here")
    where = home / "modules" / "pm"
    where.mkdir(parents=True)
    (where / "module").write_text(f"#!{sys.executable} -I\n{HELPER_MODULE}")
    (where / "module").chmod(0o755)
    (info,) = host.modules()
    assert info.ok, info.errors
    assert info.descriptor is not None
    assert json.loads(info.descriptor.name) == {
        "checkout": "FileNotFoundError", "write": "OSError"}  # fmt: skip
    assert not (package / "planted.py").exists()


# -- 15. a presentation warning points at the caller ------------------------------------------


def test_a_presentation_warning_points_at_the_callers_line(tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text('{"not": "records"}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mnb.render_file(data, presentation="no-such-primitive")  # the hint is unknown
        mnb.render_file(data, presentation="table")  # the table cannot draw it: falls back
    assert [w.category for w in caught] == [mnb.PresentationWarning] * 2
    assert {Path(w.filename) for w in caught} == {Path(__file__)}


def test_a_presentation_warning_from_a_gallery_points_at_the_caller(
    host: mnb.ModuleHost, home: Path
) -> None:
    make(home, "hm", ('"media_type": "text/plain",',
                      '"media_type": "text/plain", "presentation": "table",'))  # fmt: skip
    inv = host.invoke("hm.run", {"text": "hi"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mnb.render([inv, [inv]])
    assert caught and all(w.category is mnb.PresentationWarning for w in caught)
    assert {Path(w.filename) for w in caught} == {Path(__file__)}


def test_an_editable_folder_another_account_could_write_is_not_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An internal (``_sandbox.sandbox._editable_packages``): a second interpreter with its
    own ``.pth`` files cannot be installed for a test, so site's list of site-packages is
    replaced. A project below a world-writable folder is never bound unless that folder is
    sticky (as ``/tmp`` is: a fresh clone there is bound), nor one another account owns, nor
    the home, nor what the prefixes bind already."""
    import site

    from murmur_nb._sandbox import sandbox  # private: the editable-install binding rule

    site_dir, shared = tmp_path / "site", tmp_path / "shared"
    project = shared / "project"
    site_dir.mkdir()
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (site_dir / "_editable_impl_pkg.pth").write_text(f"# a comment\n{project}\nimport os\n")
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(site_dir)])
    assert sandbox._pth_folders() == [str(project)]
    package = str(project / "pkg")
    assert Path("/tmp") in tmp_path.parents  # sticky and world-writable: bound all the same
    assert sandbox._editable_packages([], "/nonexistent-home") == [(package, package)]
    shared.chmod(0o777)  # world-writable, not sticky: anyone could swap the project
    assert sandbox._editable_packages([], "/nonexistent-home") == []
    shared.chmod(0o1777)  # sticky: only the project's owner may move it
    assert sandbox._editable_packages([], "/nonexistent-home") == [(package, package)]
    if os.geteuid() == 0:
        os.chown(project, test_user(), test_user())  # another account's project
        assert sandbox._editable_packages([], "/nonexistent-home") == []
        os.chown(project, 0, 0)
    assert sandbox._editable_packages([], str(project)) == []  # the home: never
    assert sandbox._editable_packages([str(tmp_path)], "/nonexistent-home") == []  # bound
