"""What was approved is what runs: modules run from a verified snapshot of their folder.

Every module here is a real executable folder, and every attack really tries: a process
swapping the executable while the host hashes and runs it, a planted unchecked-hash
``.pyc``, a link into a root the module writes, a 4 GiB sparse file, 2,000 files. What is
observed is the world (a marker file the swapped code would write, bytes this process read,
blocks on disk), not the host's bookkeeping.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import py_compile
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import FIXTURES, sh_module, swapping
from _users import test_user

import murmur_nb as mnb
from murmur_nb._files.scratch import temp_folder  # private: where private stores go

SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin") or "setpriv"
APPROVED = '''
from pathlib import Path

from _proto import capability, descriptor, envelope, main

VERSION = "approved"


def default():
    return descriptor([capability("run", cost_known=False)],
                      permissions={"filesystem_write": ["out"]})


def handle(name, request):
    out = Path(request["roots"]["out"]["path"])
    inp = request.get("input") or {}
    if VERSION != "approved":
        (out / "swapped-ran").write_text(VERSION)
    if inp.get("rewrite"):  # the approved code rewrites the live folder through its rw root
        (out / "impl.py").write_text(Path(__file__).read_text().replace(
            'VERSION = "approved"', 'VERSION = "rewritten"'))
    return envelope("invoke", request["request_id"], result={"version": VERSION})


def run():
    main(default, handle)
'''

LAUNCHER = f"#!{sys.executable} -S\nimport impl\nimpl.run()\n"
EVIL_LAUNCHER = f'#!{sys.executable} -S\nimport impl\nimpl.VERSION = "evil"\nimpl.run()\n'


def make_module(home: Path, module_id: str = "app") -> Path:
    """A launcher that runs ``impl.py`` beside it, needing approval (unknown cost)."""
    folder = home / "modules" / module_id
    folder.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "_proto.py", folder / "_proto.py")
    (folder / "impl.py").write_text(APPROVED)
    (folder / "module").write_text(LAUNCHER)
    (folder / "module").chmod(0o755)
    return folder


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def host(home: Path, out: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    make_module(home)
    policy = mnb.Policy(roots={"out": out})
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "store") as h:
        yield h


def read_bytes_so_far() -> int:
    """Bytes this process has read through read(2) and friends (``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


# -- 6: time of check is time of use -------------------------------------------------------


def test_an_executable_swapped_while_the_host_hashes_never_runs_approved(
    host: mnb.ModuleHost, home: Path, out: Path
) -> None:
    folder = home / "modules" / "app"
    (folder / "evil").write_text(EVIL_LAUNCHER)  # approved beside it, never run by name
    (folder / "evil").chmod(0o755)
    host.approve("app.run")
    assert host.invoke("app.run").result == {"version": "approved"}
    ran, refused = 0, 0
    with swapping(folder / "module", folder / "evil"):
        for _ in range(40):
            try:
                inv = host.invoke("app.run")
            except mnb.ApprovalRequired as exc:  # it hashed the swapped launcher
                assert "the module's code" in exc.message
                refused += 1
            else:
                assert inv.result == {"version": "approved"}
                ran += 1
    assert not (out / "swapped-ran").exists()
    assert ran and refused, (ran, refused)  # both states were seen, so the race was real


def test_the_swapped_executable_is_what_would_run_from_the_live_folder(
    home: Path, out: Path, tmp_path: Path
) -> None:
    """The attack above is real: run unsnapshotted, the swapped launcher writes its marker."""
    folder = make_module(home)
    (folder / "module").write_text(EVIL_LAUNCHER)
    request = {"capability": "app.run", "request_id": "r", "input": {},
               "roots": {"out": {"path": str(out), "mode": "rw"}}}  # fmt: skip
    subprocess.run([str(folder / "module"), "invoke"], input=json.dumps(request).encode(),
                   env={}, cwd=tmp_path, capture_output=True, check=True)  # fmt: skip
    assert (out / "swapped-ran").read_text() == "evil"


# -- 7: __pycache__ ------------------------------------------------------------------------


def plant_unchecked_pyc(folder: Path, tmp_path: Path) -> Path:
    """An unchecked-hash ``.pyc`` of other code where Python looks for ``impl``'s cache."""
    evil = tmp_path / "evil_impl.py"
    evil.write_text(APPROVED.replace('VERSION = "approved"', 'VERSION = "planted"'))
    cached = Path(importlib.util.cache_from_source(str(folder / "impl.py")))
    py_compile.compile(str(evil), cfile=str(cached), dfile=str(folder / "impl.py"),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                       doraise=True)  # fmt: skip
    return cached


def test_a_planted_unchecked_pyc_never_runs(
    host: mnb.ModuleHost, home: Path, out: Path, tmp_path: Path
) -> None:
    folder = home / "modules" / "app"
    host.approve("app.run")
    source = (folder / "impl.py").read_bytes()
    cached = plant_unchecked_pyc(folder, tmp_path)
    # the planted cache is live: Python run on the folder itself takes it over the source
    request = {"capability": "app.run", "request_id": "r", "input": {},
               "roots": {"out": {"path": str(out), "mode": "rw"}}}  # fmt: skip
    direct = subprocess.run([str(folder / "module"), "invoke"], input=json.dumps(request).encode(),
                            env={}, cwd=tmp_path, capture_output=True, check=True)  # fmt: skip
    assert json.loads(direct.stdout)["result"] == {"version": "planted"}
    (out / "swapped-ran").unlink()
    for _ in range(3):
        inv = host.invoke("app.run")
        assert inv.result == {"version": "approved"}, inv.stderr
    assert not (out / "swapped-ran").exists()
    assert (folder / "impl.py").read_bytes() == source and cached.exists()


# -- 8: links ------------------------------------------------------------------------------


def test_a_link_into_a_root_the_module_writes_is_refused(
    home: Path, out: Path, tmp_path: Path
) -> None:
    folder = make_module(home)
    (out / "impl.py").write_text(APPROVED)
    (folder / "impl.py").unlink()
    (folder / "impl.py").symlink_to(out / "impl.py")
    with mnb.ModuleHost(home=home, policy=mnb.Policy(roots={"out": out}),
                        artifact_store=tmp_path / "store") as host:  # fmt: skip
        [info] = host.modules()
        assert info.descriptor is None
        assert "outside the module folder" in str(info.errors[0]), info.errors
        with pytest.raises(mnb.InvalidDescriptor, match="outside the module folder") as err:
            host.approve("app.run")
        assert err.value.code == "invalid_descriptor"
        with pytest.raises(mnb.InvalidDescriptor, match="outside the module folder"):
            host.invoke("app.run", approve=True)
    assert sorted(p.name for p in out.iterdir()) == ["impl.py"]  # nothing ran


def test_a_module_rewriting_its_own_folder_voids_its_approval(
    home: Path, out: Path, tmp_path: Path
) -> None:
    """Mapped over its own live folder, approved code rewrites ``impl.py``: the rewrite
    never runs under the approval."""
    folder = make_module(home)
    policy = mnb.Policy(roots={"out": folder})
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "store") as host:
        host.approve("app.run")
        assert host.invoke("app.run", {"rewrite": True}).result == {"version": "approved"}
        assert 'VERSION = "rewritten"' in (folder / "impl.py").read_text()  # it really wrote
        with pytest.raises(mnb.ApprovalRequired, match="the module's code"):
            host.invoke("app.run")
        assert host.invoke("app.run", approve=True).result == {"version": "rewritten"}


