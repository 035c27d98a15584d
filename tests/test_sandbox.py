"""The OS sandbox around every module process (issue 11), tried by a hostile module.

Each test makes the hostile fixture really attempt the attack (real files, a real loopback
listener, real processes) and then checks the world, not the host's bookkeeping. The host
runs with ``sandbox="required"``; the tests of the degraded modes force a mechanism off with
``Policy.sandbox_mechanisms`` and check the report, the warning and the refusal.
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _modules import alive, install, read_pids

import murmur_nb as mnb

SECRET = "notebook-secret-4711"


@dataclass
class World:
    tmp: Path
    home: Path
    src: Path
    out: Path
    notebook: Path
    store: Path
    cache: Path

    def policy(self, **overrides: Any) -> mnb.Policy:
        base: dict[str, Any] = {
            "roots": {"src": self.src, "out": self.out},
            "deadline_ms": 20_000,
            "sandbox": "required",
        }
        return mnb.Policy(**(base | overrides))

    def host(self, **overrides: Any) -> mnb.ModuleHost:
        return mnb.ModuleHost(
            home=self.home, policy=self.policy(**overrides), artifact_store=self.store
        )


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    home = tmp_path / "home"
    install(home, "hostile", "hostile")
    install(home, "other", "plain")
    src = tmp_path / "src"
    src.mkdir()
    (src / "input.txt").write_text("source data")
    out = tmp_path / "out"
    out.mkdir()
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    (notebook / "analysis.ipynb").write_text(SECRET)
    store = tmp_path / "store"
    (store / "sha256").mkdir(parents=True)
    (store / "sha256" / "someone-elses.png").write_text(SECRET)
    cache = tmp_path / "cache"
    monkeypatch.setenv("MURMUR_NB_CACHE", str(cache))
    (cache / "components").mkdir(parents=True)
    (cache / "components" / "entry.cwasm").write_text("compiled")
    return World(tmp_path, home, src, out, notebook, store, cache)


@pytest.fixture
def host(world: World) -> Iterator[mnb.ModuleHost]:
    with world.host() as h:
        yield h


def _attempts(inv: mnb.Invocation) -> dict[str, dict[str, Any]]:
    assert inv.ok, inv.error
    result: dict[str, dict[str, Any]] = inv.result
    return result


# -- the report ----------------------------------------------------------------------------


def test_every_guarantee_holds_here_and_each_call_says_how_it_was_confined(
    host: mnb.ModuleHost,
) -> None:
    report = host.sandbox
    assert isinstance(report, mnb.SandboxReport)
    assert report.mode == "required" and report.complete and report.missing == []
    assert set(report.guarantees) == {
        "filesystem", "read_only_roots", "network", "process_tree", "process_isolation",
        "identity", "kernel_objects",
    }
    # bwrap where user namespaces are allowed; Landlock, seccomp and the subreaper where they
    # are not (a default Docker container: tests/_container.py)
    assert report.mechanism in ("bwrap", "landlock") and report.mechanism in str(report)
    if report.mechanism == "landlock":
        assert report.guarantees["process_tree"].startswith("subreaper")
    inv = host.invoke("hostile.read", {"paths": ["root:src/input.txt"]})
    assert inv.confinement.startswith(report.mechanism)
    assert host.audit()["confinement"].iloc[-1] == inv.confinement


# -- what it can do ------------------------------------------------------------------------


def test_it_can_read_system_files_its_roots_and_its_folder_and_write_rw_roots(
    host: mnb.ModuleHost, world: World
) -> None:
    inv = host.invoke("hostile.read", {"paths": [
        "root:src/input.txt", "/etc/passwd", "self:_proto.py", "/dev/null"]})
    assert all(a["ok"] for a in _attempts(inv).values()), inv.result
    assert _attempts(inv)["root:src/input.txt"]["value"] == "source data"
    inv = host.invoke("hostile.write", {"paths": ["root:out/fine.txt"]})
    assert _attempts(inv)["root:out/fine.txt"]["ok"]
    assert (world.out / "fine.txt").read_text() == "pwned"


# -- it cannot: read or write anything else --------------------------------------------------


def test_it_cannot_read_the_home_the_notebook_other_modules_the_store_or_the_cache(
    host: mnb.ModuleHost, world: World
) -> None:
    targets = [
        str(world.notebook / "analysis.ipynb"),
        str(world.home / "modules/other/module"),
        str(world.store / "sha256/someone-elses.png"),
        str(world.cache / "components/entry.cwasm"),
    ]
    inv = host.invoke("hostile.read", {"paths": targets})
    assert not any(a["ok"] for a in _attempts(inv).values()), inv.result
    listed = host.invoke("hostile.listdir", {"paths": [
        str(Path.home()), str(world.tmp), str(world.home / "modules")]})
    assert Path.home().is_dir() and any(Path.home().iterdir())  # there is something to see
    # nothing but the interpreter's installation, its own folder and its roots are there
    allowed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)} | {
        str(world.home / "modules/hostile"), str(world.src), str(world.out)}
    for path, attempt in _attempts(listed).items():
        seen = [str(Path(path, f)) for f in attempt.get("value", [])]
        assert all(any(f.startswith(t + "/") for t in allowed) for f in seen), (path, seen)
    assert SECRET not in json.dumps(inv.result) + json.dumps(listed.result)


def test_it_cannot_write_ro_roots_module_folders_the_notebook_or_outside_its_roots(
    host: mnb.ModuleHost, world: World
) -> None:
    outside = Path("/tmp") / f"murmur-planted-{uuid.uuid4().hex}"
    files = {
        world.src / "input.txt": "source data",
        world.notebook / "analysis.ipynb": SECRET,
        world.home / "modules/other/module": (world.home / "modules/other/module").read_text(),
        world.home / "modules/hostile/module": (
            world.home / "modules/hostile/module"
        ).read_text(),
    }
    planted = [outside, world.tmp / "planted.txt", world.home / "modules/other/planted.py"]
    inv = host.invoke("hostile.write", {"paths": [str(p) for p in [*files, *planted]]})
    # every existing file refused the write; a planted file may "succeed" inside the
    # sandbox's private /tmp, so the world is what counts for those
    assert not any(_attempts(inv)[str(p)]["ok"] for p in files), inv.result
    for path, content in files.items():
        assert path.read_text() == content, path
    assert not any(p.exists() for p in planted)


def test_the_hook_cache_and_the_artifact_store_are_out_of_reach(
    host: mnb.ModuleHost, world: World
) -> None:
    # a first call lays the sandbox's own files out in the cache (helpers, a root host's
    # device folder), unless this process did so before: what the module does comes after
    host.invoke("hostile.write", {"paths": []})
    entries = sorted(world.cache.rglob("*"))
    inv = host.invoke("hostile.write", {"paths": [
        str(world.cache / "components/entry.cwasm"),
        str(world.cache / "components/planted.cwasm"),
        str(world.store / "sha256/someone-elses.png"),
        str(world.store / "sha256/planted.png"),
    ]})
    assert not any(a["ok"] for a in _attempts(inv).values()), inv.result
    assert sorted(world.cache.rglob("*")) == entries
    assert (world.cache / "components/entry.cwasm").read_text() == "compiled"
    assert sorted(p.name for p in (world.store / "sha256").iterdir()) == ["someone-elses.png"]


# -- it cannot: reach the network without a grant ---------------------------------------------


class _Listener:
    """A real TCP listener on loopback that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(100))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        time.sleep(0.2)
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_it_cannot_reach_the_network_without_a_grant(world: World) -> None:
    listener = _Listener()
    try:
        with world.host() as host:  # the policy grants no network
            inv = host.invoke("hostile.connect", {"port": listener.port})
            assert inv.request.grants.network == []
            assert not _attempts(inv)["ok"]
        with world.host(network=["*"]) as host:  # a grant is the outside, not this machine
            granted = host.invoke("hostile.connect", {"port": listener.port})
            assert granted.request.grants.network == ["api.example"]
            assert not _attempts(granted)["ok"], granted.result
            assert "Permission denied" in _attempts(granted)["error"]
    finally:
        listener.close()
    assert listener.received == []  # neither call (tests/test_network_grant.py: the outside)


