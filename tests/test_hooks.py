"""HookHost with WAT guests assembled at test time, against real records and the real reader.

The guest (``tests/wat/guest.wat`` inside ``tests/wat/component.wat``) misbehaves on demand:
see the guest's header for the task ids it understands.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import wasmtime
from _wat import WAT, assemble

import murmur_nb as mnb
from murmur_nb import ConversationStore, Message, RecordWriter


def assemble_guest() -> bytes:
    """The component binary: the core guest module spliced into the component wrapper."""
    return assemble("guest.wat")


@pytest.fixture(scope="module")
def guest_bytes() -> bytes:
    return assemble_guest()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A murmur home with ctx-1 (250 messages, some tool results and names) and ctx-2 (3)."""
    home = tmp_path / "home"
    with RecordWriter(home, "ctx-1") as writer:
        for i in range(250):
            if i % 50 == 7:
                writer.append(
                    "tool",
                    {"rows": i, "ok": i % 2 == 0},
                    tool_call_id=f"call-{i}",
                    is_error=i % 100 == 7,
                )
            elif i % 3 == 0:
                writer.append("assistant", f"reply {i} \u00e9\u4e16\U0001f600", name="helper")
            else:
                writer.append("user", f"question {i}")
        writer.append_raw('{"id": "partial", "role": "user", "content": "not yet')
    with RecordWriter(home, "ctx-2") as writer:
        for i in range(3):
            writer.append("user", f"other {i}", id=f"other-{i}")
    return home


@pytest.fixture
def store(home: Path) -> ConversationStore:
    return ConversationStore(home)


def capsule(tmp_path: Path, guest: bytes, yaml_text: str) -> Path:
    folder = tmp_path / "capsule"
    (folder / "hooks").mkdir(parents=True, exist_ok=True)
    (folder / "hooks" / "guest.wasm").write_bytes(guest)
    path = folder / "murmur.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    return path


GRANTED = """\
hooks:
  reader:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
"""


@pytest.fixture(params=[True, False], ids=["fast", "generic"])
def fast(request: pytest.FixtureRequest) -> bool:
    value: bool = request.param
    return value


def host_for(path: Path, store: Any, *, fast: bool = True) -> mnb.HookHost:
    return mnb.HookHost(
        mnb._hooks.config.load_hook_config(path), conversations=store, fast_lowering=fast
    )


# ------------------------------------------------------------------ loading


def test_hooks_lists_ids_paths_events_grants_and_load_errors(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore
) -> None:
    path = capsule(
        tmp_path,
        guest_bytes,
        """\
hooks:
  reader:
    component: hooks/guest.wasm
    events: [task-start]
    capabilities: {conversation: {read: true}}
  denied:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: "true"}}
  missing:
    component: hooks/missing.wasm
  junk:
    component: murmur.yaml
  folder:
    component: hooks
  broken:
    component: hooks/broken.wasm
  empty:
    component: hooks/empty.wasm
""",
    )
    (path.parent / "hooks" / "empty.wasm").write_bytes(wasmtime.wat2wasm("(component)"))
    (path.parent / "hooks" / "broken.wasm").write_bytes(b"\0asm\x01\0\0\0 not really")
    with pytest.warns(mnb.HookConfigWarning) as said:  # the quoted "true" is said out loud
        hooks = mnb.HookHost.from_config(path, conversations=store)
    assert [str(w.message) for w in said] == [
        f"{path}: hooks.denied.capabilities.conversation.read is 'true' (str), not the YAML "
        "boolean true, so reading is denied; write `read: true` to grant it (hook 'denied' "
        "loads and runs without that grant)"
    ]
    info = hooks.hooks
    assert list(info) == ["reader", "denied", "missing", "junk", "folder", "broken", "empty"]
    assert info["reader"].component == path.parent / "hooks" / "guest.wasm"
    assert info["reader"].events == ("task-start",)
    assert info["reader"].read_granted is True
    assert info["reader"].loaded and info["reader"].load_error is None
    assert info["reader"].digest is not None
    assert info["denied"].read_granted is False
    assert "not the YAML boolean true" in info["denied"].notes[0]
    assert info["missing"].load_error is not None
    assert "does not exist" in info["missing"].load_error
    assert "build_python_hook" in info["missing"].load_error
    # a text file: said without wasmtime's text-format parser ("expected `(`")
    assert info["junk"].load_error == (
        f"{path} is not a WebAssembly binary (it does not start with \\0asm; a .wat text or "
        "another file?); build the hook to a .wasm component (wasm-tools parse turns .wat "
        "text into one) and point `component:` at it"
    )
    assert info["folder"].load_error == (
        f"component {path.parent / 'hooks'} is a folder, not a component file; point "
        "`component:` in murmur.yaml at the hook's .wasm file"
    )
    assert "not a loadable WebAssembly component" in (info["broken"].load_error or "")
    assert info["empty"].load_error is not None
    assert "does not export on-task-start, on-compact" in info["empty"].load_error
    results = hooks.task_start(task_id="t1", context_id="ctx-1")
    assert set(results) == {"reader", "denied", "missing", "junk", "folder", "broken", "empty"}
    assert results["reader"].ok and results["denied"].ok
    for broken in ("missing", "junk", "folder", "broken", "empty"):
        assert results[broken].code == "load_failed"
        assert results[broken].error == info[broken].load_error
    assert set(hooks.compact([])) == {"denied", "missing", "junk", "folder", "broken", "empty"}


