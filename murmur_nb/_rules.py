"""Rules more than one part of murmur-nb applies, written once.

* :data:`PLAIN_ID_RE` — a module id, a context id: a plain name, never a path.
* :data:`DIGEST_RE` — ``sha256:`` and 64 lowercase hex digits, the one digest spelling.
* :func:`sha256_fd` / :func:`sha256_file` — the one way a file's bytes are hashed
  (streamed through a fixed 1 MiB buffer, so memory stays flat whatever the size).
* :func:`read_bounded` — the one way a file someone names (a ``murmur.yaml``, a hook
  component, a ``--policy`` file) is read whole: a regular file, at most so many bytes.
* :func:`facet_studio_home` / :func:`murmur_home` — where the two homes are by default.
* :func:`cache_dir` / :func:`env_folder` — where the cache is; how a folder named by an
  environment variable is read (``~`` expanded, a relative path made absolute once).
* :func:`compact_json` — compact UTF-8 JSON text of a value, written fast (orjson).
* :data:`RFC3339_RE` / :func:`rfc3339_instant` — what an RFC 3339 time is (a record's
  ``created_at``, a timeline's ``start``), for the writer, the reader and the renderer alike.
* :func:`usable_cores` — how many cores' worth of work this process should start at once
  (its affinity, capped by a container's CPU quota).
* :func:`escape_control` / :func:`escape_bidi` — what a module, a guest or a record wrote,
  shown: control characters (but newline and tab) and bidirectional overrides as escapes.
* :func:`clipped` — what a module wrote, cut to a label's length before it is shown.
* :func:`printable_json` — JSON text a terminal shows as it is (the ``murmur-nb`` output).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import stat
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "DIGEST_RE",
    "BudgetSpent",
    "cache_dir",
    "clipped",
    "compact_json",
    "env_folder",
    "escape_bidi",
    "escape_control",
    "HASH_BUFFER",
    "LABEL_CHARS",
    "LONE_SURROGATE",
    "NotReadable",
    "PLAIN_ID_CHARS",
    "PLAIN_ID_RE",
    "RFC3339_RE",
    "facet_studio_home",
    "file_kind",
    "murmur_home",
    "one_line",
    "printable",
    "printable_json",
    "read_bounded",
    "readable",
    "rfc3339_instant",
    "sha256_fd",
    "sha256_file",
    "usable_cores",
    "whole_number",
]

#: A plain name of 1 to 128 characters from ``A-Z a-z 0-9 . _ -``, starting with a letter
#: or a digit (match it in full).
PLAIN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: The longest name :data:`PLAIN_ID_RE` takes.
PLAIN_ID_CHARS = 128

#: ``sha256:`` followed by exactly 64 lowercase hex digits (match it in full).
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")

#: An RFC 3339 date-time (section 5.6; match it in full): a date, ``T`` (or ``t``, or a
#: space, which the RFC allows readers to take), a time with seconds and an optional
#: fraction, then ``Z`` (or ``z``) or an offset. ISO 8601 forms it leaves out (a week date,
#: a comma before the fraction, no zone at all) do not match: a time without its zone is
#: no instant. Digits are ASCII (Python's ``\d`` takes any Unicode digit, Arabic-Indic or
#: fullwidth, which no RFC 3339 reader does).
RFC3339_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def rfc3339_instant(text: str) -> datetime | None:
    """The aware ``datetime`` an RFC 3339 string names, or ``None`` when it is none: not of
    the form (:data:`RFC3339_RE`), or a value no calendar day holds (a month 13, or a leap
    second ``:60``, which neither Python nor pandas can represent).

    >>> rfc3339_instant("2026-01-02t03:04:05.5z").isoformat()
    '2026-01-02T03:04:05.500000+00:00'
    >>> rfc3339_instant("2026-01-02T03:04:05") is None  # no zone: no instant
    True
    """
    if RFC3339_RE.fullmatch(text) is None:
        return None
    try:
        return datetime.fromisoformat(text.upper())
    except ValueError:
        return None


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
    """Lowercase hex SHA-256 of the regular file at ``path`` (see :func:`sha256_fd`); a FIFO
    (whose open would wait for a writer), a device (``/dev/zero`` never ends) or a socket is
    :class:`NotReadable`, found without waiting."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        _refuse_unless_regular(os.fstat(fd))
        return sha256_fd(fd)
    finally:
        os.close(fd)


