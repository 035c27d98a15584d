"""Hostile conversation records: what a record folder others can write to can hold.

The records are read by the notebook (``read_conversation(s)``, the explorer) and on a hook
guest's behalf (``read-messages`` within the call's budget). Each test lands the hostile
record for real (sparse files, many records) and measures the read from outside.

Before the fixes: a record of 256 GiB holding a byte of data every 64 MiB (a few MiB on
disk) was read hole by hole, 8 MiB past each byte, so loading it took about a minute (164 s
for 1 TiB) and a hook's read of it never ended before its deadline. ``read_conversations``
of 400 one-line records whose roles differ (2,000 characters each) grew the kernel by 806 MiB
and took 7.6 s: every record's frame was given every role before the concatenation. A hook
of 8 MiB reading a record that holds one message line of 96 MiB made the kernel read and
parse the line whole on the hook's behalf, growing by about half a gigabyte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import murmur_nb as mnb

_APPARENT = 256 << 30  # what the records claim to hold
_EVERY = 64 << 20  # a byte of data this often: 4,096 blocks, 16 MiB on disk

_READ_SCATTERED = """
import json, sys, time
from pathlib import Path
import murmur_nb as mnb
from murmur_nb._conversations.budget import ReadBudget  # private: a hook read's own bound

home, out = Path(sys.argv[1]), {}
for context_id in ("bytes", "newlines"):
    started = time.process_time()
    frame = mnb.read_conversation(context_id, home, progress=False)
    out[context_id] = [frame["id"].tolist(), frame.attrs["skipped_lines"]]
    out[context_id + "_cpu_s"] = time.process_time() - started
    reader = mnb.ConversationStore(home).reader(context_id)  # a fresh index, as a hook's
    try:
        page = reader.read_messages(None, 100, budget=ReadBudget(4 << 20, time.monotonic() + 5))
        out[context_id + "_hook"] = [m.id for m in page.messages]
    except Exception as exc:
        out[context_id + "_hook"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def _scattered_record(home: Path, context_id: str, mark: bytes) -> None:
    """A record of :data:`_APPARENT` bytes: a message, then ``mark`` every :data:`_EVERY`
    bytes with holes between (one line holding NULs, or a line of NULs per mark), then a
    message after the last hole."""
    with mnb.RecordWriter(home, context_id, stamp=False) as writer:
        writer.append("user", "first", id="m0")
    path = home / "conversations" / f"{context_id}.jsonl"
    with path.open("r+b") as fh:
        for offset in range(_EVERY, _APPARENT, _EVERY):
            fh.seek(offset)
            fh.write(mark)
        fh.seek(_APPARENT)
        fh.write(b'\n{"id":"m1","role":"user","content":"last"}\n')


def test_a_sparse_record_with_scattered_data_is_read_by_its_data_not_its_size(
    tmp_path: Path,
) -> None:
    """A record claiming 256 GiB with a byte every 64 MiB (16 MiB on disk): each byte made
    the reader read 8 MiB (16 MiB once a newline followed), holes and all, 32 to 64 GiB in
    all; now each read ends where a hole starts, so the record costs what it holds."""
    _scattered_record(tmp_path, "bytes", b"x")
    _scattered_record(tmp_path, "newlines", b"\n")
    assert (tmp_path / "conversations" / "bytes.jsonl").stat().st_blocks * 512 < 64 << 20
    package = Path(mnb.__file__).resolve().parents[1]
    try:
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", _READ_SCATTERED, str(tmp_path)],
            capture_output=True, text=True, timeout=30, check=False,
            env={**os.environ, "PYTHONPATH": str(package)},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("reading two sparse records of 256 GiB took more than 30 s")
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["bytes"] == [["m0", "m1"], 1]
    assert got["newlines"] == [["m0", "m1"], _APPARENT // _EVERY]
    assert got["bytes_hook"] == got["newlines_hook"] == ["m1", "m0"]
    assert got["bytes_cpu_s"] < 5.0
    assert got["newlines_cpu_s"] < 5.0


#: a child's lines that measure its peak memory from here on: ``status("VmHWM") - before``
_PEAK_FROM_NOW = """
def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))

with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak RSS (VmHWM) starts again from what the process holds now
before = status("VmRSS")
"""

_READ_MANY = """
import json, sys, time
import murmur_nb as mnb

home = sys.argv[1]
mnb.read_conversation("r0", home, progress=False)  # pandas and Arrow loaded

""" + _PEAK_FROM_NOW + """frame = mnb.read_conversations(home, progress=False)
print(json.dumps({
    "rows": len(frame), "roles": len(frame["role"].cat.categories),
    "first": [frame["context_id"][0], frame["role"][0][:8]],
    "growth": status("VmHWM") - before,
}))
"""


def test_many_records_of_distinct_roles_load_in_memory_that_grows_with_them(
    tmp_path: Path,
) -> None:
    """400 records of one message each, every role its own 2,000 characters: each record's
    frame was given all 400 roles as categories before they were joined, a copy of every
    role per record (806 MiB; 3 GB for 5,000 records of short roles). The roles are now
    joined once, by their codes."""
    count = 400
    for k in range(count):
        with mnb.RecordWriter(tmp_path, f"r{k}", stamp=False) as writer:
            writer.append(f"{k:04d}" * 500, "hello", id="m0")
    package = Path(mnb.__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", _READ_MANY, str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(package)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["rows"] == got["roles"] == count
    assert got["first"] == ["r0", "0000" * 2]
    assert got["growth"] < 200 << 20


_HOOK_READS_A_HUGE_LINE = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from _wat import assemble
import murmur_nb as mnb

home, capsule = Path(sys.argv[1]), Path(sys.argv[1]) / "capsule"
(capsule / "hooks").mkdir(parents=True)
(capsule / "hooks" / "guest.wasm").write_bytes(assemble("guest.wat"))
(capsule / "murmur.yaml").write_text(
    "hooks:\\n  reader:\\n    component: hooks/guest.wasm\\n"
    "    capabilities: {conversation: {read: true}}\\n"
    "    limits: {time_ms: 3000, memory_mib: 8}\\n"
)
store = mnb.ConversationStore(home)
hooks = mnb.HookHost.from_config(capsule / "murmur.yaml", conversations=store)
hooks.task_start(task_id="!read", context_id="small")  # wasmtime and the guest loaded

""" + _PEAK_FROM_NOW + """result = hooks.task_start(task_id="!read", context_id="big")["reader"]
growth = status("VmHWM") - before
page = store.reader("big").read_messages(None, 100)  # the notebook's read: no budget
print(json.dumps({"ok": result.ok, "value": result.value, "error": result.error,
                  "growth": growth, "notebook": [m.id for m in page.messages]}))
"""


def test_a_hook_never_makes_the_kernel_read_a_line_larger_than_its_memory(
    tmp_path: Path,
) -> None:
    """A record holding one message line of 96 MiB, read by a hook of 8 MiB: the index read
    the line whole and parsed it on the hook's behalf, growing the kernel by about half a
    gigabyte (and by seconds past the call's time limit for a longer line) to tell whether it
    is a message. A line longer than the hook's memory is now ``unavailable``, naming its size
    and the limit to raise, before it is read; the notebook's own read still serves it."""
    with mnb.RecordWriter(tmp_path, "small", stamp=False) as writer:
        writer.append("user", "hi", id="s0")
    with mnb.RecordWriter(tmp_path, "big", stamp=False) as writer:
        writer.append("user", "first", id="m0")
        writer.append_raw(b'{"id":"huge","role":"user","content":"')
        for _ in range(4):
            writer.append_raw(b"a" * (24 << 20))
        writer.append_raw(b'"}\n')
        writer.append("user", "last", id="m1")
    tests = Path(__file__).resolve().parent
    package = Path(mnb.__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", _HOOK_READS_A_HUGE_LINE, str(tmp_path), str(tests)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(package)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["growth"] < 48 << 20
    assert not got["ok"], got["value"]
    assert got["error"].startswith("unavailable: ")
    assert "line of message 'huge' at byte 44 of the record of context 'big'" in got["error"]
    assert "96 MiB" in got["error"]
    assert "memory limit of 8 MiB" in got["error"]
    assert "limits.memory_mib" in got["error"]
    assert got["notebook"] == ["m1", "huge", "m0"]
