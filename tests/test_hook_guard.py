"""Hostile hook guests, each really doing what an attacker would: the kernel survives them all.

Every guest here is a real component (WAT assembled at test time); every test ends by running
the next call in the same process and seeing it succeed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import wasmtime

import murmur_nb as mnb
from murmur_nb import ConversationStore, RecordWriter

WAT = Path(__file__).with_name("wat")


def guest_text() -> str:
    core = (WAT / "guest.wat").read_text(encoding="utf-8")
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    return text.replace("(core module $main @MAIN@)", "(core module $main" + body)


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    home = tmp_path / "home"
    with RecordWriter(home, "ctx-1") as writer:
        for i in range(5):
            writer.append("user", f"question {i}")
    return ConversationStore(home)


def host(tmp_path: Path, store: ConversationStore, yaml_text: str, **files: bytes) -> mnb.HookHost:
    folder = tmp_path / "capsule"
    (folder / "hooks").mkdir(parents=True, exist_ok=True)
    files.setdefault("guest", wasmtime.wat2wasm(guest_text()))
    for name, data in files.items():
        (folder / "hooks" / f"{name}.wasm").write_bytes(data)
    (folder / "murmur.yaml").write_text(yaml_text, encoding="utf-8")
    return mnb.HookHost.from_config(folder / "murmur.yaml", conversations=store)


@pytest.fixture
def restore_sigint() -> Iterator[None]:
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


# ------------------------------------------------------------------ waiting through WASI

SLEEPERS = """\
hooks:
  sleeper:
    component: hooks/sleeper.wasm
    events: [task-start]
    limits: {time_ms: 300}
  guest:
    component: hooks/guest.wasm
    limits: {time_ms: 300}
