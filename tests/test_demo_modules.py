"""The shipped demo modules and the demo home, tested as the real executables they are.

Every module is run as a subprocess with an empty environment, a private working folder and a
request built with :mod:`murmur_nb.protocol`, exactly as a host runs it; every artifact it
reports is re-read and its size and digest checked.

The demo's own constants and helpers (``DEMO_MODULE_IDS``, ``demo_conversation``, the
launcher, the default path) and the host's describe parser are internal and imported on
purpose: they are what the demo promises, checked against what the modules really do.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import uuid
import wave
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from murmur_nb import DemoHome, prepare_demo_home
from murmur_nb._demo.home import (  # private: what the demo promises, checked
    DEMO_CONTEXT_ID,
    DEMO_MODULE_IDS,
    default_path,
    demo_conversation,
    launcher,
)
from murmur_nb._schemas.descriptor import parse_describe_output  # private: the describe parser
from murmur_nb.protocol import PROTOCOL_ID, Artifact, Descriptor, Envelope, Grants, Request, Root

PRIMITIVES = frozenset(
    {
        "video", "audio", "image", "image_grid", "timeline", "document", "diagram",
        "slides", "table", "markdown", "text", "json", "download",
    }
)  # fmt: skip


def _primitive(artifact: Artifact) -> str:
    """SPEC §2: the presentation hint when it is a known primitive, else the media type."""
    if artifact.presentation in PRIMITIVES:
        return artifact.presentation
    mt = artifact.media_type
    if mt.startswith("video/"):
        return "video"
    if mt.startswith("audio/"):
        return "audio"
    if mt == "image/svg+xml":
        return "diagram"
    if mt.startswith("image/"):
        return "image"
    table = {
        "application/pdf": "document",
        "text/markdown": "markdown",
        "text/csv": "table",
        "text/tab-separated-values": "table",
        "application/vnd.apache.parquet": "table",
        "application/json": "json",
    }
    if mt in table:
        return table[mt]
    return "text" if mt.startswith("text/") else "download"


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())


class Run:
    """One real invocation: the request sent, the envelope received, the roots used."""

    def __init__(self, request: Request, envelope: Envelope, stderr: bytes) -> None:
        self.request = request
        self.envelope = envelope
        self.stderr = stderr

    @property
    def artifacts(self) -> list[Artifact]:
        return list(self.envelope.execution.artifacts or [])

    def file(self, artifact: Artifact) -> Path:
        roots = self.request.roots or {}
        return Path(roots[artifact.root].path) / artifact.path


def invoke(
    home: DemoHome,
    tmp_path: Path,
    capability: str,
    input: dict[str, Any],
    *,
    roots: dict[str, Root] | None = None,
    grants: Grants | None = None,
    binaries: dict[str, str] | None = None,
) -> Run:
    module = capability.split(".", 1)[0]
    out = tmp_path / f"out-{uuid.uuid4().hex[:8]}"
    out.mkdir()
    cwd = tmp_path / f"cwd-{uuid.uuid4().hex[:8]}"
    cwd.mkdir()
    request = Request(
        capability=capability,
        request_id=uuid.uuid4().hex,
        input=input,
        roots={"out": Root(path=str(out), mode="rw"), **(roots or {})},
        grants=grants or Grants(),
        binaries=binaries or {},
        deadline_ms=60_000,
        max_output_bytes=1 << 20,
    )
    proc = subprocess.run(
        [str(home.module_dir(module) / "module"), "invoke"],
        input=request.to_json().encode(),
        env={},
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    envelope = Envelope.from_json(proc.stdout)
    assert envelope.protocol == PROTOCOL_ID
    assert envelope.module == module
    assert envelope.operation == "invoke"
    assert envelope.request_id == request.request_id
    assert (envelope.result is None) != (envelope.error is None)
    assert list(cwd.iterdir()) == [], "a module must leave its working folder empty"
    return Run(request, envelope, proc.stderr)


def assert_artifacts_verify(run: Run) -> None:
    roots = run.request.roots or {}
    for artifact in run.artifacts:
        assert artifact.root in roots, artifact
        assert roots[artifact.root].mode == "rw"
        rel = PurePosixPath(artifact.path)
        assert not rel.is_absolute() and ".." not in rel.parts
        file = run.file(artifact)
        assert file.resolve().is_relative_to(Path(roots[artifact.root].path).resolve())
        assert file.is_file() and not file.is_symlink()
        data = file.read_bytes()
        assert artifact.bytes == len(data)
        assert artifact.digest == "sha256:" + hashlib.sha256(data).hexdigest()
        assert artifact.presentation in PRIMITIVES


def describe(home: DemoHome, module: str, tmp_path: Path) -> Descriptor:
    proc = subprocess.run(
        [str(home.module_dir(module) / "module"), "describe"],
        env={},
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=True,
    )
    descriptor, errors = parse_describe_output(proc.stdout, module, home.module_dir(module))
    assert errors == []
    assert descriptor is not None
    return descriptor


# -- descriptors -----------------------------------------------------------------------------


@pytest.mark.parametrize("module", DEMO_MODULE_IDS)
def test_descriptor_passes_strict_validation(
    demo_home: DemoHome, module: str, tmp_path: Path
) -> None:
    descriptor = describe(demo_home, module, tmp_path)
    assert descriptor.protocol_versions == [PROTOCOL_ID]
    caps = descriptor.capabilities or []
    assert caps
    for cap in caps:
        assert cap.id.startswith(f"{module}.")
        assert cap.title and cap.summary
        assert cap.request_schema in (descriptor.request_schemas or {})
        assert cap.result_schema in (descriptor.result_schemas or {})
        for kind in cap.artifact_schemas or []:
            assert kind in (descriptor.artifact_schemas or {})
    # Overlay and skill digests are fixed in the source: the files must still match them.
    for doc in [*(descriptor.agent_overlays or []), *(descriptor.skills or [])]:
        data = (demo_home.module_dir(module) / doc.path).read_bytes()
        assert doc.digest == "sha256:" + hashlib.sha256(data).hexdigest(), doc.path


def test_descriptor_schema_ids_cover_every_declared_artifact_kind(
    demo_home: DemoHome, tmp_path: Path
) -> None:
    declared = {
        (m, cap.id): set(cap.artifact_schemas or [])
        for m in DEMO_MODULE_IDS
        for cap in describe(demo_home, m, tmp_path).capabilities or []
    }
    assert ("studio", "studio.storyboard_status") in declared
    assert declared[("studio", "studio.storyboard")] == set()


def test_transcribe_needs_setup_and_names_the_fix(demo_home: DemoHome, tmp_path: Path) -> None:
    descriptor = describe(demo_home, "transcribe", tmp_path)
    reqs = {r.name: r for r in descriptor.requirements or []}
    assert reqs["whisper-cli"].kind == "binary"
    assert reqs["whisper-cli"].available is False
    assert "whisper.cpp" in reqs["whisper-cli"].detail
    assert reqs["model"].kind == "config" and reqs["model"].available is False
    assert "ggml-base.en.bin" in reqs["model"].detail
    params = {"audio": {"root": "staged", "path": "a"}}
    run = invoke(demo_home, tmp_path, "transcribe.audio", params)
    assert run.envelope.error is not None
    assert run.envelope.error.code == "missing_requirement"
    assert run.envelope.execution.artifacts == []


def test_other_modules_have_every_requirement_met(demo_home: DemoHome, tmp_path: Path) -> None:
    for module in DEMO_MODULE_IDS:
        if module == "transcribe":
            continue
        for req in describe(demo_home, module, tmp_path).requirements or []:
            assert req.available, (module, req)


# -- every capability, real artifacts -------------------------------------------------------


def _run_everything(home: DemoHome, tmp_path: Path) -> list[Run]:
    runs = [
        invoke(home, tmp_path, "gallery.thumbs", {"count": 3}),
        invoke(home, tmp_path, "gallery.poster", {"title": "hello"}),
        invoke(home, tmp_path, "gallery.diagram", {}),
        invoke(home, tmp_path, "studio.tone", {}),
        invoke(
            home, tmp_path, "studio.clip", {"seconds": 1},
            grants=Grants(subprocess=["ffmpeg"]), binaries={"ffmpeg": _ffmpeg()},
        ),
        invoke(home, tmp_path, "docs.report", {}),
    ]  # fmt: skip
    jobs = {"jobs": Root(path=str(tmp_path / "jobs"), mode="rw")}
    (tmp_path / "jobs").mkdir()
    submitted = invoke(home, tmp_path, "studio.storyboard", {"scenes": ["a", "b"]}, roots=jobs)
    runs.append(submitted)
    job = submitted.envelope.result["job"]
    runs += [
        invoke(home, tmp_path, "studio.storyboard_status", {"job": job}, roots=jobs)
        for _ in range(2)
    ]
    thumb = runs[0]
    staged = {"staged": Root(path=str(runs[0].file(thumb.artifacts[0]).parent.parent), mode="ro")}
    ref = {"root": "staged", "path": "thumbs/thumb-01.png"}
    runs.append(invoke(home, tmp_path, "critic.review", {"image": ref}, roots=staged))
    runs.append(
        invoke(
            home, tmp_path, "oracle.critique", {"image": ref}, roots=staged,
            grants=Grants(paid_providers=["demo-oracle"]),
        )
    )  # fmt: skip
    return runs


@pytest.fixture(scope="module")
def everything(demo_home: DemoHome, tmp_path_factory: pytest.TempPathFactory) -> list[Run]:
    return _run_everything(demo_home, tmp_path_factory.mktemp("everything"))


def test_every_capability_runs_and_every_artifact_verifies(everything: list[Run]) -> None:
    runs = everything
    for run in runs:
        assert run.envelope.ok, (run.request.capability, run.envelope.error, run.stderr)
        assert run.envelope.warnings == []
        assert_artifacts_verify(run)
    produced = {_primitive(a) for run in runs for a in run.artifacts}
    assert produced == PRIMITIVES


def test_artifact_contents_are_what_they_claim(everything: list[Run]) -> None:
    runs = {r.request.capability: r for r in everything}

    def files(cap: str) -> dict[str, Path]:
        return {a.id: runs[cap].file(a) for a in runs[cap].artifacts}

    thumbs = files("gallery.thumbs")
    assert len(thumbs) == 3
    for path in thumbs.values():
        with Image.open(path) as img:
            assert img.format == "PNG" and img.size == (160, 160)
    with wave.open(str(files("studio.tone")["tone"]), "rb") as wav:
        assert wav.getframerate() == 22050 and wav.getnframes() > 22050
    clip = files("studio.clip")["clip"].read_bytes()
    assert clip[4:8] == b"ftyp"
    probe = subprocess.run(
        [_ffmpeg(), "-hide_banner", "-i", str(files("studio.clip")["clip"])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "Video: h264" in probe.stderr and "Duration: 00:00:01.00" in probe.stderr
    diagram = files("gallery.diagram")
    assert diagram["pipeline"].read_text().startswith("<svg")
    assert diagram["pipeline-mermaid"].read_text().startswith("flowchart LR")
    assert diagram["pipeline-dot"].read_text().startswith("digraph")
    report = files("docs.report")
    pdf = report["report"].read_bytes()
    assert pdf.startswith(b"%PDF-") and b"/Count 5" in pdf
    import pyarrow.parquet as pq

    table = pq.read_table(report["orders-parquet"])
    csv_lines = report["orders-csv"].read_text().splitlines()
    assert table.num_rows == len(csv_lines) - 1 == 112
    assert table.column_names == csv_lines[0].split(",")
    summary = json.loads(report["summary-json"].read_text())
    assert summary["rows"] == 112
    import zipfile

    with zipfile.ZipFile(report["report-bundle"]) as zf:
        assert sorted(zf.namelist()) == [
            "orders.csv", "report.pdf", "summary.json", "summary.md", "totals.txt"
        ]  # fmt: skip
        assert zf.read("report.pdf") == pdf
    status = runs["studio.storyboard_status"]
    done = files("studio.storyboard_status")
    timeline = json.loads(done["timeline"].read_text())
    assert {e["lane"] for e in timeline["events"]} == {"picture", "captions", "sound"}
    assert all(isinstance(e["start"], int | float) for e in timeline["events"])
    slides = done["slides"].read_text()
    assert len([ln for ln in slides.splitlines() if ln == "---"]) == 2
    assert status.envelope.result["state"] == "done"
    review = json.loads(files("critic.review")["measurements"].read_text())
    assert (review["width"], review["height"]) == (160, 160)


def test_same_input_same_bytes(demo_home: DemoHome, tmp_path: Path, everything: list[Run]) -> None:
    first = everything
    second = _run_everything(demo_home, tmp_path)
    digests = [[(a.id, a.digest) for a in r.artifacts] for r in first]
    assert digests == [[(a.id, a.digest) for a in r.artifacts] for r in second]
    assert sum(len(d) for d in digests) >= 20


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    params=st.fixed_dictionaries(
        {
            "count": st.integers(1, 16),
            "size": st.integers(32, 200),
            "seed": st.integers(0, 2**31),
            "palette": st.sampled_from(["dusk", "forest", "ember", "mono"]),
        }
    )
)
def test_thumbs_for_any_valid_input(
    demo_home: DemoHome, tmp_path: Path, params: dict[str, Any]
) -> None:
    count, size = params["count"], params["size"]
    run = invoke(demo_home, tmp_path, "gallery.thumbs", params)
    assert run.envelope.ok
    assert len(run.artifacts) == count
    assert {a.presentation for a in run.artifacts} == {"image_grid"}
    assert_artifacts_verify(run)
    with Image.open(run.file(run.artifacts[-1])) as img:
        assert img.size == (size, size)


# -- effects and costs ----------------------------------------------------------------------


def test_free_capabilities_report_zero_cost(
    demo_home: DemoHome, tmp_path: Path, everything: list[Run]
) -> None:
    descriptors = {m: describe(demo_home, m, tmp_path) for m in DEMO_MODULE_IDS}
    for run in everything:
        cap = descriptors[run.envelope.module].capability(run.request.capability)
        assert cap is not None
        execution = run.envelope.execution
        if run.envelope.module == "oracle":
            assert cap.effects.cost_known is False
            assert cap.effects.provider == "demo-oracle"
            assert execution.provider == "demo-oracle"
            assert execution.estimated_cost is None and execution.actual_cost is None
            assert '"estimated_cost":null' in run.envelope.to_json()
        else:
            assert cap.effects.cost_known is True
            assert execution.estimated_cost == 0 and execution.actual_cost == 0


def test_paid_oracle_needs_its_grant(demo_home: DemoHome, tmp_path: Path) -> None:
    descriptor = describe(demo_home, "oracle", tmp_path)
    assert descriptor.permissions.paid_providers == ["demo-oracle"]
    thumbs = invoke(demo_home, tmp_path, "gallery.thumbs", {"count": 1})
    root = Root(path=str(thumbs.file(thumbs.artifacts[0]).parent.parent), mode="ro")
    run = invoke(
        demo_home, tmp_path, "oracle.critique",
        {"image": {"root": "staged", "path": "thumbs/thumb-01.png"}}, roots={"staged": root},
    )  # fmt: skip
    assert run.envelope.error is not None and run.envelope.error.code == "not_granted"
    assert run.envelope.execution.estimated_cost is None  # a failed paid call: still unknown


def test_studio_clip_fails_closed_without_a_supplied_ffmpeg(
    demo_home: DemoHome, tmp_path: Path
) -> None:
    run = invoke(demo_home, tmp_path, "studio.clip", {}, grants=Grants(subprocess=["ffmpeg"]))
    assert run.envelope.error is not None
    assert run.envelope.error.code == "missing_requirement"
    assert "ffmpeg" in run.envelope.error.message
    assert run.artifacts == []


# -- the long-running job -------------------------------------------------------------------


def test_storyboard_is_long_running_with_its_poll(demo_home: DemoHome, tmp_path: Path) -> None:
    descriptor = describe(demo_home, "studio", tmp_path)
    submit = descriptor.capability("studio.storyboard")
    assert submit is not None and submit.long_running
    assert descriptor.capability(submit.poll_capability) is not None
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    roots = {"jobs": Root(path=str(jobs), mode="rw")}
    scenes = ["one", "two", "three"]
    started = invoke(demo_home, tmp_path, "studio.storyboard", {"scenes": scenes}, roots=roots)
    assert started.envelope.result["state"] == "running"
    assert started.envelope.result["poll_capability"] == "studio.storyboard_status"
    job = started.envelope.result["job"]
    states = []
    for _ in range(len(scenes) + 1):
        poll = invoke(demo_home, tmp_path, "studio.storyboard_status", {"job": job}, roots=roots)
        states.append((poll.envelope.result["state"], poll.envelope.result["done"]))
        assert (poll.artifacts != []) == (poll.envelope.result["state"] == "done")
    assert states == [("running", 1), ("running", 2), ("done", 3), ("done", 3)]
    # Submitting the same storyboard again restarts it, so a re-run notebook replays the same.
    again = invoke(demo_home, tmp_path, "studio.storyboard", {"scenes": scenes}, roots=roots)
    assert again.envelope.result["job"] == job
    poll = invoke(demo_home, tmp_path, "studio.storyboard_status", {"job": job}, roots=roots)
    assert poll.envelope.result["done"] == 1


def test_poll_needs_a_persistent_jobs_root(demo_home: DemoHome, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    run = invoke(
        demo_home, tmp_path, "studio.storyboard_status", {"job": "0123456789abcdef"},
        roots={"jobs": Root(path=str(fresh), mode="rw")},
    )  # fmt: skip
    assert run.envelope.error is not None and run.envelope.error.code == "unknown_job"
    assert "persists between calls" in run.envelope.error.message


# -- cross-module handoff -------------------------------------------------------------------


def test_critic_reads_only_inside_the_named_read_only_root(
    demo_home: DemoHome, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    with Image.new("RGB", (40, 30), (200, 10, 10)) as img:
        img.save(store / "red.png")
    (tmp_path / "secret.png").write_bytes((store / "red.png").read_bytes())
    (store / "link.png").symlink_to(tmp_path / "secret.png")
    before = sorted(p.name for p in store.iterdir())
    roots = {"staged": Root(path=str(store), mode="ro")}
    ok = invoke(demo_home, tmp_path, "critic.review",
                {"image": {"root": "staged", "path": "red.png"}}, roots=roots)
    assert ok.envelope.ok and ok.envelope.result["width"] == 40
    assert ok.envelope.result["verdict"].startswith("dark")
    for path, code in (("../secret.png", "invalid_input"), ("link.png", "not_found"),
                       ("missing.png", "not_found")):
        bad = invoke(demo_home, tmp_path, "critic.review",
                     {"image": {"root": "staged", "path": path}}, roots=roots)
        assert bad.envelope.error is not None and bad.envelope.error.code == code, path
    unknown = invoke(demo_home, tmp_path, "critic.review",
                     {"image": {"root": "elsewhere", "path": "red.png"}}, roots=roots)
    assert unknown.envelope.error is not None
    assert unknown.envelope.error.code == "missing_root"
    assert sorted(p.name for p in store.iterdir()) == before


# -- protocol edges -------------------------------------------------------------------------


def test_unknown_capability_and_bad_stdin_get_error_envelopes(
    demo_home: DemoHome, tmp_path: Path
) -> None:
    run = invoke(demo_home, tmp_path, "gallery.nope", {})
    assert run.envelope.error is not None and run.envelope.error.code == "unknown_capability"
    proc = subprocess.run(
        [str(demo_home.module_dir("docs") / "module"), "invoke"],
        input=b"not json", env={}, cwd=tmp_path, capture_output=True, check=True,
    )  # fmt: skip
    envelope = Envelope.from_json(proc.stdout)
    assert not envelope.ok and envelope.error is not None
    assert envelope.error.code == "invalid_request"
    assert proc.stdout.count(b"\n") == 1
    usage = subprocess.run(
        [str(demo_home.module_dir("docs") / "module"), "frobnicate"],
        env={}, cwd=tmp_path, capture_output=True, check=False,
    )  # fmt: skip
    assert usage.returncode == 2 and usage.stdout == b""


#: Inputs every demo capability's request_schema refuses, as the module checker sends them.
REFUSED_INPUTS: list[tuple[str, Any]] = [
    ("gallery.thumbs", ["not", "an", "object"]),
    ("gallery.thumbs", {"count": 99}),
    ("gallery.poster", {"title": {"not": "a string"}}),
    ("gallery.diagram", {"steps": ["one"]}),
    ("docs.report", {"title": 7}),
    ("docs.report", {"days": 28, "colour": "red"}),
    ("studio.tone", "arpeggio"),
    ("studio.storyboard", {"scenes": [""]}),
    ("studio.storyboard_status", {"job": "../../etc"}),
    ("critic.review", {}),
    ("oracle.critique", {"image": {"root": "staged"}}),
    ("transcribe.audio", None),
]


@pytest.mark.parametrize(("capability", "value"), REFUSED_INPUTS)
def test_an_input_the_schema_refuses_is_answered_invalid_input(
    demo_home: DemoHome, tmp_path: Path, capability: str, value: Any
) -> None:
    """A host may send an input unchecked (``validate_input=False``): the module refuses it
    with ``ok: false`` before doing anything; ``gallery.thumbs`` painted 4 images for a list."""
    run = invoke(demo_home, tmp_path, capability, value)
    assert not run.envelope.ok and run.envelope.error is not None, run.envelope
    assert run.envelope.error.code == "invalid_input", run.envelope.error
    assert run.artifacts == []


#: What ``murmur-nb check`` needs besides the module: the paid oracle asks for approval on
#: every call by design, so its check approves it (the check's own advice).
CHECK_OPTIONS = {"oracle": ["--approve", "oracle.critique"]}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("module", DEMO_MODULE_IDS)
def test_every_demo_module_passes_the_module_checker(demo_home: DemoHome, module: str) -> None:
    """Newcomers copy the demo modules: ``murmur-nb check`` (the installed command) finds no
    FAIL and no WARN in any of them. ``transcribe`` needs whisper.cpp set up to run at all:
    where it is not, its capability is skipped for its requirements, which leaves the check's
    coverage row a WARN and nothing else."""
    exe = Path(sys.executable).with_name("murmur-nb")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "murmur_nb"]
    done = subprocess.run(
        [*argv, "--home", str(demo_home.facet_home), "check", module, "--json",
         *CHECK_OPTIONS.get(module, [])],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(done.stdout)["checks"]
    flagged = [(r["check"], r["capability"], r["detail"]) for r in rows
               if r["status"] in ("fail", "warn")]  # fmt: skip
    skipped = {r["check"] for r in rows if r["status"] == "skipped"}
    if module == "transcribe" and skipped == {"invoke.requirements"}:  # whisper.cpp not set up
        assert [row[0] for row in flagged] == ["invoke.coverage"], flagged
    else:
        assert flagged == [], flagged


# -- the demo home --------------------------------------------------------------------------


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_ino)
        for p in folder.rglob("*")
        if p.is_file() and p.name != ".prepare.lock"
    }


def test_prepare_demo_home_lays_out_everything_and_is_idempotent(tmp_path: Path) -> None:
    home = prepare_demo_home(tmp_path / "demo", hooks=False)
    assert home.path == (tmp_path / "demo").absolute()
    for module in DEMO_MODULE_IDS:
        exe = home.module_dir(module) / "module"
        assert exe.stat().st_mode & stat.S_IXUSR
        assert exe.read_text().splitlines()[0] == f"#!{sys.executable} -IB"
        assert (home.module_dir(module) / "main.py").is_file()
        assert (home.module_dir(module) / "_kit.py").is_file()
    assert home.artifact_store.is_dir() and home.jobs.is_dir()
    assert home.record == home.murmur_home / "conversations" / f"{DEMO_CONTEXT_ID}.jsonl"
    before = _snapshot(home.path)
    again = prepare_demo_home(tmp_path / "demo", hooks=False)
    assert again == home
    assert _snapshot(home.path) == before
    # A damaged file is repaired; a file the user added is kept.
    (home.module_dir("gallery") / "main.py").write_text("broken")
    extra = home.module_dir("transcribe") / "models" / "notes.txt"
    extra.parent.mkdir()
    extra.write_text("mine")
    prepare_demo_home(tmp_path / "demo", hooks=False)
    assert "gallery" in (home.module_dir("gallery") / "main.py").read_text()
    assert extra.read_text() == "mine"


def test_default_path_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_NB_DEMO_HOME", str(tmp_path / "from-env"))
    assert prepare_demo_home(hooks=False).path == tmp_path / "from-env"
    monkeypatch.delenv("MURMUR_NB_DEMO_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert default_path() == tmp_path / "user" / ".murmur-nb-demo"


def test_demo_conversation_record(demo_home: DemoHome) -> None:
    lines = demo_home.record.read_bytes().split(b"\n")
    assert lines[-1] == b""
    messages = [json.loads(line) for line in lines[:-1]]
    assert 300 <= len(messages) <= 500
    assert messages == demo_conversation()
    assert len({m["id"] for m in messages}) == len(messages)
    roles = {m["role"] for m in messages}
    assert roles == {"system", "user", "assistant", "tool"}
    tools = [m for m in messages if m["role"] == "tool"]
    assert len(tools) >= 60
    assert all(isinstance(m["tool_call_id"], str) and isinstance(m["is_error"], bool)
               for m in tools)
    assert any(m["is_error"] for m in tools) and not all(m["is_error"] for m in tools)
    assert {type(m["content"]).__name__ for m in tools} >= {"dict", "str", "list"}
    assert all(isinstance(m["content"], str) for m in messages if m["role"] != "tool")
    stamps = [m["created_at"] for m in messages]
    assert stamps == sorted(stamps) and len({s[:10] for s in stamps}) >= 3


def test_murmur_yaml_has_one_granted_and_one_ungranted_hook(demo_home: DemoHome) -> None:
    config = yaml.safe_load(demo_home.murmur_yaml.read_text())
    assert config["inference"]["transport"] == "api"
    hooks = config["hooks"]
    assert set(hooks) == {"summarize", "peek"}
    assert hooks["summarize"]["capabilities"]["conversation"]["read"] is True
    assert "capabilities" not in hooks["peek"]
    for hook in hooks.values():
        assert not Path(hook["component"]).is_absolute()
        assert set(hook["events"]) <= {"task-start", "compact"}


def test_demo_policy_supplies_what_the_modules_need(demo_home: DemoHome) -> None:
    policy = demo_home.policy()
    assert policy.root_path("jobs") == demo_home.jobs.resolve()
    ffmpeg = policy.resolve_binary("ffmpeg")
    assert ffmpeg is not None and Path(ffmpeg).is_file()
    assert policy.allows("subprocess", "ffmpeg")
    assert policy.allows("paid_providers", "demo-oracle")
    assert demo_home.policy(paid_providers=[]).allows("paid_providers", "demo-oracle") is False


def test_long_interpreter_paths_get_a_shell_trampoline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "bin"
    deep.mkdir(parents=True)
    python = deep / "python3"
    python.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(python))
    module = tmp_path / "mod"
    module.mkdir()
    (module / "module").write_bytes(launcher("mod"))
    (module / "module").chmod(0o755)
    (module / "main.py").write_text(
        "import sys\n\ndef main(argv):\n    print('ran', *argv)\n    return 3\n"
    )
    assert (module / "module").read_bytes().startswith(b"#!/bin/sh\n")
    proc = subprocess.run(
        [str(module / "module"), "describe"], env={}, cwd=tmp_path, capture_output=True,
        check=False,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (3, b"ran describe\n"), proc.stderr


# -- through the module host ----------------------------------------------------------------


def test_host_lists_every_demo_module_and_which_needs_setup(demo_home: DemoHome) -> None:
    import murmur_nb as mnb

    with demo_home.host() as host:
        infos = {info.id: info for info in host.modules()}
        assert isinstance(host, mnb.ModuleHost)
    assert set(infos) == set(DEMO_MODULE_IDS)
    for module, info in infos.items():
        assert info.ok, (module, info.errors)
        assert info.needs_setup == (module == "transcribe")
    instructions = " ".join(infos["transcribe"].setup_instructions)
    assert "whisper-cli" in instructions and "ggml-base.en.bin" in instructions


def test_only_the_paid_oracle_needs_approval(demo_home: DemoHome) -> None:
    import murmur_nb as mnb

    with demo_home.host() as host:
        caps = [c.id for m in DEMO_MODULE_IDS for c in host.describe(m).capabilities or []]
        needing = {c for c in caps if host.approval_reasons(c)}
        assert needing == {"oracle.critique"}
        reasons = " ".join(host.approval_reasons("oracle.critique"))
        assert "cost" in reasons and "demo-oracle" in reasons
        thumbs = host.invoke("gallery.thumbs", {"count": 1})
        staged = host.stage(thumbs.artifacts[0])
        with pytest.raises(mnb.ApprovalRequired) as refused:
            host.invoke("oracle.critique", {"image": staged.ref()}, staged=[staged])
        assert refused.value.code == "approval_required"
        audit = host.audit()
        assert list(audit["capability"]) == ["gallery.thumbs", "oracle.critique"]
        assert audit["outcome"].iloc[-1] == "approval_required"
        approved = host.invoke(
            "oracle.critique", {"image": staged.ref()}, staged=[staged], approve=True
        )
        assert approved.ok, approved.error
        assert approved.estimated_cost is None and approved.actual_cost is None
        assert thumbs.actual_cost == 0.0


def test_transcribe_is_refused_by_the_host_until_set_up(demo_home: DemoHome) -> None:
    import murmur_nb as mnb

    with demo_home.host() as host:
        tone = host.invoke("studio.tone", {})
        staged = host.stage(tone.artifacts[0])
        with pytest.raises(mnb.MissingRequirement) as refused:
            host.invoke("transcribe.audio", {"audio": staged.ref()}, staged=[staged])
    assert refused.value.code == "missing_requirement"
    assert "whisper" in str(refused.value)


def _host_everything(host: Any) -> list[Any]:
    invs = [
        host.invoke("gallery.thumbs", {"count": 4}),
        host.invoke("gallery.poster", {}),
        host.invoke("gallery.diagram", {}),
        host.invoke("studio.tone", {}),
        host.invoke("studio.clip", {"seconds": 2}),
        host.invoke("docs.report", {}),
    ]
    started = host.invoke("studio.storyboard", {})
    invs.append(started)
    polls = 0
    while True:
        polls += 1
        status = host.invoke("studio.storyboard_status", {"job": started.result["job"]})
        invs.append(status)
        if status.result["state"] == "done":
            break
        assert polls < 10
    assert polls == started.result["total"]
    staged = host.stage(invs[0].artifacts[2])
    invs.append(host.invoke("critic.review", {"image": staged.ref()}, staged=[staged]))
    invs.append(
        host.invoke("oracle.critique", {"image": staged.ref()}, staged=[staged], approve=True)
    )
    return invs


def test_every_demo_capability_through_the_host_covers_all_13_primitives(
    demo_home: DemoHome, tmp_path: Path
) -> None:
    import murmur_nb as mnb

    with demo_home.host(runs_dir=tmp_path / "runs") as host:
        invs = _host_everything(host)
        for inv in invs:
            assert inv.ok, (inv.capability, inv.error, inv.stderr)
            assert inv.warnings == [] and inv.rejected_artifacts == []
            for artifact in inv.artifacts:
                data = artifact.file.read_bytes()
                assert artifact.digest == "sha256:" + hashlib.sha256(data).hexdigest()
                assert artifact.bytes == len(data)
        primitives = {
            mnb.resolve_presentation(a.presentation, a.media_type)
            for inv in invs
            for a in inv.artifacts
        }
        assert primitives == PRIMITIVES
        # Every demo artifact renders with the host's own renderers, without a warning.
        for inv in invs:
            if inv.artifacts:
                rendering = mnb.render(inv)
                assert rendering.ok, (inv.capability, rendering.text)
        assert len(host.audit()) == len(invs)



# -- the demo capsule: built hook, murmur.yaml, record -------------------------------------


@pytest.mark.slow
def test_demo_home_builds_the_hook_and_only_the_granted_hook_reads(tmp_path: Path) -> None:
    import murmur_nb as mnb
    from murmur_nb import HookHost

    home = prepare_demo_home(tmp_path / "demo")
    component = home.murmur_home / "hooks" / "summarize.wasm"
    assert component.read_bytes()[:4] == b"\0asm"
    store = mnb.ConversationStore(home.murmur_home)
    with HookHost.from_config(home.murmur_yaml, conversations=store) as hooks:
        results = hooks.task_start(task_id="t1", context_id=home.context_id)
    granted, denied = results["summarize"], results["peek"]
    assert granted.ok, (granted.error, granted.stderr)
    tool_errors = sum(1 for m in demo_conversation() if m.get("is_error"))
    assert f"task t1: {len(demo_conversation())} messages" in granted.value
    assert f"{tool_errors} failed tool calls" in granted.value
    assert not denied.ok
    assert "not-granted" in (denied.error or "")


def test_concurrent_preparations_of_one_home_agree(tmp_path: Path) -> None:
    target = tmp_path / "shared"
    code = (
        "import sys, murmur_nb as mnb; "
        "h = mnb.prepare_demo_home(sys.argv[1], hooks=False); print(h.record.stat().st_size)"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    sizes = {p.communicate(timeout=120)[0] for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(sizes) == 1
    home = DemoHome(target)
    assert [json.loads(line) for line in home.record.read_text().splitlines()] == (
        demo_conversation()
    )
    assert not list(target.glob(".record-*"))
    assert not list(target.rglob(".*.tmp-*"))
