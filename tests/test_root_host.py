"""The sandbox holds on a root host too (issue 22, points 1-5), tried by a hostile module.

CI runs as root, so this file runs there as root; the last test runs it, the sandbox suite,
the snapshot tests and the sandboxed diagram renderer again as an unprivileged user it
creates. Every test runs under bubblewrap (through the compiled drop helper and through its
``setpriv`` fallback) and under the Landlock fallback
(``sandbox_mechanisms=["landlock", "seccomp"]``), and checks the world
afterwards: the kernel's sysctls and hostname, the files in the ``rw`` root, the kernel's
session keyring, the working folders on disk. What a test changes on the host it puts back.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _modules import install
from _users import RERUN_TIMEOUT, rerun

import murmur_nb as mnb

SECRET = "notebook-keyring-secret-4711"
REPO = Path(__file__).resolve().parent.parent
SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin") or "setpriv"
#: where namespaces are refused (tests/_container.py), the bwrap variants run as the default
#: policy does there: Landlock, seccomp and the subreaper
MECHANISMS = {"bwrap": ["bwrap", "landlock", "seccomp", "reaper"],
              "landlock": ["landlock", "seccomp", "reaper"],
              "bwrap-setpriv": ["bwrap", "landlock", "seccomp", "reaper"]}


@dataclass
class Confined:
    home: Path
    out: Path
    mechanisms: list[str]

    @contextlib.contextmanager
    def host(self, **policy: Any) -> Iterator[mnb.ModuleHost]:
        """A host confining with these mechanisms, every guarantee required."""
        with mnb.ModuleHost(home=self.home, policy=mnb.Policy(
            roots={"out": self.out}, deadline_ms=20_000, sandbox="required",
            sandbox_mechanisms=self.mechanisms, **policy,
        )) as host:
            yield host


@pytest.fixture(params=sorted(MECHANISMS))
def confined(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Confined:
    """``bwrap-setpriv``: bwrap with the fallback a machine without a C compiler uses
    (``env -i`` plus ``setpriv`` in place of the compiled drop helper; an internal switch)."""
    if request.param == "bwrap-setpriv":
        from murmur_nb._sandbox import identity  # private: the setpriv fallback switch

        monkeypatch.setattr(identity, "drop_helper", lambda: None)
    home = tmp_path / "home"
    install(home, "escape", "escape")
    install(home, "escape2", "escape")
    out = tmp_path / "out"
    out.mkdir()
    return Confined(home, out, MECHANISMS[request.param])


def _result(inv: mnb.Invocation) -> dict[str, Any]:
    assert inv.ok, inv.error
    result: dict[str, Any] = inv.result
    return result


def test_a_module_runs_unprivileged_and_cannot_change_the_hostname(confined: Confined) -> None:
    before = socket.gethostname()
    try:
        with confined.host() as host:
            seen = _result(host.invoke("escape.identity", {"hostname": "pwned-by-module"}))
            assert "uid" in host.sandbox.guarantees["identity"]  # type: ignore[operator]
            bwrap = host.sandbox.mechanism == "bwrap"
    finally:
        after = socket.gethostname()
        if after != before and os.geteuid() == 0:
            socket.sethostname(before)  # put back what the attack changed, then fail
    assert after == before
    assert seen["uid"] != 0 and seen["euid"] != 0 and seen["gid"] != 0, seen
    if os.geteuid() != 0:
        assert seen["uid"] == os.getuid()  # an ordinary user's modules keep its uid
    assert 0 not in seen["groups"]
    assert seen["capabilities"] == {"ok": True, "value": 0}
    for tried in ("sethostname", "proc_sys_hostname", "sys_uevent_helper"):
        assert not seen[tried]["ok"], (tried, seen[tried])
    if bwrap:  # its own /tmp, thrown away, writable as any /tmp
        assert seen["private_tmp"] == {"ok": True, "value": "written"}, seen


def test_core_pattern_stays_the_kernels_and_no_crash_runs_a_script_outside(
    confined: Confined,
) -> None:
    pattern = Path("/proc/sys/kernel/core_pattern")
    before = pattern.read_text()
    try:
        with confined.host() as host:
            seen = _result(host.invoke("escape.core_pattern", {}))
        assert not seen["core_pattern"]["ok"], seen
    finally:
        after = pattern.read_text()
        if after != before and os.geteuid() == 0:
            pattern.write_text(before)  # put back what the attack changed, then fail
    assert after == before
    assert not (confined.out / "escaped").exists()


def test_no_setuid_or_setgid_file_is_left_in_the_rw_root(confined: Confined) -> None:
    with confined.host() as host:
        seen = _result(host.invoke("escape.setuid", {}))
    tried = {k: v for k, v in seen.items() if k != "mode_now"}
    assert not any(t["ok"] for t in tried.values()), seen
    assert all("Operation not permitted" in t["error"] for t in tried.values()), seen
    left = list(confined.out.rglob("*"))
    assert left, "the module wrote nothing: the attack did not run"
    for path in left:
        st = path.lstat()
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), (path, oct(st.st_mode))
        assert st.st_uid != 0 or os.geteuid() != 0, (path, st.st_uid)


# the kernel's session keyring, through the raw system calls (x86_64 numbers)
_LIBC = ctypes.CDLL(None, use_errno=True)
_ADD_KEY, _KEYCTL = 248, 250
_KEYCTL_UNLINK, _KEYCTL_SEARCH = 9, 10
_SESSION = -3


def _search(description: str) -> int:
    """The serial of a ``user`` key in this process's session keyring, or -errno."""
    serial = _LIBC.syscall(_KEYCTL, _KEYCTL_SEARCH, ctypes.c_long(_SESSION), b"user",
                           description.encode(), ctypes.c_long(0))
    return int(serial) if serial >= 0 else -ctypes.get_errno()


