"""Conversation loading defects found by a trial (D1-D4, D6, D7), each tried for real: files,
links, permissions, and a second process rewriting the record."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import murmur_nb as mnb

PACKAGE = Path(mnb.__file__).resolve().parents[1]


def _record(home: Path, context_id: str, rows: list[dict[str, Any]]) -> Path:
    folder = home / "conversations"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{context_id}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _messages(prefix: str, count: int) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{k}", "role": "user", "content": prefix} for k in range(count)]


def _run_unprivileged(script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` (prints one JSON line) as a user file modes apply to: as root, in a
    child without the two DAC capabilities (as tests/test_conversations.py does)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "running as root needs setpriv (util-linux)"
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    out = subprocess.run(
        [*prefix, sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(PACKAGE)},
    )
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


# D1 ---------------------------------------------------------------------------------------

STAMPS = {
    # not RFC 3339 (Arrow reads them, the library's rule does not): NaT whatever the neighbours
    "2026-01-01T00:00Z": None,
    "2026-01-01T00:00:00+0530": None,
    "2026-01-01T00:00:00+05": None,
    "2026-01-01T00:00:00": None,
    "2026-01-01": None,
    # RFC 3339 forms, some Arrow refuses (lower case, 7 fraction digits, minute 60 offset)
    "2026-01-01 00:00:00Z": "2026-01-01T00:00:00Z",
    "2026-01-01t00:00:00z": "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00.1234567Z": "2026-01-01T00:00:00.123456Z",
    "2026-01-01T00:00:00-00:00": "2026-01-01T00:00:00Z",
    "2026-01-01T05:30:00+05:30": "2026-01-01T00:00:00Z",
    # of the form, but no instant: NaT
    "2026-02-30T00:00:00Z": None,
    "2026-12-31T23:59:60Z": None,
    "0000-01-01T00:00:00Z": None,
}


def test_created_at_is_one_result_per_string_whatever_its_neighbours(tmp_path: Path) -> None:
    """Arrow parsed the whole column when it could and the rule applied only when some other
    stamp made it fail: ``00:00Z`` was a time beside a good stamp and NaT beside a bad one."""
    neighbours = {"good": "2026-05-05T05:05:05Z", "bad": "not a time", "none": None}
    for k, (stamp, expected) in enumerate(STAMPS.items()):
        for label, other in neighbours.items():
            rows = [
                {"id": "a", "role": "user", "content": "x", "created_at": stamp},
                {"id": "b", "role": "user", "content": "x", "created_at": other},
            ]
            _record(tmp_path, f"s{k}-{label}", rows)
            got = mnb.read_conversation(f"s{k}-{label}", tmp_path, progress=False)
            value = got["created_at"].iloc[0]
            if expected is None:
                assert pd.isna(value), (stamp, label)
            else:
                assert value == pd.Timestamp(expected), (stamp, label)


def test_a_bad_stamp_among_many_good_ones_leaves_the_others_parsed(tmp_path: Path) -> None:
    rows = [
        {"id": f"m{k}", "role": "user", "content": "x", "created_at": f"2026-01-01T00:00:{k:02d}Z"}
        for k in range(60)
    ]
    rows[7]["created_at"] = "2026-02-30T00:00:00Z"
    rows[8]["created_at"] = "2026-01-01T00:00Z"
    _record(tmp_path, "many", rows * 1000)
    frame = mnb.read_conversation("many", tmp_path, progress=False)
    stamps = frame["created_at"]
    assert stamps.isna().sum() == 2000
    assert stamps.iloc[60 * 999 + 9] == pd.Timestamp("2026-01-01T00:00:09Z")


# D2 ---------------------------------------------------------------------------------------


def test_a_symlinked_record_is_left_out_like_dangling_links_and_folders(tmp_path: Path) -> None:
    """``contexts()`` followed links (``is_file()``) that every read refuses, so one link
    made ``read_conversations`` raise and lose every other record."""
    _record(tmp_path, "a", _messages("a", 2))
    _record(tmp_path, "b", _messages("b", 1))
    outside = _record(tmp_path / "elsewhere", "x", _messages("x", 1))
    folder = tmp_path / "conversations"
    (folder / "link.jsonl").symlink_to(outside)
    (folder / "inside.jsonl").symlink_to(folder / "a.jsonl")
    (folder / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (folder / "dir.jsonl").mkdir()
    assert mnb.ConversationStore(tmp_path).contexts() == ["a", "b"]
    frame = mnb.read_conversations(tmp_path, progress=False)
    assert frame["id"].tolist() == ["a0", "a1", "b0"]
    with pytest.raises(mnb.ConversationReadError, match="is a symbolic link"):
        mnb.read_conversation("link", tmp_path, progress=False)  # reads still refuse it


# D3 ---------------------------------------------------------------------------------------

_READ_ALL = """
import json, sys, warnings
import murmur_nb as mnb
out = {}
try:
    mnb.read_conversations(sys.argv[1], progress=False)
