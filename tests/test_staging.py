"""Staging: a content-addressed store, a read-only root, a digest re-verified on each use."""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import default_descriptor, install, write_descriptor
from _users import run_as_test_user, test_user

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


# -- a root kernel's store where another account can write ------------------------------

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another account against a root kernel")

#: the test account, for ``argv[1]``: a link to the folder ``argv[2]`` (``link``), or a store
#: of its own there, every folder ``0777`` (``store``)
PLANT = """\
import os, sys
where, target, how = sys.argv[1:]
os.makedirs(os.path.dirname(where), exist_ok=True)
if how == "link":
    os.symlink(target, where)
else:
    for folder in (where, os.path.join(where, "sha256")):
        os.mkdir(folder)
        os.chmod(folder, 0o777)
"""


@pytest.fixture
def open_home(open_folder: Path) -> Path:
    """:func:`open_folder` as a module home, the producer in it."""
    install(open_folder, "producer")
    return open_folder


def _plant(where: Path, target: Path | None, reachable: Path) -> None:
    """The test account makes ``where`` a link to ``target``, or (``None``) a store of its
    own, ``0777``."""
    how = "link" if target is not None else "store"
    argv = [sys.executable, "-S", "-c", PLANT, str(where), str(target), how]
    done = run_as_test_user(argv, reachable / "scratch")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert where.lstat().st_uid == test_user()


def _stage_a_secret(host: mnb.ModuleHost) -> tuple[mnb.StagedArtifact, str]:
    """A producer's output staged, as a call does, with content no other file holds."""
    secret = f"private output {secrets.token_hex(16)}"
    return host.stage(_produce(host, secret)), secret


def _what_the_account_reads(secret: str, *folders: Path, reachable: Path) -> str:
    """The files under ``folders`` holding ``secret`` that the test account can read."""
    argv = ["grep", "-rlsF", secret, *map(str, folders)]
    return run_as_test_user(argv, reachable / "scratch").stdout


def _nobody_else_can_write(store: Path) -> None:
    """``store`` is root's and ``0700``, and every folder above it is root's and writable
    by nobody else (but a sticky one, ``/tmp``)."""
    assert store.stat().st_uid == 0 and stat.S_IMODE(store.stat().st_mode) == 0o700
    for folder in store.parents:
        st = folder.lstat()
        assert st.st_uid == 0 and not stat.S_ISLNK(st.st_mode), folder
        assert not st.st_mode & 0o022 or st.st_mode & stat.S_ISVTX, folder


@as_root
@pytest.mark.parametrize("cache", ["root's", "behind their link too"])
def test_a_root_default_store_behind_another_accounts_link_makes_nothing_where_it_leads(  # noqa: PLR0917 - fixtures + a parameter
    open_home: Path, only_root: Path, reachable: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, cache: str,
) -> None:  # fmt: skip
    """A root kernel's home is another account's, or in a folder it can write (``sudo -E``
    keeps a user's ``HOME``): the account made ``<home>/artifact-store`` a link to a folder
    only root may write, and root made the store there (``mkdir -p`` through the link) and
    wrote a module's output into it. Now nothing is made there: the store goes to root's
    murmur-nb cache, or, when the account put a link on the way to that too, to a private
    folder of the process."""
    _plant(open_home / "artifact-store", only_root, reachable)
    if cache == "root's":
        monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))
    else:
        _plant(open_home / ".cache", only_root, reachable)
        monkeypatch.setenv("MURMUR_NB_CACHE", str(open_home / ".cache" / "murmur-nb"))
    with mnb.ModuleHost(home=open_home) as host:
        staged, secret = _stage_a_secret(host)
        assert list(only_root.iterdir()) == []  # no sha256 folder, no staged file there
        store = host.store.root
        if cache == "root's":
            assert store == tmp_path / "cache" / "artifact-store"
        else:
            assert store.name.startswith("murmur-nb-artifact-store-"), store
        assert staged.file.is_relative_to(store) and staged.file.read_text() == secret
        _nobody_else_can_write(store)
        assert _what_the_account_reads(secret, reachable, store, reachable=reachable) == ""
        again = host.stage(_produce(host, secret))  # the store serves again
        assert again.file == staged.file
    assert list(only_root.iterdir()) == []


@as_root
def test_a_root_default_store_another_account_made_gets_no_staged_file(
    open_home: Path, reachable: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No link needed: the account made ``<home>/artifact-store/sha256`` itself, ``0777``,
    and a root kernel staged a module's output into it for the account to read (its files
    are ``0444``). Now the store goes to root's cache and the account reads nothing."""
    planted = open_home / "artifact-store"
    _plant(planted, None, reachable)
    monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))
    with mnb.ModuleHost(home=open_home) as host:
        staged, secret = _stage_a_secret(host)
        assert _what_the_account_reads(secret, reachable, reachable=reachable) == ""
        assert list((planted / "sha256").iterdir()) == []
        assert host.store.root == tmp_path / "cache" / "artifact-store"
        assert staged.file.read_text() == secret


@as_root
def test_a_root_named_store_behind_another_accounts_link_is_refused(
    open_home: Path, only_root: Path, reachable: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A store named with ``artifact_store=`` in a folder another account can write, where
    it made the store a link to a folder only root may write: root staged there. Now the
    staging is refused, naming the folder and the fix, and nothing is made there."""
    monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))
    named = open_home / "store"
    _plant(named, only_root, reachable)
    with mnb.ModuleHost(home=open_home, artifact_store=named) as host:
        art = _produce(host)
        with pytest.raises(ValueError, match="cannot be used by a root process") as err:
            host.stage(art)
    said = str(err.value)
    assert str(open_home) in said and "nothing was made or staged there" in said, said
    assert "artifact_store=" in said and "a folder only root can write" in said, said
    assert list(only_root.iterdir()) == [] and named.readlink() == only_root


@as_root
def test_a_root_named_store_through_a_link_of_roots_is_used(tmp_path: Path) -> None:
    """A link root made in its own folders may lead a store anywhere root's alone: the
    refusal above is about who can change the way, not about links."""
    home = tmp_path / "home"
    install(home, "producer")
    (tmp_path / "stores" / "one").mkdir(parents=True)
    (tmp_path / "latest").symlink_to(tmp_path / "stores" / "one")
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "latest" / "store") as host:
        staged, secret = _stage_a_secret(host)
    assert staged.file.parent == tmp_path / "stores" / "one" / "store" / "sha256"
    assert staged.file.read_text() == secret
