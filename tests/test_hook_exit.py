"""A process that hosted hooks exits cleanly, however their calls ended (issue 16).

Each run is a fresh interpreter (``_exit_scenario.py``) that ends hook calls by a trap, fuel
exhaustion, a deadline, running out of memory, a failing host function and a real SIGINT sent
by this test, with several hosts at once, some closed and some never closed, and then exits.
Before the fix, a guest that had written to stdout/stderr left its output callbacks to a
wasmtime-wasi worker thread that called back into Python during interpreter finalization:
"panic in a function that cannot unwind", and sometimes SIGABRT. Every run must now exit with
status 0 and an empty stderr. The same for WAT, componentize-py and componentize-js guests.

The JavaScript guest is built with componentize-js, which the build helper installs from npm
into the per-user cache (``$MURMUR_NB_CACHE`` or ``~/.cache/murmur-nb``) once per toolchain
version; its builds are cached by source digest like the Python ones.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from test_hooks import assemble_guest

import murmur_nb as mnb
from murmur_nb import RecordWriter
from murmur_nb._hooks.build import build_js_hook  # private: no public JS build helper

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = Path(__file__).with_name("_exit_scenario.py")
GUESTS = Path(__file__).with_name("guests")
#: Scenario processes, all at once: most of a run is guest loops waiting for their deadlines
#: (0.8 s each), one core each; running them side by side also makes their exits overlap.
RUNS = 2
AT_ONCE = 2


def wat_guest(folder: Path) -> Path:
    path = folder / "guest.wasm"
    path.write_bytes(assemble_guest())
    return path


def python_guest(folder: Path) -> Path:
    return mnb.build_python_hook(GUESTS / "exit_py" / "exit_hook.py")


def js_guest(folder: Path) -> Path:
    """Uses the internal JS build helper: the package has no public JavaScript builder."""
    return build_js_hook(GUESTS / "exit_js" / "exit_hook.js")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    with RecordWriter(home, "ctx-1") as writer:
        for i in range(120):
            writer.append("user" if i % 2 else "assistant", f"turn {i}")
    return home


def run_scenario(component: Path, home: Path, work: Path) -> tuple[int, str, list[Any]]:
    """One fresh interpreter: its exit status, its stderr and what its calls returned."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    work.mkdir()
    with (
        (work / "stderr").open("w+", encoding="utf-8") as stderr,
        subprocess.Popen(
            [sys.executable, str(SCENARIO), str(component), str(home), str(work)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        ) as child,
    ):
        try:
            assert child.stdout is not None
            ready = child.stdout.readline()
            assert ready.strip() == "READY-SIGINT", ready + (work / "stderr").read_text()
            time.sleep(0.5)  # the long call is running by now (it has 60 s)
            child.send_signal(signal.SIGINT)
            out, _ = child.communicate(timeout=600)
        finally:
            if child.poll() is None:
                child.kill()
        stderr.seek(0)
        err = stderr.read()
    lines = out.strip().splitlines()
    return child.returncode, err, json.loads(lines[-1]) if lines else []


def check_endings(seen: list[Any]) -> None:
    """Every call ended the way its task asked for (so each ending really happened)."""
    by_task: dict[str, list[dict[str, str | None]]] = {}
    for task, codes, _error in seen:
        by_task.setdefault(task, []).append(codes)
    assert all(c["quick"] == "trap" and c["fuel"] == "trap" for c in by_task["!trap"])
    for codes in by_task["!loop"][:-1]:  # the last one is the interrupted call
        assert codes == {
            "quick": "deadline_exceeded",
            "fuel": "fuel_exhausted",
            "reader": "deadline_exceeded",
        }
    for codes in by_task["!grow"]:  # each guest says "out of memory" its own way
        assert codes["quick"] in ("trap", "guest_error", "memory_limit"), codes
    read_codes = [codes["reader"] for codes in by_task["!read"]]
    assert read_codes.count("host_error") == 4  # the hosts serving a failing store
    assert read_codes.count(None) == 2  # the hosts serving the real record
    assert all(codes == dict.fromkeys(codes) for codes in by_task["fine"]), by_task["fine"]
    assert by_task["!loop"][-1] == "KeyboardInterrupt"
    interrupted = next(row for row in seen if row[1] == "KeyboardInterrupt")
    assert interrupted[2] < 30  # stopped by the signal, not by its 60 s limit
    assert by_task["after"] == ["after"]


GUEST_KINDS: list[Any] = [
    pytest.param(wat_guest, id="wat", marks=pytest.mark.slow),
    # A cold cache builds the guest (componentize-js: an npm install first) and compiles it.
    pytest.param(
        python_guest, id="componentize-py", marks=[pytest.mark.slow, pytest.mark.timeout(1200)]
    ),
    pytest.param(
        js_guest, id="componentize-js", marks=[pytest.mark.slow, pytest.mark.timeout(1200)]
    ),
]


@pytest.mark.parametrize("make_guest", GUEST_KINDS)
def test_the_interpreter_exits_cleanly_after_every_kind_of_call_ending(
    make_guest: Callable[[Path], Path], home: Path, tmp_path: Path
) -> None:
    component = make_guest(tmp_path)
    with ThreadPoolExecutor(AT_ONCE) as pool:
        ended = list(pool.map(
            lambda run: run_scenario(component, home, tmp_path / f"run-{run}"), range(RUNS)
        ))  # fmt: skip
    for status, err, seen in ended:
        assert "panicked" not in err and "Fatal Python error" not in err, err
        assert status == 0, (status, err)
        assert err == ""
        check_endings(seen)


#: Run in an interpreter of its own: the runtime's weak set of open stores, with the collector
#: off. (Run inside pytest's own process, a trapped store's WASI output tasks from earlier
#: tests' hosts share the process; twice on 2026-12-01 that process then died of SIGILL, a
#: wasmtime abort, while this test ran. A crash here now fails this test, not the suite.)
TRAPPED_SCRIPT = """
import gc, sys
from pathlib import Path
import murmur_nb as mnb
from murmur_nb._hooks.runtime import Runtime  # private: its weak set of open stores
folder, home = Path(sys.argv[1]), Path(sys.argv[2])
hooks = mnb.HookHost.from_config(folder / "murmur.yaml", conversations=mnb.ConversationStore(home))
runtime = Runtime.get()
gc.disable()
try:
    result = hooks.task_start(task_id="!trap", context_id="ctx-1")["h"]
    print("code", result.code)
    print("open stores", len(runtime.stores))
finally:
    gc.enable()
hooks.close()
try:
    hooks._linked.linker.ptr()
except ValueError as exc:
    print("linker", exc)
hooks.close()
try:
    hooks.task_start(task_id="x", context_id="ctx-1")
except mnb.HookError as exc:
    print("after close", exc)
"""


def test_a_trapped_calls_store_is_released_at_once(tmp_path: Path, home: Path) -> None:
    """Before the fix a trapped call's store lived in a reference cycle (with its WASI
    streams) until some later collection, at worst during interpreter finalization; it must be
    gone when the call returns, with the collector off. close() releases the linker too."""
    component = wat_guest(tmp_path)
    (tmp_path / "murmur.yaml").write_text(
        f"hooks:\n  h:\n    component: {component}\n", encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-c", TRAPPED_SCRIPT, str(tmp_path), str(home)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    lines = done.stdout.splitlines()
    assert "code trap" in lines and "open stores 0" in lines, done.stdout
    assert any(line.startswith("linker") and "already closed" in line for line in lines)
    assert any(line.startswith("after close") and "closed" in line for line in lines)
