"""Who a module process runs as: never the kernel's root, whoever runs the kernel.

As an ordinary user the module keeps that uid inside bubblewrap's unprivileged user namespace.
When the kernel is root (Colab, Docker, CI), it runs as :func:`sandbox_id`, a uid and gid no
account uses, with no group and no capability: the host makes one user namespace per kernel
process mapping 0 to 0 (so bwrap can still bind root-owned folders) and the sandbox id to
itself, passes it with ``--userns``, and ``drop.c`` (compiled once with the machine's C
compiler; else ``env -i`` plus ``setpriv``, 1.5 ms slower) clears groups, switches ids, sets
no_new_privs and empties the environment in one exec. Folders made for one call are
``chown``-ed to the sandbox id; a policy root keeps its owner and gets a POSIX ACL entry
(``rwx`` on ``rw``, with a default entry; ``r-x`` on an ``ro`` root others cannot read),
never a chmod of the user's files.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import grp
import hashlib
import os
import pwd
import shutil
import stat
import struct
import subprocess
import threading
from pathlib import Path

from murmur_nb._rules import cache_dir
from murmur_nb._sandbox import helpers
from murmur_nb._sandbox.libc import libc

__all__ = [
    "ACL_BUDGET",
    "SETPRIV",
    "device_folder",
    "drop_argv",
    "drop_helper",
    "grant_passage",
    "grant_root",
    "hand_over",
    "is_root",
    "sandbox_id",
    "setpriv_argv",
    "userns_fd",
]

#: entries an ``rw`` root may hold for the host to extend its ACL (beyond it: top level only)
ACL_BUDGET = 20_000
SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin") or "/usr/bin/setpriv"
_FIRST_ID = 0x6D6E0000  # "mn": far above any distribution's account ranges
_CLONE_NEWUSER = 0x10000000


def is_root() -> bool:
    """Whether the kernel runs as root (its module processes then change identity)."""
    return os.geteuid() == 0


@functools.cache
def sandbox_id() -> int:
    """A uid (and gid, the same number) that no account or group on this machine uses."""
    candidate = _FIRST_ID
    while True:
        try:
            pwd.getpwuid(candidate)
        except KeyError:
            try:
                grp.getgrgid(candidate)
            except KeyError:
                return candidate
        candidate += 1


def setpriv_argv() -> list[str]:
    """The prefix that leaves root for :func:`sandbox_id` (in bwrap, right before the module)."""
    uid = str(sandbox_id())
    return [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


_DROP_SOURCE = Path(__file__).with_name("drop.c")
_ENV = shutil.which("env", path="/usr/bin:/bin") or "/usr/bin/env"


#: how ``drop.c`` is built, best first: without a C library (x86-64 and AArch64: no start-up
#: work, about 0.3 ms of CPU less per run than a static C library), static, dynamic
_DROP_BUILDS = (
    ("-static", "-nostdlib", "-ffreestanding", "-fno-stack-protector",
     "-fno-tree-loop-distribute-patterns", "-DDROP_NOLIBC"),
    ("-static",),
    (),
)


def _drop_works(path: Path) -> bool:
    """Whether the built helper leaves root and runs a program (here, as root)."""
    ident = str(sandbox_id())
    probe = subprocess.run([str(path), ident, ident, "/bin/true"], env={},
                           capture_output=True, check=False, timeout=10)  # fmt: skip
    return probe.returncode == 0


@functools.cache
def drop_helper() -> str | None:
    """The compiled ``drop.c`` (built once, :mod:`.helpers`), or ``None`` without a compiler.

    Each way of :data:`_DROP_BUILDS` is tried in turn until one builds and works: it runs
    before every module, so the cheapest start-up wins.
    """
    return helpers.built("drop", _DROP_SOURCE, _DROP_BUILDS, _drop_works)


def drop_argv() -> list[str]:
    """What bwrap runs before the module on a root host: the drop helper, or env + setpriv."""
    helper = drop_helper()
    if helper is None:
        return [_ENV, "-i", *setpriv_argv()]
    ident = str(sandbox_id())
    return [helper, ident, ident]


@functools.cache
def device_folder(devices: tuple[str, ...]) -> str | None:
    """A root-owned ``0755`` folder holding ``devices`` as ``0666`` nodes (root hosts only).

    bwrap binds it at ``/dev`` in one mount instead of one per device (0.3 ms less per run).
    Made once in the cache with ``mknod`` and checked on first use: every node a character
    device of the same number as the host's, and the file system allowing device files.
    ``None`` where that does not hold (no ``CAP_MKNOD``, a ``nodev`` cache): one bind each.
    """
    if not is_root():
        return None
    try:
        wanted = {Path(dev).name: Path(dev).stat().st_rdev for dev in devices}
        key = hashlib.sha256(repr(sorted(wanted.items())).encode()).hexdigest()[:16]
        folder = cache_dir() / "sandbox" / f"dev-{key}"
        if not _devices_hold(folder, wanted):
            partial = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(mode=0o755, parents=True)
            partial.chmod(0o755)
            for name, rdev in wanted.items():
                os.mknod(partial / name, stat.S_IFCHR | 0o666, rdev)
                os.chmod(partial / name, 0o666)  # noqa: PTH101 - no umask
            shutil.rmtree(folder, ignore_errors=True)
            partial.replace(folder)
            if not _devices_hold(folder, wanted):
                return None
        fd = os.open(folder / "null", os.O_WRONLY | os.O_CLOEXEC)  # EACCES on a nodev mount
        os.close(fd)
    except OSError:
        return None
    return str(folder)


def _devices_hold(folder: Path, wanted: dict[str, int]) -> bool:
    """The folder holds exactly ``wanted``: root's, nothing else writable, no other entry."""
    try:
        st = os.lstat(folder)
        names = sorted(entry.name for entry in folder.iterdir())
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or stat.S_IMODE(st.st_mode) != 0o755:
        return False
    if names != sorted(wanted):
        return False
    for name, rdev in wanted.items():
        node = os.lstat(folder / name)
        if (not stat.S_ISCHR(node.st_mode) or node.st_rdev != rdev or node.st_uid != 0
                or stat.S_IMODE(node.st_mode) != 0o666 or node.st_nlink != 1):
            return False
    return True


