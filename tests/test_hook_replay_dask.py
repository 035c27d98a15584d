"""mnb.replay(hooks, ..., client=) on a real LocalCluster with two worker processes."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_hook_cache import locals_module
from test_hook_compile_child import custom_section, guest_over_threshold
from test_hook_replay import assemble, capsule, talk, write

import murmur_nb as mnb

# private: the size past which a component compiles in a child, and the child's default bound
from murmur_nb._hooks.cache import IN_PROCESS_MAX_BYTES  # private: see above
from murmur_nb._hooks.guest_code.compile_bounds import DEFAULT_COMPILE_MB  # private: see above

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow

HOOKS = """\
hooks:
  reader:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
  dropper:
    component: hooks/replay.wasm
    limits: {time_ms: 300, memory_mib: 4}
"""
#: columns that differ between two runs of the same calls
VOLATILE = ["duration_ms", "worker"]


def differences(got: Any, want: Any) -> str:
    """Which columns of two replay frames differ, with their first differing rows (the
    assertion message: ``DataFrame.equals`` alone says only that they differ)."""
    if got.shape != want.shape or list(got.columns) != list(want.columns):
        return f"shapes {got.shape} and {want.shape}, columns {list(got.columns)}"
    lines = []
    for column in got.columns:
        if got[column].equals(want[column]):
            continue
        differ = (got[column].map(repr) != want[column].map(repr)).to_numpy(dtype=bool)
        keys = got.loc[differ, ["context_id", "hook_id", "event"]].astype(str)
        where = keys.agg("/".join, axis=1)
        pairs = zip(where, got.loc[differ, column], want.loc[differ, column], strict=True)
        lines.append(f"{column} ({int(differ.sum())} rows): {list(pairs)[:3]}")
    return "; ".join(lines) or f"dtypes {dict(got.dtypes)} and {dict(want.dtypes)}"


@pytest.fixture(scope="module")
def worker_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The workers' compiled-component cache: a folder of this file's own."""
    folder = tmp_path_factory.mktemp("worker-cache")
    before = os.environ.get("MURMUR_NB_CACHE")
    os.environ["MURMUR_NB_CACHE"] = str(folder)  # inherited by the worker processes
    yield folder
    if before is None:
        os.environ.pop("MURMUR_NB_CACHE", None)
    else:
        os.environ["MURMUR_NB_CACHE"] = before


@pytest.fixture(scope="module")
def client(worker_cache: Path) -> Iterator[distributed.Client]:
    """Two worker processes, one thread each (started once for the file)."""
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture
def hooks(tmp_path: Path, murmur_home: Path) -> Iterator[mnb.HookHost]:
    for i in range(12):
        write(murmur_home, f"plain-{i:02d}", talk(5 + 7 * i))
    write(murmur_home, "x-trap", [("user", "!trap"), ("user", "more")])
    # the reader padded past 4 KiB: each worker compiles it in a child of its own
    path = capsule(tmp_path / "capsule", HOOKS, guest=guest_over_threshold(b"dask"),
                   replay=assemble("replay.wat"))  # fmt: skip
    with mnb.HookHost.from_config(path, conversations=mnb.ConversationStore(murmur_home)) as h:
        yield h


def test_cluster_rows_equal_local_rows(hooks: mnb.HookHost, client: distributed.Client) -> None:
    local = mnb.replay(hooks, "*", windows=10, task_id="!read", progress=False)
    remote = mnb.replay(hooks, "*", windows=10, task_id="!read", client=client, progress=False)
    assert remote.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE)), differences(
        remote.drop(columns=VOLATILE), local.drop(columns=VOLATILE)
    )
    assert set(remote["worker"]) <= set(client.nthreads()) and remote["worker"].notna().all()
    assert len(set(remote["worker"])) == 2  # both workers replayed records
    # the granted hook paged through each record on its worker: total and newest id
    notes = remote[(remote["event"] == "task-start") & (remote["hook_id"] == "reader")]
    assert notes.set_index("context_id").loc["plain-11", "note"] == "82|82|plain-11-81|-"
    trap = remote[(remote["context_id"] == "x-trap") & (remote["event"] == "compact")]
    assert set(trap.loc[trap["hook_id"] == "dropper", "code"]) == {"trap"}


