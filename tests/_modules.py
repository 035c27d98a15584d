"""Install the fixture modules of ``tests/modules/`` into a temporary facet-studio home.

Modules run with an empty environment, so there is no ``PATH``: each fixture becomes an
executable ``module`` file whose shebang names this interpreter by absolute path (``-S``
skips ``site``: the fixtures use the standard library only, and start faster).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "modules"


def install(
    home: Path, module_id: str, fixture: str = "plain", *, descriptor: dict[str, Any] | None = None
) -> Path:
    """Install fixture ``fixture`` as module ``module_id`` under ``home``; return its folder."""
    folder = home / "modules" / module_id
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / "_proto.py", folder / "_proto.py")
    exe = folder / "module"
    exe.write_text(f"#!{sys.executable} -S\n" + (FIXTURES / f"{fixture}.py").read_text())
    exe.chmod(0o755)
    if descriptor is not None:
        write_descriptor(folder, descriptor)
    return folder


def write_descriptor(folder: Path, descriptor: dict[str, Any]) -> None:
    (folder / "descriptor.json").write_text(json.dumps(descriptor))


def default_descriptor(home: Path, module_id: str) -> dict[str, Any]:
    """The fixture's own descriptor, as its ``describe`` prints it."""
    import subprocess

    out = subprocess.run(
        [str(home / "modules" / module_id / "module"), "describe"],
        capture_output=True,
        env={},
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)["result"]
    return result


def journaled(journal: Path, status: str | None = None) -> int:
    """Rows a batch journal holds (only ``status`` ones, if given); 0 until the writer has
    made the file *and* its table, which are two steps another process can fall between."""
    if not journal.exists():
        return 0
    where, args = ("WHERE status=?", (status,)) if status else ("", ())
    with contextlib.closing(sqlite3.connect(journal)) as db:
        try:
            return int(db.execute(f"SELECT count(*) FROM rows {where}", args).fetchone()[0])
        except sqlite3.OperationalError:  # the file is there, its table not yet
            return 0


