"""Ctrl-C in the middle of a batch, for real: SIGINT to a Python process running ``map``.

The batch runs in a child process of its own session, as in a terminal, and the test sends
SIGINT to that whole foreground group (what Ctrl-C in a terminal does). The module rows run
sandboxed (tests/modules/batchy.py), each sleeping, so some are running at the interrupt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _modules import descendants, journaled, still_runs
from jupyter_client.manager import start_new_kernel

FACET_MODULES = [("batchy", "batchy")]
ROWS, SLEEP = 12, 1.5

_SCRIPT = """
import json, sys
import murmur_nb as mnb
policy = mnb.Policy(roots={{"log": {log!r}}})
rows = [{{"n": i, "sleep": {sleep!r}}} for i in range({rows})]
with mnb.ModuleHost(home={home!r}, policy=policy) as host:
    try:
        b = host.map("batchy.work", rows, concurrency=2, progress=False)
    except KeyboardInterrupt:
        outcomes = host.audit()["outcome"].value_counts().to_dict()
        print(json.dumps({{"interrupted": True, "outcomes": outcomes}}), flush=True)
        sys.stdin.readline()  # alive while the test looks for the rows' processes
    else:
        p = b.progress
        print(json.dumps({{"interrupted": False, "from_journal": p.from_journal, "ok": p.ok}}),
              flush=True)
"""


def _started(log: Path) -> set[str]:
    """The rows whose module process started (each writes ``work-<n>-<request id>`` first)."""
    return {p.name for p in log.glob("work-*")}


def _run(code: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, **kwargs,
    )  # fmt: skip


def _until(check: object, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not check() and time.monotonic() < end:  # type: ignore[operator]
        time.sleep(0.05)


@pytest.mark.slow
def test_ctrl_c_keeps_finished_rows_ends_running_ones_and_resumes(
    facet_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    log.mkdir()
    log.chmod(0o777)
    journal = facet_home / "batches" / "journal.sqlite"
    code = _SCRIPT.format(log=str(log), home=str(facet_home), rows=ROWS, sleep=SLEEP)
    child = _run(code, start_new_session=True)  # its own foreground group, as in a terminal
    try:
        _interrupt_and_check(child, log, journal)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    # run again: the journaled rows are skipped, the others (the cancelled ones too) run
    started, kept = _started(log), journaled(journal, "ok")
    again = _run(code)
    out, _ = again.communicate(timeout=300)
    result = json.loads(out)
    assert result == {"interrupted": False, "from_journal": kept, "ok": ROWS}
    assert len(_started(log)) == len(started) + ROWS - kept


def _interrupt_and_check(child: subprocess.Popen[str], log: Path, journal: Path) -> None:
    # mid-batch: two rows finished and journaled, two more running
    _until(lambda: journaled(journal, "ok") >= 2 and len(_started(log)) >= 4, 120)
    running = descendants(child.pid)
    assert running, "no module process was running below the batch"
    os.killpg(child.pid, signal.SIGINT)  # Ctrl-C
    assert child.stdout is not None
    report = json.loads(child.stdout.readline())
    assert report["interrupted"]

    # the rows that were running were ended as invoke ends them: their processes are gone
    assert not [p for p in running if still_runs(p)]
    assert not descendants(child.pid)
    kept, started = journaled(journal, "ok"), _started(log)
    cancelled = report["outcomes"].get("cancelled", 0)
    assert report["outcomes"].get("ok", 0) == kept >= 2
    assert 1 <= cancelled <= 2 and len(started) == kept + cancelled
    time.sleep(2 * SLEEP)  # no new row starts after the interrupt
    assert _started(log) == started and journaled(journal, "ok") == kept
    child.communicate("\n", timeout=60)
    assert child.returncode == 0


_BACKGROUND = """
import sys
import murmur_nb as mnb
policy = mnb.Policy(roots={{"log": {log!r}}})
rows = [{{"n": i, "sleep": {sleep!r}}} for i in range({rows})]
host = mnb.ModuleHost(home={home!r}, policy=policy)
batch = host.map("batchy.work", rows, concurrency=2, progress=False, background=True)
sys.stdin.readline()  # then the script ends, the batch still running
"""


@pytest.mark.slow
def test_exiting_with_a_background_batch_running_ends_it_cleanly_and_resumes(
    facet_home: Path, tmp_path: Path
) -> None:
    """A script (or a kernel shutting down) that exits while ``map(background=True)`` runs:
    the exit cancels the batch as Cancel would. Its running module processes end, finished
    rows stay journaled, nothing more starts, nothing is printed, and the batch resumes."""
    log = tmp_path / "log"
    log.mkdir()
    log.chmod(0o777)
    journal = facet_home / "batches" / "journal.sqlite"
    fmt = {"log": str(log), "home": str(facet_home), "rows": ROWS, "sleep": SLEEP}
    child = _run(_BACKGROUND.format(**fmt), stderr=subprocess.PIPE)
    try:
        _until(lambda: journaled(journal, "ok") >= 2 and len(_started(log)) >= 4, 120)
        running = descendants(child.pid)
        assert running, "no module process was running below the batch"
        _, err = child.communicate("\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert err == "", err  # no "cannot schedule new futures after interpreter shutdown"
    assert not [p for p in running if still_runs(p)]  # the rows running at exit were ended
    started, kept = _started(log), journaled(journal, "ok")
    assert kept >= 2 and len(started) <= kept + 2
    time.sleep(2 * SLEEP)
    assert _started(log) == started  # nothing started after the exit
    again = _run(_SCRIPT.format(**fmt))
    out, _ = again.communicate(timeout=300)
    assert json.loads(out) == {"interrupted": False, "from_journal": kept, "ok": ROWS}


_WAITING = """
import murmur_nb as mnb
policy = mnb.Policy(roots={{"log": {log!r}}})
with mnb.ModuleHost(home={home!r}, policy=policy) as host:
    rows = [{{"n": i, "sleep": 0.5}} for i in range(8)]
    batch = host.map("batchy.work", rows, concurrency=2, progress=False, background=True)
    print("WAITING", flush=True)
    try:
        batch.wait()
    except KeyboardInterrupt:
        print("INTERRUPTED", batch.progress.state, flush=True)
    batch.wait()
    print("AFTER", batch.progress.state, batch.progress.ok, flush=True)
