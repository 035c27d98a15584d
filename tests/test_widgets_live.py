"""Live runs: a module run in the background, cancelled for real, shown while it runs.

The slow module here is a real executable (run in the host's sandbox, in its own pid
namespace) that starts a child, and both append to a heartbeat file in the module's write root
until killed; a Cancel must leave neither beating, and no process of the module's in the
host's process table.
"""

from __future__ import annotations

import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from murmur_nb import InvocationCancelled, ModuleHost, Policy
from murmur_nb.widgets import LiveRun

SLEEPY_MAIN = """
import json, os, sys, time
descriptor = {
    "module": "sleepy", "name": "Sleepy", "version": "1.0.0",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [{"id": "sleepy.nap", "title": "Nap", "request_schema": "nap.request",
                      "result_schema": "nap.result",
                      "effects": {"local": True, "cost_known": True}}],
    "request_schemas": {"nap.request": {"type": "object"}},
    "result_schemas": {"nap.result": {"type": "object"}},
    "permissions": {"filesystem_write": ["out"]},
}
if sys.argv[1:] == ["describe"]:
    print(json.dumps({"protocol": "modproto.v1", "module": "sleepy", "operation": "describe",
                      "request_id": "", "ok": True, "result": descriptor, "warnings": [],
                      "execution": {"local": True}}))
    sys.exit(0)
request = json.load(sys.stdin)
beat = request["roots"]["out"]["path"] + "/beat"
mark = "c" if os.fork() == 0 else "p"  # a child that outlives nothing on its own
while True:
    with open(beat, "a") as f:
        f.write(mark)
    time.sleep(0.05)
"""


#: in every command line of the module's processes (an ``-X`` option: the folder they run
#: from is the host's snapshot, whose path does not hold the home's name)
MARKER = f"sleepy-{uuid.uuid4().hex[:8]}"


def _install(facet_home: Path, module_id: str, main: str) -> None:
    folder = facet_home / "modules" / module_id
    folder.mkdir(parents=True)
    (folder / "main.py").write_text(main)
    launcher = folder / "module"
    launcher.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -I -X {MARKER} "${{0%/*}}/main.py" "$@"\n'
    )
    launcher.chmod(0o755)


@pytest.fixture
def beat(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    return tmp_path / "out" / "beat"


@pytest.fixture
def host(tmp_path: Path, beat: Path) -> Iterator[ModuleHost]:
    home = tmp_path / MARKER
    _install(home, "sleepy", SLEEPY_MAIN)
    policy = Policy(deadline_ms=120_000, roots={"out": str(beat.parent)})
    with ModuleHost(home=home, policy=policy) as h:
        yield h


def _beating(beat: Path, timeout: float = 60.0) -> None:
    """Wait until both the module ('p') and its child ('c') have written their heartbeat."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = beat.read_text() if beat.exists() else ""
        if "p" in text and "c" in text:
            return
        time.sleep(0.05)
    raise AssertionError(f"the module and its child never both beat in {beat}")


def _stopped(beat: Path, settle: float = 0.5) -> bool:
    """The heartbeat file stops growing once nothing of the module is alive."""
    time.sleep(settle)
    before = beat.stat().st_size
    time.sleep(1.0)  # 20 beats' worth
    return beat.stat().st_size == before


def _module_processes(marker: str) -> list[int]:
    """Host pids whose command line names ``marker`` (pid namespaces do not hide them)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or ())
        if marker in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc.info["pid"])
    return found


def test_cancel_kills_the_running_modules_process_tree(host: ModuleHost, beat: Path) -> None:
    run = LiveRun(host, "sleepy.nap", {})
    _beating(beat)
    assert run.running and run.state == "running"
    assert len(_module_processes(MARKER)) >= 2  # the module and its child, as the host sees them
    assert run.cancel_button.layout.display is None  # Cancel is shown while it runs
    assert 'data-state="running"' in run.status.value
    clicked = time.monotonic()
    run.cancel_button.click()
    assert run.wait(30)
    assert time.monotonic() - clicked < 30  # far from the 120 s deadline
    assert run.state == "cancelled"
    assert isinstance(run.error, InvocationCancelled) and run.error.code == "cancelled"
    assert _stopped(beat), "the cancelled module or its child still writes"
    assert _module_processes(MARKER) == []
    assert run.cancel_button.layout.display == "none"
    assert "LiveRun sleepy.nap: cancelled" in run.text()
    last = host.audit().iloc[-1]
    assert last["capability"] == "sleepy.nap" and last["outcome"] == "cancelled"


