"""Requests, approval, running, envelopes and audit of ``ModuleHost.invoke``.

Every module here is a real executable from ``tests/modules/`` run as a subprocess.
"""

from __future__ import annotations

import _thread
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _modules import alive, default_descriptor, install, read_pids, write_descriptor
from hypothesis import given
from hypothesis import strategies as st

import murmur_nb as mnb
from murmur_nb._modules.envelope import check_envelope  # private: envelope rules in a property test
from murmur_nb._modules.invocation import Ran  # private: the process outcome check_envelope reads
from murmur_nb._sandbox import RunResult  # private: a run's output, made without a process
from murmur_nb.protocol import PROTOCOL_ID

FACET_MODULES = [("good",), ("liar", "liar"), ("runaway", "runaway")]  # in facet_home


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def host(facet_home: Path, out: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    src = tmp_path / "src"
    src.mkdir()
    policy = mnb.Policy(
        roots={"out": out, "src": src, "undeclared": tmp_path},
        network=["api.example", "not-declared.example"],
        subprocess=["tool", "ghost", "undeclared-tool"],
        binaries={"tool": "/bin/sh"},
        deadline_ms=20_000,
    )
    with mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=tmp_path / "store") as h:
        yield h


# -- 3. requests -------------------------------------------------------------------------


def test_request_is_built_by_the_host(host: mnb.ModuleHost, out: Path, tmp_path: Path) -> None:
    inv = host.invoke("good.echo", {"count": 4}, deadline_ms=9_000, max_output_bytes=50_000)
    assert inv.ok and inv.error is None
    req = inv.result["request"]
    assert req["protocol"] == PROTOCOL_ID
    assert req["capability"] == "good.echo"
    assert req["request_id"] == inv.request_id and len(inv.request_id) == 32
    assert req["input"] == {"count": 4}
    assert req["deadline_ms"] == 9_000 and req["max_output_bytes"] == 50_000
    # roots: only declared names; read roots ro, write roots rw; canonical absolute paths
    roots = req["roots"]
    assert roots["src"] == {"path": str((tmp_path / "src").resolve()), "mode": "ro"}
    assert roots["out"] == {"path": str(out.resolve()), "mode": "rw"}
    assert "undeclared" not in roots and "staged" not in roots
    # a write root policy does not map: a fresh, empty, per-invocation folder
    scratch = Path(roots["scratch"]["path"])
    assert roots["scratch"]["mode"] == "rw" and scratch.is_absolute() and scratch.is_dir()
    assert list(scratch.iterdir()) == []
    again = host.invoke("good.echo", {"count": 1}).result["request"]["roots"]["scratch"]["path"]
    assert again != str(scratch)
    # grants: declared ∩ policy
    assert req["grants"] == {
        "network": ["api.example"],
        "credentials": [],
        "paid_providers": [],
        "publish": False,
        "subprocess": ["ghost", "tool"],
    }
    # binaries: resolved absolute paths; the unresolvable "ghost" is absent, not empty
    assert req["binaries"] == {"tool": str(Path("/bin/sh").resolve())}
    assert inv.request.model_dump(mode="json")["grants"] == req["grants"]


def test_input_is_validated_before_anything_runs(host: mnb.ModuleHost, out: Path) -> None:
    with pytest.raises(mnb.InvalidInput) as err:
        host.invoke("good.echo", {"count": -1})
    assert err.value.code == "invalid_input"
    assert "input['count']" in str(err.value) and "minimum" in str(err.value)
    with pytest.raises(mnb.InvalidInput, match="'count' is a required property"):
        host.invoke("good.echo", {})
    with pytest.raises(mnb.InvalidInput, match="not JSON-serializable"):
        host.invoke("good.echo", {"count": object()})
    # bad bounds and extras are refused too, each saying what to pass instead
    with pytest.raises(mnb.InvalidInput, match=r"got 0; pass a positive deadline_ms="):
        host.invoke("good.echo", {"count": 1}, deadline_ms=0)
    with pytest.raises(mnb.InvalidInput, match=r"Policy\.max_output_bytes"):
        host.invoke("good.echo", {"count": 1}, max_output_bytes=True)
    with pytest.raises(mnb.InvalidInput, match=r"extra is not JSON-serializable.*pass a dict"):
        host.invoke("good.echo", {"count": 1}, extra={"when": object()})
    assert not (out / "ran-echo").exists()
    assert list(host.audit()["outcome"]) == ["invalid_input"] * 6