except mnb.ConversationReadError as err:
    out["raised"] = [err.code, str(err)]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    frame = mnb.read_conversations(sys.argv[1], progress=False, errors="skip")
    lazy = mnb.read_conversations(sys.argv[1], engine="dask", errors="skip")
out["ids"] = frame["id"].tolist()
out["skipped"] = frame.attrs["skipped_records"]
out["dask_ids"] = lazy.compute(scheduler="synchronous")["id"].tolist()
out["dask_skipped"] = lazy.compute(scheduler="synchronous").attrs["skipped_records"]
out["warnings"] = [str(w.message) for w in caught]
print(json.dumps(out))
"""


def test_one_unreadable_record_names_the_fix_and_can_be_skipped(tmp_path: Path) -> None:
    """One record without read permission aborted ``read_conversations``: the other records
    were lost and the message named no way on."""
    for name in ("a", "c"):
        _record(tmp_path, name, _messages(name, 2))
    locked = _record(tmp_path, "b-locked", _messages("b", 2))
    locked.chmod(0)
    try:
        out = _run_unprivileged(_READ_ALL, str(tmp_path))
    finally:
        locked.chmod(stat.S_IRUSR | stat.S_IWUSR)
    code, message = out["raised"]
    assert code == "unavailable"
    assert message.startswith(
        "unavailable: the record of context 'b-locked' cannot be read: Permission denied; "
        f"give this user read permission on {str(locked)!r}"
    )
    assert "errors='skip'" in message
    assert out["ids"] == out["dask_ids"] == ["a0", "a1", "c0", "c1"]
    reason = "the record of context 'b-locked' cannot be read: Permission denied"
    assert out["skipped"] == out["dask_skipped"] == {"b-locked": reason}
    assert len(out["warnings"]) == 2
    assert all("left out 1 record(s)" in w and "'b-locked'" in w for w in out["warnings"])


def test_errors_must_be_raise_or_skip(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="errors must be 'raise' or 'skip'"):
        mnb.read_conversations(tmp_path, errors="ignore")  # type: ignore[arg-type]


# D4 ---------------------------------------------------------------------------------------

_REWRITER = """
import json, os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
generation, until = 1, time.monotonic() + seconds
while time.monotonic() < until:
    count = 20000 + (generation % 3) * 1000
    body = "".join(
        json.dumps({"id": f"g{generation}-{k}", "role": "user", "content": "x" * (k % 30)}) + "\\n"
        for k in range(count)
    )
    with open(path + ".tmp", "w") as handle:
        handle.write(body)
    os.replace(path + ".tmp", path)
    generation += 1
    time.sleep(0.02)
print(generation)
"""


def test_a_record_rewritten_by_another_process_is_walked_again(tmp_path: Path) -> None:
    """A rewrite during the walk raised a bare ``invalid-cursor`` the caller had no cursor
    for; the walk now starts again from the newest page, and every frame is one record."""
    path = _record(tmp_path, "rw", _messages("g0-", 1))
    store = mnb.ConversationStore(tmp_path)
    writer = subprocess.Popen([sys.executable, "-c", _REWRITER, str(path), "6"])
    frames = errors = 0
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for home in (store, tmp_path):
                try:
                    frame = mnb.read_conversation("rw", home, progress=False)
                except mnb.ConversationReadError as err:
                    assert "was rewritten while being read" in str(err)
                    errors += 1
                    continue
                generations = {i.split("-")[0] for i in frame["id"]}
                assert len(generations) == 1
                (generation,) = generations
                assert frame["id"].tolist()[::997] == [
                    f"{generation}-{k}" for k in range(0, len(frame), 997)
                ]
                frames += 1
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0
    assert frames > errors


def test_a_record_rewritten_under_every_walk_says_to_call_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reaches the walk (private) to rewrite the record, for real, after each walk's first
    page: after the bounded attempts the error says what happened and what to do."""
    from murmur_nb._conversations import frames  # private: rewrites inside each walk

    path = _record(tmp_path, "ctx", _messages("m", 500))
    store = mnb.ConversationStore(tmp_path)
    store.reader("ctx").read_messages(None, 1)  # a warm index: pages are read from the file
    real_walk = frames.walk_record
    walks: list[int] = []

    def walk_rewritten_after_one_page(reader: Any, on_bytes: Any = None, *, walk: Any) -> Any:
        walks.append(len(walks))

        def rewrite(_nbytes: int) -> None:
            walk.on_bytes = None
            _record(tmp_path, "next", _messages(f"g{len(walks)}-", 300 + len(walks)))
            (tmp_path / "conversations" / "next.jsonl").replace(path)

        walk.on_bytes = rewrite
        return real_walk(reader, walk=walk)

    monkeypatch.setattr(frames, "walk_record", walk_rewritten_after_one_page)
    with pytest.raises(mnb.ConversationReadError) as info:
        mnb.read_conversation("ctx", store, progress=False)
    assert info.value.code == "unavailable"
    assert "'ctx' was rewritten while being read, 3 times in a row" in str(info.value)
    assert "call read_conversation again" in str(info.value)
    assert len(walks) == frames.REWRITE_ATTEMPTS
    monkeypatch.undo()
    assert len(mnb.read_conversation("ctx", store, progress=False)) == 303