def sources_by_hook(client: distributed.Client) -> dict[str, set[str | None]]:
    """Hook id -> where the workers' compiled components came from (``cache``, ``recompiled``,
    ...), through the private worker helper: no public path reports it for a worker."""
    from murmur_nb._replay.cluster import loaded_from  # private: worker-side state

    out: dict[str, set[str | None]] = {}
    for worker in client.run(loaded_from).values():
        for hooks in worker.values():
            for hook, source in hooks.items():
                out.setdefault(hook, set()).add(source)
    return out


def test_workers_load_only_sealed_compiled_components(
    hooks: mnb.HookHost, client: distributed.Client, worker_cache: Path
) -> None:
    """Fresh worker processes (a cluster of their own) load the compiled components from the
    workers' cache only when their seal checks out."""
    mnb.replay(hooks, "plain-00", client=client, progress=False)
    entries = list((worker_cache / "components").glob("*.cwasm"))
    assert len(entries) == 2  # the two guests, compiled once by the first worker to load
    local = mnb.replay(hooks, [f"plain-{i:02d}" for i in range(6)], progress=False)
    for entry in entries:  # planted code under the same names: the seal no longer matches
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0xFF
        entry.write_bytes(bytes(data))
    # each tampered entry is discarded by the first worker to open it and compiled anew
    # ("recompiled"; the other worker then compiles too, or loads the new sealed entry)
    with fresh_client() as other:
        out = mnb.replay(hooks, [f"plain-{i:02d}" for i in range(6)], client=other, progress=False)
        first = sources_by_hook(other)
    assert out.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE)), differences(
        out.drop(columns=VOLATILE), local.drop(columns=VOLATILE)
    )
    assert all("recompiled" in seen for seen in first.values()), first
    with fresh_client() as other:  # and the next workers load the sealed entries as they are
        again = mnb.replay(hooks, [f"plain-{i:02d}" for i in range(6)], client=other,
                           progress=False)  # fmt: skip
        second = sources_by_hook(other)
    assert again.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE)), differences(
        again.drop(columns=VOLATILE), local.drop(columns=VOLATILE)
    )
    assert all(seen <= {"cache", "memory"} for seen in second.values()), second


@contextlib.contextmanager
def fresh_client(n_workers: int = 2, **env: str) -> Iterator[distributed.Client]:
    """A cluster of its own: ``n_workers`` worker processes of one thread, whose environment
    is this process's with ``env`` over it."""
    cluster = distributed.LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1,
                                       security=True, dashboard_address="127.0.0.1:0",
                                       **({"env": env} if env else {}))  # fmt: skip
    try:
        with distributed.Client(cluster) as c:
            yield c
    finally:
        cluster.close()


def test_a_worker_refuses_a_component_that_does_not_hash_to_its_digest(
    hooks: mnb.HookHost, client: distributed.Client
) -> None:
    """Drives the worker task directly with a payload changed in transit (the kernel never
    sends one, so only the worker's own check can be observed this way)."""
    # private: the worker task itself, fed a payload the kernel would never send
    from murmur_nb._replay.cluster import payload_of, replay_chunk  # private: see above
    from murmur_nb._replay.sources import RecordJob  # private: see above

    good = payload_of(hooks, ("reader", "dropper"))
    changed = [dataclasses.replace(h, data=h.data + b"\0") if h.id == "dropper" else h
               for h in good.hooks]  # fmt: skip
    bad = dataclasses.replace(good, hooks=tuple(changed))
    rows = client.submit(replay_chunk, bad, [RecordJob("plain-01")], ("reader", "dropper"),
                         mnb.ReplayWindows(), "t", pure=False).result(timeout=120)  # fmt: skip
    dropper = [r for r in rows if r["hook_id"] == "dropper"]
    assert [r["code"] for r in dropper] == ["digest_mismatch"]
    assert "does not hash to" in dropper[0]["error"]
    assert all(r["ok"] for r in rows if r["hook_id"] == "reader")


