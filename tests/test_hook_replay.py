"""HookHost.replay with real WAT components over real records: rows, windows, faults, Ctrl-C.

``tests/wat/replay.wat`` answers ``task-start`` with the context id and drops the first
message of each window, unless the window's first message asks it to misbehave (see the
guest's header); ``tests/wat/guest.wat`` reads the record when its task id is ``!read``.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _wat import assemble

import murmur_nb as mnb
from murmur_nb import RecordWriter


def write(home: Path, context: str, contents: list[tuple[str, str]]) -> None:
    with RecordWriter(home, context) as writer:
        for i, (role, content) in enumerate(contents):
            writer.append(role, content, id=f"{context}-{i}")


def talk(n: int, first: str = "You are helpful.") -> list[tuple[str, str]]:
    """A system message, then ``n - 1`` user/assistant turns."""
    turns = [("user", f"question {i} " + "x" * i) if i % 2 else ("assistant", f"answer {i}")
             for i in range(1, n)]  # fmt: skip
    return [("system", first), *turns]


def capsule(folder: Path, yaml_text: str, **guests: bytes) -> Path:
    (folder / "hooks").mkdir(parents=True, exist_ok=True)
    for name, data in guests.items():
        (folder / "hooks" / f"{name}.wasm").write_bytes(data)
    path = folder / "murmur.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    return path


TWO_VERSIONS = """\
hooks:
  old:
    component: hooks/replay.wasm
    limits: {time_ms: 200, memory_mib: 4}
  new:
    component: hooks/replay.wasm
    limits: {time_ms: 400, memory_mib: 8}
