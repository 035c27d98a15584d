"""Kernels sharing murmur-nb's caches, and kernels killed while they write into them.

Real processes: a writer stopped (``SIGSTOP``) in the middle of a write while another
kernel prunes, a kernel killed (``SIGKILL``) in the middle of a write or a build.

* The compiled-component cache: :meth:`ComponentCache.prune` listed ``*.cwasm``, which
  pathlib matches with the hidden ``.tmp-*.cwasm`` a writer (another kernel compiling a hook
  into the same cache) was filling, and, over the budget, deleted it first (no sidecar): the
  writer's rename failed (``FileNotFoundError``, swallowed by the load: its hook was not
  stored, and the next kernel compiled it again). An entry renamed into place whose sidecar
  was not written yet went first the same way. A killed writer's temporary stayed for good
  while the cache was under its budget. Now a temporary is locked by its writer, never taken
  while locked or younger than ``ABANDONED_S``, and removed when older and nobody holds it.
* Hook builds: a kernel killed while componentize-py built its hook left the build running
  (20 s on, an orphan) and its 18 MiB output under ``.tmp-<pid>-...`` in ``builds/`` for good.
  Now the tool dies with the kernel, and the next build removes the killed one's folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import wasmtime

from murmur_nb._hooks.build import DEMO_HOOK_SOURCE  # private: a real hook source to build
from murmur_nb._hooks.cache import (  # private: the cache itself is attacked
    ABANDONED_S,
    ComponentCache,
)

#: a kernel writing a large compiled form into the cache, the way a load stores one
_WRITER = """
import sys
from pathlib import Path
from murmur_nb._hooks.cache import _atomic_write
_atomic_write(Path(sys.argv[1]), bytes(32 << 20))
print("stored")
"""


def temporaries(folder: Path) -> list[Path]:
    return sorted(folder.glob(".tmp-*"))


def filling(folder: Path) -> list[Path]:
    """The temporaries in ``folder`` that hold bytes: their writer took its lock first."""
    found = []
    for path in temporaries(folder):
        try:
            if path.stat().st_size:
                found.append(path)
        except FileNotFoundError:
            pass  # renamed into place meanwhile
    return found


def stopped_mid_write(entry: Path) -> tuple[subprocess.Popen[str], Path]:
    """A writer of ``entry`` stopped while its temporary is being filled, past its lock
    (tried again when the write ended before it could be stopped).

    A writer stopped between creating its temporary and locking it is not this case: a
    prune may take that one once it is old, and its writer then only fails to store."""
    for _ in range(10):
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(entry)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 20
        while not filling(entry.parent) and writer.poll() is None:
            assert time.monotonic() < deadline, "the writer never began its write"
        os.kill(writer.pid, signal.SIGSTOP)
        if filling(entry.parent) and not entry.exists():
            return writer, filling(entry.parent)[0]
        os.kill(writer.pid, signal.SIGKILL)
        writer.communicate()
        entry.unlink(missing_ok=True)
    raise AssertionError("the writer could not be stopped in the middle of its write")


def make_old(path: Path) -> None:
    then = time.time() - ABANDONED_S - 60
    os.utime(path, (then, then))


def test_a_prune_in_another_kernel_leaves_a_compiled_form_being_written(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    entry = folder / f"{'a' * 64}-0123456789abcdef.cwasm"
    writer, temporary = stopped_mid_write(entry)
    try:
        cache = ComponentCache(wasmtime.Engine(), "x", folder)
        assert cache.prune(max_bytes=1) == []  # over any budget: still not another's write
        make_old(temporary)  # a writer stopped for long (a frozen container) still holds it
        assert cache.prune(max_bytes=1) == []
        assert temporary.exists()
    finally:
        os.kill(writer.pid, signal.SIGCONT)
        out, err = writer.communicate(timeout=30)
    assert (writer.returncode, out.strip()) == (0, "stored"), err
    assert entry.stat().st_size == 32 << 20
    assert temporaries(folder) == []


def test_a_killed_writers_temporary_is_removed_once_abandoned(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    writer, temporary = stopped_mid_write(folder / f"{'b' * 64}-0123456789abcdef.cwasm")
    os.kill(writer.pid, signal.SIGKILL)
    writer.communicate(timeout=30)
    cache = ComponentCache(wasmtime.Engine(), "x", folder)
    cache.prune()
    assert temporary.exists()  # young: could be a write that is slow, not left yet
    make_old(temporary)
    cache.prune()  # under the budget: the leftover goes all the same
    assert not temporary.exists()


def test_an_entry_whose_seal_is_not_written_yet_is_not_the_first_to_go(tmp_path: Path) -> None:
    """What a prune in another kernel finds between a load's rename of its entry and the
    write of the entry's sidecar: the newest entry, not an unusable one."""
    folder = tmp_path / "cache"
    engine = wasmtime.Engine()
    cache = ComponentCache(engine, "x", folder)
    component = tmp_path / "c.wasm"
    component.write_bytes(wasmtime.wat2wasm("(component)"))
    old = cache.load(component).entry
    then = time.time() - 3600
    os.utime(old.with_name(old.name + ".sum"), (then, then))  # used an hour ago
    fresh = folder / f"{'c' * 64}-0123456789abcdef.cwasm"
    fresh.write_bytes(old.read_bytes())  # renamed into place just now, sidecar to come
    deleted = cache.prune(max_bytes=old.stat().st_size)
    assert deleted == [old]
    assert fresh.exists()


