"""A container's CPU quota caps the work murmur-nb starts at once (``usable_cores``).

A pod limited to one CPU on a many-core node sees every core in its affinity; a map sized by
that ran two rows per core of the node at once, each a module process in the pod's memory.
The first test puts a real process in a real cgroup with a one-CPU quota (root, where the
``cpu`` controller can be written: cgroup v1's ``cpu`` hierarchy or v2's) and watches how
many of a map's rows run at the same moment; the others read cgroup files of both versions
laid out in a folder, at the paths this process's ``/proc/self/cgroup`` names.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _modules import sh_module

import murmur_nb as mnb
from murmur_nb._batch.local import (  # private: the rule a default map grows by
    ROWS_PER_CORE,
    SHORT_ROW_S,
    SHORT_SAMPLES_PER_WORKER,
)
from murmur_nb._rules import usable_cores  # private: the one rule every pool is sized by

CGROUP = Path("/sys/fs/cgroup")

MAP_SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from _modules import sh_module
import murmur_nb as mnb
work, out = Path({work!r}), Path({out!r})
sh_module(work / "home", "slow", before=(
    f"echo $(date +%s%N) start >> {{out}}/marks; sleep 0.5; echo $(date +%s%N) end >> {{out}}/marks"
))
policy = mnb.Policy(roots={{"out": out}}, deadline_ms=20000)
with mnb.ModuleHost(home=work / "home", policy=policy) as host:
    batch = host.map("slow.run", [{{"row": i}} for i in range(8)], progress=False)
    assert batch.progress.ok == 8, batch.progress.line()
"""


def cpu_cgroup_parent() -> tuple[Path, str] | None:
    """Where a child cgroup with a CPU quota can be made here: ``(folder, version)``."""
    if os.geteuid() != 0:
        return None
    v1 = CGROUP / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists() and os.access(v1, os.W_OK):
        return v1, "v1"
    controllers = CGROUP / "cgroup.subtree_control"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return CGROUP, "v2"
    return None


@pytest.fixture
def one_cpu() -> Iterator[Path]:
    """A fresh cgroup with a quota of one CPU; its processes are ended and it is removed."""
    found = cpu_cgroup_parent()
    if found is None:
        pytest.skip("needs root and a writable cpu cgroup controller (v1 or v2)")
    parent, version = found
    group = parent / f"murmur-nb-test-{os.getpid()}"
    group.mkdir()
    try:
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text("100000")
        else:
            (group / "cpu.max").write_text("100000 100000")
        yield group
    finally:
        for _ in range(50):
            pids = (group / "cgroup.procs").read_text().split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def most_at_once(marks: Path) -> int:
    """The most rows that were between their ``start`` and ``end`` at the same moment."""
    events = sorted(
        (int(ns), 1 if what == "start" else -1)
        for ns, what in (line.split() for line in marks.read_text().splitlines())
    )
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def run_map(tmp_path: Path, name: str, group: Path | None) -> int:
    work, out = tmp_path / name, tmp_path / name / "out"
    out.mkdir(parents=True)
    script = MAP_SCRIPT.format(tests=str(Path(__file__).parent), work=str(work), out=str(out))
    enter = f"echo $$ > {group / 'cgroup.procs'}; " if group is not None else ""
    subprocess.run(["/bin/sh", "-c", f'{enter}exec "$0" -c "$1"', sys.executable, script],
                   check=True, timeout=120)  # fmt: skip
    return most_at_once(out / "marks")


@pytest.mark.slow
def test_a_map_in_a_one_cpu_cgroup_runs_two_rows_at_once(tmp_path: Path, one_cpu: Path) -> None:
    """Two rows per usable core: in the one-CPU cgroup at most two rows ran at once (the
    module's own start and end marks), on this machine's cores outside it more."""
    assert run_map(tmp_path, "capped", one_cpu) <= 2
    if len(os.sched_getaffinity(0)) >= 2:
        assert run_map(tmp_path, "free", None) > 2


