"""Hooks written in Python and built with componentize-py, run in the kernel.

The builds are cached in the per-user cache (``$MURMUR_NB_CACHE`` or ``~/.cache/murmur-nb``)
by source digest, so only the first run of the suite on a machine pays for them.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

import murmur_nb as mnb
from murmur_nb import ConversationStore, RecordWriter

pytestmark = pytest.mark.slow

PROBE = """\
import json
import os
import sys

from wit_world import exports


class Handlers(exports.Handlers):
    def on_task_start(self, event):
        report = {"env": dict(os.environ), "argv": list(sys.argv)}
        for path in ("/", ".", "/etc", "/tmp"):
            try:
                report["list " + path] = sorted(os.listdir(path))
            except Exception as exc:
                report["list " + path] = type(exc).__name__
        try:
            with open("/etc/hostname") as handle:
                report["open"] = handle.read()
        except Exception as exc:
            report["open"] = type(exc).__name__
        try:
            import socket

            port = int(event.task_id.rsplit("-", 1)[1])  # a listener the test really opened
            conn = socket.create_connection(("127.0.0.1", port), timeout=1)
            report["net"] = "connected"
            conn.close()
        except Exception as exc:
            report["net"] = type(exc).__name__
        print("probe says hello on stdout", event.task_id)
        print("probe says hello on stderr", file=sys.stderr)
        return json.dumps(report)

    def on_compact(self, messages):
        return messages
"""


@pytest.fixture(scope="module")
def summarize_wasm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mnb.build_demo_hook(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def probe_wasm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("probe") / "probe.py"
    source.write_text(PROBE, encoding="utf-8")
    return mnb.build_python_hook(source)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    with RecordWriter(home, "ctx-1") as writer:
        writer.append("system", "You are terse.", id="sys-0")
        for i in range(1, 250):
            if i % 40 == 0:
                writer.append("tool", {"n": i}, tool_call_id=f"c{i}", is_error=i % 80 == 0)
            else:
                writer.append("user" if i % 2 else "assistant", f"turn {i} \u00fc\U0001f600")
    return home


def walk(store: ConversationStore, context: str) -> list[mnb.Message]:
    reader = store.reader(context)
    messages: list[mnb.Message] = []
    cursor = None
    while True:
        page = reader.read_messages(cursor, 100)
        messages.extend(page.messages)
        if page.next_cursor is None:
            return messages
        cursor = page.next_cursor


def capsule(tmp_path: Path, component: Path, *, granted: bool = True) -> Path:
    grant = "\n    capabilities: {conversation: {read: true}}" if granted else ""
    path = tmp_path / "murmur.yaml"
    path.write_text(
        f"hooks:\n  summarize:\n    component: {component}{grant}\n"
        "    limits: {time_ms: 20000}\n",
        encoding="utf-8",
    )
    return path


def test_demo_hook_build_is_cached_and_placed_where_the_demo_yaml_says(
    summarize_wasm: Path, tmp_path: Path
) -> None:
    assert summarize_wasm.name == "summarize.wasm"
    assert summarize_wasm.parent.name == "hooks"
    assert summarize_wasm.read_bytes()[:4] == b"\0asm"
    again = mnb.build_demo_hook(tmp_path)
    assert again == tmp_path / "hooks" / "summarize.wasm"
    assert again.read_bytes() == summarize_wasm.read_bytes()


def test_summarize_walks_the_whole_record(summarize_wasm: Path, home: Path, tmp_path: Path) -> None:
    store = ConversationStore(home)
    hooks = mnb.HookHost.from_config(capsule(tmp_path, summarize_wasm), conversations=store)
    assert hooks.hooks["summarize"].loaded, hooks.hooks["summarize"].load_error
    result = hooks.task_start(task_id="t1", context_id="ctx-1")["summarize"]
    assert result.ok, result.error
    # Everything the note says, computed here through the Python API over the same record.
    messages = walk(store, "ctx-1")
    roles: dict[str, int] = {}
    for m in messages:
        roles[m.role] = roles.get(m.role, 0) + 1
    chars = sum(len(m.content) for m in messages)
    failed = sum(1 for m in messages if m.role == "tool" and json.loads(m.content)["is_error"])
    expected_roles = ", ".join(f"{r} {n}" for r, n in sorted(roles.items()))
    assert result.value == (
        f"task t1: 250 messages ({expected_roles}), {chars} characters, "
        f"{failed} failed tool calls; newest {messages[0].id}, oldest sys-0"
    )
    assert result.stdout == "walked 250 messages in 3 pages\n"  # not its id: see below
    assert result.stderr == ""
    assert result.fuel_used > 0


def test_summarize_ungranted_gets_not_granted_and_says_so_on_stderr(
    summarize_wasm: Path, home: Path, tmp_path: Path
) -> None:
    hooks = mnb.HookHost.from_config(
        capsule(tmp_path, summarize_wasm, granted=False), conversations=ConversationStore(home)
    )
    result = hooks.task_start(task_id="t1", context_id="ctx-1")["summarize"]
    assert (result.ok, result.code) == (False, "guest_error")
    assert result.error == "cannot read the conversation of ctx-1: not-granted"
    # one component runs under several ids (the demo's peek too): it said "summarize: ..."
    assert result.stderr.strip() == "read-messages failed: not-granted"


def test_summarize_compacts(summarize_wasm: Path, home: Path, tmp_path: Path) -> None:
    store = ConversationStore(home)
    hooks = mnb.HookHost.from_config(capsule(tmp_path, summarize_wasm), conversations=store)
    newest_first = walk(store, "ctx-1")
    history = [newest_first[-1], *reversed(newest_first[:20])]
    assert history[0].role == "system"
    result = hooks.compact(history)["summarize"]
    assert result.ok, result.error
    kept = result.value
    assert kept[0] == history[0]
    assert kept[1].role == "system" and kept[1].name == "summarize"
    assert kept[1].content.startswith("Summary of earlier turns: 12 messages")
    assert kept[2:] == history[-8:]
    assert "folded 12 messages, kept 8" in result.stdout


def test_python_guest_has_no_files_environment_or_network(
    probe_wasm: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_NB_TEST_SECRET", "do-not-leak")
    hooks = mnb.HookHost.from_config(
        capsule(tmp_path, probe_wasm), conversations=ConversationStore(home)
    )
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        result = hooks.task_start(task_id=f"probe-{port}", context_id="ctx-1")["summarize"]
        with pytest.raises(BlockingIOError):  # nobody connected
            listener.accept()
    assert result.ok, result.error
    report = json.loads(result.value)
    assert report["env"] == {}
    assert "MURMUR_NB_TEST_SECRET" not in result.value
    for path in ("/", ".", "/etc", "/tmp"):
        assert report[f"list {path}"] in ("FileNotFoundError", "PermissionError", "OSError", [])
    assert report["open"] in ("FileNotFoundError", "PermissionError", "OSError")
    assert report["net"] != "connected"
    assert result.stdout == f"probe says hello on stdout probe-{port}\n"
    assert result.stderr == "probe says hello on stderr\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("class Handlers(:\n    pass\n", "syntax error at line 1"),
        ("def on_task_start(event):\n    return 'x'\n", "defines no top-level `class Handlers"),
    ],
)
def test_common_mistakes_are_caught_before_building(
    tmp_path: Path, source: str, message: str
) -> None:
    path = tmp_path / "hook.py"
    path.write_text(source, encoding="utf-8")
    with pytest.raises(mnb.HookError, match=message) as info:
        mnb.build_python_hook(path)
    assert info.value.code == "hook_build_failed"
    assert str(path) in str(info.value)


def test_build_failure_reports_componentize_py_output(tmp_path: Path) -> None:
    source = tmp_path / "needs_missing.py"
    source.write_text(
        "import module_that_is_not_there\n\n\nclass Handlers:\n    pass\n", encoding="utf-8"
    )
    with pytest.raises(mnb.HookError) as info:
        mnb.build_python_hook(source)
    message = str(info.value)
    assert info.value.code == "hook_build_failed"
    assert message.startswith(f"componentize-py could not build {source} (exit ")
    assert "module_that_is_not_there" in message
    assert "Stack backtrace" not in message


def test_missing_componentize_py_is_a_clear_missing_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "hook.py"
    source.write_text("class Handlers:\n    pass\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "componentize_py", None)  # what an uninstalled one does
    with pytest.raises(mnb.MissingDependency) as info:
        mnb.build_python_hook(source)
    assert info.value.code == "missing_dependency"
    assert "componentize-py" in str(info.value)
    assert "pip install 'murmur-nb[hooks]'" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_not_a_python_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(mnb.HookError, match="not a Python source file"):
        mnb.build_python_hook(tmp_path / "missing.py")


MISBEHAVE = """\
import sys
import time