def test_extra_is_inlined_and_never_overrides_host_fields(host: mnb.ModuleHost) -> None:
    extra = {
        "tool": "ffmpeg",
        "protocol": "modproto.v0",
        "roots": {"evil": {"path": "/", "mode": "rw"}},
        "grants": {"publish": True},
        "deadline_ms": 1,
        "max_output_bytes": 1,
        "request_id": "mine",
        "capability": "good.paid",
        "input": {"count": 99},
        "binaries": {"tool": "/bin/evil"},
    }
    inv = host.invoke("good.echo", {"count": 1}, extra=extra)
    req = inv.result["request"]
    assert req["tool"] == "ffmpeg"
    assert req["capability"] == "good.echo" and req["input"] == {"count": 1}
    assert req["binaries"] == {"tool": str(Path("/bin/sh").resolve())}
    assert req["protocol"] == PROTOCOL_ID and req["request_id"] == inv.request_id
    assert "evil" not in req["roots"] and req["grants"]["publish"] is False
    assert req["deadline_ms"] == 20_000 and req["max_output_bytes"] == 16 * 1024 * 1024
    assert any("host-owned" in w for w in inv.warnings)


def test_unknown_capability_and_module(host: mnb.ModuleHost) -> None:
    with pytest.raises(mnb.ModuleNotFound, match=r"good\.echo"):
        host.invoke("good.nope")
    with pytest.raises(mnb.ModuleNotFound) as err:
        host.invoke("missing.thing")
    assert err.value.code == "module_not_found"
    with pytest.raises(mnb.ModuleNotFound, match=r"host\.modules\(\) lists"):
        host.describe("../good")


def test_grants_intersect_every_kind(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = install(home, "keys")
    desc = default_descriptor(home, "keys")
    desc["permissions"].update(
        credentials=["gh-token", "aws"], paid_providers=["openai", "replicate"], publish=True
    )
    write_descriptor(folder, desc)
    policy = mnb.Policy(credentials=["gh-token"], paid_providers=["*"], publish=False)
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "s") as host:
        grants = host.invoke("keys.echo", {"count": 0}, approve=True).result["request"]["grants"]
    assert grants["credentials"] == ["gh-token"]
    assert grants["paid_providers"] == ["openai", "replicate"]
    assert grants["publish"] is False
    assert grants["network"] == [] and grants["subprocess"] == []
    # the other way round: what policy allows but the module did not declare is not granted
    desc["permissions"].update(credentials=[], paid_providers=["openai"], publish=False)
    write_descriptor(folder, desc)
    policy = mnb.Policy(
        credentials=["gh-token"], paid_providers=["openai", "replicate"], publish=True
    )
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "s") as host:
        grants = host.invoke("keys.echo", {"count": 0}, approve=True).result["request"]["grants"]
    assert grants["credentials"] == [] and grants["paid_providers"] == ["openai"]
    assert grants["publish"] is False


def test_binaries_are_resolved_for_each_invocation(facet_home: Path, tmp_path: Path) -> None:
    # installing the missing binary (the "Needs setup" fix) or removing one takes effect
    # on the next call; a removed binary is absent, never a stale path
    tool = tmp_path / "bin" / "tool"
    policy = mnb.Policy(subprocess=["tool"], binaries={"tool": tool})
    with mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=tmp_path / "s") as host:

        def binaries() -> dict[str, str]:
            inv = host.invoke("good.echo", {"count": 0})
            assert inv.result["request"]["grants"]["subprocess"] == ["tool"]
            return dict(inv.result["request"]["binaries"])

        assert binaries() == {}
        tool.parent.mkdir()
        shutil.copy("/bin/true", tool)
        assert binaries() == {"tool": str(tool.resolve())}
        tool.unlink()
        assert binaries() == {}