def test_a_component_importing_what_the_host_lacks_fails_to_load(
    tmp_path: Path, store: ConversationStore
) -> None:
    core = (WAT / "guest.wat").read_text(encoding="utf-8")
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace("(core module $main @MAIN@)", "(core module $main" + body)
    text = text.replace(
        "(component\n",
        '(component\n  (import "murmur:secrets/vault@1.0.0" (instance (export "get" (func))))\n',
        1,
    )
    path = capsule(tmp_path, wasmtime.wat2wasm(text), GRANTED)
    info = mnb.HookHost.from_config(path, conversations=store).hooks["reader"]
    assert info.load_error is not None
    assert info.load_error.startswith("cannot instantiate")
    assert "murmur:secrets/vault@1.0.0" in info.load_error
    assert "nothing else is linked" in info.load_error


def test_a_hook_with_the_wrong_signature_fails_to_load(
    tmp_path: Path, store: ConversationStore
) -> None:
    core = (WAT / "guest.wat").read_text(encoding="utf-8")
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace("(core module $main @MAIN@)", "(core module $main" + body)
    text = text.replace(
        "(type $note (result string (error string)))", "(type $note (result u32 (error string)))"
    )
    path = capsule(tmp_path, wasmtime.wat2wasm(text), GRANTED)
    error = mnb.HookHost.from_config(path, conversations=store).hooks["reader"].load_error
    assert error is not None
    assert error.startswith(
        "on-task-start has the signature func(record{task-id: string, context-id: string}) "
        "-> result<u32, string>, but the `hook` world wants func(record{task-id: string, "
        "context-id: string}) -> result<string, string>"
    )


def test_configuration_errors_raise(tmp_path: Path, guest_bytes: bytes) -> None:
    path = capsule(tmp_path, guest_bytes, "hooks:\n  h: {component: hooks/guest.wasm, x: 1}\n")
    with pytest.raises(mnb.HookConfigError, match=r"hooks\.h\.x: unknown key"):
        mnb.HookHost.from_config(path)


# ------------------------------------------------------------------ calls and values


def test_task_start_returns_the_note_with_timing_and_fuel(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore
) -> None:
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, GRANTED), conversations=store)
    result = hooks.task_start(task_id="t-\u00e9\U0001f600", context_id="ctx-1")["reader"]
    assert isinstance(result, mnb.HookResult)
    assert result.ok and result.code is None and result.error is None
    assert result.value == "t-\u00e9\U0001f600"
    assert result.hook_id == "reader" and result.event == "task-start"
    assert 0 < result.duration_ms < 5_000
    assert result.fuel_used > 0
    assert result.stdout == "" and result.stderr == ""


def test_guest_err_is_a_guest_error(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore
) -> None:
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, GRANTED), conversations=store)
    result = hooks.task_start(task_id="!fail", context_id="ctx-1")["reader"]
    assert not result.ok
    assert result.code == "guest_error"
    assert result.error == "guest says no"