@contextlib.contextmanager
def _notebook_key(description: str) -> Iterator[int]:
    """A secret the notebook keeps in its session keyring (the key's serial, or -errno where
    this machine has no keyrings: the module's attempts must fail all the same)."""
    payload = SECRET.encode()
    serial = _LIBC.syscall(_ADD_KEY, b"user", description.encode(), payload,
                           ctypes.c_size_t(len(payload)), ctypes.c_long(_SESSION))
    serial = int(serial) if serial >= 0 else -ctypes.get_errno()
    try:
        yield serial
    finally:
        if serial > 0:
            _LIBC.syscall(_KEYCTL, _KEYCTL_UNLINK, ctypes.c_long(serial),
                          ctypes.c_long(_SESSION))


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="raw x86_64 system call numbers")
def test_the_kernels_keyring_is_out_of_reach_with_and_without_a_network_grant(
    confined: Confined,
) -> None:
    description = f"murmur-nb-secret-{uuid.uuid4().hex}"
    planted = f"murmur-nb-planted-{uuid.uuid4().hex}"
    ask = {"description": description, "plant": planted}
    with _notebook_key(description) as serial:
        if serial > 0:
            assert _search(description) == serial  # the secret really is there to steal
        with confined.host() as host:
            offline = _result(host.invoke("escape.keyring", ask | {"serial": serial}))
        with confined.host(network=["*"]) as host:
            online = _result(host.invoke("escape.keyring", ask | {"serial": serial}))
        for seen in (offline, online):
            assert not any(t["ok"] for t in seen.values()), seen
            assert all("Operation not permitted" in t["error"] for t in seen.values()), seen
        assert SECRET not in repr((offline, online))
        assert _search(planted) < 0  # nothing was planted for another module to pick up


