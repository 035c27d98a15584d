"""Install the fixture modules of ``tests/modules/`` into a temporary facet-studio home.

Modules run with an empty environment, so there is no ``PATH``: each fixture becomes an
executable ``module`` file whose shebang names this interpreter by absolute path (``-S``
skips ``site``: the fixtures use the standard library only, and start faster).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "modules"


def install(
    home: Path, module_id: str, fixture: str = "plain", *, descriptor: dict[str, Any] | None = None
) -> Path:
    """Install fixture ``fixture`` as module ``module_id`` under ``home``; return its folder."""
    folder = home / "modules" / module_id
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / "_proto.py", folder / "_proto.py")
    exe = folder / "module"
    exe.write_text(f"#!{sys.executable} -S\n" + (FIXTURES / f"{fixture}.py").read_text())
    exe.chmod(0o755)
    if descriptor is not None:
        write_descriptor(folder, descriptor)
    return folder


def write_descriptor(folder: Path, descriptor: dict[str, Any]) -> None:
    (folder / "descriptor.json").write_text(json.dumps(descriptor))


def default_descriptor(home: Path, module_id: str) -> dict[str, Any]:
    """The fixture's own descriptor, as its ``describe`` prints it."""
    import subprocess

    out = subprocess.run(
        [str(home / "modules" / module_id / "module"), "describe"],
        capture_output=True,
        env={},
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)["result"]
    return result


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in {"Z", "X"}


def read_pids(folder: Path, roles: list[str], timeout: float = 5.0) -> dict[str, int]:
    """Wait until every ``<role>.pid`` exists in ``folder`` and return the pids."""
    end = time.monotonic() + timeout
    while True:
        found = {r: folder / f"{r}.pid" for r in roles}
        if all(p.exists() for p in found.values()):
            return {r: int(p.read_text()) for r, p in found.items()}
        if time.monotonic() > end:
            missing = [r for r, p in found.items() if not p.exists()]
            present = sorted(p.name for p in folder.iterdir())
            raise AssertionError(f"pid files never appeared: {missing} in {present}")
        time.sleep(0.01)