def _unix(kind: socket.SocketKind, address: str | Path) -> socket.socket:
    """A Unix socket of ``kind`` bound to ``address``: ``@name`` in the abstract namespace,
    else a socket file open to anyone who may reach it (as a notebook's service offers)."""
    sock = socket.socket(socket.AF_UNIX, kind)
    if isinstance(address, str) and address.startswith("@"):
        sock.bind("\0" + address[1:])
    else:
        sock.bind(str(address))
        Path(address).chmod(0o777)
    return sock


class _Inbox:
    """Real listeners on every other way out -- UDP on loopback, an abstract Unix socket and a
    Unix socket file inside the module's ``out`` root -- recording what reaches them."""

    def __init__(self, folder: Path) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.abstract_name = f"@murmur-test-{uuid.uuid4().hex}"
        self.abstract = _unix(socket.SOCK_STREAM, self.abstract_name)
        self.path = folder / "notebook.sock"
        self.named = _unix(socket.SOCK_STREAM, self.path)
        # datagram ones, abstract and in the root: a pair of the module's own reaches these
        self.dgram_name = f"@murmur-test-{uuid.uuid4().hex}"
        self.dgram = _unix(socket.SOCK_DGRAM, self.dgram_name)
        self.dgram_path = folder / "notebook-dgram.sock"
        self.named_dgram = _unix(socket.SOCK_DGRAM, self.dgram_path)
        #: a name a kernel-side client keeps sending to (a service that is not up yet)
        self.squat_name = f"@murmur-test-{uuid.uuid4().hex}"
        self.squatted: list[int] = []
        self.received: dict[str, list[bytes]] = {
            "udp": [], "abstract": [], "path": [], "dgram": [], "dgram_path": []
        }
        self._stop = threading.Event()
        self._socks = {"udp": self.udp, "abstract": self.abstract, "path": self.named,
                       "dgram": self.dgram, "dgram_path": self.named_dgram}  # fmt: skip
        self._threads = [
            threading.Thread(target=self._serve, args=(name, sock), daemon=True)
            for name, sock in self._socks.items()
        ]
        self._threads.append(threading.Thread(target=self._client, daemon=True))
        for sock in (self.abstract, self.named):
            sock.listen()
        for sock in self._socks.values():
            sock.settimeout(0.2)
        for thread in self._threads:
            thread.start()

    def _client(self) -> None:
        """Send to :attr:`squat_name` every 10 ms; count what was taken."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            while not self._stop.is_set():
                with contextlib.suppress(OSError):
                    name = "\0" + self.squat_name[1:]
                    self.squatted.append(sock.sendto(b"kernel-secret", name))
                time.sleep(0.01)

    def _serve(self, name: str, sock: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                if sock.type == socket.SOCK_DGRAM:
                    self.received[name].append(sock.recv(100))
                    continue
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received[name].append(conn.recv(100))
                except OSError:
                    self.received[name].append(b"")

    def attack(self) -> dict[str, Any]:
        return {"udp": self.udp.getsockname()[1], "abstract": self.abstract_name,
                "path": "root:out/notebook.sock", "dgram": self.dgram_name,
                "dgram_path": "root:out/notebook-dgram.sock", "squat": self.squat_name}

    def close(self) -> None:
        time.sleep(0.2)
        self._stop.set()
        for thread in self._threads:
            thread.join()
        for sock in self._socks.values():
            sock.close()


def test_it_cannot_open_any_socket_without_a_grant_udp_and_unix_included(world: World) -> None:
    """No socket at all: UDP to loopback, an abstract Unix socket (reachable from any
    process in the host's network namespace), a Unix socket file sitting in one of the
    module's own roots (which a network namespace alone would leave reachable), and no
    io_uring (which can open sockets without the ``socket`` call). Nor a pair of datagram
    sockets of its own (``socketpair``: a red-team trial sent through one to an abstract
    and a path-named datagram socket, by ``sendto``, ``connect`` and ``sendmsg``, and
    bound one to a name a kernel-side client sends to, receiving its datagrams)."""
    inbox = _Inbox(world.out)
    try:
        with world.host() as host:
            assert host.sandbox.guarantees["network"] == "seccomp (no socket can be opened)"
            tried = _attempts(host.invoke("hostile.sockets", inbox.attack()))
            assert not any(t["ok"] for t in tried.values()), tried
            assert "not implemented" in tried.pop("io_uring")["error"].lower()
            assert all("Permission denied" in t["error"] for t in tried.values()), tried
        with world.host(network=["*"]) as host:  # a grant reaches none of them either
            granted = _attempts(host.invoke("hostile.sockets", inbox.attack()))
            # io_uring stays refused: it would open files past the setuid-mode rules
            assert "not implemented" in granted.pop("io_uring")["error"].lower()
            assert all("Permission denied" in t["error"] for t in granted.values()), granted
    finally:
        inbox.close()
    # before: the abstract datagram socket got the pair's three sends from a module without
    # a grant (its filter refused ``socket`` only), and the squatting pair received the
    # kernel-side client's datagrams (with a grant too: ``bind`` went unchecked)
    assert all(got == [] for got in inbox.received.values()), inbox.received
    assert inbox.squatted == []


def test_without_libseccomp_policy_a_network_namespace_still_keeps_it_offline(
    world: World,
) -> None:
    """With the socket filter disabled, bwrap falls back to a network namespace: TCP, UDP
    and abstract sockets of the host stay out of reach (a Unix socket file in a root would
    not, which is why the filter is preferred)."""
    listener = _Listener()
    inbox = _Inbox(world.out)
    try:
        without = ["bwrap", "landlock", "reaper"]
        with world.host(sandbox="best-effort", sandbox_mechanisms=without) as host:
            assert host.sandbox.missing == ["kernel_objects"]  # the filter keeps the keyring
            # without user namespaces, Landlock's own network rules: TCP only (below)
            namespace = host.sandbox.guarantees["network"] == "bwrap network namespace"
            assert namespace or host.sandbox.guarantees["network"] == (
                f"landlock ABI {host.sandbox._landlock_abi} (TCP only)")
            assert host.sandbox.mechanisms["seccomp"] == "disabled by policy"
            with pytest.warns(mnb.SandboxWarning, match="kernel_objects"):
                tcp = _attempts(host.invoke("hostile.connect", {"port": listener.port}))
            tried = _attempts(host.invoke("hostile.sockets", inbox.attack()))
            # a datagram "sent" to the namespace's own loopback goes nowhere: see below
            assert not tcp["ok"] and not tried["abstract"]["ok"]
    finally:
        listener.close()
        inbox.close()
    assert listener.received == [] and inbox.received["abstract"] == []
    if namespace:  # Landlock's network rules cover TCP only: there UDP gets out
        assert inbox.received["udp"] == []


# -- it cannot: see or signal processes outside its tree, read the kernel's /proc ---------------


def test_it_cannot_read_the_kernels_proc_entries_or_see_other_processes(
    host: mnb.ModuleHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_LATE_SECRET", SECRET)  # put in memory after start
    inv = host.invoke("hostile.spy", {"pid": os.getpid()})
    found = _attempts(inv)
    assert SECRET not in json.dumps(found)
    for what in ("environ", "mem", "maps", "cmdline"):
        # the pid names no process of the kernel inside the sandbox
        assert not found[what]["ok"] or "test_sandbox" not in found[what]["value"], found[what]
    visible = found["visible_pids"].get("value", [])
    assert len(visible) <= 2, visible  # the module itself (and nothing of the host)
    kernel = Path(f"/proc/{os.getpid()}/cmdline").read_bytes().decode("latin-1")
    assert kernel not in [c.get("value") for c in found["cmdlines"]["value"]]


def test_it_cannot_signal_a_process_outside_its_tree(host: mnb.ModuleHost) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    try:
        inv = host.invoke("hostile.signal", {"pid": victim.pid})
        assert not _attempts(inv)["ok"], inv.result
        time.sleep(0.1)
        assert victim.poll() is None  # still running
    finally:
        victim.kill()
        victim.wait()


# -- it cannot: leave any process alive once invoke returns -----------------------------------


def assert_daemons_gone(out: Path) -> None:
    pids = read_pids(out, [f"daemon{i}" for i in range(5)])
    beats = sorted(out.glob("beat*"))
    assert len(beats) == 5  # all five daemons were up and beating
    sizes = [b.stat().st_size for b in beats]
    time.sleep(0.3)
    assert [b.stat().st_size for b in beats] == sizes  # nobody beats any more
    assert {r: p for r, p in pids.items() if alive(p)} == {}


def start_daemons(host: mnb.ModuleHost, then: str) -> None:
    """Five detached daemons, then the call ends: normally, at its deadline, or past its
    output bound (``then``)."""
    if then == "answer":
        inv = host.invoke("hostile.daemons", {"then": then})
        assert inv.ok and inv.result == {"daemons": 5}
    elif then == "hang":
        with pytest.raises(mnb.DeadlineExceeded):
            host.invoke("hostile.daemons", {"then": then}, deadline_ms=4_000)
    else:
        with pytest.raises(mnb.OutputTooLarge):
            host.invoke("hostile.daemons", {"then": then}, max_output_bytes=1 << 20)


@pytest.mark.parametrize("then", ["answer", "hang", "flood"])
def test_no_daemon_outlives_the_call(host: mnb.ModuleHost, world: World, then: str) -> None:
    start_daemons(host, then)
    assert_daemons_gone(world.out)


def test_no_daemon_outlives_a_keyboard_interrupt(host: mnb.ModuleHost, world: World) -> None:
    def interrupt() -> None:
        read_pids(world.out, [f"daemon{i}" for i in range(5)], timeout=15)
        _thread.interrupt_main()

    thread = threading.Thread(target=interrupt)
    thread.start()
    with pytest.raises(KeyboardInterrupt):
        host.invoke("hostile.daemons", {"then": "hang"}, deadline_ms=60_000)
    thread.join()
    assert_daemons_gone(world.out)


# -- 1. approval pinned to code ----------------------------------------------------------------


@pytest.mark.parametrize("source", ["operator", "allow-list"])
def test_an_approval_is_void_once_the_module_code_changes(world: World, source: str) -> None:
    approved = ["other.paid"] if source == "allow-list" else []
    with world.host(approved=approved) as host:
        if source == "operator":
            host.approve("other.paid")
        assert host.invoke("other.paid", {}).ok
        # a hostile module cannot rewrite the approved module...
        exe = world.home / "modules/other/module"
        before = exe.read_bytes()
        host.invoke("hostile.write", {"paths": [str(exe)]})
        assert exe.read_bytes() == before
        # ...and when its code changes anyway (same descriptor), the approval is void
        exe.write_bytes(before.replace(b"main(default, handle)", b"""
try:
    Path(HERE.parent.parent.parent / "evil-ran").write_text("yes")
except OSError:
    pass
main(default, handle)""").replace(b"from _proto import", b"from _proto import HERE,"))
        with pytest.raises(mnb.ApprovalRequired) as err:
            host.invoke("other.paid", {})
        assert "code" in str(err.value) and "changed" in str(err.value)
        assert not (world.tmp / "evil-ran").exists()  # nothing ran as approved


# -- 2. a per-invocation staged view -------------------------------------------------------------


def test_the_staged_root_holds_exactly_the_handed_artifacts_read_only(
    host: mnb.ModuleHost, world: World
) -> None:
    made = host.invoke("other.make", {"root": "scratch", "files": [
        {"name": "mine.png", "content": "mine"}, {"name": "theirs.png", "content": "theirs"}]})
    mine, theirs = (host.stage(a) for a in made.artifacts)
    listed = host.invoke("hostile.listdir", {"paths": ["root:staged"]}, staged=[mine])
    assert _attempts(listed)["root:staged"] == {"ok": True, "value": [mine.path]}
    inv = host.invoke("hostile.write", {"paths": [f"root:staged/{mine.path}"]}, staged=[mine])
    assert not _attempts(inv)[f"root:staged/{mine.path}"]["ok"]
    assert mine.file.read_text() == "mine" and theirs.file.read_text() == "theirs"
    host.store.verify(mine)


# -- 3/4. enforcement report, and where the mechanisms are missing --------------------------------


def test_without_any_mechanism_required_refuses_and_nothing_runs(world: World) -> None:
    with world.host(sandbox_mechanisms=()) as host:
        report = host.sandbox
        assert report.mechanism is None and set(report.missing) == set(report.guarantees)
        with pytest.raises(mnb.SandboxUnavailable) as err:
            host.invoke("hostile.write", {"paths": ["root:out/ran.txt"]})
        assert err.value.code == "sandbox_unavailable"
        assert set(err.value.missing) == set(report.guarantees)
        assert "bubblewrap" in str(err.value) and "best-effort" in str(err.value)
        with pytest.raises(mnb.SandboxUnavailable):
            host.describe("hostile")
        with pytest.raises(mnb.SandboxUnavailable):
            host.approve("other.paid")
        (info,) = [m for m in host.modules() if m.id == "hostile"]
        assert not info.ok and info.errors[0].path == "sandbox"
        assert host.audit()["outcome"].iloc[-1] == "sandbox_unavailable"
    assert not (world.out / "ran.txt").exists()


def test_without_any_mechanism_best_effort_runs_unconfined_with_a_warning(world: World) -> None:
    with world.host(sandbox="best-effort", sandbox_mechanisms=()) as host:
        with pytest.warns(mnb.SandboxWarning, match="process_tree") as seen:
            inv = host.invoke("hostile.write", {"paths": [str(world.src / "input.txt")]})
        assert inv.confinement.startswith("none")
        # it said "only partly confined" beside a confinement of "none"
        assert str(seen[0].message).startswith("modules run unconfined: ")
        assert any("sandbox (best-effort)" in w for w in inv.warnings)
        assert host.audit()["confinement"].iloc[-1] == inv.confinement
    # honestly unconfined: the same attack that fails in the sandbox gets through
    assert (world.src / "input.txt").read_text() == "source datapwned"


def test_off_runs_unconfined_without_a_warning(world: World) -> None:
    with world.host(sandbox="off") as host:
        assert host.sandbox.mode == "off" and host.sandbox.confinement == "none (sandbox off)"
        inv = host.invoke("hostile.read", {"paths": [str(world.notebook / "analysis.ipynb")]})
        assert _attempts(inv)[str(world.notebook / "analysis.ipynb")]["value"] == SECRET


def test_without_bwrap_landlock_confines_but_required_refuses_for_the_process_tree(
    world: World,
) -> None:
    with world.host(sandbox_mechanisms=["landlock"]) as host:
        report = host.sandbox
        assert report.mechanism == "landlock"
        assert report.missing == ["process_tree", "kernel_objects"]  # seccomp disabled too
        assert "disabled by policy" in report.mechanisms["bwrap"]
        with pytest.raises(mnb.SandboxUnavailable, match="process_tree"):
            host.invoke("hostile.read", {"paths": []})


def test_landlock_alone_still_blocks_files_network_and_proc_in_best_effort(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_LATE_SECRET", SECRET)
    listener = _Listener()
    try:
        with world.host(sandbox="best-effort", sandbox_mechanisms=["landlock"]) as host:
            with pytest.warns(mnb.SandboxWarning, match="process_tree") as seen:
                inv = host.invoke("hostile.write", {"paths": [
                    str(world.src / "input.txt"), str(world.home / "modules/other/module"),
                    "root:out/fine.txt"]})
            assert inv.confinement.startswith("landlock")
            assert str(seen[0].message).startswith("modules run only partly confined: ")
            assert [a["ok"] for a in _attempts(inv).values()] == [False, False, True]
            read = host.invoke("hostile.read", {"paths": [str(world.notebook / "analysis.ipynb")]})
            assert not any(a["ok"] for a in _attempts(read).values())
            spy = host.invoke("hostile.spy", {"pid": os.getpid()})
            assert not _attempts(spy)["environ"]["ok"] and not _attempts(spy)["mem"]["ok"]
            assert SECRET not in json.dumps(spy.result)
            net = host.invoke("hostile.connect", {"port": listener.port})
            assert not _attempts(net)["ok"]
    finally:
        listener.close()
    assert listener.received == []
    assert (world.src / "input.txt").read_text() == "source data"


@pytest.mark.parametrize("mechanisms", [["landlock", "seccomp"], ["seccomp"]])
def test_without_bwrap_the_socket_filter_still_keeps_it_offline(
    world: World, mechanisms: list[str]
) -> None:
    """Where bubblewrap cannot run, the child loads the same filter itself (after Landlock
    when there is Landlock): every way out tried by the hostile module stays shut."""
    listener = _Listener()
    inbox = _Inbox(world.out)
    try:
        with world.host(sandbox="best-effort", sandbox_mechanisms=mechanisms) as host:
            assert host.sandbox.guarantees["network"] == "seccomp (no socket can be opened)"
            assert "seccomp: no sockets" in host.sandbox.confinement
            with pytest.warns(mnb.SandboxWarning, match="process_tree"):
                tcp = _attempts(host.invoke("hostile.connect", {"port": listener.port}))
            tried = _attempts(host.invoke("hostile.sockets", inbox.attack()))
    finally:
        listener.close()
        inbox.close()
    assert not tcp["ok"] and not any(t["ok"] for t in tried.values()), (tcp, tried)
    assert listener.received == []
    # before: the abstract datagram socket got the pair's three sends from a module without
    # a grant (its filter refused ``socket`` only), and the squatting pair received the
    # kernel-side client's datagrams (with a grant too: ``bind`` went unchecked)
    assert all(got == [] for got in inbox.received.values()), inbox.received
    assert inbox.squatted == []


def test_the_widgets_show_the_confinement(host: mnb.ModuleHost, world: World) -> None:
    from murmur_nb.widgets import InvocationView, ModuleBrowser

    browser = ModuleBrowser(host)
    assert f"sandbox: {host.sandbox.mechanism}" in browser.summary.value
    inv = host.invoke("hostile.read", {"paths": []})
    assert f"confinement: {inv.confinement}" in InvocationView(inv).details.value
    with world.host(sandbox="best-effort", sandbox_mechanisms=()) as weak, pytest.warns(
        mnb.SandboxWarning
    ):
        assert "missing: filesystem" in ModuleBrowser(weak).summary.value


def test_a_home_reached_through_a_symlink_still_runs_confined(world: World) -> None:
    link = world.tmp / "home-link"
    link.symlink_to(world.home)
    policy = world.policy()
    with mnb.ModuleHost(home=link, policy=policy, artifact_store=world.store) as host:
        inv = host.invoke("hostile.read", {"paths": ["root:src/input.txt", "self:_proto.py"]})
        assert all(a["ok"] for a in _attempts(inv).values()), inv.result
        assert inv.confinement.startswith(host.sandbox.mechanism or "-")


def test_a_bwrap_that_cannot_create_namespaces_is_reported_and_not_used(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container forbidding user namespaces, played by a ``bwrap`` that fails like one.

    The probe is cached per process (an internal), so the test clears it before and after.
    """
    from murmur_nb._sandbox import sandbox  # private: the per-process probe cache

    fake = world.tmp / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ.get('PATH', '')}")
    sandbox._probe.cache_clear()
    try:
        with world.host() as host:  # Landlock, seccomp and the subreaper hold everything
            report = host.sandbox
            assert report.mechanism == "landlock" and report.missing == []
            assert report.guarantees["process_tree"].startswith("subreaper")
            assert not report.mechanisms["bwrap"].startswith("used")
            assert _attempts(host.invoke("hostile.read", {"paths": ["root:src/input.txt"]}))
        # without the subreaper nothing holds the process tree: refused, with what to do
        with world.host(sandbox_mechanisms=["bwrap", "landlock", "seccomp"]) as host, \
                pytest.raises(mnb.SandboxUnavailable, match="process_tree") as refused:
            host.invoke("hostile.read", {"paths": []})
        assert "subreaper" in str(refused.value) and "reaper" in str(refused.value)
    finally:
        sandbox._probe.cache_clear()


def test_a_launch_whose_argv_cannot_be_built_closes_the_filter_descriptor(
    tmp_path: Path,
) -> None:
    """``launch`` writes the seccomp program into a pipe before it builds bwrap's argv; when
    the argv cannot be built (a working folder whose parent's name holds a NUL byte, which
    no path call accepts) the pipe is closed, not left open in the kernel process. Internal:
    no public call reaches ``launch`` with such a folder."""
    from murmur_nb._sandbox import MECHANISMS, launch, sandbox_report  # private: see above

    report = sandbox_report("best-effort", MECHANISMS)
    if not report.makes_cwd or report._seccomp is None:
        pytest.skip("needs bwrap with a seccomp filter")
    cwd = Path(f"{tmp_path}\0elsewhere") / "run"
    before = sorted(Path("/proc/self/fd").iterdir())
    for _ in range(5):
        with pytest.raises(ValueError, match="null"):
            launch(report, ["true"], cwd=cwd, module_dir=tmp_path, roots={}, private_cwd=True)
    assert sorted(Path("/proc/self/fd").iterdir()) == before