def test_compact_round_trips_messages(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    page = store.reader("ctx-1").read_messages(None, 30)
    kept = hooks.compact(page.messages)["reader"]
    assert kept.ok
    assert kept.value == page.messages[1:]
    assert all(isinstance(m, Message) for m in kept.value)


def test_compact_round_trips_every_kind_of_field(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    """Empty strings, text past ASCII, a name and none, a timestamp and none, 100 KB of
    content: the guest's answer comes back exactly (the fast path reads wasmtime's values by
    address, the generic one through the binding)."""
    sent = [
        Message(id="dropped", role="user", content="the guest drops the first"),
        Message(id="", role="", content="", name="", created_at=""),
        Message(id="ü-1", role="assistant", content='héllo ✓ 𝄞\n"quoted"\x00', name="bot ✓"),
        Message(id="x" * 5000, role="tool", content="y" * 100_000, created_at="2026-01-01Z"),
    ]
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    kept = hooks.compact(sent)["reader"]
    assert kept.ok, kept
    assert kept.value == sent[1:]


@pytest.mark.parametrize("task_id", ["t", "", "tâche ✓ 𝄞 " * 50])
def test_task_start_hands_the_guest_its_task_id_exactly(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool, task_id: str
) -> None:
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    result = hooks.task_start(task_id=task_id, context_id="ctx-1")["reader"]
    assert result.ok and result.value == task_id, result


def test_invalid_context_id_is_refused_before_any_hook_runs(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore
) -> None:
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, GRANTED), conversations=store)
    with pytest.raises(mnb.InvalidContextId):
        hooks.task_start(task_id="t", context_id="../ctx-1")
    assert hooks.context_id is None


def test_closed_host_refuses_to_dispatch(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore
) -> None:
    with mnb.HookHost.from_config(
        capsule(tmp_path, guest_bytes, GRANTED), conversations=store
    ) as hooks:
        assert hooks.task_start(task_id="t", context_id="ctx-1")["reader"].ok
    with pytest.raises(mnb.HookError, match="closed"):
        hooks.task_start(task_id="t", context_id="ctx-1")


# ------------------------------------------------------------------ the conversation import


def read(hooks: mnb.HookHost, context: str, cursor: str | None = None) -> mnb.HookResult:
    task = "!read" if cursor is None else f"!read:{cursor}"
    return hooks.task_start(task_id=task, context_id=context)["reader"]