def _stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or ``None``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _is_zygote(pid: int) -> bool:
    """Whether ``pid`` is the kernel's sandbox parent (``murmur_nb._sandbox.zygote``): part of
    the host, alive as long as its kernel, not of any module."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return False
    return Path(argv0.decode(errors="replace")).name.startswith("zygote-")


def descendants(root: int) -> set[tuple[int, str]]:
    """``(pid, start time)`` of every live process below ``root`` (the sandboxes included,
    the kernel's zygote left out: the calls it forks are included)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(entry.name)) is not None:
            parents[int(entry.name)] = (int(fields[1]), fields[19])
    found: set[tuple[int, str]] = set()
    frontier = {root}
    while frontier:
        kids = {pid for pid, (ppid, _) in parents.items() if ppid in frontier}
        found |= {(pid, parents[pid][1]) for pid in kids if not _is_zygote(pid)}
        frontier = kids
    return found


def still_runs(proc: tuple[int, str]) -> bool:
    """Whether the process seen by :func:`descendants` still runs (not reused, not a zombie)."""
    fields = _stat(proc[0])
    return fields is not None and fields[19] == proc[1] and fields[0] not in {"Z", "X"}


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in {"Z", "X"}


def host_pid(ns_pid: int, namespace: str) -> int:
    """The host pid of the live process ``ns_pid`` of pid namespace ``namespace``, else -1.

    A sandboxed module sees its own pid namespace (``pid:[<inode>]``); the host finds the
    process by that namespace and the last field of ``NSpid`` in its ``status``. ``-1`` (never
    alive) means no live process has that identity any more.
    """
    if namespace == str(Path("/proc/self/ns/pid").readlink()):
        return ns_pid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if str((entry / "ns" / "pid").readlink()) != namespace:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == ns_pid:
                return int(entry.name)
    return -1


def read_pids(folder: Path, roles: list[str], timeout: float = 5.0) -> dict[str, int]:
    """Wait until every ``<role>.pid`` exists in ``folder`` and return the host pids.

    Each file holds ``<pid> <pid namespace>`` as the module saw them; a process that is
    already gone reads as ``-1``.
    """
    end = time.monotonic() + timeout
    while True:
        found = {r: folder / f"{r}.pid" for r in roles}
        if all(p.exists() for p in found.values()):
            out = {}
            for role, path in found.items():
                pid, namespace = path.read_text().split()
                out[role] = host_pid(int(pid), namespace)
            return out
        if time.monotonic() > end:
            missing = [r for r, p in found.items() if not p.exists()]
            present = sorted(p.name for p in folder.iterdir())
            raise AssertionError(f"pid files never appeared: {missing} in {present}")
        time.sleep(0.01)


_SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = (p.encode() for p in sys.argv[1:3])
print("ready", flush=True)
while True:
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        sys.exit(ctypes.get_errno())
"""


@contextlib.contextmanager
def swapping(a: Path, b: Path) -> Iterator[None]:
    """A real process exchanging ``a`` and ``b`` (``renameat2(RENAME_EXCHANGE)``) as fast as
    it can while the block runs; the block fails if the swapper stopped before its end."""
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(a), str(b)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        yield
        assert swapper.poll() is None, "the swapper stopped during the test"
    finally:
        swapper.kill()
        swapper.wait()
        if swapper.stdout is not None:
            swapper.stdout.close()


def open_folder(path: Path) -> Path:
    """``path``, made as a folder anyone may write (a module's ``rw`` root: the sandbox id of
    a root host writes there as well)."""
    path.mkdir()
    path.chmod(0o777)
    return path


def sh_module(
    home: Path,
    module: str,
    *,
    before: str = "",
    after: str = "",
    reads: Sequence[str] = (),
    writes: Sequence[str] = ("out",),
) -> None:
    """A ``/bin/sh`` module ``module`` with one capability ``<module>.run`` that writes in
    its ``rw`` roots ``writes`` (and reads the ``ro`` roots ``reads``): it runs ``before``,
    reads the request, runs ``after``, then answers with the request id it read."""
    cap = {"id": f"{module}.run", "title": "Run", "summary": "s", "request_schema": "in",
           "result_schema": "out", "artifact_schemas": [], "skills": [],
           "effects": {"local": True, "network": False, "external_writes": False,
                       "provider": "", "cost_known": True}, "long_running": False}  # fmt: skip
    descriptor = json.dumps({
        "module": module, "name": module, "version": "1",
        "protocol_versions": ["modproto.v1"], "capabilities": [cap],
        "request_schemas": {"in": {"type": "object"}}, "result_schemas": {"out": {}},
        "artifact_schemas": {}, "agent_overlays": [], "skills": [], "requirements": [],
        "permissions": {"filesystem_read": [*reads], "filesystem_write": [*writes], "network": [],
                        "credentials": [], "paid_providers": [], "publish": False,
                        "subprocess": []},
    })  # fmt: skip
    execution = ('{"local":true,"network":false,"external_writes":false,"provider":"",'
                 '"estimated_cost":0,"actual_cost":0,"artifacts":[]}')  # fmt: skip

    def envelope(operation: str, rid: str, result: str) -> str:
        return (f'{{"protocol":"modproto.v1","module":"{module}","operation":"{operation}",'
                f'"request_id":"{rid}","ok":true,"result":{result},"warnings":[],'
                f'"execution":{execution}}}')  # fmt: skip

    describe = envelope("describe", "", descriptor)
    invoke = envelope("invoke", "%s", '{"n":1}')
    folder = home / "modules" / module
    folder.mkdir(parents=True)
    (folder / "module").write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = describe ]; then printf '%s' '{describe}'; exit 0; fi\n"
        f"{before}\n"
        "IFS= read -r line\n"
        f"{after}\n"
        'rid=${line#*\\"request_id\\":\\"}\n'
        'rid=${rid%%\\"*}\n'
        f"printf '{invoke}' \"$rid\"\n"
    )
    (folder / "module").chmod(0o755)