"""


def sleeper(version: str = "0.2.0") -> bytes:
    """The sleeper guest, importing WASI at ``version`` (wasmtime 50 itself defines 0.2.12)."""
    text = (WAT / "sleeper.wat").read_text(encoding="utf-8")
    return wasmtime.wat2wasm(text.replace("@0.2.0", f"@{version}"))


def ctrl_c_during(hooks: mnb.HookHost, task_id: str, after_s: float = 0.3) -> float:
    """Press Ctrl-C (a real SIGINT) ``after_s`` into the ``task_id`` call, which must raise
    ``KeyboardInterrupt``; the seconds from the signal to the call's end."""
    sent: list[float] = []

    def interrupt() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(after_s, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            hooks.task_start(task_id=task_id, context_id="ctx-1")
        ended = time.monotonic()
    finally:
        timer.cancel()
    assert sent, "the timer never fired"
    return ended - sent[0]


@pytest.mark.parametrize("task", ["poll", "block"])
@pytest.mark.parametrize("version", ["0.2.0", "0.2.9", "0.2.12", "0.2.40"])
def test_a_guest_sleeping_on_a_clock_pollable_stops_at_its_time_limit(
    tmp_path: Path, store: ConversationStore, task: str, version: str
) -> None:
    hooks = host(tmp_path, store, SLEEPERS, sleeper=sleeper(version))
    assert hooks.hooks["sleeper"].loaded, hooks.hooks["sleeper"].load_error
    started = time.monotonic()
    results = hooks.task_start(task_id=task, context_id="ctx-1")
    elapsed_ms = (time.monotonic() - started) * 1000
    slept = results["sleeper"]
    assert slept.code == "deadline_exceeded", slept
    assert "300 ms" in (slept.error or "")
    # The guest asked for 10 s; the goal is limit + 100 ms, the bound leaves room for a busy CI.
    assert 300 <= slept.duration_ms < 300 + 250, slept.duration_ms
    # The other hook's call was not held past its own limit: it ran right after, and quickly.
    assert results["guest"].ok and results["guest"].value == task
    assert elapsed_ms < 300 + 500
    assert hooks.task_start(task_id="awake", context_id="ctx-1")["sleeper"].value == "awake"


def test_a_short_sleep_inside_the_limit_completes(tmp_path: Path, store: ConversationStore) -> None:
    hooks = host(tmp_path, store, SLEEPERS, sleeper=sleeper())
    result = hooks.task_start(task_id="quick", context_id="ctx-1")["sleeper"]
    assert result.ok and result.value == "slept"
    assert 20 <= result.duration_ms < 300


def test_a_blocking_read_of_stdin_returns_at_once(
    tmp_path: Path, store: ConversationStore
) -> None:
    """Hooks get a closed stdin: the one blocking read WASI offers them cannot wait."""
    hooks = host(tmp_path, store, SLEEPERS, sleeper=sleeper())
    result = hooks.task_start(task_id="read", context_id="ctx-1")["sleeper"]
    assert result.ok and result.value == "read"
    assert result.duration_ms < 300


def test_ctrl_c_ends_a_guest_sleeping_on_a_clock_pollable_promptly(
    tmp_path: Path, store: ConversationStore, restore_sigint: None
) -> None:
    text = "hooks:\n  sleeper:\n    component: hooks/sleeper.wasm\n    events: [task-start]\n"
    text += "    limits: {time_ms: 30000}\n"
    hooks = host(tmp_path, store, text, sleeper=sleeper())
    handler_before = signal.getsignal(signal.SIGINT)
    took = ctrl_c_during(hooks, "poll")
    # The goal is 100 ms; the bound leaves room for a busy CI, far below the 10 s sleep.
    assert took < 0.35, took
    assert signal.getsignal(signal.SIGINT) is handler_before
    assert hooks.task_start(task_id="awake", context_id="ctx-1")["sleeper"].value == "awake"


def test_a_ctrl_c_that_ended_one_call_never_stops_the_next(
    tmp_path: Path, store: ConversationStore, restore_sigint: None
) -> None:
    """The epoch thread reads Ctrl-C from the wakeup fd; when it got there only after the
    interrupted call had ended (its handler ran first), it stopped whichever call ran then:
    the next call raised KeyboardInterrupt, or ended ``deadline_exceeded`` in milliseconds.

    The thread is made late the way a busy machine makes it: it shares one core with the
    main thread, which keeps the GIL for long slices. On the code before, 4 runs of 4 had
    failed calls (1 to 6 of the 200).
    """
    text = "hooks:\n  sleeper:\n    component: hooks/sleeper.wasm\n    events: [task-start]\n"
    text += "    limits: {time_ms: 30000}\n"
    hooks = host(tmp_path, store, text, sleeper=sleeper())
    assert hooks.task_start(task_id="awake", context_id="ctx-1")["sleeper"].ok
    epoch = next(t for t in threading.enumerate() if t.name == "murmur-nb-epoch")
    assert epoch.native_id is not None
    cores = os.sched_getaffinity(0)
    one = {min(cores)}
    interval = sys.getswitchinterval()
    failed: list[tuple[int, str]] = []
    try:
        os.sched_setaffinity(epoch.native_id, one)
        os.sched_setaffinity(0, one)
        sys.setswitchinterval(0.5)
        for round_ in range(200):
            timer = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    hooks.task_start(task_id="poll", context_id="ctx-1")
            finally:
                timer.join()
            try:
                result = hooks.task_start(task_id="awake", context_id="ctx-1")["sleeper"]
            except KeyboardInterrupt:
                failed.append((round_, "KeyboardInterrupt"))
            else:
                if not result.ok or result.value != "awake":
                    failed.append((round_, f"{result.code}: {result.error}"))
    finally:
        sys.setswitchinterval(interval)
        os.sched_setaffinity(0, cores)
        os.sched_setaffinity(epoch.native_id, cores)
    assert not failed, failed


DAY_LONG = """\
hooks:
  guest:
    component: hooks/guest.wasm
    events: [task-start]
    limits: {time_ms: 86400000}
"""


def test_ctrl_c_ends_a_spinning_guest_with_a_day_long_limit_at_once(
    tmp_path: Path, store: ConversationStore, restore_sigint: None
) -> None:
    """Stopping a call advances the epoch past its deadline. Armed with a whole day, that
    was 17 million ``increment_epoch`` calls: a guest spinning in pure wasm ended 6.6 s after
    Ctrl-C here (about 20 s on a slower machine), and the next call waited for the push too.
    A long limit is armed 10 s at a time (``murmur_nb._hooks.epochs``), so a stop pushes at
    most one chunk."""
    hooks = host(tmp_path, store, DAY_LONG)
    took = ctrl_c_during(hooks, "!loop")
    assert took < 1.0, took
    started = time.monotonic()
    result = hooks.task_start(task_id="next", context_id="ctx-1")["guest"]
    assert result.ok and result.value == "next", result
    assert time.monotonic() - started < 0.5


def test_a_limit_of_many_chunks_ends_the_call_at_that_limit(
    tmp_path: Path, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store armed one chunk at a time gets the next chunk until its own deadline, not
    one chunk only: chunks of 20 ticks (0.1 s) and a limit of 1 s end the spinning guest
    after about 1 s, ``deadline_exceeded``."""
    from murmur_nb._hooks import epochs  # private: the chunk size, small for a 1 s test

    monkeypatch.setattr(epochs, "CHUNK_TICKS", 20)
    text = DAY_LONG.replace("86400000", "1000")
    hooks = host(tmp_path, store, text)
    assert hooks.runtime.chunks is not None, "the tested wasmtime arms long limits in chunks"
    started = time.monotonic()
    result = hooks.task_start(task_id="!loop", context_id="ctx-1")["guest"]
    took = time.monotonic() - started
    assert result.code == "deadline_exceeded", result
    assert 0.95 <= took < 2.0, took
    assert hooks.task_start(task_id="next", context_id="ctx-1")["guest"].value == "next"


# ------------------------------------------------------------------ import signatures

PAGE_TYPES = """
    (type $m0 (record (field "id" string) (field "role" string) (field "content" string)
                      (field "name" (option string)) (field "created-at" (option string))))
    (export "message" (type $m (eq $m0)))
    (type $page0 (record (field "messages" (list $m)) (field "next-cursor" (option string))
                         (field "total" u32)))
    (export "message-page" (type $page (eq $page0)))
    (type $res (result $page (error string)))"""
READ = "murmur:conversation/read@0.1.0"
CLOCK = "wasi:clocks/monotonic-clock@0.2.0"
CURSOR, LIMIT = '(param "cursor" (option string))', '(param "limit" u32)'


def read_export(params: str, result: str = "(result $res)") -> str:
    return f'(export "read-messages" (func {params} {result}))'


RIGHT_READ = read_export(f"{CURSOR} {LIMIT}")
POLL_IMPORT = (
    '(import "wasi:io/poll@0.2.0" (instance $poll (export "pollable" (type (sub resource)))))\n'
    '(alias export $poll "pollable" (type $pollable))'
)


def importing_guest(
    interface: str, body: str, func: str, params: list[str], result: str | None
) -> bytes:
    """A hook component that imports ``func`` from ``interface`` typed as ``body`` says, and
    calls it (all arguments zero) from ``on-task-start`` before returning ok("called")."""
    pollable = ""
    if "$p" in body:
        pollable = POLL_IMPORT
        body = '(alias outer 1 $pollable (type $p)) (export "pollable" (type (eq $p)))\n' + body
    zeros = " ".join(f"({p}.const 0)" for p in params)
    core_result = f"(result {result})" if result else ""
    drop = "drop" if result else ""
    text = f"""
(component
  (type $lifecycle (instance
    (type $ev (record (field "task-id" string) (field "context-id" string)))
    (export "task-start-event" (type (eq $ev)))))
  (import "murmur:hook/lifecycle@0.8.0" (instance $lc (type $lifecycle)))
  (alias export $lc "task-start-event" (type $task-start-event))
  {pollable}
  (import "{interface}" (instance $iface {body}))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $mem-i (instantiate $mem))
  (alias core export $mem-i "memory" (core memory $memory))
  (alias core export $mem-i "realloc" (core func $realloc))
  (alias export $iface "{func}" (func $f))
  (core func $f-lowered (canon lower (func $f) (memory $memory) (realloc $realloc)))
  (core module $main
    (import "env" "memory" (memory 1))
    (import "host" "f" (func $f (param {" ".join(params)}) {core_result}))
    (data (i32.const 16) "called")
    (func (export "on-task-start") (param i32 i32 i32 i32) (result i32)
      (call $f {zeros}) {drop}
      (i32.store8 (i32.const 64) (i32.const 0))
      (i32.store (i32.const 68) (i32.const 16))
      (i32.store (i32.const 72) (i32.const 6))
      (i32.const 64)))
  (core instance $env (export "memory" (memory $memory)))
  (core instance $host (export "f" (func $f-lowered)))
  (core instance $main-i (instantiate $main (with "env" (instance $env))
                                            (with "host" (instance $host))))
  (type $note (result string (error string)))
  (func $on-task-start (param "event" $task-start-event) (result $note)
    (canon lift (core func $main-i "on-task-start") (memory $memory) (realloc $realloc)
                string-encoding=utf8))
  (instance $handlers
    (export "task-start-event" (type $task-start-event))
    (export "on-task-start" (func $on-task-start)))
  (export "murmur:hook/handlers@0.8.0" (instance $handlers)))
"""
    return wasmtime.wat2wasm(text)


I32 = "i32"
WRONG_IMPORTS = {
    "read-u64-cursor": (
        READ,
        PAGE_TYPES
        + '(export "read-messages" (func (param "cursor" u64) (param "limit" u32) (result $res)))',
        "read-messages",
        ["i64", I32, I32],
        None,
        "func(u64, u32) -> result<",
    ),
    "read-string-limit": (
        READ,
        PAGE_TYPES + read_export(f'{CURSOR} (param "limit" string)'),
        "read-messages",
        [I32] * 6,
        None,
        "func(option<string>, string) -> result<",
    ),
    "read-missing-param": (
        READ,
        PAGE_TYPES + read_export(CURSOR),
        "read-messages",
        [I32] * 4,
        None,
        "func(option<string>) -> result<",
    ),
    "read-extra-param": (
        READ,
        PAGE_TYPES + read_export(f'{CURSOR} {LIMIT} (param "more" u32)'),
        "read-messages",
        [I32] * 6,
        None,
        "func(option<string>, u32, u32) -> result<",
    ),
    "read-string-result": (
        READ,
        read_export(f"{CURSOR} {LIMIT}", "(result (result string (error string)))"),
        "read-messages",
        [I32] * 5,
        None,
        "func(option<string>, u32) -> result<string, string>",
    ),
    "read-no-result": (
        READ,
        '(export "read-messages" (func (param "cursor" (option string)) (param "limit" u32)))',
        "read-messages",
        [I32] * 4,
        None,
        "as func(option<string>, u32), but",
    ),
    "read-extra-import": (
        READ,
        PAGE_TYPES + RIGHT_READ + '(export "write-messages" (func (param "m" string)))',
        "read-messages",
        [I32] * 5,
        None,
        "`write-messages`",
    ),
    "clock-u32-duration": (
        CLOCK,
        '(export "subscribe-duration" (func (param "when" u32) (result (own $p))))',
        "subscribe-duration",
        [I32],
        I32,
        "func(u32) -> own<resource>",
    ),
    "clock-u64-result": (
        CLOCK,
        '(export "subscribe-duration" (func (param "when" u64) (result u64)))',
        "subscribe-duration",
        ["i64"],
        "i64",
        "func(u64) -> u64",
    ),
    "clock-now-u32": (
        CLOCK,
        '(export "now" (func (result u32)))',
        "now",
        [],
        I32,
        "func() -> u32",
    ),
    "clock-extra-import": (
        CLOCK,
        '(export "sleep" (func (param "ns" u64)))',
        "sleep",
        ["i64"],
        None,
        "`sleep`",
    ),
    "wasi-random-u32": (
        "wasi:random/random@0.2.0",
        '(export "get-random-u64" (func (result u32)))',
        "get-random-u64",
        [],
        I32,
        "get-random-u64",
    ),
    "unknown-interface": (
        "murmur:secrets/vault@1.0.0",
        '(export "get" (func (result u32)))',
        "get",
        [],
        I32,
        "murmur:secrets/vault@1.0.0",
    ),
}


@pytest.mark.parametrize("case", list(WRONG_IMPORTS))
def test_a_guest_whose_imports_differ_from_the_world_is_refused_at_load(
    tmp_path: Path, store: ConversationStore, case: str
) -> None:
    interface, body, func, params, result, named = WRONG_IMPORTS[case]
    text = """\
hooks:
  attacker:
    component: hooks/attacker.wasm
    events: [task-start]
  denied:
    component: hooks/attacker.wasm
    events: [task-start]
    capabilities: {conversation: {read: true}}
  guest:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
"""
    attacker = importing_guest(interface, body, func, params, result)
    hooks = host(tmp_path, store, text, attacker=attacker)
    for hook_id in ("attacker", "denied"):  # with and without the read grant
        info = hooks.hooks[hook_id]
        assert info.load_code == "link_error", info
        assert named in (info.load_error or ""), info.load_error
    results = hooks.task_start(task_id="!read", context_id="ctx-1")
    assert results["attacker"].code == "link_error"
    assert results["guest"].ok and results["guest"].value.startswith("5|5|")


def test_the_right_signatures_load_and_run(tmp_path: Path, store: ConversationStore) -> None:
    """The generator makes loadable guests: the refusals above are about the types alone."""
    text = "hooks:\n  ok:\n    component: hooks/ok.wasm\n    events: [task-start]\n"
    text += "  clock:\n    component: hooks/clock.wasm\n    events: [task-start]\n"
    text += "  bare:\n    component: hooks/bare.wasm\n    events: [task-start]\n"
    ok = importing_guest(READ, PAGE_TYPES + RIGHT_READ, "read-messages", [I32] * 5, None)
    clock = importing_guest(CLOCK, '(export "now" (func (result u64)))', "now", [], "i64")
    bare = importing_guest(
        "wasi:random/random@0.2.0",
        '(export "get-random-u64" (func (result u64)))',
        "get-random-u64",
        [],
        "i64",
    )
    hooks = host(tmp_path, store, text, ok=ok, clock=clock, bare=bare)
    results = hooks.task_start(task_id="t", context_id="ctx-1")
    for hook_id in ("ok", "clock", "bare"):
        assert results[hook_id].ok and results[hook_id].value == "called", results[hook_id]


@pytest.mark.parametrize("case", ["read-u64-cursor", "read-missing-param", "read-string-limit"])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "public"])
def test_read_messages_refuses_a_call_of_another_type_even_past_the_load_check(
    tmp_path: Path,
    store: ConversationStore,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    fast: bool,
) -> None:
    """Defence in depth, so a test of an internal: with the load-time check switched off, the
    guest really calls ``read-messages`` with the wrong types. Both paths refuse the call
    (``host_error``) instead of reading the guest's integers as pointers (a SIGSEGV before)."""
    monkeypatch.setattr(mnb._hooks.host, "check_imports", lambda component, engine: None)
    interface, body, func, params, result, _ = WRONG_IMPORTS[case]
    folder = tmp_path / "capsule"
    (folder / "hooks").mkdir(parents=True)
    (folder / "hooks" / "attacker.wasm").write_bytes(
        importing_guest(interface, body, func, params, result)
    )
    (folder / "hooks" / "guest.wasm").write_bytes(wasmtime.wat2wasm(guest_text()))
    (folder / "murmur.yaml").write_text(
        "hooks:\n  attacker: {component: hooks/attacker.wasm, events: [task-start]}\n"
        "  guest: {component: hooks/guest.wasm, capabilities: {conversation: {read: true}}}\n",
        encoding="utf-8",
    )
    hooks = mnb.HookHost(
        mnb._hooks.config.load_hook_config(folder / "murmur.yaml"),
        conversations=store,
        fast_lowering=fast,
    )
    assert (hooks.lowering is not None) is fast
    assert hooks.hooks["attacker"].loaded, hooks.hooks["attacker"].load_error
    results = hooks.task_start(task_id="!read", context_id="ctx-1")
    assert results["attacker"].code == "host_error", results["attacker"]
    assert results["guest"].ok and results["guest"].value.startswith("5|5|")


# ------------------------------------------------------------------ store limits


def many_instances_guest(count: int, *, memory: bool, table: int = 0, grow_table: int = 0) -> bytes:
    """``count`` core instances of one module (each with its own memory when ``memory``, which
    grows itself by 1 MiB steps until refused), an optional table of ``table`` elements grown
    by ``grow_table`` at start, and a trivial ``on-task-start`` returning ok("")."""
    start = ""
    if memory:
        start = """(memory 1)
    (func $fill (loop $more (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))))
    (start $fill)"""
    if table:
        start = f"""(table {table} funcref)
    (func $grow (drop (table.grow (ref.null func) (i32.const {grow_table}))))
    (start $grow)"""
    instances = "\n".join("(core instance (instantiate $m))" for _ in range(count))
    text = f"""
(component
  (type $lifecycle (instance
    (type $ev (record (field "task-id" string) (field "context-id" string)))
    (export "task-start-event" (type (eq $ev)))))
  (import "murmur:hook/lifecycle@0.8.0" (instance $lc (type $lifecycle)))
  (alias export $lc "task-start-event" (type $task-start-event))
  (core module $m {start})
  {instances}
  (core module $main
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024))
    (func (export "on-task-start") (param i32 i32 i32 i32) (result i32)
      (i32.store8 (i32.const 64) (i32.const 0))
      (i32.store (i32.const 68) (i32.const 0))
      (i32.store (i32.const 72) (i32.const 0))
      (i32.const 64)))
  (core instance $main-i (instantiate $main))
  (alias core export $main-i "memory" (core memory $memory))
  (alias core export $main-i "realloc" (core func $realloc))
  (type $note (result string (error string)))
  (func $on-task-start (param "event" $task-start-event) (result $note)
    (canon lift (core func $main-i "on-task-start") (memory $memory) (realloc $realloc)
                string-encoding=utf8))
  (instance $handlers
    (export "task-start-event" (type $task-start-event))
    (export "on-task-start" (func $on-task-start)))
  (export "murmur:hook/handlers@0.8.0" (instance $handlers)))
"""
    return wasmtime.wat2wasm(text)


class PeakRss:
    """Samples this process's RSS every 2 ms while active: what a guest really allocated."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.baseline = self.process.memory_info().rss
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


MIB = 1 << 20


@pytest.mark.parametrize(
    ("guest", "limits", "code"),
    [
        (lambda: many_instances_guest(16, memory=True), "{memory_mib: 64}", "memory_limit"),
        (lambda: many_instances_guest(64, memory=False), "{}", "instance_limit"),
        (lambda: many_instances_guest(8, memory=False, table=1), "{tables: 4}", "table_limit"),
        (
            lambda: many_instances_guest(1, memory=False, table=100_000_000),
            "{memory_mib: 1}",
            "table_limit",
        ),
    ],
    ids=["16-memories", "64-instances", "8-tables", "100M-element-table"],
)
def test_store_limits_stop_each_kind_of_allocation_with_its_own_code(
    tmp_path: Path, store: ConversationStore, guest: Any, limits: str, code: str
) -> None:
    text = "hooks:\n  hog:\n    component: hooks/hog.wasm\n    events: [task-start]\n"
    text += f"    limits: {limits}\n  guest:\n    component: hooks/guest.wasm\n"
    with PeakRss() as rss:
        hooks = host(tmp_path, store, text, hog=guest())
        result = hooks.task_start(task_id="t", context_id="ctx-1")
    assert hooks.hooks["hog"].load_code == code, hooks.hooks["hog"].load_error
    assert result["hog"].code == code
    assert "murmur.yaml" in (result["hog"].error or "")
    assert rss.peak - rss.baseline < 100 * MIB, (rss.peak - rss.baseline) / MIB
    assert result["guest"].ok and result["guest"].value == "t"


def test_memory_is_limited_over_the_whole_store_not_per_memory(
    tmp_path: Path, store: ConversationStore
) -> None:
    """16 memories allowed, 64 MiB in total: each grows until refused (at 4 MiB), so the call
    adds at most 64 MiB, not 16 x 64 MiB; the memory is returned when the call ends."""
    text = "hooks:\n  hog:\n    component: hooks/hog.wasm\n    events: [task-start]\n"
    text += "    limits: {memory_mib: 64, memories: 17}\n"
    hooks = host(tmp_path, store, text, hog=many_instances_guest(16, memory=True))
    assert hooks.hooks["hog"].loaded, hooks.hooks["hog"].load_error
    with PeakRss() as rss:
        for _ in range(3):
            assert hooks.task_start(task_id="t", context_id="ctx-1")["hog"].ok
    assert rss.peak - rss.baseline < 100 * MIB, (rss.peak - rss.baseline) / MIB
    assert psutil.Process().memory_info().rss - rss.baseline < 32 * MIB


def test_a_table_grown_past_its_limit_is_refused(tmp_path: Path, store: ConversationStore) -> None:
    text = "hooks:\n  hog:\n    component: hooks/hog.wasm\n    events: [task-start]\n"
    text += "    limits: {memory_mib: 1}\n"
    guest = many_instances_guest(1, memory=False, table=1, grow_table=100_000_000)
    with PeakRss() as rss:
        hooks = host(tmp_path, store, text, hog=guest)
        result = hooks.task_start(task_id="t", context_id="ctx-1")["hog"]
    assert result.ok  # table.grow returned -1 to the guest, which ignored it
    assert rss.peak - rss.baseline < 100 * MIB, (rss.peak - rss.baseline) / MIB


def test_a_slow_hook_cannot_hold_another_hook_past_its_own_limit(
    tmp_path: Path, store: ConversationStore
) -> None:
    """Two hosts in one process share the engine; a 10 s sleeper with a 2 s limit runs on a
    thread while another hook with a 300 ms limit is called: that call ends within its own
    limit (it spent it waiting), and runs normally once the engine is free."""
    slow = host(tmp_path / "a", store, SLEEPERS.replace("time_ms: 300}", "time_ms: 2000}", 1),
                sleeper=sleeper())
    quick = host(tmp_path / "b", store, "hooks:\n  guest:\n    component: hooks/guest.wasm\n"
                 "    limits: {time_ms: 300}\n")
    running = threading.Thread(target=slow.task_start, kwargs={"task_id": "poll",
                                                                "context_id": "ctx-1"})
    running.start()
    time.sleep(0.2)  # the sleeper is inside its call now
    started = time.monotonic()
    held = quick.task_start(task_id="t", context_id="ctx-1")["guest"]
    elapsed_ms = (time.monotonic() - started) * 1000
    assert held.code == "deadline_exceeded", held
    assert "waited its whole time limit (300 ms)" in (held.error or "")
    assert 300 <= elapsed_ms < 300 + 250
    running.join()
    assert quick.task_start(task_id="free", context_id="ctx-1")["guest"].value == "free"


# ------------------------------------------------------------------ the GC heap

#: Hook-world main modules whose ``on-task-start`` keeps GC objects live: 1 MiB arrays chained
#: from a global (wasm GC), or one exception object per MiB held in a table (exceptions).
GC_MAIN = {
    "gc-arrays": """
  (type $bytes (array (mut i8)))
  (type $chain (struct (field (ref null $chain)) (field (ref $bytes))))
  (global $head (mut (ref null $chain)) (ref.null $chain))
  (func $hold (param $mib i32) (local $i i32)
    (block $done (loop $more
      (br_if $done (i32.ge_u (local.get $i) (local.get $mib)))
      (global.set $head (struct.new $chain (global.get $head)
                                          (array.new_default $bytes (i32.const 1048576))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $more))))""",
    "exceptions": """
  (tag $t (param i64 i64 i64 i64 i64 i64 i64 i64))
  (table $held 100000 exnref)
  (func $hold (param $n i32) (local $i i32)
    (block $done (loop $more
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (table.set $held (local.get $i)
        (block $caught (result exnref)
          (try_table (catch_all_ref $caught)
            (throw $t (i64.const 1) (i64.const 2) (i64.const 3) (i64.const 4)
                      (i64.const 5) (i64.const 6) (i64.const 7) (i64.const 8)))
          unreachable))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $more))))""",
}


def gc_guest(kind: str) -> bytes:
    main = f"""(module
  (import "env" "memory" (memory 1))
  (import "env" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
  (import "host" "read-messages" (func $read (param i32 i32 i32 i32 i32)))
  (data (i32.const 16) "held")
  {GC_MAIN[kind]}
  (func (export "on-task-start") (param i32 i32 i32 i32) (result i32)
    (call $hold (i32.const 45))
    (i32.store8 (i32.const 64) (i32.const 0))
    (i32.store (i32.const 68) (i32.const 16))
    (i32.store (i32.const 72) (i32.const 4))
    (i32.const 64))
  (func (export "on-compact") (param i32 i32) (result i32)
    (i32.store8 (i32.const 64) (i32.const 0))
    (i32.store (i32.const 68) (i32.const 0))
    (i32.store (i32.const 72) (i32.const 0))
    (i32.const 64)))"""
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    return wasmtime.wat2wasm(
        text.replace("(core module $main @MAIN@)", "(core module $main" + main[len("(module") :])
    )


@pytest.mark.parametrize("kind", sorted(GC_MAIN))
def test_a_guest_using_the_gc_heap_is_refused_at_load(
    tmp_path: Path, store: ConversationStore, kind: str
) -> None:
    """The GC heap lies outside the store's memory limit (45 MiB of GC arrays stayed live under
    ``memory_mib: 32``), and the hook world needs none: such a guest never runs."""
    text = "hooks:\n  hog:\n    component: hooks/hog.wasm\n    events: [task-start]\n"
    text += "    limits: {memory_mib: 32}\n  guest:\n    component: hooks/guest.wasm\n"
    with PeakRss() as rss:
        hooks = host(tmp_path, store, text, hog=gc_guest(kind))
        result = hooks.task_start(task_id="t", context_id="ctx-1")
    hog = hooks.hooks["hog"]
    assert not hog.loaded and hog.load_code == "load_failed", result["hog"]
    assert "memory_mib" in (hog.load_error or "") and "GC" in (hog.load_error or "")
    assert result["hog"].code == "load_failed" and result["hog"].value is None
    assert rss.peak - rss.baseline < 40 * MIB, (rss.peak - rss.baseline) / MIB
    assert result["guest"].ok and result["guest"].value == "t"


# ------------------------------------------------------------------ lifting a huge result


def flood_guest(count: int, length: int = 1, handlers: str = "0.8.0") -> bytes:
    """The flood guest: ``count`` messages of ``length`` bytes from ``on-compact``, its
    handlers exported as version ``handlers`` of the interface."""
    core = (WAT / "flood.wat").read_text(encoding="utf-8").replace("@COUNT@", str(count))
    core = core.replace("@LEN@", str(length))
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace("(core module $main @MAIN@)", "(core module $main" + body)
    text = text.replace('(export "murmur:hook/handlers@0.8.0"',
                        f'(export "murmur:hook/handlers@{handlers}"')  # fmt: skip
    return wasmtime.wat2wasm(text)


FLOOD = "hooks:\n  flood:\n    component: hooks/flood.wasm\n    events: [compact]\n"


def test_a_result_of_300000_messages_is_refused_before_it_is_lifted(
    tmp_path: Path, store: ConversationStore
) -> None:
    """It used to be lifted for 13-20 s past a 300 ms limit, into 506 MiB, and reported ok."""
    text = FLOOD + "    limits: {time_ms: 300, memory_mib: 32}\n"
    hooks = host(tmp_path, store, text, flood=flood_guest(300_000))
    assert hooks.hooks["flood"].loaded, hooks.hooks["flood"].load_error
    started = time.monotonic()
    with PeakRss() as rss:
        result = hooks.compact([])["flood"]
    elapsed = time.monotonic() - started
    print(f"refused in {elapsed:.2f} s, peak RSS +{(rss.peak - rss.baseline) / MIB:.0f} MiB")
    assert result.code == "result_too_large", result
    assert "300000 messages" in (result.error or "") and "murmur.yaml" in (result.error or "")
    assert result.value is None
    assert elapsed < 3.0, elapsed
    # counted in the guest (_hooks/guest_code/bounding.py): wasmtime's own copy out of guest
    # memory, about 400 MiB here, is not made, nor any Python object (another 100+ MiB and
    # 13 s before)
    assert rss.peak - rss.baseline < 48 * MIB, (rss.peak - rss.baseline) / MIB


def test_a_result_within_the_bounds_is_kept_whole(tmp_path: Path, store: ConversationStore) -> None:
    text = FLOOD + "    limits: {time_ms: 5000, result_messages: 3000}\n"
    hooks = host(tmp_path, store, text, flood=flood_guest(3000))
    result = hooks.compact([])["flood"]
    assert result.ok, result
    assert len(result.value) == 3000
    assert result.value[0] == mnb.Message(id="x", role="x", content="x")


def test_the_text_of_a_result_is_bounded_too(tmp_path: Path, store: ConversationStore) -> None:
    """200 messages of 8 KiB each: few messages, but 1.6 MiB of text past a 1 MiB bound."""
    text = FLOOD + "    limits: {result_mib: 1}\n"
    hooks = host(tmp_path, store, text, flood=flood_guest(200, 8192))
    result = hooks.compact([])["flood"]
    assert result.code == "result_too_large", result
    assert "1048576 bytes" in (result.error or "")


def test_lifting_counts_against_the_time_limit(tmp_path: Path, store: ConversationStore) -> None:
    """With the bounds raised out of the way, a huge result still ends at the deadline.

    Lifting all 300,000 messages takes 10-13 s of CPU here. Stopped at the deadline, the call
    costs wasmtime's own copy out of guest memory (about 0.8 s, which no limit but
    ``result_messages`` bounds) and the lift up to the deadline. Its CPU time is what is
    bounded: on a loaded CI machine the wall time of that copy alone passed 3 s. The calling
    thread's, which runs the call: the process's (``process_time``) counted every thread of
    the test worker too, and passed 3 s once in a full run (0.6-0.8 s alone).
    """
    text = FLOOD + "    limits: {time_ms: 300, result_messages: 1000000, result_mib: 1000}\n"
    hooks = host(tmp_path, store, text, flood=flood_guest(300_000))
    started, cpu = time.monotonic(), time.thread_time()  # the call runs on this thread
    result = hooks.compact([])["flood"]
    assert result.code == "deadline_exceeded", result
    assert time.thread_time() - cpu < 3.0, time.thread_time() - cpu
    assert time.monotonic() - started < 10.0  # not the whole lift, nor the 13-20 s of before


def test_ctrl_c_during_a_big_lift_is_honoured_promptly(
    tmp_path: Path, store: ConversationStore, restore_sigint: None
) -> None:
    text = FLOOD + "    limits: {time_ms: 60000, result_messages: 1000000, result_mib: 1000}\n"
    hooks = host(tmp_path, store, text, flood=flood_guest(300_000))
    sent: list[float] = []

    started = threading.Event()
    stop = threading.Event()

    def interrupt() -> None:
        # past wasmtime's own copy (uninterruptible), inside the lift: 1.5 s of the process's
        # CPU as well as of wall time, since on a loaded machine the copy stretches in wall
        # time only (the call is the one busy thread)
        started.wait()
        cpu, wall = time.process_time(), time.monotonic()
        while not stop.is_set() and (time.process_time() - cpu < 1.5
                                     or time.monotonic() - wall < 1.5):
            time.sleep(0.01)
        if not stop.is_set():
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Thread(target=interrupt, daemon=True)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            started.set()
            hooks.compact([])
        ended = time.monotonic()
    finally:
        stop.set()
        timer.join()
    assert sent, "the call ended before Ctrl-C was sent"
    # Not honoured, the call would end with the lift, 9 s or more later. Honoured, it ends in
    # about 0.1 s here; the bound leaves room for a loaded CI machine, where one collection
    # of the lifted objects alone (Python's oldest generation) takes 0.25 s or more.
    assert ended - sent[0] < 2.0, ended - sent[0]
    assert signal.getsignal(signal.SIGINT) is not None and hooks.hooks["flood"].loaded


# ------------------------------------------------------------------ codes from wasmtime's words


@pytest.mark.parametrize("name", [
    "all fuel consumed by WebAssembly", "wasm trap: interrupt", "exceeds memory limits",
    "fuel allocated for hostcalls has been exhausted",
    "f\n\nCaused by:\n    wasm trap: interrupt\n",
])  # fmt: skip
def test_a_trap_in_a_function_named_after_a_limit_is_a_trap(
    tmp_path: Path, store: ConversationStore, name: str
) -> None:
    """The guest's ``!trap`` runs ``unreachable`` inside a function it names after a limit's
    message (in its name section; the last one with a line break and a ``Caused by:`` of its
    own): the call is a ``trap``, said to be the ``unreachable``. The backtrace in wasmtime's
    error names the guest's functions, and the code was searched for in all of it: the
    guest chose ``fuel_exhausted``, ``deadline_exceeded``, ``memory_limit`` or
    ``result_too_large``, each with advice to raise a limit."""
    escaped = name.replace("\n", "\\n")
    text = guest_text().replace(
        "(i32.const 116)) (then unreachable))", "(i32.const 116)) (then (call $named)))"
    ).replace("(func $deep", f'(func $named (@name "{escaped}") unreachable)\n  (func $deep')
    assert "(call $named)" in text
    hooks = host(tmp_path, store, "hooks:\n  h:\n    component: hooks/h.wasm\n",
                 h=wasmtime.wat2wasm(text))  # fmt: skip
    result = hooks.task_start(task_id="!trap", context_id="ctx-1")["h"]
    assert result.code == "trap", result
    assert "unreachable" in (result.error or "") and "limit" not in (result.error or ""), result


# ------------------------------------------------------------------ read-messages within limits

READER = (
    "hooks:\n  reader:\n    component: hooks/guest.wasm\n    events: [task-start]\n"
    "    capabilities: {conversation: {read: true}}\n    limits: {@LIMITS@}\n"
)


def big_record(tmp_path: Path, count: int, size: int) -> ConversationStore:
    """A record of ``count`` user messages of ``size`` bytes each, written by the runtime's
    writer; its index is brought up to date by one read, as a kernel's earlier read would."""
    home = tmp_path / "big"
    with RecordWriter(home, "ctx-1") as writer:
        for i in range(count):
            writer.append("user", f"{i:06d}" + "x" * (size - 6))
    store = ConversationStore(home)
    assert store.reader("ctx-1").read_messages(None, 1).total == count
    return store


