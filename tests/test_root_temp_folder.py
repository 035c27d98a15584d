"""A root kernel's temporary folders and tools are never where another account can move them.

``sudo -E`` keeps a user's ``TMPDIR`` (``pam_tmpdir`` gives each user a ``0700`` one of their
own). A root kernel made its private folders there: its runs folder, and, with that user's
``HOME`` too (its caches untrusted), the sandbox helpers it compiles and then runs as root.
The folder's owner can rename any entry of it: a red-team trial let the test account swap
each ``murmur-nb-*`` folder root made for one of its own, and root went on writing (and
running) in the account's folder. A root kernel now makes them in ``/tmp`` (sticky: only an
entry's owner may move it) when ``TMPDIR`` is not root's to keep.

The same for ``PATH``: a root kernel ran ``bwrap`` and ``node`` from the first folder naming
them, the account's; now only ones nobody else can replace. And for the C compiler that
builds the sandbox's helpers: it kept its files in the account's ``TMPDIR`` and opened them
again by name; now they are in the helpers' own folder.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _modules import install
from _users import REPO, RERUN_TIMEOUT, passage_for, rerun, test_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="another account against root")

#: the test account, polling its own temporary folder: each folder root makes there is
#: moved aside and one of the account's own (open to all) put under its name; prints what
#: it swapped once its standard input closes
SWAP = """\
import json, os, select, sys, time
top = sys.argv[1]
print("ready", flush=True)
swapped = []
while not select.select([sys.stdin], [], [], 0)[0]:
    for name in os.listdir(top):
        path = os.path.join(top, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid == 0 and name.startswith("murmur-nb"):
            try:
                os.rename(path, os.path.join(top, "moved-" + name))
                os.mkdir(path, 0o777)
                os.chmod(path, 0o777)
                swapped.append(name)
            except OSError:
                pass
    time.sleep(0.001)
print(json.dumps(swapped))
"""

#: the root kernel: one sandboxed call of a fixture module (the default policy)
KERNEL = """\
import json, sys, tempfile
import murmur_nb as mnb
with mnb.ModuleHost(home=sys.argv[1]) as host:
    inv = host.invoke("plain.echo", {"count": 1})
    print(json.dumps({"ok": inv.ok, "temp": tempfile.gettempdir()}))
"""


def _give(folder: Path, mode: int) -> None:
    uid = test_user()
    os.chown(folder, uid, pwd.getpwuid(uid).pw_gid)
    folder.chmod(mode)


def _kernel_beside(
    attack: str, args: list[str], theirs_tmp: Path, theirs_home: Path, *, home: Path, cwd: Path
) -> tuple[subprocess.CompletedProcess[str], object]:
    """:data:`KERNEL` run as root with the test account's ``TMPDIR`` and ``HOME`` (its caches
    untrusted: the helpers are compiled in it, not taken), while the account runs ``attack``
    (``args`` after it); the kernel's run, and what the attack printed last (JSON)."""
    env = {**os.environ, "TMPDIR": str(theirs_tmp), "HOME": str(theirs_home)}
    for name in ("MURMUR_NB_CACHE", "XDG_CACHE_HOME", "MURMUR_NB_ZYGOTE"):
        env.pop(name, None)
    uid, python = test_user(), Path(sys.executable)
    with (
        passage_for(uid, [REPO, python.parent, Path(os.path.realpath(python)).parent]),
        subprocess.Popen(
            [sys.executable, "-S", "-c", attack, *args], user=uid, group=uid, extra_groups=[],
            cwd=theirs_tmp, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin"}, text=True,
        ) as attacker,
    ):  # fmt: skip
        assert attacker.stdout is not None
        assert attacker.stdout.readline().strip() == "ready"
        try:
            kernel = subprocess.run(
                [sys.executable, "-c", KERNEL, str(home)], env=env, cwd=cwd,
                capture_output=True, text=True, timeout=240, check=False,
            )  # fmt: skip
        finally:
            out, _ = attacker.communicate(timeout=60)  # closes its input: it stops
    return kernel, json.loads(out)


