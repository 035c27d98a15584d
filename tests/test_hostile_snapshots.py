"""The module snapshot store against a module edited and run again, and against hard links.

Attacked: the persistent store the host copies each module folder into before it runs it
(``$MURMUR_NB_SNAPSHOTS``). Every changed version of a module added a whole copy for good:
a module edited and run again in a notebook filled the disk (ten versions of a 300 KiB module
left 3 MB in a store whose budget is 1 MiB now). The store is now pruned after each build,
least recently used first; what is observed is the store's bytes on disk, and that a call
prepared or running (in this kernel or another process) still reads its own files after
the store was filled past its budget around it.

A module folder holding a hard link (uv's virtualenvs hard-link files from uv's cache) was
tried too: the snapshot holds a copy of the bytes, so a change through the file's other name
after the snapshot was checked never reaches what runs (sound before this file; kept here).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import FIXTURES

import murmur_nb as mnb

#: the store's budget in these tests, in MiB
BUDGET_MB = 1
#: a version's data file: three versions (and their launcher) fit in the budget, four do not
DATA_BYTES = 300 << 10

READER = f"""#!{sys.executable} -S
import time
from pathlib import Path

from _proto import HERE, capability, descriptor, envelope, main


def default():
    return descriptor([capability("read")], permissions={{"filesystem_write": ["sync"]}})


def handle(name, request):
    if (request.get("input") or {{}}).get("wait"):  # running: hold still until told to read
        sync = Path(request["roots"]["sync"]["path"])
        (sync / "started").write_text("")
        deadline = time.monotonic() + 30
        while not (sync / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    data = (HERE / "data.bin").read_bytes()
    return envelope("invoke", request["request_id"],
                    result={{"head": data[:12].decode(), "size": len(data)}})


main(default, handle)
"""

#: another process: prepares the reader, says which snapshot, and runs it waiting for "go"
OTHER = """
import json, sys
from pathlib import Path
import murmur_nb as mnb

home, sync = Path(sys.argv[1]), Path(sys.argv[2])
with mnb.ModuleHost(home=home, policy=mnb.Policy(roots={"sync": sync})) as host:
    call = host.prepare("reader.read", approve=True)
    (sync / "snapshot").write_text(str(call.snapshot))
    print(json.dumps(call.run({"wait": True}, deadline_ms=60_000).result), flush=True)
"""


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A snapshot store of this test, with a budget of :data:`BUDGET_MB`."""
    folder = tmp_path / "snapshots"
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(folder))
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS_MAX_MB", str(BUDGET_MB))
    return folder


@pytest.fixture
def sync(tmp_path: Path) -> Path:
    folder = tmp_path / "sync"
    folder.mkdir()
    return folder


@pytest.fixture
def reader(tmp_path: Path) -> Path:
    """The reader module's folder (no data yet: :func:`version`)."""
    folder = tmp_path / "home" / "modules" / "reader"
    folder.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "_proto.py", folder / "_proto.py")
    (folder / "module").write_text(READER)
    (folder / "module").chmod(0o755)
    return folder


@pytest.fixture
def host(reader: Path, sync: Path, store: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=reader.parent.parent, policy=mnb.Policy(roots={"sync": sync})) as h:
        yield h


def head(n: int) -> str:
    return f"version-{n:04d}"


def version(folder: Path, n: int) -> None:
    """Edit the module: version ``n`` of its data file (a new file: a new inode)."""
    data = folder / "data.bin"
    data.unlink(missing_ok=True)
    data.write_bytes(head(n).encode().ljust(DATA_BYTES, b"."))


def stored_bytes(store: Path) -> int:
    """The bytes of every file in the store, as on disk now."""
    total = 0
    for top, _, files in os.walk(store):
        for name in files:
            total += os.lstat(os.path.join(top, name)).st_size  # noqa: PTH118
    return total


def snapshots(store: Path) -> list[Path]:
    return [p for p in store.iterdir() if not p.name.startswith(".")]


def fill(host: mnb.ModuleHost, folder: Path, versions: range) -> None:
    """Edit the module and let the host take up each version (describe, snapshot)."""
    for n in versions:
        version(folder, n)
        host.resolve("reader.read")


def test_a_module_edited_again_and_again_fills_the_store_no_further_than_its_budget(
    host: mnb.ModuleHost, reader: Path, store: Path
) -> None:
    fill(host, reader, range(10))
    inv = host.prepare("reader.read", approve=True).run({})
    assert inv.result == {"head": head(9), "size": DATA_BYTES}  # the newest is kept and runs
    newest = host.resolve("reader.read").snapshot
    assert (newest / "data.bin").read_bytes().startswith(head(9).encode())
    assert stored_bytes(store) <= BUDGET_MB << 20, (stored_bytes(store), len(snapshots(store)))
    assert len(snapshots(store)) == 3  # the three newest: 10 were made