def read_page(hooks: mnb.HookHost, cursor: str | None = None) -> mnb.HookResult:
    task = "!read" if cursor is None else f"!read:{cursor}"
    return hooks.task_start(task_id=task, context_id="ctx-1")["reader"]


def pages_of_one(hooks: mnb.HookHost, total: str, cursor: str | None = None) -> list[str]:
    """A walk from ``cursor`` until no cursor is left, every page one message of ``total``:
    the id of each page's message."""
    seen = []
    while cursor != "-":
        page = read_page(hooks, cursor)
        assert page.ok, page
        count, of, newest, cursor = page.value.split("|")
        assert (count, of) == ("1", total)
        seen.append(newest)
    return seen


def test_a_page_of_big_messages_is_cut_to_the_hooks_memory(tmp_path: Path) -> None:
    """20 messages of 2 MiB and a hook of 4 MiB: the host used to read, decode and copy the
    whole 40 MiB page (84 MiB of the kernel, 140 ms) before the guest's allocator was refused
    and it trapped; now the page holds what the guest can, and a walk still ends."""
    store = big_record(tmp_path, 20, 2 * MIB)
    hooks = host(tmp_path, store, READER.replace("@LIMITS@", "memory_mib: 4, time_ms: 300"))
    started = time.monotonic()
    with PeakRss() as rss:
        first = read_page(hooks)
    elapsed = time.monotonic() - started
    print(f"{elapsed * 1000:.0f} ms, peak RSS +{(rss.peak - rss.baseline) / MIB:.0f} MiB")
    assert rss.peak - rss.baseline < 24 * MIB, (rss.peak - rss.baseline) / MIB
    assert elapsed < 0.3 + 0.5, elapsed
    assert first.ok, first
    count, total, newest, cursor = first.value.split("|")
    assert (count, total) == ("1", "20")
    # a walk of pages the guest can hold: every message once, newest first, ends with no cursor
    newest_ids = [newest, *pages_of_one(hooks, "20", cursor)]
    expected = [m.id for m in store.reader("ctx-1").read_messages(None, 20).messages]
    assert newest_ids == expected


