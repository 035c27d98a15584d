"""Throughput, host CPU per row, cluster ratio, resume cost and kernel memory of ``map``.

Run: ``python benchmarks/bench_batch.py [--rows N] [--rss-rows M] [--rounds R]`` (about 1.5
minutes on 2 cores).

Every row is a real sandboxed ``invoke`` of a trivial ``/bin/sh`` module (the same kind of
module as ``bench_invoke.py``), with the host's default policy.

1. *Batch speedup.* ``--rows`` (1,000) invocations as a sequential loop of ``invoke`` and as
   one ``map`` (default concurrency: two rows per usable core, four once the rows prove
   short), measured A-B-A: half of the
   loop's rows right before the map and half right after, so a shared machine that speeds
   up or slows down during the run moves both sides alike. Speedup = loop time / map time,
   the median of ``--rounds`` (3) such A-B-A rounds (each printed): one round is about 4 s,
   and a neighbour's burst on a shared machine moved a single round's figure by +-10 %.
   Goal: >= 1.85 on 2 cores. For reference, the same is measured for bare ``bwrap`` runs of
   ``/bin/true`` (a mount, PID and IPC namespace each, no host): how far a namespace per run
   scales on this machine's kernel at all; and for pure-Python loops in one process per core,
   which share nothing: how far this machine's cores scale for any work (a shared VM's
   virtual cores often give less than one core's worth each).
2. *Host CPU per row.* The kernel process's own CPU time (``time.process_time()``: every
   thread of this process, user and system, not the module processes it starts) over that
   local ``map``, divided by its rows: what the host's Python part and its ``fork`` cost per
   row (the median of the rounds' maps). Goal: <= 0.6 ms. Beside it, ``run_cpu_ms``: the
   same per row for a loop of ``PreparedCall.run`` over half the rows (inputs checked
   before, as a batch does), so what the batch adds to its runs is the difference.
3. *Dask ratio.* The same rows by ``map(..., client=)`` on a ``LocalCluster`` of 2 worker
   processes (1 thread each; a task runs its rows two at a time), against local ``map``.
   Ratio = local time / cluster time, the median of ``--rounds`` pairs run in turn
   (cluster start-up excluded, the first shipment of the module included in the first
   pair's). Goal: >= 0.7.
4. *Resume.* The finished ``--rows`` batch (journaled) run again: every row is skipped.
   Goal: < 1 s.
5. *Kernel RSS.* The growth of this process's resident memory (sampled every 50 ms with the
   rows finished so far, peak minus the value before) over a batch of ``--rss-rows``
   (25,000) rows, projected to 100,000 rows: the growth measured, plus the growth per row
   over the second half of the batch (a least-squares slope of RSS against rows finished)
   times the rows missing. What grows per row (each row's canonical input, key and state,
   the host's audit rows) is measured; what is fixed (the journal's connection, the first
   rows' imports) is counted once, not four times. Goal: < 200 MiB for 100,000 rows.
   (100,000 real rows took about 6 minutes here, more than the rest together.)

6. *The ceiling.* The whole machine's busy CPU time (``/proc/stat``: the kernel, bwrap and
   the modules) over the loop and over the local map, per row, and how many cores each kept
   busy. Each call's sandbox is forked by the kernel's zygote, in the loop and in the map
   (docs/sandbox.md, "The zygote"); where there is none, a loop of ``invoke`` is not one
   core's work: while a call runs, the sandbox of the next is made on the other core
   ("sandboxes made ahead"). With every core busy at the map's CPU per row, the map is at
   most ``cores / loop cores * loop CPU per row / map CPU per row`` times the loop; that
   figure is printed beside the speedup.
7. *The zygote.* The same map with each row's sandbox a bwrap of its own
   (``MURMUR_NB_ZYGOTE=off``, the way before the zygote) against the zygote's, back to
   back: ``zygote_ratio`` = bwrap time / zygote time.

The last line is ``batch_speedup=<x> dask_ratio=<y> resume_s=<z> rss_mb=<w>
host_cpu_ms_per_row=<v> run_cpu_ms=<u> loop_cores=<c> machine_cpu_ms_per_row=<m>
zygote_ratio=<r>``
(``m``: the map's).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import murmur_nb as mnb
from murmur_nb._sandbox.zygote import SWITCH as ZYGOTE_SWITCH

_EXECUTION = (
    '{"local":true,"network":false,"external_writes":false,"provider":"",'
    '"estimated_cost":0,"actual_cost":0,"artifacts":[]}'
)


def _descriptor() -> str:
    cap = (
        '{"id":"benchsh.run","title":"Run","summary":"s","request_schema":"in",'
        '"result_schema":"out","artifact_schemas":[],"effects":{"local":true,"network":false,'
        '"external_writes":false,"provider":"","cost_known":true},"skills":[],'
        '"long_running":false}'
    )
    return (
        '{"module":"benchsh","name":"Bench","version":"1","protocol_versions":["modproto.v1"],'
        f'"capabilities":[{cap}],'
        '"request_schemas":{"in":{"type":"object","properties":{"count":{"type":"integer"}}}},'
        '"result_schemas":{"out":{}},"artifact_schemas":{},"agent_overlays":[],"skills":[],'
        '"permissions":{"filesystem_read":[],"filesystem_write":[],"network":[],'
        '"credentials":[],"paid_providers":[],"publish":false,"subprocess":[]},'
        '"requirements":[]}'
    )


def _envelope(operation: str, result: str) -> str:
    rid = "" if operation == "describe" else "%s"
    return (
        f'{{"protocol":"modproto.v1","module":"benchsh","operation":"{operation}",'
        f'"request_id":"{rid}","ok":true,"result":{result},"warnings":[],'
        f'"execution":{_EXECUTION}}}'
    )


def install(home: Path) -> None:
    folder = home / "modules" / "benchsh"
    folder.mkdir(parents=True)
    describe, invoke = _envelope("describe", _descriptor()), _envelope("invoke", '{"n":1}')
    (folder / "module").write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = describe ]; then printf '%s' '{describe}'; exit 0; fi\n"
        "IFS= read -r line\n"
        'rid=${line#*\\"request_id\\":\\"}\n'
        'rid=${rid%%\\"*}\n'
        f"printf '{invoke}' \"$rid\"\n"
    )
    (folder / "module").chmod(0o755)


def _timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def _busy_s() -> float:
    """CPU time the whole machine has spent busy so far (``/proc/stat``: every process, the
    kernel's and bwrap's and the modules'), in seconds."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Machine:
    """The machine's busy CPU time over the stretches timed with :meth:`timed`."""

    def __init__(self) -> None:
        self.busy_s = self.wall_s = 0.0

    def timed(self, fn: object) -> float:
        before = _busy_s()
        took = _timed(fn)
        self.busy_s += _busy_s() - before
        self.wall_s += took
        return took

    @property
    def cores_used(self) -> float:
        return self.busy_s / self.wall_s


def bwrap_scaling(runs: int, workers: int) -> float:
    """Sequential time / ``workers``-at-a-time time of ``runs`` bare bwrap runs (A-B-A)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return float("nan")
    argv = [bwrap, "--unshare-pid", "--unshare-ipc", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if Path("/" + name).is_symlink():
            argv += ["--symlink", str(Path("/" + name).readlink()), "/" + name]
    argv += ["--proc", "/proc", "/bin/true"]

    def one(_: object = None) -> None:
        subprocess.run(argv, check=True)

    half = runs // 2
    seq = _timed(lambda: [one() for _ in range(half)])
    with ThreadPoolExecutor(workers) as pool:
        par = _timed(lambda: list(pool.map(one, range(runs))))
    seq += _timed(lambda: [one() for _ in range(runs - half)])
    return seq / par


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def cpu_scaling(cores: int, rounds: int = 4, n: int = 2_000_000) -> float:
    """Sequential time / parallel time of ``rounds * cores`` pure-Python loops, in ``cores``
    processes (A-B-A): how far this machine's cores scale for work that shares nothing."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    jobs = [n] * (rounds * cores)
    half = len(jobs) // 2
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(cores, mp_context=context) as pool:
        list(pool.map(_spin, [1000] * cores))  # the workers are up before the clock starts
        seq = _timed(lambda: [_spin(j) for j in jobs[:half]])
        par = _timed(lambda: list(pool.map(_spin, jobs)))
        seq += _timed(lambda: [_spin(j) for j in jobs[half:]])
    return seq / par


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _slope(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of ``(rows, rss_kib)`` points, KiB per row (0 with too few)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in points) / var


def bench_rss(host: mnb.ModuleHost, rows: int, journal: Path,
              project_to: int = 100_000) -> tuple[float, float]:  # fmt: skip
    """Peak RSS growth (MiB) of this process over a ``rows``-row batch, and that growth
    projected to ``project_to`` rows (see the module's text)."""
    base = _rss_kib()
    peak = base
    points: list[tuple[int, int]] = []
    batch = host.map("benchsh.run", ({"count": i} for i in range(rows)), progress=False,
                     journal=journal, background=True)  # fmt: skip
    while not batch.done:
        time.sleep(0.05)
        rss = _rss_kib()
        peak = max(peak, rss)
        points.append((batch.progress.finished, rss))
    batch.wait()
    peak = max(peak, _rss_kib())
    assert batch.progress.ok == rows, batch.progress.line()
    growth = (peak - base) / 1024
    late = [(x, y) for x, y in points if x >= rows // 2]
    per_row_mib = max(0.0, _slope(late)) / 1024
    return growth, growth + per_row_mib * max(0, project_to - rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--rss-rows", type=int, default=25_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    began = time.perf_counter()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"cores: {len(os.sched_getaffinity(0))}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, mnb.ModuleHost(home=Path(tmp, "home")) as host:
        install(host.home)
        inputs = [{"count": i} for i in range(args.rows)]
        host.invoke("benchsh.run", {"count": -1})  # describe and snapshot once
        half = args.rows // 2
        looped, mapped = Machine(), Machine()
        rounds: list[tuple[float, float, float]] = []  # (loop s, map s, kernel CPU ms a row)
        for n in range(args.rounds):
            journal = Path(tmp, f"journal-{n}.sqlite")
            seq = looped.timed(lambda: [host.invoke("benchsh.run", x) for x in inputs[:half]])
            cpu = time.process_time()
            local = mapped.timed(lambda j=journal: host.map("benchsh.run", inputs,
                                                            progress=False, journal=j))  # fmt: skip
            cpu_ms = (time.process_time() - cpu) * 1000 / args.rows
            seq += looped.timed(lambda: [host.invoke("benchsh.run", x) for x in inputs[half:]])
            rounds.append((seq, local, cpu_ms))
        speedups = [s / m for s, m, _ in rounds]
        print("A-B-A rounds (loop s / map s = speedup, kernel CPU a row): " + "; ".join(
            f"{s:.2f}/{m:.2f} = {s / m:.2f}x, {c:.3f} ms" for s, m, c in rounds))  # fmt: skip
        speedup = statistics.median(speedups)
        cpu_ms = statistics.median(c for _, _, c in rounds)
        seq = statistics.median(s for s, _, _ in rounds)
        local = statistics.median(m for _, m, _ in rounds)
        journal = Path(tmp, "journal-0.sqlite")
        # the same rows' runs alone, one after the other (each input checked before, as a
        # batch checks them): what the map's kernel CPU per row is beyond the runs themselves
        prepared = host.prepare("benchsh.run")
        cpu = time.process_time()
        for x in inputs[:half]:
            prepared.run(x, checked=True, ahead=False)
        run_ms = (time.process_time() - cpu) * 1000 / half
        os.environ[ZYGOTE_SWITCH] = "off"  # the same map, each row's sandbox a bwrap of its own
        try:
            by_bwrap = _timed(lambda: host.map("benchsh.run", inputs, progress=False,
                                               journal=None))  # fmt: skip
        finally:
            os.environ.pop(ZYGOTE_SWITCH, None)
        by_zygote = _timed(lambda: host.map("benchsh.run", inputs, progress=False,
                                            journal=None))  # fmt: skip
        print(f"{args.rows} rows: map with each sandbox forked by the zygote {by_zygote:.2f} s, "
              f"with each a bwrap of its own (MURMUR_NB_ZYGOTE=off) {by_bwrap:.2f} s: "
              f"{by_bwrap / by_zygote:.2f}x")  # fmt: skip
        print(f"{args.rows} rows: invoke loop {seq:.2f} s (half before the map, half after), "
              f"map {local:.2f} s ({args.rows / local:.0f} rows/s); the kernel's own CPU "
              f"over the map: {cpu_ms:.3f} ms per row, of which the run itself (a loop of "
              f"PreparedCall.run over {half} rows): {run_ms:.3f} ms")  # fmt: skip
        cores = len(os.sched_getaffinity(0))
        # both machines add up every round's rows
        loop_row_ms, map_row_ms = (m.busy_s * 1000 / (args.rows * args.rounds)
                                   for m in (looped, mapped))  # fmt: skip
        print(f"the whole machine's CPU per row (the kernel, bwrap, the module): loop "
              f"{loop_row_ms:.2f} ms, map {map_row_ms:.2f} ms; cores kept busy: loop "
              f"{looped.cores_used:.2f}, map {mapped.cores_used:.2f} of {cores}. A map can be "
              f"at most {cores / looped.cores_used * loop_row_ms / map_row_ms:.2f}x the loop "
              f"here (all {cores} cores busy at the map's CPU per row)")  # fmt: skip
        workers = 2 * cores
        scaling = bwrap_scaling(400, workers)
        print("reference: bare bwrap runs of /bin/true, " + (
            f"{workers} at a time vs one at a time: {scaling:.2f}x" if not math.isnan(scaling)
            else "not measured: no bwrap here (the modules above ran without it)"))  # fmt: skip
        print(f"reference: pure-Python loops in {cores} processes vs one at a time: "
              f"{cpu_scaling(cores):.2f}x (what {cores} cores give here)")  # fmt: skip
        resume = _timed(lambda: host.map("benchsh.run", inputs, progress=False,
                                         journal=journal))  # fmt: skip
        print(f"resume of the finished {args.rows}-row batch: {resume:.3f} s")
        cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                               security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
        pairs: list[tuple[float, float]] = []  # (local s, cluster s)
        with Client(cluster) as client:
            for n in range(args.rounds):

                def on_cluster() -> float:
                    return _timed(lambda: host.map("benchsh.run", inputs, progress=False,
                                                   journal=None, client=client))  # fmt: skip

                def here() -> float:
                    return _timed(lambda: host.map("benchsh.run", inputs, progress=False,
                                                   journal=None))  # fmt: skip

                # the first pair starts on the cluster (its first shipment of the module
                # counted), later ones take turns, so a drift moves both sides alike
                if n % 2 == 0:
                    remote = on_cluster()
                    local2 = here()
                else:
                    local2 = here()
                    remote = on_cluster()
                pairs.append((local2, remote))
        cluster.close()
        dask_ratio = statistics.median(lo / re for lo, re in pairs)
        print(f"{args.rows} rows, LocalCluster(2 workers) map against local map: " + "; ".join(
            f"{re:.2f} s / {lo:.2f} s = {lo / re:.2f}" for lo, re in pairs))  # fmt: skip
        measured, rss = bench_rss(host, args.rss_rows, Path(tmp, "rss.sqlite"))
        print(f"kernel RSS growth over {args.rss_rows} rows: {measured:.1f} MiB; projected "
              f"to 100,000 rows: {rss:.1f} MiB")  # fmt: skip
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; the benchmark took "
          f"{time.perf_counter() - began:.0f} s")  # fmt: skip
    print(f"batch_speedup={speedup:.2f} dask_ratio={dask_ratio:.2f} "
          f"resume_s={resume:.3f} rss_mb={rss:.1f} host_cpu_ms_per_row={cpu_ms:.3f} "
          f"run_cpu_ms={run_ms:.3f} "
          f"loop_cores={looped.cores_used:.2f} machine_cpu_ms_per_row={map_row_ms:.2f} "
          f"zygote_ratio={by_bwrap / by_zygote:.2f}",
          file=sys.stdout)  # fmt: skip


if __name__ == "__main__":
    main()