def test_workers_run_the_component_the_kernel_loaded_not_the_file_swapped_since(
    hooks: mnb.HookHost, client: distributed.Client
) -> None:
    """The dropper's .wasm is overwritten in place (as ``cp`` would) after ``from_config``:
    a host loaded now runs the other component, the cluster still runs the loaded one."""
    ids = [f"plain-{i:02d}" for i in range(4)]
    local = mnb.replay(hooks, ids, windows=10, task_id="!read", progress=False)
    loaded = hooks.component_bytes("dropper")
    hooks.hooks["dropper"].component.write_bytes(assemble("guest.wat"))
    assert hooks.component_bytes("dropper") == loaded == assemble("replay.wat")
    assert hooks.config.path is not None
    with mnb.HookHost.from_config(hooks.config.path, conversations=hooks.conversations) as now:
        swapped = mnb.replay(now, ids, windows=10, task_id="!read", progress=False)
    assert not swapped.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE))
    remote = mnb.replay(hooks, ids, windows=10, task_id="!read", client=client, progress=False)
    assert remote.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE)), differences(
        remote.drop(columns=VOLATILE), local.drop(columns=VOLATILE)
    )
    assert set(remote.loc[remote["hook_id"] == "dropper", "code"].dropna()) == set(
        local.loc[local["hook_id"] == "dropper", "code"].dropna()
    )


def test_a_tampered_component_is_refused_before_it_is_written_or_compiled(
    hooks: mnb.HookHost, client: distributed.Client, worker_cache: Path
) -> None:
    """Drives the worker task directly with the dropper's bytes changed in transit into
    another valid component (the kernel never sends one, so only the worker's own check can
    be observed this way): no file on the workers holds those bytes, and the workers'
    compiled-component cache gains no entry."""
    import hashlib

    # private: the worker task itself, fed a payload the kernel would never send
    from murmur_nb._replay.cluster import payload_of, replay_chunk  # private: see above
    from murmur_nb._replay.sources import RecordJob  # private: see above

    good = payload_of(hooks, ("dropper",))
    other = assemble("replay.wat") + b"\x00\x05\x04test"  # the same guest, one custom section
    bad = dataclasses.replace(good, hooks=(dataclasses.replace(good.hooks[0], data=other),))
    wanted = hashlib.sha256(other).hexdigest()

    def files_holding_other() -> list[str]:
        """On a worker: the files of its replay folders that hold the tampered bytes."""
        import tempfile

        folders = Path(tempfile.gettempdir()).glob("murmur-nb-replay-*")
        files = [f for folder in folders for f in folder.rglob("*") if f.is_file()]
        return [str(f) for f in files if hashlib.sha256(f.read_bytes()).hexdigest() == wanted]

    entries = sorted((worker_cache / "components").glob("*.cwasm"))
    rows = client.submit(replay_chunk, bad, [RecordJob("plain-01")], ("dropper",),
                         mnb.ReplayWindows(), "t", pure=False).result(timeout=120)  # fmt: skip
    assert client.run(files_holding_other) == {w: [] for w in client.nthreads()}
    assert sorted((worker_cache / "components").glob("*.cwasm")) == entries
    assert [(r["code"], r["ok"]) for r in rows] == [("digest_mismatch", False)]
    assert "neither written nor compiled" in rows[0]["error"]