def test_a_message_larger_than_the_hooks_memory_is_unavailable_and_says_why(
    tmp_path: Path,
) -> None:
    """Not read at all: the guest gets an error it can pass on, naming the message and the
    limit to raise, where the host used to decode it for a guest that could not hold it."""
    store = big_record(tmp_path, 3, 2 * MIB)
    newest = store.reader("ctx-1").read_messages(None, 1).messages[0].id
    hooks = host(tmp_path, store, READER.replace("@LIMITS@", "memory_mib: 1, time_ms: 300"))
    with PeakRss() as rss:
        result = read_page(hooks)
    assert result.code == "guest_error", result  # the guest returns the read's err verbatim
    assert result.error == (
        f"unavailable: message {newest!r} of the record of context 'ctx-1' is 2 MiB, more than "
        "this hook's memory limit of 1 MiB; raise limits.memory_mib for this hook in murmur.yaml"
        " to read it"
    )
    assert rss.peak - rss.baseline < 8 * MIB, (rss.peak - rss.baseline) / MIB


def small_record(home: Path, count: int) -> None:
    """``count`` messages of about 900 bytes, as the runtime writes them (one JSON object a
    line), written in bulk: a long conversation's record."""
    folder = home / "conversations"
    folder.mkdir(parents=True)
    body = "y" * 900
    lines = (
        f'{{"id":"m{i}","role":"user","content":"{body}","created_at":"2026-01-01T00:00:00Z"}}\n'
        for i in range(count)
    )
    (folder / "ctx-1.jsonl").write_text("".join(lines), encoding="utf-8")


