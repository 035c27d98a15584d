"""A root host gives its sandbox uid the roots by file descriptor, and takes it all back.

Red team 4, points 1 and 6, and the containers issue's rule for reaching the roots without
namespaces. On a root host a module runs as a uid of its own, which reaches a policy root
through POSIX ACL entries. Tried for real: a process swaps a folder inside a root for a link
to root-only files while other kernels walk the root (the files must keep no entry), and
after ``close()`` ``getfacl -R`` over everything the host touched finds no entry for any
sandbox uid, what the module made is the root owner's, and the umask holds again. Run on
the bubblewrap path and on the Landlock path (real paths, ``--x`` on the folders above).
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import install
from _users import passage_for, passage_lock, test_user

import murmur_nb as mnb

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only a root host gives ACL entries")

GETFACL = shutil.which("getfacl") or "getfacl"
#: where sandbox uids are taken from (docs/sandbox.md, "What a root kernel gives its modules")
SANDBOX_IDS = range(0x70000000, 0x7FFE0000)
MECHANISMS = {"bwrap": ["bwrap", "landlock", "seccomp", "reaper"],
              "landlock": ["landlock", "seccomp", "reaper"]}  # fmt: skip


def sandbox_entries(*paths: Path, recursive: bool = True, ids: range = SANDBOX_IDS
                    ) -> list[str]:  # fmt: skip
    """Every ACL line ``getfacl -R`` prints for a uid in ``ids``, with its file."""
    flags = ["-R", "-P"] if recursive else []
    seen = subprocess.run([GETFACL, *flags, "-n", "-p", *map(str, paths)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    hits, where = [], ""
    for line in seen.stdout.splitlines():
        if line.startswith("# file:"):
            where = line.removeprefix("# file: ")
        found = re.match(r"(?:default:)?user:(\d+):", line)
        if found and int(found.group(1)) in ids:
            hits.append(f"{where}: {line}")
    return hits


def _result(inv: mnb.Invocation) -> dict[str, object]:
    assert inv.ok, inv.error
    assert isinstance(inv.result, dict)
    return inv.result


@pytest.fixture(params=sorted(MECHANISMS))
def mechanisms(request: pytest.FixtureRequest) -> list[str]:
    return MECHANISMS[request.param]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    install(folder, "reacher", "reacher")
    return folder


@pytest.fixture
def own_journals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of this test's (``$TMPDIR`` of the kernels it starts), where they
    keep their grant journals: a dead kernel's journal is taken back by the next root
    kernel that gives, and another test's, running beside this one, would take it back
    between the kill and the test's look at what the dead kernel left."""
    folder = tmp_path / "tmp"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