def test_a_root_kernel_makes_nothing_in_another_accounts_tmpdir(tmp_path: Path) -> None:
    theirs_tmp = Path(tempfile.mkdtemp(prefix="mnb-their-tmp-"))
    theirs_home = Path(tempfile.mkdtemp(prefix="mnb-their-home-"))
    try:
        _give(theirs_tmp, 0o700)  # as pam_tmpdir makes it
        _give(theirs_home, 0o755)
        home = tmp_path / "facet"
        install(home, "plain")
        kernel, swapped = _kernel_beside(SWAP, [str(theirs_tmp)], theirs_tmp, theirs_home,
                                         home=home, cwd=tmp_path)  # fmt: skip
        # before: the account swapped root's runs folder as it was made (['murmur-nb-runs-
        # ...']), and root went on in the account's folder (here it failed to lock it)
        assert swapped == [], (swapped, kernel.stderr[-2000:])
        roots = [p for p in theirs_tmp.rglob("*") if p.lstat().st_uid == 0]
        assert roots == [], roots
        assert kernel.returncode == 0, kernel.stderr[-3000:]
        said = json.loads(kernel.stdout.strip().splitlines()[-1])
        assert said["ok"], said
        assert said["temp"] == str(theirs_tmp)  # what Python calls the temporary folder
    finally:
        shutil.rmtree(theirs_tmp, ignore_errors=True)
        shutil.rmtree(theirs_home, ignore_errors=True)


#: stands in for a tool on the account's PATH folder: says who ran it, then runs the real one
PLANT = """\
#!/bin/sh
echo "$(id -u) $0" >> {marker}
exec {real} "$@"
"""

#: the root kernel: one sandboxed call and a JavaScript hook build
TOOLS = """\
import json, sys
import murmur_nb as mnb
from murmur_nb._hooks.build import build_js_hook  # private: no public JavaScript builder
with mnb.ModuleHost(home=sys.argv[1]) as host:
    inv = host.invoke("plain.echo", {"count": 1})
    built = build_js_hook(sys.argv[2]) if sys.argv[2] else None
    print(json.dumps({"ok": inv.ok, "sandbox": host.sandbox.mode, "built": str(built)}))
"""


def _plant(folder: Path, tool: str, marker: Path) -> None:
    """The test account's ``tool`` in ``folder`` (made, with the folders up to it, and given
    to the account): it writes who ran it into ``marker``, then runs the real one."""
    real = shutil.which(tool, path="/usr/bin:/bin")
    assert real is not None
    folder.mkdir(parents=True, exist_ok=True)
    plant = folder / tool
    plant.write_text(PLANT.format(marker=marker, real=real))
    plant.chmod(0o755)
    os.chown(plant, test_user(), -1)


def _new_js_hook(folder: Path) -> Path:
    """A JavaScript hook no build has seen (so it is built, not taken from the cache)."""
    hook = folder / "hook" / "planted_path.js"
    hook.parent.mkdir()
    hook.write_text(f"// {os.urandom(8).hex()}: a new build, not a cached one\n"
                    "export const handlers = { onTaskStart(e) { return 'js'; }, "
                    "onCompact(m) { return m; } };\n")  # fmt: skip
    return hook


def _run_tools(env: dict[str, str], home: Path, source: str, *, cwd: Path) -> dict[str, object]:
    """:data:`TOOLS` as root with ``env``; what it said (its run must have succeeded with
    a sandbox)."""
    kernel = subprocess.run([sys.executable, "-c", TOOLS, str(home), source], env=env, cwd=cwd,
                            capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert kernel.returncode == 0, kernel.stderr[-3000:]
    said = json.loads(kernel.stdout.strip().splitlines()[-1])
    assert said["ok"] and said["sandbox"] != "off", said
    return said


def _give_tree(top: Path) -> None:
    """``top`` and everything in it to the test account (folders ``0755``)."""
    uid = test_user()
    for path in [top, *top.rglob("*")]:
        os.chown(path, uid, pwd.getpwuid(uid).pw_gid, follow_symlinks=False)
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)


