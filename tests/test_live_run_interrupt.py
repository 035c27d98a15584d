"""Interrupting the kernel during ``invoke(..., progress=LiveRun.in_cell)``, for real: SIGINT
to a Python process whose main thread shows the run while a worker thread runs the call.

The interrupt is the cancel: by the time ``KeyboardInterrupt`` reaches the cell, the module's
process tree must be gone and the call audited as cancelled, not still running behind it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _modules import descendants, still_runs

FACET_MODULES = [("batchy", "batchy")]

_SCRIPT = """
import json, sys
import murmur_nb as mnb
from murmur_nb.widgets import LiveRun
policy = mnb.Policy(roots={{"log": {log!r}}})
with mnb.ModuleHost(home={home!r}, policy=policy) as host:
    try:
        host.invoke("batchy.work", {{"n": 1, "sleep": 60}}, progress=LiveRun.in_cell)
    except KeyboardInterrupt:
        outcomes = host.audit()["outcome"].tolist()
        print("REPORT " + json.dumps({{"interrupted": True, "outcomes": outcomes}}), flush=True)
        sys.stdin.readline()  # alive while the test looks for the module's processes
"""


@pytest.mark.slow
def test_interrupting_a_run_shown_in_a_cell_ends_it_before_the_cell_sees_the_interrupt(
    facet_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    log.mkdir()
    log.chmod(0o777)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    code = _SCRIPT.format(log=str(log), home=str(facet_home))
    with subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as child:  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not list(log.glob("work-1-*")) and time.monotonic() < deadline:
                time.sleep(0.05)
            module = descendants(child.pid)
            assert list(log.glob("work-1-*")) and module, "the module never started"
            time.sleep(0.3)  # the cell's thread is in its wait, refreshing the display
            os.kill(child.pid, signal.SIGINT)  # what interrupting the kernel sends
            assert child.stdout is not None
            line = next(x for x in child.stdout if x.startswith("REPORT "))
            report = json.loads(line.removeprefix("REPORT "))
            # seen while the cell handles the interrupt, the child still alive
            assert report == {"interrupted": True, "outcomes": ["cancelled"]}
            assert not [p for p in module if still_runs(p)]
            assert not descendants(child.pid)
            child.communicate("\n", timeout=60)
            assert child.returncode == 0
        finally:
            if child.poll() is None:
                child.kill()