# -- 4. approval -------------------------------------------------------------------------


def test_unknown_cost_needs_approval_and_nothing_runs(host: mnb.ModuleHost, out: Path) -> None:
    reasons = host.approval_reasons("good.paid")
    assert reasons and "cost_known is false" in reasons[0]
    with pytest.raises(mnb.ApprovalRequired) as err:
        host.invoke("good.paid", {})
    assert err.value.code == "approval_required"
    assert err.value.reasons == reasons
    assert not (out / "ran-paid").exists()
    assert host.approval_reasons("good.echo") == []
    inv = host.invoke("good.paid", {}, approve=True)
    assert inv.ok and (out / "ran-paid").exists()
    audit = host.audit()
    assert list(audit["approval"]) == ["refused", "approved (this call)"]


def test_spec_default_reasons(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = install(home, "risky")
    desc = default_descriptor(home, "risky")
    desc["permissions"].update(paid_providers=["openai"], publish=True, credentials=["tok"])
    desc["capabilities"][0]["effects"]["external_writes"] = True
    write_descriptor(folder, desc)
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "s") as host:
        reasons = " | ".join(host.approval_reasons("risky.echo"))
    for word in ("paid providers: openai", "publish", "credentials: tok", "external_writes"):
        assert word in reasons
    assert "cost" not in reasons


def test_policy_allow_list_lets_it_run(facet_home: Path, out: Path, tmp_path: Path) -> None:
    policy = mnb.Policy(roots={"out": out}, approved=["good.paid"])
    with mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=tmp_path / "s") as host:
        assert host.approval_reasons("good.paid") == []
        inv = host.invoke("good.paid", {})
        assert inv.ok and inv.approval.startswith("approved (allow-list, sha256:")


def test_approval_is_pinned_to_the_descriptor(
    host: mnb.ModuleHost, facet_home: Path, out: Path
) -> None:
    digest = host.approve("good.paid")
    assert digest.startswith("sha256:") and len(digest) == 71
    assert host.approval_reasons("good.paid") == []
    assert host.invoke("good.paid", {}).approval.startswith("approved (operator, sha256:")
    # the module changes what it declares: the approval no longer counts
    desc = default_descriptor(facet_home, "good")
    paid = next(c for c in desc["capabilities"] if c["id"] == "good.paid")
    paid["effects"]["network"] = True
    desc["permissions"]["network"].append("new.example")
    desc["capabilities"].append(dict(paid, id="good.extra"))
    write_descriptor(facet_home / "modules" / "good", desc)
    (out / "ran-paid").unlink()
    with pytest.raises(mnb.ApprovalRequired) as err:
        host.invoke("good.paid", {})
    assert not (out / "ran-paid").exists()
    changed = err.value.reasons[-1]
    assert "no longer counts" in changed
    assert "capability good.extra added" in changed
    assert "capability good.paid effects.network: false -> true" in changed
    assert "permissions.network" in changed and "new.example" in changed
    assert host.approval_reasons("good.paid") == err.value.reasons
    # approving again pins the new descriptor
    assert host.approve("good.paid") != digest
    assert host.invoke("good.paid", {}).ok


def test_allow_list_is_pinned_too(facet_home: Path, out: Path, tmp_path: Path) -> None:
    policy = mnb.Policy(roots={"out": out}, approved=["good.paid"])
    with mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=tmp_path / "s") as host:
        assert host.invoke("good.paid", {}).ok
        desc = default_descriptor(facet_home, "good")
        desc["permissions"]["credentials"] = ["token"]
        write_descriptor(facet_home / "modules" / "good", desc)
        reasons = host.approval_reasons("good.paid")
        assert any("allow-list approval" in r and "permissions.credentials" in r for r in reasons)


# -- 5. running --------------------------------------------------------------------------


