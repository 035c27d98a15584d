"""A sandbox parent made once per kernel process that forks each call's sandbox (``zygote.c``).

bubblewrap makes every sandbox from nothing: it executes itself, sets up a user namespace
(or joins the kernel's), mounts a dozen trees and tears them down, about two thirds of a
sandboxed call's CPU. Chromium's zygote is the model: the part that is the same for every
call is made once (the user namespace, a mount namespace of its own), and each call is a
``clone`` into new mount, PID, IPC and UTS namespaces whose file system is laid out from the
*same* bwrap options the host plans (:func:`~murmur_nb._sandbox.sandbox.launch`): one plan,
two ways to carry it out, and an option the zygote does not know runs bwrap instead. The
seccomp program, the drop helper (which leaves root for the sandbox id) and the empty
environment are the same as under bwrap; the differences are written in ``zygote.c``.

What holds, and how:

- **Only the kernel talks to it.** Its control socket is one end of a socket pair the
  kernel made; the other end never reaches a module (every descriptor but 0-2 is closed
  before a module runs). End of file on it (the kernel closed the host, or died, ``kill
  -9`` too) kills every call and ends the zygote. A forked kernel process forgets its
  parent's zygote and makes its own.
- **The zygote runs each call to its end** (:meth:`Zygote.drive`): the request goes in
  the call's message (a large one in a sealed ``memfd``), and the
  zygote (C, one ``poll`` over every call) writes it to the module's standard input, reads
  its output up to the bound, keeps the end of its error, kills it at the deadline or at the
  bound, and answers once with how it ended and what it printed. The kernel's part of a
  call is one message out and one back, about half the CPU of feeding and draining three
  pipes in Python (issue 39). The command is pid 1 of its namespace, so killing it ends
  everything it started. ``K`` on the call's socket kills it (a cancel, an exception, an
  answer late past the deadline), and so does closing the socket. The zygote reaps a call
  as it answers and lets go of its socket, which the kernel then sends with a later call
  (a socket pair made and closed per call cost about 15 us of the kernel's CPU); a socket
  the kernel sent ``K`` on, or with anything left to read, is closed instead.
- **Nothing runs that was not checked.** The binary is built like the other helpers
  (:mod:`.helpers`: a cache nobody else can write, else a private folder) and is used only
  once a probe call, laid out like a module's, ran ``/bin/true`` through it.
- **Where it cannot work, nothing changes.** No compiler, a kernel without
  ``mount_setattr`` (5.12), a probe that fails: bwrap runs every call, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import select
import shutil
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._files.sealed import sealed_bytes
from murmur_nb._sandbox import helpers, identity

__all__ = ["GONE", "SWITCH", "DrivenCall", "Ended", "Identity", "Zygote", "ZygoteRefused",
           "identity_of", "status", "switched_off", "translate", "zygote"]

_SOURCE = Path(__file__).with_name("zygote.c")
_BUILDS = (("-static",), ())
#: options of bwrap that name a descriptor: the zygote takes it as an index into what is sent
_FD_OPTIONS = frozenset({"--seccomp"})
#: how long :meth:`DrivenCall.stop` waits for the zygote's answer once it asked for the end
_STOP_WAIT_S = 2.0
#: how long the start-up probe's call may take
_PROBE_S = 10.0
#: a request up to this size goes in the call's message; output and error up to
#: ``zygote.c``'s ``INLINE`` come back in the reply message
_INLINE = 65536
_ANSWER_BYTES = _INLINE + 128
#: answered calls' reply socket pairs kept for later calls, at most (two per row in flight)
_IDLE_PAIRS = 16


class ZygoteRefused(Exception):
    """The zygote cannot make this call (an option it does not know, a source it sees
    otherwise than the kernel, or it is gone): run bwrap instead."""

    @property
    def stale(self) -> bool:
        """The zygote's view of the files is out of date (a folder mounted since it started):
        a new one sees the kernel's mounts as they are now."""
        return str(self).startswith("stale")


