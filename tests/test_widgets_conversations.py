"""ConversationExplorer driven from Python over real records written with RecordWriter."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from murmur_nb import ConversationReadError, ConversationStore, RecordWriter
from murmur_nb._conversations import tool_envelope
from murmur_nb.widgets import ConversationExplorer

STAMP = "2026-03-01T12:00:00Z"


def _write(home: Path, context_id: str, n: int) -> None:
    """``n`` messages: user, assistant, tool (ok / error / unknown), in turn."""
    with RecordWriter(home, context_id) as writer:
        for i in range(n):
            kind = i % 5
            if kind == 0:
                writer.append("user", f"question {i}", id=f"m{i:04d}", created_at=STAMP)
            elif kind == 1:
                writer.append("assistant", f"answer {i}", id=f"m{i:04d}", name="helper")
            else:
                is_error = {2: False, 3: True, 4: None}[kind]
                writer.append(
                    "tool",
                    {"step": i, "rows": [i, i + 1]},
                    id=f"m{i:04d}",
                    tool_call_id=f"call-{i}",
                    is_error=is_error,
                )


@pytest.fixture
def store(murmur_home: Path) -> ConversationStore:
    _write(murmur_home, "ctx-1", 45)
    return ConversationStore(murmur_home)


def test_pages_are_newest_first_with_older_and_newer(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=20)
    assert ex.page_number == 1
    assert ex.total == 45
    assert [m.id for m in ex.page.messages][:2] == ["m0044", "m0043"]
    assert ex.newer_button.disabled
    assert not ex.older_button.disabled
    ex.older_button.click()
    assert ex.page_number == 2
    assert ex.page.messages[0].id == "m0024"
    ex.older_button.click()
    assert ex.page_number == 3
    assert [m.id for m in ex.page.messages] == [f"m{i:04d}" for i in range(4, -1, -1)]
    assert ex.older_button.disabled
    assert "oldest page" in ex.text().splitlines()[0]
    ex.older_button.click()  # nothing older: stays
    assert ex.page_number == 3
    ex.newer_button.click()
    ex.newer_button.click()
    assert ex.page_number == 1
    assert ex.page.messages[0].id == "m0044"
    assert ex.newer_button.disabled


def test_tool_envelopes_are_expanded(store: ConversationStore) -> None:
    """Also decodes the envelope directly: the codec is internal, and this checks that
    what the explorer shows is what the one decoder reads back."""
    ex = ConversationExplorer(store, "ctx-1", page_size=5)
    # newest five: m0044 (tool, null), m0043 (tool, error), m0042 (tool, ok), m0041, m0040
    lines = ex.text().splitlines()
    assert lines[0] == "ConversationExplorer ctx-1: page 1, 5 of 45 messages, role all"
    assert lines[1] == (
        '  tool tool_call_id=call-44 is_error=null body={"step": 44, "rows": [44, 45]}'
    )
    assert lines[2].startswith("  tool tool_call_id=call-43 is_error=true")
    assert lines[3].startswith("  tool tool_call_id=call-42 is_error=false")
    assert lines[4] == "  assistant: answer 41"
    assert lines[5] == "  user: question 40"
    page_html = html.unescape(ex.messages.value)
    assert "tool_call_id" in page_html and "call-43" in page_html
    assert '"rows": [\n    43,' in page_html  # the body, pretty-printed
    assert "helper" in page_html and STAMP in page_html
    assert tool_envelope.decode(ex.page.messages[1].content) == {
        "tool_call_id": "call-43",
        "is_error": True,
        "body": {"step": 43, "rows": [43, 44]},
    }
    assert tool_envelope.decode("plain text") is None
    assert tool_envelope.decode(json.dumps({"body": 1})) is None


def test_role_filter_hides_other_roles_on_the_page(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=10)
    assert set(ex.role_filter.options) == {"all", "assistant", "tool", "user"}
    ex.role_filter.value = "user"
    assert [m.id for m in ex.visible_messages()] == ["m0040", "m0035"]
    assert ex.text().splitlines()[0].endswith("role user (2 shown)")
    assert "8 hidden by the role filter" in ex.status.value
    assert ex.messages.value.count("question") == 2
    ex.older_button.click()
    assert [m.role for m in ex.visible_messages()] == ["user", "user"]
    ex.role_filter.value = "all"
    assert len(ex.visible_messages()) == 10


def test_total_is_live_and_older_pages_stay_put(
    store: ConversationStore, murmur_home: Path
) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=20)
    ex.older_button.click()
    page_two = [m.id for m in ex.page.messages]
    with RecordWriter(murmur_home, "ctx-1") as writer:
        writer.append("user", "late arrival", id="late-1")
        writer.append("assistant", "still here", id="late-2")
    ex.refresh_button.click()
    assert ex.total == 47
    assert [m.id for m in ex.page.messages] == page_two  # anchored at the oldest message
    assert "47" in ex.status.value
    ex.newer_button.click()
    assert [m.id for m in ex.page.messages][:2] == ["late-2", "late-1"]
    assert "  assistant: still here" in ex.text()


def test_an_ungranted_reader_shows_not_granted(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", granted=False)
    assert ex.error is not None
    assert ex.error.code == "not-granted"
    assert "not-granted" in ex.status.value
    assert ex.text() == "ConversationExplorer ctx-1: error not-granted"
    assert ex.older_button.disabled


def test_a_missing_record_is_an_empty_page(tmp_path: Path) -> None:
    ex = ConversationExplorer(ConversationStore(tmp_path), "nothing-yet")
    assert ex.total == 0
    assert ex.visible_messages() == []
    assert ex.text() == (
        "ConversationExplorer nothing-yet: page 1, 0 of 0 messages, role all, oldest page"
    )


def test_to_dataframe_walks_the_record(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1")
    ex.dataframe_button.click()
    frame = ex.dataframe
    assert frame is not None
    assert len(frame) == 45
    assert list(frame["position"][:3]) == [0, 1, 2]
    assert frame["id"].iloc[-1] == "m0044"
    tools = frame[frame["role"] == "tool"]
    assert list(tools["tool_call_id"][:3]) == ["call-2", "call-3", "call-4"]
    (output,) = ex.frame_out.outputs
    assert "<table" in output["data"]["text/html"]
    assert ex.text().endswith("  DataFrame: 45 rows")


def test_to_dataframe_shows_a_progress_bar_for_a_large_record(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with RecordWriter(tmp_path, "big") as writer:
        for i in range(2500):
            writer.append("assistant", "x" * 600, id=f"b{i}")
    ex = ConversationExplorer(ConversationStore(tmp_path), "big")
    capfd.readouterr()
    frame = ex.to_dataframe()
    err = capfd.readouterr().err
    assert "reading big" in err  # tqdm's bar (text outside a kernel) drew the walk
    assert len(frame) == 2500
    ex.to_dataframe(progress=False)
    assert "reading big" not in capfd.readouterr().err


def test_text_form_is_stable(store: ConversationStore) -> None:
    first = ConversationExplorer(store, "ctx-1").text()
    again = ConversationExplorer(store, "ctx-1")
    assert again.text() == first
    assert again._repr_mimebundle_()["text/plain"] == first
    assert "0x" not in first


def test_an_unreadable_record_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "conversations" / "folder.jsonl").mkdir(parents=True)
    ex = ConversationExplorer(ConversationStore(tmp_path), "folder")
    assert ex.error is not None and ex.error.code == "unavailable"
    assert ex.text().startswith("ConversationExplorer folder: error unavailable: ")
    ex.dataframe_button.click()  # the button reports; the plain call raises
    (note,) = ex.frame_out.outputs
    assert note["data"]["text/plain"].startswith("to DataFrame failed: unavailable: ")
    assert ex.dataframe is None
    with pytest.raises(ConversationReadError):
        ex.to_dataframe()