"""


@pytest.fixture(scope="module")
def replay_guest() -> bytes:
    return assemble("replay.wat")


@pytest.fixture
def records(murmur_home: Path) -> Path:
    """Three plain records (12, 30 and 5 messages) and three that make the guest misbehave."""
    write(murmur_home, "plain-a", talk(12))
    write(murmur_home, "plain-b", talk(30))
    write(murmur_home, "plain-c", talk(5))
    write(murmur_home, "x-spin", [("user", "!loop"), ("user", "more")])
    write(murmur_home, "x-trap", [("user", "!trap"), ("user", "more")])
    write(murmur_home, "x-hog", [("user", "!oom"), ("user", "more")])
    return murmur_home


@pytest.fixture
def hooks(tmp_path: Path, records: Path, replay_guest: bytes) -> Iterator[mnb.HookHost]:
    path = capsule(tmp_path / "capsule", TWO_VERSIONS, replay=replay_guest)
    with mnb.HookHost.from_config(path, conversations=mnb.ConversationStore(records)) as host:
        yield host


def test_one_record_gives_a_typed_row_per_hook_event_and_window(hooks: mnb.HookHost) -> None:
    out = mnb.replay(hooks, "plain-a", hooks="old", progress=False)
    assert list(out["event"]) == ["task-start", "compact"]
    assert str(out["window"].dtype) == "Int64" and str(out["kept_ratio"].dtype) == "Float64"
    assert str(out["first_system_kept"].dtype) == "boolean" and out["ok"].all()
    start, compact = out.iloc[0], out.iloc[1]
    assert start["note"] == "plain-a" and pd.isna(start["window"])
    assert pd.isna(start["messages_in"]) and start["fuel_used"] > 0
    assert (compact["window"], compact["final"]) == (12, True)
    assert (compact["messages_in"], compact["messages_out"]) == (12, 11)
    assert compact["chars_in"] - compact["chars_out"] == len("You are helpful.")
    assert compact["kept_ids"] == [f"plain-a-{i}" for i in range(1, 12)]
    assert compact["new_ids"] == [] and compact["roles_dropped"] == {"system": 1}
    assert compact["kept_ratio"] == pytest.approx(11 / 12)
    assert not compact["first_system_kept"] and compact["last_user_kept"]
    assert [m.id for m in compact["output"]] == compact["kept_ids"]
    assert compact["duration_ms"] > 0 and pd.isna(compact["code"]) and pd.isna(compact["worker"])


def test_many_records_every_record_of_the_home_and_a_list(
    hooks: mnb.HookHost, records: Path
) -> None:
    listed = mnb.replay(hooks, ["plain-b", "plain-a"], progress=False)
    assert list(dict.fromkeys(listed["context_id"])) == ["plain-b", "plain-a"]
    assert len(listed) == 2 * 2 * 2  # records x hooks x (task-start, one window)
    everything = mnb.replay(hooks, "*", progress=False)
    assert sorted(set(everything["context_id"])) == mnb.ConversationStore(records).contexts()
    by_store = mnb.replay(hooks, mnb.ConversationStore(records), hooks=["new"], progress=False)
    assert len(by_store) == 6 * 2 and set(by_store["hook_id"]) == {"new"}
    with pytest.raises(ValueError, match="ConversationStore"):
        mnb.replay(hooks, mnb.ConversationStore(records.parent / "elsewhere"), progress=False)
    with pytest.raises(mnb.HookError, match="no hook 'newest'") as caught:
        mnb.replay(hooks, "plain-a", hooks=["newest"], progress=False)
    assert caught.value.code == "unknown_hook"
    with pytest.raises(mnb.InvalidContextId):
        mnb.replay(hooks, "../plain-a", progress=False)
    # the murmur.yaml itself, or nothing: said plainly (an AttributeError on 'hooks' before)
    for wrong in (records / "murmur.yaml", None):
        with pytest.raises(TypeError, match=r"takes a HookHost, not .*HookHost.from_config"):
            mnb.replay(wrong, "plain-a", progress=False)  # type: ignore[arg-type]


def test_a_home_path_and_pandas_or_numpy_ids_name_records_as_a_list_does(
    hooks: mnb.HookHost, records: Path
) -> None:
    """``replay(hooks, Path(home))`` raised "expected str, bytes or os.PathLike object, not
    method" (``Path`` has a ``home`` classmethod), and the home as a string was refused as a
    context id; a Series of ids raised "truth value of a Series is ambiguous", an array of
    them (``frame.context_id.unique()``) was refused for its ``np.str_``, and
    ``windows=np.int64(4)`` was refused as not an int."""
    everything = mnb.replay(hooks, "*", hooks="old", progress=False)
    for home in (records, str(records)):
        same = mnb.replay(hooks, home, hooks="old", progress=False)
        pd.testing.assert_frame_equal(_comparable(same), _comparable(everything))
    with pytest.raises(ValueError, match="ConversationStore"):
        mnb.replay(hooks, records.parent, progress=False)
    listed = mnb.replay(hooks, ["plain-b", "plain-a"], hooks="old", windows=4, progress=False)
    for ids in (pd.Series(["plain-b", "plain-a"]), np.array(["plain-b", "plain-a"])):
        same = mnb.replay(hooks, ids, hooks="old", windows=np.int64(4), progress=False)
        pd.testing.assert_frame_equal(_comparable(same), _comparable(listed))
    assert list(listed[listed["event"] == "compact"]["window"]) == [4, 8, 12, 16, 20, 24, 28,
                                                                     30, 4, 8, 12]  # fmt: skip
    with pytest.raises(ValueError, match="windows=True"):
        mnb.replay(hooks, "plain-a", windows=True, progress=False)  # type: ignore[arg-type]


def test_kept_ratio_counts_messages_offered_when_a_record_repeats_an_id(
    hooks: mnb.HookHost, records: Path
) -> None:
    """A record whose messages share an id (SPEC §3 does not forbid it): the old hook keeps
    all but the first system message, so 2 of the 3 messages offered are kept; the ratio
    counted the kept ids once each (1 of 3)."""
    with RecordWriter(records, "dups") as writer:
        writer.append("system", "be brief", id="s")
        writer.append("user", "hello", id="x")
        writer.append("user", "again", id="x")
    out = mnb.replay(hooks, "dups", hooks="old", progress=False)
    compact = out[out["event"] == "compact"].iloc[0]
    assert (compact["messages_in"], compact["messages_out"]) == (3, 2)
    assert compact["kept_ratio"] == pytest.approx(2 / 3)
    # a comparison counts the same way (it counted the id once: 1 kept, 2 dropped), and its
    # window column is a replay's Int64 (it was objects and None)
    both = mnb.compare_replays(mnb.replay(hooks, "dups", hooks=["old", "new"], progress=False))
    totals = both.totals()["old"]
    assert (totals["calls"], totals["kept"], totals["dropped"]) == (2, 2, 1)
    assert str(both.frame["window"].dtype) == "Int64" and both.frame["window"].isna().any()


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """A replay's rows without what differs between two runs of the same calls."""
    return frame.drop(columns=["duration_ms"]).reset_index(drop=True)