def test_a_callers_cursor_from_before_a_rewrite_is_still_invalid_cursor(tmp_path: Path) -> None:
    path = _record(tmp_path, "ctx", _messages("m", 300))
    reader = mnb.ConversationStore(tmp_path).reader("ctx")
    cursor = reader.read_messages(None, 10).next_cursor
    _record(tmp_path, "tmp", _messages("n", 200))
    (tmp_path / "conversations" / "tmp.jsonl").replace(path)
    with pytest.raises(mnb.ConversationReadError, match=r"^invalid-cursor$"):
        reader.read_messages(cursor, 10)


# D6 ---------------------------------------------------------------------------------------


def test_a_dask_partition_refuses_a_record_rewritten_with_other_messages(tmp_path: Path) -> None:
    """A record rewritten with as many messages or more, between planning and compute, was
    served silently; a deleted one said it held 0 messages."""
    pytest.importorskip("dask")
    _record(tmp_path, "a", _messages("old", 5))
    _record(tmp_path, "b", _messages("b", 2))
    lazy = mnb.read_conversations(tmp_path, engine="dask")
    _record(tmp_path, "a", _messages("NEW", 6))
    with pytest.raises(mnb.ConversationReadError, match="rewritten since") as info:
        lazy.compute(scheduler="synchronous")
    assert "holds 'NEW4' at position 4, not the 'old4'" in str(info.value)
    _record(tmp_path, "a", _messages("old", 5) + _messages("later", 2))  # appended: fine
    assert len(lazy.compute(scheduler="synchronous")) == 7
    (tmp_path / "conversations" / "a.jsonl").unlink()
    with pytest.raises(mnb.ConversationReadError, match="'a' was deleted since") as info:
        lazy.compute(scheduler="synchronous")
    assert "holds 0 messages" not in str(info.value)


# D7 ---------------------------------------------------------------------------------------

_LIST = """
import json, sys
import murmur_nb as mnb
try:
    mnb.read_conversations(sys.argv[1], progress=False)
except mnb.ConversationReadError as err:
    print(json.dumps({"type": type(err).__name__, "code": err.code, "message": str(err)}))
except Exception as err:
    print(json.dumps({"type": type(err).__name__, "message": str(err)}))
"""


def test_an_unlistable_conversations_folder_is_the_librarys_error(tmp_path: Path) -> None:
    _record(tmp_path, "a", _messages("a", 1))
    folder = tmp_path / "conversations"
    folder.chmod(0)
    try:
        out = _run_unprivileged(_LIST, str(tmp_path))
    finally:
        folder.chmod(stat.S_IRWXU)
    assert out["type"] == "ConversationReadError" and out["code"] == "unavailable"
    listed = f"the conversations folder {str(folder)!r} cannot be listed: Permission denied"
    assert listed in out["message"]
    assert "give this user read and search (r-x) permission on it" in out["message"]


def test_read_conversation_warns_about_a_missing_home_and_an_unknown_context(
    tmp_path: Path,
) -> None:
    """``read_conversations`` warned about a missing home, ``read_conversation`` returned an
    empty frame silently for it and for a mistyped context id."""
    with pytest.warns(UserWarning, match="there is no folder .*, so read_conversation found"):
        assert mnb.read_conversation("a", tmp_path / "missing", progress=False).empty
    _record(tmp_path, "session-0042", _messages("s", 1))
    with pytest.warns(UserWarning, match="did you mean 'session-0042'") as caught:
        frame = mnb.read_conversation("session-042", tmp_path, progress=False)
    assert frame.empty and list(frame.columns)[:2] == ["position", "id"]
    assert "may not have written it yet" in str(caught[0].message)
    with pytest.warns(UserWarning, match="the home has 1 record"):
        mnb.read_conversation("zzz", tmp_path, progress=False)
    with pytest.warns(UserWarning, match="itself a conversations folder: pass its parent"):
        mnb.read_conversation("session-0042", tmp_path / "conversations", progress=False)