def test_module_runs_with_an_empty_environment_in_its_own_session(
    host: mnb.ModuleHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_SECRET_TOKEN", "s3cr3t")
    inv = host.invoke("good.echo", {"count": 0})
    if inv.result["environ_at_exec"] is None:
        # a sandbox without namespaces (Landlock, as in a default Docker container) keeps
        # /proc from the module: what it can tell is its environment as CPython started
        # it, which adds only the C locale's coercion (PEP 538) to what exec passed
        assert "no /proc" in str(host.sandbox.guarantees["process_isolation"]), host.sandbox
        assert set(inv.result["environ"]) <= {"LC_CTYPE"}, inv.result["environ"]
    else:
        assert inv.result["environ_at_exec"] == ""  # nothing at all was passed at exec
    assert "MURMUR_SECRET_TOKEN" not in inv.result["environ"]
    assert inv.result["own_session"] is True
    assert inv.result["cwd_entries"] == []


def test_progress_false_still_means_no_view(host: mnb.ModuleHost) -> None:
    """``progress=False`` was valid in 0.1.0 and keeps its meaning: a plain call."""
    inv = host.invoke("good.echo", {"count": 0}, progress=False)
    assert inv.ok and inv.capability == "good.echo"


def test_each_run_gets_a_private_empty_working_folder(host: mnb.ModuleHost) -> None:
    first = host.invoke("good.echo", {"count": 0, "litter": True}).result
    second = host.invoke("good.echo", {"count": 0}).result
    assert first["cwd_entries"] == [] and second["cwd_entries"] == []
    assert not Path(first["cwd"], "litter.txt").exists()  # a littered folder is not reused
    third = host.invoke("good.echo", {"count": 0}).result
    # never recycled: each run's folder is new, and gone from the disk once it returns
    assert len({first["cwd"], second["cwd"], third["cwd"]}) == 3
    assert third["cwd_entries"] == [] and not Path(third["cwd"]).exists()


def test_a_host_left_open_leaves_no_runs_folder_behind(facet_home: Path, tmp_path: Path) -> None:
    # a notebook kernel that shuts down without host.close(): the private runs folder
    # (working folders, per-invocation write roots) goes when the interpreter exits
    temp = tmp_path / "temp"
    temp.mkdir()
    script = (
        "import json, sys\n"
        "import murmur_nb as mnb\n"
        "host = mnb.ModuleHost(home=sys.argv[1], artifact_store=sys.argv[2],\n"
        "                      policy=mnb.Policy(roots={'out': sys.argv[3]}))\n"
        "inv = host.invoke('good.echo', {'count': 0})\n"
        "print(inv.result['request']['roots']['scratch']['path'])\n"
        "closed = mnb.ModuleHost(home=sys.argv[1], artifact_store=sys.argv[2])\n"
        "closed.close()\n"
    )
    out = tmp_path / "open-out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script, str(facet_home), str(tmp_path / "s"), str(out)],
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    scratch = Path(done.stdout.strip())
    assert scratch.is_relative_to(temp)  # it was made, in the private runs folder
    assert not scratch.exists()
    assert list(temp.iterdir()) == []


def _assert_all_dead(pids: dict[str, int]) -> None:
    end = time.monotonic() + 3
    while any(alive(p) for p in pids.values()) and time.monotonic() < end:
        time.sleep(0.02)
    assert {r: p for r, p in pids.items() if alive(p)} == {}


def test_deadline_kills_the_whole_tree(host: mnb.ModuleHost, out: Path) -> None:
    start = time.monotonic()
    with pytest.raises(mnb.DeadlineExceeded) as err:
        host.invoke("runaway.tree", {}, deadline_ms=1_500)
    assert time.monotonic() - start < 6
    assert err.value.code == "deadline_exceeded" and isinstance(err.value, TimeoutError)
    pids = read_pids(out, ["root", "child", "grandchild", "setsid"])
    _assert_all_dead(pids)
    assert host.audit()["outcome"].iloc[-1] == "deadline_exceeded"


def test_deadline_kills_a_detached_setsid_daemon(host: mnb.ModuleHost, out: Path) -> None:
    # the daemon's parent exits and the daemon leaves the session and closes its stdio
    with pytest.raises(mnb.DeadlineExceeded):
        host.invoke("runaway.daemon", {}, deadline_ms=1_500)
    _assert_all_dead(read_pids(out, ["root", "child", "setsid"]))


def test_leftover_processes_are_killed_after_a_normal_answer(
    host: mnb.ModuleHost, out: Path
) -> None:
    start = time.monotonic()
    inv = host.invoke("runaway.linger", {}, deadline_ms=10_000)
    assert inv.ok and inv.result == {"lingering": True}
    assert time.monotonic() - start < 5  # not held until the deadline by the straggler
    _assert_all_dead(read_pids(out, ["root", "setsid"]))


def test_one_gib_of_output_is_cut_and_memory_stays_bounded(host: mnb.ModuleHost) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with pytest.raises(mnb.OutputTooLarge) as err:
        host.invoke("runaway.flood", {}, max_output_bytes=1 << 20)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert err.value.code == "output_too_large"
    assert isinstance(err.value, mnb.ProtocolViolation) and err.value.rule == "max_output_bytes"
    assert after - before < 64 * 1024  # far below the 1 GiB the module printed


def test_standard_error_keeps_a_bounded_tail(host: mnb.ModuleHost) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    inv = host.invoke("runaway.chatter", {})
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert inv.ok and inv.result == {"chatted": True}  # stderr is diagnostics, never the answer
    assert inv.stderr.endswith("\nlast words\n")  # the tail: the newest diagnostics
    assert 1000 < len(inv.stderr) <= 64 * 1024
    assert after - before < 64 * 1024  # far below the 256 MiB the module wrote


def test_keyboard_interrupt_kills_the_tree(host: mnb.ModuleHost, out: Path) -> None:
    def interrupt() -> None:
        read_pids(out, ["root", "child", "grandchild", "setsid"])
        _thread.interrupt_main()

    thread = threading.Thread(target=interrupt)
    thread.start()
    with pytest.raises(KeyboardInterrupt):
        host.invoke("runaway.tree", {}, deadline_ms=60_000)
    thread.join()
    _assert_all_dead(read_pids(out, ["root", "child", "grandchild", "setsid"]))
    assert host.audit()["outcome"].iloc[-1] == "interrupted"


# -- 6. envelope -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "rule"),
    [
        ("request_id", "request_id"),
        ("both", "result_xor_error"),
        ("neither", "result_xor_error"),
        ("warnings_null", "warnings"),
        ("no_execution", "execution"),
        ("protocol", "protocol"),
        ("module", "module"),
        ("operation", "operation"),
        ("not_json", "json"),
        ("trailing", "trailing_data"),
    ],
)
def test_each_envelope_rule(host: mnb.ModuleHost, mode: str, rule: str) -> None:
    assert host.invoke("liar.say", {"break": ""}).ok  # the same module, following the rules
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("liar.say", {"break": mode})
    assert err.value.code == "protocol_violation"
    assert err.value.rule == rule
    assert repr(rule) in str(err.value)
    assert host.audit()["outcome"].iloc[-1] == "protocol_violation"


