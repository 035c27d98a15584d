"""Sandboxes made ahead (``murmur_nb._sandbox.warm``): a plan that ran twice has bubblewrap
set up its next sandbox in advance, and the next call uses it. That is the way where there
is no zygote (``murmur_nb._sandbox.zygote``, which forks each call's sandbox faster than a
waiting bwrap is let go): these tests turn it off (``MURMUR_NB_ZYGOTE=off``, their kernels
inherit it). Nothing of the module may
run before its call: each test's module writes a line into its ``rw`` root as the very first
thing it does, and the tests count those lines, after waiting, after ``close()`` and after
the kernel process holding a waiting sandbox is killed with ``SIGKILL``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from _modules import open_folder, sh_module

import murmur_nb as mnb
from murmur_nb._sandbox.zygote import SWITCH  # private: the zygote has no public switch


@pytest.fixture(autouse=True)
def no_zygote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWITCH, "off")


def install(home: Path, marks: Path, *, sleep: str = "0") -> None:
    """A ``/bin/sh`` module that first appends a line to ``marks`` (its ``rw`` root's file),
    then reads the request, sleeps ``sleep`` seconds and answers."""
    sh_module(home, "warmsh", before=f'echo "started $$" >> {marks}', after=f"/bin/sleep {sleep}")


def lines(marks: Path) -> int:
    return len(marks.read_text().splitlines()) if marks.exists() else 0


def waiting(parent: int, timeout: float = 10.0) -> psutil.Process:
    """The bubblewrap that waits, made ahead, below ``parent``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for child in psutil.Process(parent).children():
            try:
                if child.name() == "bwrap" and "--block-fd" in child.cmdline():
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.02)
    raise AssertionError("no sandbox was made ahead")


