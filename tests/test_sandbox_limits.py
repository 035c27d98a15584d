"""What a module can take of the machine that outlives or outgrows its call (red-team trial 1).

A hostile module (``tests/modules/limits.py``) really tries each, and the test looks at the
machine, not at the host's bookkeeping:

* SysV IPC: where there is no IPC namespace (Landlock, seccomp and the subreaper, as in a
  default Docker container) a module made a 256 MiB ``0666`` segment, a semaphore set and a
  message queue that outlived the call and the kernel, and attached another process's
  segment by its id. The seccomp filter refuses SysV IPC there: ``shmget`` finds nothing
  left after the call, and the test's own segment is not read. Under bubblewrap and the
  zygote the call's IPC namespace goes with it.
* processes: under bubblewrap and the zygote ``RLIMIT_NPROC`` was the kernel's (96367, above
  ``pid_max``): a module forked 3000 waiting children. It is now capped in the sandbox's user
  namespace (``SANDBOX_NPROC``).
* memory: the sandbox's tmpfs (its root, which holds ``/tmp`` and the working folder) had no
  bound: a module wrote 2 GiB of the host's memory to ``/tmp``. Each tmpfs now has one
  (``MURMUR_NB_SANDBOX_TMPFS``, default 1 GiB); a write past it fails with ``ENOSPC``.
* the machine's memory: a module's process tree had the kernel's OOM score, so a module that
  took the memory of a cgroup (a container's, a pod's) got a notebook kernel holding more
  than it killed. Every module process now has ``oom_score_adj`` 1000 (a module in a user
  namespace may set it back to the kernel's 0, never below: a per-call memory cgroup would
  bound a hostile one, not this).

Each runs here (as root), and again as an unprivileged user and in the default-Docker
harness (the slow tests at the end), where the settings that apply there run.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from _modules import install
from _users import rerun, reruns_in_each_setting

import murmur_nb as mnb
from murmur_nb._sandbox import identity  # private: the process cap has no public name
from murmur_nb._sandbox.sandbox import TMPFS_BYTES  # private: the default tmpfs bound

#: each setting: the mechanisms the policy allows, and whether the zygote may fork the call
SETTINGS = {
    "zygote": (["bwrap", "landlock", "seccomp", "reaper"], True),
    "bwrap": (["bwrap", "landlock", "seccomp", "reaper"], False),
    "reaper": (["landlock", "seccomp", "reaper"], True),
    "landlock": (["landlock", "seccomp"], True),  # no subreaper: the Python pre-exec step
}
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.shmat.restype = ctypes.c_void_p
_LIBC.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
IPC_CREAT, IPC_RMID = 0o1000, 0


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    install(home, "limits", "limits")
    return home


def _host(home: Path, setting: str, monkeypatch: pytest.MonkeyPatch) -> mnb.ModuleHost:
    mechanisms, zygote = SETTINGS[setting]
    if not zygote:
        monkeypatch.setenv("MURMUR_NB_ZYGOTE", "off")
    # without the subreaper nothing holds the process tree, so only best-effort runs there
    sandbox = "required" if "reaper" in mechanisms or "bwrap" in mechanisms else "best-effort"
    host = mnb.ModuleHost(
        home=home,
        policy=mnb.Policy(deadline_ms=120_000, sandbox=sandbox, sandbox_mechanisms=mechanisms),
    )
    wanted = "landlock" if setting in ("reaper", "landlock") else "bwrap"
    if host.sandbox.mechanism != wanted:
        host.close()
        pytest.skip(f"{setting}: {wanted} does not run here ({host.sandbox.mechanism})")
    return host


def _invoke(host: mnb.ModuleHost, capability: str, given: dict[str, Any]) -> dict[str, Any]:
    inv = host.invoke(f"limits.{capability}", given)
    assert inv.ok, inv.error
    result: dict[str, Any] = inv.result
    return result


@pytest.fixture
def key() -> Iterator[int]:
    """A SysV IPC key of this test's own; whatever is left under it is removed after."""
    key = 0x6D6E0000 | (os.getpid() & 0xFFFF)
    yield key
    _remove_all(key)


def _left(key: int) -> dict[str, int]:
    """What exists under ``key`` in this process's IPC namespace (the host's)."""
    found = {
        "shm": _LIBC.shmget(key, ctypes.c_size_t(0), 0),
        "sem": _LIBC.semget(key, 0, 0),
        "msg": _LIBC.msgget(key, 0),
    }
    return {kind: ident for kind, ident in found.items() if ident >= 0}


def _remove_all(key: int) -> None:
    for kind, ident in _left(key).items():
        if kind == "shm":
            _LIBC.shmctl(ident, IPC_RMID, None)
        elif kind == "sem":
            _LIBC.semctl(ident, 0, IPC_RMID)
        else:
            _LIBC.msgctl(ident, IPC_RMID, None)
    Path("/dev/mqueue/murmur-nb-limits").unlink(missing_ok=True)
    _LIBC.mq_unlink(b"/murmur-nb-limits")