class NotReadable(ValueError):
    """A file named to be read whole that is no regular file, or is larger than its bound;
    the message (``it is a FIFO, not a regular file``) says which; the caller puts the file's
    name and the fix around it."""


_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}  # fmt: skip


def file_kind(st: os.stat_result) -> str:
    """What the file ``st`` describes is, for a message: ``"a regular file"``, ``"a FIFO"``,
    ``"a character device"``, ``"a folder"``..."""
    if stat.S_ISREG(st.st_mode):
        return "a regular file"
    return _KINDS.get(stat.S_IFMT(st.st_mode), "not a file")


def _refuse_unless_regular(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotReadable(f"it is {file_kind(st)}, not a regular file")


def read_bounded(path: str | os.PathLike[str], most: int, *, regular: bool = True) -> bytes:
    """The bytes of the file at ``path``, at most ``most`` of them, read from one descriptor.

    A file someone names may be a FIFO, whose open waits for a writer that never comes,
    ``/dev/zero`` (or a link to it), which never ends, or a sparse file of terabytes: read
    whole, each hung the caller or took the machine's memory. With ``regular`` (the default)
    the open does not wait (``O_NONBLOCK``) and anything but a regular file is refused;
    without it (a command's ``--input-file <(...)``, a pipe) the open waits as ``cat``'s
    would, and the read still stops one byte past ``most``.

    Raises
    ------
    OSError
        The file cannot be opened or read.
    NotReadable
        It is not a regular file (with ``regular``), or holds more than ``most`` bytes.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | (os.O_NONBLOCK if regular else 0))
    try:
        st = os.fstat(fd)
        if regular:
            _refuse_unless_regular(st)
        if stat.S_ISREG(st.st_mode) and st.st_size > most:
            raise NotReadable(f"it is {st.st_size:,} bytes, more than the {most:,} it may be")
        chunks: list[bytes] = []
        got = 0
        while got <= most:
            chunk = os.read(fd, min(HASH_BUFFER, most + 1 - got))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            got += len(chunk)
        raise NotReadable(f"it holds more than the {most:,} bytes it may be")
    finally:
        os.close(fd)


#: ``(variable, value)`` -> the absolute folder it named at its first use in this process
_FIRST_USE: dict[tuple[str, str], Path] = {}


def env_folder(variable: str) -> Path | None:
    """The folder ``$variable`` names, or ``None`` when it is unset or empty.

    ``~`` is expanded, and a relative path is made absolute once, against the working folder
    of its first use in this process, and kept so: a notebook that changes folder later keeps
    the same cache and keys, and what is handed to another process (a sandbox's bind
    sources, a worker) never depends on that process's working folder. (A root host's
    bubblewrap was given ``relc/sandbox/...`` and refused every module.)
    """
    value = os.environ.get(variable)
    if not value:
        return None
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    return _FIRST_USE.setdefault((variable, value), Path.cwd() / path)


def cache_dir() -> Path:
    """The per-user cache directory of murmur-nb (created on first use): compiled hook
    components, module snapshots and the sandbox's helpers.

    ``$MURMUR_NB_CACHE``, else ``$XDG_CACHE_HOME/murmur-nb``, else ``~/.cache/murmur-nb``;
    a relative value is made absolute at its first use (:func:`env_folder`)."""
    explicit = env_folder("MURMUR_NB_CACHE")
    if explicit is not None:
        return explicit
    xdg = env_folder("XDG_CACHE_HOME")
    return (xdg if xdg is not None else Path.home() / ".cache") / "murmur-nb"


def facet_studio_home() -> Path:
    """The modules' home: ``$FACET_STUDIO_HOME`` when set and non-empty (``~`` expanded),
    else ``~/.facet-studio``."""
    env = os.environ.get("FACET_STUDIO_HOME")
    return Path(env).expanduser() if env else Path.home() / ".facet-studio"


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


def usable_cores(cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup") -> int:
    """How many cores' worth of CPU this process may use, at least 1: the cores it may run on
    (its affinity), and no more than its cgroup's CPU quota, rounded up.

    A container is often given a quota, not cores: a pod limited to 1 CPU on a 64-core node
    sees 64 cores in its affinity, and work sized by that would start 64 times what the
    quota runs at once. The quota is read where Docker and Kubernetes set it, for cgroup v2
    (``cpu.max`` of this process's cgroup and each one above it that is visible) and v1
    (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of the ``cpu`` controller's); the smallest
    counts. Anything unreadable counts as no quota.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota(Path(cgroup_root))
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def _cgroup_quota(root: Path) -> float | None:
    """The smallest CPU quota (in cores) over this process's cgroups, ``None`` for none."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    found: list[float] = []
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if controllers == "":  # v2: "0::/path", files beside the hierarchy's root
            found += _quotas(root, path, _v2_quota)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own hierarchy
            for mount in (root / "cpu", root / "cpu,cpuacct", root / "cpuacct,cpu"):
                if mount.is_dir():
                    found += _quotas(mount, path, _v1_quota)
                    break
    return min(found) if found else None


def _quotas(mount: Path, path: str, read: Any) -> list[float]:
    """The quotas ``read`` finds in the cgroup at ``path`` under ``mount`` and each one above
    it (inside a container's cgroup namespace, its own is ``/``)."""
    out = []
    folder = mount / path.strip("/")
    while True:
        with contextlib.suppress(OSError, ValueError, ZeroDivisionError):
            quota = read(folder)
            if quota is not None and quota > 0:
                out.append(quota)
        if folder == mount or mount not in folder.parents:
            return out
        folder = folder.parent


def _v2_quota(folder: Path) -> float | None:
    """``cpu.max``: ``"<quota> <period>"`` in microseconds, or ``"max <period>"``."""
    quota, period = (folder / "cpu.max").read_text(encoding="ascii").split()[:2]
    return None if quota == "max" else int(quota) / int(period)


def _v1_quota(folder: Path) -> float | None:
    quota = int((folder / "cpu.cfs_quota_us").read_text(encoding="ascii"))
    period = int((folder / "cpu.cfs_period_us").read_text(encoding="ascii"))
    return None if quota < 0 else quota / period


#: the bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069):
#: a right-to-left override makes ``invoice_\u202egnp.exe`` show as ``invoice_exe.png``, and
#: one left open reorders what follows it (CVE-2021-42574, "Trojan Source"). The marks
#: (U+200E, U+200F, U+061C) move no text that is there and are left to right-to-left text.
_BIDI = "\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
_BIDI_ONLY = re.compile(f"[{_BIDI}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: A UTF-16 surrogate on its own: Python text (from a JSON ``\\ud800`` escape) that has no
#: UTF-8 form, so no WIT string, no digest of canonical JSON and no notebook display.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: characters checked at a time for a lone surrogate (a rendering's HTML may be 32 MiB)
_STEP = 1 << 20


def readable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``): it cannot be
    encoded, so a display (or a notebook saved, or a traceback sent) holding it fails."""
    if text.isascii():
        return text
    for start in range(0, len(text), _STEP):
        try:  # a slice at a time: no second copy of a whole page to find none
            text[start : start + _STEP].encode("utf-8")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def escape_control(text: str) -> str:
    """``text`` with every control character but newline and tab escaped (``\\x1b``), and
    every bidirectional embedding, override and isolate (``\\u202e``)."""
    return _CONTROL.sub(_escaped, text.replace("\r\n", "\n"))


def printable(text: str) -> str:
    """:func:`readable` ``text`` with every control character but newline and tab escaped
    (``\\x1b``), so a module's text cannot clear the reader's terminal, retitle it or move
    its cursor when it is shown as ``text/plain`` (or in a traceback)."""
    return escape_control(readable(text))


#: what JSON text leaves raw of :data:`_CONTROL` (DEL and the C1 controls: ``\x9b`` is a
#: CSI, as ``\x1b[`` is, to a terminal that reads C1), and lone surrogates (no UTF-8 form)
_JSON_UNSHOWN = re.compile(f"{_CONTROL.pattern}|[\ud800-\udfff]")


def _json_escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable_json(
    value: Any, *, indent: int | None = None, separators: tuple[str, str] | None = None
) -> str:
    r"""``value`` as JSON text with non-ASCII characters kept, that shows as it is on a
    terminal: the control characters JSON allows raw in a string (DEL, ``\x80`` to ``\x9f``),
    the bidirectional overrides (:func:`escape_control`'s) and lone surrogates are written
    as ``\u`` escapes, so a JSON reader reads the same value and a terminal acts on none.

    >>> printable_json(["caf\u00e9 \x9b2J \u202e"])
    '["café \\u009b2J \\u202e"]'
    """
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=False)
    return _JSON_UNSHOWN.sub(_json_escaped, text)


def escape_bidi(text: str) -> str:
    """``text`` with every bidirectional embedding, override and isolate written as its
    escape (``\\u202e``): what HTML shows of a module's or a guest's text is in the order it
    is in. Other characters, control characters included, are left as they are."""
    return text if text.isascii() else _BIDI_ONLY.sub(_escaped, text)


#: characters of a label, a key, a caption or a cell a module wrote that a card shows
LABEL_CHARS = 200


def clipped(text: str, chars: int = LABEL_CHARS) -> str:
    """``text`` cut to ``chars`` characters, ending in ``…`` when it was cut.

    Every renderer cuts what a module wrote *before* escaping it: escaping makes one ``'``
    six bytes, and a label may be repeated (a tooltip and the text), so a few MB of quotes
    built hundreds of MB of HTML before the rendering's total was checked. A message naming
    what a module declared cuts it too: one problem per skill a capability lists, each
    naming the capability, made megabytes of id into gigabytes of messages.
    """
    return text if len(text) <= chars else text[:chars] + "…"


def one_line(text: str, chars: int = LABEL_CHARS) -> str:
    """``text`` on one line (each run of whitespace, newlines included, one space), at most
    ``chars`` characters, the last an ``…`` when it was cut. Only the head of a long text
    is looked at: a 16 MiB error is not split whole to show 300 characters of it."""
    head = text[: chars * 8 + 1]
    line = " ".join(head.split())
    if len(line) <= chars and len(head) == len(text):
        return line
    return line[: chars - 1] + "…"


def whole_number(
    variable: str, default: int, unit: str, kept: str, most: int | None = None,
    *, category: type[Warning] = UserWarning,
) -> int:  # fmt: skip
    """``$variable`` as a whole number of at least 1, else ``default`` (unset or empty); a
    value that is not one (``abc``, ``0.5``, ``0``, ``-1``) is warned about (``category``;
    the hooks' variables warn with :class:`~murmur_nb.HookConfigWarning`) and ``default``
    kept: a variable mistyped in a deployment must not stop every kernel's hooks or modules.
    ``kept`` says, in the warning, what goes on with the default meanwhile. A number past
    ``most`` (what the OS call it ends in takes) is warned about too, and ``most`` used."""
    value = os.environ.get(variable, "")
    if not value.strip():
        return default
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        warnings.warn(
            f"${variable}={value!r} is not a bound: it takes a whole number of {unit}, at "
            f"least 1 ({kept} the default, {default:,} {unit}, meanwhile); fix or unset it",
            category,
            stacklevel=3,
        )
        return default
    if most is not None and count > most:
        warnings.warn(
            f"${variable}={value!r} is more than the most it takes, {most:,} {unit} "
            f"({kept} that meanwhile); lower it, or unset it for the default, {default:,}",
            category,
            stacklevel=3,
        )
        return most
    return count
