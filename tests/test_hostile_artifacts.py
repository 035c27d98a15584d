"""Issue 13, points 6, 8 and 9: a hostile module's files are bounded, unlinked and race-free."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import swapping

import murmur_nb as mnb

GIB = 1 << 30
WRONG = "sha256:" + "0" * 64


FACET_MODULES = [("hostile", "hostile_output")]


@pytest.fixture
def host(facet_home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h:
        yield h


def _make(host: mnb.ModuleHost, files: list[dict[str, Any]], claims: list[dict[str, Any]],
          **kwargs: Any) -> mnb.Invocation:
    return host.invoke("hostile.make", {"files": files, "claims": claims}, **kwargs)


def _zeros_digest(head: bytes, size: int) -> str:
    digest = hashlib.sha256(head)
    block = bytes(1 << 20)
    left = size - len(head)
    while left:
        n = min(left, len(block))
        digest.update(block[:n])
        left -= n
    return "sha256:" + digest.hexdigest()


# --------------------------------------------------------------------------- point 6


def test_huge_sparse_artifacts_are_refused_before_any_hashing(host: mnb.ModuleHost) -> None:
    files = [{"name": f"big{i}.bin", "sparse": 4 * GIB} for i in range(2)]
    claims = [{"path": f"big{i}.bin", "bytes": None, "digest": WRONG} for i in range(2)]
    started = time.perf_counter()
    inv = _make(host, files, claims, deadline_ms=1000)
    elapsed = time.perf_counter() - started
    assert [r.code for r in inv.rejected_artifacts] == ["artifact_too_large"] * 2
    assert "above this host's artifact limit of 1073741824" in inv.rejected_artifacts[0].message
    assert elapsed < 5  # hashing 8 GiB took 40 s before the cap


def test_a_claim_can_lie_small_but_fstat_decides(facet_home: Path) -> None:
    policy = mnb.Policy(max_artifact_bytes=1 << 20)
    with mnb.ModuleHost(home=facet_home, policy=policy) as host:
        inv = _make(host, [{"name": "big.bin", "sparse": 2 << 20}],
                    [{"path": "big.bin", "bytes": 10, "digest": WRONG},
                     {"path": "big.bin", "id": "claims-big", "bytes": 2 << 20, "digest": WRONG}])
    assert [r.code for r in inv.rejected_artifacts] == ["size_mismatch", "artifact_too_large"]


def test_verification_stops_when_its_budget_is_spent(facet_home: Path) -> None:
    policy = mnb.Policy(verify_budget_ms=200)
    files = [{"name": f"half{i}.bin", "sparse": GIB // 2} for i in range(2)]
    files.append({"name": "small.txt", "content": "fine"})
    claims = [{"path": f"half{i}.bin", "bytes": None, "digest": WRONG} for i in range(2)]
    with mnb.ModuleHost(home=facet_home, policy=policy) as host:
        started = time.perf_counter()
        inv = _make(host, files, claims)
        elapsed = time.perf_counter() - started
    codes = [r.code for r in inv.rejected_artifacts]
    assert codes == ["verification_budget_exceeded"] * 2, inv.rejected_artifacts
    assert "Policy.verify_budget_ms" in inv.rejected_artifacts[0].message
    assert elapsed < 10  # hashing 1 GiB of zeros, twice over, is what the budget cut short


def test_the_verification_budget_bounds_resolving_paths_too(facet_home: Path) -> None:
    """The budget was checked only while hashing: resolving each claim's path went on past it.
    3,000 claims of one file 200 folders deep kept a 200 ms budget's call verifying for
    about 12 s (20,000 claims: 85 s past a 60 s budget). Once it is spent, a claim is
    rejected before its path is resolved (a red-team review)."""
    deep = "d/" * 200 + "a.txt"
    policy = mnb.Policy(verify_budget_ms=200)
    with mnb.ModuleHost(home=facet_home, policy=policy) as host:
        started = time.perf_counter()
        inv = _make(host, [{"name": deep, "content": "x"}],
                    [{"path": deep, "id": f"a{i}"} for i in range(3_000)])
        elapsed = time.perf_counter() - started
    assert elapsed < 6, f"the call took {elapsed:.1f} s with a 200 ms verification budget"
    assert len(inv.artifacts) + len(inv.rejected_artifacts) == 3_000
    codes = {r.code for r in inv.rejected_artifacts}
    assert codes == {"verification_budget_exceeded"}, codes
    assert "before it was opened" in inv.rejected_artifacts[-1].message


def test_staging_a_sparse_file_keeps_its_holes(host: mnb.ModuleHost) -> None:
    size = 256 << 20
    head = b"data at the start of a sparse file"
    digest = _zeros_digest(head, size)
    inv = _make(host, [{"name": "sparse.bin", "content": head.decode(), "sparse": size}],
                [{"path": "sparse.bin", "bytes": size, "digest": digest,
                  "media_type": "application/octet-stream"}])
    (art,) = inv.artifacts
    staged = host.stage(art)
    st = staged.file.stat()
    assert st.st_size == size
    assert st.st_blocks * 512 < 16 << 20  # not materialized (the holes stay holes)
    with staged.file.open("rb") as fh:
        assert fh.read(len(head)) == head
    assert _zeros_digest(head, size) == staged.digest


# --------------------------------------------------------------------------- point 8


def test_a_hard_link_to_a_file_outside_the_root_is_refused(
    facet_home: Path, tmp_path: Path
) -> None:
    """Inside the sandbox the module cannot even see the file; the host's own check is the
    second line, so it is tried with the sandbox off (a machine without one, opted out)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET host file")
    files = [{"name": "innocent.txt", "hardlink_to": str(secret)}]
    with mnb.ModuleHost(home=facet_home) as confined, pytest.raises(mnb.ProtocolViolation):
        _make(confined, files, [{"path": "innocent.txt"}])  # os.link fails: no such file
    assert secret.stat().st_nlink == 1
    with mnb.ModuleHost(home=facet_home, policy=mnb.Policy(sandbox="off")) as host:
        inv = _make(host, files, [{"path": "innocent.txt"}])
        assert secret.stat().st_nlink == 2  # the module really linked it into its root
    (rejected,) = inv.rejected_artifacts
    assert rejected.code == "confinement_violation"
    assert "2 hard links" in rejected.message and "copy it" in rejected.message
    assert inv.artifacts == []
    shown = mnb.render(inv)
    assert "TOP SECRET" not in shown.html and "TOP SECRET" not in shown.text
    assert secret.read_text() == "TOP SECRET host file"


