"""A hook component compiles in a child process the kernel bounds in time and memory and kills.

Each test loads a real component through the hook runtime and watches the world: the child
processes (``compiler.py``) this process starts, their pids, and whether they are gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import wasmtime
from _users import rerun, reruns_in_each_setting
from _wat import assemble

import murmur_nb as mnb
from murmur_nb import ConversationStore, RecordWriter

# private: the cache's child path on its own, and a cache whose engine is not the child's
from murmur_nb._hooks.cache import IN_PROCESS_MAX_BYTES, ComponentCache

# private: the recipe the runtime hands its cache, and what it raises
from murmur_nb._hooks.guest_code.compile_bounds import CompileFailed, compile_in_child

# private: the engine configuration the child compiles for, made outside the runtime
from murmur_nb._hooks.guest_code.compiler import ENGINE_FINGERPRINT, engine_config

# private: the one LEB128 encoder of the hooks' binary reader, to write components by hand
from murmur_nb._hooks.guest_code.wasm_binary import uleb

HOOK = "hooks:\n  slow:\n    component: hooks/slow.wasm\n"


def custom_section(size: int, *, fill: bytes | None = None) -> bytes:
    """A custom section of ``size`` random bytes (a digest no earlier run compiled), or of
    ``fill`` repeated."""
    payload = b"\x04salt" + (os.urandom(size) if fill is None else (fill * size)[:size])
    return b"\x00" + uleb(len(payload)) + payload


def empty_functions(functions: int) -> bytes:
    """A component of ``functions`` empty functions, 4 bytes each: ~70 µs of cranelift
    apiece with fuel and epochs (100,000 of them, 391 KiB: ~8 s on 2 idle cores)."""
    types = b"\x01\x60\x00\x00"
    funcs = uleb(functions) + b"\x00" * functions
    code = uleb(functions) + b"\x02\x00\x0b" * functions
    module = b"\0asm\x01\0\0\0" + b"".join(
        bytes([sid]) + uleb(len(s)) + s for sid, s in ((1, types), (3, funcs), (10, code))
    )
    return b"\0asm\x0d\0\x01\0\x01" + uleb(len(module)) + module + custom_section(16)


@contextlib.contextmanager
def compilers_started() -> Iterator[list[psutil.Process]]:
    """The compiling children this process starts while the block runs (a list filled in as
    they are seen: every 5 ms)."""
    found: list[psutil.Process] = []
    done = threading.Event()

    def watch() -> None:
        me = psutil.Process()
        while not done.wait(0.005):
            for child in me.children():
                with contextlib.suppress(psutil.Error):
                    known = any(child.pid == other.pid for other in found)
                    if not known and "compiler.py" in " ".join(child.cmdline()):
                        found.append(child)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield found
    finally:
        done.set()
        watcher.join()


def gone(process: psutil.Process) -> bool:
    """Whether ``process`` no longer exists (its pid gone, or another process's by now)."""
    return not process.is_running()


def capsule(tmp_path: Path, component: bytes) -> Path:
    (tmp_path / "hooks").mkdir(exist_ok=True)
    (tmp_path / "hooks" / "slow.wasm").write_bytes(component)
    (tmp_path / "murmur.yaml").write_text(HOOK, encoding="utf-8")
    return tmp_path / "murmur.yaml"


def test_a_compile_past_its_time_bound_is_killed_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100,000 empty functions (391 KiB) held the kernel ~8 s in cranelift, uninterruptible;
    under a bound of 1 s the child compiling them is killed at 1 s and the hook refused,
    naming the variable."""
    monkeypatch.setenv("MURMUR_NB_HOOK_COMPILE_S", "1")
    path = capsule(tmp_path, empty_functions(100_000))
    start = time.monotonic()
    with compilers_started() as children, mnb.HookHost.from_config(path) as hooks:
        spent = time.monotonic() - start
        info = hooks.hooks["slow"]
    assert not info.loaded and info.load_code == "load_failed"
    assert "took longer than the 1 s" in (info.load_error or "")
    assert "$MURMUR_NB_HOOK_COMPILE_S" in (info.load_error or "")
    assert spent < 1 + 3, f"{spent:.1f} s to refuse it"
    assert len(children) == 1 and gone(children[0])


def test_a_compile_past_its_memory_bound_is_refused_and_the_kernel_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 empty functions need more than 100 MiB to compile; under a bound of 64 MiB
    the child's allocation fails, the hook is refused naming the variable, and the next
    component loads in the same kernel."""
    monkeypatch.setenv("MURMUR_NB_HOOK_COMPILE_MB", "64")
    with compilers_started() as children:
        hooks = mnb.HookHost.from_config(capsule(tmp_path, empty_functions(20_000)))
    info = hooks.hooks["slow"]
    hooks.close()
    assert not info.loaded and "more than the 64 MiB" in (info.load_error or "")
    assert "$MURMUR_NB_HOOK_COMPILE_MB" in (info.load_error or "")
    assert len(children) == 1 and gone(children[0])
    monkeypatch.delenv("MURMUR_NB_HOOK_COMPILE_MB")
    with mnb.HookHost.from_config(capsule(tmp_path, empty_functions(2_000))) as hooks:
        assert "does not export" in (hooks.hooks["slow"].load_error or "")  # compiled


def test_ctrl_c_while_a_compile_runs_kills_the_child(tmp_path: Path) -> None:
    """SIGINT on the kernel's main thread while it waits for the child raises
    ``KeyboardInterrupt`` there (before: nothing until cranelift was done), and the child
    is gone by then."""
    path = capsule(tmp_path, empty_functions(100_000))
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread().ident == main

    def press_ctrl_c(children: list[psutil.Process]) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not children:
            time.sleep(0.005)
        time.sleep(0.3)  # inside the compile, past the child's start
        signal.pthread_kill(main, signal.SIGINT)

    start = time.monotonic()
    with compilers_started() as children, pytest.raises(KeyboardInterrupt):
        threading.Thread(target=press_ctrl_c, args=(children,), daemon=True).start()
        mnb.HookHost.from_config(path).close()
    assert time.monotonic() - start < 4
    assert len(children) == 1 and gone(children[0])


def test_a_compiler_that_crashes_is_a_load_error_and_the_kernel_goes_on(tmp_path: Path) -> None:
    """The child aborted mid-compile (SIGABRT: what a panic in wasmtime's C API does; in the
    kernel it took the kernel) fails that hook's load, naming the signal. (A SIGSEGV sent by
    another process does not do: wasmtime's trap handler, installed with the child's engine,
    returns from one that is no fault.)"""
    path = capsule(tmp_path, empty_functions(100_000))

    def crash(children: list[psutil.Process]) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not children:
            time.sleep(0.005)
        time.sleep(0.3)
        children[0].send_signal(signal.SIGABRT)

    with compilers_started() as children:
        threading.Thread(target=crash, args=(children,), daemon=True).start()
        with mnb.HookHost.from_config(path) as hooks:
            info = hooks.hooks["slow"]
    assert not info.loaded and info.load_code == "load_failed"
    assert "could not be compiled" in (info.load_error or "")
    assert "killed by SIGABRT" in (info.load_error or "")
    assert len(children) == 1 and gone(children[0])


def guest_over_threshold(fill: bytes | None = None) -> bytes:
    """``tests/wat/guest.wat`` (2 KiB), padded past :data:`IN_PROCESS_MAX_BYTES` by a custom
    section (of random bytes, or of ``fill``), so it compiles in a child."""
    return assemble("guest.wat") + custom_section(IN_PROCESS_MAX_BYTES, fill=fill)


def test_a_hook_compiled_in_the_child_loads_runs_and_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime's cache compiles it in a child and runs it; a cache of the same recipe
    loads the entry the child's compile left (``cache``). A bound that is no number is
    warned about, and the default kept."""
    home = tmp_path / "murmur"
    with RecordWriter(home, "ctx-1") as writer:
        writer.append("user", "hello")
    path = capsule(tmp_path, guest_over_threshold())
    (tmp_path / "murmur.yaml").write_text(
        "hooks:\n  slow:\n    component: hooks/slow.wasm\n"
        "    capabilities: {conversation: {read: true}}\n", encoding="utf-8")  # fmt: skip
    monkeypatch.setenv("MURMUR_NB_HOOK_COMPILE_S", "soon")
    with (
        compilers_started() as children,
        pytest.warns(mnb.HookConfigWarning, match="MURMUR_NB_HOOK_COMPILE_S='soon'"),
    ):
        hooks = mnb.HookHost.from_config(path, conversations=ConversationStore(home))
    with hooks:
        assert hooks.hooks["slow"].loaded_from == "compiled"
        result = hooks.task_start(task_id="t-1", context_id="ctx-1")["slow"]
    assert result.ok and result.value == "t-1"
    assert len(children) == 1 and gone(children[0])
    monkeypatch.delenv("MURMUR_NB_HOOK_COMPILE_S")
    engine = wasmtime.Engine(engine_config())
    cache = ComponentCache(engine, ENGINE_FINGERPRINT, tmp_path / "cache",
                           compile_in_child=compile_in_child)  # fmt: skip
    with compilers_started() as children:
        assert cache.load(tmp_path / "hooks" / "slow.wasm").source == "compiled"
        assert cache.load(tmp_path / "hooks" / "slow.wasm").source == "cache"
    assert len(children) == 1


def test_a_compiled_form_for_another_engine_is_a_clear_error(tmp_path: Path) -> None:
    """A cache whose engine is not configured as the child's (no fuel here) gets bytes
    wasmtime refuses to deserialize: ``CompileFailed`` saying so, never a wrong load."""
    (tmp_path / "c.wasm").write_bytes(guest_over_threshold())
    config = wasmtime.Config()
    config.epoch_interruption = True
    cache = ComponentCache(wasmtime.Engine(config), "epoch", tmp_path / "cache",
                           compile_in_child=compile_in_child)  # fmt: skip
    with pytest.raises(CompileFailed, match=r"not for this cache's engine .*engine_config"):
        cache.load(tmp_path / "c.wasm")
    assert not list((tmp_path / "cache").glob("*.cwasm"))


@reruns_in_each_setting
def test_compiles_are_bounded_as_a_user_and_in_a_container(user: bool, docker: bool) -> None:
    """The same tests as an unprivileged user (who may lower its own limits only) and
    inside the default-Docker harness (its seccomp profile, its pid namespace)."""
    done, tail = rerun(
        ["tests/test_hook_compile_child.py"],
        user=user,
        docker=docker,
        deselect="not as_a_user_and_in_a_container",
    )
    assert done == 0, tail
    assert "6 passed" in tail, tail
