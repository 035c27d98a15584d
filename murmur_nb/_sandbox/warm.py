"""Sandboxes set up ahead of their call: bwrap makes the namespaces and mounts of the next
call of a launch plan that ran before, then waits (``--block-fd``) until the call comes.

Making a sandbox is most of a call's cost (about 2.6 ms of a 4 ms call as root: namespaces,
a dozen mounts, their teardown). A plan that ran twice is likely to run again (a form
clicked again, a loop), so after its second run one sandbox for its next run is made, in the
background, and the next call only lets it go: the seccomp program and one byte go down two
pipes, bwrap loads the program and starts the module, and the deadline counts from then. A
batch's rows make none (``ahead=False``): they keep every core busy already.

What holds:

- **No module code runs before its call.** bwrap waits before it loads the seccomp program
  and executes anything; the program is written only when the call comes
  (:func:`~murmur_nb._sandbox.sandbox.release`). A host that dies (``kill -9`` too) closes
  the program's pipe unwritten: bwrap reads an empty program, refuses it and exits.
- **Nothing of a waiting sandbox outlives its host.** :meth:`WarmSandboxes.close` (the
  host's ``close()``; a host dropped unclosed, and interpreter exit, through a finalizer)
  kills each one's process group (bwrap and its child, which has not yet left the group)
  before anything is closed; bwrap's
  ``--die-with-parent`` covers a host that dies. The thread that starts them lives as long
  as the process: a parent-death signal follows the *thread* that started a process.
- **A call runs in a sandbox made for exactly its plan.** Each call still plans its launch
  from scratch (every root resolved again, every grant given again); the waiting sandbox is
  used only when its plan is the same argv but for its own working folder's name and
  descriptor numbers (:func:`plan_key`). Anything else (another module, other roots or
  grants, another policy) runs as a fresh sandbox. The waiting one is the previous call's
  plan for a new working folder (:func:`~murmur_nb._sandbox.sandbox.held_copy`): nothing is
  resolved twice per call.
- **...and for the folders its paths name at the call.** A root's path may name another
  folder by the time the call comes (a notebook renames its output folder away, or removes
  it and makes it again). So the waiting sandbox binds the folders its starter opened
  (``--bind-fd``), and the call compares them with what each path names then
  (:meth:`~murmur_nb._sandbox.sandbox.Held.current`): one that differs is killed unrun and
  the call makes its own. Where bwrap cannot bind a descriptor, nothing is made ahead.

At most :data:`KEEP` plans keep a sandbox waiting (the least recently used one goes), and a
plan's first run never leaves one: a one-off call costs nothing more.
"""

from __future__ import annotations

import os
import queue
import secrets
import subprocess
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._sandbox.runner import kill_held, start_held
from murmur_nb._sandbox.sandbox import Launch, binds_by_fd, held_copy

__all__ = ["KEEP", "Warm", "WarmSandboxes", "make_warm", "plan_key"]

#: how many launch plans keep a sandbox waiting, per host
KEEP = 4
#: options of bwrap followed by a descriptor number, which differs from call to call
_FD_OPTIONS = frozenset({"--seccomp", "--userns", "--block-fd"})

Key = tuple[str, ...]


@dataclass
class Warm:
    """A sandbox made ahead: its held launch, its waiting bwrap and its working folder."""

    how: Launch
    proc: subprocess.Popen[bytes]
    cwd: Path

    def current(self) -> bool:
        """Whether it still waits (nothing killed it meanwhile) and each folder it binds is
        still the one its path names."""
        held = self.how.held
        return held is not None and self.proc.poll() is None and held.current()

    def discard(self) -> None:
        """Kill it unrun: the group (bwrap and its child) first, then close its pipes. One its
        run reaped already is only closed (its group id may be another's by now)."""
        if self.proc.returncode is None:
            kill_held(self.proc)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self.how.close()


def plan_key(how: Launch, cwd: Path) -> Key | None:
    """What identifies ``how``'s sandbox: its argv with the working folder's name and the
    descriptor numbers left out (``--block-fd`` dropped); ``None`` when it cannot be held:
    no seccomp program, or a bwrap that cannot bind a descriptor
    (:func:`~murmur_nb._sandbox.sandbox.held_copy`)."""
    if how.program is None or not binds_by_fd(how.argv[0]):
        return None
    out: list[str] = []
    name = cwd.name
    args = iter(how.argv)
    for arg in args:
        if arg in _FD_OPTIONS:
            fd = next(args, "")
            if arg != "--block-fd":
                out += [arg, "#fd"] if fd.isdigit() else [arg, fd]
            continue
        out.append(arg.replace(name, "#cwd"))
    return tuple(out)


