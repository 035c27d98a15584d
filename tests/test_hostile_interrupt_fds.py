"""A Ctrl-C landing anywhere in a module call's launch: nothing it opened or started stays.

What was attacked: ``KeyboardInterrupt`` raised at the entry of each function the launch
path calls (inside ``PreparedCall._launch``: the sandbox plan, the working folder, the zygote
or bwrap start, a sandbox made ahead taken and let go), as a Ctrl-C in a notebook lands
there; after each, the process's open descriptors (``/proc/self/fd``) and its child
processes are compared with those before the call.

What happened before: a launch's seccomp pipe is opened as it is planned and was closed only
by the run, so an interrupt between the two (planning the zygote's message, the invocation's
warnings, looking for a sandbox made ahead, the bwrap copy of a kept plan, the subreaper's
Landlock launch being made) left the pipe open in the kernel for good: 15 to 25 of the
call sites of each way of running leaked one. A sandbox made ahead was taken from the host's
pool before it was checked, and an interrupt then (or as it was let go) left its bwrap
waiting and four descriptors open; a module process started without the subreaper or a
zygote was left running (and unreaped) when the interrupt came before the run took it.

Each way of running (the zygote, bwrap, bwrap from a kept plan, a sandbox made ahead, the
Landlock subreaper) runs in a child process of its own, so its descriptors and children are
its own, within a timeout. The points are each call site of murmur-nb's own code the launch
enters (the first time it does, per call): a function the stdlib runs for it is entered from
there, and an interrupt inside one unwinds through that same site.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _modules import install, sh_module

ROOT = Path(__file__).resolve().parents[1]

#: the start of each scenario below: ``presser(steps, point, sites, package)`` is a tracer
#: that raises ``KeyboardInterrupt`` (as the signal handler raises it) at the ``point``-th
#: (from 0) call site of the package's own code entered while a frame of ``steps`` runs,
#: noting each new site in ``sites``
_PRESS = """
import sys


def presser(steps, point, sites, package):
    inside = [0]

    def press(frame, event, arg):
        if frame.f_code in steps:
            inside[0] += 1 if event == "call" else -1 if event == "return" else 0
            return press
        caller = frame.f_back
        if (event == "call" and inside[0] and caller is not None
                and caller.f_code.co_filename.startswith(package)
                and not frame.f_code.co_name.startswith("<")):
            site = (caller.f_code, caller.f_lineno, frame.f_code)
            if site not in sites:
                sites.append(site)
                if len(sites) == point + 1:
                    raise KeyboardInterrupt
        return None

    return press


def press_once(tracer, run):
    \"\"\"Run ``run()`` traced by ``tracer``, the KeyboardInterrupt it presses swallowed.\"\"\"
    sys.settrace(tracer)
    try:
        run()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)


def report(word, points, found):
    \"\"\"Print how many points were pressed, then ``word`` and how many left something,
    then each.\"\"\"
    print("points", points, flush=True)
    print(word, len(found), flush=True)
    for each in found:
        print(each, flush=True)

"""

_SCENARIO = _PRESS + """
import gc, os, signal, sys, time
from pathlib import Path
import psutil
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel, however started
mode, home = sys.argv[1], Path(sys.argv[2])
if mode in ("bwrap", "kept", "warm"):
    os.environ["MURMUR_NB_ZYGOTE"] = "off"
import murmur_nb as mnb
from murmur_nb._modules.prepared import PreparedCall  # private: the step the Ctrl-C lands in
from murmur_nb._sandbox.plans import Plans  # private: a new host's plans, not a new host

policy = mnb.Policy(sandbox_mechanisms=("landlock", "seccomp", "reaper")) \\
    if mode == "landlock" else mnb.Policy()
host = mnb.ModuleHost(home=home, policy=policy)
want = "landlock" if mode == "landlock" else "bwrap"
if host.sandbox.mechanism != want:
    print("SKIP", host.sandbox.confinement, flush=True)
    sys.exit(0)
call = host.prepare("sh.run")
for _ in range(3):
    assert call.run({}, ahead=False).ok
LAUNCH, PACKAGE = PreparedCall._launch.__code__, str(Path(mnb.__file__).parent) + "/"


def held():
    \"\"\"What this process holds: each open descriptor's target (a pipe's names its inode),
    and each child process. The zygote's sockets are counted (it keeps a few pairs for later
    calls, and closes one an interrupted call used: the next call makes another).\"\"\"
    out, sockets = set(), 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            sockets += 1
        else:
            out.add(target)
    out.add(f"{sockets} sockets")
    return out | {child(p) for p in psutil.Process().children()}


