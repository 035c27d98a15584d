"""Verification first: a file that changed or vanished is never rendered; a card says why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from test_render_kit import artifact, digest_of, invocation, make_png, rejected

import murmur_nb as mnb
from murmur_nb._render.verify import (  # private: the check the renderer reads through
    SNAPSHOT_BYTES,
    Verified,
    recheck,
)


def _card(r: mnb.Rendering) -> BeautifulSoup:
    return BeautifulSoup(r.html, "html.parser")


def test_a_changed_digest_gives_an_error_card_and_no_image(tmp_path: Path) -> None:
    make_png(tmp_path / "a.png", seed=1)
    art = artifact(tmp_path, "a.png", "image/png", "image", "Poster")
    other = tmp_path / "b.png"
    make_png(other, seed=2)
    data = other.read_bytes()
    original = (tmp_path / "a.png").read_bytes()
    # same size, different content: only the digest can tell
    (tmp_path / "a.png").write_bytes(data[: len(original)].ljust(len(original), b"\0"))
    r = mnb.render(art)
    assert r.primitive == "error" and r.error_code == "digest_mismatch" and not r.ok
    card = _card(r)
    assert card.select_one("[data-error-code]")["data-error-code"] == "digest_mismatch"  # type: ignore[index]
    assert not card.select("img")
    assert "Not rendered: Poster" in card.get_text()
    assert "'a.png'" in r.text and art.digest in r.text


def test_a_changed_size_gives_a_size_mismatch_card(tmp_path: Path) -> None:
    make_png(tmp_path / "a.png")
    art = artifact(tmp_path, "a.png", "image/png")
    with (tmp_path / "a.png").open("ab") as fh:
        fh.write(b"tail")
    r = mnb.render(art)
    assert r.error_code == "size_mismatch"
    assert f"declares {art.bytes} bytes but the file has {art.bytes + 4}" in r.text


def test_a_missing_file_gives_an_error_card(tmp_path: Path) -> None:
    make_png(tmp_path / "a.png")
    art = artifact(tmp_path, "a.png", "image/png")
    (tmp_path / "a.png").unlink()
    r = mnb.render(art)
    assert r.primitive == "error" and r.error_code == "missing_file"
    assert "artifact 'a.png' (a.png): no such file under root 'out'" in r.text
    assert str(tmp_path) not in r.text


def test_without_a_known_root_the_verified_file_itself_is_checked(tmp_path: Path) -> None:
    make_png(tmp_path / "a.png")
    file = tmp_path / "a.png"
    # a VerifiedArtifact whose relative path does not end its file path: no root to recover
    art = mnb.VerifiedArtifact(
        id="pic",
        kind="k",
        path="elsewhere/pic.png",
        root="out",
        media_type="image/png",
        bytes=file.stat().st_size + 1,
        digest=digest_of(file),
        file=file,
    )
    r = mnb.render(art)
    assert r.error_code == "size_mismatch"
    assert "artifact 'pic' (elsewhere/pic.png)" in r.text
    ok = art.model_copy(update={"bytes": file.stat().st_size})
    assert mnb.render(ok).primitive == "image"


def test_invocation_renders_good_artifacts_and_cards_for_bad_and_rejected(tmp_path: Path) -> None:
    make_png(tmp_path / "good.png", seed=1)
    make_png(tmp_path / "bad.png", seed=2)
    make_png(tmp_path / "grid1.png", seed=3)
    make_png(tmp_path / "grid2.png", seed=4)
    good = artifact(tmp_path, "good.png", "image/png")
    bad = artifact(tmp_path, "bad.png", "image/png")
    g1 = artifact(tmp_path, "grid1.png", "image/png", "image_grid")
    g2 = artifact(tmp_path, "grid2.png", "image/png", "image_grid")
    rej = rejected(tmp_path, "good.png", "image/png", "sha256:" + "1" * 64)
    (tmp_path / "bad.png").write_bytes(b"x")
    (tmp_path / "grid2.png").unlink()
    r = mnb.render(invocation(tmp_path, [good, bad, g1, g2], [rej]))
    assert [p.primitive for p in r.parts] == ["image", "error", "image_grid", "error", "error"]
    assert [p.error_code for p in r.parts] == [
        None,
        "size_mismatch",
        None,
        "missing_file",
        "digest_mismatch",
    ]
    assert not r.ok
    assert r.text.splitlines()[0] == "invocation · testmod.run · 4 artifacts, 1 rejected"
    assert "error · good.png · digest_mismatch (rejected by the host)" in r.text
    grid = _card(r.parts[2])
    assert len(grid.select("figure img")) == 1  # only the surviving grid image
    assert str(tmp_path) not in r.text
    assert not re.search(r"0x[0-9a-f]{6,}", r.text)


def test_a_file_swapped_for_a_link_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_png(root / "a.png", seed=1)
    art = artifact(root, "a.png", "image/png")
    outside = tmp_path / "outside.png"
    outside.write_bytes((root / "a.png").read_bytes())  # same bytes, same digest
    (root / "a.png").unlink()
    (root / "a.png").symlink_to(outside)
    r = mnb.render(invocation(root, [art]))
    (card,) = r.parts
    assert card.error_code == "confinement_violation"
    assert "no longer passes the host's confinement check" in card.text
    assert str(tmp_path) not in card.text
    assert "outside its root" in _card(card).get_text()  # the host's wording, in the card
    assert not _card(card).select("img")


def test_a_rejected_artifact_renders_as_its_error_card(tmp_path: Path) -> None:
    make_png(tmp_path / "a.png")
    rej = rejected(tmp_path, "a.png", "image/png", "sha256:" + "3" * 64)
    r = mnb.render(rej)
    assert r.error_code == "digest_mismatch" and not r.ok
    assert r.text == "error · a.png · digest_mismatch (rejected by the host)"
    assert "declares sha256:333" in _card(r).get_text()


@pytest.mark.parametrize("known_root", [True, False])
def test_a_file_rewritten_in_place_after_its_check_shows_what_was_checked(
    tmp_path: Path, known_root: bool
) -> None:
    """Another call's module that may write where an artifact lies rewrites it in place
    (same inode, same size) between the check and the renderer's read: the renderer reads
    the bytes that were checked. Before, it read through a descriptor of the same file and
    got the new bytes, shown under the checked digest (a red-team review saw it in a race
    between two calls sharing an ``rw`` root)."""
    note = tmp_path / "note.txt"
    note.write_text("GOOD\n" * 100, encoding="utf-8")
    art = artifact(tmp_path, "note.txt", "text/plain", "text")
    checked = recheck(artifact_id=art.id, path=art.path, root=art.root,
                      root_dir=tmp_path if known_root else None, file=note,
                      declared_bytes=art.bytes, declared_digest=art.digest)  # fmt: skip
    assert isinstance(checked, Verified), checked
    try:
        with note.open("r+b") as fh:  # the same file, written where it lies
            fh.write(b"EVIL\n" * 100)
        assert note.read_bytes() == b"EVIL\n" * 100
        assert checked.readable.read_bytes() == b"GOOD\n" * 100
    finally:
        checked.close()


def test_files_past_the_snapshot_size_are_read_where_they_lie(tmp_path: Path) -> None:
    """A file larger than a sealed copy may be is still rendered, from the file itself."""
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (SNAPSHOT_BYTES + 1))
    art = artifact(tmp_path, "big.txt", "text/plain", "text")
    r = mnb.render(art)
    assert r.ok and r.primitive == "text", r.text[:200]