@pytest.mark.parametrize(
    ("tool", "route"),
    [("bwrap", "first"), ("node", "first"), ("bwrap", "dotdot"), ("bwrap", "relative")],
)
def test_a_root_kernel_runs_no_tool_from_another_accounts_path_folder(
    tmp_path: Path, tool: str, route: str
) -> None:
    """A red-team trial: ``PATH`` named a folder of the test account's first (``sudo
    --preserve-env``; an image whose ``bin`` folder its notebook user owns), and a root
    kernel ran the account's ``bwrap`` (every call's sandbox, made as root) and ``node``
    (a JavaScript hook's build) from it. Now it passes over what anyone else could replace.

    A second trial reached the account's folder another way (``dotdot``): an entry
    ``<theirs>/l/../../../usr/bin`` (``l`` the account's link three folders down into its
    own tree) is ``/usr/bin`` by its text, which was checked, and the account's
    ``<theirs>/usr/bin`` to the kernel, which ran the plant as root. A relative entry
    (``relative``: ``.``, the kernel in ``/usr/bin``) was checked in the kernel's folder and
    kept as ``./bwrap``, which every sandbox then started from the call's own folder, where
    there is none (every module refused); relative entries are passed over now."""
    if shutil.which(tool, path="/usr/bin:/bin") is None or (
        tool == "node" and shutil.which("npm", path="/usr/bin:/bin") is None
    ):
        pytest.skip(f"needs {tool}")
    theirs = Path(tempfile.mkdtemp(prefix="mnb-their-bin-"))
    try:
        marker = tmp_path / "ran"
        home = tmp_path / "facet"
        install(home, "plain")
        source, cwd = "", tmp_path
        if route == "first":
            _plant(theirs, tool, marker)
            path = f"{theirs}:/usr/bin:/bin"
        elif route == "dotdot":
            _plant(theirs / "usr" / "bin", tool, marker)
            down = theirs / "a" / "b" / "c"
            down.mkdir(parents=True)
            (theirs / "l").symlink_to(down)
            ups = len(theirs.parts)  # one back out of ``l``'s name, then up to ``/``
            path = f"{theirs}/l{'/..' * ups}/usr/bin:/usr/bin:/bin"
            assert os.path.normpath(path.split(":")[0]) == "/usr/bin"
            assert os.path.realpath(path.split(":")[0]) == str(theirs / "usr" / "bin")
        else:
            _plant(theirs, tool, marker)
            path, cwd = ".:/usr/bin:/bin", Path("/usr/bin")
        _give_tree(theirs)
        if tool == "node":
            source = str(_new_js_hook(tmp_path))
        env = {**os.environ, "PATH": path}
        env.pop("MURMUR_NB_ZYGOTE", None)
        if route == "relative":
            env["MURMUR_NB_ZYGOTE"] = "off"  # the call's sandbox a bwrap of its own
        _run_tools(env, home, source, cwd=cwd)
        ran = marker.read_text() if marker.exists() else ""
        assert ran == "", ran  # before: "0 /tmp/mnb-their-bin-.../bwrap" (root ran it)
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


#: the test account's script for node's ``--require``: writes who ran it
REQUIRED = """\
require("fs").appendFileSync({marker!r}, process.getuid() + " NODE_OPTIONS\\n");
"""


@pytest.mark.slow
def test_a_root_kernels_build_tools_take_nothing_of_another_accounts_environment(
    tmp_path: Path,
) -> None:
    """A red-team trial, with a root kernel given another account's environment (``sudo
    --preserve-env``) and a fresh cache of root's, so that it compiles its sandbox helpers,
    installs componentize-js with npm and builds a JavaScript hook:

    - ``npm`` (found where nobody else can replace it) starts with ``#!/usr/bin/env node``:
      the account's ``node``, first on ``PATH``, ran as root;
    - gcc found its assembler ``as`` there too (and in ``COMPILER_PATH``): the account's
      ran as root, and could have put its code into the helper root runs next;
    - ``NODE_OPTIONS=--require <the account's script>``: node ran the script as root;
    - ``DEPENDENCIES_OUTPUT=<a file of root's>``: gcc appended a line to it.

    Now a root kernel's tools get ``PATH`` of the folders nobody else can write and nothing
    else of such an environment (``tool_environment``)."""
    if shutil.which("npm", path="/usr/bin:/bin") is None or shutil.which("cc") is None:
        pytest.skip("needs Node.js, npm and a C compiler")
    victim = tmp_path / "victim"
    victim.write_text("root's file, unchanged\n")
    marker = tmp_path / "ran"
    theirs = Path(tempfile.mkdtemp(prefix="mnb-their-bin-"))
    try:
        for tool in ("node", "as"):
            _plant(theirs, tool, marker)
        (theirs / "required.js").write_text(REQUIRED.format(marker=str(marker)))
        _give_tree(theirs)
        home = tmp_path / "facet"
        install(home, "plain")
        env = {
            **os.environ, "PATH": f"{theirs}:/usr/bin:/bin", "COMPILER_PATH": str(theirs),
            "NODE_OPTIONS": f"--require {theirs}/required.js",
            "DEPENDENCIES_OUTPUT": str(victim), "MURMUR_NB_CACHE": str(tmp_path / "cache"),
        }  # fmt: skip
        env.pop("MURMUR_NB_ZYGOTE", None)
        said = _run_tools(env, home, str(_new_js_hook(tmp_path)), cwd=tmp_path)
        assert Path(str(said["built"])).read_bytes()[:4] == b"\0asm"
        ran = marker.read_text() if marker.exists() else ""
        assert ran == "", ran  # before: "0 .../node", "0 .../as", "0 NODE_OPTIONS"
        assert victim.read_text() == "root's file, unchanged\n"
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