def child(p):
    \"\"\"A child process, and whether it is a zombie (ended, never reaped): not whether it
    runs or sleeps now, which a loaded machine changes between two looks.\"\"\"
    try:
        zombie = p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return f"child {p.pid} gone"
    return f"child {p.pid}" + (" zombie" if zombie else "")


def sockets(held):
    return next(int(h.split()[0]) for h in held if h.endswith(" sockets"))


def new(after, before):
    \"\"\"What ``after`` holds that ``before`` did not (more sockets than a call leaves, not
    other ones).\"\"\"
    most = max(sockets(before), AT_REST)
    return {h for h in after - before if not h.endswith(" sockets") or sockets(after) > most}


AT_REST = sockets(held())  # after whole calls: the zygote's pairs kept for the next


def lost():
    \"\"\"The bwraps made ahead that wait below this process, none of the host's pool's.\"\"\"
    pool = {warm.proc.pid for warm in host._gate.warm._waiting.values()}  # private: its pool
    return [p for p in psutil.Process().children()
            if "--block-fd" in p.cmdline() and p.pid not in pool]


def ready():
    if mode == "warm":  # one made ahead waits in the pool: the call takes it
        end = time.monotonic() + 10
        while not host._gate.warm._waiting:  # private: the pool
            assert time.monotonic() < end, "no sandbox was made ahead"
            call.run({})
            time.sleep(0.05)
    elif mode != "kept":  # the launch is planned afresh, as a new host's first call is
        host._gate.plans = Plans()  # private: the gate's plans


point, leaks = 0, []
while True:
    ready()
    before = held()
    sites = []
    press_once(presser({LAUNCH}, point, sites, PACKAGE), lambda: call.run({}, ahead=False))
    if len(sites) <= point:
        break  # the call ran to its end: every site was pressed
    after = held()
    settle = time.monotonic() + 3  # what ends as the call unwinds, on a loaded machine too
    while (new(after, before) or lost()) and time.monotonic() < settle:
        gc.collect()  # what only the collector would close is not a leak
        time.sleep(0.05)
        after = held()
    strays = lost()
    if new(after, before) or strays:
        code, line, callee = sites[point]
        leaks.append(f"{code.co_qualname}:{line} -> {callee.co_qualname}: "
                     f"{sorted(new(after, before))} {len(strays)} made ahead lost")
        for stray in psutil.Process().children():  # the next point starts clean
            if child(stray) not in before or stray in strays:
                stray.kill()
                stray.wait()
    point += 1
host.close()
report("leaks", point, leaks)
"""


@pytest.mark.parametrize("mode", ["zygote", "bwrap", "kept", "warm", "landlock"])
def test_a_ctrl_c_anywhere_in_a_launch_leaves_no_descriptor_or_process(
    mode: str, tmp_path: Path
) -> None:
    """A ``KeyboardInterrupt`` at each call site the launch enters: afterwards the process
    holds no descriptor and no child process it did not hold before the call (before: the
    seccomp pipe, the waiting bwrap of a sandbox made ahead with its four descriptors, or
    the module's process, at 15 to 30 sites of each way of running)."""
    sh_module(tmp_path / "home", "sh", writes=())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _SCENARIO, mode, str(tmp_path / "home")],
                          capture_output=True, text=True, env=env, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    if done.stdout.startswith("SKIP"):
        pytest.skip(f"no {mode} sandbox here: {done.stdout[5:].strip()}")
    lines = done.stdout.splitlines()
    assert int(lines[0].split()[1]) > 50, lines[0]  # the launch was really walked through
    assert lines[1] == "leaks 0", "\n".join(lines[1:])


_SNAPSHOT = _PRESS + """
import os, signal, sys
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel, however started
home, store, runs = (Path(arg) for arg in sys.argv[1:4])
os.environ["MURMUR_NB_SNAPSHOTS"] = str(store)
import murmur_nb as mnb
from murmur_nb._modules.snapshot import SnapshotStore  # private: the step the Ctrl-C lands in
from murmur_nb._modules.workspace import Workspace  # private: the step the Ctrl-C lands in
from murmur_nb._files.scratch import remove_tree  # private: removes a read-only build folder

policy = mnb.Policy(sandbox_mechanisms=("landlock", "seccomp", "reaper"))
STEPS = (SnapshotStore._build.__code__, Workspace.cwd.__wrapped__.__code__)
PACKAGE = str(Path(mnb.__file__).parent) + "/"
point, left = 0, []
while True:
    host = mnb.ModuleHost(home=home, policy=policy, runs_dir=runs)
    sites = []
    press_once(presser(STEPS, point, sites, PACKAGE),
               lambda: host.invoke("sh.run", {}, progress=False))  # fmt: skip
    host.close()
    if len(sites) <= point:
        break
    found = [*store.glob(".build-*"), *runs.glob("cwd-*")]
    if found:
        code, line, callee = sites[point]
        left.append(f"{code.co_qualname}:{line} -> {callee.co_qualname}: "
                    f"{[p.name for p in found]}")
        for folder in found:  # the next point starts clean
            remove_tree(folder)
    point += 1
report("left", point, left)
"""


