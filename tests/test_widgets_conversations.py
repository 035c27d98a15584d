"""ConversationExplorer driven from Python over real records written with RecordWriter."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from murmur_nb import ConversationReadError, ConversationStore, RecordWriter
from murmur_nb._conversations import tool_envelope  # private: to decode what the view shows
from murmur_nb.widgets import ConversationExplorer

STAMP = "2026-03-01T12:00:00Z"


def _write(home: Path, context_id: str, n: int, *, first: int = 0) -> None:
    """Messages ``first`` to ``n - 1``: user, assistant, tool (ok / error / unknown), in turn."""
    with RecordWriter(home, context_id) as writer:
        for i in range(first, n):
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


def test_pages_go_newest_to_oldest_and_read_oldest_first(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=20)
    assert ex.page_number == 1 and ex.page_total == 3
    assert ex.total == 45
    # within a page: oldest first, the DataFrame's order
    assert [m.id for m in ex.visible_messages()][-2:] == ["m0043", "m0044"]
    assert ex.newer_button.disabled and ex.newest_button.disabled
    assert not ex.older_button.disabled
    ex.older_button.click()
    assert ex.page_number == 2 and ex.page_input.value == 2
    assert ex.visible_messages()[0].id == "m0005"
    ex.older_button.click()
    assert ex.page_number == 3
    assert [m.id for m in ex.visible_messages()] == [f"m{i:04d}" for i in range(5)]
    assert ex.older_button.disabled and ex.oldest_button.disabled
    assert "oldest page" in ex.text().splitlines()[0]
    ex.older_button.click()  # nothing older: stays
    assert ex.page_number == 3
    ex.newer_button.click()
    ex.newer_button.click()
    assert ex.page_number == 1
    assert ex.visible_messages()[-1].id == "m0044"
    assert ex.newer_button.disabled


def test_a_home_folder_is_taken_as_its_store(store: ConversationStore, murmur_home: Path) -> None:
    """As read_conversation(context_id, home) takes it; it raised AttributeError ('PosixPath'
    object has no attribute 'reader')."""
    for home in (murmur_home, str(murmur_home)):
        ex = ConversationExplorer(home, "ctx-1", page_size=20)
        assert ex.total == 45 and ex.text() == ConversationExplorer(store, "ctx-1").text()
    with pytest.raises(TypeError, match="takes a ConversationStore or a home folder"):
        ConversationExplorer(["ctx-1"], "ctx-1")


def test_first_last_and_page_numbers_jump(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=10)
    assert ex.page_count.value == "of 5"
    ex.oldest_button.click()  # one click to the oldest page, not four
    assert ex.page_number == 5 and ex.visible_messages()[0].id == "m0000"
    ex.newest_button.click()
    assert ex.page_number == 1 and ex.visible_messages()[-1].id == "m0044"
    ex.page_input.value = 3  # typing a page number goes there
    assert ex.page_number == 3
    assert [m.id for m in ex.visible_messages()] == [f"m{i:04d}" for i in range(15, 25)]
    assert "page 3 of 5" in ex.status.value


def test_find_a_message_id_and_filter_by_text(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=10)
    ex.find_input.value = "m0007"
    ex.find_button.click()
    assert ex.page_number == 4 and ex.opened == "m0007"
    assert 'data-id="m0007" open' in ex.messages.value
    ex.newest_button.click()
    ex.older_button.click()
    # an unknown id says so and leaves the reader where they were, not on the oldest page
    assert not ex.find("nope")
    assert ex.page_number == 2 and ex.visible_messages()[0].id == "m0025"
    assert "not found: no message &#x27;nope&#x27; in this record" in ex.status.value
    # the text form says it too (only the live HTML did), until the next page is drawn
    assert repr(ex).splitlines()[0].endswith(" · not found: no message 'nope' in this record")
    ex.older_button.click()
    ex.newer_button.click()
    assert "not found" not in repr(ex)
    # the text filter searches the whole record, not the page of 10 shown
    ex.text_filter.value = "ANSWER"
    assert [m.id for m in ex.visible_messages()] == [f"m{i:04d}" for i in range(1, 45, 5)]
    assert ex.text().splitlines()[0] == (
        "ConversationExplorer ctx-1: containing 'ANSWER': 9 matches in the whole record "
        "(45 messages)"
    )
    assert ex.older_button.disabled and ex.newest_button.disabled  # paging waits
    ex.text_filter.value = ""
    assert ex.page_number == 2 and len(ex.visible_messages()) == 10


def test_find_submits_on_enter(store: ConversationStore) -> None:
    """Typing an id and pressing Enter did nothing (only "Go" found it), while "Contains"
    filters on Enter: both boxes submit their value, not every keystroke."""
    ex = ConversationExplorer(store, "ctx-1", page_size=10)
    assert not ex.find_input.continuous_update
    ex.find_input.value = "m0007"  # what Enter sends
    assert ex.page_number == 4 and ex.opened == "m0007"
    ex.newest_button.click()
    ex.find_input.value = ""  # clearing the box is not a search for ""
    assert ex.page_number == 1 and "not found" not in ex.status.value
    ex.find_input.value = "nope"
    assert ex.page_number == 1 and "not found: no message" in ex.status.value


def test_find_budgets_the_pages_the_reader_serves(murmur_home: Path) -> None:
    """The reader serves at most 100 messages a page: find counted ``page_size`` (150) a page,
    stopped after 200 of the 300 messages it may read and missed the oldest one."""
    _write(murmur_home, "long", 250)
    ex = ConversationExplorer(ConversationStore(murmur_home), "long", page_size=150,
                              scan_limit=300)  # fmt: skip
    assert ex.page_total == 3 and len(ex.visible_messages()) == 100
    assert ex.find("m0000") and ex.page_number == 3
    assert not ex.find("nope") and "in this record" in ex.status.value


def test_find_and_filters_read_at_most_scan_limit_messages(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=10, scan_limit=20, shown_limit=3)
    assert ex.find("m0030") and ex.page_number == 2  # among the newest 20
    assert not ex.find("m0003")  # there, but past the 20 the explorer may read
    assert ex.page_number == 2
    assert "in the newest 20 messages" in ex.status.value
    ex.role_filter.value = "user"
    assert ex.scanned == 20
    assert [m.id for m in ex.matches] == ["m0040", "m0035", "m0030", "m0025"]
    assert [m.id for m in ex.visible_messages()] == ["m0030", "m0035", "m0040"]
    assert ex.text().splitlines()[0].endswith(
        "role user: 4 matches in the newest 20 of 45 messages (scan_limit), the newest 3 shown"
    )


def test_rows_are_compact_with_separate_fields_and_multiline_bodies(tmp_path: Path) -> None:
    with RecordWriter(tmp_path, "ml") as writer:
        writer.append("user", "line one\nline two", id="u1", created_at=STAMP)
        writer.append("tool", "out 1\nout 2", id="t1", tool_call_id="call_0113", is_error=False)
    ex = ConversationExplorer(ConversationStore(tmp_path), "ml")
    page = ex.messages.value
    assert page.count("<details") == 2 and page.count("<summary>") == 2  # both multi-line
    tool_row = page[page.index('data-id="t1"') :]
    # the header fields are separate elements, never run together
    assert f"{STAMP}</span>" in page and "tool_call_id <code>call_0113</code>" in tool_row
    assert "out 1\nout 2</pre>" in tool_row  # a string body keeps its line breaks
    assert "\\n" not in page
    assert "line one\nline two</pre>" in page


def test_tool_envelopes_are_expanded(store: ConversationStore) -> None:
    """Also decodes the envelope directly: the codec is internal, and this checks that
    what the explorer shows is what the one decoder reads back."""
    ex = ConversationExplorer(store, "ctx-1", page_size=5)
    # newest five, oldest first: m0040, m0041, m0042 (tool, ok), m0043 (error), m0044 (null)
    lines = ex.text().splitlines()
    assert lines[0] == "ConversationExplorer ctx-1: page 1 of 9, 5 of 45 messages, role all"
    assert lines[5] == (
        '  tool tool_call_id=call-44 is_error=null body={"step": 44, "rows": [44, 45]}'
    )
    assert lines[4].startswith("  tool tool_call_id=call-43 is_error=true")
    assert lines[3].startswith("  tool tool_call_id=call-42 is_error=false")
    assert lines[2] == "  assistant: answer 41"
    assert lines[1] == "  user: question 40"
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


def test_role_filter_applies_to_the_whole_record(store: ConversationStore) -> None:
    ex = ConversationExplorer(store, "ctx-1", page_size=10)
    assert ex.role_filter.options == ("all", "user", "assistant", "tool", "system")
    ex.role_filter.value = "user"
    assert [m.id for m in ex.visible_messages()] == [f"m{i:04d}" for i in range(0, 45, 5)]
    assert ex.text().splitlines()[0].endswith(
        "role user: 9 matches in the whole record (45 messages)"
    )
    assert "role user: 9 matches in the whole record" in ex.status.value
    assert ex.messages.value.count("question") == 9
    ex.text_filter.value = "question 4"  # both filters at once
    assert [m.id for m in ex.visible_messages()] == ["m0040"]
    ex.role_filter.value = "all"
    ex.text_filter.value = ""
    assert len(ex.visible_messages()) == 10 and ex.page_number == 1


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
    ex.newer_button.click()  # the messages directly after page 2, as the record stood
    assert [m.id for m in ex.visible_messages()] == [f"m{i:04d}" for i in range(25, 45)]
    ex.newer_button.click()  # then the newest page, new messages and all
    assert ex.page_number == 1
    assert [m.id for m in ex.visible_messages()][-2:] == ["late-1", "late-2"]
    assert "  assistant: still here" in ex.text()


def test_every_message_is_on_a_page_after_the_record_grew(
    store: ConversationStore, murmur_home: Path
) -> None:
    """The newest page is anchored at the newest message, so appends move its lower edge:
    the explorer kept the older pages' cursors from before, and the five messages between
    the two edges were on no page, nor found by "Find id"."""
    ex = ConversationExplorer(store, "ctx-1", page_size=20)
    _write(murmur_home, "ctx-1", 50, first=45)
    ex.refresh_button.click()
    assert ex.total == 50 and ex.page_total == 3
    seen: list[str] = []
    for number in range(1, ex.page_total + 1):
        ex.page_input.value = number
        seen += [m.id for m in ex.visible_messages()]
    assert sorted(seen) == [f"m{i:04d}" for i in range(50)]  # each once
    ex.newest_button.click()
    ex.find_input.value = "m0027"
    ex.find_button.click()
    assert ex.opened == "m0027" and ex.page_number == 2


def test_paging_from_an_older_page_after_the_record_grew_skips_nothing(
    store: ConversationStore, murmur_home: Path
) -> None:
    """Refresh on page 2 keeps its messages; paging on from there goes on from the page
    shown (pages are anchored at the oldest message), so the pages shown next meet the
    newest one."""
    ex = ConversationExplorer(store, "ctx-1", page_size=20)
    ex.older_button.click()
    _write(murmur_home, "ctx-1", 50, first=45)
    ex.refresh_button.click()
    assert ex.visible_messages()[0].id == "m0005" and ex.total == 50  # stays put
    seen: list[str] = []
    ex.older_button.click()
    seen += [m.id for m in ex.visible_messages()]
    assert ex.page_number == 3 and "oldest" in ex.status.value
    while ex.page_number != 1:
        ex.newer_button.click()
        seen += [m.id for m in ex.visible_messages()]
    assert set(seen) == {f"m{i:04d}" for i in range(50)}


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
        "ConversationExplorer nothing-yet: page 1 of 1, 0 of 0 messages, role all, oldest page"
        " · warning: context 'nothing-yet' has no record in the store (it has: none)"
    )


def test_a_context_the_store_has_no_record_of_is_warned_about(
    store: ConversationStore, murmur_home: Path
) -> None:
    """A mistyped id showed an empty explorer without a word ("0 of 0 messages"), where
    HookConsole warns; the runtime may not have written the record yet, so it still shows
    the empty record and Refresh reads it once it is there."""
    ex = ConversationExplorer(store, "CTX-1")
    warning = "context 'CTX-1' has no record in the store (it has: ctx-1)"
    assert ex.unknown_context == warning
    assert ex.text().splitlines()[0].endswith(f", oldest page · warning: {warning}")
    assert html.escape(warning) in ex.status.value and "murmur-warn" in ex.status.value
    _write(murmur_home, "CTX-1", 3)
    ex.refresh_button.click()
    assert ex.unknown_context is None and ex.total == 3
    assert "warning" not in ex.text() and "warn" not in ex.status.value


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
    note, output = ex.frame_out.outputs
    assert note["data"]["text/plain"] == "45 rows, oldest first; in code: explorer.dataframe"
    assert "<table" in output["data"]["text/html"]
    assert ex.text().endswith("  DataFrame: 45 rows (explorer.dataframe)")


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
