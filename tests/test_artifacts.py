"""Artifact re-validation: a declared artifact is refused before its file is touched.

Tests go through ``ModuleHost.invoke`` with real modules, except the property test, which
calls ``verify_artifact`` (internal, the check the host runs on every artifact) directly:
hundreds of generated paths are only affordable without a module process for each.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import install
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import murmur_nb as mnb
from murmur_nb._files.artifacts import verify_artifact  # private: a property test calls it directly
from murmur_nb.protocol import Artifact, Root

DATA = b"\x89PNG fixture bytes"


def _claim(path: str, data: bytes = DATA, **changes: Any) -> dict[str, Any]:
    art = {"id": "x", "kind": "image", "path": path, "root": "out", "media_type": "image/png",
           "bytes": len(data), "digest": "sha256:" + hashlib.sha256(data).hexdigest()}
    art.update(changes)
    return art


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """``tmp/out`` (the root), ``tmp/out-evil`` (a sibling sharing its prefix), ``tmp/secret``."""
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "a.png").write_bytes(DATA)
    (out / "sub" / "b.png").write_bytes(DATA)
    (tmp_path / "out-evil").mkdir()
    (tmp_path / "out-evil" / "a.png").write_bytes(DATA)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "a.png").write_bytes(DATA)
    return tmp_path


@pytest.fixture
def host(tmp_path: Path, layout: Path) -> Iterator[mnb.ModuleHost]:
    home = tmp_path / "home"
    install(home, "good")
    policy = mnb.Policy(roots={"out": layout / "out", "src": layout / "secret"})
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "store") as h:
        yield h


def _report(host: mnb.ModuleHost, *arts: dict[str, Any]) -> mnb.Invocation:
    return host.invoke("good.report", {"artifacts": list(arts)})


def test_a_good_artifact_is_verified(host: mnb.ModuleHost, layout: Path) -> None:
    inv = _report(host, _claim("sub/b.png", title="B", presentation="image"))
    assert inv.ok and inv.rejected_artifacts == []
    (art,) = inv.artifacts
    assert isinstance(art, mnb.VerifiedArtifact) and isinstance(art, mnb.protocol.Artifact)
    assert art.file == (layout / "out" / "sub" / "b.png").resolve() and art.file.is_absolute()
    assert (art.id, art.kind, art.root, art.presentation, art.title) == (
        "x", "image", "out", "image", "B"
    )
    assert "file" not in art.model_dump(mode="json")  # the wire form stays the protocol's


def test_links_that_stay_inside_are_followed(host: mnb.ModuleHost, layout: Path) -> None:
    out = layout / "out"
    (out / "l2").symlink_to(out / "sub" / "b.png")
    (out / "l1").symlink_to("l2")
    (out / "subdir-link").symlink_to("sub")
    inv = _report(host, _claim("l1"), _claim("subdir-link/b.png", id="y"))
    assert [a.file for a in inv.artifacts] == [(out / "sub" / "b.png").resolve()] * 2


def _link(name: str, target: Callable[[Path], Path | str]) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        (root / "out" / name).symlink_to(target(root))

    return make


def _chain(root: Path) -> None:
    (root / "out" / "c2").symlink_to(root / "secret" / "a.png")
    (root / "out" / "c1").symlink_to("c2")


def _loop(root: Path) -> None:
    (root / "out" / "loop1").symlink_to("loop2")
    (root / "out" / "loop2").symlink_to("loop1")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "out" / "pipe")


def _nothing(root: Path) -> None:
    return None


REFUSED: list[tuple[str, Callable[[Path], None], dict[str, Any], str, str]] = [
    ("dotdot", _nothing, _claim("../secret/a.png"), "confinement_violation", "'..'"),
    ("dotdot inside", _nothing, _claim("sub/../a.png"), "confinement_violation", "'..'"),
    ("absolute", _nothing, _claim("/etc/passwd"), "confinement_violation", "absolute"),
    ("root not supplied", _nothing, _claim("a.png", root="elsewhere"),
     "confinement_violation", "not supplied"),
    ("root of policy, not declared", _nothing, _claim("a.png", root="undeclared"),
     "confinement_violation", "not supplied"),
    ("file link out", _link("ln.png", lambda r: r / "secret" / "a.png"), _claim("ln.png"),
     "confinement_violation", "outside its root"),
    ("folder link out", _link("dir", lambda r: r / "secret"), _claim("dir/a.png"),
     "confinement_violation", "outside its root"),
    ("chain of links", _chain, _claim("c1"), "confinement_violation", "outside its root"),
    ("prefix sibling", _link("sib", lambda r: r / "out-evil" / "a.png"), _claim("sib"),
     "confinement_violation", "outside its root"),
    ("trailing slash link", _link("tl", lambda r: r / "secret"), _claim("tl/"),
     "confinement_violation", "ends with '/'"),
    ("link loop", _loop, _claim("loop1"), "confinement_violation", "cannot be resolved"),
    ("fifo", _fifo, _claim("pipe"), "confinement_violation", "not a regular file"),
    ("folder", _nothing, _claim("sub"), "confinement_violation", "a folder"),
    ("missing", _nothing, _claim("nope.png"), "confinement_violation", "cannot be resolved"),
    ("empty path", _nothing, _claim(""), "confinement_violation", "empty"),
    ("double slash", _nothing, _claim("sub//b.png"), "confinement_violation", "empty component"),
    ("size", _nothing, _claim("a.png", bytes=len(DATA) + 1), "size_mismatch", "declares"),
    ("digest", _nothing, _claim("a.png", digest="sha256:" + "0" * 64), "digest_mismatch",
     "hashes to"),
    ("digest format", _nothing, _claim("a.png", digest="sha256:" + "A" * 64),
     "digest_mismatch", "lowercase hex"),
]


@pytest.mark.timeout(30)  # a FIFO that were opened would block forever
@pytest.mark.parametrize(("label", "setup", "claim", "code", "words"), REFUSED,
                         ids=[r[0] for r in REFUSED])
def test_refused(
    host: mnb.ModuleHost, layout: Path, label: str, setup: Callable[[Path], None],
    claim: dict[str, Any], *, code: str, words: str,
) -> None:
    setup(layout)
    inv = _report(host, claim, _claim("a.png", id="fine"))
    assert inv.ok  # the module's answer stands; only the artifact is refused
    assert [a.id for a in inv.artifacts] == ["fine"]
    (rejected,) = inv.rejected_artifacts
    assert (rejected.id, rejected.code) == ("x", code)
    assert words in rejected.message
    assert rejected.artifact.path == claim["path"]
    assert host.audit()["rejected_artifacts"].iloc[-1] == [f"x:{code}"]


def test_unknown_presentation_and_undeclared_kind_are_warnings(host: mnb.ModuleHost) -> None:
    inv = _report(host, _claim("a.png", presentation="hologram", kind="table"))
    assert [a.id for a in inv.artifacts] == ["x"] and inv.rejected_artifacts == []
    assert any("unknown presentation 'hologram'" in w for w in inv.warnings)
    assert any("kind 'table'" in w for w in inv.warnings)


def test_a_root_of_another_invocation_is_not_this_ones(host: mnb.ModuleHost) -> None:
    made = host.invoke("good.make", {"root": "scratch", "files": [{"name": "f.txt",
                                                                    "content": "hi"}]})
    (art,) = made.artifacts
    again = _report(host, art.model_dump(mode="json"))
    # "scratch" is a fresh folder per invocation: the old file is not under the new root
    assert again.rejected_artifacts[0].code == "confinement_violation"


_COMPONENTS = st.sampled_from(["a.png", "sub", "b.png", "..", ".", "", "in", "out", "esc",
                               "loop", "secret", "out-evil"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=st.lists(_COMPONENTS, min_size=1, max_size=5), lead=st.sampled_from(["", "/"]))
def test_property_verified_files_never_escape(layout: Path, parts: list[str], lead: str) -> None:
    out = layout / "out"
    if not (out / "esc").exists():
        (out / "esc").symlink_to(layout / "secret")
        (out / "in").symlink_to("sub")
        (out / "loop").symlink_to("loop")
    roots = {"out": Root(path=str(out), mode="rw")}
    path = lead + "/".join(parts)
    claim = Artifact.model_validate(_claim(path))
    try:
        verified = verify_artifact(claim, roots)
    except mnb.ArtifactRejected:
        return
    real_root = str(out.resolve())
    assert os.path.commonpath([real_root, str(verified.file)]) == real_root
    assert verified.file.read_bytes() == DATA
