"""Hook host benchmark: component load, per-call cost of a one-page read, a 100k-message walk,
and ``HookHost.replay`` of the demo hook over 1,000 records of 100 messages, in this process and
on a 2-worker Dask ``LocalCluster`` (each a warm run: the workers have loaded the hook).

Run with ``python benchmarks/bench_hooks.py``. The componentize-py demo hook is built (or taken
from the per-user build cache) first; the compiled-component figures use a fresh cache folder
so the cold compile is really cold. The last line is machine-readable:
``cached_load_ms=<x> call_ms=<y> walk_100k_s=<z> replay_records_per_s=<r>
replay_dask_ratio=<d>`` (cluster throughput over local; goal >= 0.7).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import wasmtime

import murmur_nb as mnb
from murmur_nb._hooks.cache import ComponentCache
from murmur_nb._hooks.runtime import Runtime

WAT = Path(__file__).resolve().parent.parent / "tests" / "wat"


def reader_guest() -> bytes:
    """The WAT test guest: task id ``!read`` reads one page of 100 and returns a short note."""
    core = (WAT / "guest.wat").read_text(encoding="utf-8")
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace("(core module $main @MAIN@)", "(core module $main" + body)
    return wasmtime.wat2wasm(text)


def write_record(home: Path, context: str, n: int) -> None:
    with mnb.RecordWriter(home, context, buffered=True) as writer:
        for i in range(n):
            role = ("user", "assistant", "assistant")[i % 3]
            writer.append(role, f"message {i}: " + "lorem ipsum dolor sit amet " * 3)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


REPLAY_YAML = """\
hooks:
  summarize:
    component: hooks/summarize.wasm
    capabilities: {conversation: {read: true}}