@dataclass(frozen=True)
class Ended:
    """How a driven call ended, as the zygote tells it."""

    #: the wait status (``None``: the zygote went away, and the call with it)
    status: int | None
    pid: int
    timed_out: bool
    exceeded: bool
    stdout: bytes
    stderr: bytes


#: how a call ended when the zygote went away (and the call with it) before it answered
GONE = Ended(None, 0, False, False, b"", b"")


#: a call's reply socket: the kernel's end, and the end it sends the zygote with the call
Pair = tuple[socket.socket, socket.socket]


def _close(*pairs: Pair) -> None:
    for pair in pairs:
        for end in pair:
            end.close()


class DrivenCall:
    """A call the zygote runs to its end (:meth:`Zygote.drive`); the kernel only waits.

    ``keep`` takes the call's socket pair back for a later call once the call is answered
    and nothing else was asked of it (:meth:`close`)."""

    def __init__(self, pair: Pair, keep: Callable[[Pair], None]) -> None:
        self._pair: Pair | None = pair
        self._reply = pair[0]
        self._keep = keep
        #: the zygote answered how the call ended
        self._answered = False
        #: the kernel sent "K" on the socket (the zygote may read it after any answer)
        self._asked = False
        self._poll = select.poll()
        self._poll.register(self._reply.fileno(), select.POLLIN)

    def wait(self, timeout: float) -> Ended | None:
        """How the call ended, or ``None`` if it still runs after ``timeout`` seconds.

        Raises
        ------
        ZygoteRefused
            The zygote refused the call before it read or made anything.
        OSError
            The call's sandbox could not be made.
        """
        if not self._poll.poll(max(0, int(timeout * 1000 + 0.999))):
            return None
        try:
            data, fds, _, _ = socket.recv_fds(self._reply, _ANSWER_BYTES, 1)
        except OSError:
            data, fds = b"", []
        try:
            ended = self._ended(data, fds[0] if fds else None)
        finally:
            for fd in fds:
                os.close(fd)
        self._answered = ended is not GONE
        return ended

    @staticmethod
    def _ended(data: bytes, fd: int | None) -> Ended:
        if not data:  # the zygote is gone: its calls went with it (parent-death signal)
            return GONE
        if data.startswith(b"E"):
            raise ZygoteRefused(data[1:].decode(errors="replace"))
        if not data.startswith(b"X"):
            why = data[1:].decode(errors="replace")
            raise OSError(f"the sandbox could not be made: {why}")
        head, _, printed = data.partition(b"\n")
        status, pid, flags, out_len, err_len = (int(f) for f in head[1:].split())
        if fd is not None:
            printed = os.pread(fd, out_len + err_len, 0)
        if len(printed) != out_len + err_len:
            raise OSError("the zygote's answer is cut short")
        return Ended(status, pid, bool(flags & 1), bool(flags & 2), printed[:out_len],
                     printed[out_len:])  # fmt: skip

    def stop(self) -> Ended | None:
        """Ask the zygote to kill the call now, and how it ended (``None``: no answer)."""
        self._asked = True  # a "K" the zygote may read late: the socket is never kept
        with contextlib.suppress(OSError):
            self._reply.send(b"K")
        with contextlib.suppress(OSError, ZygoteRefused):
            return self.wait(_STOP_WAIT_S)
        return None

    def close(self) -> None:
        """Done with the call. An answered call's socket pair goes back to the zygote's
        (the zygote reaped the call as it answered, and holds no end of it any more); any
        other's is closed, which kills the call if it still runs."""
        pair, self._pair = self._pair, None
        if pair is None:
            return
        if self._answered and not self._asked:
            self._keep(pair)
        else:
            _close(pair)


