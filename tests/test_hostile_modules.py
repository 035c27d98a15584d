"""What a hostile module folder leaves for the host to discover, describe and snapshot.

Attacked: the files a module folder holds, which the kernel walks, checks and copies when it
lists the installed modules. A folder whose ``module`` is a link to nothing or a link loop
made ``host.modules()`` raise ``FileNotFoundError`` / ``OSError``: one broken folder hid
every module. A folder holding a chain of 1,200 nested folders was accepted, and then broke
``host.map(..., client=)`` with ``RecursionError``. (A folder tree a *running* module leaves
is ``test_hostile_tree.py``'s.)
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import install

import murmur_nb as mnb

# --------------------------------------------------------------------------- discovery


def _break_executable(folder: Path, how: str) -> None:
    exe = folder / "module"
    exe.unlink()
    if how == "dangling":
        exe.symlink_to("nothing-here")
    elif how == "loop":
        (folder / "a").symlink_to("module")
        exe.symlink_to("a")
    else:
        os.mkfifo(exe)


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("dangling", "is a link that leads to no file (No such file or directory)"),
        ("loop", "is a link that leads to no file (Too many levels of symbolic links)"),
        ("fifo", "is a FIFO, not a file"),
    ],
)
def test_a_module_executable_that_is_no_file_is_listed_refused(
    tmp_path: Path, how: str, said: str
) -> None:
    """Before, a ``module`` link to nothing or a loop raised ``FileNotFoundError`` or
    ``OSError`` out of ``host.modules()``: one broken folder listed no module at all. A
    FIFO was said to be missing."""
    home = tmp_path / "home"
    install(home, "good")
    _break_executable(install(home, "broken"), how)
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host:
        infos = {info.id: info for info in host.modules()}
        assert infos["good"].ok
        (error,) = infos["broken"].errors
        assert error.detail == (
            f"{home / 'modules' / 'broken' / 'module'} {said}; install the module executable "
            "there"
        )
        with pytest.raises(mnb.InvalidDescriptor, match=re.escape(said)):
            host.invoke("broken.echo", {"count": 0})


def _nest(top: Path, depth: int) -> None:
    """``depth`` folders ``d``, each in the last, made through descriptors (no long path)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """An empty facet home; removed with coreutils ``rm`` afterwards (pytest's own removal of
    its temporary folders recurses, and a chain of 1,200 folders stopped it)."""
    home = tmp_path / "home"
    yield home
    subprocess.run(["rm", "-rf", str(home)], check=False, timeout=60)


def test_a_folder_chain_past_the_depth_limit_refuses_the_module(
    home: Path, tmp_path: Path
) -> None:
    """Before, a module folder holding 1,200 nested folders was described and ran, and then
    ``host.map(..., client=)`` raised ``RecursionError`` (``os.walk`` over the snapshot it
    ships to the Dask workers); past about 2,000 levels the folder was refused with a 4 KB
    ``File name too long`` path. Now the walk that lists the folder refuses it, before any
    byte is hashed or copied, naming the depth; 256 levels still run."""
    install(home, "good")
    _nest(install(home, "deep"), 1200)
    _nest(install(home, "nested"), 256)
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host:
        infos = {info.id: info for info in host.modules()}
        assert infos["good"].ok and infos["nested"].ok
        (error,) = infos["deep"].errors
        assert error.detail == (
            f"{home / 'modules' / 'deep'} nests folders more than 256 levels deep "
            "('d/d/d'/...): the host walks, hashes and copies the whole module folder, and no "
            "module needs that depth; remove or flatten that folder"
        )
        with pytest.raises(mnb.ModuleTooLarge, match="more than 256 levels deep") as err:
            host.invoke("deep.echo", {"count": 0})
        assert err.value.code == "module_too_large"
        assert host.invoke("nested.echo", {"count": 0}).ok
