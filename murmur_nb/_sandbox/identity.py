"""Who a module process runs as: never the kernel's root, whoever runs the kernel.

As an ordinary user the module keeps that uid inside bubblewrap's unprivileged user namespace.
When the kernel is root (Colab, Docker, CI), it runs as :func:`sandbox_id`, a uid and gid no
account uses, with no group and no capability: the host makes one user namespace per kernel
process mapping 0 to 0 (so bwrap can still bind root-owned folders) and the sandbox id to
itself, passes it with ``--userns``, and ``drop.c`` (compiled once with the machine's C
compiler; else ``env -i`` plus ``setpriv``, 1.5 ms slower) clears groups, switches ids, sets
no_new_privs and empties the environment in one exec. Folders made for one call are
``chown``-ed to the sandbox id; how it reaches a policy root is :mod:`.access`.

Each kernel process has its own sandbox id (a forked child takes its own), drawn at random
from ``0x70000000``-``0x7FFDFFFF``: above systemd's container range (524288-1879048191, which
``systemd-nspawn --private-users=pick`` allocates from) and shadow's subordinate ids
(100000-600100000 by default), below systemd's foreign range (``0x7FFE0000``) and the
values tools read as negative. A kernel holds its id (an owner-locked folder named after
it, :mod:`murmur_nb._files.scratch`) for as long as it lives, and no id a live kernel holds
is drawn: two kernels' modules are two users. Not derived from the process id: a kernel
killed with ``SIGKILL`` cannot take back what it gave its id (on a volume that outlives
the container, say), and a later kernel with the same process id would have inherited it.
"""

from __future__ import annotations

import errno
import functools
import grp
import hashlib
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import threading
from pathlib import Path

from murmur_nb._files import scratch
from murmur_nb._files.libc import libc
from murmur_nb._sandbox import helpers

__all__ = [
    "SANDBOX_NPROC",
    "SETPRIV",
    "device_folder",
    "drop_argv",
    "drop_helper",
    "hand_over",
    "is_root",
    "is_sandbox_id",
    "sandbox_id",
    "setpriv_argv",
    "userns_fd",
]

SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin") or "/usr/bin/setpriv"
_FIRST_ID = 0x70000000  # see the module's docstring
_LAST_ID = 0x7FFE0000  # systemd's foreign range starts here
#: ids drawn before giving up (each taken by an account or a live kernel: never, in practice)
_DRAWS = 64
_CLONE_NEWUSER = 0x10000000


def is_root() -> bool:
    """Whether the kernel runs as root (its module processes then change identity)."""
    return os.geteuid() == 0


def is_sandbox_id(uid: int) -> bool:
    """Whether ``uid`` is in the range sandbox ids are taken from (no account's)."""
    return _FIRST_ID <= uid < _LAST_ID


class _Drawn:
    """This process's sandbox id once drawn (a forked child draws its own)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.uid: int | None = None

    def forget(self) -> None:
        """In a forked child: a lock no thread holds, and no id yet."""
        self.lock = threading.Lock()
        self.uid = None


_DRAWN = _Drawn()


def sandbox_id() -> int:
    """This process's uid (and gid, the same number) for its modules, used by no account
    and held by no other live kernel; drawn once (threads asking at once get the same)."""
    uid = _DRAWN.uid
    if uid is not None:
        return uid
    with _DRAWN.lock:
        if _DRAWN.uid is None:
            _DRAWN.uid = _draw()
        return _DRAWN.uid


def _draw() -> int:
    """A random id of the range that no account, group or live kernel has, now held."""
    for _ in range(_DRAWS):
        candidate = _FIRST_ID + secrets.randbelow(_LAST_ID - _FIRST_ID)
        if not _named(candidate) and _hold(candidate):
            return candidate
    raise OSError(errno.EUSERS, "no free sandbox uid between 0x70000000 and 0x7FFE0000")


def _named(uid: int) -> bool:
    """Whether an account or a group has ``uid`` as its id."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except KeyError:
            continue
        return True
    return False


#: the name of a folder in the temporary folder that holds a uid for a live root kernel
_HOLDS = "murmur-nb-uid-"


