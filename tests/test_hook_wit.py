"""The WIT folder shipped in the package is the one the contract gives, byte for byte.

SPEC §3 spells out ``world.wit`` and ``deps/hook/hook.wit``; ``deps/conversation/read.wit`` is
the conversation seed verbatim, pinned here by its SHA-256 (the seed file's own digest).
That the tools accept the folder is shown by the componentize-py builds in
``test_hook_python.py``; the WAT guests in ``tests/wat`` use the same names.
"""

from __future__ import annotations

import hashlib

import murmur_nb as mnb

WORLD = """\
package murmur:hook-world@0.8.0;

world hook {
  import murmur:conversation/read@0.1.0;
  export murmur:hook/handlers@0.8.0;
}
"""

HOOK = """\
package murmur:hook@0.8.0;

interface lifecycle {
  record message {
    id: string,
    role: string,
    content: string,
    name: option<string>,
    created-at: option<string>,
  }
  record task-start-event {
    task-id: string,
    context-id: string,
  }
}

interface handlers {
  use lifecycle.{message, task-start-event};
  /// Called when a task starts. Returns a short note for the operator, or an error.
  on-task-start: func(event: task-start-event) -> result<string, string>;
  /// Called to compact the context. Returns the messages to keep, or an error.
  on-compact: func(messages: list<message>) -> result<list<message>, string>;
}
"""

#: sha256 of the conversation seed file (murmur:conversation@0.1.0) as the contract ships it.
SEED_SHA256 = "9073dbee658b1e4c380e4dbad29448f81bf68e991d40e199266d5071c7bcbd69"


def test_wit_folder_holds_exactly_the_three_contract_files() -> None:
    root = mnb._hooks.build.wit_dir()
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["deps/conversation/read.wit", "deps/hook/hook.wit", "world.wit"]


def test_world_and_hook_packages_are_the_spec_text() -> None:
    root = mnb._hooks.build.wit_dir()
    assert (root / "world.wit").read_text(encoding="utf-8") == WORLD
    assert (root / "deps" / "hook" / "hook.wit").read_text(encoding="utf-8") == HOOK


def test_conversation_interface_is_the_seed_verbatim() -> None:
    data = (mnb._hooks.build.wit_dir() / "deps" / "conversation" / "read.wit").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SEED_SHA256
