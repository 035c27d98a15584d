"""What a hostile module folder leaves for the host to discover, describe and snapshot.

Attacked: the files a module folder holds, which the kernel walks, checks and copies when it
lists the installed modules. A folder whose ``module`` is a link to nothing or a link loop
made ``host.modules()`` raise ``FileNotFoundError`` / ``OSError``: one broken folder hid
every module. (A folder tree a *running* module leaves is ``test_hostile_tree.py``'s.)
"""

from __future__ import annotations

import os
import re
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
