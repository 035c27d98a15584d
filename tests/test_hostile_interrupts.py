"""Interrupting the kernel (a real SIGINT) or killing it (SIGKILL) in the middle of murmur-nb's
work, then going on: the same kernel after a Ctrl-C, a new one after a kill.

What was attacked, and what happened before:

- **A Ctrl-C as a hook call's store is freed.** wasmtime-py frees a store, then forgets its
  pointer; a ``KeyboardInterrupt`` raised between the two left the pointer, and the store
  was freed again when it was collected: the kernel died with SIGSEGV in
  ``wasmtime_store_delete``. Random Ctrl-Cs during back-to-back hook calls killed the kernel
  within a few hundred calls, every run.
- **A kernel killed while it copies a module into the snapshot store.** The copy is made in
  a ``.build-*`` folder of the (persistent) store and renamed into place; a kernel killed
  mid-copy (the OOM killer, a restart) left the partial copy, up to ``max_module_bytes``
  (512 MiB) with read-only folders, in the store for good: three kills of a 200 MiB module
  left 300 MiB that no later host removed.

Each scenario runs in a child process of its own (a crash or a hang is the child's, seen
here as its exit status, within a timeout).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_hooks import assemble_guest

import murmur_nb as mnb
from murmur_nb import RecordWriter

ROOT = Path(__file__).resolve().parents[1]

_HOOKS = """
import gc, os, random, signal, sys, threading, time
import wasmtime
import murmur_nb as mnb
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel, however started
hooks = mnb.HookHost.from_config(sys.argv[1], conversations=mnb.ConversationStore(sys.argv[2]))

def call(task):
    return hooks.task_start(task_id=task, context_id="ctx-1")["guest"]

assert call("warm").ok
"""


def _child(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)  # fmt: skip


@pytest.fixture
def hook_capsule(tmp_path: Path) -> tuple[str, str]:
    """``(murmur.yaml, murmur home)``: one WAT hook whose task-start answers the task id."""
    (tmp_path / "capsule" / "hooks").mkdir(parents=True)
    (tmp_path / "capsule" / "hooks" / "guest.wasm").write_bytes(assemble_guest())
    config = tmp_path / "capsule" / "murmur.yaml"
    config.write_text("hooks:\n  guest:\n    component: hooks/guest.wasm\n", encoding="utf-8")
    with RecordWriter(tmp_path / "home", "ctx-1") as writer:
        writer.append("user", "hello")
    return str(config), str(tmp_path / "home")


def test_ctrl_c_as_a_hook_calls_store_is_freed_leaves_the_kernel_alive(
    hook_capsule: tuple[str, str],
) -> None:
    """A real SIGINT sent just as wasmtime's free of the call's store returns (found with a
    trace function): the call raises ``KeyboardInterrupt``, a collection afterwards frees
    nothing twice, and the next call answers (before: SIGSEGV at the collection)."""
    code = _HOOKS + """
pressed = []
free = wasmtime.Store._delete.__code__  # private: wasmtime's free of a store, the window

def press_as_the_free_returns(frame, event, arg):
    if event == "call":
        return press_as_the_free_returns if frame.f_code is free else None
    if event == "return" and not pressed:
        pressed.append(True)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as the store's memory is freed
    return None

sys.settrace(press_as_the_free_returns)
try:
    call("interrupted")
except KeyboardInterrupt:
    print("interrupted", flush=True)
finally:
    sys.settrace(None)
gc.collect()
print(call("after").value, flush=True)
"""
    done = _child(code, *hook_capsule)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["interrupted", "after"], done.stdout


def test_random_ctrl_cs_during_hook_calls_never_crash_the_kernel(
    hook_capsule: tuple[str, str],
) -> None:
    """600 hook calls, each with a real SIGINT sent to the main thread at a random moment of
    it: every interrupted call ends in ``KeyboardInterrupt`` or its result, the next call
    answers, and the process exits cleanly (before: SIGSEGV within a few hundred calls)."""
    code = _HOOKS + """
main, answered, interrupted = threading.get_ident(), 0, 0
for i in range(600):
    timer = threading.Timer(random.uniform(0, 0.0015), signal.pthread_kill,
                            (main, signal.SIGINT))
    try:
        timer.start()
        call(f"t{i}")
    except KeyboardInterrupt:
        interrupted += 1
    while True:  # the signal may come late: let it land here, then call again
        try:
            timer.join()
            time.sleep(0.002)
            break
        except KeyboardInterrupt:
            pass
    answered += call(f"after{i}").value == f"after{i}"