def test_a_dataframe_offers_exactly_its_messages(hooks: mnb.HookHost, records: Path) -> None:
    frame = mnb.read_conversations(records, progress=False)
    plain = frame[frame["context_id"].str.startswith("plain") & (frame["position"] < 8)]
    out = mnb.replay(hooks, plain, hooks="old", progress=False)
    compact = out[out["event"] == "compact"].set_index("context_id")
    assert compact["messages_in"].to_dict() == {"plain-a": 8, "plain-b": 8, "plain-c": 5}
    assert compact.loc["plain-b", "kept_ids"] == [f"plain-b-{i}" for i in range(1, 8)]
    one = mnb.read_conversation("plain-c", records, progress=False)
    assert one.attrs["context_id"] == "plain-c"
    again = mnb.replay(hooks, one, hooks="old", progress=False)
    assert list(again["context_id"]) == ["plain-c", "plain-c"]
    with pytest.raises(ValueError, match="no context_id column"):
        mnb.replay(hooks, _without_attrs(one.copy()), progress=False)


def test_a_source_or_task_id_it_cannot_use_is_refused_before_any_hook_runs(
    hooks: mnb.HookHost, records: Path
) -> None:
    """A frame of context ids only raised KeyError 'id'; a task id naming more than
    ``{context_id}`` raised KeyError from str.format; a dict offered to compact ran the hook
    and came back as the host's read-messages failing."""
    ids = pd.DataFrame({"context_id": ["plain-a", "plain-c"]})
    with pytest.raises(ValueError, match=r"lacks the column\(s\) id, role, content.*tolist"):
        mnb.replay(hooks, ids, progress=False)
    with pytest.raises(ValueError, match=r"task_id='{task}-{context_id}' cannot be filled in"):
        mnb.replay(hooks, "plain-a", task_id="{task}-{context_id}", progress=False)
    braces = mnb.replay(hooks, "plain-a", hooks="old", task_id="{{x}}", progress=False)
    assert braces["ok"].all()
    # a frame without name and created_at offers its messages without them
    bare = mnb.read_conversation("plain-c", records, progress=False)[["id", "role", "content"]]
    out = mnb.replay(hooks, bare.assign(context_id="plain-c"), hooks="old", progress=False)
    assert list(out["messages_in"].dropna()) == [5] and out["ok"].all()
    given = mnb.ConversationStore(records).reader("plain-a").read_messages(None, 3).messages
    with pytest.raises(TypeError, match=r"messages\[1\] is a dict; no hook ran"):
        hooks.compact([given[0], {"id": "x", "role": "user", "content": "hi"}])
    with pytest.raises(TypeError, match=r"messages\[0\] has content=7, a int"):
        hooks.compact([mnb.Message("m", "user", 7)])  # type: ignore[arg-type]
    assert all(r.ok for r in hooks.compact(given).values())


def _without_attrs(frame: pd.DataFrame) -> pd.DataFrame:
    frame.attrs.clear()
    return frame


def test_growth_windows_every_n_messages_and_by_characters(hooks: mnb.HookHost) -> None:
    out = mnb.replay(hooks, "plain-b", windows=8, hooks="old", progress=False)
    compact = out[out["event"] == "compact"]
    assert list(compact["window"]) == [8, 16, 24, 30]
    assert list(compact["final"]) == [False, False, False, True]
    assert list(compact["messages_out"]) == [7, 15, 23, 29]
    # characters: a window each time the record passes another 100 characters
    spec = mnb.ReplayWindows(chars=100)
    chars = mnb.replay(hooks, "plain-b", windows=spec, hooks="old", progress=False)
    ends = list(chars.loc[chars["event"] == "compact", "window"])
    messages = [m for role, m in talk(30)]
    totals = [sum(len(m) for m in messages[:n]) for n in ends]
    assert ends[-1] == 30 and len(ends) > 3
    for before, after in itertools.pairwise(totals[:-1]):
        assert after // 100 > before // 100  # each window passed a new multiple of 100
    with pytest.raises(ValueError, match="ReplayWindows"):
        mnb.replay(hooks, "plain-b", windows="grow", progress=False)
    with pytest.raises(ValueError, match="at least 1"):
        mnb.ReplayWindows(every=0)


