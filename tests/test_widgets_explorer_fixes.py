"""HookConsole and CompactionViewer over hooks that are missing or never compacted this record.

Fast: the hooks here are a missing component file, none at all, or the WAT replay guest.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from test_hook_replay import assemble, capsule, talk, write

import murmur_nb as mnb
from murmur_nb.widgets import CompactionViewer, HookConsole

MISSING = "hooks:\n  h:\n    component: hooks/none.wasm\n"


@pytest.fixture
def store(murmur_home: Path) -> mnb.ConversationStore:
    write(murmur_home, "chat", talk(5))
    return mnb.ConversationStore(murmur_home)


def test_a_load_error_names_the_murmur_home_not_its_absolute_path(
    tmp_path: Path, murmur_home: Path, store: mnb.ConversationStore
) -> None:
    """The text form said "component file /tmp/.../hooks/none.wasm does not exist": it read
    differently on every machine, where ModuleBrowser names its home $FACET_STUDIO_HOME. A
    murmur.yaml kept elsewhere has its folder named; a symlinked home is named either way."""
    (murmur_home / "murmur.yaml").write_text(MISSING)
    (tmp_path / "link").symlink_to(murmur_home)
    linked = mnb.ConversationStore(tmp_path / "link")
    for yaml, where in (
        (murmur_home / "murmur.yaml", "$MURMUR_HOME"),
        (tmp_path / "link" / "murmur.yaml", "$MURMUR_HOME"),
        (capsule(tmp_path / "capsule", MISSING), "<folder of murmur.yaml>"),
    ):
        for source in (store, linked):
            console = HookConsole(yaml, source)
            console.hooks.close()
            text = console.text()
            assert f"    load error: component file {where}/hooks/none.wasm does not exist" in text
            assert str(tmp_path) not in text and str(tmp_path.resolve()) not in text
            # the live HTML keeps the path this machine can open
            listing = html.unescape(console.hook_list.value)
            assert str((yaml.parent / "hooks" / "none.wasm").resolve()) in listing


def test_no_hooks_says_none_configured_in_text_too(
    murmur_home: Path, store: mnb.ConversationStore
) -> None:
    (murmur_home / "murmur.yaml").write_text("hooks: {}\n")
    console = HookConsole(murmur_home / "murmur.yaml", store)
    console.hooks.close()
    assert "none configured" in console.hook_list.value
    assert console.text() == "HookConsole:\n  hooks: none configured"


def test_a_context_id_no_compaction_ran_on_is_refused_naming_those_that_did(
    tmp_path: Path, store: mnb.ConversationStore
) -> None:
    """It raised traitlets' TraitError "Invalid selection: value not found"."""
    yaml = capsule(tmp_path / "capsule", "hooks:\n  dropper:\n    component: hooks/replay.wasm\n",
                   replay=assemble("replay.wat"))  # fmt: skip
    with mnb.HookHost.from_config(yaml, conversations=store) as hooks:
        results = mnb.replay(hooks, "chat", progress=False)
    assert CompactionViewer(results, store, context_id="chat").record.value == "chat"
    with pytest.raises(ValueError, match=r"no compact rows for record 'other-session'.*: chat$"):
        CompactionViewer(results, store, context_id="other-session")