"""


def bench_replay(work: Path, records: int = 1000, size: int = 100) -> tuple[float, float]:
    """Records per second replaying the demo hook locally, and the cluster's over local."""
    import distributed  # the dask extra, only for this part

    home = work / "replay-home"
    for i in range(records):
        write_record(home, f"rec-{i:04d}", size)
    (work / "capsule" / "replay.yaml").write_text(REPLAY_YAML, encoding="utf-8")
    store = mnb.ConversationStore(home)
    hooks = mnb.HookHost.from_config(work / "capsule" / "replay.yaml", conversations=store)
    mnb.replay(hooks, store.contexts()[:5], progress=False)  # warm
    started = time.perf_counter()
    local = mnb.replay(hooks, "*", progress=False)
    local_s = time.perf_counter() - started
    assert local["ok"].all() and len(local) == 2 * records, local["code"].value_counts()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
    with distributed.Client(cluster) as client:
        mnb.replay(hooks, store.contexts()[:8], client=client, progress=False)  # workers load it
        started = time.perf_counter()
        remote = mnb.replay(hooks, "*", client=client, progress=False)
        remote_s = time.perf_counter() - started
    cluster.close()
    assert remote["ok"].all() and len(remote) == 2 * records
    assert remote["worker"].nunique() == 2
    same = ["context_id", "event", "window", "note", "messages_out", "chars_out", "fuel_used"]
    assert remote[same].equals(local[same])
    print(
        f"replay of the demo hook over {records:,} records of {size} messages (task-start "
        f"walking the record, then compact of the whole record): {local_s:.2f} s in this "
        f"process ({records / local_s:.1f} records/s); {remote_s:.2f} s on a 2-worker "
        f"LocalCluster ({records / remote_s:.1f} records/s)"
    )
    return records / local_s, local_s / remote_s


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-hooks-"))
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    runtime = Runtime.get()

    started = time.perf_counter()
    demo = mnb.build_demo_hook(work / "capsule")
    build_s = time.perf_counter() - started
    print(
        f"demo hook: {demo.stat().st_size / 2**20:.1f} MiB component, "
        f"build {build_s:.2f} s (cached builds are reused)"
    )

    cache = ComponentCache(runtime.engine, runtime.fingerprint, work / "component-cache")
    started = time.perf_counter()
    cold = cache.load(demo)
    cold_s = time.perf_counter() - started
    assert cold.source == "compiled", cold.source
    loads = []
    warm = cold
    for _ in range(15):
        # the last load's component is freed before the clock starts: unmapping 38 MiB
        # (about 1.5 ms) is that component's end, not this load's
        del warm
        started = time.perf_counter()
        warm = cache.load(demo)
        loads.append(time.perf_counter() - started)
        assert warm.source == "cache", warm.source
    del cold
    cached_load_ms = median_ms(loads)
    print(f"cold compile (and store) of the demo hook: {cold_s:.2f} s")
    print(
        f"cached load of the demo hook: median {cached_load_ms:.2f} ms over {len(loads)} "
        f"(min {min(loads) * 1000:.2f} ms; goal <= 10 ms)"
    )

    home = work / "home"
    write_record(home, "ctx-page", 100)
    write_record(home, "ctx-walk", 100_000)
    store = mnb.ConversationStore(home)
    (work / "capsule" / "hooks" / "reader.wasm").write_bytes(reader_guest())
    (work / "capsule" / "murmur.yaml").write_text(
        """\
hooks:
  reader:
    component: hooks/reader.wasm
    events: [task-start]
    capabilities: {conversation: {read: true}}
  summarize:
    component: hooks/summarize.wasm
    events: [task-start]
    capabilities: {conversation: {read: true}}
    limits: {time_ms: 600000}
""",
        encoding="utf-8",
    )
    hooks = mnb.HookHost.from_config(work / "capsule" / "murmur.yaml", conversations=store)
    for info in hooks.hooks.values():
        assert info.loaded, info.load_error
    reader_only = mnb.HookHost(
        hooks.config.model_copy(update={"hooks": hooks.config.hooks[:1]}), conversations=store
    )
    demo_only = mnb.HookHost(
        hooks.config.model_copy(update={"hooks": hooks.config.hooks[1:]}), conversations=store
    )

    python_reader = store.reader("ctx-page")
    python_reads, calls, demo_calls = [], [], []
    for _ in range(20):  # warm up both sides
        python_reader.read_messages(None, 100)
        reader_only.task_start(task_id="!read", context_id="ctx-page")
    for _ in range(200):
        started = time.perf_counter()
        page = python_reader.read_messages(None, 100)
        python_reads.append(time.perf_counter() - started)
        started = time.perf_counter()
        result = reader_only.task_start(task_id="!read", context_id="ctx-page")["reader"]
        calls.append(time.perf_counter() - started)
    assert len(page.messages) == 100 and page.next_cursor is None
    assert result.ok and result.value == f"100|100|{page.messages[0].id}|-", result
    for _ in range(30):
        started = time.perf_counter()
        note = demo_only.task_start(task_id="t", context_id="ctx-page")["summarize"]
        demo_calls.append(time.perf_counter() - started)
    assert note.ok and note.value.startswith("task t: 100 messages"), note
    call_ms = median_ms(calls)
    print(f"python API read of one 100-message page: median {median_ms(python_reads):.3f} ms")
    print(
        f"task_start, WAT hook reading one 100-message page: median {call_ms:.3f} ms "
        f"(p90 {statistics.quantiles(calls, n=10)[-1] * 1000:.3f} ms; goal <= 2.5 ms; "
        "fresh store + instance + read + lowering + guest, everything included)"
    )
    print(
        f"task_start, componentize-py demo hook over the same 100-message record: "
        f"median {median_ms(demo_calls):.3f} ms"
    )

    started = time.perf_counter()
    walk = demo_only.task_start(task_id="walk", context_id="ctx-walk")["summarize"]
    walk_s = time.perf_counter() - started
    assert walk.ok, walk
    assert walk.value.startswith("task walk: 100000 messages"), walk.value
    assert walk.stdout.strip() == "walked 100000 messages in 1000 pages", walk.stdout
    print(
        f"componentize-py demo hook walking a 100,000-message record (1000 pages): "
        f"{walk_s:.2f} s, fuel {walk.fuel_used:,}"
    )
    replay_rate, dask_ratio = bench_replay(work)
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    print(
        f"cached_load_ms={cached_load_ms:.2f} call_ms={call_ms:.3f} walk_100k_s={walk_s:.2f} "
        f"replay_records_per_s={replay_rate:.1f} replay_dask_ratio={dask_ratio:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