def test_trap_deadline_and_memory_limit_are_rows_not_exceptions(hooks: mnb.HookHost) -> None:
    started = time.monotonic()
    out = mnb.replay(hooks, ["x-spin", "x-trap", "x-hog", "plain-c"], progress=False)
    assert time.monotonic() - started < 10
    compact = out[out["event"] == "compact"].set_index(["context_id", "hook_id"])
    assert compact["code"].to_dict() == {
        ("x-spin", "old"): "deadline_exceeded", ("x-spin", "new"): "deadline_exceeded",
        ("x-trap", "old"): "trap", ("x-trap", "new"): "trap",
        ("x-hog", "old"): "memory_limit", ("x-hog", "new"): "memory_limit",
        ("plain-c", "old"): None, ("plain-c", "new"): None,
    }  # fmt: skip
    assert 200 <= compact.loc[("x-spin", "old"), "duration_ms"] < 1500
    assert 400 <= compact.loc[("x-spin", "new"), "duration_ms"] < 1700
    assert "4 MiB" in compact.loc[("x-hog", "old"), "error"]
    assert "unreachable" in compact.loc[("x-trap", "old"), "error"]
    failed = compact[~compact["ok"]]
    assert failed["messages_out"].isna().all() and (failed["messages_in"] == 2).all()
    assert out.loc[out["event"] == "task-start", "ok"].all()


def test_the_read_grant_pages_through_the_real_record(
    tmp_path: Path, records: Path
) -> None:
    guest = assemble("guest.wat")
    text = ("hooks:\n  reader:\n    component: hooks/guest.wasm\n"
            "    capabilities: {conversation: {read: true}}\n"
            "  denied:\n    component: hooks/guest.wasm\n")  # fmt: skip
    path = capsule(tmp_path / "reading", text, guest=guest)
    with mnb.HookHost.from_config(path, conversations=mnb.ConversationStore(records)) as host:
        out = mnb.replay(host, ["plain-b", "plain-c"], task_id="!read", progress=False)
    notes = out[out["event"] == "task-start"].set_index(["context_id", "hook_id"])
    assert notes.loc[("plain-b", "reader"), "note"] == "30|30|plain-b-29|-"
    assert notes.loc[("plain-c", "reader"), "note"] == "5|5|plain-c-4|-"
    assert notes.loc[("plain-b", "denied"), "code"] == "guest_error"
    assert notes.loc[("plain-b", "denied"), "error"] == "not-granted"


def test_a_window_reads_no_message_newer_than_itself(tmp_path: Path, records: Path) -> None:
    """The peeking guest returns what ``read-messages`` serves: at window ``n`` the record as
    it stood then (its first ``n`` messages), never the messages appended after it; a frame
    of some of the record's messages reaches as far as its newest one."""
    text = ("hooks:\n  peek:\n    component: hooks/peek.wasm\n"
            "    capabilities: {conversation: {read: true}}\n")  # fmt: skip
    path = capsule(tmp_path / "peeking", text, peek=assemble("peek.wat"))
    with mnb.HookHost.from_config(path, conversations=mnb.ConversationStore(records)) as host:
        out = mnb.replay(host, "plain-b", windows=10, progress=False)
        frame = mnb.read_conversation("plain-b", home=records)
        users = frame[frame["role"] == "user"].head(6)  # plain-b-1, -3, ..., -11
        picked = mnb.replay(host, users, windows=4, progress=False)
    compacts = out[out["event"] == "compact"]
    assert list(compacts["window"]) == [10, 20, 30] and compacts["ok"].all()
    for window, output in zip(compacts["window"], compacts["output"], strict=True):
        assert [m.id for m in output] == [f"plain-b-{i}" for i in reversed(range(window))]
    assert out[out["event"] == "task-start"]["note"].tolist() == ["plain-b-29"]
    reads = picked[picked["event"] == "compact"]
    assert [o[0].id for o in reads["output"]] == ["plain-b-7", "plain-b-11"]
    assert [len(o) for o in reads["output"]] == [8, 12]
    assert picked[picked["event"] == "task-start"]["note"].tolist() == ["plain-b-11"]