def test_indexing_a_long_record_stops_at_the_time_limit_and_keeps_its_progress(
    tmp_path: Path,
) -> None:
    """The first read of a 130 MiB record used to index all of it inside the host function
    (about 300 ms here, 800 ms for 376 MiB) against a 20 ms limit the epoch deadline could not
    enforce there. Each call now ends near its limit, and the next goes on from where it
    stopped until a read is served."""
    small_record(tmp_path / "home", 150_000)
    store = ConversationStore(tmp_path / "home")
    hooks = host(tmp_path, store, READER.replace("@LIMITS@", "time_ms: 20"))
    calls: list[mnb.HookResult] = []
    while len(calls) < 200:
        started = time.monotonic()
        result = read_page(hooks)
        elapsed = time.monotonic() - started
        assert elapsed < 0.02 + 0.15, (len(calls), elapsed)
        calls.append(result)
        if result.ok:
            break
        assert result.code == "deadline_exceeded", result
        assert "20 ms" in (result.error or "")
    print(f"{len(calls)} calls, the last {calls[-1].duration_ms:.0f} ms")
    assert calls[-1].ok, calls[-1]
    count, total, newest, _ = calls[-1].value.split("|")
    assert (count, total, newest) == ("100", "150000", "m149999")
    assert 2 < len(calls) < 120  # many scans of one limit each, none starting over