# --- hook builds --------------------------------------------------------------------------

#: a kernel building a hook (its cache given by the environment)
_KERNEL = "import sys, murmur_nb; murmur_nb.build_python_hook(sys.argv[1])"


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def building_kernel(source: Path, cache: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A kernel building ``source`` into ``cache``, and its componentize-py, once running."""
    env = {**os.environ, "MURMUR_NB_CACHE": str(cache)}
    kernel = subprocess.Popen([sys.executable, "-c", _KERNEL, str(source)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 30
    while not (tools := children_of(kernel.pid)):
        if kernel.poll() is not None or time.monotonic() > deadline:
            kernel.kill()
            raise AssertionError(f"the kernel started no build (exit {kernel.wait()})")
        time.sleep(0.02)
    return kernel, tools[0]


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def hook_source(tmp_path: Path) -> Path:
    source = tmp_path / "hook" / "app.py"
    source.parent.mkdir()
    source.write_text(DEMO_HOOK_SOURCE.read_text(encoding="utf-8") + f"\n# {tmp_path}\n",
                      encoding="utf-8")  # fmt: skip
    return source


@pytest.mark.slow
def test_a_hook_build_dies_with_its_killed_kernel(tmp_path: Path) -> None:
    kernel, tool = building_kernel(hook_source(tmp_path), tmp_path / "cache")
    try:
        kernel.kill()
        kernel.wait()
        assert gone_within(tool, 5), "componentize-py ran on after its kernel was killed"
    finally:
        if running(tool):
            os.kill(tool, signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_kernels_build_is_removed_by_the_next_build(tmp_path: Path) -> None:
    source, cache = hook_source(tmp_path), tmp_path / "cache"
    kernel, tool = building_kernel(source, cache)
    kernel.kill()
    kernel.wait()
    if not gone_within(tool, 60):  # a build left running ends in about 20 s
        os.kill(tool, signal.SIGKILL)
    left = temporaries(cache / "builds")
    assert left, "the killed build left nothing behind to look at"
    kernel, tool = building_kernel(source, cache)  # the next build, from another kernel
    try:
        assert [p for p in left if p.exists()] == []
    finally:
        kernel.kill()
        kernel.wait()
        if not gone_within(tool, 5):
            os.kill(tool, signal.SIGKILL)
