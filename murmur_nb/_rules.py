"""Rules more than one part of murmur-nb applies, written once.

* :data:`PLAIN_ID_RE` — a module id, a context id: a plain name, never a path.
* :data:`DIGEST_RE` — ``sha256:`` and 64 lowercase hex digits, the one digest spelling.
* :func:`sha256_fd` / :func:`sha256_file` — the one way a file's bytes are hashed
  (streamed through a fixed 1 MiB buffer, so memory stays flat whatever the size).
* :func:`facet_studio_home` / :func:`murmur_home` — where the two homes are by default.
* :func:`compact_json` — compact UTF-8 JSON text of a value, written fast (orjson).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "DIGEST_RE",
    "BudgetSpent",
    "cache_dir",
    "compact_json",
    "HASH_BUFFER",
    "PLAIN_ID_RE",
    "facet_studio_home",
    "murmur_home",
    "sha256_fd",
    "sha256_file",
]

#: A plain name of 1 to 128 characters from ``A-Z a-z 0-9 . _ -``, starting with a letter
#: or a digit (match it in full).
PLAIN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

#: ``sha256:`` followed by exactly 64 lowercase hex digits (match it in full).
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")

HASH_BUFFER = 1 << 20


class BudgetSpent(Exception):
    """The time budget ran out before the work was done."""


def sha256_fd(fd: int, *, deadline: float | None = None) -> str:
    """Lowercase hex SHA-256 of ``fd`` from offset 0 (``pread``: the offset is untouched).

    Streamed through one reusable 1 MiB buffer. ``deadline`` is a :func:`time.monotonic`
    instant; past it :class:`BudgetSpent` is raised.
    """
    digest = hashlib.sha256()
    buf = bytearray(HASH_BUFFER)
    view = memoryview(buf)
    offset = 0
    while True:
        n = os.preadv(fd, [buf], offset)
        if not n:
            return digest.hexdigest()
        digest.update(view[:n])
        offset += n
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetSpent(f"stopped after {offset} bytes")


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Lowercase hex SHA-256 of the file at ``path`` (see :func:`sha256_fd`)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def cache_dir() -> Path:
    """The per-user cache directory of murmur-nb (created on first use): compiled hook
    components, module snapshots and the sandbox's helpers."""
    explicit = os.environ.get("MURMUR_NB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "murmur-nb"


def facet_studio_home() -> Path:
    """The modules' home: ``$FACET_STUDIO_HOME``, else ``~/.facet-studio``."""
    env = os.environ.get("FACET_STUDIO_HOME")
    return Path(env) if env else Path.home() / ".facet-studio"


def murmur_home() -> Path:
    """The murmur home: ``$MURMUR_HOME`` when set and non-empty, else ``~/.murmur``."""
    env = os.environ.get("MURMUR_HOME")
    return Path(env).expanduser() if env else Path.home() / ".murmur"


def compact_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON: orjson's, or (an integer wider than 64 bits, nesting
    deeper than orjson writes, a lone surrogate) the standard library's, with non-ASCII
    characters escaped; both write the same values. orjson writes a NaN as ``null``: give it
    values checked as strict JSON where that matters."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")