def cgroup_paths() -> dict[str, str]:
    """``{"v2": path, "v1": path}`` from this process's cgroup file (what exists here)."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            found["v2"] = path
        elif "cpu" in controllers.split(","):
            found["v1"] = path
    return found


def at(root: Path, path: str) -> Path:
    folder = root / path.strip("/")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_cgroup_v2_cpu_max_caps_the_cores(tmp_path: Path) -> None:
    paths = cgroup_paths()
    if "v2" not in paths:
        pytest.skip("this process is in no cgroup v2 hierarchy")
    cores = len(os.sched_getaffinity(0))
    own = at(tmp_path, paths["v2"])
    (own / "cpu.max").write_text("50000 100000\n")  # half a CPU: one core's worth, rounded up
    assert usable_cores(tmp_path) == 1
    (own / "cpu.max").write_text("max 100000\n")  # no quota
    assert usable_cores(tmp_path) == cores
    (own / "cpu.max").write_text("not a quota\n")  # unreadable: no quota
    assert usable_cores(tmp_path) == cores
    (own / "cpu.max").write_text(f"{cores * 300000} 100000\n")  # more than the affinity
    assert usable_cores(tmp_path) == cores
    if own != tmp_path:  # a parent's quota counts when it is smaller
        (tmp_path / "cpu.max").write_text("100000 100000\n")
        assert usable_cores(tmp_path) == 1


def test_cgroup_v1_cfs_quota_caps_the_cores(tmp_path: Path) -> None:
    paths = cgroup_paths()
    if "v1" not in paths:
        pytest.skip("this process is in no cgroup v1 cpu hierarchy")
    cores = len(os.sched_getaffinity(0))
    own = at(tmp_path / "cpu", paths["v1"])
    (own / "cpu.cfs_period_us").write_text("100000\n")
    (own / "cpu.cfs_quota_us").write_text("100000\n")
    assert usable_cores(tmp_path) == 1
    (own / "cpu.cfs_quota_us").write_text("-1\n")  # no quota
    assert usable_cores(tmp_path) == cores


def _run_timed_map(
    tmp_path: Path, name: str, body_s: float, rows: int, **options: object
) -> tuple[int, list[float]]:
    """A map (``options`` as given to ``map``) of ``rows`` rows whose module sleeps
    ``body_s`` between its two marks: the most rows whose module was running at the same
    moment, and each row's ``duration_ms`` in the batch's frame (the whole call's), by row."""
    work, out = tmp_path / name, tmp_path / name / "out"
    out.mkdir(parents=True)
    sh_module(work / "home", "timed", before=(
        f"echo $(date +%s%N) start >> {out}/marks; sleep {body_s}; "
        f"echo $(date +%s%N) end >> {out}/marks"
    ))  # fmt: skip
    policy = mnb.Policy(roots={"out": out}, deadline_ms=20000)
    with mnb.ModuleHost(home=work / "home", policy=policy) as host:
        batch = host.map("timed.run", [{"row": i} for i in range(rows)], progress=False,
                         journal=None, **options)  # fmt: skip
        assert batch.progress.ok == rows, batch.progress.line()
        durations = [float(ms) for ms in batch.to_pandas()["duration_ms"]]
    return most_at_once(out / "marks"), durations


def _rows_at_once(tmp_path: Path, name: str, body_s: float, rows: int, **options: object) -> int:
    """The most rows of such a map (:func:`_run_timed_map`) running at the same moment."""
    return _run_timed_map(tmp_path, name, body_s, rows, **options)[0]


#: a first rows' median (of their calls' ``duration_ms``) this short is short by any
#: measure: the batch's own time of a run adds only the moments between its lock and the call
PLAINLY_SHORT_MS = 70.0

#: how long, in all, a test runs maps again for one whose first rows prove short: the suite's
#: other worker can load this machine for minutes (its binder and container tests take up to
#: four), and in one full run rows of 10 ms took 103 to 134 ms for eight maps in a row. The
#: tests that wait so long have a timeout of :data:`WAITING_TIMEOUT_S` (the suite's is 300 s)
PROVE_SHORT_WITHIN_S = 360.0
WAITING_TIMEOUT_S = 600


@contextlib.contextmanager
def _ahead_of_the_other_worker() -> Iterator[None]:
    """This thread, and the threads and processes it starts meanwhile (the batch's, the
    zygote, the modules, Dask's workers), at nice -10 where that may be set (as root): the
    first rows then take what they take on this machine, less of what the suite's other
    worker leaves them. Unprivileged, the priority stays as it was."""
    before = os.getpriority(os.PRIO_PROCESS, 0)  # on Linux, this thread's
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except PermissionError:
        yield
        return
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def _grows_once_short(
    run: Callable[[int], tuple[int, list[float]]], *, slots: int, long_keeps: bool
) -> list[tuple[int, float]]:
    """Run the default map ``run(attempt)`` (the most rows at once, each row's
    ``duration_ms``) of a batch over ``slots`` cores or Dask workers (two rows each, four once
    short) until one grows, holding each to the rule by what its first rows took: plainly
    short (:data:`PLAINLY_SHORT_MS`), it must have grown; over :data:`.SHORT_ROW_S`, with
    ``long_keeps``, it must have kept two a slot; never more than four a slot. A map that did
    not grow and was not plainly short (a loaded machine) runs again after a pause that
    doubles, for :data:`PROVE_SHORT_WITHIN_S` in all. The tries: (most at once, the first
    rows' median ms)."""
    decided_on = SHORT_SAMPLES_PER_WORKER * ROWS_PER_CORE * slots  # the first to start
    tries: list[tuple[int, float]] = []
    give_up, pause = time.monotonic() + PROVE_SHORT_WITHIN_S, 2.0
    while True:
        most, durations = run(len(tries))
        median_ms = statistics.median(durations[:decided_on])
        tries.append((most, round(median_ms, 1)))
        assert most <= 4 * slots, (tries, slots)
        if long_keeps and median_ms > SHORT_ROW_S * 1000:
            assert most <= 2 * slots, (tries, slots)  # long rows: the batch kept two a slot
        if most > 2 * slots:
            return tries  # it grew
        assert median_ms > PLAINLY_SHORT_MS, (tries, slots)  # short rows, and it did not grow
        if time.monotonic() + pause > give_up:
            pytest.fail(f"this machine stayed too busy for rows of 10 ms to prove short in "
                        f"{len(tries)} maps over {PROVE_SHORT_WITHIN_S:.0f} s (the most at "
                        f"once, the first rows' median ms): {tries}")  # fmt: skip
        time.sleep(pause)
        pause = min(2 * pause, 30.0)


@pytest.mark.timeout(WAITING_TIMEOUT_S)
def test_a_default_map_of_short_rows_grows_to_four_rows_per_core(tmp_path: Path) -> None:
    """Rows of about 10 ms: once the first ones are timed, a default map runs four rows per
    usable core at once (the moments a row's process starts and ends left cores idle);
    ``concurrency=`` given, it never runs more than that.

    The batch decides on the first rows to start (rows 0 to 15 on two cores), timed on this
    machine, which the suite's other worker may load so much that they take more than the
    100 ms of a short row (eight maps in a row did, in one full run): the maps run ahead of
    it where they may, and again until one proves short (:func:`_grows_once_short`)."""
    cores = usable_cores()

    def default_map(attempt: int) -> tuple[int, list[float]]:
        return _run_timed_map(tmp_path, f"default-{attempt}", 0.01, 300)

    with _ahead_of_the_other_worker():
        _grows_once_short(default_map, slots=cores, long_keeps=True)
    given = _rows_at_once(tmp_path, "given", 0.01, 300, concurrency=2 * cores)
    assert given <= 2 * cores, (given, cores)


def test_a_default_map_of_long_rows_keeps_two_rows_per_core(tmp_path: Path) -> None:
    """Rows of 150 ms are not short (over 100 ms): the map keeps two per usable core (each
    row's module holds its memory, and no core idles long enough between rows to matter)."""
    cores = usable_cores()
    assert _rows_at_once(tmp_path, "long", 0.15, 12 * cores) <= 2 * cores


@pytest.mark.slow
@pytest.mark.timeout(WAITING_TIMEOUT_S)
def test_a_default_map_on_dask_grows_to_four_rows_a_task(tmp_path: Path) -> None:
    """The same rule on a cluster of two one-thread workers: a task runs two rows at once
    until the first tasks' rows prove short, then four (each worker ran more than two rows'
    modules at the same moment); a given ``concurrency=`` keeps two a task. A map whose
    first rows were not plainly short (a loaded machine) may keep two, and runs again."""
    distributed = pytest.importorskip("distributed")
    with _ahead_of_the_other_worker():  # Dask's workers start at this priority
        cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                           security=True, dashboard_address="127.0.0.1:0")
    with cluster, distributed.Client(cluster) as client:

        def dask_map(attempt: int) -> tuple[int, list[float]]:
            return _run_timed_map(tmp_path, f"dask-{attempt}", 0.01, 300, client=client)

        _grows_once_short(dask_map, slots=2, long_keeps=False)  # two workers
        given = _rows_at_once(tmp_path, "dask-given", 0.01, 300, client=client, concurrency=64)
        assert given <= 4, given
        long = _rows_at_once(tmp_path, "dask-long", 0.15, 40, client=client)
        assert long <= 4, long


