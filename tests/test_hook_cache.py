"""The compiled-component cache: keyed by digest, wasmtime version and engine config."""

from __future__ import annotations

import mmap
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest
import wasmtime
from _users import rerun, reruns_in_each_setting, test_user
from _wat import assemble
from wasmtime.component import Component

import murmur_nb as mnb
import murmur_nb._hooks.cache as wasm_cache  # private: the cache itself is tested
from murmur_nb._hooks.cache import ComponentCache, cache_dir  # private: the cache itself is tested
from murmur_nb._hooks.guest_code.wasm_binary import uleb  # private: components by hand

COMPONENT = """
(component
  (core module $m (func (export "f") (result i32) i32.const {value}))
  (core instance $i (instantiate $m))
  (func $f (result u32) (canon lift (core func $i "f")))
  (export "f" (func $f)))
"""


def component_file(tmp_path: Path, value: int = 7, name: str = "c.wasm") -> Path:
    path = tmp_path / name
    path.write_bytes(wasmtime.wat2wasm(COMPONENT.format(value=value)))
    return path


def engine(*, fuel: bool = True) -> wasmtime.Engine:
    config = wasmtime.Config()
    config.consume_fuel = fuel
    config.epoch_interruption = True
    return wasmtime.Engine(config)


def call_f(eng: wasmtime.Engine, component: Component, *, fuel: bool = True) -> int:
    store = wasmtime.Store(eng)
    if fuel:
        store.set_fuel(10_000)
    store.set_epoch_deadline(1_000)
    linker = wasmtime.component.Linker(eng)
    instance = linker.instantiate(store, component)
    func = instance.get_func(store, "f")
    assert func is not None
    value = func(store)
    func.post_return(store)
    assert isinstance(value, int)
    return value


def test_cold_then_cached(tmp_path: Path) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    path = component_file(tmp_path)
    first = cache.load(path)
    assert first.source == "compiled"
    assert first.entry.is_file()
    second = cache.load(path)
    assert second.source == "cache"
    assert second.digest == first.digest == wasm_cache.sha256_file(path)
    assert call_f(eng, second.component) == 7


def test_changed_file_recompiles(tmp_path: Path) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    path = component_file(tmp_path, 7)
    first = cache.load(path)
    component_file(tmp_path, 8)  # same name, same size, new content
    second = cache.load(path)
    assert second.source == "compiled"
    assert second.digest != first.digest
    assert call_f(eng, second.component) == 8


def test_rewriting_identical_bytes_still_hits(tmp_path: Path) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    path = component_file(tmp_path, 7)
    cache.load(path)
    os.utime(path, ns=(1, 1))
    again = cache.load(path)
    assert again.source == "cache"


def test_engine_config_is_part_of_the_key(tmp_path: Path) -> None:
    path = component_file(tmp_path)
    with_fuel = ComponentCache(engine(fuel=True), "fuel;epoch", tmp_path / "cache")
    no_fuel_engine = engine(fuel=False)
    without_fuel = ComponentCache(no_fuel_engine, "epoch", tmp_path / "cache")
    a = with_fuel.load(path)
    b = without_fuel.load(path)
    assert a.entry != b.entry
    assert b.source == "compiled"
    assert call_f(no_fuel_engine, b.component, fuel=False) == 7
    assert without_fuel.load(path).source == "cache"


def test_wasmtime_version_is_part_of_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = engine()
    path = component_file(tmp_path)
    current = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    current.load(path)
    monkeypatch.setattr(wasm_cache, "_wasmtime_version", lambda: "0.0.1")
    other = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    assert other.entry_path(wasm_cache.sha256_file(path)) != current.entry_path(
        wasm_cache.sha256_file(path)
    )
    assert other.load(path).source == "compiled"


@pytest.mark.parametrize("damage", ["garbage", "truncate", "empty", "flip", "code", "no-sum"])
def test_corrupt_entry_is_discarded_and_rebuilt(tmp_path: Path, damage: str) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    path = component_file(tmp_path)
    entry = cache.load(path).entry
    data = bytearray(entry.read_bytes())
    if damage == "garbage":
        data = bytearray(b"not a compiled component" * 40)
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    elif damage == "code":  # `mov eax, 7` -> `mov eax, 42`: wasmtime itself would load and run it
        at = data.find(bytes([0xB8, 7, 0, 0, 0]))
        assert at > 0
        data[at + 1] = 42
    elif damage == "no-sum":  # an entry nothing vouches for
        entry.with_name(entry.name + ".sum").unlink()
    else:
        data[:16] = bytes(16)
    entry.write_bytes(bytes(data))
    again = cache.load(path)
    assert again.source == "recompiled"
    assert call_f(eng, again.component) == 7
    assert cache.load(path).source == "cache"


