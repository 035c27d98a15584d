"""The private temporary folders of Dask workers (``murmur_nb._files.scratch``): a folder
whose process was killed with ``SIGKILL`` (no exit handler runs) is removed when the next
process makes one; a folder whose process lives is never touched. Real processes, killed for
real; their folders looked at on disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

# private: the folders' owner lock has no public entry point
from murmur_nb._files.scratch import LOCK, sweep

MAKER = """
import sys, time
from murmur_nb._files.scratch import owned_folder
print(owned_folder("murmur-nb-worker-"), flush=True)
time.sleep(600)
"""


def maker(tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process that makes a folder (after sweeping) in ``tmp`` and keeps it; and the folder."""
    proc = subprocess.Popen([sys.executable, "-c", MAKER], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})  # fmt: skip
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_workers_folder_goes_with_the_next_one_made_a_live_ones_stays(
    tmp_path: Path,
) -> None:
    killed, killed_folder = maker(tmp_path)
    alive, alive_folder = maker(tmp_path)
    try:
        assert (killed_folder / LOCK).exists() and (alive_folder / LOCK).exists()
        (killed_folder / "modules").mkdir(mode=0o555)  # read-only, as a snapshot is
        os.kill(killed.pid, signal.SIGKILL)
        killed.communicate()
        assert killed_folder.exists()  # no exit handler ran
        after, after_folder = maker(tmp_path)
        try:
            assert not killed_folder.exists()
            assert alive_folder.exists() and after_folder.exists()
        finally:
            after.kill()
            after.communicate()
    finally:
        alive.kill()
        alive.communicate()
    assert sorted(sweep("murmur-nb-worker-", tmp_path)) == sorted([alive_folder, after_folder])
    assert list(tmp_path.iterdir()) == []


def test_a_folder_without_a_lock_or_not_a_folder_is_left_alone(tmp_path: Path) -> None:
    """One being made (no lock file yet), one an older version made, and a link planted
    under the name: none is removed, and the link's target is untouched."""
    bare = tmp_path / "murmur-nb-worker-old"
    bare.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / LOCK).write_text("")
    (tmp_path / "murmur-nb-worker-link").symlink_to(target)
    assert sweep("murmur-nb-worker-", tmp_path) == []
    assert bare.exists() and (target / LOCK).exists()



SWEEPER = """
import os, sys, time
from pathlib import Path
from murmur_nb._files.scratch import sweep
tmp, log, go = (Path(arg) for arg in sys.argv[1:])
def settle(folder):
    with open(log, "a") as out:
        out.write(f"{os.getpid()} {folder.name}\\n")
    time.sleep(0.5)  # long enough for the other sweeper to find the folder meanwhile
while not go.exists():
    time.sleep(0.005)
print(len(sweep("murmur-nb-worker-", tmp, settle=settle)))
"""


def test_two_sweepers_at_once_settle_and_remove_an_abandoned_folder_once(
    tmp_path: Path,
) -> None:
    """Two Dask workers starting together both find a killed worker's folder: one settles
    and removes it, the other leaves it to that one. Both looked at the same time before,
    settled it twice, and the one that came second failed its task on the folder the first
    had removed (``FileNotFoundError`` out of the walk)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    killed, folder = maker(tmp)
    for part in range(200):  # a tree that takes a moment to remove
        (folder / f"part-{part}").mkdir()
        (folder / f"part-{part}" / "data").write_text("x" * 100)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate()
    log, go = tmp_path / "settled.log", tmp_path / "go"
    command = [sys.executable, "-c", SWEEPER, str(tmp), str(log), str(go)]
    sweepers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]  # fmt: skip
    go.write_text("")
    outcomes = [proc.communicate(timeout=60) for proc in sweepers]
    assert [proc.returncode for proc in sweepers] == [0, 0], outcomes
    assert sorted(out.strip() for out, _err in outcomes) == ["0", "1"]
    assert len(log.read_text().splitlines()) == 1  # settled once
    assert not folder.exists()


KERNEL = """
import sys
import murmur_nb as mnb
demo = mnb.prepare_demo_home(sys.argv[1], hooks=False)
host = mnb.ModuleHost(home=demo.facet_home, artifact_store=demo.artifact_store)
assert host.modules()  # each demo module described: a working folder in the runs folder
print("ready", flush=True)
sys.stdin.read()  # until the test closes it: then an ordinary exit
"""


def kernel(tmp: Path, demo: Path) -> subprocess.Popen[str]:
    """A kernel-like process with a host that has run modules, in its own ``TMPDIR``."""
    proc = subprocess.Popen([sys.executable, "-c", KERNEL, str(demo)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_a_killed_kernels_runs_folder_goes_when_the_next_host_makes_one(
    tmp_path: Path,
) -> None:
    """A notebook kernel stopped with ``SIGKILL`` (nbval's way, the OOM killer's) ran no exit
    handler: its host's runs folder stays until the next host on the machine makes one."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    demo = tmp_path / "demo"
    killed = kernel(tmp, demo)
    alive = None
    try:
        (killed_runs,) = tmp.glob("murmur-nb-runs-*")
        alive = kernel(tmp, demo)
        (alive_runs,) = set(tmp.glob("murmur-nb-runs-*")) - {killed_runs}
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        assert killed_runs.exists()  # no exit handler ran
        after = kernel(tmp, demo)
        after.communicate()  # an ordinary exit: its exit handler removes its own runs folder
        assert after.returncode == 0
        assert not killed_runs.exists()
        assert list(tmp.glob("murmur-nb-runs-*")) == [alive_runs]
    finally:
        for proc in (killed, alive):
            if proc is not None:
                _end(proc)


def _end(proc: subprocess.Popen[str]) -> None:
    """An ordinary exit (stdin closed), killed only if it does not come: a kernel killed here
    could not take back what its host gave (on a root host without namespaces, a passage
    through ``/root``), and its journal of it is in this test's ``TMPDIR``, which no later
    kernel reads: one ``--x`` entry on ``/root`` was left by each run of the suite."""
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def test_the_private_folders_of_an_untrusted_cache_go_at_exit(tmp_path: Path) -> None:
    """A cache folder anyone can write is not used: the snapshots and the sandbox helpers go
    to private temporary folders instead, and an ordinary exit removes them with the runs
    folder (they stayed for good before)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could plant a snapshot or a helper here
    env = {**os.environ, "TMPDIR": str(tmp), "MURMUR_NB_CACHE": str(shared),
           "MURMUR_NB_SNAPSHOTS": str(shared / "module-snapshots")}  # fmt: skip
    listing = "import os; print(*os.listdir(os.environ['TMPDIR']))"
    script = KERNEL.replace('print("ready", flush=True)', listing)
    ran = subprocess.run([sys.executable, "-c", script, str(tmp_path / "demo")], env=env,
                         input="", capture_output=True, text=True, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    made = {name.rsplit("-", 1)[0] for name in ran.stdout.split()}
    assert {"murmur-nb-runs", "murmur-nb-snapshots", "murmur-nb-helpers"} <= made
    assert list(tmp.iterdir()) == []