class WarmSandboxes:
    """The sandboxes one host keeps waiting, one per launch plan that ran before."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: OrderedDict[Key, Warm] = OrderedDict()
        self._ran: OrderedDict[Key, None] = OrderedDict()  # plans run at least once
        self._making: set[Key] = set()
        self._pid = os.getpid()
        self._closed = False
        # close()'s killing, also when the host is dropped unclosed, and at interpreter exit
        self._discard = weakref.finalize(self, _discard_all, self._lock, self._waiting, self._pid)

    def waiting(self) -> bool:
        """Whether any sandbox waits (or is being made) for a plan's next call."""
        return bool(self._waiting or self._making)

    def take(self, key: Key | None) -> Warm | None:
        """The sandbox waiting for ``key``'s plan (now no longer waiting), if any, still
        alive, and binding the folders its paths name now (else it is killed unrun)."""
        if key is None or os.getpid() != self._pid:
            return None
        with self._lock:
            warm = self._waiting.pop(key, None)
        if warm is None:
            return None
        try:
            if warm.current():
                return warm  # the caller's now
        except BaseException:  # interrupted as it looked: taken from the pool, so killed here
            warm.discard()
            raise
        warm.discard()
        return None

    def ran(self, key: Key | None, make: Callable[[], Warm]) -> None:
        """``key``'s plan ran: when it had run before, have ``make`` (in the background)
        set up a sandbox for its next run."""
        if key is None or os.getpid() != self._pid:
            return
        with self._lock:
            if self._closed:
                return
            again = key in self._ran
            self._ran[key] = None
            self._ran.move_to_end(key)
            while len(self._ran) > 4 * KEEP:
                self._ran.popitem(last=False)
            if not again or key in self._waiting or key in self._making:
                return
            self._making.add(key)
        _starter().submit(self, key, make)

    def keep(self, key: Key, warm: Warm) -> None:
        """Keep ``warm`` for ``key`` (the starter thread's, once it is made)."""
        gone: list[Warm] = []
        with self._lock:
            self._making.discard(key)
            if self._closed:
                gone.append(warm)
            else:
                old = self._waiting.pop(key, None)
                if old is not None:
                    gone.append(old)
                self._waiting[key] = warm
                while len(self._waiting) > KEEP:
                    gone.append(self._waiting.popitem(last=False)[1])
        for each in gone:
            each.discard()

    def failed(self, key: Key) -> None:
        with self._lock:
            self._making.discard(key)

    def close(self) -> None:
        """Kill every waiting sandbox; nothing is made for this host any more. Idempotent."""
        with self._lock:
            self._closed = True
        self._discard()


def _discard_all(lock: threading.Lock, waiting: OrderedDict[Key, Warm], pid: int) -> None:
    with lock:
        gone = list(waiting.values()) if os.getpid() == pid else []  # a fork's are not its own
        waiting.clear()
    for warm in gone:
        warm.discard()


def make_warm(plan: Launch, cwd: Path) -> Warm:
    """Start ``plan`` (this call's, for working folder ``cwd``) again, held, for a new
    working folder: the sandbox of the plan's next call (closed if bwrap does not start)."""
    folder = cwd.parent / f"cwd-{secrets.token_hex(8)}"  # as the workspace names one
    how = held_copy(plan, cwd, folder)
    try:
        proc = start_held(how, folder)
    except BaseException:
        how.close()
        raise
    return Warm(how, proc, folder)


class _Starter:
    """The one thread (per process) that starts sandboxes ahead: it lives as long as the
    process, so the parent-death signal of what it starts fires only with the process."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[WarmSandboxes, Key, Callable[[], Warm]]] = (
            queue.SimpleQueue()
        )
        self.pid = os.getpid()
        threading.Thread(target=self._loop, name="murmur-nb sandbox starter",
                         daemon=True).start()  # fmt: skip

    def submit(self, pool: WarmSandboxes, key: Key, make: Callable[[], Warm]) -> None:
        self._queue.put((pool, key, make))

    def _loop(self) -> None:
        while True:
            _serve(*self._queue.get())  # nothing of a request stays referenced here


def _serve(pool: WarmSandboxes, key: Key, make: Callable[[], Warm]) -> None:
    try:
        warm = make()
    except Exception:  # the next call simply starts its own sandbox
        pool.failed(key)
        return
    pool.keep(key, warm)  # held_copy keeps the plan's argv: its key is the same


_STARTER: list[_Starter] = []
_STARTER_LOCK = threading.Lock()


def _starter() -> _Starter:
    with _STARTER_LOCK:
        if not _STARTER or _STARTER[0].pid != os.getpid():
            _STARTER[:] = [_Starter()]
        return _STARTER[0]
