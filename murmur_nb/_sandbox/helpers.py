"""The sandbox's small C helpers (``drop.c``, ``reaper.c``), compiled once and kept safe.

Each is built with the machine's C compiler into ``<cache>/sandbox/<name>-<key>``, the key a
hash of its source and build flags; each way of building is tried in turn until one builds
and passes the helper's own check. A root kernel runs these before every module, so a
helper is used from the cache only when nobody else could have written it (the file and
every folder above it belong to this user or root and can be changed by nobody else:
:func:`murmur_nb._files.trust.nobody_else_can_write`, the rule every cache uses).
Otherwise (a cache another account owns or can write: ``sudo -E``, a root container whose
``HOME`` is a user's) it is built again into a fresh private folder for this process.

The compiler keeps its own files (``cc*.s``, ``cc*.o``) in that same folder, not in
``TMPDIR``: it opens them again by name, following links, so whoever could write ``TMPDIR``
(``sudo -E`` keeps a user's) could have it write into any file of root's, or assemble and
link their code into the helper root runs next.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from murmur_nb._files.scratch import process_folder
from murmur_nb._files.trust import nobody_else_can_write, tool_environment, trusted_folder
from murmur_nb._rules import cache_dir

__all__ = ["built", "folder"]


@functools.cache
def _private_folder() -> Path:
    """A folder of this process's alone (``0700``), removed when the process exits."""
    return process_folder("murmur-nb-helpers-")


def folder() -> Path:
    """``<cache>/sandbox`` (made ``0700``), or, if anyone else could write it or a folder
    above it, a fresh private folder of this process's."""
    return trusted_folder(cache_dir() / "sandbox", _private_folder)


def built(
    name: str,
    source: Path,
    builds: Sequence[Sequence[str]],
    works: Callable[[Path], bool],
) -> str | None:
    """The compiled ``source`` (``None`` without a C compiler, or when no build works)."""
    text = source.read_bytes()
    recipe = b"\0".join(b" ".join(f.encode() for f in flags) for flags in builds)
    key = hashlib.sha256(text + b"\0-O2\0" + recipe).hexdigest()[:16]
    target = cache_dir() / "sandbox" / f"{name}-{key}"
    if target.is_file() and nobody_else_can_write(target) and works(target):
        return str(target)
    cc = shutil.which("cc", path="/usr/bin:/bin") or shutil.which("gcc", path="/usr/bin")
    if cc is None:
        return None
    target = folder() / f"{name}-{key}"  # where nobody else can write
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    # the compiler's files there too; for a root kernel, nothing of an environment another
    # account may have handed over (gcc finds ``as`` and ``ld`` on PATH, obeys COMPILER_PATH)
    env = tool_environment(target.parent)
    for flags in builds:
        made = subprocess.run([cc, "-O2", *flags, "-o", str(partial), str(source)],
                              capture_output=True, check=False, timeout=60, env=env)  # fmt: skip
        if made.returncode == 0 and works(partial):
            partial.chmod(0o755)
            partial.replace(target)  # probed just now, as it was built
            return str(target)
    partial.unlink(missing_ok=True)
    return None
