"""Two batches on one journal at once: two kernels running one notebook, or one cell run
again while its background batch runs.

Before, nothing stopped the second batch: it read the journal, found the rows the first
had not finished yet, and ran them too, so every such row's module ran twice (two kernels
of six one-second rows: rows 0 to 3 ran twice) and the journal's ``spent`` kept one of the
two costs. Now a batch holds its journal's rows of its capability for its whole run (an
``flock`` beside the journal), and a second one is refused at once, naming the journal, the
process holding it and what to do; a killed holder lets go with its process, and the next
batch resumes from what the journal kept.

The kernels here are real processes running ``map`` on one journal file; what ran is
counted from the files the ``batchy`` module drops into its ``log`` root, one per real run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import murmur_nb as mnb

FACET_MODULES = [("batchy", "batchy"), ("costs", "costs")]

#: a kernel: runs ``batchy.work`` over the inputs given as JSON on ``journal``, then says
#: what its batch did (or the refusal it got)
_KERNEL = """
import json, sys
import murmur_nb as mnb
home, log, journal, inputs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
host = mnb.ModuleHost(home=home, policy=mnb.Policy(roots={"log": log}))
try:
    batch = host.map("batchy.work", inputs, journal=journal, progress=False, concurrency=2)
except mnb.ModuleHostError as exc:
    print(json.dumps({"code": exc.code, "message": str(exc)}))
else:
    p = batch.progress
    print(json.dumps({"ok": p.ok, "from_journal": p.from_journal, "run_here": p.run_here,
                      "cost": p.cost}))
"""

#: a kernel that forks a child (as ``multiprocessing`` does) while its background batch runs,
#: says the child's pid, and waits for the batch
_FORKING_KERNEL = """
import os, sys, time
import murmur_nb as mnb
home, log, journal = sys.argv[1:4]
host = mnb.ModuleHost(home=home, policy=mnb.Policy(roots={"log": log}))
batch = host.map("batchy.work", [{"n": n, "sleep": 60} for n in range(2)], journal=journal,
                 progress=False, concurrency=2, background=True)
child = os.fork()
if child == 0:  # off the kernel's pipes, so the test sees the kernel's end
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
batch.wait()
"""

#: how long a kernel may take, start to end, before the test gives up on it (no hang)
KERNEL_S = 40.0


@pytest.fixture
def host(facet_home: Path, log_root: Path) -> mnb.ModuleHost:
    with mnb.ModuleHost(home=facet_home, policy=mnb.Policy(roots={"log": str(log_root)})) as h:
        yield h


def kernel(home: Path, log_root: Path, journal: Path, inputs: list[dict[str, Any]]
           ) -> subprocess.Popen[str]:  # fmt: skip
    """A process running one ``map`` on ``journal``, as a second notebook kernel would."""
    return subprocess.Popen(
        [sys.executable, "-c", _KERNEL, str(home), str(log_root), str(journal),
         json.dumps(inputs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def said(child: subprocess.Popen[str]) -> dict[str, Any]:
    """What a kernel printed once it ended (killed if it did not end in time)."""
    try:
        out, err = child.communicate(timeout=KERNEL_S)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"a kernel did not end within {KERNEL_S} s (held by the journal?): {err}")
    assert child.returncode == 0, err
    return dict(json.loads(out))


def ran(log_root: Path) -> Counter[int]:
    """How many times the module really ran each ``n`` (its files ``work-<n>-<request id>``)."""
    return Counter(int(p.name.split("-")[1]) for p in log_root.glob("work-*"))


def wait_for_runs(log_root: Path, count: int, child: subprocess.Popen[str]) -> None:
    end = time.monotonic() + KERNEL_S
    while sum(ran(log_root).values()) < count:
        if child.poll() is not None or time.monotonic() > end:
            child.kill()
            pytest.fail(f"the first kernel never ran {count} rows: {child.communicate()}")
        time.sleep(0.02)


def test_a_second_kernel_on_a_running_journal_is_refused_and_no_row_runs_twice(
    facet_home: Path, log_root: Path, tmp_path: Path
) -> None:
    """Two kernels run the same batch on one journal, the second starting while the first's
    rows run: every row runs once in all, the second is refused naming the journal and the
    first's process, and the same batch after the first ended reads every row back."""
    journal = tmp_path / "shared" / "journal.sqlite"
    inputs = [{"n": n, "sleep": 1.0, "cost": 1.0} for n in range(6)]
    first = kernel(facet_home, log_root, journal, inputs)
    try:
        wait_for_runs(log_root, 1, first)
        second = said(kernel(facet_home, log_root, journal, inputs))
        at_once = first.poll() is None  # the second ended while the first still ran
    finally:
        done = said(first)
    assert ran(log_root) == Counter(range(6)), "a row ran twice"
    assert at_once, "the second kernel was not refused while the first ran"
    assert done == {"ok": 6, "from_journal": 0, "run_here": 6, "cost": 6.0}
    assert second["code"] == "journal_busy", second
    message = second["message"]
    assert str(journal) in message and f"pid {first.pid}" in message, message
    assert "nothing was run" in message and "journal=" in message and "again" in message
    # after the first ended: the same batch resumes, every row read back, nothing run again
    assert said(kernel(facet_home, log_root, journal, inputs)) == {
        "ok": 6, "from_journal": 6, "run_here": 0, "cost": 6.0}  # fmt: skip
    assert ran(log_root) == Counter(range(6))
    assert not list(journal.parent.glob("*.lock")), "the lock files are left behind"