print(answered, interrupted > 0, flush=True)
"""
    done = _child(code, *hook_capsule, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["600", "True"], done.stdout


def test_a_ctrl_c_anywhere_in_a_calls_deadline_leaves_later_calls_free(
    hook_capsule: tuple[str, str],
) -> None:
    """A ``KeyboardInterrupt`` raised at each Python function entry of the epoch ticker's
    ``deadline`` (where each call's store gets its deadline), as a Ctrl-C lands there: the
    next call answers (before: at the entry of the condition's ``__exit__`` the ticker's lock
    stayed held, and every later hook call waited for it forever)."""
    code = _HOOKS + """
from murmur_nb._hooks.runtime import Ticker  # private: the step the Ctrl-C lands in
deadline, answered, point = Ticker.deadline.__code__, [], 0
while True:
    seen, inside = [0], [False]

    def press(frame, event, arg, point=point):
        if frame.f_code is deadline and event in ("call", "return"):
            inside[0] = event == "call"
        if event == "call" and inside[0]:
            seen[0] += 1
            if seen[0] == point + 1:
                raise KeyboardInterrupt  # as the signal handler raises it, at a function entry
        return press

    sys.settrace(press)
    try:
        call(f"t{point}")
        landed = False
    except KeyboardInterrupt:
        landed = True
    finally:
        sys.settrace(None)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (call(f"after{point}"), done.set()), daemon=True)
    worker.start()
    if not done.wait(10):
        print("stuck after point", point, flush=True)
        os._exit(3)
    answered.append(point)
    if not landed:
        break
    point += 1
print(len(answered) > 1, flush=True)
"""
    done = _child(code, *hook_capsule)
    assert done.returncode == 0, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert done.stdout.split() == ["True"], done.stdout


_INVOKE = """
import sys
import murmur_nb as mnb
with mnb.ModuleHost(home=sys.argv[1]) as host:
    print(host.invoke("good.echo", {"count": 1}, progress=False).ok, flush=True)
"""


def _building(store: Path, child: subprocess.Popen[str]) -> Path:
    """The child's snapshot build folder (one that was not there before), once it has started
    copying the big file."""
    before = set(store.glob(".build-*"))
    end = time.monotonic() + 30
    while time.monotonic() < end and child.poll() is None:
        found = [p for p in store.glob(".build-*")
                 if p not in before and (p / "good" / "weights.bin").exists()]  # fmt: skip
        if found:
            return found[0]
        time.sleep(0.001)
    child.kill()
    raise AssertionError(f"the child never started copying the module: {child.wait()}")


@pytest.fixture
def big_module(facet_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The snapshot store this test's processes use, for a module holding 128 MiB."""
    (facet_home / "modules" / "good" / "weights.bin").write_bytes(bytes(128 << 20))
    store = tmp_path / "snapshots"
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(store))
    return store


def test_a_kernel_killed_mid_snapshot_leaves_no_copy_in_the_store(
    facet_home: Path, big_module: Path
) -> None:
    """SIGKILL to a kernel copying a 128 MiB module into the store: its partial copy is
    there, and the next host's call removes it as it makes the snapshot (before: it stayed,
    and so did one for every kill)."""
    store = big_module
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        child = subprocess.Popen([sys.executable, "-c", _INVOKE, str(facet_home)], env=env,
                                 stdout=subprocess.DEVNULL, text=True)  # fmt: skip
        _building(store, child)
        child.kill()
        child.wait()
    assert list(store.glob(".build-*"))  # what the last killed kernel left, at least
    with mnb.ModuleHost(home=facet_home) as host:
        assert host.invoke("good.echo", {"count": 1}, progress=False).ok
    left = sorted(p.name for p in store.iterdir())
    assert len(left) == 1 and left[0].endswith("-good"), left  # the snapshot, nothing else


def test_a_live_kernels_snapshot_build_is_never_taken_for_an_abandoned_one(
    facet_home: Path, big_module: Path
) -> None:
    """A kernel stopped (SIGSTOP) mid-copy still holds its build: another host's call in the
    same store makes its own snapshot and leaves that build alone, and the stopped kernel,
    let go, finishes its call."""
    store = big_module
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _INVOKE, str(facet_home)], env=env,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        theirs = _building(store, child)
        child.send_signal(signal.SIGSTOP)
        with mnb.ModuleHost(home=facet_home) as host:
            assert host.invoke("good.echo", {"count": 1}, progress=False).ok
        assert (theirs / "good" / "weights.bin").exists()
        child.send_signal(signal.SIGCONT)
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0 and out.split() == ["True"], (child.returncode, out)
    left = sorted(p.name for p in store.iterdir())
    assert len(left) == 1 and left[0].endswith("-good"), left


@pytest.mark.parametrize("how", ["model_dump", "model_dump_json", "to_json"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_ctrl_c_in_a_wire_models_serializer_comes_out_as_itself(how: str, depth: int) -> None:
    """``KeyboardInterrupt`` raised in the protocol models' own serializer (the code that
    leaves out Go's ``omitempty`` fields), at the outer model or a nested one: it comes out
    as a ``KeyboardInterrupt``, so a notebook's Ctrl-C stops the cell as one. Before, pydantic
    wrapped it: ``PydanticSerializationError: Error calling function `_omit_empty`:
    KeyboardInterrupt``, which no ``except KeyboardInterrupt`` catches."""
    from murmur_nb.protocol import Capability, Descriptor, Effects

    descriptor = Descriptor(module="m", version="1", protocol_versions=["1"],
                            capabilities=[Capability(id="m.a", summary="a", effects=Effects())])
    calls = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal calls
        if event == "call" and frame.f_code.co_name == "_omit_empty":
            calls += 1
            if calls == depth:
                raise KeyboardInterrupt("Ctrl-C")
        return None

    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt):
            getattr(descriptor, how)(**({"mode": "json"} if how == "model_dump" else {}))
    finally:
        sys.settrace(None)
    assert calls == depth
    assert json.loads(descriptor.to_json())["capabilities"][0]["id"] == "m.a"  # and it still works