def gone(processes: list[psutil.Process], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return open_folder(tmp_path / "out")


@pytest.fixture
def host(tmp_path: Path, out: Path) -> Iterator[mnb.ModuleHost]:
    install(tmp_path / "home", out / "marks")
    with mnb.ModuleHost(home=tmp_path / "home",
                        policy=mnb.Policy(roots={"out": out}, deadline_ms=2000)) as made:
        if "--block-fd" not in _plan_of(made):
            pytest.skip(f"no sandbox is made ahead here ({made.sandbox.confinement})")
        yield made


def _plan_of(host: mnb.ModuleHost) -> str:
    """Whether this host's plans can be held: bubblewrap with a seccomp program."""
    report = host.sandbox
    return "--block-fd" if report.mechanism == "bwrap" and "seccomp" in report.confinement else ""


def test_a_plan_run_twice_has_its_next_sandbox_made_ahead_and_used(
    host: mnb.ModuleHost, out: Path
) -> None:
    for _ in range(2):
        assert host.invoke("warmsh.run", {}).ok
    ahead = waiting(os.getpid())
    assert lines(out / "marks") == 2
    third = host.invoke("warmsh.run", {})
    assert third.ok and third.result == {"n": 1}
    assert gone([ahead])  # the one made ahead ran the third call
    assert waiting(os.getpid()).pid != ahead.pid  # and the next one waits already
    assert lines(out / "marks") == 3


def test_no_module_code_runs_before_its_call_nor_after_close(
    host: mnb.ModuleHost, out: Path
) -> None:
    for _ in range(2):
        assert host.invoke("warmsh.run", {}).ok
    ahead = waiting(os.getpid())
    tree = [ahead, *ahead.children(recursive=True)]
    time.sleep(0.5)
    assert lines(out / "marks") == 2  # made, waiting: nothing of the module started
    host.close()
    assert gone(tree)
    time.sleep(0.3)
    assert lines(out / "marks") == 2


def test_a_batch_makes_no_sandbox_ahead(host: mnb.ModuleHost, out: Path) -> None:
    """Its rows keep the cores busy already: a sandbox made ahead would only move the work."""
    rows = host.map("warmsh.run", [{"i": i} for i in range(6)], progress=False).to_pandas()
    assert rows["ok"].all(), rows
    time.sleep(0.3)
    assert not [c for c in psutil.Process().children() if "--block-fd" in c.cmdline()]
    assert lines(out / "marks") == 6


def kernel(tmp_path: Path, out: Path, then: str) -> subprocess.Popen[str]:
    """A kernel of its own: a host makes two calls of the module (so one sandbox is made
    ahead), prints ``ran`` and the confinement, reads a line, then runs ``then``. Skipped at
    once where no sandbox is made ahead (:func:`_plan_of`)."""
    install(tmp_path / "home", out / "marks")
    script = textwrap.dedent(
        f"""
        import gc, sys, time
        import murmur_nb as mnb
        host = mnb.ModuleHost(home={str(tmp_path / "home")!r},
                              policy=mnb.Policy(roots={{"out": {str(out)!r}}}))
        for _ in range(2):
            assert host.invoke("warmsh.run", {{}}).ok
        report = host.sandbox
        ahead = report.mechanism == "bwrap" and "seccomp" in report.confinement
        print("ran", "ahead" if ahead else "none", report.confinement, flush=True)
        sys.stdin.readline()
        """
    ) + textwrap.dedent(then)
    started = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert started.stdout is not None
    said, plan, confinement = [*started.stdout.readline().strip().split(" ", 2), "", ""][:3]
    assert said == "ran", said
    if plan != "ahead":
        started.kill()
        started.communicate()
        pytest.skip(f"no sandbox is made ahead here ({confinement})")
    return started


def made_ahead_in(started: subprocess.Popen[str]) -> list[psutil.Process]:
    """The sandbox ``started`` made ahead, and what bwrap made of it."""
    ahead = waiting(started.pid)
    return [ahead, *ahead.children(recursive=True)]


def test_a_host_dropped_unclosed_leaves_no_sandbox_waiting(tmp_path: Path, out: Path) -> None:
    """In a kernel of its own: a host dropped unclosed also keeps its root grants (those last
    until every host of the process closes), which must not reach the other tests here."""
    started = kernel(tmp_path, out, """
        del host
        gc.collect()
        print("dropped", flush=True)
        time.sleep(600)
        """)  # fmt: skip
    try:
        tree = made_ahead_in(started)
        assert started.stdin is not None and started.stdout is not None
        started.stdin.write("drop\n")
        started.stdin.flush()
        assert started.stdout.readline().strip() == "dropped"
        assert gone(tree)
    finally:
        started.kill()
        started.communicate()
    time.sleep(0.3)
    assert lines(out / "marks") == 2


@contextlib.contextmanager
def ran_twice(
    tmp_path: Path, out: Path, *, sleep: str
) -> Iterator[tuple[mnb.ModuleHost, psutil.Process]]:
    """A host (deadline 1.5 s) whose module sleeps ``sleep`` after its first line, after two
    calls: the host and the sandbox made ahead for the third (skip when none is)."""
    install(tmp_path / "home", out / "marks", sleep=sleep)
    with mnb.ModuleHost(home=tmp_path / "home",
                        policy=mnb.Policy(roots={"out": out}, deadline_ms=1500)) as host:
        if not _plan_of(host):
            pytest.skip("no sandbox is made ahead here")
        for _ in range(2):
            assert host.invoke("warmsh.run", {}).ok
        yield host, waiting(os.getpid())


def test_the_deadline_counts_from_the_call_not_from_the_sandbox(
    tmp_path: Path, out: Path
) -> None:
    with ran_twice(tmp_path, out, sleep="0.5") as (host, _):
        time.sleep(2.0)  # longer than the deadline: the sandbox waits, the clock does not run
        third = host.invoke("warmsh.run", {})
    assert third.ok, third.error
    assert lines(out / "marks") == 3


def test_a_call_with_another_plan_never_runs_in_the_waiting_sandbox(
    host: mnb.ModuleHost, out: Path, tmp_path: Path
) -> None:
    """The waiting sandbox binds the first root; after the policy moves the root elsewhere,
    the first one is no longer in the call's sandbox: the module's write there fails (it
    would land in the waiting one)."""
    for _ in range(2):
        assert host.invoke("warmsh.run", {}).ok
    waiting(os.getpid())
    moved = open_folder(tmp_path / "moved")
    host.policy = mnb.Policy(roots={"out": moved}, deadline_ms=2000)
    moved_call = host.invoke("warmsh.run", {})
    assert moved_call.ok
    assert lines(out / "marks") == 2
    assert "marks" in moved_call.stderr  # the shell says it could not open it


def test_a_kernel_killed_while_a_sandbox_waits_never_runs_its_module(
    tmp_path: Path, out: Path
) -> None:
    """``kill -9`` of the kernel closes the pipes of the sandbox it made ahead unwritten:
    bubblewrap, let go by the end of file, reads an empty seccomp program, refuses it and
    exits without starting the module."""
    started = kernel(tmp_path, out, "")
    try:
        tree = made_ahead_in(started)
        time.sleep(0.3)  # let it finish making the sandbox: the module is next
        os.kill(started.pid, signal.SIGKILL)
        started.wait(timeout=30)
        assert gone(tree)
    finally:
        started.kill()
        started.communicate()
    time.sleep(0.3)
    assert lines(out / "marks") == 2  # the two calls; never a third start


@pytest.mark.parametrize("how", ["renamed", "removed"])
def test_a_root_replaced_at_its_path_is_the_one_the_next_call_writes_in(
    host: mnb.ModuleHost, out: Path, tmp_path: Path, how: str
) -> None:
    """A notebook clears its output folder between two calls (renamed away, or removed, then
    made again): the root's path is the same, its folder is another. The sandbox made ahead
    bound the old folder; the call must run in one that binds the new folder, so the
    module's line lands there, and the folder moved away is left as it was. (The sandbox
    made ahead wrote into the old folder before.)"""
    for _ in range(2):
        assert host.invoke("warmsh.run", {}).ok
    ahead = waiting(os.getpid())
    time.sleep(0.3)  # let it finish making the sandbox: its mounts are done
    old = tmp_path / "old-out"
    out.rename(old)
    if how == "removed":
        shutil.rmtree(old)
    open_folder(out)
    third = host.invoke("warmsh.run", {})
    assert third.ok, third.error
    assert lines(out / "marks") == 1
    if how == "renamed":
        assert lines(old / "marks") == 2
    assert gone([ahead])  # killed unrun


def test_a_waiting_sandbox_whose_bwrap_was_killed_is_not_let_go(
    tmp_path: Path, out: Path
) -> None:
    """Something kills the waiting bubblewrap (``pkill bwrap``, the OOM killer); its child,
    blocked, lives on. Let go, it started the module with no bubblewrap watching, and the
    call was blamed on the module ("standard output is empty"). Now the call makes its own
    sandbox: the module, made to sleep past the deadline, is killed with it at the deadline
    and never writes the line it writes after its sleep."""
    after = f"$(/bin/cat {out}/sleep 2>/dev/null || echo 0); echo done >> {out}/done"
    with ran_twice(tmp_path, out, sleep=after) as (host, ahead):
        time.sleep(0.3)  # its child is made and waits
        ahead.kill()
        assert gone([ahead])
        (out / "sleep").write_text("3")
        with pytest.raises(mnb.ModuleHostError) as third:
            host.invoke("warmsh.run", {})
        time.sleep(2.5)
    assert lines(out / "marks") == 3
    assert lines(out / "done") == 2  # the third module never woke up
    assert isinstance(third.value, mnb.DeadlineExceeded), third.value


def test_a_waiting_sandbox_holds_few_of_the_kernels_descriptors(
    host: mnb.ModuleHost, out: Path
) -> None:
    """Its two write ends and its three pipes: bwrap has its own copies of the rest (the
    folders it binds among them), so a notebook with several hosts does not run out."""
    assert host.invoke("warmsh.run", {}).ok  # what a first call opens for good
    before = len(list(Path("/proc/self/fd").iterdir()))
    assert host.invoke("warmsh.run", {}).ok  # the second makes one ahead
    waiting(os.getpid())
    time.sleep(0.3)
    assert len(list(Path("/proc/self/fd").iterdir())) - before <= 5
