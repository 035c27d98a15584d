"""Run one module process: empty environment, own session, bounded output, whole-tree kill.

The child gets ``env={}``, a private working folder, the request on stdin and its own session.
One thread multiplexes stdin, stdout, stderr and a pidfd with ``poll``: stdout is read up
to ``max_output_bytes`` (+ one chunk), stderr drained to a bounded tail. Descendants are
walked at doubling gaps (``/proc/<pid>/task/*/children``, psutil elsewhere) and remembered
with their start time, so a ``setsid`` grandchild is still found and a recycled pid is never
killed. ``cancel`` (a :class:`threading.Event`) is looked at every ``_CANCEL_CHECK`` seconds.
Killing the tree SIGSTOPs, then SIGKILLs, everything related (live tree, remembered pids,
session and group, holders of its pipes or working folder) until nothing new is found. Known
limit: a fully detached descendant whose parent exits between two walks escapes (no cgroups).

A call the kernel's zygote forks is not driven here: the zygote feeds it the request, reads
its output to the same bound and the same stderr tail, kills it at the deadline (it is pid 1
of its PID namespace: everything it started goes with it), and answers once; this thread
waits for that answer, and asks for the end itself on ``cancel``, an exception, or
``_BACKSTOP_S`` past the deadline (:func:`_driven`).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from murmur_nb._sandbox import landlock, netguard
from murmur_nb._sandbox import zygote as zygote_
from murmur_nb._sandbox.netguard import Destinations
from murmur_nb._sandbox.sandbox import Launch, release
from murmur_nb._sandbox.zygote import GONE, DrivenCall, Ended, ZygoteRefused

__all__ = ["RunResult", "kill_held", "run_launched", "run_process", "start_held"]

_CHUNK = 1 << 16
#: the first walk of the tree; the gap then doubles up to ``_SCAN_INTERVAL``
_SCAN_FIRST = 0.002
_SCAN_INTERVAL = 0.04
#: after the child exits, how long descendants may keep the pipes open before being killed
_EXIT_GRACE = 0.25
#: how often a run with a cancel event looks at it
_CANCEL_CHECK = 0.05
#: how long past the deadline the kernel waits for the zygote, which keeps it, to answer
_BACKSTOP_S = 1.0
#: how much of standard error is kept (its end)
_STDERR_TAIL = 64 * 1024


@dataclass
class RunResult:
    """What one module run produced and how it ended."""

    stdout: bytes
    stderr_tail: bytes
    returncode: int | None
    duration_ms: float
    timed_out: bool = False
    output_exceeded: bool = False
    killed: list[int] = field(default_factory=list)
    cancelled: bool = False

    @property
    def stderr_text(self) -> str:
        return self.stderr_tail.decode("utf-8", "replace")


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state first), or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:  # noqa: PTH123 - hot path, no Path
            data = fh.read()
    except OSError:
        return None
    return data.rpartition(b")")[2].split()


def _identity(pid: int) -> int | None:
    """The start time of a live ``pid`` (its identity against pid reuse); ``None`` if gone."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