def _hold(uid: int) -> bool:
    """Hold ``uid`` for this process unless a live kernel holds it (root kernels only: a
    user's kernel gives its modules no id of their own)."""
    if not is_root():
        return True
    prefix = f"{_HOLDS}{uid}-"
    try:
        # every dead kernel's hold goes, not only this uid's: a kernel killed with SIGKILL
        # (as nbval stops its kernels) left its own for good, one more with each kill
        scratch.sweep(_HOLDS)
        if any(scratch.temp_folder().glob(f"{prefix}*")):
            return False  # a live kernel's (or one being made)
        scratch.process_folder(prefix)
    except OSError:
        pass  # no temporary folder to hold it in: 1 in 268 million to meet another kernel
    return True


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
    """Whether the built helper runs a program: leaving root for the sandbox id on a root
    host, keeping the ids (``- -``) for an ordinary user."""
    ident = str(sandbox_id()) if is_root() else "-"
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


#: RLIMIT_NPROC of a sandbox under bwrap or the zygote (set by the drop helper, ``-n``).
#: The kernel counts it per uid *in the user namespace* (measured on Linux 6.18: a user with
#: 70 processes outside forks 78 under a limit of 80 in a fresh one, 9 without one), so it
#: bounds the sandbox's own processes, never the account's others: an ordinary user's bwrap
#: sandbox has a namespace of its own (512 per call); a root kernel's sandbox uid, and an
#: ordinary user's zygote, share the kernel's one namespace among its calls running at once.
SANDBOX_NPROC = 512


def drop_argv() -> list[str]:
    """What bwrap runs before the module: on a root host the drop helper (or env + setpriv),
    leaving root; for an ordinary user the helper keeping the ids (or ``env -i``), which
    empties the environment (bwrap sets ``PWD``) and closes every descriptor but 0-2. The
    helper also caps the sandbox's processes (:data:`SANDBOX_NPROC`)."""
    helper = drop_helper()
    limit = ["-n", str(SANDBOX_NPROC)]
    if not is_root():
        return [_ENV, "-i"] if helper is None else [helper, "-", "-", *limit]
    if helper is None:
        return [_ENV, "-i", *setpriv_argv()]
    ident = str(sandbox_id())
    return [helper, ident, ident, *limit]


@functools.cache
def device_folder(devices: tuple[str, ...]) -> str | None:
    """A root-owned ``0755`` folder holding ``devices`` as ``0666`` nodes (root hosts only).

    bwrap binds it at ``/dev`` in one mount instead of one per device (0.3 ms less per run).
    Made once in the cache with ``mknod`` (in a private folder instead when anyone else
    could write the cache, :func:`.helpers.folder`) and checked on first use: every node a
    character device of the same number as the host's, and the file system allowing device
    files. ``None`` where that does not hold (no ``CAP_MKNOD``, a ``nodev`` cache): one bind
    each.
    """
    if not is_root():
        return None
    try:
        wanted = {Path(dev).name: Path(dev).stat().st_rdev for dev in devices}
        key = hashlib.sha256(repr(sorted(wanted.items())).encode()).hexdigest()[:16]
        folder = helpers.folder() / f"dev-{key}"
        if not _devices_hold(folder, wanted):
            partial = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(mode=0o755, parents=True)
            partial.chmod(0o755)
            for name, rdev in wanted.items():
                os.mknod(partial / name, stat.S_IFCHR | 0o666, rdev)
                os.chmod(partial / name, 0o666)  # noqa: PTH101 - no umask
            try:
                partial.rename(folder)  # refused while a folder is there, made or not
            except OSError:
                if _devices_hold(folder, wanted):  # another kernel made it meanwhile: its
                    shutil.rmtree(partial, ignore_errors=True)  # sandboxes bind it now
                else:  # not what it must be (tampered with): made again
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


def _forget_in_child() -> None:
    """A forked child is another kernel process: its own sandbox id and user namespace
    (nothing is closed here: a ``preexec_fn`` child runs this too, about to pass the fd)."""
    _DRAWN.forget()
    _USERNS.clear()


os.register_at_fork(after_in_child=_forget_in_child)