def test_a_link_inside_the_folder_runs_and_stays_inside_the_snapshot(
    home: Path, out: Path, tmp_path: Path
) -> None:
    folder = make_module(home)
    (folder / "lib").mkdir()
    (folder / "impl.py").rename(folder / "lib" / "impl.py")
    (folder / "impl.py").symlink_to(folder / "lib" / "impl.py")  # absolute, into the folder
    with mnb.ModuleHost(home=home, policy=mnb.Policy(roots={"out": out}),
                        artifact_store=tmp_path / "store") as host:  # fmt: skip
        host.approve("app.run")
        assert host.invoke("app.run").result == {"version": "approved"}
        (folder / "lib" / "impl.py").write_text(
            APPROVED.replace('VERSION = "approved"', 'VERSION = "edited"'))
        with pytest.raises(mnb.ApprovalRequired):
            host.invoke("app.run")
    assert not (out / "swapped-ran").exists()


# -- 9: bounded hashing ----------------------------------------------------------------------


def test_a_4gib_sparse_file_is_refused_fast_with_its_code(
    host: mnb.ModuleHost, home: Path
) -> None:
    blob = home / "modules" / "app" / "weights.bin"
    with blob.open("wb") as fh:
        fh.truncate(4 << 30)
    assert blob.stat().st_blocks * 512 < 1 << 20  # sparse: nothing on disk
    started = time.perf_counter()
    [info] = host.modules()
    assert time.perf_counter() - started < 2.0
    assert info.descriptor is None and "Policy.max_module_bytes" in str(info.errors[0])
    with pytest.raises(mnb.ModuleTooLarge, match="max_module_bytes") as err:
        host.invoke("app.run", approve=True)
    assert err.value.code == "module_too_large"
    assert isinstance(err.value, mnb.InvalidDescriptor)