def test_a_hit_leaves_the_entry_alone_and_an_identical_rewrite_is_kept(
    tmp_path: Path,
) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    path = component_file(tmp_path)
    entry = cache.load(path).entry
    before = entry.stat()
    assert ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(path).source == "cache"
    assert entry.stat().st_mtime_ns == before.st_mtime_ns  # a hit leaves the entry alone
    entry.write_bytes(entry.read_bytes())  # same bytes, new stat: the MAC still holds
    again = ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(path)
    assert again.source == "cache" and call_f(eng, again.component) == 7


def test_read_only_cache_only_costs_a_compile(tmp_path: Path) -> None:
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    cache = ComponentCache(engine(), "fuel;epoch", blocked)
    path = component_file(tmp_path)
    assert cache.load(path).source == "compiled"
    assert cache.load(path).source == "compiled"


def test_not_a_component_raises_wasmtime_error(tmp_path: Path) -> None:
    cache = ComponentCache(engine(), "fuel;epoch", tmp_path / "cache")
    bad = tmp_path / "bad.wasm"
    bad.write_bytes(b"\0asm\x01\0\0\0garbage")
    with pytest.raises(wasmtime.WasmtimeError):
        cache.load(bad)


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("MURMUR_NB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "murmur-nb"


def test_components_kept_in_memory_skip_the_disk(tmp_path: Path) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache", keep_in_memory=2)
    paths = [component_file(tmp_path, value, f"c{value}.wasm") for value in (1, 2, 3)]
    assert [cache.load(p).source for p in paths] == ["compiled"] * 3
    assert cache.load(paths[2]).source == "memory"
    assert cache.load(paths[1]).source == "memory"
    assert cache.load(paths[0]).source == "cache"  # evicted: least recently used
    kept = cache.load(paths[1])
    assert kept.source == "memory" and call_f(eng, kept.component) == 2


def test_prune_keeps_the_most_recently_used_entries(tmp_path: Path) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    loaded = [cache.load(component_file(tmp_path, v, f"c{v}.wasm")) for v in (1, 2, 3)]
    for age, item in zip((300, 200, 100), loaded, strict=True):
        used = item.entry.with_name(item.entry.name + ".sum")  # the recency marker
        os.utime(used, (time.time() - age, time.time() - age))
    cache.load(tmp_path / "c1.wasm")  # a hit makes the oldest entry the newest
    budget = loaded[0].entry.stat().st_size + loaded[2].entry.stat().st_size
    deleted = cache.prune(max_bytes=budget)
    assert deleted == [loaded[1].entry]
    assert not loaded[1].entry.with_name(loaded[1].entry.name + ".sum").exists()
    assert loaded[0].entry.is_file() and loaded[2].entry.is_file()
    assert cache.load(tmp_path / "c2.wasm").source == "compiled"


def test_prune_keeps_only_the_newest_digest_memos(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every hook file rewritten adds a digest memo: a prune keeps the newest
    :data:`MEMOS_KEPT` (3 here), and the newest file's memo is among them."""
    monkeypatch.setattr(wasm_cache, "MEMOS_KEPT", 3)
    cache = ComponentCache(engine(), "fuel;epoch", tmp_path / "cache")
    for v in range(6):
        last = component_file(tmp_path, v, f"c{v}.wasm")
        assert cache.load(last).source == "compiled"  # each store prunes
        time.sleep(0.02)  # each memo a later mtime than the one before
    memos = sorted((tmp_path / "cache" / "digests").iterdir())
    assert len(memos) == 3, memos
    assert wasm_cache.sha256_file(last) in {m.read_text().split()[0] for m in memos}


def plant(cache: ComponentCache, eng: wasmtime.Engine, victim: Path, tmp_path: Path) -> Path:
    """What someone who can write the cache folder, but not read the key, can do: compile
    their own component (returning 42) and put it under the victim's entry, sealed with a
    key of their own, and with the old unkeyed SHA-256 sidecar."""
    evil = Component(eng, component_file(tmp_path, 42, "evil.wasm").read_bytes())
    digest = wasm_cache.sha256_file(victim)
    entry = cache.entry_path(digest)
    entry.parent.mkdir(parents=True, exist_ok=True)
    attacker = ComponentCache(eng, "fuel;epoch", cache.directory, key=b"k" * 32)
    entry.write_bytes(evil.serialize())
    attacker._seal(entry, attacker._entry_mac(digest, data=entry.read_bytes()))
    return entry


def test_a_planted_entry_is_rejected_and_recompiled(tmp_path: Path) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache", key=b"s" * 32)
    path = component_file(tmp_path)
    entry = plant(cache, eng, path, tmp_path)
    assert call_f(eng, Component.deserialize_file(eng, str(entry))) == 42  # it would run
    loaded = cache.load(path)
    assert loaded.source == "recompiled"
    assert call_f(eng, loaded.component) == 7
    assert call_f(eng, Component.deserialize_file(eng, str(entry))) == 7  # replaced on disk
    # An unkeyed SHA-256 sidecar (what used to vouch for entries) is rejected as well.
    evil = Component(eng, component_file(tmp_path, 42, "evil.wasm").read_bytes()).serialize()
    entry.write_bytes(evil)
    sha = wasm_cache.hashlib.sha256(evil).hexdigest()
    st = entry.stat()
    entry.with_name(entry.name + ".sum").write_text(
        f"{sha} {st.st_size} {st.st_ino} {st.st_mtime_ns} {st.st_ctime_ns}\n"
    )
    fresh = ComponentCache(eng, "fuel;epoch", tmp_path / "cache", key=b"s" * 32)
    again = fresh.load(path)
    assert again.source == "recompiled" and call_f(eng, again.component) == 7


def test_a_planted_digest_memo_cannot_redirect_a_path(tmp_path: Path) -> None:
    eng = engine()
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache", key=b"s" * 32)
    seven, other = component_file(tmp_path, 7), component_file(tmp_path, 42, "other.wasm")
    assert call_f(eng, cache.load(other).component) == 42  # a legitimate entry for 42
    cache.load(seven)
    for memo in (tmp_path / "cache" / "digests").iterdir():
        known = memo.read_text().split()[0]
        if known == wasm_cache.sha256_file(seven):
            memo.write_text(wasm_cache.sha256_file(other))  # point the path at 42, unsealed
    fresh = ComponentCache(eng, "fuel;epoch", tmp_path / "cache", key=b"s" * 32)
    assert call_f(eng, fresh.load(seven).component) == 7


def test_the_key_is_made_once_owner_only_outside_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FACET_STUDIO_HOME", str(tmp_path / "facet"))
    monkeypatch.setenv("MURMUR_NB_KEYS", str(tmp_path / "keys"))
    key = wasm_cache.cache_key()
    assert len(key) == 32
    folder, file = tmp_path / "keys", tmp_path / "keys" / "cache.key"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert file.stat().st_mode & 0o777 == 0o600
    assert wasm_cache.cache_key() == key  # made on first use, then kept
    file.chmod(0o644)  # may have been read: replaced, which invalidates every entry
    replaced = wasm_cache.cache_key()
    assert replaced != key and file.stat().st_mode & 0o777 == 0o600
    for inside in (tmp_path / "cache" / "keys", tmp_path / "facet" / "keys"):
        with pytest.raises(mnb.HookError) as info:
            wasm_cache.cache_key(inside)
        assert info.value.code == "insecure_cache_key"
        assert not inside.exists()


def test_entries_sealed_under_another_key_are_recompiled(tmp_path: Path) -> None:
    eng = engine()
    path = component_file(tmp_path)
    ComponentCache(eng, "fuel;epoch", tmp_path / "cache", key=b"a" * 32).load(path)
    other = ComponentCache(eng, "fuel;epoch", tmp_path / "cache", key=b"b" * 32)
    assert other.load(path).source == "recompiled"
    assert other.load(path).source == "cache"


def patch_in_place(entry: Path, value: int) -> None:
    """What a cache-folder writer does to a loaded entry: same file, same size, new code
    (``mov eax, 7`` becomes ``mov eax, value``), written through the existing inode."""
    data = entry.read_bytes()
    at = data.find(bytes([0xB8, 7, 0, 0, 0]))
    assert at > 0
    inode = entry.stat().st_ino
    with entry.open("r+b") as handle:
        handle.seek(at + 1)
        handle.write(bytes([value]))
    assert entry.stat().st_ino == inode and entry.stat().st_size == len(data)


def test_an_entry_rewritten_in_place_after_load_never_runs(tmp_path: Path) -> None:
    """The loaded component runs from memory the file cannot reach; the next load refuses the
    rewritten entry by its MAC. (Deserializing from a mapping of the file ran the 42.)"""
    eng = engine()
    ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(component_file(tmp_path))
    cache = ComponentCache(eng, "fuel;epoch", tmp_path / "cache")
    loaded = cache.load(tmp_path / "c.wasm")
    assert loaded.source == "cache"
    patch_in_place(loaded.entry, 42)
    assert call_f(eng, loaded.component) == 7
    again = ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(tmp_path / "c.wasm")
    assert again.source == "recompiled"
    assert call_f(eng, again.component) == 7
    assert call_f(eng, loaded.component) == 7


def test_an_entry_patched_through_a_mapping_taken_before_its_check_never_runs(
    tmp_path: Path,
) -> None:
    """A cache-folder writer maps the entry shared and writable and writes one byte back
    unchanged: the page is dirty and the ctime moves. A kernel then loads the entry (its MAC
    holds: the bytes are the sealed ones). The writer patches the code through the same
    dirty page, which changes no time (ext4 updates them on a page's first write fault
    only). The entry's stat is what the load saw, and it still must not run: every load
    checks the MAC. (Until 2026-12-06 a load skipped it on an unchanged stat and ran 42.)"""
    eng = engine()
    path = component_file(tmp_path)
    entry = ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(path).entry
    data = entry.read_bytes()
    at = data.find(bytes([0xB8, 7, 0, 0, 0]))
    assert at > 0
    with entry.open("r+b") as handle, mmap.mmap(handle.fileno(), 0) as mapped:
        mapped[at + 1] = 7  # the same byte: the page is dirty now
        checked = ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(path)
        assert checked.source == "cache" and call_f(eng, checked.component) == 7
        stat_seen = entry.stat()
        mapped[at + 1] = 42  # the code, through the dirty page
        assert entry.read_bytes()[at + 1] == 42
        unchanged = entry.stat()
    assert (unchanged.st_ino, unchanged.st_size) == (stat_seen.st_ino, stat_seen.st_size)
    after = ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(path)
    assert after.source == "recompiled"
    assert call_f(eng, after.component) == 7


BIG_COMPONENT = """
(component
  (core module $m
    (memory 320)
    (data (i32.const 0) "{blob}")
    (func (export "f") (result i32) i32.const 7))
  (core instance $i (instantiate $m))
  (func $f (result u32) (canon lift (core func $i "f")))
  (export "f" (func $f)))
"""

#: a process of the kernel's user: it watches the kernel's descriptors for the copy of an
#: entry a load makes, opens it through ``/proc/<pid>/fd`` and writes 42 over the code until
#: the copy refuses writes (sealed); it prints how many copies it wrote into. What it opened
#: is checked to be such a copy (between the ``readlink`` and the ``open`` the kernel may have
#: closed the copy and reused its number for a file that never refuses a write: the entry
#: itself, or the temporary file of a recompiled one), and the stop file is looked at while it
#: writes too, so it ends however a write loop goes.
COPY_WRITER = """
import os, sys
pid, at, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
copies = set()
while not os.path.exists(stop):
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for name in names:
        try:
            if "murmur-nb-component" not in os.readlink(f"/proc/{pid}/fd/{name}"):
                continue
            fd = os.open(f"/proc/{pid}/fd/{name}", os.O_RDWR)
        except OSError:
            continue
        try:
            if "memfd:murmur-nb-component" not in os.readlink(f"/proc/self/fd/{fd}"):
                continue
            writes = 0
            while writes % 4096 or not os.path.exists(stop):
                os.pwrite(fd, bytes([42]), at)
                copies.add(os.fstat(fd).st_ino)
                writes += 1
        except OSError:
            pass
        finally:
            os.close(fd)
print(len(copies))
"""


def test_a_copy_written_into_before_its_seal_never_runs(tmp_path: Path) -> None:
    """Another process of the kernel's user opens each load's copy through
    ``/proc/<pid>/fd`` and writes 42 over the code while the copy is made. The MAC is of the
    sealed copy, so no load runs the 42: each is refused and recompiled. (Until 2026-12-06 the
    MAC was of the bytes as written, and every load but the first ran the 42.)"""
    eng = engine()
    path = tmp_path / "big.wasm"  # 16 MiB of data: the copy takes milliseconds
    path.write_bytes(wasmtime.wat2wasm(BIG_COMPONENT.format(blob="murmur" * ((16 << 20) // 6))))
    entry = ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(path).entry
    at = entry.read_bytes().find(bytes([0xB8, 7, 0, 0, 0]))
    assert at > 0
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", COPY_WRITER, str(os.getpid()), str(at + 1), str(stop)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        ran = []
        for _ in range(8):
            loaded = ComponentCache(eng, "fuel;epoch", tmp_path / "cache").load(path)
            ran.append((loaded.source, call_f(eng, loaded.component)))
    finally:
        stop.touch()
        written, _ = writer.communicate(timeout=60)
    assert int(written) > 0, "the writer never reached a copy before its seal"
    assert all(value == 7 for _, value in ran), ran
    assert ("recompiled", 7) in ran


# -- a root kernel and a cache another account can write ---------------------------------------


def seal_as(cache: ComponentCache, entry: Path, digest: str, value: int, tmp_path: Path) -> None:
    """Put a component returning ``value`` at ``entry``, sealed under ``cache``'s own key:
    what an entry looks like to a cache that trusts the folder it lies in."""
    eng = cache._engine
    evil = Component(eng, component_file(tmp_path, value, f"v{value}.wasm").read_bytes())
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_bytes(evil.serialize())
    cache._seal(entry, cache._entry_mac(digest, data=entry.read_bytes()))


def hand_to_the_test_user(folder: Path, how: str) -> None:
    """``owned``: the folder and what is in it become the test user's; ``group``: they stay
    root's, writable by the test user's group."""
    uid = test_user()
    gid = pwd.getpwuid(uid).pw_gid
    for path in [folder, *folder.rglob("*")]:
        if how == "owned":
            os.chown(path, uid, gid)
        else:
            os.chown(path, 0, gid)
            path.chmod(path.stat().st_mode | 0o020)


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule is a root kernel's")
@pytest.mark.parametrize("how", ["owned", "group"])
def test_as_root_an_entry_in_a_folder_another_account_can_write_never_runs(
    tmp_path: Path, how: str
) -> None:
    """The entry for a component returning 7 holds one returning 42, sealed so that the cache
    would accept it, in a cache folder the test user owns (or its group can write). A root
    kernel neither runs nor touches it: it compiles the 7 into a fresh private folder."""
    eng, key = engine(), b"s" * 32
    folder = tmp_path / "cache" / "components"
    path = component_file(tmp_path)
    cache = ComponentCache(eng, "fuel;epoch", folder, key=key)
    planted = folder / cache.entry_path(wasm_cache.sha256_file(path)).name
    seal_as(cache, planted, wasm_cache.sha256_file(path), 42, tmp_path)
    hand_to_the_test_user(tmp_path / "cache", how)
    before = planted.read_bytes()
    loaded = ComponentCache(eng, "fuel;epoch", folder, key=key).load(path)
    assert call_f(eng, loaded.component) == 7
    private = loaded.entry.parent  # this process's own (the other test may have filled it)
    assert not private.is_relative_to(tmp_path)
    assert private.stat().st_uid == 0 and private.stat().st_mode & 0o777 == 0o700
    assert planted.read_bytes() == before  # never touched either
    again = ComponentCache(eng, "fuel;epoch", folder, key=key).load(path)
    assert again.source == "cache" and again.entry == loaded.entry
    assert call_f(eng, again.component) == 7


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule is a root kernel's")
def test_as_root_a_key_in_a_folder_another_account_can_write_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key lies in a folder whose parent the test user owns (it could rename the folder
    and put another in its place); an entry sealed under that key, in a cache only root can
    write, returns 42 for a component returning 7. A root kernel uses a key of its own for
    this process, in a fresh private folder, and runs the 7."""
    keys = tmp_path / "theirs" / "keys"
    monkeypatch.setenv("MURMUR_NB_KEYS", str(keys))
    monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))
    key = wasm_cache.cache_key()
    eng, path = engine(), component_file(tmp_path)
    folder = tmp_path / "cache" / "components"
    cache = ComponentCache(eng, "fuel;epoch", folder, key=key)
    planted = cache.entry_path(wasm_cache.sha256_file(path))
    seal_as(cache, planted, wasm_cache.sha256_file(path), 42, tmp_path)
    uid = test_user()
    os.chown(tmp_path / "theirs", uid, pwd.getpwuid(uid).pw_gid)
    loaded = ComponentCache(eng, "fuel;epoch", folder).load(path)
    assert call_f(eng, loaded.component) == 7
    assert not loaded.entry.is_relative_to(tmp_path)  # this process's own folder
    assert call_f(eng, Component.deserialize_file(eng, str(planted))) == 42  # left alone


@reruns_in_each_setting
def test_a_copy_written_into_before_its_seal_never_runs_as_a_user_or_in_a_container(
    user: bool, docker: bool
) -> None:
    """The same writer, as an unprivileged user (whose processes may open each other's
    descriptors) and inside the default-Docker harness."""
    done, tail = rerun(
        ["tests/test_hook_cache.py"], user=user, docker=docker, deselect="copy_written_into"
    )
    assert done == 0, tail
    assert "1 passed" in tail, tail


def locals_module(functions: int, *, cut: bool = False) -> bytes:
    """A component's core module section (id and size included) of ``functions`` functions,
    each declaring 50,000 i64 locals (wasmparser's most) in 9 bytes, and a custom section of
    random bytes: appended to a component, its digest is new, so no cached compile of an
    earlier run can stand in for compiling it. ``cut``: one more function, last in the
    binary, whose locals end inside their first number (wasmtime finds that only while it
    compiles the functions)."""
    body = b"\x08\x02\x01\x7e\xcf\x86\x03\x7e\x0b"  # size; (1 i64) (49,999 i64); end
    last = b"\x01\x85" if cut else b""  # size 1; a number cut short
    types = b"\x01\x60\x00\x00"
    funcs = uleb(functions + cut) + b"\x00" * (functions + cut)
    code = uleb(functions + cut) + body * functions + last
    module = b"\0asm\x01\0\0\0" + b"".join(
        bytes([sid]) + uleb(len(s)) + s for sid, s in ((1, types), (3, funcs), (10, code))
    )
    custom = b"\x00" + uleb(21) + b"\x04salt" + os.urandom(16)
    module = b"\x01" + uleb(len(module)) + module
    return custom + module if cut else module + custom


def locals_bomb(functions: int, *, cut: bool = False) -> bytes:
    """A component of ``functions`` functions, each declaring 50,000 i64 locals: 10 KB for
    1,000 of them (:func:`locals_module`), new bytes on each call."""
    return b"\0asm\x0d\0\x01\0" + locals_module(functions, cut=cut)


def params_bomb(functions: int) -> bytes:
    """A component of ``functions`` empty functions of one type of 1,000 i64 parameters
    (written once): 4 bytes a function, 79 KB for 20,000."""
    types = b"\x01\x60" + uleb(1000) + b"\x7e" * 1000 + b"\x00"
    funcs = uleb(functions) + b"\x00" * functions
    code = uleb(functions) + b"\x02\x00\x0b" * functions
    module = b"\0asm\x01\0\0\0" + b"".join(
        bytes([sid]) + uleb(len(s)) + s for sid, s in ((1, types), (3, funcs), (10, code))
    )
    custom = b"\x04salt" + os.urandom(16)
    return (b"\0asm\x0d\0\x01\0" + b"\x01" + uleb(len(module)) + module
            + b"\x00" + uleb(len(custom)) + custom)  # fmt: skip


def test_a_component_declaring_millions_of_locals_is_refused_before_it_compiles(
    tmp_path: Path,
) -> None:
    """2,000 functions of 50,000 locals each: 20 KB that kept cranelift busy ~5 s of the
    kernel's CPU (1.2 MB of them, ~10 minutes); 20,000 of 1,000 parameters, 79 KB and ~2.6 s.
    Each is refused, naming the limit and how to raise it, without the compile; the other
    hook loads."""
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "bomb.wasm").write_bytes(locals_bomb(2000))
    (tmp_path / "hooks" / "params.wasm").write_bytes(params_bomb(20_000))
    (tmp_path / "hooks" / "good.wasm").write_bytes(assemble("guest.wat"))
    good_only = "hooks:\n  good:\n    component: hooks/good.wasm\n"
    (tmp_path / "murmur.yaml").write_text(good_only, encoding="utf-8")
    mnb.HookHost.from_config(tmp_path / "murmur.yaml").close()  # wasmtime loaded, good cached
    (tmp_path / "murmur.yaml").write_text(
        good_only + "  bomb:\n    component: hooks/bomb.wasm\n"
        "  params:\n    component: hooks/params.wasm\n", encoding="utf-8")  # fmt: skip
    cpu = time.process_time()  # cranelift's worker threads count too
    with mnb.HookHost.from_config(tmp_path / "murmur.yaml") as hooks:
        spent = time.process_time() - cpu
        bomb, params, good = (hooks.hooks[h] for h in ("bomb", "params", "good"))
    assert spent < 1.0, f"{spent:.1f} s of CPU loading the hooks"
    assert good.loaded and not bomb.loaded and bomb.load_code == "load_failed"
    assert "100,000,000 locals" in (bomb.load_error or "")
    assert "$MURMUR_NB_HOOK_MAX_LOCALS" in (bomb.load_error or "")
    assert not params.loaded and "20,000,000 locals" in (params.load_error or "")


def test_a_bomb_cut_short_in_its_last_function_is_refused_before_it_compiles(
    tmp_path: Path,
) -> None:
    """One byte cut from the end of a locals bomb made the count 0 (it took bytes that end
    inside a function for bytes wasmtime refuses before compiling), and cranelift compiled
    its 2,000 functions of 50,000 locals (~5 s of CPU) before refusing the last one. The
    locals counted before the cut stand."""
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "cut.wasm").write_bytes(locals_bomb(2000, cut=True))
    (tmp_path / "murmur.yaml").write_text(
        "hooks:\n  cut:\n    component: hooks/cut.wasm\n", encoding="utf-8")  # fmt: skip
    cpu = time.process_time()
    with mnb.HookHost.from_config(tmp_path / "murmur.yaml") as hooks:
        spent = time.process_time() - cpu
        cut = hooks.hooks["cut"]
    assert spent < 1.0, f"{spent:.1f} s of CPU loading the hook"
    assert not cut.loaded and "100,000,000 locals" in (cut.load_error or ""), cut.load_error


def test_the_locals_bound_is_raised_by_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the bound raised past it, the component compiles (and is refused for what it
    lacks); a value that is no count keeps the default, with a warning."""
    component = tmp_path / "hooks" / "many.wasm"
    component.parent.mkdir()
    component.write_bytes(locals_bomb(21))  # 1,050,000 locals
    (tmp_path / "murmur.yaml").write_text(
        "hooks:\n  many:\n    component: hooks/many.wasm\n", encoding="utf-8")
    with mnb.HookHost.from_config(tmp_path / "murmur.yaml") as hooks:
        assert "1,050,000 locals" in (hooks.hooks["many"].load_error or "")
    monkeypatch.setenv("MURMUR_NB_HOOK_MAX_LOCALS", "2000000")
    with mnb.HookHost.from_config(tmp_path / "murmur.yaml") as hooks:
        assert "does not export" in (hooks.hooks["many"].load_error or "")
        # read once: what a replay's workers apply
        assert hooks.config.compile_bounds.max_locals == 2_000_000
    monkeypatch.setenv("MURMUR_NB_HOOK_MAX_LOCALS", "lots")
    component.write_bytes(locals_bomb(21))  # new bytes: the raised bound compiled the old ones
    with pytest.warns(mnb.HookConfigWarning, match="MURMUR_NB_HOOK_MAX_LOCALS='lots'"):
        hooks = mnb.HookHost.from_config(tmp_path / "murmur.yaml")
    assert "1,050,000 locals" in (hooks.hooks["many"].load_error or "")
    hooks.close()
