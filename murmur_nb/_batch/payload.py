"""A module's verified snapshot as bytes, shipped to a Dask worker and installed there.

A :class:`Payload` holds the snapshot the batch's plan names, never the live folder: each
entry's relative path, kind, executable bit and bytes (or a link's relative target), and the
module digest the batch was approved under. The worker trusts none of it: :func:`install`
writes the entries into a private ``0700`` home (one a killed worker does not leave
behind for good: :mod:`murmur_nb._files.scratch`), a host there snapshots and describes it with
the host's own rules, and a different module digest runs nothing (:class:`DigestRefused`,
``digest_mismatch``). Bounded by ``max_module_entries`` / ``max_module_bytes`` on both sides.

What is written stays in the home whatever the payload says (:func:`payload_problem`, checked
before anything is written): the name is a module id, each entry a relative path of plain
names, shipped once, in a folder the payload shipped before it. A link is written as a link
and never written through: an entry below a link (``lib`` a link to ``/etc``, then
``lib/cron.d/x``), or of a link's name, had a worker, root on a root worker, write wherever
the link led. A payload of the wrong shape is refused the same way, saying what is wrong,
and its half-made home goes at once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from murmur_nb._files.scratch import owned_folder, release
from murmur_nb._modules.catalog import is_module_id

if TYPE_CHECKING:
    from murmur_nb._batch.plan import Plan
    from murmur_nb._modules.policy import Policy

__all__ = ["DigestRefused", "Payload", "install", "payload_of", "payload_problem", "refuse_unfit"]


class DigestRefused(Exception):
    """A shipped module does not hash to the digest it was shipped under, or cannot be
    installed as shipped (:func:`payload_problem`)."""

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

    @functools.cached_property
    def size(self) -> int:
        """The bytes of the entries (files' and links' targets)."""
        return sum(len(e[3]) for e in self.entries)

    @functools.cached_property
    def problem(self) -> str | None:
        """:func:`payload_problem` of this payload, found once (a worker asks before each
        row)."""
        return payload_problem(self)

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


#: the shape of one entry, said when a payload's entry has another
_ENTRY_SHAPE = "(path, 'D' | 'F' | 'L', bool, bytes)"


def payload_problem(payload: Payload) -> str | None:
    """What makes ``payload`` unfit to install (said for a message), or ``None``: its name is
    not a module id, or an entry is not of the shape :class:`Payload` gives, names no plain
    relative path, is shipped twice, lies in no folder shipped before it, or is a link to
    nothing a path can name."""
    if not isinstance(payload.name, str) or not is_module_id(payload.name):
        return f"is named {payload.name!r}, not a module id"
    if not isinstance(payload.entries, tuple):
        return f"has entries that are not a tuple: {payload.entries!r:.120}"
    folders: set[str] = {""}
    seen: set[str] = set()
    for entry in payload.entries:
        problem = _entry_problem(entry, seen, folders)
        if problem is not None:
            return problem
        seen.add(entry[0])
        if entry[1] == "D":
            folders.add(entry[0])
    return None


def _entry_problem(entry: object, seen: set[str], folders: set[str]) -> str | None:
    """What is wrong with one entry, given the paths ``seen`` before it and the ``folders``
    among them, or ``None``."""
    if not (isinstance(entry, tuple) and len(entry) == 4 and isinstance(entry[0], str)
            and entry[1] in {"D", "F", "L"} and isinstance(entry[2], bool)
            and isinstance(entry[3], bytes)):  # fmt: skip
        return f"has an entry that is not {_ENTRY_SHAPE}: {entry!r:.120}"
    rel, kind, _, data = entry
    names = rel.split("/")
    if "\0" in rel or any(name in {"", ".", ".."} for name in names):
        return f"names {rel!r}, not a relative path inside the module folder"
    if rel in seen:
        return f"ships {rel!r} twice"
    parent = "/".join(names[:-1])
    if parent not in folders:
        return (f"puts {rel!r} in {parent!r}, which it did not ship as a folder before it "
                "(it is a link, a file or missing)")
    if kind == "L" and not _link_target(data):
        return f"ships {rel!r} as a link to {data!r:.120}, not a link target"
    return None


def _link_target(data: bytes) -> bool:
    """Whether ``data`` is a link target a path can name (UTF-8, not empty, no NUL)."""
    try:
        return bool(data) and "\0" not in data.decode()
    except UnicodeDecodeError:
        return False


def refuse_unfit(payload: Payload, policy: Policy) -> None:
    """Raise :class:`DigestRefused` when ``payload`` is unfit to install
    (:func:`payload_problem`) or past the policy's budget, saying what to do."""
    if payload.problem is not None:
        raise DigestRefused(
            f"the module shipped as {payload.name!r} {payload.problem}, so nothing was "
            "installed or run on this worker. A kernel ships only a module's verified "
            "snapshot: run the batch again from a kernel with this worker's murmur-nb version"
        )
    if len(payload.entries) > policy.max_module_entries or payload.size > policy.max_module_bytes:
        raise DigestRefused(f"module {payload.name!r} as shipped is past the policy's budget")


def install(payload: Payload, policy: Policy) -> Path:
    """Write ``payload`` into a fresh private home; return the home (its ``modules/<name>``).

    The caller describes it with a host of that home and compares the module digest
    (:func:`murmur_nb._batch.cluster.worker_host` does). A payload unfit to install or past
    the policy's budget is refused before anything is written (:func:`refuse_unfit`).
    """
    refuse_unfit(payload, policy)
    home = owned_folder("murmur-nb-worker-")  # a killed worker's home goes with the next one made
    try:
        _write(payload, home / "modules" / payload.name)
    except BaseException:
        release(home)
        raise
    return home


def _write(payload: Payload, folder: Path) -> None:
    """The entries of ``payload`` (checked: :func:`payload_problem`) written below
    ``folder``; nothing is written through a link, nor over an entry already there."""
    folder.mkdir(parents=True)
    for rel, kind, executable, data in payload.entries:
        dest = folder / rel
        if kind == "D":
            dest.mkdir()
        elif kind == "L":
            dest.symlink_to(data.decode())
        else:
            mode = 0o755 if executable else 0o644
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(dest, flags, mode), "wb") as out:
                out.write(data)
                os.fchmod(out.fileno(), mode)