#: a kernel that may start four more threads than it has once its sandbox is warm (its
#: threads moved into the pids cgroup ``argv[2]``, whose ``pids.max`` says so), then runs a
#: default map of short rows, which grows to four rows per core; prints how the batch ended
PIDS_SCRIPT = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from _modules import sh_module
import murmur_nb as mnb
work, group = Path(sys.argv[1]), Path(sys.argv[2])
sh_module(work / "home", "quick", writes=())
with mnb.ModuleHost(home=work / "home") as host:
    assert host.invoke("quick.run", {{}}).ok
    (group / "cgroup.procs").write_text(str(os.getpid()))
    (group / "pids.max").write_text(str(int((group / "pids.current").read_text()) + 4))
    batch = host.map("quick.run", [{{"row": i}} for i in range(300)], progress=False,
                     journal=None)
    print(json.dumps({{"state": batch.progress.state, "ok": batch.progress.ok}}))
"""


def pids_cgroup_parent() -> Path | None:
    """Where a child cgroup with a ``pids.max`` can be made here (v1's ``pids`` hierarchy
    or v2's root), as root."""
    if os.geteuid() != 0:
        return None
    v1 = CGROUP / "pids"
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        return v1
    controllers = CGROUP / "cgroup.subtree_control"
    if controllers.exists() and "pids" in controllers.read_text().split():
        return CGROUP
    return None


@pytest.mark.skipif(usable_cores() < 2, reason="a default map grows beyond four rows only on 2+")
def test_a_map_that_the_system_gives_no_more_threads_runs_on_with_the_ones_it_has(
    tmp_path: Path,
) -> None:
    """A container's process limit (``docker run --pids-limit``, a pod's pids cgroup) refuses
    the threads a default map of short rows grows to. That was taken for the interpreter
    exiting: the batch was cancelled (``cancelled``, "interpreter exiting"), its remaining
    rows never run. Now the map runs on with the workers it has."""
    parent = pids_cgroup_parent()
    if parent is None:
        pytest.skip("needs root and a writable pids cgroup controller (v1 or v2)")
    group = parent / f"murmur-nb-test-pids-{os.getpid()}"
    group.mkdir()
    try:
        script = PIDS_SCRIPT.format(tests=str(Path(__file__).parent))
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(group)],
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        said = json.loads(done.stdout.strip().splitlines()[-1])
        assert said == {"state": "finished", "ok": 300}, said  # before: cancelled
    finally:
        for _ in range(50):
            with contextlib.suppress(OSError):
                group.rmdir()
                break
            time.sleep(0.1)


