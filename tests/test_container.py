"""Modules confined without namespaces, as in a default Docker container (issue 37).

Where user namespaces are refused, Landlock and seccomp confine a module and the subreaper
helper (``reaper.c``) holds its process tree: every orphan, however it forked or ``setsid``'d,
is re-parented to the helper, which kills the whole tree when the call ends, and
``RLIMIT_NPROC`` stops a fork bomb. These tests force that path here with
``sandbox_mechanisms`` (Landlock, seccomp, reaper: no bwrap) and really attack it; the last
ones run this file and the sandbox suites again inside the default-Docker harness
(:mod:`_container`), as root and as an unprivileged user, with the *default* policy.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _modules import alive, install
from _users import RERUN_TIMEOUT, cache_dir, rerun
from test_sandbox import assert_daemons_gone, start_daemons

import murmur_nb as mnb

WITHOUT_NAMESPACES = ["landlock", "seccomp", "reaper"]


def _host(tmp_path: Path, **policy: Any) -> mnb.ModuleHost:
    home = tmp_path / "home"
    if not (home / "modules" / "hostile").exists():
        install(home, "hostile", "hostile")
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    base: dict[str, Any] = {"roots": {"out": out}, "deadline_ms": 20_000,
                            "sandbox_mechanisms": WITHOUT_NAMESPACES}
    return mnb.ModuleHost(home=home, policy=mnb.Policy(**(base | policy)))


def test_without_namespaces_every_guarantee_holds_with_the_subreaper(tmp_path: Path) -> None:
    with _host(tmp_path) as host:
        report = host.sandbox
        assert report.mechanism == "landlock" and report.complete, str(report)
        assert report.guarantees["process_tree"] is not None
        assert report.guarantees["process_tree"].startswith("subreaper")
        assert report.mechanisms["reaper"].startswith("used")
        inv = host.invoke("hostile.listdir", {"paths": []})
        assert inv.confinement.startswith("landlock") and "subreaper" in inv.confinement


@pytest.mark.parametrize("then", ["answer", "hang", "flood"])
def test_no_daemon_outlives_the_call_without_namespaces(tmp_path: Path, then: str) -> None:
    """Five double-forked, ``setsid`` daemons beat into the rw root; after ``invoke`` ends
    (normally, at the deadline, past the output bound) none beats and none is alive."""
    with _host(tmp_path) as host:
        start_daemons(host, then)
    assert_daemons_gone(tmp_path / "out")


def test_a_fork_bomb_stops_at_the_process_limit_and_nothing_of_it_stays(tmp_path: Path) -> None:
    with _host(tmp_path) as host:
        inv = host.invoke("hostile.forkbomb", {"limit": 3000})
    assert inv.ok, inv.error
    made, refused = inv.result["made"], inv.result["refused"]
    # RLIMIT_NPROC said no: 512 more than the uid ran at the start (other calls of the same
    # uid, here or in a parallel test run, move that start, never past the bomb's 3000)
    assert refused == "EAGAIN" and made < 1024, (made, refused)
    time.sleep(0.2)
    assert [pid for pid in inv.result["pids"] if alive(pid)] == []


def test_two_calls_at_once_cannot_signal_each_other(tmp_path: Path) -> None:
    """On a root host both run as the same sandbox uid: each call's own Landlock domain is
    what keeps one from signalling the other (its signal scope), and neither has ``/proc``."""
    out = tmp_path / "out"
    with _host(tmp_path) as host:
        holder = threading.Thread(target=host.invoke, args=("hostile.hold", {"role": "a"}))
        holder.start()
        try:
            end = time.monotonic() + 15
            while not (out / "a.pid").exists() and time.monotonic() < end:
                time.sleep(0.02)
            pid = int((out / "a.pid").read_text())
            tried = host.invoke("hostile.signal", {"pid": pid}).result
            spied = host.invoke("hostile.spy", {"pid": pid}).result
            assert alive(pid)  # the signal did not reach it
        finally:
            (out / "a.stop").write_text("")
            holder.join()
    assert not tried["ok"] and "Operation not permitted" in tried["error"], tried
    assert not spied["environ"]["ok"] and not spied["visible_pids"]["ok"], spied


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="a nested run: its root parent starts it")
@pytest.mark.skipif(os.environ.get("MNB_IN_CONTAINER") == "1", reason="a nested run")
@pytest.mark.parametrize("user", [False, True], ids=["root", "user"])
@RERUN_TIMEOUT
def test_the_sandbox_suites_hold_in_a_default_docker_container(user: bool) -> None:
    """The sandbox suites and this file (its demo modules included), with the default
    policy, in the harness that behaves like a default Docker container (no namespaces,
    Docker's capabilities and seccomp profile), as root and as an unprivileged user."""
    files = ["tests/test_sandbox.py", "tests/test_root_host.py", "tests/test_snapshot.py",
             "tests/test_batch.py", "tests/test_container.py", "tests/test_hardening.py",
             "tests/test_access.py", "tests/test_warm.py", "tests/test_scratch.py",
             "tests/test_invoke.py", "tests/test_zygote.py"]
    # the slow tests of these files are about what the files test, not about the sandbox's
    # mechanism: they run in the suite itself
    done, tail = rerun(files, user=user, docker=True, marks="not slow",
                       deselect="not unprivileged and not default_docker_container")
    assert done == 0, tail
    # a user run skips the one test of root's device folder (made with mknod)
    assert " passed" in tail and not re.search(r"\d+ failed", tail), tail


def test_the_demo_modules_run_under_a_required_sandbox(tmp_path: Path) -> None:
    """The demo home's modules, every guarantee required (the default mode): here, and in
    the default-Docker harness below, no call is refused and none warns (a warning would
    fail this test: warnings are errors here)."""
    home = mnb.prepare_demo_home(tmp_path / "demo")
    with home.host(policy=home.policy(sandbox="required")) as host:
        assert host.sandbox.complete, str(host.sandbox)
        for capability, given in (("gallery.poster", {"title": "hello"}),
                                  ("gallery.diagram", {}), ("studio.tone", {}),
                                  ("docs.report", {})):
            inv = host.invoke(capability, given)
            assert inv.ok and inv.warnings == [], (capability, inv.error, inv.warnings)
            assert inv.artifacts, capability


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="a nested run: its root parent starts it")
@pytest.mark.skipif(os.environ.get("MNB_IN_CONTAINER") == "1", reason="a nested run")
@pytest.mark.timeout(1260)  # past the conversion's own 1200 s
def test_the_tour_runs_headless_in_a_default_docker_container(tmp_path: Path) -> None:
    """``scripts/demo --headless``'s conversion of the tour, inside the default-Docker
    harness: every cell runs (a failing cell fails the conversion), no cell warns that the
    sandbox is incomplete, and the artifacts are rendered."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "LANG": "C.UTF-8", "MURMUR_NB_DEMO_HOME": str(tmp_path / "demo"),
           "MURMUR_NB_CACHE": str(cache_dir()),  # root's: the demo hook built once
           "MNB_IN_CONTAINER": "1"}
    done = subprocess.run(
        [sys.executable, str(repo / "tests" / "_container.py"), "--", sys.executable, "-m",
         "jupyter", "nbconvert", "--to", "html", "--execute", "--config",
         "scripts/report_config.py", "--ExecutePreprocessor.timeout=900",
         "--ExecutePreprocessor.kernel_name=python3", "--output-dir", str(tmp_path),
         "--output", "tour", "notebooks/01-tour.ipynb"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=1200, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = (tmp_path / "tour.html").read_text()
    assert "SandboxWarning" not in report and "sandbox_unavailable" not in report
    assert report.count('class="murmur-artifact"') >= 5
    assert "subreaper" in report  # the tour prints how its modules were confined