def test_every_call_gets_a_new_working_folder_with_nothing_of_the_last(
    confined: Confined,
) -> None:
    secret, stamp = f"workdir-{uuid.uuid4().hex}", 1_000_000_000
    with confined.host() as host:
        marked = _result(host.invoke("escape.mark_workdir", {"secret": secret, "stamp": stamp}))
        assert all(marked[k]["ok"] for k in ("xattr", "utime", "file", "emptied")), marked
        peeks = [_result(host.invoke(f"{m}.peek_workdir", {})) for m in ("escape2", "escape")]
    assert not Path(marked["cwd"]).exists()  # removed from the disk after its call
    for peek in peeks:
        assert peek["cwd"] != marked["cwd"]
        assert peek["xattrs"] == {"ok": True, "value": {}}
        assert peek["mtime"] != stamp and peek["entries"] == []
        assert secret not in repr(peek)


def test_the_devices_cannot_be_changed_or_added_to(confined: Confined) -> None:
    """Under bwrap, /dev holds only the four safe devices (on a root host one folder of
    root's, bound once, kept in the cache): a module can use them and change none of them,
    and the next module sees the same /dev. As a user, /dev is a folder of the user's on the
    sandbox's own tmpfs: what a module adds there is its own and gone with the call."""
    from murmur_nb._sandbox import identity  # private: where the device folder lives

    host_null = Path("/dev/null").stat()
    with confined.host() as host:
        tried = [_result(host.invoke(f"{m}.devices", {})) for m in ("escape", "escape2")]
        bwrap = host.sandbox.mechanism == "bwrap"  # not where namespaces are refused
    folder = identity.device_folder(("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"))
    for seen in tried:
        assert seen["zero"] == {"ok": True, "value": "00000000"}, seen
        assert seen["null"] == {"ok": True, "value": "written"}, seen
        for change in ("chmod", "rename", "remove"):
            assert not seen[change]["ok"], (change, seen)
        if os.geteuid() == 0 or not bwrap:
            assert not seen["plant"]["ok"] and not seen["mkdir"]["ok"], seen
        if bwrap:
            assert seen["entries"] == {"ok": True, "value": ["null", "random", "urandom", "zero"]}
    assert Path("/dev/null").stat().st_mode == host_null.st_mode
    assert not Path("/dev/planted").exists() and Path("/dev/zero").exists()
    if folder is not None:  # what the module tried reached none of root's nodes
        names = sorted(p.name for p in Path(folder).iterdir())
        assert names == ["null", "random", "urandom", "zero"]
        for name in ("null", "random", "urandom", "zero"):
            node = os.lstat(Path(folder, name))
            assert stat.S_ISCHR(node.st_mode) and stat.S_IMODE(node.st_mode) == 0o666
            assert node.st_rdev == Path(f"/dev/{name}").stat().st_rdev and node.st_uid == 0


def test_a_tampered_device_folder_is_made_again(tmp_path: Path) -> None:
    """Whoever can write the cache cannot hand modules another device through /dev: the
    folder is checked and made again from the host's own nodes."""
    if os.geteuid() != 0:
        pytest.skip("the device folder is made on root hosts only (mknod)")
    from murmur_nb._sandbox import identity  # private: where the device folder lives

    devices = ("/dev/null", "/dev/zero")
    identity.device_folder.cache_clear()
    try:
        folder = identity.device_folder(devices)
        assert folder is not None
        Path(folder, "zero").unlink()
        os.mknod(Path(folder, "zero"), stat.S_IFCHR | 0o666, Path("/dev/full").stat().st_rdev)
        Path(folder, "extra").write_text("planted")
        identity.device_folder.cache_clear()
        again = identity.device_folder(devices)
        assert again == folder
        assert sorted(p.name for p in Path(folder).iterdir()) == ["null", "zero"]
        assert Path(folder, "zero").stat().st_rdev == Path("/dev/zero").stat().st_rdev
    finally:
        identity.device_folder.cache_clear()


