"""Widget defects found by a trial: the explorer's pages while another process appends
(D5), and choosing the hook console's context (H1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import murmur_nb as mnb
from murmur_nb.widgets import ConversationExplorer, HookConsole

_APPEND = """
import sys
import murmur_nb as mnb
home, context_id, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with mnb.RecordWriter(home, context_id, stamp=False) as writer:
    for k in range(first, first + count):
        writer.append("user", f"late {k}", id=f"m{k}")
"""


def _append(home: Path, context_id: str, first: int, count: int) -> None:
    """Append as the runtime does: from another process."""
    subprocess.run(
        [sys.executable, "-c", _APPEND, str(home), context_id, str(first), str(count)],
        check=True,
        timeout=120,
    )


@pytest.fixture
def record(tmp_path: Path) -> Path:
    with mnb.RecordWriter(tmp_path, "ex", stamp=False) as writer:
        for k in range(250):
            writer.append("user", f"msg {k}", id=f"m{k}")
    return tmp_path


def _ids(ex: ConversationExplorer) -> list[str]:
    return [m.id for m in ex.visible_messages()]


def test_newer_after_the_record_grew_shows_what_directly_follows(record: Path) -> None:
    """Page numbers counted from the newest and cursors rebuilt on growth: from m190-m209,
    after 5 appends, Newer showed m215-m234 and m210-m214 were never shown."""
    ex = ConversationExplorer(record, "ex", page_size=20)
    ex.older()
    ex.older()
    assert _ids(ex) == [f"m{k}" for k in range(190, 210)]
    _append(record, "ex", 250, 5)
    ex.refresh()
    assert _ids(ex) == [f"m{k}" for k in range(190, 210)] and ex.total == 255
    ex.newer()
    assert _ids(ex) == [f"m{k}" for k in range(210, 230)]
    ex.newer()
    assert _ids(ex) == [f"m{k}" for k in range(230, 250)]
    ex.newer()  # the newest page: the new messages are shown
    assert ex.page_number == 1 and _ids(ex) == [f"m{k}" for k in range(235, 255)]


def test_older_never_repeats_while_the_record_grows(record: Path) -> None:
    ex = ConversationExplorer(record, "ex", page_size=20)
    seen: list[str] = []
    appended = 250
    while True:
        seen += _ids(ex)
        _append(record, "ex", appended, 3)
        appended += 3
        if ex.page.next_cursor is None:
            break
        ex.older()
    assert len(seen) == len(set(seen)) == 250
    assert set(seen) == {f"m{k}" for k in range(250)}
    ex.go_to_page(1)
    assert _ids(ex)[-1] == f"m{appended - 1}"  # the newest page follows the record


class _RecordingHooks:
    """A hook host double: records what each event was fired with."""

    def __init__(self) -> None:
        self.hooks: dict[str, Any] = {}
        self.fired: list[tuple[str, str]] = []

    def task_start(self, *, task_id: str, context_id: str) -> dict[str, Any]:
        self.fired.append((task_id, context_id))
        return {}


def test_the_hook_console_fires_on_the_context_chosen(tmp_path: Path) -> None:
    """``HookConsole(hooks, store, task_id=...)`` fired on whichever record sorted first."""
    for context_id in ("aaa-first", "chosen"):
        with mnb.RecordWriter(tmp_path, context_id, stamp=False) as writer:
            writer.append("user", "hi", id="1")
    hooks, store = _RecordingHooks(), mnb.ConversationStore(tmp_path)
    console = HookConsole(hooks, store, task_id="t-1", context_id="chosen")
    assert console.context_picker.value == "chosen"
    assert console.unknown_context is None
    console.fire_task_start()
    assert hooks.fired == [("t-1", "chosen")]
    assert HookConsole(hooks, store).context_picker.value == "aaa-first"  # the default
    later = HookConsole(hooks, store, context_id="not-yet")  # accepted, and warned about
    assert later.context_picker.value == "not-yet" and later.unknown_context
    with pytest.raises(mnb.InvalidContextId):
        HookConsole(hooks, store, context_id="../chosen")