def test_reads_are_scoped_to_the_current_tasks_record(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    one = store.reader("ctx-1").read_messages(None, 100)
    assert read(hooks, "ctx-1").value == f"100|250|{one.messages[0].id}|{one.next_cursor}"
    assert read(hooks, "ctx-2").value == "3|3|other-2|-"
    assert read(hooks, "ctx-none").value == "0|0|-|-"


def test_compact_reads_the_current_task_record_and_matches_the_python_api(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    before = hooks.compact([])["reader"]
    assert before.ok and before.value == []  # before the first task: an empty page
    hooks.task_start(task_id="t", context_id="ctx-1")
    during = hooks.compact([])["reader"]
    page = store.reader("ctx-1").read_messages(None, 100)
    assert during.ok
    assert during.value == page.messages  # every field: names, timestamps, tool envelopes
    assert any(m.role == "tool" for m in during.value)
    assert any(m.name == "helper" for m in during.value)


def _no_private_ffi(monkeypatch: pytest.MonkeyPatch) -> None:
    mnb._hooks.runtime.Runtime.get()  # wasmtime-py's own modules bind their names first, as in use
    monkeypatch.delattr(wasmtime, "_ffi")  # what a wasmtime-py without the module gives
    monkeypatch.setitem(sys.modules, "wasmtime._ffi", None)


def _no_raw_symbols(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(wasmtime._ffi, "dll")  # wasmtime-py binds at import; only we look later


def _changed_callback_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wasmtime._ffi, "wasmtime_component_func_callback_t", None)


@pytest.mark.parametrize(
    "break_private_api",
    [_no_private_ffi, _no_raw_symbols, _changed_callback_type],
    ids=["no-ffi-module", "no-raw-symbols", "changed-callback-type"],
)
def test_a_missing_or_changed_private_api_falls_back_to_the_public_binding(
    tmp_path: Path,
    guest_bytes: bytes,
    store: ConversationStore,
    monkeypatch: pytest.MonkeyPatch,
    break_private_api: Callable[[pytest.MonkeyPatch], None],
) -> None:
    break_private_api(monkeypatch)
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=True)
    assert hooks.lowering is None  # the fast path was given up, not half used
    one = store.reader("ctx-1").read_messages(None, 100)
    assert read(hooks, "ctx-1").value == f"100|250|{one.messages[0].id}|{one.next_cursor}"
    hooks.task_start(task_id="t", context_id="ctx-1")
    assert hooks.compact([])["reader"].value == one.messages


def test_same_cursors_as_the_python_api(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    reader = store.reader("ctx-1")
    first = reader.read_messages(None, 100)
    second = reader.read_messages(first.next_cursor, 100)
    assert first.next_cursor is not None and second.next_cursor is not None
    # A Python cursor works in the guest ...
    assert read(hooks, "ctx-1", first.next_cursor).value == (
        f"100|250|{second.messages[0].id}|{second.next_cursor}"
    )
    # ... and the guest's cursor works in Python.
    guest_cursor = read(hooks, "ctx-1").value.split("|")[3]
    assert reader.read_messages(guest_cursor, 100) == second
    third = reader.read_messages(second.next_cursor, 100)
    assert read(hooks, "ctx-1", second.next_cursor).value == f"50|250|{third.messages[0].id}|-"


def test_same_errors_as_the_python_api(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    foreign = store.reader("ctx-2").read_messages(None, 1).next_cursor
    assert foreign is not None
    for cursor in ("garbage", foreign, "A" * 36):
        with pytest.raises(mnb.ConversationReadError) as info:
            store.reader("ctx-1").read_messages(cursor, 10)
        result = read(hooks, "ctx-1", cursor)
        assert result.code == "guest_error"
        assert result.error == str(info.value) == "invalid-cursor"


def test_unavailable_record_reaches_the_guest_verbatim(
    tmp_path: Path, guest_bytes: bytes, home: Path, fast: bool
) -> None:
    (home / "conversations" / "ctx-dir.jsonl").mkdir()
    store = ConversationStore(home)
    with pytest.raises(mnb.ConversationReadError) as info:
        store.reader("ctx-dir").read_messages(None, 10)
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    result = read(hooks, "ctx-dir")
    assert result.code == "guest_error"
    assert result.error == str(info.value)
    assert result.error.startswith("unavailable: ")


def test_ungranted_hook_links_runs_and_gets_not_granted(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    text = "hooks:\n  reader: {component: hooks/guest.wasm}\n"
    hooks = host_for(capsule(tmp_path, guest_bytes, text), store, fast=fast)
    assert hooks.hooks["reader"].loaded
    assert hooks.task_start(task_id="hello", context_id="ctx-1")["reader"].value == "hello"
    result = read(hooks, "ctx-1")
    assert (result.ok, result.code, result.error) == (False, "guest_error", "not-granted")
    before_task = host_for(capsule(tmp_path, guest_bytes, text), store, fast=fast)
    assert before_task.compact([])["reader"].error == "not-granted"


def test_process_transport_reads_an_empty_page(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore
) -> None:
    hooks = mnb.HookHost.from_config(
        capsule(tmp_path, guest_bytes, "inference: {transport: process}\n" + GRANTED),
        conversations=store,
    )
    assert read(hooks, "ctx-1").value == "0|0|-|-"
    hooks.task_start(task_id="t", context_id="ctx-1")
    assert hooks.compact([])["reader"].value == []


def test_default_store_is_murmur_home(
    tmp_path: Path, guest_bytes: bytes, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_HOME", str(home))
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, GRANTED))
    assert read(hooks, "ctx-2").value == "3|3|other-2|-"


# ------------------------------------------------------------------ limits


LIMITED = """\
hook_limits: {time_ms: 400}
hooks:
  bad:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
    limits: {time_ms: 150, memory_mib: 4}
  good:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
"""


@pytest.fixture
def limited(tmp_path: Path, guest_bytes: bytes, store: ConversationStore) -> mnb.HookHost:
    return mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, LIMITED), conversations=store)


def test_infinite_loop_stops_at_each_hooks_time_limit(limited: mnb.HookHost) -> None:
    started = time.monotonic()
    results = limited.task_start(task_id="!loop", context_id="ctx-1")
    elapsed = time.monotonic() - started
    bad, good = results["bad"], results["good"]
    assert bad.code == good.code == "deadline_exceeded"
    assert "150 ms" in (bad.error or "") and "limits.time_ms" in (bad.error or "")
    # Stopped at its own limit (generous upper bounds: a loaded CI machine schedules late).
    assert 150 <= bad.duration_ms < 150 + 1000
    assert 400 <= good.duration_ms < 400 + 1000
    assert elapsed < 3.0
    after = limited.task_start(task_id="fine", context_id="ctx-1")
    assert after["bad"].ok and after["bad"].value == "fine"
    assert after["good"].ok


def test_trap_gives_a_code_and_the_next_call_succeeds(limited: mnb.HookHost) -> None:
    result = limited.task_start(task_id="!trap", context_id="ctx-1")["bad"]
    assert (result.ok, result.code) == (False, "trap")
    assert "unreachable" in (result.error or "")
    assert limited.task_start(task_id="again", context_id="ctx-1")["bad"].value == "again"


def test_a_trap_after_a_refused_growth_names_the_trap_not_memory(limited: mnb.HookHost) -> None:
    """The host cannot see a refused memory.grow (it returns -1 to the guest); it does not
    guess: an ``unreachable`` is reported as such."""
    rss_before = psutil.Process().memory_info().rss
    results = limited.task_start(task_id="!grow", context_id="ctx-1")
    bad, good = results["bad"], results["good"]
    assert bad.code == good.code == "trap"
    assert "unreachable" in (bad.error or "")
    assert "memory" not in (bad.error or "").lower()
    assert psutil.Process().memory_info().rss - rss_before < 200 * 2**20
    assert bad.duration_ms < 150  # stopped by the memory limit, not by its 150 ms clock
    assert limited.task_start(task_id="ok", context_id="ctx-1")["bad"].ok


def test_a_guest_reporting_out_of_memory_after_a_refused_growth_is_memory_limit(
    limited: mnb.HookHost,
) -> None:
    results = limited.task_start(task_id="!oom", context_id="ctx-1")
    bad, good = results["bad"], results["good"]
    assert bad.code == good.code == "memory_limit"
    assert "4 MiB" in (bad.error or "") and "limits.memory_mib" in (bad.error or "")
    assert f"{mnb._hooks.config.DEFAULT_MEMORY_MIB} MiB" in (good.error or "")
    assert limited.task_start(task_id="ok", context_id="ctx-1")["bad"].ok


@pytest.mark.parametrize(
    ("task", "cause"),
    [
        ("!trap", "unreachable"),
        ("!deep", "call stack exhausted"),
        ("!bounds", "out of bounds memory access"),
    ],
)
def test_a_trap_names_its_real_cause(limited: mnb.HookHost, task: str, cause: str) -> None:
    result = limited.task_start(task_id=task, context_id="ctx-1")["bad"]
    assert result.code == "trap"
    assert cause in (result.error or "")
    assert "memory.grow" not in (result.error or "") and "MiB" not in (result.error or "")
    assert limited.task_start(task_id="next", context_id="ctx-1")["bad"].value == "next"


def test_initial_memory_over_the_limit_is_a_load_error_that_says_so(
    tmp_path: Path, store: ConversationStore
) -> None:
    core = (WAT / "guest.wat").read_text(encoding="utf-8")
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace("(core module $main @MAIN@)", "(core module $main" + body)
    text = text.replace('(memory (export "memory") 1)', '(memory (export "memory") 40)')
    path = capsule(
        tmp_path,
        wasmtime.wat2wasm(text),
        "hooks:\n  big:\n    component: hooks/guest.wasm\n    limits: {memory_mib: 1}\n",
    )
    hooks = mnb.HookHost.from_config(path, conversations=store)
    error = hooks.hooks["big"].load_error or ""
    assert "more memory than its limit of 1 MiB" in error
    assert "limits.memory_mib" in error
    assert hooks.hooks["big"].load_code == "memory_limit"
    assert hooks.task_start(task_id="t", context_id="ctx-1")["big"].code == "memory_limit"


def test_fuel_limit(tmp_path: Path, guest_bytes: bytes, store: ConversationStore) -> None:
    text = "hooks:\n  h:\n    component: hooks/guest.wasm\n    limits: {fuel: 50000}\n"
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, text), conversations=store)
    result = hooks.task_start(task_id="!loop", context_id="ctx-1")["h"]
    assert result.code == "fuel_exhausted"
    assert "limits.fuel" in (result.error or "")
    assert result.fuel_used == 50000
    small = hooks.task_start(task_id="x", context_id="ctx-1")["h"]
    assert small.ok and 0 < small.fuel_used < 50000