#: a row's module, by its row: 0-5 run 0.3 s; 6-8 wait until row 30 has run (each a worker
#: held up for a long time); the rest end at once
UNEVEN = (
    'row=${{line#*\\"row\\":}}; row=${{row%%[!0-9]*}}\n'
    "echo $(date +%s%N) start >> {out}/marks\n"
    "case $row in\n"
    "  [0-5]) sleep 0.3 ;;\n"
    "  [6-8]) while [ ! -e {out}/release ]; do sleep 0.01; done ;;\n"
    "  30) : > {out}/release ;;\n"
    "esac\n"
    "echo $(date +%s%N) end >> {out}/marks"
)


@pytest.mark.skipif(usable_cores() != 2, reason="the rows are laid out for 4 workers, 2 cores")
def test_a_default_map_decides_on_the_first_rows_to_start_not_the_first_to_end(
    tmp_path: Path,
) -> None:
    """Four workers: rows 0-5 run 0.3 s, then rows 6-8 hold three workers up while the fourth
    runs the short rows after them. The first 16 rows to end were 6 long and 10 short, so
    the map grew (a median of a few ms) and ran more than four rows at once beside the held
    ones; of the first 16 to start, 9 are long (6 ended, 3 still running), and it keeps
    four."""
    out = tmp_path / "out"
    out.mkdir()
    sh_module(tmp_path / "home", "uneven", after=UNEVEN.format(out=out))
    policy = mnb.Policy(roots={"out": out}, deadline_ms=60000)
    with mnb.ModuleHost(home=tmp_path / "home", policy=policy) as host:
        batch = host.map("uneven.run", [{"row": i} for i in range(60)], progress=False,
                         journal=None)  # fmt: skip
        assert batch.progress.ok == 60, batch.progress.line()
    assert most_at_once(out / "marks") <= 4  # before: 6 (grown workers beside the held)