@pytest.mark.parametrize("setting", ["reaper", "zygote", "bwrap"])
def test_no_sysv_ipc_object_outlives_the_call(
    home: Path, setting: str, key: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _host(home, setting, monkeypatch) as host:
        made = _invoke(host, "ipc", {"key": key, "size": 64 << 20})
        report = str(host.sandbox)
    assert _left(key) == {}, (made, _left(key))
    assert "SysV IPC" in report, report
    if setting == "reaper":  # no IPC namespace: refused outright
        assert made == dict.fromkeys(("shmget", "semget", "msgget", "mq_open"), "EPERM"), made
        assert "seccomp (refused)" in report, report
    else:
        assert "bwrap ipc namespace" in report, report


@pytest.mark.parametrize("setting", ["reaper", "zygote", "bwrap"])
def test_a_segment_of_another_process_cannot_be_read(
    home: Path, setting: str, key: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test makes a segment anyone may read (``0666``) holding a secret and hands the
    module its id: it reads nothing of it."""
    sid = _LIBC.shmget(key, ctypes.c_size_t(4096), IPC_CREAT | 0o666)
    assert sid >= 0, ctypes.get_errno()
    addr = _LIBC.shmat(sid, None, 0)
    ctypes.memmove(addr, b"the-secret-of-the-kernel\0", 25)
    _LIBC.shmdt(ctypes.c_void_p(addr))
    with _host(home, setting, monkeypatch) as host:
        seen = _invoke(host, "ipc_read", {"ids": [sid, *range(8)]})
    assert "the-secret-of-the-kernel" not in seen.values(), seen
    assert seen[str(sid)] in ("EPERM", "EINVAL"), seen


@pytest.mark.parametrize("setting", ["zygote", "bwrap"])
def test_a_fork_bomb_stops_at_the_sandbox_process_limit(
    home: Path, setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _host(home, setting, monkeypatch) as host:
        forked = _invoke(host, "forks", {"limit": 1500})
        report = str(host.sandbox)
    assert forked["refused"] == "EAGAIN", forked
    assert forked["made"] < identity.SANDBOX_NPROC, forked
    assert f"RLIMIT_NPROC {identity.SANDBOX_NPROC}" in report, report


@pytest.mark.parametrize("where", ["tmp", "cwd"])
@pytest.mark.parametrize("setting", ["zygote", "bwrap"])
def test_a_write_past_the_tmpfs_bound_fails_with_enospc(
    home: Path, setting: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_NB_SANDBOX_TMPFS", "16M")
    with _host(home, setting, monkeypatch) as host:
        assert host.sandbox.tmpfs_bytes == 16 << 20
        filled = _invoke(host, "fill", {"where": where, "mib": 96})
    assert filled["refused"] == "ENOSPC", filled
    assert filled["wrote"] <= 16 << 20 and filled["size"] <= 16 << 20, filled
    if filled["shmem_before_kib"] is not None:  # the host's shared memory, seen in /proc
        grew = filled["shmem_during_kib"] - filled["shmem_before_kib"]
        assert grew < 48 << 10, filled  # well under the 96 MiB it tried


@pytest.mark.parametrize("setting", ["zygote", "bwrap"])
def test_the_policy_sets_the_tmpfs_bound(
    home: Path, setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Policy(sandbox_tmpfs_bytes=)`` wins over the variable: the module's 40 MiB write
    stops at the policy's 8 MiB."""
    monkeypatch.setenv("MURMUR_NB_SANDBOX_TMPFS", "64M")
    if not SETTINGS[setting][1]:
        monkeypatch.setenv("MURMUR_NB_ZYGOTE", "off")
    mechanisms = SETTINGS[setting][0]
    policy = mnb.Policy(deadline_ms=120_000, sandbox_mechanisms=mechanisms,
                        sandbox_tmpfs_bytes=8 << 20)  # fmt: skip
    with mnb.ModuleHost(home=home, policy=policy) as host:
        if host.sandbox.mechanism != "bwrap":
            pytest.skip(f"{setting}: bwrap does not run here ({host.sandbox.mechanism})")
        assert host.sandbox.tmpfs_bytes == 8 << 20
        filled = _invoke(host, "fill", {"where": "tmp", "mib": 40})
    assert filled["refused"] == "ENOSPC", filled
    assert filled["wrote"] <= 8 << 20, filled
    with pytest.raises(ValueError, match="sandbox_tmpfs_bytes must be a positive integer"):
        mnb.Policy(sandbox_tmpfs_bytes=0)


@pytest.mark.parametrize("setting", ["zygote", "bwrap"])
def test_the_tmpfs_is_bounded_by_default(
    home: Path, setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MURMUR_NB_SANDBOX_TMPFS", raising=False)
    with _host(home, setting, monkeypatch) as host:
        filled = _invoke(host, "fill", {"mib": 0})
    assert filled["size"] == TMPFS_BYTES, filled


def _tree_scores(cmdline: str, count: int, timeout_s: float = 30) -> dict[int, int]:
    """The ``oom_score_adj`` of this process's descendants whose command line holds
    ``cmdline`` (bubblewrap, which starts the module, aside), read from ``/proc`` once
    ``count`` of them run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = {}
        for proc in psutil.Process().children(recursive=True):
            try:
                argv = proc.cmdline()
                if cmdline in " ".join(argv) and not argv[0].endswith("bwrap"):
                    found[proc.pid] = int(Path(f"/proc/{proc.pid}/oom_score_adj").read_text())
            except (psutil.Error, OSError):
                continue
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} processes of {cmdline!r} seen")


@pytest.mark.parametrize("setting", ["reaper", "landlock", "zygote", "bwrap"])
def test_every_module_process_is_the_oom_killers_first_choice(
    home: Path, setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the module holds 16 MiB, the test reads the OOM score of the module and of the
    child it forked from ``/proc``, outside the sandbox: 1000 each; the kernel's is
    unchanged."""
    kernel_score = Path("/proc/self/oom_score_adj").read_text()
    held: dict[str, Any] = {}
    with _host(home, setting, monkeypatch) as host, warnings.catch_warnings():
        warnings.simplefilter("ignore", mnb.SandboxWarning)  # best-effort's, for "landlock"
        call = threading.Thread(
            target=lambda: held.update(_invoke(host, "hog", {"mib": 16, "hold_s": 3}))
        )
        call.start()
        try:
            scores = _tree_scores("limits/module invoke", 2)
        finally:
            call.join()
    assert held["held_mib"] == 16, held
    assert set(scores.values()) == {1000}, scores
    assert Path("/proc/self/oom_score_adj").read_text() == kernel_score


#: a notebook kernel in a memory cgroup: it holds ``argv[3]`` MiB of its own, runs a module
#: that takes memory until something gives, and says what it saw, if it is still alive
OOM_KERNEL = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    Path(sys.argv[1], "cgroup.procs").write_text(str(os.getpid()))
    import murmur_nb as mnb
    ballast = bytes([2]) * (int(sys.argv[3]) << 20)
    policy = mnb.Policy(deadline_ms=120_000, sandbox="required")
    with mnb.ModuleHost(home=sys.argv[2], policy=policy) as host:
        try:
            host.invoke("limits.hog", {"mib": 4096})
            error = None
        except mnb.ProtocolViolation as exc:
            error = str(exc)
        print(json.dumps({"error": error, "held": len(ballast) >> 20}), flush=True)
""")


def _memory_cgroup(tmp_path: Path, limit: int) -> Path | None:
    """A child of this process's memory cgroup limited to ``limit`` bytes (cgroup v1, or v2
    where the memory controller is delegated); ``None`` where none can be made."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, where = line.split(":", 2)
        if "memory" in controllers.split(","):  # cgroup v1
            parent = Path("/sys/fs/cgroup/memory") / where.lstrip("/")
            limit_file = "memory.limit_in_bytes"
        elif controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            parent, limit_file = Path("/sys/fs/cgroup") / where.lstrip("/"), "memory.max"
        else:
            continue
        group = parent / f"mnb-oom-{tmp_path.name}-{os.getpid()}"
        try:
            group.mkdir()
            (group / limit_file).write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
            continue
        return group
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a memory cgroup")
def test_a_module_taking_the_memory_of_its_cgroup_is_killed_before_the_kernel(
    home: Path, tmp_path: Path
) -> None:
    """A kernel holding 400 MiB in a 700 MiB memory cgroup (a container's, a pod's) runs a
    module that takes memory until something gives: the OOM killer kills the module (the
    call fails), and the kernel lives to say so. (Before, the kernel was the larger process
    of the cgroup, and the OOM killer took it: the notebook's state was gone.)"""
    group = _memory_cgroup(tmp_path, 700 << 20)
    if group is None:
        pytest.skip("no memory cgroup can be made here")
    try:
        done = subprocess.run(
            [sys.executable, "-c", OOM_KERNEL, str(group), str(home), "400"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["held"] == 400, seen
    assert "was killed by SIGKILL" in seen["error"], seen


def test_a_tmpfs_bound_that_is_not_a_size_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from murmur_nb._sandbox.sandbox import tmpfs_bytes  # private: the variable's reader

    monkeypatch.setenv("MURMUR_NB_SANDBOX_TMPFS", "lots")
    with pytest.raises(ValueError, match="MURMUR_NB_SANDBOX_TMPFS"):
        tmpfs_bytes()
    monkeypatch.setenv("MURMUR_NB_SANDBOX_TMPFS", "2G")
    assert tmpfs_bytes() == 2 << 30


@reruns_in_each_setting
def test_the_limits_hold_as_a_user_and_in_a_default_docker_container(
    user: bool, docker: bool
) -> None:
    done, tail = rerun(["tests/test_sandbox_limits.py"], user=user, docker=docker, marks="not slow")
    assert done == 0, tail
    assert " passed" in tail and not re.search(r"\d+ failed", tail), tail