#: whether the kernel lists children per task (CONFIG_PROC_CHILDREN); psutil otherwise
_PROC_CHILDREN = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` from ``/proc/<pid>/task/*/children`` (psutil as fallback)."""
    if _PROC_CHILDREN:
        try:
            tids = os.listdir(f"/proc/{pid}/task")  # noqa: PTH208 - hot path
        except OSError:
            return []
        out: list[int] = []
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:  # noqa: PTH123
                    out.extend(int(x) for x in fh.read().split())
            except OSError:
                continue
        return out
    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.Error:
        return []


class _Tracker:
    """Remembers every descendant seen, keyed by pid with its start time."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.sid = root  # start_new_session: the child leads its session and group
        self.known: dict[int, int] = {}

    def scan(self, roots: list[int] | None = None) -> None:
        """Walk the live tree under ``roots`` (default: the child) and remember it."""
        frontier = list(roots) if roots is not None else [self.root]
        visited: set[int] = set()
        while frontier:
            pid = frontier.pop()
            if pid in visited:
                continue
            visited.add(pid)
            for child in _children(pid):
                if child not in self.known:
                    ident = _identity(child)
                    if ident is None:
                        continue
                    self.known[child] = ident
                frontier.append(child)


def _proc_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]  # noqa: PTH208 - hot scan
    except OSError:
        return []


def _holders(pipe_inodes: set[str], cwd: str | None) -> set[int]:
    """Pids holding one of the pipes or whose working folder is inside ``cwd``."""
    found: set[int] = set()
    me = os.getpid()
    for pid in _proc_pids():
        if pid == me:
            continue
        base = f"/proc/{pid}"
        if cwd is not None:
            try:
                where = os.readlink(f"{base}/cwd")  # noqa: PTH115
                if where == cwd or where.startswith(cwd + "/"):
                    found.add(pid)
                    continue
            except OSError:
                pass
        if not pipe_inodes:
            continue
        try:
            fds = os.listdir(f"{base}/fd")  # noqa: PTH208
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{base}/fd/{fd}")  # noqa: PTH115
            except OSError:
                continue
            if target in pipe_inodes:
                found.add(pid)
                break
    return found


def _in_session(sid: int) -> set[int]:
    found: set[int] = set()
    for pid in _proc_pids():
        try:
            if os.getsid(pid) == sid or os.getpgid(pid) == sid:
                found.add(pid)
        except OSError:
            continue
    return found


def _kill_tree(
    tracker: _Tracker, pipe_inodes: set[str], cwd: str | None, *, thorough: bool
) -> list[int]:
    """Stop and kill every process of the module's tree; return the pids signalled.

    ``thorough`` adds the ``/proc`` scans (session, group, pipe holders, working folder);
    without it only the child, its live tree and the remembered descendants are reached.
    """
    killed: list[int] = []
    me = os.getpid()
    seen: set[int] = set()
    for _ in range(8):
        tracker.scan()
        targets: set[int] = {tracker.root, *tracker.known}
        if thorough:
            targets |= _in_session(tracker.sid)
            targets |= _holders(pipe_inodes, cwd)
        targets.discard(me)
        targets -= seen
        live: dict[int, int] = {}
        for pid in targets:
            ident = _identity(pid)
            if ident is None:
                continue
            expected = tracker.known.get(pid)
            if expected is not None and expected != ident:
                continue  # pid recycled by an unrelated process
            live[pid] = ident
        # the group first: one syscall reaches members never seen
        with contextlib.suppress(OSError):
            os.killpg(tracker.sid, signal.SIGKILL)
        if not live:
            break
        # freeze everything so nothing forks away, then pick up what was forked meanwhile
        for pid in live:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
        tracker.scan(list(live))
        for pid in [*live, *(p for p in tracker.known if p not in live and p not in seen)]:
            expected = tracker.known.get(pid, live.get(pid))
            if expected is not None and _identity(pid) != expected:
                continue
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            seen.add(pid)
        if not thorough and not tracker.known.keys() - seen:
            break
    return killed


def _wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` for ``pid`` to exit without reaping it (no pidfd available)."""
    end = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def run_process(
    argv: Sequence[str],
    stdin: bytes,
    *,
    cwd: Path,
    deadline_s: float,
    max_output_bytes: int,
    stderr_tail_bytes: int = _STDERR_TAIL,
    preexec: Callable[[], None] | None = None,
    cancel: threading.Event | None = None,
    pass_fds: Sequence[int] = (),
    walk_tree: bool = True,
    user: int | None = None,
    start_in: Path | None = None,
    destinations: Destinations | None = None,
) -> RunResult:
    """Run ``argv`` as a module process and return what it printed.

    The process tree is killed at ``deadline_s`` (``timed_out``) or as soon as standard
    output exceeds ``max_output_bytes`` (``output_exceeded``; ``stdout`` is then cut at the
    bound). Setting ``cancel`` kills the tree too (``cancelled``). A ``KeyboardInterrupt``
    (or any other exception) kills the tree and propagates. ``preexec`` runs in the child
    between ``fork`` and ``exec`` (the Landlock sandbox), after the switch to ``user`` (uid
    and gid, no supplementary group) when one is given; ``pass_fds`` are inherited.
    ``walk_tree=False`` skips the periodic walks of the running tree, for a process that
    leads its own PID namespace (nothing it starts survives it); the tree is still walked
    when it has to be killed. ``start_in`` is where ``argv`` starts when ``cwd`` is made by
    the launcher itself (bwrap's private working folder). With ``destinations`` the process
    starts under the host's check of every socket destination (:mod:`.netguard`).
    """
    start = time.monotonic()

    def popen() -> subprocess.Popen[bytes]:
        proc = _popen(argv, cwd=start_in or cwd, pass_fds=pass_fds, preexec=preexec, user=user)
        if preexec is not None:
            # confined here, not by a helper (the helpers and the zygote make themselves the
            # OOM killer's first choice before any module runs): a child that switched uid
            # could not write its own score, so the host does, as soon as it started
            try:
                landlock.oom_first(proc.pid)
            except BaseException:
                _end_untaken(proc)
                raise
        return proc

    if destinations is None:
        proc, release_guard = popen(), _nothing
    else:
        proc, release_guard = netguard.spawn(destinations, popen, _end_untaken)
    try:
        return _drive(proc, stdin, start, cwd=cwd, deadline_s=deadline_s,
                      max_output_bytes=max_output_bytes, stderr_tail_bytes=stderr_tail_bytes,
                      cancel=cancel, walk_tree=walk_tree)  # fmt: skip
    except BaseException:
        if proc.returncode is None:  # interrupted before _drive took it (it reaps what it took)
            _end_untaken(proc)
        raise
    finally:
        release_guard()


def _end_untaken(proc: subprocess.Popen[bytes]) -> None:
    """A started process no run took (an interrupt came in between): its whole tree killed,
    it reaped and its pipes closed."""
    with contextlib.suppress(Exception):
        _kill_tree(_Tracker(proc.pid), set(), None, thorough=True)
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _popen(
    argv: Sequence[str],
    *,
    cwd: Path,
    pass_fds: Sequence[int],
    preexec: Callable[[], None] | None = None,
    user: int | None = None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        bufsize=0,  # the pipes are read and written by descriptor: no buffered file objects
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={},
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(pass_fds),
        user=user,
        group=user,
        extra_groups=[] if user is not None else None,
        # the Landlock sandbox: two system calls through prebuilt ctypes functions, no
        # lock taken and nothing imported, so it is safe in the child of a threaded host
        preexec_fn=preexec,  # noqa: PLW1509
    )


def _drive(
    proc: subprocess.Popen[bytes],
    stdin: bytes,
    start: float,
    *,
    cwd: Path,
    deadline_s: float,
    max_output_bytes: int,
    stderr_tail_bytes: int,
    cancel: threading.Event | None,
    walk_tree: bool,
) -> RunResult:
    """Feed, drain and end a started process (see :func:`run_process`); from ``start``."""
    run = _Run(proc, start + deadline_s, max_output_bytes, stderr_tail_bytes, cancel)
    try:
        run.pump(stdin, start if walk_tree else None)
        returncode = run.finish(str(cwd))
    except BaseException:
        run.abort(str(cwd))
        raise
    finally:
        try:
            run.close()
        except BaseException:  # interrupted as it began: its descriptors closed all the same
            run.close()
            raise
    return run.result(returncode, start)


def start_held(how: Launch, cwd: Path) -> subprocess.Popen[bytes]:
    """Start a held launch (:func:`~murmur_nb._sandbox.sandbox.held_copy`): bwrap makes the
    sandbox and waits for :func:`run_launched` with ``started=``. The caller kills its
    process group and reaps it (then closes the launch) if it is never run."""
    if how.held is None:
        raise ValueError("start_held needs a held launch (sandbox.held_copy)")
    proc = _popen(how.argv, cwd=how.start_in or cwd, pass_fds=how.pass_fds)
    how.held.started()  # a waiting sandbox keeps only its two write ends open here
    return proc


def kill_held(proc: subprocess.Popen[bytes]) -> None:
    """Kill a held bwrap unrun and reap it: its whole group, bwrap and the child it made,
    which leaves the group only once let go (``--new-session``)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _nothing() -> None:
    pass


def _driven(
    how: Launch,
    stdin: bytes,
    *,
    cwd: Path,
    deadline_s: float,
    max_output_bytes: int,
    cancel: threading.Event | None,
) -> RunResult | None:
    """The plan run to its end by the zygote (:meth:`~.zygote.Zygote.drive`: it feeds,
    drains, bounds and kills; this thread only waits for its answer); ``None`` when the
    zygote refuses the plan before it touched anything (bwrap then runs it, as it would
    have). A kept plan it refuses as stale is planned afresh and run on that plan."""
    forker = how.zygote
    assert forker is not None
    start = time.monotonic()
    deadline = start + deadline_s
    try:
        call = forker.drive(how.argv, how.pass_fds, how.start_in or cwd, how.message, stdin,
                            deadline=deadline, bound=max_output_bytes,
                            tail=_STDERR_TAIL)  # fmt: skip
        try:
            ended, cancelled, late = _answer(call, deadline, cancel)
        finally:
            call.close()
    except ZygoteRefused as refused:
        if refused.stale and how.on_stale is not None:
            # a path of the kept plan names another file now: the call is planned afresh,
            # and run on that plan (the zygote it gives looks at its paths again)
            afresh = how.on_stale()
            try:
                return run_launched(afresh, stdin, cwd=cwd, deadline_s=deadline_s,
                                    max_output_bytes=max_output_bytes, cancel=cancel)  # fmt: skip
            finally:  # the run closed it; not when interrupted before (a close twice is none)
                afresh.close()
        if refused.stale or not forker.alive:
            zygote_.forget(forker)  # the next call starts a new one, with today's mounts
        return None
    if ended is None:  # no answer to the kernel's "K": the zygote is gone or stuck
        ended = GONE
    timed_out = ended.timed_out or late
    return RunResult(
        stdout=ended.stdout,
        stderr_tail=ended.stderr,
        returncode=-9 if ended.status is None else os.waitstatus_to_exitcode(ended.status),
        duration_ms=(time.monotonic() - start) * 1000.0,
        timed_out=timed_out,
        output_exceeded=ended.exceeded,
        killed=[ended.pid] if ended.pid and (timed_out or ended.exceeded or cancelled) else [],
        cancelled=cancelled,
    )


def _answer(
    call: DrivenCall, deadline: float, cancel: threading.Event | None
) -> tuple[Ended | None, bool, bool]:
    """Wait for a driven call's end: ``(how it ended, cancelled, late)``. The zygote keeps the
    deadline; the kernel asks for the end itself on ``cancel``, on an exception
    (``KeyboardInterrupt`` too), or ``_BACKSTOP_S`` past the deadline (``late``)."""
    try:
        while True:
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                return call.stop(), True, False
            if now >= deadline + _BACKSTOP_S:
                return call.stop(), False, True
            # wake now and then: an interrupt raised by another thread
            # (``_thread.interrupt_main``, a kernel's) is only seen between two waits
            wake = min(deadline + _BACKSTOP_S, now + _SCAN_INTERVAL)
            if cancel is not None:
                wake = min(wake, now + _CANCEL_CHECK)
            ended = call.wait(wake - now)
            if ended is not None:
                return ended, False, False
    except (ZygoteRefused, OSError):
        raise  # refused or never made: nothing runs
    except BaseException:
        call.stop()
        raise


class _Run:
    """One module process while it runs: its pipes, what it printed, and what ended it."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        deadline: float,
        max_output_bytes: int,
        stderr_tail_bytes: int,
        cancel: threading.Event | None = None,
    ) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.stdin, self.stdout, self.stderr = proc.stdin, proc.stdout, proc.stderr
        self.deadline = deadline
        self.bound = max_output_bytes
        self.tail = stderr_tail_bytes
        self.tracker = _Tracker(proc.pid)
        self.out_fd = self.stdout.fileno()
        self.err_fd = self.stderr.fileno()
        self.in_fd = self.stdin.fileno()
        self.pipe_inodes: set[str] = set()
        for fd in (self.out_fd, self.err_fd):
            with contextlib.suppress(OSError):
                self.pipe_inodes.add(f"pipe:[{os.fstat(fd).st_ino}]")
        self.out = bytearray()
        self.err = bytearray()
        self.timed_out = self.exceeded = self.cancelled = False
        self.cancel = cancel
        self.killed: list[int] = []
        # poll, not epoll: four descriptors, and no descriptor of its own to make, fill and close
        self.poller = select.poll()
        self.pidfd: int | None = None
        self.pending = memoryview(b"")
        self.open_pipes = 2
        self.exited_at: float | None = None

    def _register(self, stdin: bytes) -> None:
        try:
            self.pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None
        os.set_blocking(self.in_fd, False)
        self.pending = memoryview(stdin)
        # written at once as far as the pipe takes it (a request mostly fits its buffer):
        # a wait for POLLOUT only for the rest
        if not self._feed():
            self.poller.register(self.in_fd, select.POLLOUT)
        self.poller.register(self.out_fd, select.POLLIN)
        self.poller.register(self.err_fd, select.POLLIN)
        if self.pidfd is not None:
            self.poller.register(self.pidfd, select.POLLIN)

    def pump(self, stdin: bytes, start: float | None) -> None:
        """Feed the request, drain both outputs and walk the tree (from ``start``; never when
        ``None``) until the output pipes close, the deadline passes, the output bound is
        crossed, or the child has been gone for ``_EXIT_GRACE`` while a descendant keeps
        its pipes open."""
        self._register(stdin)
        gap = _SCAN_FIRST
        next_scan = start + gap if start is not None else float("inf")
        while self.open_pipes:
            now = time.monotonic()
            if now >= self.deadline:
                self.timed_out = True
                return
            if self.cancel is not None and self.cancel.is_set():
                self.cancelled = True
                return
            exited_at = self.exited_at
            if exited_at is not None and now - exited_at >= _EXIT_GRACE:
                return  # the child is gone; a descendant keeps the pipes open
            if exited_at is None and now >= next_scan:
                self.tracker.scan()
                gap = min(gap * 2, _SCAN_INTERVAL)
                next_scan = now + gap
            wake = min(self.deadline, next_scan if exited_at is None else exited_at + _EXIT_GRACE)
            # wake now and then even without walks: an interrupt raised by another thread
            # (``_thread.interrupt_main``, a kernel's) is only seen between two waits
            wake = min(wake, now + _SCAN_INTERVAL)
            if self.cancel is not None:
                wake = min(wake, now + _CANCEL_CHECK)
            # a hang-up or an error counts as ready: the read or write then says which
            for fd, _ in self.poller.poll(max(0, math.ceil((wake - now) * 1000))):
                if self._ready(fd):
                    return

    def _ready(self, fd: int) -> bool:
        """Serve one ready descriptor; ``True`` once standard output crossed the bound."""
        if fd == self.in_fd:
            if self._feed():
                self.poller.unregister(fd)
        elif fd == self.out_fd:
            return self._read_out()
        elif fd == self.err_fd:
            self._read_err()
        elif fd == self.pidfd:
            self.poller.unregister(fd)
            self.exited_at = time.monotonic()
        return False

    def _feed(self) -> bool:
        """Write what the pipe takes now of the request; ``True`` once it is all written
        (or the module closed its end) and standard input is closed."""
        while self.pending:
            try:
                n = os.write(self.in_fd, self.pending[:_CHUNK])
            except BrokenPipeError:
                n = len(self.pending)
            except BlockingIOError:
                return False
            self.pending = self.pending[n:]
        with contextlib.suppress(BrokenPipeError):
            self.stdin.close()
        return True

    def _read_out(self) -> bool:
        room = self.bound + 1 - len(self.out)
        data = os.read(self.out_fd, min(_CHUNK, max(room, 1)))
        if not data:
            self.poller.unregister(self.out_fd)
            self.open_pipes -= 1
            return False
        self.out += data
        if len(self.out) > self.bound:
            self.exceeded = True
            del self.out[self.bound :]
            return True
        return False

    def _read_err(self) -> None:
        data = os.read(self.err_fd, _CHUNK)
        if not data:
            self.poller.unregister(self.err_fd)
            self.open_pipes -= 1
            return
        self.err += data
        if len(self.err) > 2 * self.tail:
            del self.err[: len(self.err) - self.tail]

    def finish(self, cwd: str) -> int:
        """End whatever is left of the tree and reap the child; return its exit status."""
        if self.timed_out or self.exceeded or self.cancelled or self.open_pipes:
            # deadline, output bound, cancel, or the child exited while a descendant still holds
            # its output: end the whole tree
            self.killed = _kill_tree(self.tracker, self.pipe_inodes, cwd, thorough=True)
        else:
            self._end_normally(cwd)
        return self.proc.wait()

    def _end_normally(self, cwd: str) -> None:
        """Let the child finish exiting (unreaped, so its group id cannot be recycled), then
        whatever is left in its group, or was seen in its tree, goes."""
        grace = max(0.0, min(self.deadline - time.monotonic(), 1.0))
        if self.pidfd is not None:
            ready = self.exited_at is not None or select.select([self.pidfd], [], [], grace)[0]
            exited = bool(ready)
        else:
            exited = _wait_exit(self.proc.pid, grace)
        with contextlib.suppress(OSError):
            os.killpg(self.tracker.sid, signal.SIGKILL)
        if not exited:
            self.timed_out = time.monotonic() >= self.deadline
            self.killed = _kill_tree(self.tracker, self.pipe_inodes, cwd, thorough=True)
        elif self.tracker.known:
            self.killed = _kill_tree(self.tracker, self.pipe_inodes, None, thorough=False)

    def abort(self, cwd: str) -> None:
        """An exception (``KeyboardInterrupt`` too) is propagating: kill the whole tree."""
        with contextlib.suppress(Exception):
            _kill_tree(self.tracker, self.pipe_inodes, cwd, thorough=True)
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
        for stream in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                stream.close()

    def result(self, returncode: int, start: float) -> RunResult:
        if len(self.err) > self.tail:
            del self.err[: len(self.err) - self.tail]
        return RunResult(
            stdout=bytes(self.out),
            stderr_tail=bytes(self.err),
            returncode=returncode,
            duration_ms=(time.monotonic() - start) * 1000.0,
            timed_out=self.timed_out,
            output_exceeded=self.exceeded,
            killed=self.killed,
            cancelled=self.cancelled,
        )


def run_launched(
    how: Launch,
    stdin: bytes,
    *,
    cwd: Path,
    deadline_s: float,
    max_output_bytes: int,
    cancel: threading.Event | None = None,
    started: subprocess.Popen[bytes] | None = None,
) -> RunResult:
    """Run a launch plan (:func:`~murmur_nb._sandbox.sandbox.launch`) to the end (or to
    ``cancel``), then release it. ``started``: the plan's bwrap, started ahead by
    :func:`start_held` and waiting; it is let go now, and the deadline counts from now."""
    try:
        if started is not None:
            start = time.monotonic()
            try:
                release(how)
            except BaseException:
                kill_held(started)
                raise
            return _drive(started, stdin, start, cwd=cwd, deadline_s=deadline_s,
                          max_output_bytes=max_output_bytes, stderr_tail_bytes=_STDERR_TAIL,
                          cancel=cancel, walk_tree=False)  # fmt: skip
        if how.zygote is not None:
            driven = _driven(how, stdin, cwd=cwd, deadline_s=deadline_s,
                             max_output_bytes=max_output_bytes, cancel=cancel)  # fmt: skip
            if driven is not None:
                return driven
        bwrap = how.for_bwrap()
        try:
            return run_process(
                bwrap.argv,
                stdin,
                cwd=cwd,
                deadline_s=deadline_s,
                max_output_bytes=max_output_bytes,
                preexec=bwrap.preexec,
                cancel=cancel,
                pass_fds=bwrap.pass_fds,
                walk_tree=not bwrap.owns_pid_namespace,
                user=bwrap.user,
                start_in=bwrap.start_in,
                destinations=bwrap.destinations,
            )
        finally:
            if bwrap is not how:
                bwrap.close()
    finally:
        how.close()
