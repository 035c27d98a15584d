"""The read-messages API over conversation records: pages, limits, the message test, errors.

Records are written line by line with the package's RecordWriter, the way the runtime
appends them; lines that are not messages are landed with ``append_raw``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import murmur_nb as mnb

MESSAGE_FIELDS = ("id", "role", "content", "name", "created_at")


def write_messages(home: Path, context_id: str, count: int, start: int = 0) -> list[str]:
    ids = []
    with mnb.RecordWriter(home, context_id, stamp=False) as writer:
        for k in range(start, start + count):
            ids.append(writer.append("user", f"message {k}", id=f"m{k}"))
    return ids


def walk(reader: mnb.ConversationReader, limit: int = 100) -> list[mnb.MessagePage]:
    pages = [reader.read_messages(None, limit)]
    while pages[-1].next_cursor is not None:
        pages.append(reader.read_messages(pages[-1].next_cursor, limit))
    return pages


def error_of(call: Any) -> mnb.ConversationReadError:
    with pytest.raises(mnb.ConversationReadError) as info:
        call()
    return info.value


# --------------------------------------------------------------------------- pages


def test_pages_are_newest_first_and_end_with_no_cursor(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx-1", 250)
    reader = mnb.ConversationStore(tmp_path).reader("ctx-1", granted=True)

    first = reader.read_messages(None, 100)
    assert [m.id for m in first.messages] == [f"m{k}" for k in range(249, 149, -1)]
    assert first.total == 250
    assert isinstance(first.next_cursor, str)

    second = reader.read_messages(cursor=first.next_cursor, limit=100)
    assert [m.id for m in second.messages] == [f"m{k}" for k in range(149, 49, -1)]
    third = reader.read_messages(second.next_cursor, 100)
    assert [m.id for m in third.messages] == [f"m{k}" for k in range(49, -1, -1)]
    assert third.next_cursor is None
    assert third.total == 250
    assert third.messages[0] == mnb.Message("m49", "user", "message 49", None, None)


def test_message_is_a_small_frozen_value(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("assistant", "hi", id="a1", name="bot", created_at="2026-01-02T03:04:05Z")
    message = mnb.ConversationStore(tmp_path).reader("ctx").read_messages().messages[0]
    assert message == mnb.Message(
        id="a1", role="assistant", content="hi", name="bot", created_at="2026-01-02T03:04:05Z"
    )
    assert message.__slots__ == MESSAGE_FIELDS
    with pytest.raises(AttributeError):
        message.content = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("limit", "served"), [(0, 1), (-7, 1), (1, 1), (37, 37), (100, 100), (101, 100), (2**40, 100)]
)
def test_limit_is_clamped_to_1_through_100(tmp_path: Path, limit: int, served: int) -> None:
    write_messages(tmp_path, "ctx", 150)
    page = mnb.ConversationStore(tmp_path).reader("ctx").read_messages(None, limit)
    assert len(page.messages) == served
    assert page.messages[0].id == "m149"


def test_limit_zero_still_makes_progress(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx", 5)
    pages = walk(mnb.ConversationStore(tmp_path).reader("ctx"), limit=0)
    assert [m.id for p in pages for m in p.messages] == ["m4", "m3", "m2", "m1", "m0"]
    assert [p.next_cursor is None for p in pages] == [False] * 4 + [True]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(count=st.integers(0, 330), limit=st.integers(-3, 140))
def test_walk_covers_the_record_once(
    tmp_path_factory: pytest.TempPathFactory, count: int, limit: int
) -> None:
    home = tmp_path_factory.mktemp("home")
    write_messages(home, "ctx", count)
    pages = walk(mnb.ConversationStore(home).reader("ctx"), limit)
    clamped = min(max(limit, 1), 100)
    assert [m.id for p in pages for m in p.messages] == [f"m{k}" for k in reversed(range(count))]
    assert len(pages) == max(1, -(-count // clamped))
    # next_cursor is None only on the page that reached the oldest message
    assert [p.next_cursor is None for p in pages] == [False] * (len(pages) - 1) + [True]
    assert all(len(p.messages) == clamped for p in pages[:-1])
    assert all(p.total == count for p in pages)


def test_exactly_one_full_page_has_no_cursor(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx", 100)
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    assert reader.read_messages(None, 100).next_cursor is None
    write_messages(tmp_path, "ctx", 1, start=100)
    page = reader.read_messages(None, 100)
    assert page.next_cursor is not None
    last = reader.read_messages(page.next_cursor, 100)
    assert [m.id for m in last.messages] == ["m0"]
    assert last.next_cursor is None


NOT_MESSAGES = [
    b"\n",
    b"   \n",
    b"not json\n",
    b"[1, 2, 3]\n",
    b'"a string"\n',
    b"42\n",
    b"null\n",
    b'{"role": "user", "content": "no id"}\n',
    b'{"id": "", "role": "user", "content": "empty id"}\n',
    b'{"id": 7, "role": "user", "content": "numeric id"}\n',
    b'{"id": "x1", "content": "no role"}\n',
    b'{"id": "x2", "role": null, "content": "null role"}\n',
    b'{"id": "x3", "role": "user"}\n',
    b'{"id": "x4", "role": "user", "content": {"not": "a string"}}\n',
    b'{"id": "x5", "role": "assistant", "content": null}\n',
    b'{"id": "x6", "role": "user", "content": "trailing" } junk\n',
    b'{"id": "x7", "role": "user", "content": "bad utf-8 \xff\xfe"}\n',
    b'{"id": "x8", "role": "user", "content": "lone \\ud800 surrogate"}\n',
    b"\xef\xbb\xbf{}\n",
]


def test_lines_that_are_not_messages_are_skipped_and_not_counted(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        for k, junk in enumerate(NOT_MESSAGES):
            writer.append("user", f"message {k}", id=f"m{k}")
            writer.append_raw(junk)
        writer.append("tool", None, id="t-null")  # a tool body may be any JSON value
        writer.append_raw(b'{"id":"p1","role":"user","content":"partial, no newline yet"}')
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    page = reader.read_messages(None, 100)
    expected = [f"m{k}" for k in range(len(NOT_MESSAGES))] + ["t-null"]
    assert page.total == len(expected)
    assert [m.id for m in page.messages] == expected[::-1]
    assert page.next_cursor is None

    # once its newline lands, the partial line is a message and counts
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        writer.append_raw(b"\n")
    page = reader.read_messages(None, 100)
    assert page.total == len(expected) + 1
    assert page.messages[0].id == "p1"


def test_the_writer_refuses_what_the_record_would_not_keep(tmp_path: Path) -> None:
    """A time without its zone read back as NaT, and a NaN in a tool result was written as
    null (orjson's way): each is refused, and nothing is written."""
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        for when in ("yesterday", "2026-01-02T03:04:05", "2026-01-02"):
            with pytest.raises(ValueError, match="is not an RFC 3339 time with its zone"):
                writer.append("user", "x", created_at=when)
        with pytest.raises(ValueError, match=r"holds nan, which JSON cannot carry"):
            writer.append("tool", {"rows": [1.0, float("nan")]}, tool_call_id="c1")
        with pytest.raises(ValueError, match=r"holds inf"):
            writer.append("tool", [{"x": float("inf")}], tool_call_id="c1")
        kept = writer.append("tool", {"rows": [1.0, None]}, tool_call_id="c1",
                             created_at="2026-01-02T03:04:05+02:00")  # fmt: skip
    assert [m.id for m in mnb.ConversationStore(tmp_path).reader("ctx").read_messages().messages
            ] == [kept]  # fmt: skip


def test_crlf_lines_and_surrounding_whitespace_are_messages(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        writer.append_raw(b'{"id":"a","role":"user","content":"x"}\r\n')
        writer.append_raw(b'  {"id":"b","role":"user","content":"y"}  \n')
    page = mnb.ConversationStore(tmp_path).reader("ctx").read_messages(None, 10)
    assert [m.id for m in page.messages] == ["b", "a"]


def test_optional_keys_of_the_wrong_type_are_absent(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        writer.append_raw(b'{"id":"a","role":"user","content":"x","name":5,"created_at":false}\n')
    (message,) = mnb.ConversationStore(tmp_path).reader("ctx").read_messages().messages
    assert (message.name, message.created_at) == (None, None)


def test_total_is_a_snapshot_at_serve_time(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx", 150)
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    first = reader.read_messages(None, 100)
    assert first.total == 150
    write_messages(tmp_path, "ctx", 30, start=150)
    second = reader.read_messages(first.next_cursor, 100)
    assert second.total == 180
    # still anchored at the oldest message: the rest of the first snapshot, nothing new
    assert [m.id for m in second.messages] == [f"m{k}" for k in range(49, -1, -1)]
    assert second.next_cursor is None


def test_no_record_is_an_empty_page(tmp_path: Path) -> None:
    store = mnb.ConversationStore(tmp_path)
    page = store.reader("never-written").read_messages(None, 100)
    assert page == mnb.MessagePage(messages=[], next_cursor=None, total=0)
    # an empty file, or one holding only a line still being written, is the same
    with mnb.RecordWriter(tmp_path, "empty"):
        pass
    assert store.reader("empty").read_messages().total == 0
    with mnb.RecordWriter(tmp_path, "partial") as writer:
        writer.append_raw('{"id":"a","role":"user","content":"x"}')
    assert store.reader("partial").read_messages() == mnb.MessagePage([], None, 0)


def test_empty_sources_for_process_transport_and_before_the_first_task(tmp_path: Path) -> None:
    store = mnb.ConversationStore(tmp_path)
    for reader in (mnb.ConversationReader.empty(), store.reader(None, granted=True)):
        assert reader.context_id is None
        assert reader.read_messages(None, 100) == mnb.MessagePage([], None, 0)
        assert reader.read_messages(None, 0).total == 0
        assert str(error_of(lambda r=reader: r.read_messages("a" * 36, 5))) == "invalid-cursor"
    ungranted = mnb.ConversationReader.empty(granted=False)
    assert str(error_of(lambda: ungranted.read_messages(None, 1))) == "not-granted"


def test_ungranted_reader_refuses_every_read(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx", 3)
    (tmp_path / "conversations" / "dir.jsonl").mkdir()
    store = mnb.ConversationStore(tmp_path)
    granted = store.reader("ctx").read_messages(None, 1)
    for context_id in ("ctx", "missing", "dir"):
        reader = store.reader(context_id, granted=False)
        assert reader.granted is False
        for cursor in (None, "garbage", granted.next_cursor):
            err = error_of(lambda r=reader, c=cursor: r.read_messages(c, 10))
            assert (err.code, str(err)) == ("not-granted", "not-granted")


# ------------------------------------------------------ unreadable records, context ids


def test_a_folder_at_the_record_path_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "conversations" / "ctx.jsonl").mkdir(parents=True)
    err = error_of(lambda: mnb.ConversationStore(tmp_path).reader("ctx").read_messages())
    assert err.code == "unavailable"
    assert str(err) == "unavailable: the record of context 'ctx' is a folder"
    assert str(tmp_path) not in str(err)  # guests never see host paths


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_or_device_at_the_record_path_is_unavailable_and_never_blocks(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "conversations"
    folder.mkdir()
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "dev.jsonl").symlink_to("/dev/zero")
    store = mnb.ConversationStore(tmp_path)
    for context_id, kind in (
        ("pipe", "not a regular file"),
        ("dev", "a symbolic link; records are read only as regular files"),
    ):
        err = error_of(lambda c=context_id: store.reader(c).read_messages())
        assert str(err) == f"unavailable: the record of context {context_id!r} is {kind}"


def test_an_unreadable_record_is_unavailable(tmp_path: Path) -> None:
    folder = tmp_path / "conversations"
    folder.mkdir()
    (folder / "loop.jsonl").symlink_to("loop.jsonl")  # exists, and is never followed
    err = error_of(lambda: mnb.ConversationStore(tmp_path).reader("loop").read_messages())
    assert err.code == "unavailable"
    assert str(err).startswith("unavailable: the record of context 'loop' is a symbolic link")


_READ_AS_UNPRIVILEGED = """
import sys
import murmur_nb as mnb
try:
    mnb.ConversationStore(sys.argv[1]).reader("ctx").read_messages()
except mnb.ConversationReadError as err:
    print(err.code, str(err), sep="\\n")
"""


def test_a_record_without_read_permission_is_unavailable(tmp_path: Path) -> None:
    write_messages(tmp_path, "ctx", 1)
    record = tmp_path / "conversations" / "ctx.jsonl"
    record.chmod(0)
    try:
        if os.geteuid() != 0:
            err = error_of(lambda: mnb.ConversationStore(tmp_path).reader("ctx").read_messages())
            code, message = err.code, str(err)
        else:
            # root reads any file whatever its mode; without the two DAC capabilities
            # (dropped from the bounding set for one child) it cannot, like anyone else
            setpriv = shutil.which("setpriv")
            assert setpriv is not None, "running as root needs setpriv (util-linux)"
            package = Path(mnb.__file__).resolve().parents[1]
            out = subprocess.run(
                [
                    setpriv,
                    "--bounding-set=-dac_override,-dac_read_search",
                    sys.executable,
                    "-c",
                    _READ_AS_UNPRIVILEGED,
                    str(tmp_path),
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
                env={**os.environ, "PYTHONPATH": str(package)},
            )
            code, message = out.stdout.splitlines()
    finally:
        record.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert code == "unavailable"
    assert message == "unavailable: the record of context 'ctx' cannot be read: Permission denied"
    assert str(tmp_path) not in message


_READ_IN_A_CAPPED_KERNEL = """
import json, resource, sys, time
from pathlib import Path
import murmur_nb as mnb

home = Path(sys.argv[1])
mnb.read_conversation("warm", home, progress=False)  # pandas and Arrow loaded

def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))

_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (status("VmSize") + (512 << 20), hard))
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak RSS (VmHWM) starts again from what the process holds now
rss_before, cpu_before = status("VmRSS"), time.process_time()
store, out = mnb.ConversationStore(home), {}
try:
    for step in ("hole", "appended"):
        if step == "appended":  # the runtime writes again after the crash's hole
            with open(home / "conversations" / "ctx.jsonl", "ab") as fh:
                fh.write(b'\\n{"id":"m2","role":"user","content":"after"}\\n')
        frame = mnb.read_conversation("ctx", store, progress=False)
        page = store.reader("ctx").read_messages(None, 100)
        out[step] = [frame["id"].tolist(), frame.attrs["skipped_lines"],
                     [m.id for m in page.messages]]
except BaseException as exc:
    out["raised"] = f"{type(exc).__name__}: {exc}"
out["cpu_s"] = time.process_time() - cpu_before
out["rss_growth"] = status("VmHWM") - rss_before
print(json.dumps(out))
"""


def test_a_hole_in_the_record_is_passed_over_not_read_whole(tmp_path: Path) -> None:
    """A record ending in a hole (a sparse file, 4 KiB on disk; or the NULs a crash leaves
    after the last line) read as one line without its newline, re-read whole, doubling, on
    each read: 1 GiB long took 1.6 GiB and 17 s, and a kernel whose memory can grow by
    512 MiB raised MemoryError on this 16 GiB one. The line is now searched for its newline
    without being held, holes never read; a line holding a NUL is not JSON, so once the
    runtime appends again it is passed over (one skipped line) and the rest is read."""
    write_messages(tmp_path, "warm", 3)
    write_messages(tmp_path, "ctx", 2)
    os.truncate(tmp_path / "conversations" / "ctx.jsonl", 16 << 30)  # a hole: 0 bytes on disk
    package = Path(mnb.__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", _READ_IN_A_CAPPED_KERNEL, str(tmp_path)],
        capture_output=True, text=True, timeout=240, check=False,
        env={**os.environ, "PYTHONPATH": str(package)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert "raised" not in got, got["raised"]
    assert got["hole"] == [["m0", "m1"], 0, ["m1", "m0"]]
    assert got["appended"] == [["m0", "m1", "m2"], 1, ["m2", "m1", "m0"]]
    assert got["cpu_s"] < 2.0
    assert got["rss_growth"] < 128 << 20


def test_lines_longer_than_a_scan_chunk_are_read_once_complete(tmp_path: Path) -> None:
    """A message line longer than the index's 8 MiB chunk, landing in two writes, is left
    out until its newline lands, then read whole; a long line that is not JSON is skipped."""
    big = compact({"id": "big", "role": "tool", "content": {"text": "x" * (9 << 20)}})
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("user", "first", id="m0")
        writer.append_raw(b"y" * (9 << 20) + b"\n")
        writer.append_raw(big[: len(big) // 2])
    store = mnb.ConversationStore(tmp_path)
    reader = store.reader("ctx")
    assert [m.id for m in reader.read_messages().messages] == ["m0"]
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append_raw(big[len(big) // 2 :] + "\n")
        writer.append("user", "last", id="m1")
    page = reader.read_messages()
    assert [m.id for m in page.messages] == ["m1", "big", "m0"]
    assert json.loads(page.messages[1].content)["body"] == {"text": "x" * (9 << 20)}
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    assert frame["id"].tolist() == ["m0", "big", "m1"]
    assert frame.attrs["skipped_lines"] == 1


def test_bad_utf8_is_handled_per_line(tmp_path: Path) -> None:
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("user", "before", id="a")
        writer.append_raw(b'{"id":"b","role":"user","content":"\xc3\x28"}\n')
        writer.append("user", "after \u00e9\u4e2d\U0001f600", id="c")
    page = mnb.ConversationStore(tmp_path).reader("ctx").read_messages()
    assert [(m.id, m.content) for m in page.messages] == [
        ("c", "after \u00e9\u4e2d\U0001f600"),
        ("a", "before"),
    ]


BAD_CONTEXT_IDS = [
    "",
    "../x",
    "..",
    ".",
    "a/b",
    "/abs",
    "a\\b",
    "x" * 129,
    ".hidden",
    "-dash",
    "_under",
    "a b",
    "a\x00b",
    "ctx\n",
    "ctx.jsonl/../x",
    "caf\u00e9",
    "\uff11",
]


@pytest.mark.parametrize("context_id", BAD_CONTEXT_IDS)
def test_context_ids_that_are_not_plain_names_are_refused(tmp_path: Path, context_id: str) -> None:
    with pytest.raises(mnb.InvalidContextId) as info:
        mnb.ConversationStore(tmp_path).reader(context_id)
    assert "not a context id" in str(info.value)
    assert info.value.code == "invalid_context_id"
    with pytest.raises(mnb.InvalidContextId):
        mnb.read_conversation(context_id, tmp_path)
    with pytest.raises(mnb.InvalidContextId):
        mnb.RecordWriter(tmp_path, context_id)
    assert not (tmp_path / "conversations").exists()


def test_a_traversing_context_id_never_reaches_the_file_it_names(tmp_path: Path) -> None:
    # Records a path-joining reader would find for "../outside" and "a/b".
    write_messages(tmp_path / "conversations" / "a", "b", 0)
    (tmp_path / "outside.jsonl").write_text('{"id":"o","role":"user","content":"x"}\n')
    (tmp_path / "conversations" / "a" / "b.jsonl").write_text(
        '{"id":"ab","role":"user","content":"x"}\n'
    )
    opened: list[Any] = []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event in {"open", "os.listdir", "os.scandir"} and recording:
            opened.append(args)

    recording = False
    sys.addaudithook(audit)
    store = mnb.ConversationStore(tmp_path)
    recording = True
    try:
        for context_id in ("../outside", "a/b"):
            with pytest.raises(mnb.InvalidContextId):
                store.reader(context_id).read_messages()
    finally:
        recording = False
    assert opened == []


@pytest.mark.parametrize("context_id", ["a", "ctx-1", "A.b_c-9", "0", "x" * 128, "a..b"])
def test_plain_context_ids_are_accepted(tmp_path: Path, context_id: str) -> None:
    assert mnb.ConversationStore(tmp_path).reader(context_id).context_id == context_id


def test_non_string_context_ids_are_refused(tmp_path: Path) -> None:
    for bad in (5, b"ctx", ["ctx"]):
        with pytest.raises(mnb.InvalidContextId):
            mnb.ConversationStore(tmp_path).reader(bad)  # type: ignore[arg-type]


# ------------------------------------------------------------- the tool-message envelope

json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
absent = object()


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=json_values,
    call_id=st.sampled_from([absent, None, "call_1", "", 17, ["x"]]),
    is_error=st.sampled_from([absent, None, True, False, "yes", 0]),
)
def test_tool_messages_carry_the_envelope(
    tmp_path_factory: pytest.TempPathFactory, body: Any, call_id: Any, is_error: Any
) -> None:
    home = tmp_path_factory.mktemp("home")
    line: dict[str, Any] = {"id": "t1", "role": "tool", "content": body}
    if call_id is not absent:
        line["tool_call_id"] = call_id
    if is_error is not absent:
        line["is_error"] = is_error
    with mnb.RecordWriter(home, "ctx") as writer:
        writer.append_raw(json.dumps(line, indent=1).replace("\n", " ") + "\n")
    (message,) = mnb.ConversationStore(home).reader("ctx").read_messages().messages
    expected = {
        "__murmur_tool_msg__": True,
        "tool_call_id": call_id if isinstance(call_id, str) else None,
        "is_error": is_error if isinstance(is_error, bool) else None,
        "body": body,
    }
    assert message.role == "tool"
    assert message.content == compact(expected)
    assert list(json.loads(message.content)) == list(expected)


def test_tool_envelope_keeps_floats_and_unicode(tmp_path: Path) -> None:
    body = {"pi": 3.25, "big": 1e300, "neg": -0.5, "text": 'caf\u00e9 \u2603 "q"\n', "n": [1.0]}
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("tool", body, id="t", tool_call_id="c9", is_error=False)
        writer.append("assistant", "plain text stays as is", id="a")
    page = mnb.ConversationStore(tmp_path).reader("ctx").read_messages()
    assert page.messages[0].content == "plain text stays as is"
    envelope = json.loads(page.messages[1].content)
    assert envelope == {
        "__murmur_tool_msg__": True,
        "tool_call_id": "c9",
        "is_error": False,
        "body": body,
    }
    assert " " not in page.messages[1].content.replace(body["text"][:-1].replace('"', '\\"'), "")


def test_tool_envelope_for_deeply_nested_bodies(tmp_path: Path) -> None:
    body: Any = "leaf"
    for depth in range(600):
        body = [body] if depth % 2 else {"k": body}
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("tool", "shallow", id="s")
        writer.append_raw(compact({"id": "deep", "role": "tool", "content": body}) + "\n")
    page = mnb.ConversationStore(tmp_path).reader("ctx").read_messages()
    assert [m.id for m in page.messages] == ["deep", "s"]
    expected = {"__murmur_tool_msg__": True, "tool_call_id": None, "is_error": None, "body": body}
    assert page.messages[0].content == compact(expected)


LONG_INTEGERS = [
    12345678901234567890123,
    -9223372036854775809,  # the first integer past 64 bits below zero: 19 digits
    18446744073709551616,
    -(10**30),
    10**400,  # past the double range: orjson refuses the line outright
]


@pytest.mark.parametrize("pad", range(9))  # every offset of the digits from a word start
def test_integers_beyond_64_bits_in_tool_bodies_come_back_exact(tmp_path: Path, pad: int) -> None:
    """SPEC §3: a tool result is any JSON value. orjson reads an integer beyond 64 bits as a
    float (or refuses the line once it passes the double range); pages, cold and warm walks
    all give it back exact, and 64-bit integers and digits in strings stay as they were."""
    body = {"long": LONG_INTEGERS, "fit": [2**64 - 1, -(2**63)], "text": "1" * 25, "f": 0.5}
    lines = [
        {"id": "u" * (pad + 1), "role": "user", "content": "9" * 30},
        {"id": "t1", "role": "tool", "content": body, "tool_call_id": "c1"},
        {"id": "t2", "role": "tool", "content": 10**20},
        {"id": "t3", "role": "tool", "content": "plain"},
    ]
    record = "".join(compact(line) + "\n" for line in lines).encode()
    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        writer.append_raw(record)
    expected = [None, body, 10**20, "plain"]
    envelope = {"__murmur_tool_msg__": True, "tool_call_id": "c1", "is_error": None}
    page = mnb.ConversationStore(tmp_path).reader("ctx").read_messages()
    assert page.total == 4
    assert page.messages[2].content == compact({**envelope, "body": body})
    assert page.messages[1].content == compact({**envelope, "tool_call_id": None, "body": 10**20})
    assert page.messages[3].content == "9" * 30
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)  # the walk's own scan
    assert frame["body"].tolist() == expected
    assert frame.attrs["skipped_lines"] == 0
    store = mnb.ConversationStore(tmp_path)
    store.reader("ctx").read_messages()  # the index is warm: the walk reads pages from the file
    assert mnb.read_conversation("ctx", store, progress=False)["body"].tolist() == expected


SNOWFLAKE = "1712345678901234567"  # 19 digits: the line is read again by the stdlib json


def _utf16(ident: str) -> bytes:
    # its run of 19 digits: U+3030 (a wavy dash) is the bytes "00" in UTF-16
    content = "\u3030" * 12 if ident == SNOWFLAKE else ident
    return f'{{"id":"x","role":"user","content":"{content}"}}'.encode("utf-16-le")


REFUSED_WITH_A_LONG_NUMBER = {
    "byte order mark": lambda ident: b'\xef\xbb\xbf{"id":"%s","role":"user","content":"x"}'
    % ident.encode(),
    "lone surrogate": lambda ident: b'{"id":"%s","role":"user","content":"lone \\ud800"}'
    % ident.encode(),
    "lone surrogate in a key": lambda ident: b'{"id":"%s","role":"tool","content":{"\\udc00":1}}'
    % ident.encode(),
    "past the double range": lambda ident: b'{"id":"%s","role":"tool","content":{"v":1e400}}'
    % ident.encode(),
    "utf-16": _utf16,
}


@pytest.mark.parametrize("line", REFUSED_WITH_A_LONG_NUMBER.values(),
                         ids=REFUSED_WITH_A_LONG_NUMBER.keys())  # fmt: skip
def test_a_long_number_does_not_make_a_line_orjson_refuses_a_message(
    tmp_path: Path, line: Any
) -> None:
    """A line orjson refuses (not JSON it reads) is skipped, whatever numbers it holds: the
    stdlib ``json``, which reads the lines with a run of 19 digits again, took a byte order
    mark, UTF-16, a lone surrogate (a string UTF-8 cannot encode: a guest's lowering and the
    frame's Arrow strings failed on it) and 1e400 (as infinity, written as null), so one
    such line stopped every page holding it, or the whole frame."""
    with mnb.RecordWriter(tmp_path, "ctx", stamp=False) as writer:
        writer.append("user", "before", id="m0")
        writer.append_raw(line(SNOWFLAKE) + b"\n")
        writer.append("tool", {"n": 1}, id="m1")
        writer.append_raw(line("m2") + b"\n")  # the same without a long number
        writer.append("user", "after", id="m3")
    expected = ["m3", "m1", "m0"]
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    page = reader.read_messages(None, 100)
    assert [m.id for m in page.messages] == expected
    for message in page.messages:  # as a guest receives it
        message.content.encode("utf-8")
    pages = walk(reader, limit=1)
    assert [m.id for page in pages for m in page.messages] == expected
    frame = mnb.read_conversation("ctx", tmp_path, progress=False)
    assert frame["id"].tolist() == expected[::-1]
    assert frame.attrs["skipped_lines"] == 2
    assert frame["body"].tolist() == [None, {"n": 1}, None]


# --------------------------------------------------------------------------- store and writer


def test_store_home_defaults_to_murmur_home_then_home_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path / "mh"))
    assert mnb.ConversationStore().home == tmp_path / "mh"
    monkeypatch.setenv("MURMUR_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert mnb.ConversationStore().home == tmp_path / "user" / ".murmur"
    monkeypatch.delenv("MURMUR_HOME")
    store = mnb.ConversationStore()
    assert store.record_path("c") == tmp_path / "user" / ".murmur" / "conversations" / "c.jsonl"


def test_contexts_lists_records_only(tmp_path: Path) -> None:
    store = mnb.ConversationStore(tmp_path)
    assert store.contexts() == []
    for context_id in ("b-2", "a.1", "z"):
        write_messages(tmp_path, context_id, 1)
    folder = tmp_path / "conversations"
    (folder / "folder.jsonl").mkdir()
    (folder / "notes.txt").write_text("x")
    (folder / ".hidden.jsonl").write_text("x")
    (folder / "x.jsonl.bak").write_text("x")
    assert store.contexts() == ["a.1", "b-2", "z"]


def test_writer_lines_are_what_the_runtime_writes(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta, timezone

    with mnb.RecordWriter(tmp_path, "ctx") as writer:
        generated = writer.append("user", "hello")
        writer.append(
            "assistant", "hi", id="a", name="bot", created_at=datetime(2026, 1, 2, tzinfo=UTC)
        )
        writer.append(
            "tool",
            {"rows": [1, 2]},
            id="t",
            created_at=datetime(2026, 1, 2, 5, tzinfo=timezone(timedelta(hours=2))),
            tool_call_id="c",
            is_error=True,
        )
        with pytest.raises(TypeError, match="must be a string"):
            writer.append("user", {"not": "text"})
        with pytest.raises(ValueError, match="no time zone"):
            writer.append("user", "x", created_at=datetime(2026, 1, 1))
    lines = (tmp_path / "conversations" / "ctx.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    assert all(line.endswith(b"\n") and b"\n" not in line[:-1] for line in lines)
    first = json.loads(lines[0])
    assert first["id"] == generated and generated.startswith("msg_")
    assert datetime.fromisoformat(first["created_at"]).tzinfo is not None
    assert lines[1] == (
        b'{"id":"a","role":"assistant","content":"hi","name":"bot",'
        b'"created_at":"2026-01-02T00:00:00Z"}\n'
    )
    assert json.loads(lines[2]) == {
        "id": "t",
        "role": "tool",
        "content": {"rows": [1, 2]},
        "created_at": "2026-01-02T05:00:00+02:00",
        "tool_call_id": "c",
        "is_error": True,
    }
    assert writer.closed
    writer.close()  # closing twice is harmless
    with pytest.raises(ValueError, match="closed"):
        writer.append("user", "late")


def test_buffered_writer_shows_lines_on_flush(tmp_path: Path) -> None:
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    with mnb.RecordWriter(tmp_path, "ctx", buffered=True) as writer:
        writer.append("user", "one", id="1")
        assert reader.read_messages().total == 0
        writer.flush()
        assert reader.read_messages().total == 1
        writer.append("user", "two", id="2")
    assert [m.id for m in reader.read_messages().messages] == ["2", "1"]


def test_writer_accepts_a_store(tmp_path: Path) -> None:
    store = mnb.ConversationStore(tmp_path)
    with mnb.RecordWriter(store, "ctx", stamp=False) as writer:
        writer.append("user", "x", id="x")
    assert writer.path == store.record_path("ctx")
    assert store.reader("ctx").read_messages().messages == [mnb.Message("x", "user", "x")]


def test_a_reader_as_of_a_count_serves_the_record_as_it_stood_then(murmur_home: Path) -> None:
    """``as_of``: what a replayed window reads. Messages past it, and ones appended since,
    are never served; a cursor minted past it names a position outside that record."""
    with mnb.RecordWriter(murmur_home, "grows") as writer:
        for i in range(12):
            writer.append("user", f"m{i}", id=f"m{i}")
    store = mnb.ConversationStore(murmur_home)
    then = store.reader("grows", as_of=5)
    page = then.read_messages(None, 3)
    assert ([m.id for m in page.messages], page.total) == (["m4", "m3", "m2"], 5)
    with mnb.RecordWriter(murmur_home, "grows") as writer:
        writer.append("user", "later", id="later")
    rest = then.read_messages(page.next_cursor, 100)
    assert ([m.id for m in rest.messages], rest.next_cursor, rest.total) == (["m1", "m0"], None, 5)
    now = store.reader("grows").read_messages(None, 2)  # the whole record: 13, cursor at 11
    assert error_of(lambda: then.read_messages(now.next_cursor, 1)).code == "invalid-cursor"
    assert store.reader("grows", as_of=0).read_messages(None, 100).messages == []
    for bad in (-1, True, 2.0):
        with pytest.raises(ValueError, match="as_of="):
            store.reader("grows", as_of=bad)  # type: ignore[arg-type]
