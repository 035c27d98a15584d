"""A guest's trap stays a hook error when a handler was installed over wasmtime's.

wasmtime turns a trap into an error from the SIGILL/SIGSEGV/SIGBUS/SIGFPE handlers it installs
with its engine. ``faulthandler.enable()`` called once the engine exists (pytest's in-process
``pytester`` runs do, as can a notebook) put its own handler in front: the next trap killed
the whole process with "Illegal instruction", which is how CI runs of this suite died. Each
scenario runs in a fresh interpreter (``_trap_scenario.py``), since a failure ends the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_hooks import assemble_guest

from murmur_nb import RecordWriter

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = Path(__file__).with_name("_trap_scenario.py")


@pytest.fixture
def guest(tmp_path: Path) -> tuple[Path, Path]:
    component = tmp_path / "guest.wasm"
    component.write_bytes(assemble_guest())
    home = tmp_path / "home"
    with RecordWriter(home, "ctx-1") as writer:
        writer.append("user", "hello")
    return component, home


def run(component: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", str(SCENARIO), str(component), str(home), *extra],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_traps_after_faulthandler_was_enabled_again_are_hook_errors(
    guest: tuple[Path, Path],
) -> None:
    done = run(*guest)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Fatal Python error" not in done.stderr, done.stderr[-3000:]
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    assert codes[0] is None and codes[-1] is None  # the calls around the traps succeeded
    assert codes[1:-1] == ["trap"] * 6, codes


def test_a_crash_outside_any_guest_is_still_reported_by_faulthandler(
    guest: tuple[Path, Path],
) -> None:
    done = run(*guest, "crash")
    assert json.loads(done.stdout.strip().splitlines()[-1])[1] == "trap"
    assert done.returncode == -11, done.stderr[-3000:]  # SIGSEGV, not a trap turned into an error
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert "_trap_scenario.py" in done.stderr  # faulthandler's traceback names the faulting line