def test_a_hook_the_kernel_did_not_load_does_not_run_on_the_workers(
    tmp_path: Path, murmur_home: Path, client: distributed.Client
) -> None:
    """Its component appears on disk only after ``from_config``: the workers give the
    kernel's load error, as a local replay does, and never load the file."""
    write(murmur_home, "plain-00", talk(5))
    path = capsule(tmp_path / "late", "hooks:\n  dropper:\n    component: hooks/replay.wasm\n")
    with mnb.HookHost.from_config(path, conversations=mnb.ConversationStore(murmur_home)) as host:
        assert not host.hooks["dropper"].loaded
        local = mnb.replay(host, "*", progress=False)
        (path.parent / "hooks" / "replay.wasm").write_bytes(assemble("replay.wat"))
        remote = mnb.replay(host, "*", client=client, progress=False)
    assert remote.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE)), differences(
        remote.drop(columns=VOLATILE), local.drop(columns=VOLATILE)
    )
    assert set(remote["code"]) == {"load_failed"} and remote["error"].str.contains(
        "does not exist"
    ).all()


def test_a_worker_killed_mid_run_costs_only_its_records_in_flight(
    tmp_path: Path, murmur_home: Path, client: distributed.Client
) -> None:
    for i in range(30):  # each compaction spins to its 300 ms limit
        write(murmur_home, f"slow-{i:02d}", [("user", "!loop"), ("user", f"record {i}")])
    text = "hooks:\n  dropper:\n    component: hooks/replay.wasm\n    limits: {time_ms: 300}\n"
    path = capsule(tmp_path / "slow", text, replay=assemble("replay.wat"))
    store = mnb.ConversationStore(murmur_home)
    killed: list[int] = []

    def kill_a_busy_worker() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            busy = [addr for addr, keys in client.processing().items() if keys]
            if busy:
                pid = client.run(os.getpid)[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)

    with mnb.HookHost.from_config(path, conversations=store) as host:
        assert list(host.hooks) == ["dropper"]
        timer = threading.Timer(1.5, kill_a_busy_worker)
        timer.start()
        try:
            out = mnb.replay(host, "*", client=client, progress=False)
        finally:
            timer.cancel()
    assert killed, "no worker was killed"
    compact = out[out["event"] == "compact"]
    assert list(compact["context_id"]) == [f"slow-{i:02d}" for i in range(30)]  # once each
    assert set(compact["code"]) == {"deadline_exceeded"}
    assert out.loc[out["event"] == "task-start", "ok"].all() and len(out) == 60


def test_replay_warns_about_a_plain_tcp_scheduler_once(hooks: mnb.HookHost) -> None:
    """The same warning as ``map``'s (one rule): a cluster without ``security=True`` runs code
    for anyone who reaches its scheduler."""
    import warnings

    plain = distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                     dashboard_address="127.0.0.1:0")  # fmt: skip
    try:
        with distributed.Client(plain) as c:
            with pytest.warns(mnb.ClusterWarning, match=r"plain tcp://.*security=True"):
                mnb.replay(hooks, "plain-00", client=c, progress=False)
            with warnings.catch_warnings():
                warnings.simplefilter("error", mnb.ClusterWarning)
                mnb.replay(hooks, "plain-01", client=c, progress=False)
    finally:
        plain.close()


def test_every_row_reads_its_own_record_on_workers_of_four_threads(
    tmp_path: Path, murmur_home: Path
) -> None:
    """A worker's threads share its host: four records at a time interleave there, and each
    ``task-start`` still pages through its own record (its newest id and its count)."""
    sizes = {f"rec-{i:02d}": 3 + 2 * i for i in range(24)}
    for context, n in sizes.items():
        write(murmur_home, context, talk(n))
    # the reader padded past 4 KiB: each worker compiles it in a child of its own
    path = capsule(tmp_path / "capsule", HOOKS, guest=guest_over_threshold(b"dask"),
                   replay=assemble("replay.wat"))  # fmt: skip
    cluster = distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=4,
                                       security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
    try:
        with distributed.Client(cluster) as c, mnb.HookHost.from_config(
            path, conversations=mnb.ConversationStore(murmur_home)
        ) as hooks:
            remote = mnb.replay(hooks, "*", hooks="reader", task_id="!read", client=c,
                                progress=False)  # fmt: skip
    finally:
        cluster.close()
    notes = remote[remote["event"] == "task-start"].set_index("context_id")["note"]
    assert notes.to_dict() == {c: f"{n}|{n}|{c}-{n - 1}|-" for c, n in sizes.items()}