@pytest.fixture
def users_folders(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A user's ``0755`` work folder (the ``rw`` root) and ``0700`` sources (``ro``)."""
    user = test_user()
    work, src = tmp_path / "work", tmp_path / "src"
    (work / "sub").mkdir(parents=True)
    (work / "data.csv").write_text("a,b\n1,2\n")
    (work / "sub" / "deep.txt").write_text("deep")
    src.mkdir()
    (src / "secret.txt").write_text("the user's own")
    for path, mode in ((work, 0o755), (work / "sub", 0o755), (work / "data.csv", 0o644),
                       (work / "sub" / "deep.txt", 0o644), (src, 0o700),
                       (src / "secret.txt", 0o600)):  # fmt: skip
        os.chown(path, user, user)
        path.chmod(mode)
    yield work, src


def test_nothing_given_outlives_the_host(
    home: Path, tmp_path: Path, users_folders: tuple[Path, Path], mechanisms: list[str]
) -> None:
    work, src = users_folders
    before = {p: p.stat().st_mode for p in [work, *work.rglob("*"), src, *src.rglob("*")]}
    policy = mnb.Policy(roots={"out": work, "src": src}, sandbox="required",
                        sandbox_mechanisms=mechanisms)  # fmt: skip
    with mnb.ModuleHost(home=home, policy=policy) as host:
        uid = _result(host.invoke("reacher.whoami", {}))["uid"]
        assert isinstance(uid, int) and uid in SANDBOX_IDS
        _result(host.invoke("reacher.write", {"name": "made.txt"}))
        _result(host.invoke("reacher.write", {"name": "made-folder", "folder": True}))
        seen = _result(host.invoke("reacher.read", {"paths": [
            str(src / "secret.txt"), str(work / "data.csv"), str(work / "sub" / "deep.txt")]}))
        assert seen == {str(src / "secret.txt"): "the user's own",
                        str(work / "data.csv"): "a,b\n1,2\n",
                        str(work / "sub" / "deep.txt"): "deep"}  # fmt: skip
        assert sandbox_entries(work, src)  # given while the host is open
    assert sandbox_entries(work, src) == []
    # the folders above: other kernels (a parallel test run) may hold entries there for now
    ours = range(uid, uid + 1)
    assert sandbox_entries(*tmp_path.parents, tmp_path, recursive=False, ids=ours) == []
    for path, mode in before.items():
        assert path.stat().st_mode == mode, path  # the group bits are the user's again
    user = test_user()
    for made in (work / "made.txt", work / "made-folder", work / "made-folder" / "inside.txt"):
        st = made.lstat()
        assert (st.st_uid, st.st_gid) == (user, user), made  # the module's work is the owner's
    old = os.umask(0o077)
    try:
        fd = os.open(work / "later.txt", os.O_CREAT | os.O_WRONLY, 0o666)
        os.close(fd)
    finally:
        os.umask(old)
    assert (work / "later.txt").stat().st_mode & 0o777 == 0o600  # no default entry: umask holds


def reads_as(uid: int, path: Path) -> subprocess.CompletedProcess[str]:
    """``cat path`` run as ``uid`` (no groups), outside any sandbox."""
    return subprocess.run(["/bin/cat", str(path)], user=uid, group=uid, extra_groups=[],
                          capture_output=True, text=True, check=False, env={})  # fmt: skip


def test_a_host_dropped_unclosed_gives_back_what_it_gave(
    home: Path, users_folders: tuple[Path, Path]
) -> None:
    """A notebook cell makes a host and never closes it. Once the host is collected, a
    process running as its sandbox uid tries to read the user's ``0700`` sources and is
    refused (while the host was open, the same process read them: the Landlock path gives
    the folders above ``--x``). Before, the entries stayed until the kernel exited."""
    work, src = users_folders
    policy = mnb.Policy(roots={"out": work, "src": src}, sandbox="required",
                        sandbox_mechanisms=MECHANISMS["landlock"])  # fmt: skip
    host = mnb.ModuleHost(home=home, policy=policy)
    uid = _result(host.invoke("reacher.whoami", {}))["uid"]
    assert isinstance(uid, int) and uid in SANDBOX_IDS
    _result(host.invoke("reacher.read", {"paths": [str(src / "secret.txt")]}))
    while_open = reads_as(uid, src / "secret.txt")
    assert while_open.returncode == 0 and while_open.stdout == "the user's own"
    del host
    gc.collect()
    after = reads_as(uid, src / "secret.txt")
    assert after.returncode != 0 and "Permission denied" in after.stderr, after
    assert sandbox_entries(work, src) == []


def test_a_file_made_in_a_root_after_a_call_is_reached_by_the_next(
    home: Path, users_folders: tuple[Path, Path], mechanisms: list[str]
) -> None:
    work, src = users_folders
    policy = mnb.Policy(roots={"out": work, "src": src}, sandbox="required",
                        sandbox_mechanisms=mechanisms)  # fmt: skip
    with mnb.ModuleHost(home=home, policy=policy) as host:
        _result(host.invoke("reacher.read", {"paths": [str(src / "secret.txt")]}))
        (src / "later.txt").write_text("made between two calls")
        (src / "later.txt").chmod(0o600)
        seen = _result(host.invoke("reacher.read", {"paths": [str(src / "later.txt")]}))
        assert seen == {str(src / "later.txt"): "made between two calls"}


RACER = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = sys.argv[1].encode(), sys.argv[2].encode()
    os.write(1, b"go")
    while True:
        libc.renameat2(-100, a, -100, b, 2)
""")

KERNEL = textwrap.dedent("""
    import json, sys
    import murmur_nb as mnb
    policy = mnb.Policy(roots={"out": sys.argv[2]}, sandbox="required",
                        sandbox_mechanisms=json.loads(sys.argv[3]))
    with mnb.ModuleHost(home=sys.argv[1], policy=policy) as host:
        inv = host.invoke("reacher.whoami", {})
        print(json.dumps(inv.result))
""")


def test_a_folder_swapped_for_a_link_mid_walk_gives_nothing_outside(
    home: Path, tmp_path: Path
) -> None:
    """A process that can write the root swaps ``sub`` with a link to root-only decoys
    (``renameat2(RENAME_EXCHANGE)`` in a loop) while fresh kernels walk the root."""
    root, decoys = tmp_path / "shared", tmp_path / "decoys"
    (root / "sub").mkdir(parents=True)
    decoys.mkdir(mode=0o700)
    names = [f"f{i:03d}" for i in range(300)]
    for name in names:
        (root / "sub" / name).write_text("plain")
        (decoys / name).write_text("root only")
        (decoys / name).chmod(0o600)
    (root / "swap").symlink_to(decoys)
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(root / "sub"), str(root / "swap")],
                             stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert racer.stdout is not None and racer.stdout.read(2) == b"go"
        for mechanisms in [*MECHANISMS.values()] * 3:
            kernel = subprocess.run(
                [sys.executable, "-c", KERNEL, str(home), str(root), json.dumps(mechanisms)],
                capture_output=True, text=True, timeout=120, check=False,
            )
            assert kernel.returncode == 0, kernel.stderr[-2000:]
    finally:
        racer.kill()
        racer.wait()
        racer.stdout.close()
    assert sandbox_entries(decoys) == []
    assert all(not os.listxattr(decoys / name) for name in names)


def test_each_kernel_has_its_own_sandbox_uid(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    policy = mnb.Policy(roots={"out": out})
    with mnb.ModuleHost(home=home, policy=policy) as host:
        here = _result(host.invoke("reacher.whoami", {}))["uid"]
    other = subprocess.run(
        [sys.executable, "-c", KERNEL, str(home), str(out), json.dumps(MECHANISMS["landlock"])],
        capture_output=True, text=True, timeout=120, check=True,
    )
    there = json.loads(other.stdout)["uid"]
    assert isinstance(here, int) and isinstance(there, int)
    assert here != there and here in SANDBOX_IDS and there in SANDBOX_IDS


#: a kernel that gives its sandbox uid the user's sources, then waits to be killed
GIVING_KERNEL = """
import sys
import murmur_nb as mnb
home, work, src = sys.argv[1:4]
policy = mnb.Policy(roots={"out": work, "src": src}, sandbox="required",
                    sandbox_mechanisms=["landlock", "seccomp", "reaper"])
host = mnb.ModuleHost(home=home, policy=policy)
uid = host.invoke("reacher.whoami", {}).result["uid"]
assert host.invoke("reacher.read", {"paths": [src + "/secret.txt"]}).ok
print(uid, flush=True)
sys.stdin.read()
"""


def giving_kernel(home: Path, work: Path, src: Path, script: str = GIVING_KERNEL
                  ) -> tuple[subprocess.Popen[str], int]:  # fmt: skip
    """A kernel process that has given its sandbox uid ``work`` and ``src``; and that uid."""
    kernel = subprocess.Popen([sys.executable, "-c", script, str(home), str(work), str(src)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert kernel.stdout is not None
    return kernel, int(kernel.stdout.readline())


def test_what_a_killed_kernel_gave_is_taken_back_by_the_next_root_kernel(
    home: Path, tmp_path: Path, users_folders: tuple[Path, Path], own_journals: Path
) -> None:
    """A kernel killed with ``SIGKILL`` takes nothing back. A process running as the dead
    kernel's sandbox uid reads the user's ``0700`` sources after the kill, and is refused
    once another root kernel has made a host (on the code before, it still read them, and
    ``getfacl`` listed the entries for good)."""
    work, src = users_folders
    kernel, uid = giving_kernel(home, work, src)
    try:
        assert uid in SANDBOX_IDS
    finally:
        kernel.kill()
        kernel.communicate()
    killed = reads_as(uid, src / "secret.txt")
    assert killed.returncode == 0 and killed.stdout == "the user's own"  # nothing taken back
    assert sandbox_entries(work, src, ids=range(uid, uid + 1))
    a_later_root_kernels_host(home)
    assert_taken_back(uid, work, src, *tmp_path.parents)


def a_later_root_kernels_host(home: Path) -> None:
    """A host made and closed in a new root kernel (its first host takes back what the
    journals of dead kernels list)."""
    made = subprocess.run([sys.executable, "-c", "import murmur_nb as mnb\n"
                           f"mnb.ModuleHost(home={str(home)!r}).close()"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr


def assert_taken_back(uid: int, work: Path, src: Path, *above: Path) -> None:
    """A process running as ``uid`` is refused the user's sources, and ``getfacl`` finds no
    entry for ``uid`` in the roots nor on the folders ``above`` them."""
    after = reads_as(uid, src / "secret.txt")
    assert after.returncode != 0 and "Permission denied" in after.stderr, after
    ours = range(uid, uid + 1)
    assert sandbox_entries(work, src, ids=ours) == []
    assert sandbox_entries(*above, recursive=False, ids=ours) == []


#: a kernel that has given its sandbox uid the user's sources, then uses up every file
#: descriptor it may have (``hard``: the hard limit too, so none can be had at exit either)
#: and ends as a Python program ends, its exit handlers run
SHORT_KERNEL = GIVING_KERNEL.replace("sys.stdin.read()", """
import os, resource
hard = sys.stdin.readline().strip() == "hard"
taken = len(os.listdir("/proc/self/fd")) + 8
resource.setrlimit(resource.RLIMIT_NOFILE,
                   (taken, taken if hard else resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError as exc:
    print(exc.strerror, flush=True)
""")


@pytest.mark.parametrize("limit", ["soft", "hard"])
def test_a_kernel_out_of_descriptors_still_takes_back_what_it_gave(
    home: Path, tmp_path: Path, users_folders: tuple[Path, Path], own_journals: Path, limit: str
) -> None:
    """A kernel that ran out of file descriptors (and exits as it then may) has no
    descriptor to take back with. Under a soft limit it raises the limit at exit: once it is
    gone, a process running as its sandbox uid is refused the user's ``0700`` sources. With
    the hard limit reached too its journal stays, and the next root kernel's host takes it
    back. Before, the kernel emptied its journal as if all had gone back: the dead kernel's
    uid read the sources for good, and ``/root`` kept one ``--x`` entry after each run of a
    test like this one."""
    work, src = users_folders
    kernel, uid = giving_kernel(home, work, src, SHORT_KERNEL)
    out, _ = kernel.communicate(f"{limit}\n", timeout=120)
    assert kernel.returncode == 0 and out.strip() == "Too many open files", out
    if limit == "hard":  # nothing could be taken back at exit: the journal does it
        assert sandbox_entries(work, src, ids=range(uid, uid + 1))
        a_later_root_kernels_host(home)
    assert_taken_back(uid, work, src, *tmp_path.parents, Path("/root"))


#: a root kernel with exactly three descriptors to spare when it first gives (enough to find
#: and read a dead kernel's journal, not to walk a root of ten entries to take it back)
SHORT_SWEEPER = """
import os, resource, sys
import murmur_nb
from murmur_nb._sandbox import access  # private: the sweep a first grant runs, alone
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 64, hard))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
for _ in range(3):
    os.close(held.pop())
access._journal()
"""


def dead_kernels_journal(where: Path, uid: int) -> list[Path]:
    """The journal folders (``murmur-nb-grants-*``) in ``where`` that list ``uid``."""
    listed = f'"uid": {uid},'
    return [folder for folder in where.glob("murmur-nb-grants-*")
            if listed in (folder / "given.jsonl").read_text(errors="replace")]  # fmt: skip


def test_a_kernel_too_short_of_descriptors_to_take_back_leaves_the_journal_to_the_next(
    home: Path, tmp_path: Path, users_folders: tuple[Path, Path], own_journals: Path
) -> None:
    """A dead kernel's journal is taken back by the next root kernel that gives. One that has
    descriptors enough to find and read the journal but not to walk the roots it lists keeps
    it: the walk cut short is owed, the journal stays, and the kernel after it takes
    everything back, after which a process running as the dead kernel's uid is refused the
    user's ``0700`` sources. Were the journal removed with the walk cut short, that uid
    would read them for good."""
    work, src = users_folders
    for i in range(10):  # a root whose walk needs more descriptors than the sweeper has
        (work / f"more-{i}.txt").write_text("more")
    kernel, uid = giving_kernel(home, work, src, SHORT_KERNEL)
    out, _ = kernel.communicate("hard\n", timeout=120)
    assert kernel.returncode == 0 and out.strip() == "Too many open files", out
    journal = dead_kernels_journal(own_journals, uid)
    assert journal, "the dead kernel left no journal"
    assert sandbox_entries(work, src, ids=range(uid, uid + 1))

    # the sweep alone, so exactly three descriptors are left for it (a host would open
    # files of its own first)
    short = subprocess.run([sys.executable, "-c", SHORT_SWEEPER],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert short.returncode == 0, short.stderr
    assert all(folder.is_dir() for folder in journal), "the journal went with work owed"
    assert sandbox_entries(work, ids=range(uid, uid + 1)), "the short walk took all back"

    a_later_root_kernels_host(home)
    assert_taken_back(uid, work, src, *tmp_path.parents, Path("/root"))
    assert not any(folder.exists() for folder in journal)


HOLDS = "from murmur_nb._sandbox.identity import _hold; print(_hold({uid}))"


def test_no_kernel_draws_the_sandbox_uid_a_live_kernel_holds(
    home: Path, users_folders: tuple[Path, Path]
) -> None:
    """Sandbox uids are drawn at random (a later kernel with a killed one's process id no
    longer gets its uid, and what it was given). While a kernel lives, no other may take its
    uid; once it is killed, its hold goes with the next look."""
    kernel, uid = giving_kernel(home, *users_folders)
    try:
        held = subprocess.run([sys.executable, "-c", HOLDS.format(uid=uid)],
                              capture_output=True, text=True, check=True)  # fmt: skip
        assert held.stdout.strip() == "False"  # the live kernel's
    finally:
        kernel.kill()
        kernel.communicate()
    freed = subprocess.run([sys.executable, "-c", HOLDS.format(uid=uid)],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert freed.stdout.strip() == "True"


DRAWS_AND_WAITS = """
import sys
from murmur_nb._sandbox.identity import sandbox_id
print(sandbox_id(), flush=True)
sys.stdin.read()
"""


def test_a_killed_kernels_hold_goes_when_any_later_kernel_draws_its_own() -> None:
    """A root kernel killed with ``SIGKILL`` runs no exit handler: its hold of its uid stays
    in the temporary folder until a later kernel looks. Every later kernel sweeps all dead
    holds as it draws, not only the one of the uid it drew (1 in 268 million): one CI run
    had left 34 of them, one per kernel nbval stopped."""
    holds = Path(tempfile.gettempdir())
    killed = subprocess.Popen([sys.executable, "-c", DRAWS_AND_WAITS], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert killed.stdout is not None
    uid = int(killed.stdout.readline())
    alive = subprocess.Popen([sys.executable, "-c", DRAWS_AND_WAITS], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert alive.stdout is not None
        alive_uid = int(alive.stdout.readline())
        killed.kill()
        killed.communicate()
        assert list(holds.glob(f"murmur-nb-uid-{uid}-*")), "a killed kernel leaves its hold"
        later = subprocess.run([sys.executable, "-c", "from murmur_nb._sandbox.identity import "
                                "sandbox_id; print(sandbox_id())"],
                               capture_output=True, text=True, check=True)  # fmt: skip
        assert int(later.stdout) not in (uid, alive_uid)
        assert not list(holds.glob(f"murmur-nb-uid-{uid}-*"))  # the dead one's is gone
        assert list(holds.glob(f"murmur-nb-uid-{alive_uid}-*"))  # the live one's stays
    finally:
        alive.communicate("")
        killed.kill()
        killed.communicate()
    assert not list(holds.glob(f"murmur-nb-uid-{alive_uid}-*"))  # its own exit removed it


SAME_FROM_EVERY_THREAD = """
import glob, os, tempfile, threading
from murmur_nb._sandbox.identity import sandbox_id
seen, start = [], threading.Barrier(8)
def ask():
    start.wait()
    seen.append(sandbox_id())
threads = [threading.Thread(target=ask) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
held = glob.glob(os.path.join(tempfile.gettempdir(), f"murmur-nb-uid-{seen[0]}-*"))
print(len(set(seen)), len(held))
"""


def test_threads_asking_at_once_get_one_sandbox_uid() -> None:
    """Drawn at random, the uid is drawn once per process: eight threads asking at the same
    moment get the same one, and one hold is made."""
    ran = subprocess.run([sys.executable, "-c", SAME_FROM_EVERY_THREAD],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert ran.stdout.split() == ["1", "1"]


def test_two_runs_as_the_user_side_by_side_keep_their_passage(tmp_path: Path) -> None:
    """The reruns' way in (``tests/_users.py``): the first of two runs side by side to
    finish leaves the user's passage to the other; the last one out takes it back (the
    first took it from the other before, which then failed on its next import)."""
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    (folder / "f.txt").write_text("through")
    (folder / "f.txt").chmod(0o644)
    uid = test_user()
    assert reads_as(uid, folder / "f.txt").returncode != 0  # root's 0700 folders above
    with passage_for(uid, [folder]):
        with passage_for(uid, [folder]):
            assert reads_as(uid, folder / "f.txt").stdout == "through"
        still = reads_as(uid, folder / "f.txt")
        assert still.returncode == 0 and still.stdout == "through", still
    after = reads_as(uid, folder / "f.txt")
    assert after.returncode != 0 and "Permission denied" in after.stderr, after
    assert not passage_lock(uid, folder).exists()  # the last one out removed it


def test_runs_giving_passages_through_other_paths_keep_each_others(tmp_path: Path) -> None:
    """Two runs side by side whose paths share a folder above them (two checkouts using one
    interpreter): the first out leaves the shared folder's passage to the other, and the last
    one out takes back every passage given, its own and the first's."""
    shared = tmp_path / "shared"
    one, two = shared / "one", shared / "two"
    for folder in (one, two):
        folder.mkdir(parents=True, mode=0o755)
        (folder / "f.txt").write_text(folder.name)
        (folder / "f.txt").chmod(0o644)
    shared.chmod(0o700)  # the folder above both, passable only by a passage
    uid = test_user()
    with passage_for(uid, [one]):
        with passage_for(uid, [two]):
            assert reads_as(uid, two / "f.txt").stdout == "two"
        still = reads_as(uid, one / "f.txt")
        assert still.returncode == 0 and still.stdout == "one", still
    for folder in (one, two):
        after = reads_as(uid, folder / "f.txt")
        assert after.returncode != 0 and "Permission denied" in after.stderr, after
    assert not passage_lock(uid, shared).exists()


@pytest.mark.parametrize("opening", ["openat2", "one component at a time"])
def test_a_root_path_through_a_link_is_refused_and_its_target_gets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opening: str
) -> None:
    """A root named through a link to a root-only folder is refused, not given: opened in
    one ``openat2`` that refuses any link, and where that cannot be used (an old kernel,
    a container's seccomp profile), one component at a time with ``O_NOFOLLOW``."""
    from murmur_nb._files import libc  # private: the openat2 switch of every no-link open
    from murmur_nb._sandbox import access  # private: the root grant

    if opening != "openat2":
        monkeypatch.setattr(libc, "_OPENAT2", [False])
    private = tmp_path / "private"
    (private / "data").mkdir(parents=True)
    private.chmod(0o700)
    (private / "data" / "secret.txt").write_text("root only")
    (tmp_path / "via").symlink_to(private)
    inside = (private / "data", private / "data" / "secret.txt")
    before = [sorted(os.listxattr(p)) for p in inside]
    try:
        problem = access.grant_root(str(tmp_path / "via" / "data"), write=True)
        assert "cannot be given access" in problem  # ELOOP, or ENOTDIR one component a time
        assert sandbox_entries(private) == []
        assert [sorted(os.listxattr(p)) for p in inside] == before
        assert access.grant_root(str(private / "data"), write=False) == ""  # its real path
        taken = libc._OPENAT2 == [True]
        assert taken == (opening == "openat2")  # the way under test was the one taken
    finally:
        access.revoke()


HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = int(sys.argv[1])  # the file, opened for it (the folders above are root's 0700)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(1, b"held")
    time.sleep(120)
""")


@pytest.mark.parametrize("turns", ["/run", "the file's own lock"])
def test_a_locked_file_in_a_root_never_stops_a_call(
    home: Path, users_folders: tuple[Path, Path], turns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another account holds an ``flock`` on its own ``0600`` file in a root, for as long as
    it likes (as a running kernel holds its ``.owner.lock``): the call still runs, reads the
    file, and everything given is taken back while the lock is still held. Before, the walk
    waited for that lock, and the call with it, forever."""
    if turns != "/run":
        from murmur_nb._sandbox import access  # private: the fallback without /run

        monkeypatch.setattr(access, "_turns", lambda: None)
    work, src = users_folders
    locked = src / "app.lock"
    locked.write_text("locked by its owner")
    os.chown(locked, test_user(), test_user())
    locked.chmod(0o600)
    python = shutil.which("python3", path="/usr/bin:/bin") or "python3"  # the account's own
    fd = os.open(locked, os.O_RDONLY)
    holder = subprocess.Popen([python, "-c", HOLDER, str(fd)], user=test_user(), pass_fds=[fd],
                              stdout=subprocess.PIPE)  # fmt: skip
    os.close(fd)
    try:
        assert holder.stdout is not None and holder.stdout.read(4) == b"held"
        policy = mnb.Policy(roots={"out": work, "src": src}, sandbox="required",
                            sandbox_mechanisms=MECHANISMS["bwrap"], deadline_ms=20_000)  # fmt: skip
        done: list[mnb.Invocation] = []

        def call() -> None:
            with mnb.ModuleHost(home=home, policy=policy) as host:
                done.append(host.invoke("reacher.read", {"paths": [str(locked)]}))

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(timeout=60)
        assert done, "the call waited on the lock another account holds"
        assert _result(done[0]) == {str(locked): "locked by its owner"}
        assert holder.poll() is None  # the lock was held the whole time
        assert sandbox_entries(work, src) == []
    finally:
        holder.kill()
        holder.communicate()