def test_a_sparse_file_within_the_byte_budget_is_refused_as_sparse(
    host: mnb.ModuleHost, home: Path
) -> None:
    with (home / "modules" / "app" / "hole.bin").open("wb") as fh:
        fh.truncate(64 << 20)
    [info] = host.modules()
    assert "sparse" in str(info.errors[0])
    with pytest.raises(mnb.ModuleTooLarge):
        host.describe("app")


def test_the_entry_budget_is_a_policy_knob(home: Path, out: Path, tmp_path: Path) -> None:
    folder = make_module(home)
    for i in range(20):
        (folder / f"f{i}.txt").write_text("x")
    policy = mnb.Policy(roots={"out": out}, max_module_entries=10)
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "s") as host, \
            pytest.raises(mnb.ModuleTooLarge, match="max_module_entries=10"):
        host.describe("app")
    with mnb.ModuleHost(home=home, policy=mnb.Policy(roots={"out": out}),
                        artifact_store=tmp_path / "s") as host:  # fmt: skip
        assert host.describe("app").module == "app"


def test_two_thousand_files_are_hashed_once(host: mnb.ModuleHost, home: Path) -> None:
    data = home / "modules" / "app" / "data"
    data.mkdir()
    for i in range(2000):
        (data / f"{i:04}.txt").write_bytes(os.urandom(4096))
    before = read_bytes_so_far()
    [first] = host.modules()
    hashed = read_bytes_so_far() - before
    assert first.descriptor is not None and hashed >= 2000 * 4096
    for _ in range(3):
        before = read_bytes_so_far()
        [again] = host.modules()
        assert read_bytes_so_far() - before < 256 * 1024  # a stat walk, no file read
        assert again.digest == first.digest
    (data / "0007.txt").write_bytes(b"changed")
    before = read_bytes_so_far()
    host.modules()
    assert read_bytes_so_far() - before >= 7  # a change is seen at once


def _on_disk(store: Path) -> int:
    """The bytes ``store`` takes on disk. The suite's workers share one store, so another
    worker's snapshot build may remove its ``.build-*`` folder while this walks it."""
    total = 0
    for folder, dirs, files in os.walk(store):  # a folder gone meanwhile is passed over
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                total += (Path(folder) / name).lstat().st_blocks * 512
    return total