def test_execution_is_kept_on_failures(host: mnb.ModuleHost) -> None:
    inv = host.invoke("good.fail", {"code": "quota_exceeded", "estimated": None, "actual": 0.4})
    assert not inv.ok and inv.result is None
    assert inv.error is not None and inv.error.code == "quota_exceeded"
    assert inv.error.retryable is True and inv.error.details == {"attempts": 1}
    assert inv.execution.estimated_cost is None and inv.execution.actual_cost == 0.4
    # a protocol violation keeps the execution the module reported, on the error and in audit
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("liar.say", {"break": "both"})
    assert err.value.invocation.execution.actual_cost == 1.5
    audit = host.audit()
    assert list(audit["outcome"]) == ["quota_exceeded", "protocol_violation"]
    assert audit["actual_cost"].iloc[1] == 1.5


# -- 9. audit ----------------------------------------------------------------------------


def test_audit_rows(host: mnb.ModuleHost) -> None:
    made = host.invoke("good.make", {})
    host.invoke("good.fail", {"estimated": 0, "actual": None})
    with pytest.raises(mnb.ApprovalRequired):
        host.invoke("good.paid", {})
    audit = host.audit()
    assert len(audit) == 3
    for col in (
        "time", "module", "capability", "request_id", "grants", "approval",
        "duration_ms", "outcome", "estimated_cost", "actual_cost", "artifacts",
    ):
        assert col in audit.columns
    first, second, third = (audit.iloc[i] for i in range(3))
    assert first["request_id"] == made.request_id and first["module"] == "good"
    assert first["outcome"] == "ok" and first["duration_ms"] > 0
    assert first["artifacts"] == [made.artifacts[0].digest]
    assert first["grants"]["network"] == ["api.example"]
    assert first["actual_cost"] == 0.25
    # unknown stays unknown (NA), free stays 0
    assert second["estimated_cost"] == 0 and second["actual_cost"] is pd.NA
    assert third["outcome"] == "approval_required" and third["approval"] == "refused"
    assert str(audit["time"].dt.tz) == "UTC"
    assert json.dumps(first["grants"])  # plain data