_PLANTED_KERNEL = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from _modules import install
import murmur_nb as mnb
from murmur_nb._sandbox import identity
home = Path(sys.argv[1])
install(home, "escape", "escape")
with mnb.ModuleHost(home=home, policy=mnb.Policy(sandbox="required")) as host:
    inv = host.invoke("escape.identity", {"hostname": "planted-test"})
    print(json.dumps({"ok": inv.ok, "drop": identity.drop_helper(),
                      "dev": identity.device_folder(("/dev/null", "/dev/zero", "/dev/random",
                                                     "/dev/urandom"))}))
"""


def test_a_helper_planted_in_a_cache_another_account_can_write_never_runs(
    tmp_path: Path,
) -> None:
    """Red team 4, point 3: a root kernel whose cache another account owns (``sudo -E``, a
    root container with a user's ``HOME``) ran that account's ``drop-<key>`` as root."""
    if os.geteuid() != 0:
        pytest.skip("the drop helper and the device folder are a root host's")
    from _users import test_user

    from murmur_nb._sandbox import identity  # private: the helper's name in a trusted cache

    trusted = identity.drop_helper()
    if trusted is None:
        pytest.skip("no C compiler: no drop helper is built")
    user = test_user()
    cache = tmp_path / "users-cache"
    planted = cache / "sandbox"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    script = planted / Path(trusted).name
    script.write_text(f"#!/bin/sh\nid > {marker}\nexec \"$@\"\n")
    script.chmod(0o755)
    for path in (cache, planted, script):
        os.chown(path, user, user)
    tmp_path.chmod(0o755)
    env = {**os.environ, "MURMUR_NB_CACHE": str(cache)}
    run = subprocess.run([sys.executable, "-c", _PLANTED_KERNEL, str(tmp_path / "home"),
                          str(Path(__file__).parent)], env=env, capture_output=True,
                         text=True, timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["ok"] is True
    assert not marker.exists()  # the planted script never ran, as root or as anyone
    assert not str(seen["drop"]).startswith(str(cache))
    assert seen["dev"] is None or not str(seen["dev"]).startswith(str(cache))
    assert sorted(p.name for p in planted.iterdir()) == [script.name]  # nothing made there


_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from _modules import install
import murmur_nb as mnb
home = Path(sys.argv[1])
install(home, "hostile", "hostile")
with mnb.ModuleHost(home=home, policy=mnb.Policy(sandbox="required")) as host:
    inv = host.invoke("hostile.connect", {"port": int(sys.argv[2])})
    print(json.dumps({"network": host.sandbox.guarantees["network"], "ok": inv.ok,
                      "result": inv.result, "python": sys.executable}))
"""


@pytest.mark.slow
def test_an_interpreter_in_a_folder_only_its_owner_may_pass_still_gets_the_socket_filter(
    tmp_path: Path,
) -> None:
    """pyenv under root's ``0700`` home is common on root hosts: the host's probe of the
    socket filter, and every module, must run that interpreter as the sandbox id. A kernel
    on such an interpreter (a copied venv in a ``0700`` folder) runs a module that tries to
    reach a real listener; it gets the filter, and nothing arrives."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    venv = private / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(venv)],
                   check=True, capture_output=True)  # fmt: skip
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    ours = [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "murmur_nb_test.pth").write_text("\n".join([str(REPO), *ours]) + "\n")
    listener = socket.create_server(("127.0.0.1", 0))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "MURMUR_NB_CACHE": os.environ.get("MURMUR_NB_CACHE", str(tmp_path / "cache"))}
    try:
        run = subprocess.run(
            [str(venv / "bin" / "python"), "-c", _CHILD, str(tmp_path / "home"),
             str(listener.getsockname()[1]), str(REPO / "tests")],
            capture_output=True, text=True, env=env, timeout=300, check=False,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        listener.settimeout(0.5)
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing ever connected
    finally:
        listener.close()
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["python"].startswith(str(private))
    assert seen["network"] == "seccomp (no socket can be opened)", seen
    assert seen["ok"] and not seen["result"]["ok"], seen
    assert "Permission denied" in seen["result"]["error"], seen


def test_a_root_that_holds_the_sealing_key_and_the_snapshots_gives_the_module_neither(
    confined: Confined, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root of the folder that holds murmur-nb's own state (as a root of the home folder
    holds ``~/.local/state/murmur-nb`` and the snapshot store): the module tries to read the
    sealing key, to list the key folder and the snapshot store, and to read another module's
    snapshotted ``config.env``; it reads an ordinary file of the same root all the same. As
    the user on Landlock alone, where the folders cannot be taken out of the root, the call
    is refused before anything runs."""
    from murmur_nb._files.sealing_key import KEY_FILE, user_key  # private: the key to steal

    keys, snaps = confined.out / "state" / "murmur-nb", confined.out / "snapshots"
    monkeypatch.setenv("MURMUR_NB_KEYS", str(keys))
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(snaps))
    key = user_key()
    (confined.out / "plain.txt").write_text("ordinary")
    secret = confined.home / "modules" / "escape2" / "config.env"
    secret.write_text("API_TOKEN=escape2-secret-0815\n")
    secret.chmod(0o600)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with mnb.ModuleHost(home=confined.home, policy=mnb.Policy(
        roots={"out": elsewhere}, deadline_ms=20_000, sandbox="required",
        sandbox_mechanisms=confined.mechanisms,
    )) as other:  # escape2 runs once, from its snapshot in the store
        assert other.invoke("escape2.peek_state", {}).ok
    [stored] = [p for p in snaps.iterdir() if p.name.endswith("-escape2")]
    snapshotted = stored / "escape2" / "config.env"
    assert snapshotted.read_text().startswith("API_TOKEN=")
    ask = {"read": [str(keys / KEY_FILE), str(snapshotted), str(confined.out / "plain.txt")],
           "list": [str(keys), str(snaps)]}
    with confined.host() as host:
        mechanism = host.sandbox.mechanism
        if mechanism == "landlock" and os.geteuid() != 0:
            with pytest.raises(mnb.ModuleHostError, match="murmur-nb's own folder") as caught:
                host.invoke("escape.peek_state", ask)
            assert caught.value.code == "root_unavailable"
            assert str(confined.out) in caught.value.message and "narrower" in caught.value.message
            return
        expect = (pytest.warns(UserWarning, match="murmur-nb's own folder")
                  if os.geteuid() == 0 else contextlib.nullcontext())  # fmt: skip
        with expect:
            seen = _result(host.invoke("escape.peek_state", ask))
    read, listed = seen["read"], seen["list"]
    assert read[str(confined.out / "plain.txt")] == {"ok": True, "value": b"ordinary".hex()}
    assert read[str(keys / KEY_FILE)].get("value") != key.hex(), read
    assert not read[str(keys / KEY_FILE)]["ok"], read
    assert not read[str(snapshotted)]["ok"], read
    for folder in (keys, snaps):  # refused, or empty but the module's own snapshot
        names = listed[str(folder)].get("value") or []
        assert not any("escape2" in n or n == KEY_FILE for n in names), (folder, listed)


# -- the same suites as an unprivileged user ---------------------------------------------------
# (the user is created with useradd; setpriv, which the sandbox itself uses, switches to it)

@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="already unprivileged: this run is the user run")
@RERUN_TIMEOUT
def test_the_sandbox_suites_also_hold_as_an_unprivileged_user() -> None:
    done, tail = rerun(["tests/test_sandbox.py", "tests/test_root_host.py",
                        "tests/test_snapshot.py", "tests/test_hostile_diagram.py",
                        "tests/test_hardening.py", "tests/test_warm.py", "tests/test_scratch.py",
                        "tests/test_zygote.py", "tests/test_plans.py"],
                       user=True, docker=False, deselect="not unprivileged")
    assert done == 0, tail
    assert " passed" in tail and not re.search(r"\d+ failed", tail), tail