def test_a_prepared_call_keeps_its_snapshot_until_it_is_dropped(
    host: mnb.ModuleHost, reader: Path, store: Path
) -> None:
    version(reader, 0)
    call = host.prepare("reader.read", approve=True)
    kept = call.snapshot
    fill(host, reader, range(1, 8))
    assert call.run({}).result == {"head": head(0), "size": DATA_BYTES}  # its own files
    # the budget holds for all but the prepared call's snapshot
    assert stored_bytes(store) <= (BUDGET_MB << 20) + DATA_BYTES + 16_384
    assert kept in [p / "reader" for p in snapshots(store)]
    del call
    gc.collect()
    fill(host, reader, range(8, 9))  # the next build prunes: nothing holds version 0 now
    assert not kept.exists()
    assert stored_bytes(store) <= BUDGET_MB << 20


def test_a_closed_host_holds_no_snapshot_though_it_is_still_referenced(
    reader: Path, sync: Path, store: Path
) -> None:
    """A host closed but not collected yet (a notebook's variable, a ``with`` block's name):
    another host fills the store, and the closed one's snapshot is pruned like any other.
    Before, the closed host's descriptions kept its snapshot held until it was collected,
    and the store stayed past its budget by it."""
    policy = mnb.Policy(roots={"sync": sync})
    with mnb.ModuleHost(home=reader.parent.parent, policy=policy) as first:
        version(reader, 0)
        kept = first.resolve("reader.read").snapshot
        assert (kept / "data.bin").read_bytes().startswith(head(0).encode())
    with mnb.ModuleHost(home=reader.parent.parent, policy=policy) as second:
        fill(second, reader, range(1, 8))
        assert second.invoke("reader.read", {}).result == {"head": head(7), "size": DATA_BYTES}
    assert not kept.exists()
    assert stored_bytes(store) <= BUDGET_MB << 20
    assert first is not None  # referenced to here: it was closing that let go


def test_a_snapshot_a_call_of_another_process_runs_is_never_pruned(
    host: mnb.ModuleHost, reader: Path, store: Path, sync: Path
) -> None:
    version(reader, 0)
    proc = subprocess.Popen(  # this interpreter, running OTHER
        [sys.executable, "-c", OTHER, str(reader.parent.parent), str(sync)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (sync / "started").exists():  # their module runs, and waits for "go"
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the other process's module never started"
            time.sleep(0.02)
        theirs = Path((sync / "snapshot").read_text())
        fill(host, reader, range(1, 9))  # this kernel edits and takes up 8 more versions
        filled = stored_bytes(store)
        (sync / "go").write_text("")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"head": head(0), "size": DATA_BYTES}, err
    assert (theirs / "data.bin").exists()
    # bounded all the same: only theirs is kept past the budget
    assert filled <= (BUDGET_MB << 20) + DATA_BYTES + 16_384, (filled, len(snapshots(store)))


def test_a_mistyped_budget_warns_and_keeps_the_default(
    host: mnb.ModuleHost, reader: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS_MAX_MB", "0")
    with pytest.warns(UserWarning, match=r"\$MURMUR_NB_SNAPSHOTS_MAX_MB='0' is not a bound"):
        fill(host, reader, range(5))
    assert len(snapshots(store)) == 5  # 4 GiB: nothing removed, nor the newest


def test_a_hard_linked_file_changed_through_its_other_name_never_reaches_the_snapshot(
    host: mnb.ModuleHost, reader: Path, store: Path, tmp_path: Path
) -> None:
    """uv's virtualenvs hard-link files from uv's cache into a module folder: the snapshot
    must hold a copy, or a write through the cache's name changes what runs after it was
    checked (and approved)."""
    cached = tmp_path / "uv-cache-file"
    cached.write_bytes(head(1).encode().ljust(DATA_BYTES, b"."))
    os.link(cached, reader / "data.bin")
    call = host.prepare("reader.read", approve=True)
    assert call.run({}).result == {"head": head(1), "size": DATA_BYTES}
    with cached.open("r+b") as f:  # in place, through the other name: the same inode
        f.write(head(2).encode())
    assert (reader / "data.bin").read_bytes().startswith(head(2).encode())  # the change is real
    assert call.run({}).result == {"head": head(1), "size": DATA_BYTES}  # not what runs
    assert host.invoke("reader.read", approve=True).result["head"] == head(2)  # a new version