#: the test account, watching its own temporary folder with inotify: each file root's C
#: compiler makes there (``cc*.s``, ``cc*.o``) is replaced, before the compiler's next step
#: opens it by name, by a link to ``victim``; prints what it replaced once its input closes
CLOBBER = """\
import ctypes, json, os, select, struct, sys
top, victim = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
assert fd >= 0 and libc.inotify_add_watch(fd, top.encode(), 0x100) >= 0  # IN_CREATE
print("ready", flush=True)
replaced = []
while True:
    ready = select.select([fd, sys.stdin], [], [], 1)[0]
    if sys.stdin in ready:
        break
    if fd not in ready:
        continue
    data = os.read(fd, 65536)
    while data:
        _, _, _, size = struct.unpack_from("iIII", data)
        name = data[16:16 + size].rstrip(b"\\0").decode()
        data = data[16 + size:]
        path = os.path.join(top, name)
        if name.startswith("cc") and os.path.exists(path) and os.lstat(path).st_uid == 0:
            try:
                os.unlink(path)
                os.symlink(victim, path)
                replaced.append(name)
            except OSError:
                pass
print(json.dumps(replaced))
"""


def test_a_root_kernel_compiles_its_helpers_where_no_other_account_can_reach(
    tmp_path: Path,
) -> None:
    """A red-team trial: a root kernel whose caches it cannot trust compiles the sandbox's C
    helpers (and runs them as root); the compiler kept its files in ``TMPDIR``, the test
    account's, and opened them again by name. The account put a link to a file of root's
    in place of each as it was made: the compiler wrote assembly into that file as root
    (and would have assembled, linked and handed root the account's code). The compiler's
    temporary folder is now the helpers' own folder, which nobody else can write."""
    victim = tmp_path / "victim"
    victim.write_text("root's file, unchanged\n")
    theirs_tmp = Path(tempfile.mkdtemp(prefix="mnb-their-tmp-"))
    theirs_home = Path(tempfile.mkdtemp(prefix="mnb-their-home-"))
    try:
        _give(theirs_tmp, 0o700)
        _give(theirs_home, 0o755)
        home = tmp_path / "facet"
        install(home, "plain")
        kernel, replaced = _kernel_beside(CLOBBER, [str(theirs_tmp), str(victim)], theirs_tmp,
                                          theirs_home, home=home, cwd=tmp_path)  # fmt: skip
        # before: the account replaced every cc*.s and cc*.o, and the victim held assembly
        assert victim.read_text() == "root's file, unchanged\n"
        assert replaced == [], replaced
        assert kernel.returncode == 0, kernel.stderr[-3000:]
        assert json.loads(kernel.stdout.strip().splitlines()[-1])["ok"]
    finally:
        shutil.rmtree(theirs_tmp, ignore_errors=True)
        shutil.rmtree(theirs_home, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MNB_IN_CONTAINER") == "1", reason="a nested run")
@RERUN_TIMEOUT
def test_the_same_holds_for_a_root_kernel_in_a_default_docker_container() -> None:
    """This file's other tests, run again inside the default-Docker harness
    (``tests/_container.py``: its capabilities and its seccomp profile's effect) as root."""
    code, tail = rerun(["tests/test_root_temp_folder.py"], user=False, docker=True,
                       deselect="not default_docker_container")  # fmt: skip
    assert code == 0 and "7 passed" in tail, tail