#: bwrap's binds of a path: each is sent with what the kernel sees at its source (``--same``)
_BINDS = frozenset({"--bind", "--bind-try", "--ro-bind", "--ro-bind-try", "--dev-bind",
                    "--dev-bind-try"})  # fmt: skip


#: a file's ``(st_dev, st_ino)``, or ``None`` for a missing ``-try`` bind source
Identity = tuple[int, int] | None


def identity_of(path: str) -> Identity:
    """The ``(st_dev, st_ino)`` of what ``path`` names now (links followed), ``None`` when it
    names nothing. Raises ``OSError`` when it cannot be looked at."""
    try:
        st = os.stat(path)  # noqa: PTH116 - a str path, no Path made
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _identity(source: str, option: str) -> Identity:
    """What the file ``source`` names is in the kernel's view (links followed, as the bind
    follows them); ``None`` for a ``-try`` bind of a missing source."""
    try:
        ident = identity_of(source)
    except OSError as exc:
        raise ZygoteRefused(f"cannot look at {source}: {exc}") from exc
    if ident is None and not option.endswith("-try"):
        raise ZygoteRefused(f"{source} is missing")
    return ident


def _same(ident: Identity) -> list[str]:
    """``--same DEV INO``, or ``--same - -`` for a missing ``-try`` source."""
    return ["--same", "-", "-"] if ident is None else ["--same", str(ident[0]), str(ident[1])]


def translate(
    argv: Sequence[str], pass_fds: Sequence[int], seen: dict[str, Identity] | None = None
) -> tuple[bytes, list[int]]:
    """bwrap's argv as the zygote's message: its options and command, each NUL-ended, with
    each descriptor an option names replaced by its index among ``fds`` (sent beside it),
    and each bind preceded by what its source is in the kernel's view (the zygote binds it
    only if it finds the same file there). ``--userns`` goes: the zygote lives in the
    kernel's user namespace already. ``seen`` gets each bind source and what it was."""
    out: list[str] = []
    fds: list[int] = []
    args = iter(argv[1:])
    for arg in args:
        if arg == "--":
            out += [arg, *args]
            break
        if arg == "--userns":
            next(args, None)
        elif arg in _FD_OPTIONS:
            fd = int(next(args))
            if fd not in pass_fds:
                raise ZygoteRefused(f"{arg} {fd}: not a descriptor of the launch")
            out += [arg, str(len(fds))]
            fds.append(fd)
        elif arg in _BINDS:
            source, dest = next(args), next(args)
            ident = _identity(source, arg)
            if seen is not None:
                seen[source] = ident
            out += [*_same(ident), arg, source, dest]
        else:
            out.append(arg)
    return "\0".join(out).encode("utf-8", "surrogateescape") + b"\0", fds


