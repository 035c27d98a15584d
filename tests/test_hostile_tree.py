"""A module leaves a folder tree deeper than Python's tree walkers recurse.

A module's working folder is removed after its call, and a killed kernel's runs folder by the
next kernel that makes one (:mod:`murmur_nb._files.scratch`). Both went through ``os.fwalk``
and ``shutil.rmtree``, which recurse a level at a time: the ``nester`` fixture's 3,000 nested
folders raised ``RecursionError`` out of ``invoke`` (the call's answer lost, the tree left in
the runs folder), and a runs folder left holding such a tree raised it out of every later
kernel's first ``describe`` or ``invoke`` on the machine, whoever ran it. Each test makes the
tree for real and looks at the disk afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _modules import install

import murmur_nb as mnb
from murmur_nb._files import scratch  # private: the folders a killed kernel leaves

DEPTH = 3000


def nest(top: Path, depth: int) -> None:
    """``depth`` folders, each in the last, a file in each; made through descriptors (a path
    of 3,000 levels is longer than the kernel takes)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(depth):
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o400, dir_fd=fd))
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        if level:
            os.fchmod(fd, 0o500)  # read-only once made, as a snapshot's folders are
        os.close(fd)
        fd = below
    os.fchmod(fd, 0o500)
    os.close(fd)


def open_descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def test_a_tree_deeper_than_python_recurses_is_removed_and_nothing_outside(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("kept")
    top = tmp_path / "tree"
    top.mkdir()
    nest(top, 5000)
    (top / "link").symlink_to(outside, target_is_directory=True)
    (top / "wide").mkdir()
    for i in range(300):
        (top / "wide" / f"f{i}").write_text("x")
    before = open_descriptors()
    scratch.remove_tree(top)
    assert not top.exists()
    assert (outside / "kept").read_text() == "kept"
    assert open_descriptors() == before
    link = tmp_path / "a-link"
    link.symlink_to(outside, target_is_directory=True)
    scratch.remove_tree(link)  # a link is no tree of its own: neither followed nor removed
    assert link.is_symlink() and (outside / "kept").exists()


@pytest.fixture
def nester_home(facet_home: Path) -> Path:
    install(facet_home, "nester", "nester")
    return facet_home


def test_a_modules_deep_tree_neither_fails_its_call_nor_stays(nester_home: Path) -> None:
    """Unconfined (``sandbox="off"``, as a container with no namespaces runs it when the
    policy allows): the working folder is on the disk. Before: ``RecursionError``."""
    with mnb.ModuleHost(home=nester_home, policy=mnb.Policy(sandbox="off")) as host:
        inv = host.invoke("nester.nest", {"depth": DEPTH})
        assert inv.ok, inv.error
        assert inv.result == {"made": DEPTH}
        runs = host._workspace.runs_dir()  # private: where its working folders were made
        assert [p.name for p in runs.iterdir() if p.name.startswith("cwd-")] == []
        assert host.invoke("nester.nest", {"depth": 2}).ok


KILLED = """\
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from test_hostile_tree import nest
from murmur_nb._files import scratch
folder = scratch.owned_folder("murmur-nb-runs-")
work = folder / "cwd-left"
work.mkdir()
nest(work, int(sys.argv[1]))
print(folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_kernels_deep_tree_does_not_stop_the_next_kernel(nester_home: Path) -> None:
    """A kernel killed while its module's tree is in its runs folder: the next kernel's first
    call sweeps it. Before: that call, and every later kernel's, raised ``RecursionError``."""
    done = subprocess.run([sys.executable, "-c", KILLED, str(DEPTH), str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    left = Path(done.stdout.strip())
    assert (left / "cwd-left" / "d" / "d").is_dir()
    with mnb.ModuleHost(home=nester_home, policy=mnb.Policy(sandbox="off")) as host:
        assert host.invoke("nester.nest", {"depth": 2}).ok
    assert not left.exists()