class FailingStore:
    """A conversation store whose reader breaks inside the host, as a bug would."""

    def __init__(self, inner: ConversationStore) -> None:
        self.inner = inner
        self.broken = True

    def reader(self, context_id: str | None, *, granted: bool = True) -> Any:
        inner = self.inner.reader(context_id, granted=granted)
        outer = self

        class Reader:
            def read_messages(self, cursor: str | None, limit: int) -> Any:
                if outer.broken:
                    raise RuntimeError("index on fire")
                return inner.read_messages(cursor, limit)

        return Reader()


def test_host_function_failure_gives_host_error_and_the_host_goes_on(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    failing = FailingStore(store)
    hooks = host_for(capsule(tmp_path, guest_bytes, LIMITED), failing, fast=fast)
    results = hooks.task_start(task_id="!read", context_id="ctx-1")
    for result in results.values():
        assert result.code == "host_error"
        assert "RuntimeError: index on fire" in (result.error or "")
    assert hooks.task_start(task_id="plain", context_id="ctx-1")["bad"].value == "plain"
    failing.broken = False
    again = hooks.task_start(task_id="!read", context_id="ctx-1")
    assert again["bad"].ok and again["bad"].value.startswith("100|250|")


@pytest.fixture
def restore_sigint() -> Iterator[None]:
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def test_keyboard_interrupt_stops_the_guest_and_leaves_the_host_usable(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, restore_sigint: None
) -> None:
    text = "hooks:\n  spin:\n    component: hooks/guest.wasm\n    limits: {time_ms: 30000}\n"
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, text), conversations=store)
    handler_before = signal.getsignal(signal.SIGINT)
    timer = threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            hooks.task_start(task_id="!loop", context_id="ctx-1")
    finally:
        timer.cancel()
    assert time.monotonic() - started < 3.0
    assert signal.getsignal(signal.SIGINT) is handler_before
    result = hooks.task_start(task_id="after", context_id="ctx-1")["spin"]
    assert result.ok and result.value == "after"