def test_an_empty_audit_has_the_dtypes_of_a_full_one(host: mnb.ModuleHost, tmp_path: Path) -> None:
    """An empty audit had ``object`` text columns and a ``time`` in seconds, so
    ``pd.concat([empty, full])`` turned ``module`` and ``outcome`` into objects."""
    with mnb.ModuleHost(home=tmp_path / "elsewhere") as fresh:
        empty = fresh.audit()
    host.invoke("good.make", {})
    with pytest.raises(mnb.ModuleNotFound):
        host.invoke("nothere.run", {})  # a row without a module
    full = host.audit()
    assert empty.empty and dict(empty.dtypes) == dict(full.dtypes)
    assert dict(pd.concat([empty, full]).dtypes) == dict(full.dtypes)
    assert pd.isna(full["module"].iloc[-1]) and full["module"].iloc[0] == "good"


def test_default_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FACET_STUDIO_HOME", str(tmp_path / "studio"))
    install(tmp_path / "studio", "envhome")
    with mnb.ModuleHost() as host:
        assert host.home == tmp_path / "studio"
        assert [m.id for m in host.modules()] == ["envhome"]
    monkeypatch.delenv("FACET_STUDIO_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    with mnb.ModuleHost() as host:
        assert host.home == tmp_path / ".facet-studio"
        assert host.modules() == []


def test_large_request_and_answer_do_not_deadlock(host: mnb.ModuleHost) -> None:
    blob = "x" * (3 << 20)  # far beyond a pipe buffer, both ways
    inv = host.invoke("good.echo", {"count": 1, "blob": blob})
    assert inv.result["request"]["input"]["blob"] == blob


_ENVELOPE_KEYS = st.sampled_from(
    ["protocol", "module", "operation", "request_id", "ok", "result", "error", "warnings",
     "execution"]
)
_VALUES = st.sampled_from(
    [None, True, False, 0, "", "modproto.v1", "good", "invoke", "rid", [], ["w"], {},
     {"code": "c", "message": "m", "retryable": False, "details": None}, {"n": 1}]
)


@given(drop=st.sets(_ENVELOPE_KEYS, max_size=3),
       changes=st.dictionaries(_ENVELOPE_KEYS, _VALUES, max_size=3))
def test_property_accepted_envelopes_obey_every_rule(
    drop: set[str], changes: dict[str, Any]
) -> None:
    env: dict[str, Any] = {"protocol": PROTOCOL_ID, "module": "good", "operation": "invoke",
                           "request_id": "rid", "ok": True, "result": {"n": 1},
                           "warnings": [], "execution": {}}
    for key in drop:
        env.pop(key, None)
    env.update(changes)
    req = mnb.protocol.Request(capability="good.echo", request_id="rid")
    stdout = json.dumps(env).encode()
    run = RunResult(stdout=stdout, stderr_tail=b"", returncode=0, duration_ms=1.0)
    ran = Ran("good", "good.echo", req, "not required", "", (), run, mnb.RunEvidence.of(0, b""))
    try:
        out = check_envelope(stdout, ran)
    except mnb.ProtocolViolation as exc:
        assert exc.rule
        return
    assert (env["protocol"], env["module"], env["operation"], env["request_id"]) == (
        PROTOCOL_ID, "good", "invoke", "rid"
    )
    assert isinstance(env["warnings"], list) and isinstance(env["execution"], dict)
    assert (env.get("result") is not None) != (env.get("error") is not None)
    assert out.ok == (env.get("result") is not None)


def test_an_edit_beside_the_launcher_is_seen_before_the_next_call(
    facet_home: Path, out: Path, tmp_path: Path
) -> None:
    # A module is often a launcher that runs code beside it; an edit to that code (here the
    # descriptor file the fixture reads, rewritten in place: same inode, same folder mtime)
    # must not hide behind a cached describe: a capability that starts to need approval is
    # refused at once, and nothing runs.
    folder = facet_home / "modules" / "good"
    desc = default_descriptor(facet_home, "good")
    write_descriptor(folder, desc)
    policy = mnb.Policy(roots={"out": out})
    with mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=tmp_path / "s") as host:
        assert host.invoke("good.echo", {"count": 1}).ok
        echo = next(c for c in desc["capabilities"] if c["id"] == "good.echo")
        echo["effects"]["cost_known"] = False
        folder_mtime = folder.stat().st_mtime_ns
        with (folder / "descriptor.json").open("r+") as fh:
            fh.truncate(0)
            fh.write(json.dumps(desc))
        assert folder.stat().st_mtime_ns == folder_mtime
        with pytest.raises(mnb.ApprovalRequired):
            host.invoke("good.echo", {"count": 1})