def test_a_record_that_cannot_be_read_is_a_row(hooks: mnb.HookHost, records: Path) -> None:
    (records / "conversations" / "broken.jsonl").mkdir()  # a folder where a record should be
    out = mnb.replay(hooks, ["broken", "plain-c"], progress=False)
    broken = out[out["context_id"] == "broken"]
    assert set(broken["code"]) == {"record_unreadable"}, broken["error"].tolist()
    assert out[out["context_id"] == "plain-c"]["ok"].all()


def test_a_context_id_with_no_record_is_warned_about(hooks: mnb.HookHost, records: Path) -> None:
    """A mistyped id replays the hooks on an empty record, as the runtime would: the rows
    alone look like a short, healthy record, so the replay says there is no such record and
    which there are. One with a record, or something unreadable in its place, is not warned
    about (the latter is its own row)."""
    with pytest.warns(UserWarning, match=r"no record 'plain-z' under .*records there: plain-a"):
        out = mnb.replay(hooks, ["plain-a", "plain-z"], progress=False)
    assert set(out["context_id"]) == {"plain-a", "plain-z"}
    assert (out[out["context_id"] == "plain-z"]["messages_in"].fillna(0) == 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mnb.replay(hooks, "plain-a", progress=False)


@pytest.fixture
def restore_sigint() -> Iterator[None]:
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_stops_the_replay_and_keeps_the_finished_rows(
    tmp_path: Path, records: Path, replay_guest: bytes, restore_sigint: None
) -> None:
    text = "hooks:\n  slow:\n    component: hooks/replay.wasm\n    limits: {time_ms: 60000}\n"
    path = capsule(tmp_path / "slow", text, replay=replay_guest)
    with mnb.HookHost.from_config(path, conversations=mnb.ConversationStore(records)) as host:
        timer = threading.Timer(0.5, os.kill, args=(os.getpid(), signal.SIGINT))
        started = time.monotonic()
        timer.start()
        try:
            out = mnb.replay(host, ["plain-a", "plain-b", "x-spin", "plain-c"], progress=True)
        finally:
            timer.cancel()
        assert time.monotonic() - started < 10  # not the spinning guest's 60 s
        assert out.attrs["interrupted"] is True
        assert list(out["context_id"]) == ["plain-a", "plain-a", "plain-b", "plain-b", "x-spin"]
        assert out["ok"].all()  # the interrupted call left no row
        after = mnb.replay(host, "plain-c", progress=False)
        assert after["ok"].all() and after.attrs["interrupted"] is False


def test_two_versions_compared_on_record_and_window(hooks: mnb.HookHost) -> None:
    out = mnb.replay(hooks, ["plain-a", "x-spin", "x-hog"], hooks=["old", "new"], progress=False)
    comparison = mnb.compare_replays(out)
    assert (comparison.left, comparison.right) == ("old", "new")
    frame = comparison.to_pandas()
    assert len(frame) == 6 and set(frame.columns) >= {"code_old", "code_new", "differs"}
    assert comparison.differences.empty  # both versions fail the same way
    assert "0 of 6 rows differ" in comparison.summary()
    # a second run with one hook that behaves differently, compared run against run
    wide = mnb.replay(hooks, ["plain-a", "x-spin"], hooks="new", windows=1, progress=False)
    narrow = mnb.replay(hooks, ["plain-a", "x-spin"], hooks="new", windows=2, progress=False)
    other = mnb.compare_replays(wide, narrow)
    assert (other.left, other.right) == ("new (1)", "new (2)")
    missing = other.differences
    assert set(missing["window"].dropna()) == {1, 3, 5, 7, 9, 11}
    assert all(d == ["missing"] for d in missing["differs"])
    html = other._repr_html_()
    assert "rows differ" in html and "font-weight:bold" in html
    # only what differs (here: rows one side lacks, shown by their outcome), one line a side
    table = html[html.index("<table"):]  # (the chart before it draws fuel for each side)
    assert table.count("<th ") == 6 and "fuel_used" not in table and "kept_ids" not in table
    assert html.count("(no row)") == len(missing)
    with pytest.raises(ValueError, match="not two"):
        mnb.compare_replays(wide)
    # what is not a replay's frame is named (it raised KeyError "[...] not in index", or
    # "list indices must be integers or slices")
    with pytest.raises(ValueError, match=r"other is not a replay's frame: it lacks the column\(s\) "
                       r"fuel_used\. Pass what mnb.replay"):  # fmt: skip
        mnb.compare_replays(wide, narrow.drop(columns="fuel_used"))
    with pytest.raises(TypeError, match="results is a list"):
        mnb.compare_replays(out.to_dict("records"))  # type: ignore[arg-type]


DEMO_HOOKS = True  # demo_home builds the demo hook (componentize-py); only the slow test uses it


@pytest.mark.slow
def test_the_demo_hook_replayed_over_the_demo_record(demo_home: mnb.DemoHome) -> None:
    store = mnb.ConversationStore(demo_home.murmur_home)
    with mnb.HookHost.from_config(demo_home.murmur_yaml, conversations=store) as hooks:
        grown = mnb.replay(hooks, demo_home.context_id, windows=mnb.ReplayWindows(chars=20_000),
                           progress=False)  # fmt: skip
        frame = mnb.read_conversations(store, progress=False)
        from_frame = mnb.replay(hooks, frame, hooks="summarize", progress=False)
    notes = grown[grown["event"] == "task-start"].set_index("hook_id")
    assert notes.loc["summarize", "note"].startswith(
        "task replay-demo-session: 320 messages (assistant 158, system 4, tool 113, user 45)"
    )
    assert notes.loc["peek", "code"] == "guest_error"
    assert "not-granted" in notes.loc["peek", "error"]
    compact = grown[(grown["event"] == "compact") & (grown["hook_id"] == "summarize")]
    assert list(compact["window"])[-1] == 320 and len(compact) == 4  # 66,225 characters
    assert compact["ok"].all() and compact["first_system_kept"].all()
    assert compact["last_user_kept"].all() and (compact["messages_out"] <= 13).all()
    last = compact.iloc[-1]
    assert last["new_ids"] == ["summary-m00002-m00312"]
    assert last["roles_dropped"] == {"assistant": 154, "tool": 110, "user": 44}
    assert last["kept_ratio"] == pytest.approx(12 / 320)
    whole = from_frame[from_frame["event"] == "compact"].iloc[0]
    assert whole["kept_ids"] == last["kept_ids"] and whole["fuel_used"] == last["fuel_used"]


def test_a_comparison_leads_with_a_chart_of_each_sides_totals(hooks: mnb.HookHost) -> None:
    """Issue 40: kept, dropped, chars out and fuel per hook, as bars before the summary;
    the figures are the replay frame's own (messages offered less those returned)."""
    wide = mnb.replay(hooks, ["plain-a", "x-spin"], hooks="new", windows=1, progress=False)
    narrow = mnb.replay(hooks, ["plain-a", "x-spin"], hooks="new", windows=2, progress=False)
    comparison = mnb.compare_replays(wide, narrow)
    totals = comparison.totals()
    for side, frame in (("new (1)", wide), ("new (2)", narrow)):
        done = frame[(frame["event"] == "compact") & frame["ok"]]
        kept = sum(len(set(ids)) for ids in done["kept_ids"])
        assert totals[side] == {
            "calls": len(frame), "failed": int((~frame["ok"]).sum()), "kept": kept,
            "dropped": int(done["messages_in"].sum()) - kept,
            "chars_out": int(done["chars_out"].sum()), "fuel_used": int(frame["fuel_used"].sum()),
        }, side  # fmt: skip
    assert totals["new (1)"]["calls"] > totals["new (2)"]["calls"]  # one window each message
    page = comparison._repr_html_()
    chart = page.index('class="murmur-comparison-chart"')
    assert chart < page.index("rows differ") < page.index("<table")
    for side in totals:
        for key in ("kept", "dropped", "chars_out", "fuel_used"):
            assert f'data-side="{side}" data-value="{totals[side][key]}"' in page, (side, key)
    assert "<svg" not in page and "<script" not in page
    assert "#000" not in page and "black" not in page  # theme colours with fallbacks


def test_the_demo_homes_hooks_read_its_own_record(demo_home: mnb.DemoHome) -> None:
    """``home.hooks()`` reads the demo's records: ``HookHost.from_config(home.murmur_yaml)``
    alone reads ``$MURMUR_HOME`` (``~/.murmur``), where a replay finds no record and gives
    task-start rows only, no error."""
    frame = mnb.replay(demo_home.hooks(), demo_home.context_id, progress=False)
    compact = frame[frame["event"] == "compact"]
    assert len(compact) > 0 and compact["ok"].all(), frame[["event", "code"]]
    assert compact["messages_in"].sum() > 0
