"""Hooks written in Python and built with componentize-py, run in the kernel.

The builds are cached in the per-user cache (``$MURMUR_NB_CACHE`` or ``~/.cache/murmur-nb``)
by source digest, so only the first run of the suite on a machine pays for them. At the end: a
root kernel whose cache another account can write uses none of its builds, nor its
componentize-js toolchain (the JavaScript builder's, tested here with the other build cache).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _users import test_user

import murmur_nb as mnb
from murmur_nb import ConversationStore, RecordWriter
from murmur_nb._hooks.build import DEMO_HOOK_SOURCE  # private: the demo's own source

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


#: what another account builds and plants under the demo hook's public build name
PLANTED = """\
from wit_world import exports


class Handlers(exports.Handlers):
    def on_task_start(self, event):
        return "PLANTED by the test account"

    def on_compact(self, messages):
        return messages
"""


@pytest.fixture
def theirs() -> Iterator[Path]:
    """A home (and cache) folder of the test account, as ``sudo -E`` hands a root kernel."""
    folder = Path(tempfile.mkdtemp(prefix="mnb-theirs-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def give_to_the_test_user(folder: Path) -> None:
    uid = test_user()
    gid = pwd.getpwuid(uid).pw_gid
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, uid, gid, follow_symlinks=False)


def root_made_nothing_in(cache: Path) -> None:
    """The other account's cache is left alone (its keys folder is another module's)."""
    made = [p for p in [cache, *cache.rglob("*")] if p.lstat().st_uid != test_user()]
    assert made == [], made


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule is a root kernel's")
def test_as_root_a_build_planted_in_another_accounts_cache_is_not_used(
    summarize_wasm: Path, home: Path, tmp_path: Path, theirs: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A red-team trial: the test account put a hook answering "PLANTED ..." in its own
    ``~/.cache/murmur-nb/builds/`` under the demo hook's build name (the same for every
    account); a root kernel given that ``HOME`` (``sudo -E``) copied it into its demo home and
    ran it. Now it builds the demo hook again in a private folder and leaves the plant alone."""
    planted_source = tmp_path / "planted" / "app.py"
    planted_source.parent.mkdir()
    planted_source.write_text(PLANTED, encoding="utf-8")
    planted = mnb.build_python_hook(planted_source).read_bytes()  # root's own cache: built once
    name = mnb.build_python_hook(DEMO_HOOK_SOURCE).name  # the public build name
    builds = theirs / ".cache" / "murmur-nb" / "builds"
    builds.mkdir(parents=True)
    (builds / name).write_bytes(planted)
    give_to_the_test_user(theirs)
    monkeypatch.setenv("HOME", str(theirs))
    monkeypatch.delenv("MURMUR_NB_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    built = mnb.build_demo_hook(tmp_path / "demo")

    store = ConversationStore(home)
    hooks = mnb.HookHost.from_config(capsule(tmp_path, built), conversations=store)
    result = hooks.task_start(task_id="t1", context_id="ctx-1")["summarize"]
    assert "PLANTED" not in str(result.value), result.value
    assert result.ok, result.error
    assert str(result.value).startswith("task t1: 250 messages"), result.value
    assert built.read_bytes() != planted
    assert (builds / name).read_bytes() == planted  # left as it was
    root_made_nothing_in(theirs / ".cache")
    assert summarize_wasm.read_bytes()[:4] == built.read_bytes()[:4] == b"\0asm"


PLANTED_CLI = """\
import {{ writeFileSync }} from "node:fs";
writeFileSync({marker!r}, "componentize-js of the test account ran as uid " + process.getuid());
process.exit(1);
"""

#: stands in for npm on PATH: says which registry the real npm would install from with these
#: options, then installs the genuine toolchain (a link to root's own: no network)
FAKE_NPM = """\
#!/bin/sh
shift
{npm} config get registry "$@" > {record}
ln -s {genuine} node_modules
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule is a root kernel's")
@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None,
                    reason="needs Node.js and npm")  # fmt: skip
@pytest.mark.parametrize("plant", ["toolchain", "npmrc"])
def test_as_root_a_componentize_js_planted_by_another_account_never_runs(
    tmp_path: Path, theirs: Path, monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    """A red-team trial: the test account planted a componentize-js whose ``cli.js`` writes a
    file, in its own ``~/.cache/murmur-nb/npm/``; a root kernel given that ``HOME`` ran it as
    root when it built a JavaScript hook. Nor may its ``~/.npmrc`` choose the registry root
    installs the toolchain from (``npmrc``: root's own cache, the account's ``HOME``).
    Internal calls: the JavaScript builder has no public name."""
    from murmur_nb._hooks.build import (  # private: the JavaScript builder has no public name
        build_js_hook,
        componentize_js_toolchain,
    )

    genuine = componentize_js_toolchain() / "node_modules"  # root's own, installed once
    marker, record = tmp_path / "ran-as-root", tmp_path / "registry"
    cjs = "node_modules/@bytecodealliance/componentize-js"
    toolchain = theirs / ".cache/murmur-nb/npm" / genuine.parent.name / cjs
    (toolchain / "src").mkdir(parents=True)
    (toolchain / "package.json").write_text('{"name": "@bytecodealliance/componentize-js"}')
    (toolchain / "src" / "cli.js").write_text(PLANTED_CLI.format(marker=str(marker)))
    (theirs / ".npmrc").write_text("registry=http://127.0.0.1:9/planted/\n")
    give_to_the_test_user(theirs)
    npm = tmp_path / "bin" / "npm"
    npm.parent.mkdir()
    npm.write_text(FAKE_NPM.format(npm=shutil.which("npm"), record=record, genuine=genuine))
    npm.chmod(npm.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{npm.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(theirs))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("MURMUR_NB_CACHE", raising=False)
    monkeypatch.delenv("NPM_CONFIG_USERCONFIG", raising=False)
    monkeypatch.delenv("npm_config_userconfig", raising=False)

    if plant == "toolchain":
        source = tmp_path / "hook" / "hook.js"
        source.parent.mkdir()
        source.write_text(
            "export const handlers = "
            "{ onTaskStart(e) { return 'js'; }, onCompact(m) { return m; } };\n"
        )
        try:
            built, failed = build_js_hook(source), None
        except mnb.HookError as exc:  # the plant exits 1 after its work
            built, failed = None, exc
        assert not marker.exists(), marker.read_text()
        assert built is not None, failed
        assert built.read_bytes()[:4] == b"\0asm"
        assert not built.is_relative_to(theirs)
    else:
        monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))  # root's, fresh
        installed = componentize_js_toolchain()
        assert installed.is_relative_to(tmp_path / "cache")
        assert "planted" not in record.read_text(), record.read_text()
        assert record.read_text().strip() != ""
    assert not marker.exists()
    root_made_nothing_in(theirs / ".cache")


#: run by the test account while root builds: every 5 ms, every new entry of the temporary
#: folder is walked and each file in it read; prints what it read, and what it could not,
#: once its standard input closes
WATCH = """\
import json, os, select, sys, time
top, marker = sys.argv[1], sys.argv[2].encode()
before = set(os.listdir(top))
print("ready", flush=True)
read, refused, polls = {}, set(), 0
while not select.select([sys.stdin], [], [], 0)[0]:
    polls += 1
    for name in set(os.listdir(top)) - before:
        walk = os.walk(os.path.join(top, name), onerror=lambda e: refused.add(e.filename))
        for folder, _, files in walk:
            for file in files:
                path = os.path.join(folder, file)
                try:
                    with open(path, "rb") as handle:
                        read[path] = read.get(path) or marker in handle.read()
                except OSError:
                    refused.add(path)
    time.sleep(0.005)
print(json.dumps({"read": read, "refused": sorted(refused), "polls": polls}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="another account against a root kernel")
@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None,
                    reason="needs Node.js and npm")  # fmt: skip
def test_another_account_cannot_read_a_javascript_hook_while_root_builds_it(
    tmp_path: Path,
) -> None:
    """A red-team trial: componentize-js writes the hook's source into a folder it makes in
    the temporary folder with the umask's mode (``/tmp/<12 hex>/sources/``, ``0755`` and
    ``0644``), and another account polling ``/tmp`` read it while root built. The build's
    temporary folder is now a ``0700`` folder of the kernel's. Internal call: the
    JavaScript builder has no public name."""
    from _users import REPO, passage_for  # the test account's way to this interpreter

    from murmur_nb._hooks.build import build_js_hook  # private: no public JavaScript builder

    marker = f"SECRET-{os.urandom(8).hex()}"  # also makes the build a new one (not cached)
    source = tmp_path / "hook" / "secret.js"
    source.parent.mkdir()
    source.write_text(
        f"// {marker}\nexport const handlers = "
        "{ onTaskStart(e) { return 'js'; }, onCompact(m) { return m; } };\n"
    )
    scratch = tmp_path / "watcher"
    scratch.mkdir()
    give_to_the_test_user(scratch)
    python = Path(sys.executable)
    uid = test_user()
    with (
        passage_for(uid, [REPO, python.parent, Path(os.path.realpath(python)).parent]),
        subprocess.Popen(
            [sys.executable, "-S", "-c", WATCH, tempfile.gettempdir(), marker],
            user=uid, group=uid, extra_groups=[], cwd=scratch, stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "HOME": str(scratch)}, text=True,
        ) as watcher,
    ):  # fmt: skip
        assert watcher.stdout is not None
        assert watcher.stdout.readline().strip() == "ready"
        try:
            built = build_js_hook(source)
        finally:
            out, _ = watcher.communicate(timeout=60)  # closes its input: it stops
    seen = json.loads(out)
    assert built.read_bytes()[:4] == b"\0asm"
    assert seen["polls"] > 10, seen  # it looked all through the build
    leaked = [path for path, found in seen["read"].items() if found]
    assert leaked == [], leaked  # before: ['/tmp/<12 hex>/out.wasm'] (sources/ is read once)
