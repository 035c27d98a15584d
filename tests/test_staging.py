"""Staging: a content-addressed store, a read-only root, a digest re-verified on each use."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import default_descriptor, install, write_descriptor

import murmur_nb as mnb


@pytest.fixture
def host(tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    home = tmp_path / "home"
    install(home, "producer")
    install(home, "consumer")
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as h:
        yield h


def _produce(host: mnb.ModuleHost, content: str = "frame data") -> mnb.VerifiedArtifact:
    inv = host.invoke("producer.make", {"root": "scratch",
                                        "files": [{"name": "frames/f.png", "content": content}]})
    (art,) = inv.artifacts
    return art


def test_stage_and_consume_as_a_read_only_root(host: mnb.ModuleHost, tmp_path: Path) -> None:
    art = _produce(host)
    staged = host.stage(art)
    assert isinstance(staged, mnb.StagedArtifact)
    hexdigest = hashlib.sha256(b"frame data").hexdigest()
    assert staged.digest == art.digest == f"sha256:{hexdigest}"
    assert staged.path == f"sha256/{hexdigest}.png"
    assert staged.file == (tmp_path / "store" / staged.path).resolve()
    assert staged.file.read_bytes() == b"frame data"
    assert staged.file.stat().st_mode & 0o222 == 0  # read-only in the store
    # content-addressed: staging the same content again reuses the same file
    assert host.stage(_produce(host)).file == staged.file
    inv = host.invoke("consumer.consume", staged.ref(), staged=[staged])
    assert inv.result == {"sha256": hexdigest, "bytes": 10, "mode": "ro"}
    roots = inv.request.roots or {}
    assert roots["staged"].mode == "ro"
    # a per-invocation view holding exactly the handed artifact, never the whole store
    view = Path(roots["staged"].path)
    assert view != (tmp_path / "store").resolve()
    assert sorted(str(p.relative_to(view)) for p in view.rglob("*") if p.is_file()) == [
        staged.path
    ]
    # the producer's layout is not given to the consumer
    assert str(art.file.parent) not in inv.request.model_dump_json()


def test_mutated_staged_file_is_detected_before_each_use(host: mnb.ModuleHost) -> None:
    staged = host.stage(_produce(host))
    assert host.invoke("consumer.consume", staged.ref(), staged=[staged]).ok
    staged.file.chmod(0o644)
    staged.file.write_bytes(b"frame dat4")  # same size, other content
    with pytest.raises(mnb.DigestMismatch) as err:
        host.invoke("consumer.consume", staged.ref(), staged=[staged])
    assert err.value.code == "digest_mismatch" and "modified after staging" in str(err.value)
    staged.file.write_bytes(b"longer content now")
    with pytest.raises(mnb.SizeMismatch):
        host.invoke("consumer.consume", staged.ref(), staged=[staged])
    staged.file.unlink()
    # a file gone is said so (it was a confinement_violation "without following a link")
    with pytest.raises(mnb.ArtifactRejected, match="its file no longer exists; stage the artifact "
                       "again") as gone:  # fmt: skip
        host.invoke("consumer.consume", staged.ref(), staged=[staged])
    assert gone.value.code == "missing_file" and type(gone.value) is mnb.ArtifactRejected
    staged.file.mkdir()  # a folder where the staged file was
    with pytest.raises(mnb.ConfinementViolation, match="not a regular file; stage the artifact"):
        host.invoke("consumer.consume", staged.ref(), staged=[staged])
    staged.file.rmdir()
    assert host.audit()["outcome"].tolist()[-4:] == [
        "digest_mismatch", "size_mismatch", "missing_file", "confinement_violation"
    ]
    # staging again repairs the store entry
    again = host.stage(_produce(host))
    assert host.invoke("consumer.consume", again.ref(), staged=[again]).ok


def test_a_corrupted_store_entry_is_replaced_on_stage(host: mnb.ModuleHost) -> None:
    staged = host.stage(_produce(host))
    staged.file.chmod(0o644)
    staged.file.write_bytes(b"garbage!!!")
    restaged = host.stage(_produce(host))
    assert restaged.file.read_bytes() == b"frame data"


def test_only_verified_artifacts_are_staged(host: mnb.ModuleHost) -> None:
    claim = mnb.protocol.Artifact(id="x", kind="image", path="a", root="out",
                                  media_type="image/png", bytes=1, digest="sha256:" + "0" * 64)
    with pytest.raises(TypeError, match="verified"):
        host.stage(claim)  # type: ignore[arg-type]


def test_a_source_changed_after_verification_is_not_staged(host: mnb.ModuleHost) -> None:
    art = _produce(host)
    art.file.write_bytes(b"frame DATA")
    with pytest.raises(mnb.DigestMismatch, match="changed while being staged"):
        host.stage(art)
    assert list((host.store.root / "sha256").iterdir()) == []


def test_a_source_removed_before_staging_is_said_to_be_gone(host: mnb.ModuleHost) -> None:
    """It raised ``ConfinementViolation``: "cannot be opened for staging without following
    a link (No such file or directory)", with no link anywhere."""
    art = _produce(host)
    art.file.unlink()
    with pytest.raises(mnb.ArtifactRejected, match="its file no longer exists; invoke the "
                       "producer again") as gone:  # fmt: skip
        host.stage(art)
    assert gone.value.code == "missing_file"
    assert list((host.store.root / "sha256").iterdir()) == []


def test_consumer_must_declare_the_staged_root(host: mnb.ModuleHost, tmp_path: Path) -> None:
    staged = host.stage(_produce(host))
    home = tmp_path / "home"
    desc = default_descriptor(home, "consumer")
    desc["permissions"]["filesystem_read"] = ["src"]
    write_descriptor(home / "modules" / "consumer", desc)
    with pytest.raises(mnb.NotGranted, match=r"'staged'.*Add that root") as err:
        host.invoke("consumer.consume", staged.ref(), staged=[staged])
    assert err.value.code == "not_granted"