_USERNS: list[int] = []
_USERNS_LOCK = threading.Lock()


def userns_fd() -> int:
    """A user namespace mapping 0 to 0 and :func:`sandbox_id` to itself (made once, root only).

    Kept open for the life of the kernel process and passed to every bwrap (``--userns``).
    """
    with _USERNS_LOCK:
        if not _USERNS:
            _USERNS.append(_make_userns())
        return _USERNS[0]


def _make_userns() -> int:
    unshare = libc().unshare

    def enter() -> None:  # in the child, before exec: one system call, nothing imported
        if unshare(_CLONE_NEWUSER) != 0:
            os._exit(127)

    holder = subprocess.Popen(
        ["/bin/cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env={},
        preexec_fn=enter,  # noqa: PLW1509 - one prebuilt ctypes call, safe after fork
    )
    try:
        ident = sandbox_id()
        mapping = f"0 0 1\n{ident} {ident} 1\n"
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{holder.pid}/{name}").write_text(mapping)
        return os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()


def hand_over(folder: Path) -> None:
    """Give a folder the host made for one call to the sandbox id (root hosts only)."""
    if is_root():
        os.chown(folder, sandbox_id(), sandbox_id())


# POSIX ACL extended attributes (linux/posix_acl_xattr.h): a version, then tag/perm/id
_ACL_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_ACCESS, _DEFAULT = "system.posix_acl_access", "system.posix_acl_default"


def _read_acl(fd: int, name: str, mode: int) -> dict[tuple[int, int], int]:
    try:
        raw = os.getxattr(fd, name)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
            raise
        raw = b""
    entries: dict[tuple[int, int], int] = {}
    for tag, perm, ident in struct.iter_unpack("<HHI", raw[4:]):
        entries[(tag, ident if tag in (_USER, _GROUP) else 0xFFFFFFFF)] = perm
    if not entries and name == _ACCESS:
        entries = {(_USER_OBJ, 0xFFFFFFFF): (mode >> 6) & 7,
                   (_GROUP_OBJ, 0xFFFFFFFF): (mode >> 3) & 7, (_OTHER, 0xFFFFFFFF): mode & 7}
    return entries


def _effective(entries: dict[tuple[int, int], int], uid: int) -> int:
    """What a named-user entry grants once the mask (which a later chmod sets) applies."""
    return entries.get((_USER, uid), 0) & entries.get((_MASK, 0xFFFFFFFF), 7)


def _with_user(entries: dict[tuple[int, int], int], uid: int, perm: int,
               base: dict[tuple[int, int], int]) -> bytes:
    out = dict(base) | entries
    out[(_USER, uid)] = perm
    group_class = [p for (tag, _), p in out.items() if tag in (_USER, _GROUP, _GROUP_OBJ)]
    out[(_MASK, 0xFFFFFFFF)] = functools.reduce(lambda a, b: a | b, group_class, 0)
    body = b"".join(struct.pack("<HHI", tag, perm_, ident)
                    for (tag, ident), perm_ in sorted(out.items()))
    return struct.pack("<I", _ACL_VERSION) + body


def _grant_fd(fd: int, st: os.stat_result, uid: int, perm: int, default: bool) -> None:
    access = _read_acl(fd, _ACCESS, st.st_mode)
    if _effective(access, uid) & perm != perm:
        os.setxattr(fd, _ACCESS, _with_user(access, uid, perm, {}))
    if default and stat.S_ISDIR(st.st_mode):
        current = _read_acl(fd, _DEFAULT, st.st_mode)
        if _effective(current, uid) & perm != perm:
            os.setxattr(fd, _DEFAULT, _with_user(current, uid, perm, access))


def _reachable(st: os.stat_result, uid: int, write: bool) -> bool:
    if st.st_uid == uid:
        return True
    need = (stat.S_IROTH | stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else stat.S_IROTH)
    return not write and st.st_mode & need == need


def grant_root(path: str, *, write: bool) -> str:
    """Let the sandbox id use a policy-mapped root (root hosts only); a problem, or ``""``.

    An ``rw`` root and every folder and file in it (up to :data:`ACL_BUDGET` entries) get
    ``rwx``/``rw-`` for the sandbox id, folders also as their default; an ``ro`` root that
    others cannot read gets ``r-x``/``r--`` the same way. Links are never followed. The tree
    is walked once per kernel process and root folder; later calls check the root folder
    itself (what is created in an ``rw`` root later inherits the default entry).
    """
    if not is_root():
        return ""
    uid = sandbox_id()
    seen = 0
    pending = [path]
    try:
        top = os.lstat(path)
        key = (top.st_dev, top.st_ino, write)
        if key in _WALKED:
            seen = ACL_BUDGET  # walked already: the root folder alone
        while pending:
            current = pending.pop()
            kind = stat.S_IFMT(os.lstat(current).st_mode)
            if kind not in (stat.S_IFDIR, stat.S_IFREG):
                continue  # a socket, fifo, device or link: never opened
            fd = os.open(current, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                is_dir = stat.S_ISDIR(st.st_mode)
                if not _reachable(st, uid, write):
                    perm = (7 if is_dir else 6) if write else (5 if is_dir else 4)
                    _grant_fd(fd, st, uid, perm, default=write)
            finally:
                os.close(fd)
            if is_dir and seen < ACL_BUDGET:
                with os.scandir(current) as it:
                    for entry in it:
                        seen += 1
                        if not entry.is_symlink():
                            pending.append(entry.path)
    except OSError as exc:
        return (
            f"the sandbox uid {uid} cannot be given access to {path} ({exc.strerror}); as "
            f"root, modules run as uid {uid}: make the root {'writable' if write else 'readable'}"
            f" for it (chown {uid} or setfacl -m u:{uid}:{'rwx' if write else 'rx'})"
        )
    _WALKED.add(key)
    return ""


#: (device, inode, write) of the roots whose whole tree :func:`grant_root` has walked
_WALKED: set[tuple[int, int, bool]] = set()


def grant_passage(path: str, *, uid: int | None = None) -> None:
    """Let the sandbox id (or ``uid``) pass through each folder above ``path`` (``--x``).

    Only for confinement without a mount namespace (Landlock), where the module reaches its
    files by their real paths: passing through a folder lists nothing, and Landlock still
    refuses every path it was not given.
    """
    if not is_root():
        return
    uid = sandbox_id() if uid is None else uid
    for parent in reversed(Path(path).parents):
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
                access = _read_acl(fd, _ACCESS, st.st_mode)
                if not _effective(access, uid) & 1:
                    os.setxattr(fd, _ACCESS, _with_user(access, uid, 1, {}))
        finally:
            os.close(fd)


def close_userns() -> None:
    """Close the kept user namespace (tests that probe a fresh one)."""
    with _USERNS_LOCK:
        while _USERNS:
            with contextlib.suppress(OSError):
                os.close(_USERNS.pop())