def test_a_ctrl_c_anywhere_in_a_snapshot_or_working_folder_leaves_no_folder(
    tmp_path: Path,
) -> None:
    """A ``KeyboardInterrupt`` at each call site entered while a host makes a module's
    snapshot (a new host copies it into the store again) and its call's working folder (the
    Landlock sandbox: made on the disk): afterwards neither a ``.build-*`` folder in the
    store nor a ``cwd-*`` folder in the runs folder is left (before: an interrupt as the
    build folder's lock file was made, or just after it was locked, left the folder in the
    store, never swept while the kernel lived, or for good without its lock file; one as the
    working folder was handed over left it)."""
    sh_module(tmp_path / "home", "sh", writes=())
    (tmp_path / "runs").mkdir(mode=0o700)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [str(tmp_path / name) for name in ("home", "store", "runs")]
    done = subprocess.run([sys.executable, "-c", _SNAPSHOT, *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    lines = done.stdout.splitlines()
    assert int(lines[0].split()[1]) > 20, lines[0]  # the steps were really walked through
    assert lines[1] == "left 0", "\n".join(lines)


_NETWORK = _PRESS + """
import os, signal, sys, threading, time
from pathlib import Path
import psutil
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel, however started
os.environ["MURMUR_NB_ZYGOTE"] = "off"  # the module is this process's child
import murmur_nb as mnb
from murmur_nb._sandbox import netguard  # private: the step the Ctrl-C lands in

host = mnb.ModuleHost(home=Path(sys.argv[1]), policy=mnb.Policy(network=["*"]))
if not netguard.available()[0]:
    print("SKIP", host.sandbox.confinement, flush=True)
    sys.exit(0)
assert host.invoke("netprobe.reach", {"targets": []}).ok
SPAWN = netguard.spawn.__code__


def left():
    \"\"\"Children of this process (ended ones not reaped too), and start threads.\"\"\"
    threads = [t.name for t in threading.enumerate() if t.name == "murmur-nb module start"]
    return [f"child {p.pid} {p.status()}" for p in psutil.Process().children()] + threads


point, leaks = 0, []
while True:
    sites = []

    def press(frame, event, arg):
        caller = frame.f_back
        if event == "call" and caller is not None and caller.f_code is SPAWN:
            sites.append(frame.f_code.co_qualname)
            if len(sites) == point + 1:
                raise KeyboardInterrupt  # as the signal handler raises it
        return None

    press_once(press, lambda: host.invoke("netprobe.reach", {"targets": []}, progress=False))
    if len(sites) <= point:
        break
    settle = time.monotonic() + 5  # the start thread ends what it started
    while left() and time.monotonic() < settle:
        time.sleep(0.05)
    if left():
        leaks.append(f"{sites[point]}: {left()}")
        for stray in psutil.Process().children():
            stray.kill()
            stray.wait()
    point += 1
host.close()
report("leaks", point, leaks)
"""


def test_a_ctrl_c_as_a_network_granted_module_starts_leaves_no_process_or_thread(
    tmp_path: Path,
) -> None:
    """A ``KeyboardInterrupt`` at each call the start of a network-granted module makes (its
    thread started, its start waited for): afterwards no child process and no start thread
    is left (before: past the thread's start the module ran on, unread and unreaped, and
    its thread waited for good)."""
    install(tmp_path / "home", "netprobe", "netprobe")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _NETWORK, str(tmp_path / "home")],
                          capture_output=True, text=True, env=env, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    if done.stdout.startswith("SKIP"):
        pytest.skip(f"no network check here: {done.stdout[5:].strip()}")
    lines = done.stdout.splitlines()
    assert int(lines[0].split()[1]) >= 4, lines[0]  # the thread's start, the wait for it
    assert lines[1] == "leaks 0", "\n".join(lines[1:])
