"""on-compact's result is counted inside the guest, before wasmtime copies any of it out.

Each test loads a real component through :class:`HookHost`: the WAT flood guest, the
componentize-py and componentize-js echo guests of ``test_hook_exit``, and hostile layouts that
try to make the count read something other than what the lift reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import wasmtime
from _wat import assemble, component_text
from test_hook_exit import js_guest, python_guest
from test_hook_guard import MIB, WAT, PeakRss, flood_guest, host

import murmur_nb as mnb
from murmur_nb import ConversationStore, RecordWriter
from murmur_nb._hooks.guest_code.bounding import (  # private: the rewrite itself
    Unbounded,
    bound_compact,
)

COMPACT = "hooks:\n  h:\n    component: hooks/h.wasm\n    events: [compact]\n"


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    home = tmp_path / "home"
    with RecordWriter(home, "ctx-1") as writer:
        writer.append("user", "hello")
    return ConversationStore(home)


def messages(count: int) -> list[mnb.Message]:
    return [mnb.Message(id=f"m{i}", role="user", content=f"text {i}") for i in range(count)]


ECHO_GUESTS: list[Any] = [
    pytest.param(python_guest, id="componentize-py", marks=pytest.mark.slow),
    pytest.param(js_guest, id="componentize-js", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("make_guest", ECHO_GUESTS)
def test_built_guests_refuse_a_long_result_themselves(
    make_guest: Callable[[Path], Path], tmp_path: Path, store: ConversationStore
) -> None:
    """An echo hook given one message past the default ``result_messages`` (10,000): its own
    code refuses them (the error says so; the host's own count would not), on both of the
    host's lift paths, and 10,000 come back whole. (The default bound keeps the compiled
    variant the one ``test_hook_exit`` uses: one compile per guest.)"""
    component = make_guest(tmp_path)
    config = tmp_path / "murmur.yaml"
    config.write_text(
        f"hooks:\n  h:\n    component: {component}\n    events: [compact]\n"
        "    limits: {time_ms: 20000}\n",
        encoding="utf-8",
    )
    for fast in (True, False):
        hooks = mnb.HookHost(
            mnb._hooks.config.load_hook_config(config), conversations=store, fast_lowering=fast
        )
        assert hooks.hooks["h"].loaded, hooks.hooks["h"].load_error
        result = hooks.compact(messages(10_001))["h"]
        assert result.code == "result_too_large", result
        assert "holds 10001 messages, more than the 10000 allowed" in (result.error or "")
        assert "counted in the guest" in (result.error or "")
        kept = hooks.compact(messages(10_000))["h"]
        assert kept.ok and kept.value == messages(10_000), kept.error


@pytest.mark.parametrize("handlers", ["0.8.0", "0.8.1"])
def test_a_flood_is_refused_in_the_guest_before_any_copy(
    tmp_path: Path, store: ConversationStore, handlers: str
) -> None:
    """300,000 messages: wasmtime's copy of them took ~400 MiB and a second; now none is made.
    Also when the handlers are exported as ``@0.8.1``, which wasmtime takes for ``@0.8.0``
    (before, the count was added under the exact name only: that hook loaded unbounded,
    and the same flood took 426 MiB and half a second, past its 300 ms)."""
    text = COMPACT + "    limits: {time_ms: 300, memory_mib: 32}\n"
    hooks = host(tmp_path, store, text, h=flood_guest(300_000, handlers=handlers))
    started = time.monotonic()
    with PeakRss() as rss:
        result = hooks.compact([])["h"]
    elapsed = time.monotonic() - started
    assert result.code == "result_too_large" and "counted in the guest" in (result.error or "")
    assert "300000 messages" in (result.error or "")
    assert rss.peak - rss.baseline < 24 * MIB, (rss.peak - rss.baseline) / MIB
    assert elapsed < 1.0, elapsed


def test_handlers_exported_as_two_versions_are_not_run_for_compact(
    tmp_path: Path, store: ConversationStore
) -> None:
    """Two other versions of the handlers interface and not ``@0.8.0``: which one wasmtime
    runs is not for the rewrite to guess, so the hook is not loaded for ``compact``, and
    says why."""
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    export = '(export "murmur:hook/handlers@0.8.0" (instance $handlers))'
    assert export in text
    both = text.replace(export, export.replace("@0.8.0", "@0.8.1") + "\n  "
                        + export.replace("@0.8.0", "@0.8.2"))  # fmt: skip
    core = (WAT / "flood.wat").read_text(encoding="utf-8").replace("@COUNT@", "5")
    core = core.replace("@LEN@", "1")
    both = both.replace("(core module $main @MAIN@)",
                        "(core module $main" + core[core.index("(module") + len("(module") :])
    hooks = host(tmp_path, store, COMPACT, h=wasmtime.wat2wasm(both))
    assert not hooks.hooks["h"].loaded
    assert "handlers@0.8.1, murmur:hook/handlers@0.8.2: one of them" in (
        hooks.hooks["h"].load_error or ""), hooks.hooks["h"].load_error  # fmt: skip


def test_a_component_whose_compact_is_an_import_leaves_the_other_hooks_loaded(
    tmp_path: Path, store: ConversationStore
) -> None:
    """A valid component whose ``on-compact`` is the imported ``read-messages`` (an alias
    of an instance's export): that hook is not loaded for ``compact``, with its reason, and
    the other hook of the file loads. Before, the rewrite took the alias for a re-export and
    used its name as an index: ``HookHost.from_config`` raised ``TypeError`` and no hook of
    the file loaded."""
    bad = component_text("guest.wat").replace('(export "on-compact" (func $on-compact))',
                                              '(export "on-compact" (func $read-messages))')
    assert bad != component_text("guest.wat")
    text = ("hooks:\n  good:\n    component: hooks/good.wasm\n"
            "  bad:\n    component: hooks/bad.wasm\n    events: [compact]\n")
    hooks = host(tmp_path, store, text, good=assemble("guest.wat"), bad=wasmtime.wat2wasm(bad))
    assert hooks.hooks["good"].loaded, hooks.hooks["good"].load_error
    assert not hooks.hooks["bad"].loaded
    assert "cannot run `compact`" in (hooks.hooks["bad"].load_error or "")


def decoy_guest(count: int) -> bytes:
    """A guest whose on-compact module reads a memory of its own as memory 0 (a decoy that
    says "ok, no messages") and writes a ``count``-message list into memory 1, the memory the
    component lifts from, at the same address."""
    flood = (WAT / "flood.wat").read_text(encoding="utf-8")
    flood = flood.replace("@COUNT@", str(count)).replace("@LEN@", "1")
    body = flood[flood.index("(module") + len("(module") :]
    body = body.replace(
        '(import "env" "memory" (memory 1))',
        '(import "decoy" "memory" (memory $decoy 1))\n  (import "env" "memory" (memory $lift 1))',
    )
    for op in ("i32.store8", "i32.store", "memory.fill"):  # every write goes to the lift's memory
        body = body.replace(f"({op} ", f"({op} $lift ")
    body = body.replace('(data (i32.const 16) "x")', '(data $lift (i32.const 16) "x")')
    body = body.replace(
        "(call $result (i32.const 0) (local.get $base) (local.get $count))))",
        "(drop (call $result (i32.const 0) (local.get $base) (local.get $count)))\n"
        "    (i32.store8 $decoy (i32.const 64) (i32.const 0))\n"
        "    (i32.store $decoy (i32.const 72) (i32.const 0))\n"
        "    (i32.const 64)))",
    )
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace(
        "(core module $main @MAIN@)",
        "(core module $decoy-m (memory (export \"memory\") 1))\n"
        "  (core instance $decoy-i (instantiate $decoy-m))\n"
        "  (core module $main" + body,
    )
    text = text.replace(
        '(with "host" (instance $host))',
        '(with "host" (instance $host)) (with "decoy" (instance $decoy-i))',
    )
    return wasmtime.wat2wasm(text)


def test_a_count_that_would_read_another_memory_is_refused_at_load(
    tmp_path: Path, store: ConversationStore
) -> None:
    """The decoy layout is not loaded for compact: the check cannot read what the lift reads."""
    data = decoy_guest(300_000)
    with pytest.raises(Unbounded, match="another memory"):
        bound_compact(data, 10)
    text = COMPACT + "    limits: {time_ms: 300, memory_mib: 32}\n"
    text += "  fine:\n    component: hooks/fine.wasm\n    events: [compact]\n"
    with PeakRss() as rss:
        hooks = host(tmp_path, store, text, h=data, fine=flood_guest(1))
        results = hooks.compact([])
    h = hooks.hooks["h"]
    assert not h.loaded and "cannot run `compact`" in (h.load_error or ""), h.load_error
    assert "another memory" in (h.load_error or "")
    assert results["h"].code == "load_failed" and results["h"].value is None
    assert rss.peak - rss.baseline < 24 * MIB, (rss.peak - rss.baseline) / MIB
    assert results["fine"].ok and len(results["fine"].value) == 1


def test_a_lift_of_a_function_no_module_defines_is_refused(
    tmp_path: Path, store: ConversationStore
) -> None:
    """on-compact lifted from a core instance made of exports, not from a module instance."""
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    body = (WAT / "flood.wat").read_text(encoding="utf-8").replace("@COUNT@", "5")
    body = body.replace("@LEN@", "1")
    text = text.replace("(core module $main @MAIN@)",
                        "(core module $main" + body[body.index("(module") + 7 :])  # fmt: skip
    text = text.replace(
        '(canon lift (core func $main-i "on-compact")',
        '(canon lift (core func $relay "on-compact")',
    )
    text = text.replace(
        '  (type $note (result string (error string)))',
        '  (alias core export $main-i "on-compact" (core func $oc))\n'
        '  (core instance $relay (export "on-compact" (func $oc)))\n'
        '  (type $note (result string (error string)))',
    )
    hooks = host(tmp_path, store, COMPACT, h=wasmtime.wat2wasm(text))
    h = hooks.hooks["h"]
    assert not h.loaded and "instance of no module" in (h.load_error or ""), h.load_error


def test_strings_that_all_point_at_one_region_are_a_result_too_large(
    tmp_path: Path, store: ConversationStore
) -> None:
    """200 messages whose contents are all the same 1 MiB of guest memory: within the message
    count, but wasmtime copies the region once a message and stops at its own bound. That is
    ``result_too_large`` saying murmur.yaml cannot raise it (it was a ``trap``), and the host
    goes on."""
    text = COMPACT + "    limits: {time_ms: 5000, memory_mib: 64}\n"
    hooks = host(tmp_path, store, text, h=flood_guest(200, MIB))
    result = hooks.compact([])["h"]
    assert result.code == "result_too_large", result
    assert "murmur.yaml cannot raise" in (result.error or ""), result.error
    again = host(tmp_path / "again", store, text, h=flood_guest(3, 10))
    assert again.compact([])["h"].ok