def test_cancel_before_start_means_the_module_never_starts(host: ModuleHost, beat: Path) -> None:
    """Cancel on a run not started yet: it says cancelled at once, start() then launches
    nothing (no heartbeat, no audited call), and whoever waits is told it ended."""
    ended: list[LiveRun] = []
    run = LiveRun(host, "sleepy.nap", {}, start=False, on_done=ended.append)
    assert run.state == "ready"
    run.cancel()
    assert run.state == "cancelled" and ended == [run] and run.wait(0)
    assert "cancelled by you" in run.status.value and "nothing ran" in run.text()
    run.start()
    assert run.wait(5) and run.state == "cancelled" and not run.running and ended == [run]
    time.sleep(1.0)  # time enough for a module to start and beat, had one been started
    assert not beat.exists() and _module_processes(MARKER) == []
    assert len(host.audit()) == 0


def test_invoke_with_a_cancel_event_raises_and_kills_the_tree(host: ModuleHost, beat: Path) -> None:
    cancel = threading.Event()
    outcome: dict[str, BaseException] = {}

    def call() -> None:
        try:
            host.invoke("sleepy.nap", {}, cancel=cancel)
        except BaseException as exc:
            outcome["exc"] = exc

    worker = threading.Thread(target=call)
    worker.start()
    _beating(beat)
    cancel.set()
    worker.join(30)
    assert not worker.is_alive()
    assert isinstance(outcome.get("exc"), InvocationCancelled)
    assert "process tree was killed" in str(outcome["exc"])
    assert _stopped(beat) and _module_processes(MARKER) == []


def test_progress_true_says_exactly_what_to_write_instead(host: ModuleHost, beat: Path) -> None:
    """0.1.0 took ``progress=True``; the host no longer imports widgets, so a flag is refused
    before anything runs, and the message names the view to pass, which really is that view."""
    import murmur_nb

    with pytest.raises(TypeError, match="not a flag") as refused:
        host.invoke("sleepy.nap", {}, progress=True)  # type: ignore[arg-type]
    written = re.search(r"progress=(\S+)", str(refused.value))
    assert written, str(refused.value)
    assert eval(written.group(1), {"murmur_nb": murmur_nb}) == LiveRun.in_cell
    assert not beat.exists()  # the module never started


def test_progress_true_in_a_cell_shows_the_run_and_returns_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An IPython shell publishes the display and its final update, as a kernel would."""
    from IPython.core.interactiveshell import InteractiveShell

    from murmur_nb import prepare_demo_home

    demo = prepare_demo_home(tmp_path / "demo", hooks=False)
    InteractiveShell.instance()
    try:
        with ModuleHost(
            home=demo.facet_home, policy=demo.policy(), artifact_store=demo.artifact_store
        ) as h:
            started = h.invoke(
                "studio.storyboard", {"scenes": ["a", "b"]}, progress=LiveRun.in_cell
            )
            job = {"job": started.result["job"]}
            polled = h.invoke("studio.storyboard_status", job, progress=LiveRun.in_cell)
    finally:
        InteractiveShell.clear_instance()
    assert started.ok and polled.ok
    shown = capsys.readouterr().out  # the shell's display publisher prints text/plain
    assert "LiveRun studio.storyboard: running" in shown
    assert "LiveRun studio.storyboard: ok" in shown
    assert "LiveRun studio.storyboard_status: ok" in shown
    assert "progress: 1 of 2 done" in shown


def test_a_run_in_a_cell_shows_its_result_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: ``host.invoke(..., progress=LiveRun.in_cell)`` as a cell's last line showed
    the result twice (the card's copy, then the returned Invocation as the cell's value).
    Run as real cells of an IPython shell: the card's final state keeps its status only
    when the invocation is the cell's value, and keeps the result when it is assigned."""
    from IPython.core.interactiveshell import InteractiveShell

    from murmur_nb import prepare_demo_home

    demo = prepare_demo_home(tmp_path / "demo", hooks=False)
    shell = InteractiveShell.instance()
    try:
        with ModuleHost(
            home=demo.facet_home, policy=demo.policy(), artifact_store=demo.artifact_store
        ) as h:
            shell.user_ns.update(host=h, LiveRun=LiveRun)
            capsys.readouterr()
            shell.run_cell('host.invoke("docs.report", {}, progress=LiveRun.in_cell)')
            value = capsys.readouterr().out
            shell.run_cell('report = host.invoke("docs.report", {}, progress=LiveRun.in_cell)')
            assigned = capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()
    # the cell's value: Out once, then the card's final state, its status line alone
    _before, out = re.split(r"Out\[\d+\]:", value)
    assert out.count("Invocation docs.report: ok") == 1, value
    result, final = out.split("LiveRun docs.report: ok")
    assert final.strip() == "" and "Invocation docs.report" in result, value
    # assigned: no Out, and the card's last state keeps the result
    assert "Out[" not in assigned
    last = assigned.split("LiveRun docs.report: ok")[-1]
    assert "InvocationView docs.report: ok" in last and "112 rows" in last, assigned
