# ruff: noqa: PTH123
"""A hostile fixture module that reaches past the sandbox's limits (red-team trial 1).

``ipc`` makes SysV IPC objects in the host's IPC namespace and leaves them (a shared memory
segment it fills, a semaphore set, a message queue, a POSIX queue); ``ipc_read`` attaches
segments by id, as a module guessing another process's would, and reads what they hold.
``forks`` forks children that wait, as many as it can up to ``limit``. ``fill`` writes to a
file in ``/tmp`` (or its working folder) until the write fails, and reads the host's shared
memory before and after where it sees ``/proc/meminfo``. ``hog`` forks a child that waits,
then takes ``mib`` MiB of memory, every page written, and holds it for ``hold_s`` seconds.
"""

import ctypes
import errno
import os
import signal
import time

from _proto import capability, descriptor, envelope, main

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.shmat.restype = ctypes.c_void_p
_LIBC.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
IPC_CREAT, SHM_RDONLY = 0o1000, 0o10000


def default():
    return descriptor([capability(n) for n in ("ipc", "ipc_read", "forks", "fill", "hog")])


def failed():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def ipc(key, size):
    made = {}
    sid = _LIBC.shmget(key, ctypes.c_size_t(size), IPC_CREAT | 0o666)
    made["shmget"] = sid if sid >= 0 else failed()
    if sid >= 0:
        addr = _LIBC.shmat(sid, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            made["shmat"] = failed()
        else:
            ctypes.memset(addr, 0x41, size)  # every page touched: real memory
            made["shmat"] = "filled"
    sem = _LIBC.semget(key, 1, IPC_CREAT | 0o666)
    made["semget"] = sem if sem >= 0 else failed()
    msg = _LIBC.msgget(key, IPC_CREAT | 0o666)
    made["msgget"] = msg if msg >= 0 else failed()
    _LIBC.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    mq = _LIBC.mq_open(b"/murmur-nb-limits", os.O_CREAT | os.O_RDWR, 0o666, None)
    made["mq_open"] = mq if mq >= 0 else failed()
    return made


def ipc_read(ids):
    seen = {}
    for sid in ids:
        addr = _LIBC.shmat(sid, None, SHM_RDONLY)
        if addr in (None, ctypes.c_void_p(-1).value):
            seen[str(sid)] = failed()
        else:
            seen[str(sid)] = ctypes.string_at(addr, 32).split(b"\0")[0].decode("latin1")
    return seen


def forks(limit):
    made, refused, pids = 0, None, []
    for _ in range(limit):
        try:
            pid = os.fork()
        except OSError as exc:
            refused = errno.errorcode.get(exc.errno, str(exc.errno))
            break
        if pid == 0:
            signal.pause()
            os._exit(0)
        made += 1
        pids.append(pid)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for pid in pids:
        os.waitpid(pid, 0)
    return {"made": made, "refused": refused}


def shmem_kib():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("Shmem:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def fill(where, mib):
    path = os.path.join(os.getcwd() if where == "cwd" else "/tmp", "fill")  # noqa: PTH109, PTH118
    before, wrote, refused = shmem_kib(), 0, None
    chunk = b"\xff" * (1 << 20)
    try:
        with open(path, "wb") as fh:
            for _ in range(mib):
                fh.write(chunk)
                fh.flush()
                wrote += len(chunk)
    except OSError as exc:
        refused = errno.errorcode.get(exc.errno, str(exc.errno))
    wrote = os.path.getsize(path)  # noqa: PTH202
    during = shmem_kib()
    st = os.statvfs(os.path.dirname(path))  # noqa: PTH120
    os.unlink(path)  # noqa: PTH108
    time.sleep(0)
    return {
        "wrote": wrote,
        "refused": refused,
        "size": st.f_blocks * st.f_frsize,
        "shmem_before_kib": before,
        "shmem_during_kib": during,
    }


def hog(mib, hold_s):
    child = os.fork()
    if child == 0:
        signal.pause()
        os._exit(0)
    held = [b"\x01" * (8 << 20) for _ in range(mib // 8)]
    time.sleep(hold_s)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    return {"held_mib": 8 * len(held)}


def handle(name, request):
    inp = dict(request.get("input") or {})
    results = {
        "ipc": lambda: ipc(inp["key"], inp["size"]),
        "ipc_read": lambda: ipc_read(inp["ids"]),
        "forks": lambda: forks(inp["limit"]),
        "fill": lambda: fill(inp.get("where", "tmp"), inp["mib"]),
        "hog": lambda: hog(inp["mib"], inp.get("hold_s", 0)),
    }
    return envelope("invoke", request["request_id"], result=results[name]())


if __name__ == "__main__":
    main(default, handle)
