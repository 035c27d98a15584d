"""A module cannot reach the kernel's user-namespace code, keeps no capability and holds no
descriptor of the host's (red-team finding 7), and ordinary programs still run.

A hostile module (``tests/modules/kernel.py``) makes a user namespace every way there is
(``unshare``, ``clone``, ``clone3``, ``setns``, the ``unshare`` command) and mounts a tmpfs
over its ``rw`` root before writing a marker: the marker is found in the real root, so no
mount happened. It reads its capability sets and lists its descriptors. Each test runs
under bubblewrap and on the path used where namespaces are refused (Landlock, seccomp and
the subreaper helper), as root here, and again in the default-Docker harness and as an
unprivileged user (``test_container.py``, ``test_root_host.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _modules import install

import murmur_nb as mnb

MECHANISMS = {"bwrap": ["bwrap", "landlock", "seccomp", "reaper"],
              "reaper": ["landlock", "seccomp", "reaper"]}
NO_CAPABILITY = "0000000000000000"

GO_PROGRAM = """package main

import (
\t"fmt"
\t"os"
\t"os/exec"
\t"runtime"
\t"sync"
)

func main() {
\tvar wg sync.WaitGroup
\tfor i := 0; i < 8; i++ {
\t\twg.Add(1)
\t\tgo func() { // each on a thread of its own: clone(CLONE_THREAD|CLONE_VM|...)
\t\t\tdefer wg.Done()
\t\t\truntime.LockOSThread()
\t\t}()
\t}
\twg.Wait()
\tout, err := exec.Command("/bin/sh", "-c", "echo child").Output()
\tif err != nil {
\t\tfmt.Fprintln(os.Stderr, err)
\t\tos.Exit(1)
\t}
\tfmt.Printf("go %s", out)
}
"""
NODE_PROGRAM = """
const { Worker } = require('worker_threads');
const { execFileSync } = require('child_process');
const worker = new Worker("require('worker_threads').parentPort.postMessage(6 * 7)",
                          { eval: true });