"""


@pytest.mark.slow
def test_ctrl_c_in_wait_stops_waiting_and_a_later_wait_still_waits(
    facet_home: Path, tmp_path: Path
) -> None:
    """Ctrl-C while waiting for a background batch stops the wait, not the batch; the next
    ``wait()`` waits for it to settle (Python 3.11's ``Thread.join`` would return at once)."""
    log = tmp_path / "log"
    log.mkdir()
    log.chmod(0o777)
    child = _run(_WAITING.format(log=str(log), home=str(facet_home)))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "WAITING"
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGINT)
        assert child.stdout.readline().split() == ["INTERRUPTED", "running"]
        assert child.stdout.readline().split() == ["AFTER", "finished", "8"]
        assert len(_started(log)) == 8
        child.communicate(timeout=60)
        assert child.returncode == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


_IN_KERNEL = """
import murmur_nb as mnb
policy = mnb.Policy(roots={{"log": {log!r}}})
host = mnb.ModuleHost(home={home!r}, policy=policy)
rows = [{{"n": i, "sleep": {sleep!r}}} for i in range({rows})]
batch = host.map("batchy.work", rows, concurrency=2)
"""


def _cell(kc: Any, code: str, timeout: float = 300) -> list[dict[str, Any]]:
    """Run ``code`` in the kernel; every iopub message it caused, until the kernel is idle."""
    msg_id = kc.execute(code)
    return _messages(kc, msg_id, timeout)


def _messages(kc: Any, msg_id: str, timeout: float) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        msg = kc.get_iopub_msg(timeout=max(0.1, end - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen
    raise AssertionError(f"the cell did not end in {timeout} s: {seen[-3:]}")


@pytest.mark.slow
def test_ctrl_c_in_a_kernel_shows_a_bar_then_one_line_saying_how_to_resume(
    facet_home: Path, tmp_path: Path
) -> None:
    """A foreground ``map`` in a real Jupyter kernel draws a notebook bar (an ipywidgets
    progress model) with the default ``progress="auto"``, and interrupting the kernel shows
    one line (what stopped, where the rows are kept, how to resume), no frames of host.py,
    batch.py or threading.py. Running the cell again resumes from the journal."""
    log = tmp_path / "log"
    log.mkdir()
    log.chmod(0o777)
    journal = facet_home / "batches" / "journal.sqlite"
    code = _IN_KERNEL.format(log=str(log), home=str(facet_home), rows=ROWS, sleep=SLEEP)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        msg_id = kc.execute(code)
        _until(lambda: journaled(journal, "ok") >= 2 and len(_started(log)) >= 4, 120)
        km.interrupt_kernel()
        seen = _messages(kc, msg_id, 120)
        models = {m["content"]["data"]["state"].get("_model_name") for m in seen
                  if m["msg_type"] == "comm_open"}  # fmt: skip
        assert "FloatProgressModel" in models, models  # the notebook bar
        (error,) = [m["content"] for m in seen if m["msg_type"] == "error"]
        assert error["ename"] == "BatchInterrupted"
        (line,) = error["traceback"]
        assert line.startswith("BatchInterrupted: map of batchy.work interrupted (Ctrl-C)")
        assert str(journal) in line and "run the same map() again to resume" in line
        for frame in ("host.py", "batch.py", "threading.py", "Traceback"):
            assert frame not in line
        kept = journaled(journal, "ok")
        assert f"{kept} of {ROWS} rows finished ({kept} ok" in line
        # resume, as the line says: the kept rows are not run again
        started = _started(log)
        seen = _cell(kc, code + "print(batch.progress.from_journal, batch.progress.ok)\n")
        printed = "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
        assert printed.split() == [str(kept), str(ROWS)]
        assert len(_started(log)) == len(started) + ROWS - kept
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_ctrl_c_in_a_script_ends_with_the_line_and_no_frames_of_the_threads(
    facet_home: Path, tmp_path: Path
) -> None:
    """Outside IPython the interpreter prints the traceback itself: it ends with the same
    line, shows none of the worker threads' frames (the interrupt is raised ``from None``),
    and no bar is drawn into a stderr that is not a terminal."""
    log = tmp_path / "log"
    log.mkdir()
    log.chmod(0o777)
    journal = facet_home / "batches" / "journal.sqlite"
    code = _IN_KERNEL.format(log=str(log), home=str(facet_home), rows=ROWS, sleep=SLEEP)
    child = _run(code, start_new_session=True, stderr=subprocess.PIPE)
    try:
        _until(lambda: journaled(journal, "ok") >= 2 and len(_started(log)) >= 4, 120)
        os.killpg(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    last = err.strip().splitlines()[-1]
    assert last.startswith("murmur_nb._exceptions.BatchInterrupted: map of batchy.work "
                           "interrupted (Ctrl-C)")  # fmt: skip
    assert "run the same map() again to resume" in last
    assert "threading.py" not in err and "local.py" not in err and "map:" not in err
    # the frames shown: the script's line, ModuleHost.map and Batch.start, no inner step
    frames = [line.split(", in ")[-1] for line in err.splitlines() if 'File "' in line]
    assert frames == ["<module>", "map", "start"], err