class SlowStore:
    """A store whose reads take a while, so the interrupt lands inside the host function."""

    def __init__(self, inner: ConversationStore) -> None:
        self.inner = inner

    def reader(self, context_id: str | None, *, granted: bool = True) -> Any:
        inner = self.inner.reader(context_id, granted=granted)

        class Reader:
            def read_messages(self, cursor: str | None, limit: int) -> Any:
                time.sleep(0.8)
                return inner.read_messages(cursor, limit)

        return Reader()


def test_keyboard_interrupt_inside_the_host_function(
    tmp_path: Path,
    guest_bytes: bytes,
    store: ConversationStore,
    fast: bool,
    restore_sigint: None,
) -> None:
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), SlowStore(store), fast=fast)
    timer = threading.Timer(0.2, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            hooks.task_start(task_id="!read", context_id="ctx-1")
    finally:
        timer.cancel()
    result = hooks.task_start(task_id="!read", context_id="ctx-2")["reader"]
    assert result.ok and result.value == "3|3|other-2|-"


def test_interrupt_outside_a_call_is_an_ordinary_keyboard_interrupt(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, restore_sigint: None
) -> None:
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, GRANTED), conversations=store)
    hooks.task_start(task_id="warm", context_id="ctx-1")
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    assert hooks.task_start(task_id="x", context_id="ctx-1")["reader"].ok


def test_captured_output_is_bounded() -> None:
    from murmur_nb._hooks.results import (  # private: the capture bound, without a guest
        CAPTURE_LIMIT,
        Capture,
    )

    capture = Capture()
    for _ in range(100):
        capture.write(b"x" * 1000)
    text = capture.text()
    assert text.startswith("x" * CAPTURE_LIMIT)
    assert text.endswith(f"[murmur-nb: {100_000 - CAPTURE_LIMIT} more bytes not captured]")
    capture = Capture()
    capture.write("caf\u00e9 \U0001f600".encode())
    assert capture.text() == "caf\u00e9 \U0001f600"


def test_host_exposes_its_store(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore
) -> None:
    hooks = mnb.HookHost.from_config(capsule(tmp_path, guest_bytes, GRANTED), conversations=store)
    assert hooks.conversations is store
    assert "reader" in repr(hooks)