worker.on('message', (value) => {
  const out = execFileSync('/bin/sh', ['-c', 'echo child']).toString().trim();
  console.log(`node ${value} ${out}`);
  worker.terminate();
});
"""


@dataclass
class Confined:
    home: Path
    out: Path
    path: str

    @contextlib.contextmanager
    def host(self) -> Iterator[mnb.ModuleHost]:
        """A host confining with this path's mechanisms, every guarantee required."""
        with mnb.ModuleHost(home=self.home, policy=mnb.Policy(
            roots={"out": self.out}, deadline_ms=60_000, sandbox="required",
            sandbox_mechanisms=MECHANISMS[self.path],
        )) as host:
            if self.path == "reaper":
                assert host.sandbox.mechanisms["reaper"].startswith("used"), host.sandbox
            yield host

    def run(self, capability: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
        with self.host() as host:
            inv = host.invoke(f"kernel.{capability}", given or {})
        assert inv.ok, inv.error
        result: dict[str, Any] = inv.result
        return result


@pytest.fixture(params=sorted(MECHANISMS))
def confined(request: pytest.FixtureRequest, tmp_path: Path) -> Confined:
    home = tmp_path / "home"
    install(home, "kernel", "kernel")
    out = tmp_path / "out"
    out.mkdir()
    return Confined(home, out, request.param)


def test_a_module_cannot_make_a_namespace_or_mount_anything(confined: Confined) -> None:
    tried = confined.run("namespaces")
    assert tried["unshare"] == "EPERM", tried
    assert "maps" not in tried  # never root of a namespace of its own
    assert tried["mount"] == "EPERM", tried
    assert tried["marker"] == {"ok": True, "value": "written"}, tried
    assert (confined.out / "marker").read_text() == "after the mount"  # in the real root
    if "clone" in tried:  # x86-64, AArch64
        assert tried["clone"] == "EPERM" and tried["clone3"] == "ENOSYS", tried
    assert tried["setns"] == "EPERM", tried
    if "tool" in tried:
        assert tried["tool"]["status"] != 0, tried
        assert "Operation not permitted" in tried["tool"]["stderr"], tried
    assert not (confined.out / "tool-marker").exists()


def test_a_module_holds_no_capability_in_any_set(confined: Confined) -> None:
    """Inheritable, ambient, permitted and effective are empty for everyone; the bounding set
    is emptied wherever the kernel is root (a user cannot shrink it, and with no_new_privs no
    exec gains what it bounds)."""
    sets = confined.run("capabilities")
    for name in ("effective", "permitted", "inheritable", "ambient"):
        assert sets[name] == 0, (name, sets)
    root = os.geteuid() == 0
    if root:
        assert sets["bounding"] == 0, sets
    status = sets["status"]
    if "error" not in status:  # bubblewrap's /proc: the kernel's own account
        assert status["CapInh"] == status["CapAmb"] == NO_CAPABILITY, status
        assert status["CapPrm"] == status["CapEff"] == NO_CAPABILITY, status
        if root:
            assert status["CapBnd"] == NO_CAPABILITY, status


def test_a_module_sees_no_descriptor_but_its_standard_streams(confined: Confined) -> None:
    """On a root host bubblewrap enters the kernel's user namespace by a descriptor, which
    it leaves open for the module (``user:[...]``) unless the drop helper closes it."""
    seen = confined.run("descriptors")
    assert seen["fstat"] == [0, 1, 2], seen
    if isinstance(seen["proc"], list):
        assert seen["proc"] == [0, 1, 2], seen


def test_a_module_run_in_a_sandbox_made_ahead_sees_no_descriptor_either(
    confined: Confined,
) -> None:
    """The third call of a plan runs in a sandbox bubblewrap made ahead (it waited on two
    more pipes of the host's: its ``--block-fd`` and its seccomp program)."""
    with confined.host() as host:
        seen = [host.invoke("kernel.descriptors", {}) for _ in range(3)]
    for inv in seen:
        assert inv.ok, inv.error
        assert inv.result["fstat"] == [0, 1, 2], inv.result
        if isinstance(inv.result["proc"], list):
            assert inv.result["proc"] == [0, 1, 2], inv.result


@pytest.fixture(scope="module")
def go_program(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """A Go program that starts threads and a process (its runtime's own ``clone`` flags)."""
    go = shutil.which("go")
    if go is None:
        return None
    folder = tmp_path_factory.mktemp("go")
    (folder / "main.go").write_text(GO_PROGRAM)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder),
           "GOCACHE": str(folder / "cache"), "GO111MODULE": "off", "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", str(folder / "threads"), "main.go"], cwd=folder,
                   env=env, check=True, capture_output=True, timeout=300)  # fmt: skip
    return folder / "threads"


def test_threads_processes_go_and_node_still_run(
    confined: Confined, go_program: Path | None
) -> None:
    """Only the namespace flags are refused: Python's threads, ``fork`` and ``subprocess``,
    a Go program's threads and ``os/exec``, and Node's worker threads and child processes
    (``clone3`` refused: the C library falls back to ``clone``) all work."""
    programs: dict[str, list[str]] = {}
    if go_program is not None:
        shutil.copy2(go_program, confined.home / "modules" / "kernel" / "threads")
        programs["go"] = ["{here}/threads"]
    node = shutil.which("node", path="/usr/bin:/bin")
    if node is not None:
        programs["node"] = [node, "-e", NODE_PROGRAM]
    done = confined.run("ordinary", {"programs": programs})
    assert done["threads"] == [True] * 4 and done["fork"] == 7, done
    assert done["subprocess"] == "shell", done
    expected = {"go": "go child", "node": "node 42 child"}
    for name, ran in done["programs"].items():
        assert ran == {"status": 0, "stdout": expected[name], "stderr": ""}, (name, ran)
