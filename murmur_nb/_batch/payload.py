"""A module's verified snapshot as bytes, shipped to a Dask worker and installed there.

A :class:`Payload` holds the snapshot the batch's plan names, never the live folder: each
entry's relative path, kind, executable bit and bytes (or a link's relative target), and the
module digest the batch was approved under. The worker trusts none of it: :func:`install`
writes the entries into a private ``0700`` home (one a killed worker does not leave
behind for good: :mod:`murmur_nb._files.scratch`), a host there snapshots and describes it with
the host's own rules, and a different module digest runs nothing (:class:`DigestRefused`,
``digest_mismatch``). Bounded by ``max_module_entries`` / ``max_module_bytes`` on both sides.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from murmur_nb._files.scratch import owned_folder

if TYPE_CHECKING:
    from murmur_nb._batch.plan import Plan
    from murmur_nb._modules.policy import Policy

__all__ = ["DigestRefused", "Payload", "install", "payload_of"]


class DigestRefused(Exception):
    """A shipped module does not hash to the digest it was shipped under."""

    code = "digest_mismatch"


@dataclass(frozen=True)
class Payload:
    """One module snapshot as plain data: ``entries`` are ``(rel, kind, executable, data)``,
    ``kind`` ``"D"`` (folder), ``"F"`` (file; ``data`` its bytes) or ``"L"`` (link; ``data``
    its relative target, UTF-8)."""

    name: str
    capability: str
    module_digest: str
    entries: tuple[tuple[str, str, bool, bytes], ...]

    @property
    def size(self) -> int:
        return sum(len(e[3]) for e in self.entries)

    @functools.cached_property
    def contents(self) -> str:
        """SHA-256 of the entries as shipped: what a worker caches its installed host under
        (never trusted as the module digest, which the worker recomputes)."""
        digest = hashlib.sha256()
        for rel, kind, executable, data in self.entries:
            digest.update(f"{kind}{int(executable)}{rel}\0{len(data)}\0".encode())
            digest.update(data)
        return digest.hexdigest()


def payload_of(plan: Plan, policy: Policy) -> Payload:
    """The plan's verified snapshot read into a :class:`Payload` (within the policy's budget)."""
    root = plan.snapshot
    entries: list[tuple[str, str, bool, bytes]] = []
    budget = policy.max_module_bytes
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                entries.append((rel, "L", False, str(path.readlink()).encode()))
            elif stat.S_ISDIR(st.st_mode):
                entries.append((rel, "D", False, b""))
            elif stat.S_ISREG(st.st_mode):
                budget -= st.st_size
                if budget < 0 or len(entries) >= policy.max_module_entries:
                    raise DigestRefused(f"the snapshot {root} is past the policy's module budget")
                entries.append((rel, "F", bool(st.st_mode & 0o111), path.read_bytes()))
    return Payload(root.name, plan.capability, plan.module_digest, tuple(entries))


def install(payload: Payload, policy: Policy) -> Path:
    """Write ``payload`` into a fresh private home; return the home (its ``modules/<name>``).

    The caller describes it with a host of that home and compares the module digest
    (:func:`murmur_nb._batch.cluster.worker_host` does).
    """
    if len(payload.entries) > policy.max_module_entries or payload.size > policy.max_module_bytes:
        raise DigestRefused(f"module {payload.name!r} as shipped is past the policy's budget")
    home = owned_folder("murmur-nb-worker-")  # a killed worker's home goes with the next one made
    folder = home / "modules" / payload.name
    folder.mkdir(parents=True)
    for rel, kind, executable, data in payload.entries:
        dest = folder / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise DigestRefused(f"module {payload.name!r} as shipped names {rel!r}, outside it")
        if kind == "D":
            dest.mkdir()
        elif kind == "L":
            dest.symlink_to(data.decode())
        else:
            dest.write_bytes(data)
            dest.chmod(0o755 if executable else 0o644)
    return home