SETFACL = shutil.which("setfacl") or "setfacl"

#: a process that opens a file to read it, then to append to it, and says what each got
TRIES = textwrap.dedent("""
    import sys
    for how in ("r", "a"):
        try:
            with open(sys.argv[1], how) as f:
                f.read() if how == "r" else f.write("planted by another account\\n")
            print(how, "done")
        except PermissionError:
            print(how, "PermissionError")
""")
REFUSED = ["r PermissionError", "a PermissionError"]


def tries_as(uid: int, path: Path) -> list[str]:
    """What a process running as ``uid`` (no groups, outside any sandbox) got when it
    tried to read ``path`` and to append to it."""
    python = shutil.which("python3", path="/usr/bin:/bin") or "python3"  # the account's own
    done = subprocess.run([python, "-c", TRIES, str(path)], user=uid, group=uid,
                          extra_groups=[], capture_output=True, text=True, check=False,
                          env={})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def acl_of(path: Path) -> str:
    return subprocess.run([GETFACL, "-n", "-p", str(path)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def switched_off(path: Path, uid: int, perm: str, group_mode: int) -> None:
    """``path`` shared with ``uid`` through an ACL entry, then switched off the POSIX way
    (``chmod 600``: the mask becomes ``---``, the entry stays)."""
    path.chmod(0o600 | group_mode)
    subprocess.run([SETFACL, "-m", f"u:{uid}:{perm}", str(path)], check=True)
    path.chmod(0o600)
    assert "mask::---" in acl_of(path)


def said(caught: list[warnings.WarningMessage]) -> str:
    return "\n".join(str(w.message) for w in caught)


@pytest.fixture
def masked_roots(tmp_path: Path) -> tuple[Path, Path]:
    """Root's ``0755`` folders ``out`` and ``src``, each holding a ``0600`` file of root's
    that once had an entry for the test account, switched off with ``chmod 600``:
    ``out/shared.txt`` (``rw-``; the owning group ``r--``) and ``src/secret.txt``
    (``-w-``)."""
    out, src = tmp_path / "out", tmp_path / "src"
    for folder in (out, src):
        folder.mkdir()
        folder.chmod(0o755)
    (out / "shared.txt").write_text("shared once\n")
    (src / "secret.txt").write_text("the owner's secret\n")
    switched_off(out / "shared.txt", test_user(), "rw-", 0o040)
    switched_off(src / "secret.txt", test_user(), "-w-", 0)
    return out, src


def test_a_grant_never_wakes_an_entry_chmod_switched_off(
    home: Path, masked_roots: tuple[Path, Path]
) -> None:
    """Trial 18b, finding A. The owner switched the test account's entries off with
    ``chmod 600`` (mask ``---``); a root kernel gives its sandbox uid both roots. The
    account tries to read and append to both files while the host is open and after it
    closed, and is refused each time; the files, their modes and ACLs are as they were.
    ``shared.txt`` is not given (raising its mask would wake the account's ``rw-`` and the
    group's ``r--``: a warning names it); ``secret.txt`` is (its mask gains ``r--``, which
    wakes nothing, and loses it again). Before, the mask became the union of every entry
    when giving and when taking back: the account read and appended to both, for good."""
    out, src = masked_roots
    files = (out / "shared.txt", src / "secret.txt")
    before = {path: (path.read_text(), path.stat().st_mode, acl_of(path)) for path in files}
    user = test_user()
    policy = mnb.Policy(roots={"out": out, "src": src}, sandbox="required",
                        sandbox_mechanisms=MECHANISMS["landlock"])  # fmt: skip
    with passage_for(user, [out, src]):
        assert [tries_as(user, path) for path in files] == [REFUSED, REFUSED]
        with mnb.ModuleHost(home=home, policy=policy) as host:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                seen = _result(host.invoke("reacher.read", {"paths": [str(p) for p in files]}))
            assert [tries_as(user, path) for path in files] == [REFUSED, REFUSED]
        assert [tries_as(user, path) for path in files] == [REFUSED, REFUSED]
    assert seen == {str(out / "shared.txt"): "error: Permission denied",
                    str(src / "secret.txt"): "the owner's secret\n"}  # fmt: skip
    assert {path: (path.read_text(), path.stat().st_mode, acl_of(path)) for path in files} \
        == before  # fmt: skip
    assert re.search(rf"{out}/shared.txt \(its ACL mask is ---.*user:{user} \(rw-\)", said(caught))
    assert "secret.txt" not in said(caught)


def test_a_mask_a_killed_kernel_raised_is_put_back_by_the_next(
    home: Path, masked_roots: tuple[Path, Path], own_journals: Path
) -> None:
    """The mask bits a kernel killed with ``SIGKILL`` raised are in its journal: the next
    root kernel's host takes them off with the entry. The test account then still cannot
    append to ``secret.txt`` (before, the take-back left the mask ``-w-``, the union of the
    entries left, and it could)."""
    out, src = masked_roots
    secret = src / "secret.txt"
    before = (secret.read_text(), secret.stat().st_mode, acl_of(secret))
    kernel, uid = giving_kernel(home, out, src)
    kernel.kill()
    kernel.communicate()
    assert f"user:{uid}:r--" in acl_of(secret)  # given, and left by the kill
    a_later_root_kernels_host(home)
    user = test_user()
    with passage_for(user, [src]):
        assert tries_as(user, secret) == REFUSED
    assert (secret.read_text(), secret.stat().st_mode, acl_of(secret)) == before


def test_another_accounts_file_in_a_shared_root_is_not_given(home: Path, tmp_path: Path) -> None:
    """Trial 18b, finding B. Root's ``1777`` folder is a module's ``out`` root; another
    account keeps a ``0600`` file in it. The module tries to read it, and a process running
    as the sandbox uid tries to read and append to it while the host is open: all refused,
    the file unchanged, a warning names it, and the module still writes in the root. Before,
    the file got ``user:<sandbox uid>:rw-`` and the module read it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    private = shared / "b-private.txt"
    private.write_text("another account's private notes\n")
    os.chown(private, test_user(), test_user())
    private.chmod(0o600)
    policy = mnb.Policy(roots={"out": shared}, sandbox="required",
                        sandbox_mechanisms=MECHANISMS["landlock"])  # fmt: skip
    with mnb.ModuleHost(home=home, policy=policy) as host:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seen = _result(host.invoke("reacher.read", {"paths": [str(private)]}))
            made = _result(host.invoke("reacher.write", {"name": "made.txt"}))
        uid = _result(host.invoke("reacher.whoami", {}))["uid"]
        assert isinstance(uid, int) and uid in SANDBOX_IDS
        by_the_sandbox_uid = tries_as(uid, private)
    assert seen == {str(private): "error: Permission denied"}
    assert by_the_sandbox_uid == REFUSED
    assert private.read_text() == "another account's private notes\n"
    assert made == {"made": str(shared / "made.txt")}
    assert f"{private} (owned by uid {test_user()}" in said(caught)
    assert sandbox_entries(shared) == []


def fill_acl(path: Path) -> int:
    """Give ``path`` as many named ``r--`` entries as its file system takes (no room for
    one more); how many."""
    def acl(n: int) -> bytes:
        entries = [(0x01, 6, 0xFFFFFFFF), *[(0x02, 4, 100_000 + i) for i in range(n)],
                   (0x04, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]  # fmt: skip
        return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)

    low, high = 1, 10_000
    while low < high:
        mid = (low + high + 1) // 2
        try:
            os.setxattr(path, "system.posix_acl_access", acl(mid))
            low = mid
        except OSError:
            high = mid - 1
    os.setxattr(path, "system.posix_acl_access", acl(low))
    with pytest.raises(OSError):
        os.setxattr(path, "system.posix_acl_access", acl(low + 1))
    return low


def test_a_file_whose_acl_is_full_never_refuses_a_call(
    home: Path, users_folders: tuple[Path, Path], tmp_path: Path
) -> None:
    """Trial 18b, finding C. A file in the root has no room for one more ACL entry: the
    call runs (the module reads and writes the rest of the root), and a warning names that
    file. Before, every call was refused, blaming the whole root. A root that is itself
    full is still refused, and the message names it."""
    work, src = users_folders
    full = work / "full-acl.txt"
    full.write_text("full")
    os.chown(full, test_user(), test_user())
    fill_acl(full)
    policy = mnb.Policy(roots={"out": work, "src": src}, sandbox="required",
                        sandbox_mechanisms=MECHANISMS["bwrap"])  # fmt: skip
    paths = [str(work / "data.csv"), str(full)]
    with mnb.ModuleHost(home=home, policy=policy) as host, \
            warnings.catch_warnings(record=True) as caught:  # fmt: skip
        warnings.simplefilter("always")
        seen = _result(host.invoke("reacher.read", {"paths": paths}))
        made = _result(host.invoke("reacher.write", {"name": "made.txt"}))
    assert seen == {str(work / "data.csv"): "a,b\n1,2\n", str(full): "error: Permission denied"}
    assert made == {"made": str(work / "made.txt")}
    assert (work / "made.txt").read_text() == "made by the module"
    assert f"{full} (" in said(caught)
    assert full.read_text() == "full"
    jammed = tmp_path / "jammed"
    jammed.mkdir()
    fill_acl(jammed)
    policy = mnb.Policy(roots={"out": jammed}, sandbox="required",
                        sandbox_mechanisms=MECHANISMS["bwrap"])  # fmt: skip
    refused = f"access to {re.escape(str(jammed))} "
    with mnb.ModuleHost(home=home, policy=policy) as host, \
            pytest.raises(mnb.SandboxUnavailable, match=refused):  # fmt: skip
        host.invoke("reacher.whoami", {})