class Zygote:
    """The kernel process's zygote: started once, asked for one child per call."""

    def __init__(self, binary: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            fds: tuple[int, ...] = (theirs.fileno(),)
            if identity.is_root():  # raises where no user namespace can be made
                userns = identity.userns_fd()
                how, fds = ["--userns", str(userns)], (*fds, userns)
            else:
                how = ["--map", str(os.getuid()), str(os.getgid())]
            # a session of its own: a Ctrl-C or hang-up of the kernel's terminal (sent to its
            # whole group) is the kernel's to handle, never the end of the zygote's calls
            self._proc = subprocess.Popen(
                [binary, str(theirs.fileno()), *how], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={}, cwd="/",
                pass_fds=fds, close_fds=True, start_new_session=True,
            )  # fmt: skip
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._ctrl = ours
        self._lock = threading.Lock()
        #: reply socket pairs of answered calls, for later ones (made and closed per call,
        #: a pair is about 15 us of the kernel's CPU here)
        self._idle: list[Pair] = []
        #: what is sent in the places of a driven call's standard descriptors the zygote
        #: makes itself (it closes what it gets there)
        self._nothing = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            answer = ours.recv(1024)
        except OSError as exc:
            self.close()
            raise ZygoteRefused(f"the zygote did not start: {exc}") from exc
        if answer != b"R":
            self.close()
            why = answer[1:].decode(errors="replace") or "it ended at start"
            raise ZygoteRefused(f"the zygote did not start: {why}")

    def drive(
        self,
        argv: Sequence[str],
        pass_fds: Sequence[int],
        cwd: Path,
        message: tuple[bytes, Sequence[int]] | None,
        request: bytes,
        *,
        deadline: float,
        bound: int,
        tail: int,
    ) -> DrivenCall:
        """Have the zygote run bwrap's ``argv`` to its end, as bwrap would from ``cwd``:
        ``request`` on its standard input, killed at ``deadline`` (``time.monotonic``) or once
        standard output passes ``bound`` bytes, the last ``tail`` bytes of standard error kept.
        ``message`` is :func:`translate`'s of ``argv`` when the caller has it already."""
        data, fds = message if message is not None else translate(argv, pass_fds)
        inline = len(request) <= _INLINE
        size = str(len(request)) if inline else "-"
        drive = f"--drive\0{max(0, int(deadline * 1e9))}\0{bound}\0{tail}\0{size}\0".encode()
        data = b"".join((b"--cwd\0", os.fsencode(cwd), b"\0", drive, data,
                         request if inline else b""))  # fmt: skip
        stdin = None if inline else sealed_bytes(request, "murmur-nb-request")
        try:
            pair = self._idle.pop()
        except IndexError:
            pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # the three standard descriptors' places: the zygote makes the output pipes,
            # and standard input too from a request in the message
            std = self._nothing if stdin is None else stdin
            with self._lock:
                socket.send_fds(self._ctrl, [data], [pair[1].fileno(), std, std, std, *fds])
        except OSError as exc:
            _close(pair)
            raise ZygoteRefused(f"the zygote is gone: {exc}") from exc
        finally:
            if stdin is not None:
                os.close(stdin)
        return DrivenCall(pair, self._keep)

    def _keep(self, pair: Pair) -> None:
        """Keep an answered call's socket pair for a later call: only with nothing left to
        read on it (no answer of one call can ever be read as another's), while the zygote
        runs, and up to :data:`_IDLE_PAIRS`."""
        try:
            pair[0].recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            with self._lock:
                if self._ctrl.fileno() >= 0 and len(self._idle) < _IDLE_PAIRS:
                    self._idle.append(pair)
                    return
        except OSError:
            pass
        _close(pair)

    def _drop_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        _close(*idle)

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def let_go(self) -> None:
        """Close this process's end of its socket only (a forked child's copy: the parent
        still uses the zygote)."""
        self._ctrl.close()
        self._close_nothing()
        # no lock: a forked child's copy of it may be held by a thread the child has not
        idle, self._idle = self._idle, []
        _close(*idle)

    def _close_nothing(self) -> None:
        if self._nothing >= 0:
            os.close(self._nothing)
            self._nothing = -1

    def close(self) -> None:
        """End it (every call it still runs ends with it: end of file on its socket)."""
        self._ctrl.close()
        self._close_nothing()
        self._drop_idle()
        with contextlib.suppress(OSError):
            self._proc.wait(timeout=5)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def _works(path: Path) -> bool:
    """Whether the built zygote starts and runs ``/bin/true`` in a sandbox laid out as a
    module's is (a bind, a read-only bind, a link, proc)."""
    true = shutil.which("true", path="/usr/bin:/bin")
    if true is None:
        return False
    try:
        probe = Zygote(str(path))
    except (OSError, ZygoteRefused):
        return False
    try:
        argv = ["bwrap", "--unshare-pid", "--as-pid-1", "--die-with-parent", "--new-session",
                "--size", "1048576", "--tmpfs", "/",
                "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                "--proc", "/proc", "--perms", "1777", "--dir", "/tmp",
                "--dev-bind-try", "/dev/null", "/dev/null", "--", true]  # fmt: skip
        call = probe.drive(argv, (), Path("/"), None, b"", deadline=time.monotonic() + _PROBE_S,
                           bound=1024, tail=1024)  # fmt: skip
        try:
            ended = call.wait(_PROBE_S)
        finally:
            call.close()
        return ended is not None and ended.status == 0
    except (OSError, ZygoteRefused):
        return False
    finally:
        probe.close()


@functools.cache
def _binary() -> str | None:
    return helpers.built("zygote", _SOURCE, _BUILDS, _works)


_CURRENT: list[Zygote] = []
_FAILED: list[str] = []
_LOCK = threading.Lock()


#: ``off`` here: bwrap makes every sandbox, as before the zygote (a way out, and the
#: benchmarks' reference)
SWITCH = "MURMUR_NB_ZYGOTE"
#: the values of :data:`SWITCH` (stripped, any case) that turn the zygote off, and on
_OFF = ("off", "0", "false", "no")
_ON = ("on", "1", "true", "yes", "")
#: unknown values of :data:`SWITCH` warned about already (each once per process)
_WARNED: set[str] = set()


def switched_off() -> bool:
    """Whether :data:`SWITCH` turns the zygote off: ``off``, ``0``, ``false`` or ``no``, in
    any case. Any other value but an *on* (``on``, ``1``, ``true``, ``yes``, empty) leaves it
    on with one warning per value: a misspelt switch once kept the zygote on silently."""
    value = os.environ.get(SWITCH)
    if value is None:
        return False
    word = value.strip().lower()
    if word in _OFF:
        return True
    if word not in _ON and value not in _WARNED:
        _WARNED.add(value)
        warnings.warn(
            f"{SWITCH}={value!r} is not understood, so the zygote stays on: set it to one of "
            f"{', '.join(_OFF)} (any case) to have bubblewrap make every sandbox, or unset it",
            UserWarning,
            stacklevel=2,
        )
    return False


def zygote() -> Zygote | None:
    """This process's zygote, started on first use; ``None`` where it cannot work here, or
    where :data:`SWITCH` turns it off (:func:`switched_off`: bwrap then makes every
    sandbox)."""
    if switched_off():
        return None
    with _LOCK:
        if _CURRENT:
            return _CURRENT[0]
        if _FAILED:
            return None
        binary = _binary()
        if binary is None:
            _FAILED.append("no C compiler, or the zygote does not work on this kernel")
            return None
        try:
            _CURRENT.append(Zygote(binary))
        except (OSError, ZygoteRefused) as exc:
            _FAILED.append(str(exc))
            return None
        return _CURRENT[0]


@atexit.register
def _close_at_exit() -> None:
    with _LOCK:
        for made in _CURRENT:
            made.close()
        _CURRENT.clear()


def status() -> str:
    """What the zygote does here, for ``host.sandbox`` (starts it where it can run)."""
    if switched_off():
        return f"off ({SWITCH}={os.environ.get(SWITCH, '')}): bwrap makes every sandbox"
    if zygote() is not None:
        return "used: a call without a network grant is forked by the kernel's sandbox parent"
    return f"not used ({_FAILED[0] if _FAILED else 'unavailable'}): bwrap makes every sandbox"


def forget(broken: Zygote) -> None:
    """Stop using ``broken`` (it went away): the next call starts a new one."""
    with _LOCK:
        if _CURRENT and _CURRENT[0] is broken:
            _CURRENT.clear()
    broken.close()


def _forget_in_child() -> None:
    """A forked child is another kernel process: it makes its own zygote (the parent's
    socket is closed here, so the parent's zygote still sees only the parent)."""
    for old in _CURRENT:
        with contextlib.suppress(OSError):
            old.let_go()
    _CURRENT.clear()
    _FAILED.clear()


os.register_at_fork(after_in_child=_forget_in_child)