def test_a_killed_kernel_does_not_hold_its_journal(
    facet_home: Path, log_root: Path, tmp_path: Path
) -> None:
    """A kernel SIGKILLed mid-batch lets go of the journal with its process: the next batch
    runs at once and resumes from the rows the killed one had journaled."""
    journal = tmp_path / "journal.sqlite"
    quick = [{"n": n} for n in range(2)]
    slow = [{"n": n, "sleep": 60} for n in (2, 3)]
    first = kernel(facet_home, log_root, journal, [*quick, *slow])
    try:
        wait_for_runs(log_root, 4, first)
        time.sleep(0.5)  # rows 0 and 1 committed (within GROUP_S of settling)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=KERNEL_S)
    started = time.monotonic()
    resumed = said(kernel(facet_home, log_root, journal, [*quick, {"n": 2}, {"n": 3}]))
    assert time.monotonic() - started < KERNEL_S / 2
    assert (resumed["from_journal"], resumed["run_here"], resumed["ok"]) == (2, 2, 4), resumed
    assert ran(log_root) == Counter({0: 1, 1: 1, 2: 2, 3: 2})  # 2, 3: killed, then run here


def test_a_child_the_kernel_forked_does_not_hold_its_journal_after_it_died(
    facet_home: Path, log_root: Path, tmp_path: Path
) -> None:
    """A kernel forks (``multiprocessing``'s default) while its batch runs, then is killed:
    the child it leaves running holds nothing, so the next batch runs."""
    journal = tmp_path / "journal.sqlite"
    first = subprocess.Popen(
        [sys.executable, "-c", _FORKING_KERNEL, str(facet_home), str(log_root), str(journal)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    child = 0
    try:
        child = int(first.stdout.readline() or 0) if first.stdout else 0
        wait_for_runs(log_root, 2, first)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=KERNEL_S)
    try:
        assert child, "the kernel did not fork"
        resumed = said(kernel(facet_home, log_root, journal, [{"n": n} for n in range(2)]))
    finally:
        if child:
            os.kill(child, signal.SIGKILL)
    assert resumed.get("ok") == 2, resumed


def test_a_cell_run_again_beside_its_background_batch_is_refused(
    host: mnb.ModuleHost, log_root: Path, tmp_path: Path
) -> None:
    """The same kernel: a background batch runs, and the cell that started it runs again
    (foreground here): refused at once, saying the batch is this process's own; once the
    background one ended, the cell resumes from it."""
    journal = tmp_path / "journal.sqlite"
    inputs = [{"n": n, "sleep": 0.5} for n in range(4)]
    background = host.map("batchy.work", inputs, journal=journal, progress=False,
                          concurrency=2, background=True)  # fmt: skip
    try:
        started = time.monotonic()
        with pytest.raises(mnb.ModuleHostError) as err:
            host.map("batchy.work", inputs, journal=journal, progress=False, concurrency=2)
        assert time.monotonic() - started < 5.0
        assert not background.done
        with pytest.raises(mnb.ModuleHostError):  # retry_failed too: it runs rows again
            background.retry_failed()
    finally:
        background.wait(timeout=KERNEL_S)
    assert background.done and background.progress.ok == 4
    assert err.value.code == "journal_busy"
    assert f"pid {os.getpid()}, this process" in err.value.message, err.value.message
    again = host.map("batchy.work", inputs, journal=journal, progress=False)
    assert (again.progress.from_journal, again.progress.run_here) == (4, 0)
    assert ran(log_root) == Counter(range(4))


def test_batches_of_other_capabilities_share_a_journal_at_once(
    host: mnb.ModuleHost, log_root: Path, tmp_path: Path
) -> None:
    """The hold is per capability (and module, and run options) and inputs: a batch of
    another capability, of the same with other options, or over other inputs, on the same
    journal (the default one is every batch's) runs beside the first."""
    journal = tmp_path / "journal.sqlite"
    inputs = [{"n": n, "sleep": 1.0} for n in range(4)]
    background = host.map("batchy.work", inputs, journal=journal, progress=False,
                          concurrency=2, background=True)  # fmt: skip
    try:
        other = host.map("costs.spend", [{"n": 1, "cost": 1.0}], journal=journal,
                         progress=False)  # fmt: skip
        tagged = host.map("batchy.work", [{"n": n} for n in range(4)], journal=journal,
                          progress=False, extra={"tag": "B"})  # fmt: skip
        elsewhere = host.map("batchy.work", [{"n": n, "sleep": 1.0} for n in range(10, 12)],
                             journal=journal, progress=False)  # other inputs  # fmt: skip
        assert not background.done, "the background batch ended too soon to test anything"
    finally:
        background.wait(timeout=KERNEL_S)
    assert other.progress.ok == 1 and tagged.progress.ok == 4 and elsewhere.progress.ok == 2
    assert background.progress.ok == 4


#: the batch's own steps from its hold to its run (their lines are where a Ctrl-C is raised;
#: private: ``_begin`` and ``_run`` are the steps the Ctrl-C lands in)
_STEPS = {f.__code__ for f in (mnb.Batch.start.__func__, mnb.Batch.retry_failed,
                               mnb.Batch._begin, mnb.Batch._run)}  # fmt: skip


def runs_again(host: mnb.ModuleHost, inputs: list[dict[str, Any]], journal: Path,
               where: str) -> None:  # fmt: skip
    """The same batch on ``journal`` is not refused: at once, or within seconds when a
    background run the interrupted start began still runs (it lets go as it ends)."""
    end = time.monotonic() + 10
    while True:
        try:
            host.map("batchy.work", inputs, journal=journal, progress=False)
            return
        except mnb.ModuleHostError as exc:
            if exc.code != "journal_busy" or time.monotonic() > end:
                pytest.fail(f"a Ctrl-C at {where} kept the journal held: {exc.code}")
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["start", "background", "retry_failed"])
def test_a_ctrl_c_at_any_line_of_a_batch_start_lets_go_of_the_journal(
    host: mnb.ModuleHost, log_root: Path, tmp_path: Path, how: str
) -> None:
    """``KeyboardInterrupt`` raised at each line of a batch's start in turn (``map`` in the
    foreground or the background, or ``retry_failed``: their own lines, ``_begin``'s and
    ``_run``'s), as a Ctrl-C landing there; then the same batch again: it runs, never refused
    as ``journal_busy`` by the hold the interrupted start took. Before, a Ctrl-C between
    taking the hold and the block that lets go of it kept the journal held until the kernel
    exited."""
    journal = tmp_path / "journal.sqlite"
    tried = 0
    for point in range(1, 400):
        seen, where = 0, ""

        def tracer(frame: Any, event: str, arg: Any, at: int = point) -> Any:
            nonlocal seen, where
            if event == "call":
                return tracer if frame.f_code in _STEPS else None
            if event == "line":
                seen += 1
                if seen == at:
                    where = f"{frame.f_code.co_name} line {frame.f_lineno}"
                    raise KeyboardInterrupt(where)
            return tracer

        inputs = [{"n": point, **({"fail_every": 1} if how == "retry_failed" else {})}]
        failed = None
        if how == "retry_failed":  # a batch whose one row failed, to retry
            failed = host.map("batchy.work", inputs, journal=journal, progress=False)
            assert failed.progress.failed == 1, failed.progress
        interrupted = False
        sys.settrace(tracer)
        try:
            if failed is not None:
                failed.retry_failed()
            else:
                host.map("batchy.work", inputs, journal=journal, progress=False,
                         background=how == "background")  # fmt: skip
        except (KeyboardInterrupt, mnb.BatchInterrupted):
            interrupted = True
        finally:
            sys.settrace(None)
        if interrupted and failed is not None:  # the batch the user holds is not running
            assert failed.done, (where, failed.progress)
            failed.close()  # and closes (before: waited for good on a run never begun)
        if seen < point:  # ran to its end without reaching this point: every line was tried
            break
        tried += 1
        runs_again(host, inputs, journal, where)
    assert tried > 10, tried
