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
from _users import REPO, passage_for, rerun, test_user

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


@pytest.mark.parametrize("tool", ["bwrap", "node"])
def test_a_root_kernel_runs_no_tool_from_another_accounts_path_folder(
    tmp_path: Path, tool: str
) -> None:
    """A red-team trial: ``PATH`` named a folder of the test account's first (``sudo
    --preserve-env``; an image whose ``bin`` folder its notebook user owns), and a root
    kernel ran the account's ``bwrap`` (every call's sandbox, made as root) and ``node``
    (a JavaScript hook's build) from it. Now it passes over what anyone else could replace."""
    real = shutil.which(tool, path="/usr/bin:/bin")
    if real is None or (tool == "node" and shutil.which("npm", path="/usr/bin:/bin") is None):
        pytest.skip(f"needs {tool}")
    theirs_bin = Path(tempfile.mkdtemp(prefix="mnb-their-bin-"))
    try:
        marker = tmp_path / "ran"
        plant = theirs_bin / tool
        plant.write_text(PLANT.format(marker=marker, real=real))
        plant.chmod(0o755)
        _give(theirs_bin, 0o755)
        os.chown(plant, test_user(), -1)
        home = tmp_path / "facet"
        install(home, "plain")
        source = ""
        if tool == "node":
            hook = tmp_path / "hook" / "planted_path.js"
            hook.parent.mkdir()
            hook.write_text(f"// {os.urandom(8).hex()}: a new build, not a cached one\n"
                            "export const handlers = { onTaskStart(e) { return 'js'; }, "
                            "onCompact(m) { return m; } };\n")  # fmt: skip
            source = str(hook)
        env = {**os.environ, "PATH": f"{theirs_bin}:/usr/bin:/bin"}
        env.pop("MURMUR_NB_ZYGOTE", None)
        kernel = subprocess.run([sys.executable, "-c", TOOLS, str(home), source], env=env,
                                cwd=tmp_path, capture_output=True, text=True, timeout=240,
                                check=False)  # fmt: skip
        ran = marker.read_text() if marker.exists() else ""
        assert ran == "", ran  # before: "0 /tmp/mnb-their-bin-.../bwrap" (root ran it)
        assert kernel.returncode == 0, kernel.stderr[-3000:]
        said = json.loads(kernel.stdout.strip().splitlines()[-1])
        assert said["ok"] and said["sandbox"] != "off", said
    finally:
        shutil.rmtree(theirs_bin, ignore_errors=True)


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
def test_the_same_holds_for_a_root_kernel_in_a_default_docker_container() -> None:
    """This file's other tests, run again inside the default-Docker harness
    (``tests/_container.py``: its capabilities and its seccomp profile's effect) as root."""
    code, tail = rerun(["tests/test_root_temp_folder.py"], user=False, docker=True,
                       deselect="not default_docker_container")  # fmt: skip
    assert code == 0 and "4 passed" in tail, tail