def test_workers_apply_the_kernels_locals_bound_not_their_own(
    tmp_path: Path, murmur_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A working hook with 1,050,000 locals (an unused core module of them beside its own),
    over the default bound of 1,000,000: the kernel raised ``$MURMUR_NB_HOOK_MAX_LOCALS`` and
    loads it; the worker's environment keeps the default, and its cache is a folder of its
    own (a compile of the kernel's would load there without the check). Its rows are the
    kernel's, all ok (before, every one was ``load_failed``: the worker read its own bound)."""
    write(murmur_home, "plain-00", talk(5))
    write(murmur_home, "plain-01", talk(9))
    big = assemble("replay.wat") + locals_module(21)
    path = capsule(tmp_path / "capsule", "hooks:\n  big:\n    component: hooks/big.wasm\n",
                   big=big)  # fmt: skip
    default = {"MURMUR_NB_HOOK_MAX_LOCALS": "", "MURMUR_NB_CACHE": str(tmp_path / "worker-cache")}
    with fresh_client(1, **default) as c:
        monkeypatch.setenv("MURMUR_NB_HOOK_MAX_LOCALS", "2000000")
        worker_bound = c.run(lambda: os.environ.get("MURMUR_NB_HOOK_MAX_LOCALS"))
        assert list(worker_bound.values()) == [""]  # the default, as when unset
        store = mnb.ConversationStore(murmur_home)
        with mnb.HookHost.from_config(path, conversations=store) as host:
            assert host.hooks["big"].loaded, host.hooks["big"].load_error
            local = mnb.replay(host, "*", windows=3, progress=False)
            remote = mnb.replay(host, "*", windows=3, client=c, progress=False)
    assert remote["ok"].all(), remote[["event", "code", "error"]].head(2).to_dict("records")
    assert remote.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE)), differences(
        remote.drop(columns=VOLATILE), local.drop(columns=VOLATILE)
    )


def test_workers_compile_under_the_kernels_child_bounds_not_their_own(
    tmp_path: Path, murmur_home: Path
) -> None:
    """The replay hook, padded past the size a component compiles in the kernel at, so each
    worker compiles it in a bounded child. The worker's environment bounds that child's data
    segment to 1 MiB (less than the interpreter itself uses, so any compile dies of it); the
    kernel's does not. The kernel's bounds travel with the hooks, and its rows are the
    kernel's, all ok (before, each was ``load_failed`` with the worker's ``TooCostly``)."""
    write(murmur_home, "plain-00", talk(5))
    write(murmur_home, "plain-01", talk(9))
    padded = assemble("replay.wat") + custom_section(IN_PROCESS_MAX_BYTES)
    path = capsule(tmp_path / "capsule", "hooks:\n  big:\n    component: hooks/big.wasm\n",
                   big=padded)  # fmt: skip
    tiny = {"MURMUR_NB_HOOK_COMPILE_MB": "1", "MURMUR_NB_CACHE": str(tmp_path / "worker-cache")}
    with fresh_client(1, **tiny) as c:
        store = mnb.ConversationStore(murmur_home)
        with mnb.HookHost.from_config(path, conversations=store) as host:
            assert host.hooks["big"].loaded, host.hooks["big"].load_error
            assert host.config.compile_bounds.megabytes == DEFAULT_COMPILE_MB
            local = mnb.replay(host, "*", windows=3, progress=False)
            remote = mnb.replay(host, "*", windows=3, client=c, progress=False)
        assert sources_by_hook(c) == {"big": {"compiled"}}  # in the worker's child
    assert remote["ok"].all(), remote[["event", "code", "error"]].head(2).to_dict("records")
    assert remote.drop(columns=VOLATILE).equals(local.drop(columns=VOLATILE)), differences(
        remote.drop(columns=VOLATILE), local.drop(columns=VOLATILE)
    )
