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