def test_a_symlinked_conversation_record_is_unavailable(
    murmur_home: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    with mnb.RecordWriter(elsewhere, "other", stamp=False) as writer:
        writer.append("user", "PRIVATE message of another home", id="p1")
    folder = murmur_home / "conversations"
    folder.mkdir(parents=True)
    (folder / "ctx.jsonl").symlink_to(elsewhere / "conversations" / "other.jsonl")
    with pytest.raises(mnb.ConversationReadError) as info:
        mnb.ConversationStore(murmur_home).reader("ctx").read_messages()
    assert info.value.code == "unavailable"
    assert str(info.value) == (
        "unavailable: the record of context 'ctx' is a symbolic link; records are read only "
        "as regular files"
    )


def _outside_file(tmp_path: Path) -> tuple[Path, bytes]:
    outside = tmp_path / "outside" / "victim.jsonl"
    outside.parent.mkdir()
    original = b'{"id":"v1","role":"user","content":"VICTIM, not a record of this store"}\n'
    outside.write_bytes(original)
    outside.chmod(0o600)
    return outside, original


def test_a_record_that_is_a_symlink_is_never_appended_through(
    murmur_home: Path, tmp_path: Path
) -> None:
    outside, original = _outside_file(tmp_path)
    folder = murmur_home / "conversations"
    folder.mkdir()
    (folder / "ctx.jsonl").symlink_to(outside)
    (folder / "dangling.jsonl").symlink_to(tmp_path / "outside" / "created-through-link")
    with pytest.raises(mnb.MurmurError) as info, mnb.RecordWriter(murmur_home, "ctx") as writer:
        writer.append("user", "INJECTED line", id="x1")
    assert info.value.code == "unavailable"
    assert "record of context 'ctx'" in str(info.value)
    assert "ctx.jsonl) is a symbolic link" in str(info.value)
    assert "Nothing was written" in str(info.value)
    with pytest.raises(mnb.MurmurError, match="is a symbolic link"):
        mnb.RecordWriter(murmur_home, "dangling")
    assert outside.read_bytes() == original  # byte for byte
    assert stat_mode(outside) == 0o600
    assert sorted(p.name for p in outside.parent.iterdir()) == ["victim.jsonl"]
    # the conversations folder itself a link out of the home: refused the same way
    folder.rename(murmur_home / "moved")
    folder.symlink_to(outside.parent)
    with pytest.raises(mnb.MurmurError, match="in a folder that is a symbolic link"):
        mnb.RecordWriter(murmur_home, "fresh")
    assert sorted(p.name for p in outside.parent.iterdir()) == ["victim.jsonl"]


def test_a_hard_linked_record_is_never_appended_through(
    murmur_home: Path, tmp_path: Path
) -> None:
    outside, original = _outside_file(tmp_path)
    folder = murmur_home / "conversations"
    folder.mkdir()
    (folder / "ctx.jsonl").hardlink_to(outside)
    with pytest.raises(mnb.MurmurError) as info:
        mnb.RecordWriter(murmur_home, "ctx", stamp=False).append("user", "INJECTED", id="x1")
    assert info.value.code == "unavailable"
    assert str(info.value).startswith(
        f"unavailable: the record of context 'ctx' ({folder / 'ctx.jsonl'}) has 2 hard links"
    )
    assert outside.read_bytes() == original and outside.stat().st_nlink == 2
    # a plain record is still written, once the extra link is gone
    (folder / "ctx.jsonl").unlink()
    with mnb.RecordWriter(murmur_home, "ctx", stamp=False) as writer:
        writer.append("user", "fine", id="m1")
    assert (folder / "ctx.jsonl").read_bytes() == b'{"id":"m1","role":"user","content":"fine"}\n'
    assert outside.read_bytes() == original


def test_stage_never_changes_anything_through_a_planted_link(
    host: mnb.ModuleHost, tmp_path: Path
) -> None:
    inv = _make(host, [{"name": "a.txt", "content": "genuine"}], [{"path": "a.txt"}])
    (art,) = inv.artifacts
    staged = host.stage(art)
    victim = tmp_path / "victim.txt"
    victim.write_text("victim content")
    victim.chmod(0o644)
    staged.file.unlink()
    staged.file.symlink_to(victim)
    again = host.stage(art)
    assert stat_mode(victim) == 0o644 and victim.read_text() == "victim content"
    assert not again.file.is_symlink() and again.file.read_text() == "genuine"
    assert stat_mode(again.file) == 0o444
    # the store's own folder swapped for a link: refused, nothing written through it
    sha = tmp_path / "store" / "sha256"
    sha.rename(tmp_path / "store" / "moved")
    outside = tmp_path / "outside"
    outside.mkdir()
    sha.symlink_to(outside)
    with pytest.raises(mnb.ConfinementViolation, match="not a link"):
        host.stage(art)
    assert list(outside.iterdir()) == []


def stat_mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


# --------------------------------------------------------------------------- point 9



@pytest.mark.slow
def test_swapping_the_path_after_verification_never_shows_outside_bytes(
    host: mnb.ModuleHost, tmp_path: Path
) -> None:
    genuine = "GENUINE artifact text " * 8
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE secret bytes " * 9)  # different content and size
    inv = _make(host, [{"name": "a.txt", "content": genuine},
                       {"name": "swap", "symlink_to": str(outside)}],
                [{"path": "a.txt", "media_type": "text/plain", "presentation": "text"}])
    (art,) = inv.artifacts
    root = art.file.parent
    shown = refused = staged_ok = 0
    with swapping(root / "a.txt", root / "swap"):
        for i in range(1500):
            rendering = mnb.render(inv)
            assert "OUTSIDE" not in rendering.html and "OUTSIDE" not in rendering.text
            if rendering.ok:
                assert "GENUINE artifact text" in rendering.html
                shown += 1
            else:
                refused += 1
            if i % 25 == 0:
                try:
                    staged = host.stage(art)
                except mnb.ArtifactRejected:
                    continue
                assert staged.file.read_text() == genuine
                staged.file.unlink()
                staged_ok += 1
    # the race was real: some renders saw the link (refused), some the file (shown)
    assert shown > 0 and refused > 0, (shown, refused)
    assert staged_ok > 0


def test_what_was_verified_is_what_is_read_after_a_swap(tmp_path: Path) -> None:
    """An internal (``recheck``, the render's verify step), swapped deterministically.

    The concurrent test above needs luck to land a swap between the check and the read;
    here the swap happens exactly there, every time.
    """
    from murmur_nb._render.verify import Verified, recheck  # private: swapped at exactly that step

    root = tmp_path / "root"
    root.mkdir()
    genuine = b"GENUINE bytes"
    (root / "a.txt").write_bytes(genuine)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"OUTSIDE bytes")
    result = recheck(artifact_id="a", path="a.txt", root="out", root_dir=root,
                     file=root / "a.txt", declared_bytes=len(genuine),
                     declared_digest="sha256:" + hashlib.sha256(genuine).hexdigest())
    assert isinstance(result, Verified)
    try:
        (root / "a.txt").rename(root / "moved.txt")
        (root / "a.txt").symlink_to(outside)
        assert result.readable.read_bytes() == genuine
        assert (root / "a.txt").read_bytes() == b"OUTSIDE bytes"  # the path does lead out now
    finally:
        result.close()


def test_a_grid_never_holds_more_descriptors_than_the_limit_allows(tmp_path: Path) -> None:
    """Each grid image is read through its verified descriptor; a huge grid stays bounded."""
    import resource

    from test_render_kit import artifact, invocation, make_png

    root = tmp_path / "root"
    arts = []
    for i in range(70):
        make_png(root / f"g{i}.png", size=(8, 8), seed=i)
        arts.append(artifact(root, f"g{i}.png", "image/png", "image_grid"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # 64 images may be held
    try:
        rendering = mnb.render(invocation(root, arts))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert rendering.ok
    (grid,) = rendering.parts
    assert grid.html.count("<img") == 64
    assert grid.html.count("too many images open at once") == 6