def test_a_kernel_out_of_descriptors_is_the_hosts_failure_not_the_modules(
    facet_home: Path, tmp_path: Path
) -> None:
    """With no file descriptor left in the kernel the call cannot start: that is said to be
    the host's ``host_error``, not the module's broken executable (rule ``executable``)."""
    script = (
        "import os, resource, sys\n"
        "import murmur_nb as mnb\n"
        "host = mnb.ModuleHost(home=sys.argv[1], artifact_store=sys.argv[2])\n"
        "assert host.invoke('good.echo', {'count': 0}).ok\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir('/proc/self/fd')), hard))\n"
        "try:\n"
        "    host.invoke('good.echo', {'count': 0})\n"
        "except mnb.ModuleHostError as exc:\n"
        "    print(type(exc).__name__, exc.code, exc, sep='|')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(facet_home), str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    kind, code, message = done.stdout.strip().split("|", 2)
    assert (kind, code) == ("ModuleHostError", "host_error"), done.stdout
    assert "Too many open files" in message and "not the module's" in message


def test_an_integer_wider_than_64_bits_reaches_the_module_and_the_journal_intact(
    host: mnb.ModuleHost, tmp_path: Path
) -> None:
    """The request and a batch's journaled record are written fast (orjson), which refuses an
    integer wider than 64 bits: such a value still reaches the module, and a resumed batch
    reads it back, unchanged."""
    big = 2**70 + 1
    inv = host.invoke("good.echo", {"count": 1, "big": big, "text": "é"})
    assert inv.result["request"]["input"]["big"] == big and inv.result["request"]["input"][
        "text"] == "é"  # fmt: skip
    journal = tmp_path / "journal.sqlite"
    first = host.map("good.echo", [{"count": 2, "big": big}], journal=journal, progress=False)
    again = host.map("good.echo", [{"count": 2, "big": big}], journal=journal, progress=False)
    assert first[0].result["request"]["input"]["big"] == big
    assert again[0].result == first[0].result
    assert again.to_pandas()["ok"].tolist() == [True]
