"""CompactionViewer over real replays: a WAT guest (fast) and the demo hook (componentize-py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hook_replay import assemble, capsule, talk, write

import murmur_nb as mnb
from murmur_nb.widgets import CompactionViewer

DEMO_HOOKS = True  # demo_home builds the demo hook component (only the slow test asks for it)

TWO = """\
hooks:
  dropper:
    component: hooks/replay.wasm
  tight:
    component: hooks/replay.wasm
    limits: {memory_mib: 4}
"""


@pytest.fixture
def store(murmur_home: Path) -> mnb.ConversationStore:
    write(murmur_home, "chat", talk(9, first="You are <b>terse</b> & kind."))
    write(murmur_home, "hog", [("user", "!oom"), ("user", "more")])
    return mnb.ConversationStore(murmur_home)


@pytest.fixture
def hooks(tmp_path: Path, store: mnb.ConversationStore) -> Iterator[mnb.HookHost]:
    path = capsule(tmp_path / "capsule", TWO, replay=assemble("replay.wat"))
    with mnb.HookHost.from_config(path, conversations=store) as host:
        yield host


def test_viewer_strikes_the_dropped_message_and_follows_the_pickers(
    hooks: mnb.HookHost, store: mnb.ConversationStore
) -> None:
    results = mnb.replay(hooks, "*", windows=4, progress=False)
    viewer = CompactionViewer(results, store)
    assert list(viewer.record.options) == ["chat", "hog"]
    assert list(viewer.hook.options) == ["dropper", "tight"]
    assert [v for _, v in viewer.window.options] == [4, 8, 9]
    assert viewer.text() == (
        "CompactionViewer: chat / dropper / window 9 (whole): ok; 9 -> 8 messages "
        "(8 kept, 1 dropped, 0 new)"
    )
    statuses = [(s, m.id) for s, m in viewer.diff.lines()]
    assert statuses[0] == ("dropped", "chat-0") and {s for s, _ in statuses[1:]} == {"kept"}
    page = viewer.static_html()
    assert page.count("<del>") == 1 and "You are &lt;b&gt;terse&lt;/b&gt; &amp; kind." in page
    assert page.count('class="murmur-msg murmur-msg-kept"') == 16  # offered and returned
    viewer.window.value = 4
    assert "window 4: ok; 4 -> 3 messages" in viewer.text()
    viewer.record.value = "hog"
    # a failed call reads as a failure: nothing returned, nothing shown as dropped
    assert viewer.text() == (
        "CompactionViewer: hog / dropper / window 2 (whole): failed: memory_limit; 2 messages "
        "offered; the hook failed, so it returned nothing and dropped nothing: the "
        "conversation is left as it was"
    )
    assert [s for s, _ in viewer.diff.lines()] == ["offered", "offered"]
    assert viewer.diff.counts() == {"kept": 0, "dropped": 0, "new": 0, "offered": 2}
    failed = viewer.static_html()
    assert "<del>" not in failed and "murmur-msg-dropped" not in failed
    assert "dropped</" not in failed  # no "N dropped" badge
    assert 'data-state="failed"' in failed and "failed: memory_limit" in failed
    assert failed.count("murmur-msg-offered") == 2
    assert "nothing: the hook failed (memory_limit)" in failed
    assert "murmur-compaction-error" in viewer.static_html()
    assert "limits.memory_mib" in viewer.static_html()
    viewer.hook.value = "tight"
    assert "4 MiB" in viewer.static_html() and "/ tight /" in viewer.text()
    bundle = viewer._repr_mimebundle_()
    assert bundle["text/plain"] == viewer.text() and "murmur-compaction" in bundle["text/html"]


def test_viewer_reads_messages_from_the_frame_the_replay_ran_over(
    hooks: mnb.HookHost, store: mnb.ConversationStore
) -> None:
    frame = mnb.read_conversation("chat", store, progress=False).head(5)
    results = mnb.replay(hooks, frame, hooks="dropper", progress=False)
    viewer = CompactionViewer(results, frame)
    assert "window 5 (whole): ok; 5 -> 4 messages" in viewer.text()
    with pytest.raises(LookupError, match="windows there: 5"):
        mnb._replay.diff.compaction_diff(results, "chat", window=3, source=frame)


@pytest.mark.slow
def test_the_demo_hooks_summary_is_marked_new(demo_home: mnb.DemoHome) -> None:
    store = mnb.ConversationStore(demo_home.murmur_home)
    with mnb.HookHost.from_config(demo_home.murmur_yaml, conversations=store) as hooks:
        results = mnb.replay(hooks, demo_home.context_id, windows=100, hooks="summarize",
                             progress=False)  # fmt: skip
    viewer = CompactionViewer(results, hooks, window=100)
    new = [m for s, m in viewer.diff.lines() if s == "new"]
    assert [m.id for m in new] == ["summary-m00002-m00092"]
    assert new[0].content.startswith("Summary of earlier turns: 90 messages")
    assert viewer.text().endswith("100 -> 11 messages (10 kept, 90 dropped, 1 new)")
    page = viewer.static_html()
    assert page.count("<del>") == 90 and "murmur-msg-new" in page
