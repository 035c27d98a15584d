"""HookConsole driven from Python over the real demo hook (componentize-py) and record."""

from __future__ import annotations

import html
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _wat import assemble

import murmur_nb as mnb
from murmur_nb import ConversationStore, DemoHome, HookHost
from murmur_nb.widgets import HookConsole

pytestmark = pytest.mark.slow  # the demo hook is built with componentize-py (cached)

DEMO_HOOKS = True  # demo_home builds the demo hook component


@pytest.fixture(scope="module")
def store(demo_home: DemoHome) -> ConversationStore:
    return ConversationStore(demo_home.murmur_home)


@pytest.fixture(scope="module")
def hooks(demo_home: DemoHome, store: ConversationStore) -> Iterator[HookHost]:
    config = demo_home.murmur_yaml.read_text()
    broken = demo_home.murmur_home / "broken.wasm"
    broken.write_bytes(b"not a component")
    path = demo_home.murmur_home / "console.yaml"
    path.write_text(config + "  broken:\n    component: broken.wasm\n    events: [task-start]\n")
    with HookHost.from_config(path, conversations=store) as host:
        yield host


def test_hooks_are_listed_with_events_grants_limits_and_load_errors(
    hooks: HookHost, store: ConversationStore
) -> None:
    console = HookConsole(hooks, store)
    lines = console.text().splitlines()
    assert lines[0] == "HookConsole:"
    assert lines[1] == (
        "  summarize (summarize.wasm) events: task-start, compact; conversation.read granted"
    )
    assert "  peek (summarize.wasm) events: task-start, compact; no grants" in console.text()
    assert any(line.startswith("    limits ") and "ms" in line for line in lines)
    assert "  broken (broken.wasm) events: task-start;" in console.text()
    broken_error = hooks.hooks["broken"].load_error
    home = os.path.realpath(store.home)  # murmur.yaml's folder, resolved
    assert broken_error and home in broken_error
    # the text names the murmur home, so it reads the same on any machine
    portable = broken_error.replace(home, "$MURMUR_HOME")
    assert f"    load error: {portable}" in console.text()
    assert "    load error: $MURMUR_HOME/broken.wasm is not a WebAssembly binary" in console.text()
    listing = html.unescape(console.hook_list.value)
    assert "conversation.read granted" in listing and "load error" in listing
    assert console.context_picker.options == ("demo-session",)
    assert console.context_picker.value == "demo-session"


def test_fire_task_start_shows_each_result(hooks: HookHost, store: ConversationStore) -> None:
    console = HookConsole(hooks, store)
    console.task_id.value = "t-42"
    console.task_start_button.click()
    assert console.event == "task-start"
    summarize, peek, broken = (console.results[k] for k in ("summarize", "peek", "broken"))
    assert summarize.ok and "320 messages" in summarize.value
    assert not peek.ok and "not-granted" in (peek.error or "")
    assert not broken.ok and broken.code
    text = console.text()
    assert "  fired task-start on demo-session:" in text
    assert "    summarize: ok task t-42: 320 messages" in text
    assert f"    peek: error {peek.code}: " in text
    assert "      stdout: walked 320 messages" in text
    assert f"    broken: error {broken.code}:" in text
    shown = html.unescape(console.result_view.value)
    assert f"{summarize.duration_ms:.1f} ms" in shown
    assert f"fuel {summarize.fuel_used}" in shown
    assert "stderr" in shown and "read-messages failed: not-granted" in shown
    fired = text.split("fired", 1)[1]
    assert " ms" not in fired and "fuel" not in fired  # volatile: HTML only


def test_fire_compact_hands_the_newest_messages_of_the_context(
    hooks: HookHost, store: ConversationStore
) -> None:
    console = HookConsole(hooks, store)
    console.compact_limit.value = 12
    console.compact_button.click()
    assert console.event == "compact"
    assert len(console.compact_input) == 12
    newest = store.reader("demo-session").read_messages(None, 12).messages
    assert [m.id for m in console.compact_input] == [m.id for m in reversed(newest)]
    kept = console.results["summarize"].value
    assert isinstance(kept, list) and 0 < len(kept) <= 12
    assert f"    summarize: ok {len(kept)} messages kept (" in console.text()
    assert "broken" not in console.results  # it only handles task-start


def test_compact_reads_the_chosen_context_not_the_last_task_started(
    tmp_path: Path, store: ConversationStore
) -> None:
    """The console read the chosen context's newest page but called ``compact`` without its
    context id: a hook reading during compaction read the record of the last task-start
    fired instead. The probe guest, given no messages, answers the newest page it reads."""
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "guest.wasm").write_bytes(assemble("guest.wat"))
    entry = "  reader:\n    component: hooks/guest.wasm\n"
    grant = "    capabilities: {conversation: {read: true}}\n"
    (tmp_path / "murmur.yaml").write_text(f"hooks:\n{entry}{grant}")
    with HookHost.from_config(tmp_path / "murmur.yaml", conversations=store) as host:
        console = HookConsole(host, store)
        console.context_picker.value = "demo-session"
        console.task_start_button.click()
        console.context_picker.value = "no-record-here"  # an empty record: no messages given
        console.compact_button.click()
        assert console.compact_input == []
        assert console.results["reader"].ok and console.results["reader"].value == []