def test_importing_murmur_nb_does_not_load_wasmtime() -> None:
    import subprocess
    import sys

    code = (
        "import sys, murmur_nb; print(sorted(m for m in sys.modules if m.startswith('wasmtime')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_dropped_host_is_collected(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, fast: bool
) -> None:
    import gc
    import weakref

    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=fast)
    assert read(hooks, "ctx-2").ok
    ref = weakref.ref(hooks)
    del hooks
    gc.collect()
    assert ref() is None


# ------------------------------------------------------------------ the fast path


def test_the_fast_path_is_gated_to_the_wasmtime_versions_pyproject_declares() -> None:
    import tomllib

    from murmur_nb._hooks import lowering  # private: the fast path's wasmtime gate

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert pyproject["tool"]["murmur-nb"]["fast-lowering-wasmtime"] == lowering.TESTED_WASMTIME
    # the dependency is capped at the same series: an untested wasmtime is never installed
    assert f"wasmtime{lowering.TESTED_WASMTIME}" in pyproject["project"]["dependencies"]
    assert lowering.fast_path_supported("50.0.1") and lowering.fast_path_supported("51.0.0")
    for untested in ("49.0.0", "52.0.0", "60.1.0", "not a version"):
        assert not lowering.fast_path_supported(untested)


def test_an_untested_wasmtime_uses_the_public_binding(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mnb._hooks.lowering, "TESTED_WASMTIME", ">=99")
    hooks = host_for(capsule(tmp_path, guest_bytes, GRANTED), store, fast=True)
    assert hooks.lowering is None
    assert read(hooks, "ctx-2").value == "3|3|other-2|-"


def call_shapes(store: ConversationStore, home: Path) -> list[tuple[str, str, str | None]]:
    """(context, how, cursor): every kind of page and every error read-messages can give."""
    with RecordWriter(home, "ctx-bare") as writer:  # no created_at, no name, empty content
        writer.append_raw('{"id": "bare-1", "role": "user", "content": ""}\n')
        writer.append_raw('{"id": "bare-2", "role": "assistant", "content": "x", "name": "n"}\n')
    (home / "conversations" / "ctx-dir.jsonl").mkdir()
    first = store.reader("ctx-1").read_messages(None, 100)
    second = store.reader("ctx-1").read_messages(first.next_cursor, 100)
    return [
        ("ctx-1", "read", None),  # a full page with a next cursor
        ("ctx-1", "read", first.next_cursor),  # a middle page
        ("ctx-1", "read", second.next_cursor),  # the last, partial page: no next cursor
        ("ctx-2", "read", None),  # a small record
        ("ctx-none", "read", None),  # no record: an empty page
        ("ctx-bare", "read", None),  # missing optional fields
        ("ctx-1", "read", "garbage"),  # invalid-cursor
        ("ctx-dir", "read", None),  # unavailable: ...
        ("ctx-1", "compact", None),  # a page with every field back through on-compact
        ("ctx-bare", "compact", None),
        ("ctx-none", "compact", None),
        ("ctx-1", "denied", None),  # not-granted
    ]


def test_the_fast_path_gives_what_the_public_binding_gives_on_every_call_shape(
    tmp_path: Path, guest_bytes: bytes, store: ConversationStore, home: Path
) -> None:
    path = capsule(tmp_path, guest_bytes, GRANTED)
    denied = capsule(
        tmp_path / "denied", guest_bytes, "hooks:\n  reader: {component: hooks/guest.wasm}\n"
    )
    hosts = {
        fast: (host_for(path, store, fast=fast), host_for(denied, store, fast=fast))
        for fast in (True, False)
    }
    assert hosts[True][0].lowering is not None and hosts[False][0].lowering is None
    failing = FailingStore(store)
    broken = {fast: host_for(path, failing, fast=fast) for fast in (True, False)}
    for context, how, cursor in call_shapes(store, home):
        seen = []
        for granted, ungranted in hosts.values():
            hooks = ungranted if how == "denied" else granted
            if how == "compact":
                hooks.task_start(task_id="t", context_id=context)
                result = hooks.compact([])["reader"]
            else:
                result = read(hooks, context, cursor)
            seen.append((result.ok, result.code, result.value, result.error))
        assert seen[0] == seen[1], (context, how, cursor)
    outcomes = [broken[fast].task_start(task_id="!read", context_id="ctx-1") for fast in broken]
    assert [o["reader"].code for o in outcomes] == ["host_error", "host_error"]
    assert outcomes[0]["reader"].error == outcomes[1]["reader"].error
