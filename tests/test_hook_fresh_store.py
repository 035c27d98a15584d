"""No hook call sees what an earlier call left in the guest: every call gets a fresh store.

``tests/wat/remember.wat`` counts its calls in a mutable global and in a byte of its linear
memory and answers what it found there ("seen 0/0" on a fresh instance). Asked to, it counts
twice within one call ("seen 1/1"), so the guest really does keep state inside an instance:
the tests below fail the day a store, an instance or a memory is shared between calls (for
instance to make a replay faster, issue 41).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _wat import assemble

import murmur_nb as mnb
from murmur_nb import RecordWriter

YAML = """\
hooks:
  remember:
    component: hooks/remember.wasm
"""


@pytest.fixture
def hooks(tmp_path: Path, murmur_home: Path) -> Iterator[mnb.HookHost]:
    for context in ("rec-a", "rec-b", "rec-c"):
        with RecordWriter(murmur_home, context) as writer:
            for i in range(5):
                writer.append("user" if i % 2 else "assistant", f"{context} turn {i}")
    capsule = tmp_path / "capsule"
    (capsule / "hooks").mkdir(parents=True)
    (capsule / "hooks" / "remember.wasm").write_bytes(assemble("remember.wat"))
    (capsule / "murmur.yaml").write_text(YAML, encoding="utf-8")
    store = mnb.ConversationStore(murmur_home)
    with mnb.HookHost.from_config(capsule / "murmur.yaml", conversations=store) as host:
        assert host.hooks["remember"].loaded, host.hooks["remember"].load_error
        yield host


def test_the_guest_remembers_within_one_call(hooks: mnb.HookHost) -> None:
    assert hooks.task_start(task_id="!twice", context_id="rec-a")["remember"].value == "seen 1/1"


def test_each_call_starts_from_the_components_own_state(hooks: mnb.HookHost) -> None:
    notes = [
        hooks.task_start(task_id=task, context_id="rec-a")["remember"].value
        for task in ("t1", "!twice", "t2", "t3")
    ]
    assert notes == ["seen 0/0", "seen 1/1", "seen 0/0", "seen 0/0"]
    messages = hooks.conversations.reader("rec-a").read_messages(None, 100).messages
    kept = hooks.compact(messages, context_id="rec-a")["remember"]
    assert kept.ok, kept.error  # err("seen 1/1") had an earlier call's instance been reused
    assert [m.id for m in kept.value] == [m.id for m in messages]


def test_a_replay_never_carries_state_from_one_call_to_the_next(hooks: mnb.HookHost) -> None:
    out = mnb.replay(hooks, "*", windows=2, progress=False)
    assert len(out) == 3 * (1 + 3)  # each record: task-start, then windows 2, 4 and 5
    assert out["ok"].all(), out["error"].dropna().tolist()
    assert (out.loc[out["event"] == "task-start", "note"] == "seen 0/0").all()
    compact = out[out["event"] == "compact"]
    assert (compact["messages_out"] == compact["messages_in"]).all()