def test_check_module_refuses_a_sparse_module_without_copying_it(
    home: Path, tmp_path: Path
) -> None:
    folder = make_module(home)
    with (folder / "weights.bin").open("wb") as fh:
        fh.truncate(4 << 30)
    store = Path(os.environ["MURMUR_NB_SNAPSHOTS"])  # shared by the run's other tests:
    before = _on_disk(store)  # what they keep there is not this check's
    started = time.perf_counter()
    report = mnb.check_module(folder)
    assert time.perf_counter() - started < 5.0
    assert not report.ok
    assert any("module_too_large" in r.detail or "max_module_bytes" in r.detail
               for r in report.failures), report.failures  # fmt: skip
    assert _on_disk(store) - before < 64 << 20
    assert (folder / "weights.bin").stat().st_blocks * 512 < 1 << 20  # never written


SECRET_LINE = "OPENAI_API_KEY=sk-murmur-test-4711\n"


def _as_another_account(*argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run as the tests' unprivileged account (root runs only)."""
    uid = str(test_user())
    return subprocess.run([SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           *argv], capture_output=True, text=True, check=False)  # fmt: skip


def _who_else_may_read(folder: Path) -> list[str]:
    """Each entry of ``folder``'s mode and ACL, other than its owner's, that may list or read."""
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode & 0o044 == 0 or shutil.which("getfacl") is None:
        return [oct(mode)] if mode & 0o066 else []
    listed = subprocess.run(["getfacl", "-n", "-p", "-E", str(folder)],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    entries = [line.split()[0] for line in listed.splitlines() if line and line[0] != "#"]
    return [e for e in entries if not e.startswith(("user::", "mask::")) and ("r" in e[-3:]
            or "w" in e[-3:])]  # fmt: skip


def test_a_modules_private_file_stays_private_in_its_snapshot(
    home: Path, out: Path, tmp_path: Path
) -> None:
    """Red team 4: another account read a module's ``0600`` ``config.env`` from the store."""
    folder = make_module(home)
    (folder / "config.env").write_text(SECRET_LINE)
    (folder / "config.env").chmod(0o600)
    (folder / "impl.py").write_text(APPROVED.replace(
        'result={"version": VERSION}',
        'result={"version": VERSION, "config": Path(__file__).with_name("config.env").read_text()}',
    ))
    policy = mnb.Policy(roots={"out": out})
    with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "store") as host:
        assert host.invoke("app.run", approve=True).result["config"] == SECRET_LINE  # its own
        store = Path(os.environ["MURMUR_NB_SNAPSHOTS"])
        copies = list(store.glob("*-app/app/config.env"))
        assert copies
        # only its owner may list or read the store; a root host's running module holds a
        # passage (an ACL entry of ``--x`` for its sandbox uid, shown in the group bits)
        assert _who_else_may_read(store) == [], _who_else_may_read(store)
        for copy in copies:
            assert stat.S_IMODE(copy.stat().st_mode) & 0o207 == 0, oct(copy.stat().st_mode)
            if os.geteuid() == 0:  # another local account reaches for the copy itself
                seen = _as_another_account("cat", str(copy))
                assert seen.returncode != 0 and SECRET_LINE not in seen.stdout, seen
        if os.geteuid() == 0:
            seen = _as_another_account("find", str(store), "-name", "config.env")
            assert "config.env" not in seen.stdout and "Permission denied" in seen.stderr, seen


@pytest.mark.skipif(os.geteuid() != 0, reason="another account's squat needs root to set up")
@pytest.mark.parametrize("where", ["its own folder", "a folder above it"])
def test_a_store_another_account_could_write_is_not_used(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Red team 4, points 3 and 4: the store made first by another account, or inside a
    folder it can write (it could rename the store and put its own in its place)."""
    name = f"squat{time.time_ns()}"  # a name no earlier run's snapshot has
    folder = make_module(home, name)
    (folder / "config.env").write_text(SECRET_LINE)
    (folder / "config.env").chmod(0o600)
    open_folder = tmp_path / "theirs"
    open_folder.mkdir()
    squat = open_folder / "store"
    squat.mkdir(mode=0o700)
    if where == "its own folder":
        squat.chmod(0o777)
        os.chown(squat, test_user(), test_user())
    else:
        open_folder.chmod(0o777)  # not sticky: its entries can be renamed by anyone
    tmp_path.chmod(0o755)
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(squat))
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host:
        host.describe(name)
    assert list(squat.iterdir()) == []  # nothing of the module's went into the squat
    seen = _as_another_account("find", "/tmp", "-maxdepth", "4", "-path", f"*/{name}/config.env")
    assert "config.env" not in seen.stdout, seen


@pytest.mark.skipif(os.geteuid() != 0, reason="another account's link needs root to set up")
def test_a_root_store_behind_another_accounts_link_makes_nothing_where_it_leads(
    home: Path, tmp_path: Path, only_root: Path, open_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A root kernel's store path runs through a folder another account can write (its own
    home, kept by ``sudo -E``; or a ``0777`` one): the account made the store's missing
    ``.cache`` a link to a folder only root may write. The store was made (``mkdir -p``)
    where the link leads before its check refused it; now nothing is made there and the
    module's snapshot goes to a fresh private store."""
    name = f"linked{time.time_ns()}"  # a name no earlier run's snapshot has
    make_module(home, name)
    link = open_folder / ".cache"
    planted = _as_another_account("ln", "-s", str(only_root), str(link))
    assert planted.returncode == 0, planted.stderr
    assert link.lstat().st_uid == test_user() and link.readlink() == only_root
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(link / "murmur-nb" / "module-snapshots"))
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host:
        host.describe(name)
        assert list(only_root.iterdir()) == []  # no murmur-nb/module-snapshots made there
        stores = {s.parent for s in temp_folder().glob(f"murmur-nb-snapshots-*/*-{name}")}
        assert len(stores) == 1, stores  # the snapshot is in a private store of this process
        (store,) = stores
        # 0700, but for the group's x where it is the ACL mask of the sandbox uid's passage
        # (no mount namespace: the module reaches its snapshot by its real path)
        assert store.stat().st_uid == 0 and stat.S_IMODE(store.stat().st_mode) & 0o067 == 0
    assert link.readlink() == only_root and list(only_root.iterdir()) == []


def test_a_file_where_the_store_goes_is_left_alone_for_a_private_store(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of this user's named as the store (nobody else can write it) is no store: the
    snapshot goes to a private one and the file is untouched."""
    name = f"filed{time.time_ns()}"
    make_module(home, name)
    named = tmp_path / "not-a-folder"
    named.write_text("kept")
    named.chmod(0o600)
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(named))
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host:
        host.describe(name)
        assert list(temp_folder().glob(f"murmur-nb-snapshots-*/*-{name}"))
    assert named.read_text() == "kept" and stat.S_IMODE(named.stat().st_mode) == 0o600


def _acl(folder: Path) -> list[str]:
    """``folder``'s ACL as ``getfacl -n`` shows it, an entry the mask narrows with its
    ``#effective:`` bits."""
    listed = subprocess.run(["getfacl", "-n", "-p", str(folder)],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    return [" ".join(line.split()) for line in listed.splitlines() if line and line[0] != "#"]


def _as_uid(uid: int, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run as ``uid`` (root runs only)."""
    return subprocess.run([SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           *argv], capture_output=True, text=True, check=False)  # fmt: skip


#: the Landlock path, where a root host's module reaches its snapshot through the store by
#: its real path (a passage: ``--x`` for its sandbox uid on each folder above it)
LANDLOCK = ["landlock", "seccomp", "reaper"]
KERNEL_B = f"""
import sys
import murmur_nb as mnb
home, out, data = sys.argv[1:]
policy = mnb.Policy(roots={{"out": out, "data": data}}, deadline_ms=20_000, sandbox="required",
                    sandbox_mechanisms={LANDLOCK!r})
with mnb.ModuleHost(home=home, policy=policy) as host:
    print(host.invoke("probe.run", {{}}).ok, host.sandbox.guarantees["identity"], flush=True)
    sys.stdin.readline()
    print(host.invoke("probe.run", {{}}).ok, flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids are a root host's")
def test_a_root_kernel_sharing_the_store_leaves_another_kernels_entry_on_it_in_force(
    home: Path, out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root kernels share one store (a host's notebooks, Dask workers, the suite's two
    workers). Kernel B, a process of its own, holds an entry on the store (the passage to
    its module's snapshot; its root that holds the store gives it no more, the store being
    murmur-nb's own). A kernel's new store made itself private with ``chmod 700``, which
    set the ACL mask to ``---``: B's modules lost their way into the store, and this
    kernel's passage through it was refused (``UserWarning``: raising the mask would wake
    B's entry), its module not started. Now the mask stays: B's uid still passes, both run."""
    shared = tmp_path / "shared"
    store = shared / "store"
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(store))
    b_home, b_out = tmp_path / "b-home", tmp_path / "b-out"
    sh_module(b_home, "probe", reads=["data"])
    b_out.mkdir()
    make_module(home)
    kernel_b = subprocess.Popen([sys.executable, "-c", KERNEL_B, str(b_home), str(b_out),
                                 str(shared)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert kernel_b.stdin is not None and kernel_b.stdout is not None
        first = kernel_b.stdout.readline()
        assert first.startswith("True "), (first, kernel_b.communicate())
        found = re.search(r"uid (\d+)", first)
        assert found is not None, first
        b_uid = int(found[1])
        # B's root holds the store, which (murmur-nb's own) it is not given: B's uid has the
        # passage to its module's snapshot only
        assert f"user:{b_uid}:--x" in _acl(store), _acl(store)
        b_snapshot = str(next(store.glob("*-probe")) / "probe")
        assert _as_uid(b_uid, "ls", b_snapshot).returncode == 0
        policy = mnb.Policy(roots={"out": out}, deadline_ms=20_000, sandbox="required",
                            sandbox_mechanisms=LANDLOCK)  # fmt: skip
        with mnb.ModuleHost(home=home, policy=policy, artifact_store=tmp_path / "store") as host:
            ran = host.invoke("app.run", approve=True)
            listed = _as_uid(b_uid, "ls", b_snapshot)
            assert listed.returncode == 0, (listed.stderr, _acl(store))  # B's entry in force
            assert ran.ok, ran.error
        again, said = kernel_b.communicate("\n", timeout=120)
        assert again.strip() == "True", said
    finally:
        if kernel_b.poll() is None:
            kernel_b.kill()
            kernel_b.communicate()
    assert "system.posix_acl_access" not in os.listxattr(store)  # each took its own back
    assert stat.S_IMODE(store.stat().st_mode) == 0o700


@pytest.mark.skipif(shutil.which("getfacl") is None or shutil.which("setfacl") is None,
                    reason="needs the acl tools")  # fmt: skip
@pytest.mark.parametrize("acl", [False, True], ids=["plain", "another-kernels-entry"])
def test_a_store_an_earlier_version_left_open_is_made_private_keeping_its_entries(
    home: Path, tmp_path: Path, reachable: Path, monkeypatch: pytest.MonkeyPatch, acl: bool
) -> None:
    """A store an earlier version made ``0755`` is its owner's alone after a host's first
    use. One on which another root kernel's sandbox uid holds an entry (``r-x``, the mask
    ``r-x``) keeps that entry in force: the owning group's and others' own entries go, not
    the mask (``chmod 700`` set it to ``---``)."""
    store = reachable / "store"
    store.mkdir()
    store.chmod(0o755)
    kernel = 0x70000000 + 4711  # a sandbox uid no account has
    if acl:
        subprocess.run(["setfacl", "-m", f"u:{kernel}:r-x", str(store)], check=True)
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(store))
    make_module(home)
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host:
        host.describe("app")
    assert list(store.glob("*-app/app"))  # the store was used
    entry = [f"user:{kernel}:r-x", "mask::r-x"] if acl else []
    assert _acl(store) == ["user::rwx", *entry[:1], "group::---", *entry[1:], "other::---"]
    if os.geteuid() == 0:
        assert _as_another_account("ls", str(store)).returncode != 0
        if acl:
            assert _as_uid(kernel, "ls", str(store)).returncode == 0