from wit_world import exports


def deep(n):
    return deep(n + 1) + 1


class Handlers(exports.Handlers):
    def on_task_start(self, event):
        what = event.task_id
        if what == "raise":
            return str(1 / 0)
        if what == "oom":
            hog = [bytearray(1 << 20) for _ in range(1024)]
            return str(len(hog))
        if what == "sleep":
            time.sleep(10)
            return "woke up"
        if what == "recurse":
            sys.setrecursionlimit(1_000_000)
            return str(deep(0))
        return "fine"

    def on_compact(self, messages):
        return messages
"""


@pytest.fixture(scope="module")
def misbehave_wasm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("misbehave") / "misbehave.py"
    source.write_text(MISBEHAVE, encoding="utf-8")
    return mnb.build_python_hook(source)


@pytest.mark.parametrize(
    "case",
    [
        ("raise", "trap", "ZeroDivisionError: division by zero"),
        ("oom", "memory_limit", "48 MiB"),
        ("recurse", "trap", "call stack exhausted"),
        ("sleep", "deadline_exceeded", "1500 ms"),
    ],
)
def test_a_python_guest_failing_is_reported_for_what_it_did(
    misbehave_wasm: Path, home: Path, tmp_path: Path, case: tuple[str, str, str]
) -> None:
    task, code, says = case
    path = tmp_path / "murmur.yaml"
    path.write_text(
        f"hooks:\n  bad:\n    component: {misbehave_wasm}\n"
        "    limits: {time_ms: 1500, memory_mib: 48}\n",
        encoding="utf-8",
    )
    hooks = mnb.HookHost.from_config(path, conversations=ConversationStore(home))
    assert hooks.hooks["bad"].loaded, hooks.hooks["bad"].load_error
    result = hooks.task_start(task_id=task, context_id="ctx-1")["bad"]
    assert result.code == code, result
    assert says in (result.error or ""), result.error
    if code == "trap":
        assert "MiB" not in (result.error or "")  # memory is not blamed for other causes
    if code == "deadline_exceeded":
        assert result.duration_ms < 1500 + 500  # the 10 s sleep was cut at the limit
    assert hooks.task_start(task_id="next", context_id="ctx-1")["bad"].value == "fine"