def test_a_hook_walking_a_record_of_ordinary_messages_gets_whole_pages(
    tmp_path: Path,
) -> None:
    """Within its default limits a hook pages 250 ordinary messages as before: 100, 100, 50,
    each page's newest message the one after the last page's oldest, ending with no cursor."""
    home = tmp_path / "home"
    with RecordWriter(home, "ctx-1", stamp=False) as writer:
        for k in range(250):
            writer.append("user", f"message {k}", id=f"m{k}")
    hooks = host(tmp_path, ConversationStore(home), READER.replace("@LIMITS@", ""))
    seen: list[tuple[str, str]] = []
    cursor: str | None = None
    while cursor != "-":
        page = read_page(hooks, cursor)
        assert page.ok, page
        count, total, newest, cursor = page.value.split("|")
        assert total == "250"
        seen.append((count, newest))
    assert seen == [("100", "m249"), ("100", "m149"), ("50", "m49")]


def test_a_page_of_tool_results_is_cut_to_what_the_guest_receives(tmp_path: Path) -> None:
    """A page is sized from its record lines, but a tool result's envelope can be several
    times its line: orjson writes ``1e15`` back as ``1000000000000000.0``, so 8 lines of
    0.7 MiB are 2.7 MiB each in the guest. A 4 MiB hook was served five of them (14 MiB) and
    trapped in its allocator, a 2 MiB one trapped on the first instead of being told which
    message is too large; now the page is cut to the envelopes' size and a walk ends."""
    home = tmp_path / "home"
    body = ",".join(["1e15"] * 150_000)
    with RecordWriter(home, "ctx-1") as writer:
        for k in range(8):
            writer.append_raw(f'{{"id":"t{k}","role":"tool","content":[{body}]}}\n')
    store = ConversationStore(home)
    newest = store.reader("ctx-1").read_messages(None, 1).messages[0]
    assert len(newest.content) > 2.5 * MIB
    hooks = host(tmp_path, store, READER.replace("@LIMITS@", "memory_mib: 4, time_ms: 2000"))
    assert pages_of_one(hooks, "8") == [f"t{k}" for k in range(7, -1, -1)]
    hooks = host(tmp_path, store, READER.replace("@LIMITS@", "memory_mib: 2, time_ms: 2000"))
    result = read_page(hooks)
    assert result.code == "guest_error", result
    assert result.error == (
        "unavailable: message 't7' of the record of context 'ctx-1' is 2.7 MiB, more than "
        "this hook's memory limit of 2 MiB; raise limits.memory_mib for this hook in "
        "murmur.yaml to read it"
    )