def test_an_unknown_context_reads_as_an_empty_record(
    hooks: HookHost, store: ConversationStore
) -> None:
    console = HookConsole(hooks, store)
    console.context_picker.value = "no-such-context"
    console.task_start_button.click()
    assert console.results["summarize"].ok
    assert "0 messages" in console.results["summarize"].value
    assert "  fired task-start on no-such-context:" in console.text()


def test_text_form_is_stable(hooks: HookHost, store: ConversationStore) -> None:
    def fire() -> str:
        console = HookConsole(hooks, store)
        console.task_start_button.click()
        return console.text()

    assert fire() == fire()


def test_without_a_store_compact_gets_no_messages(demo_home: DemoHome) -> None:
    with HookHost.from_config(demo_home.murmur_yaml) as host:
        console = HookConsole(host)
        assert console.context_picker.options == ()
        console.compact_button.click()
        assert console.compact_input == []
        assert set(console.results) == {"summarize", "peek"}


def test_a_bad_context_id_is_reported_in_the_console(
    hooks: HookHost, store: ConversationStore
) -> None:
    console = HookConsole(hooks, store)
    console.context_picker.value = "../escape"
    console.compact_button.click()
    assert console.results == {}
    assert console.error is not None and console.error.code == "invalid_context_id"
    assert "invalid_context_id" in console.result_view.value
    assert "    error invalid_context_id: " in console.text()


def test_the_console_finds_the_hook_hosts_own_store(hooks: HookHost) -> None:
    console = HookConsole(hooks)  # no store passed: the one the hook host reads from
    assert console.conversations is hooks.conversations
    assert console.context_picker.options == ("demo-session",)
    console.compact_button.click()
    assert len(console.compact_input) == 20


def test_an_unknown_context_is_warned_about(hooks: HookHost, store: ConversationStore) -> None:
    console = HookConsole(hooks, store)
    assert console.context_warning.value == "" and console.unknown_context is None
    console.context_picker.value = "no-such-session"
    assert "unknown context" in console.context_warning.value
    console.task_start_button.click()
    warning = "context 'no-such-session' has no record in the store (it has: demo-session)"
    assert console.unknown_context == warning
    assert f"    warning: {warning}" in console.text()
    assert html.escape(warning) in console.result_view.value
    # stdout and stderr are shown open, with duration and fuel beside each hook
    console.context_picker.value = "demo-session"
    console.task_start_button.click()
    shown = console.result_view.value
    assert "<details open><summary>stdout</summary>" in shown
    assert "warning" not in console.text()


def test_a_grant_that_grants_nothing_is_shown_beside_its_hook(
    demo_home: DemoHome, store: ConversationStore
) -> None:
    """``read: yes`` or a misspelt ``conversations:`` leaves a hook default-deny, as SPEC §3
    says; the console shows why beside the hook, as loading warned."""
    path = demo_home.murmur_home / "typo.yaml"
    path.write_text("hooks:\n  typo:\n    component: hooks/summarize.wasm\n"
                    "    capabilities: {conversations: {read: true}}\n")  # fmt: skip
    with pytest.warns(mnb.HookConfigWarning, match="did you mean 'conversation'"):
        host = HookHost.from_config(path, conversations=store)
    with host:
        console = HookConsole(host, store)
        note = host.hooks["typo"].notes[0]
        assert f"    note: {note}" in console.text()
        assert "no grants (reads are not-granted)" in console.text()
        listing = html.unescape(console.hook_list.value)
        assert note in listing and ">note<" in listing


def test_the_console_loads_a_murmur_yaml_given_by_path(
    demo_home: DemoHome, store: ConversationStore
) -> None:
    """A path is what one has at hand; it raised AttributeError ('PosixPath' object has no
    attribute 'hooks'). Anything else is refused saying what to pass."""
    console = HookConsole(demo_home.murmur_yaml, store)
    try:
        assert console.hooks.hooks["summarize"].loaded
        assert console.context_picker.options == ("demo-session",)
        console.task_start_button.click()
        assert console.results["summarize"].ok, console.results["summarize"]
    finally:
        console.hooks.close()
    as_text = HookConsole(str(demo_home.murmur_yaml), store)
    as_text.hooks.close()
    with pytest.raises(TypeError, match=r"takes a HookHost .* or the path of a murmur.yaml"):
        HookConsole({"summarize": "summarize.wasm"})
