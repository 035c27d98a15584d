# ruff: noqa: PTH115, PTH118, PTH123, PTH208
# (each attempt is the raw system call the sandbox must refuse, as a module would make it)
"""A hostile fixture module that reaches for the kernel's own attack surface (finding 7).

``namespaces`` makes a user namespace (``unshare``, ``clone``, ``clone3``, the ``unshare``
command) and, holding every capability there, mounts a tmpfs over its ``rw`` root and writes
a marker into it: when no mount happened the marker lands in the real root, where the test
finds it. ``capabilities`` reads the inheritable, bounding and ambient sets (from
``/proc/self/status`` where there is a ``/proc``, and from the system calls everywhere).
``descriptors`` lists every open descriptor (``/proc/self/fd`` where there is one, and
``fstat`` of every number below the descriptor limit). ``ordinary`` does what a legitimate
module does: threads, ``fork``, ``subprocess``, and runs the programs it is given.
"""

import ctypes
import errno
import os
import platform
import resource
import shutil
import subprocess
import threading

from _proto import HERE, capability, descriptor, envelope, main

_LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUSER, SIGCHLD = 0x00020000, 0x10000000, 17
#: (clone, clone3) system call numbers
_CLONE = {"x86_64": (56, 435), "aarch64": (220, 435)}
PR_CAPBSET_READ, PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET = 23, 47, 1


def default():
    return descriptor(
        [capability(n) for n in ("namespaces", "capabilities", "descriptors", "ordinary")],
        permissions={"filesystem_write": ["out"]},
    )


def attempt(action):
    try:
        return {"ok": True, "value": action()}
    except OSError as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc.strerror or exc}"}


def write_text(path, text):
    def action():
        with open(path, "w") as fh:
            fh.write(text)
        return "written"
    return action


def _errno_of(result):
    """``"ok"`` for a call that succeeded, else the name of its errno."""
    if result >= 0:
        return "ok"
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def _child_exits(pid):
    """A raw clone or clone3 returned ``pid``: 0 in the child, which leaves at once."""
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)


def namespaces(out):
    uid, gid = os.getuid(), os.getgid()
    made = {"unshare": _errno_of(_LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS))}
    if made["unshare"] == "ok":  # root of the new namespace: map it to the ids outside
        made["maps"] = [attempt(write_text(f"/proc/self/{name}", text)) for name, text in (
            ("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1"))]
    made["mount"] = _errno_of(_LIBC.mount(b"none", out.encode(), b"tmpfs", 0, None))
    # into the tmpfs if it was mounted, else into the root, where the test finds it
    made["marker"] = attempt(write_text(os.path.join(out, "marker"), "after the mount"))
    numbers = _CLONE.get(platform.machine())
    if numbers is not None:
        pid = _LIBC.syscall(numbers[0], ctypes.c_ulong(CLONE_NEWUSER | SIGCHLD), 0, 0, 0, 0)
        made["clone"] = _errno_of(pid)
        _child_exits(pid)
        args = (ctypes.c_uint64 * 11)(CLONE_NEWUSER, 0, 0, 0, SIGCHLD)  # struct clone_args
        pid = _LIBC.syscall(numbers[1], args, ctypes.c_size_t(ctypes.sizeof(args)))
        made["clone3"] = _errno_of(pid)
        _child_exits(pid)
    made["setns"] = _errno_of(_LIBC.setns(0, CLONE_NEWUSER))  # fd 0 is no namespace
    tool = shutil.which("unshare", path="/usr/bin:/bin")
    if tool is not None:
        script = f"mount -t tmpfs none {out} && echo in-tmpfs > {out}/tool-marker"
        ran = subprocess.run([tool, "--user", "--map-root-user", "--mount", "/bin/sh", "-c",
                              script], capture_output=True, text=True, check=False)
        made["tool"] = {"status": ran.returncode, "stderr": ran.stderr.strip()[-200:]}
    return made


def _status_lines():
    try:
        with open("/proc/self/status") as fh:
            return {k: v.strip() for k, _, v in (line.partition(":") for line in fh)
                    if k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc.strerror}"}


def capabilities():
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; twice
    if _LIBC.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    bounding = ambient = 0
    for cap in range(64):
        if _LIBC.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1:
            bounding |= 1 << cap
        if _LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1:
            ambient |= 1 << cap
    return {
        "status": _status_lines(),
        "effective": data[0] | data[3] << 32, "permitted": data[1] | data[4] << 32,
        "inheritable": data[2] | data[5] << 32, "bounding": bounding, "ambient": ambient,
    }


def descriptors():
    limit = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)
    probed = []
    for fd in range(limit):
        try:
            os.fstat(fd)
        except OSError:
            continue
        probed.append(fd)
    try:
        names = os.listdir("/proc/self/fd")
    except OSError as exc:
        return {"fstat": probed, "proc": f"{type(exc).__name__}: {exc.strerror}"}
    targets = {}
    for name in names:
        try:  # the listing's own descriptor is closed by now: it has no entry any more
            targets[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:
            continue
    names = sorted(targets)
    return {"fstat": probed, "proc": names, "targets": targets}


def ordinary(inp):
    done = []

    def work(i):
        done.append(sum(range(10_000 * (i + 1))) > 0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    shell = subprocess.run(["/bin/sh", "-c", "echo shell"], capture_output=True, text=True,
                           check=False)
    ran = {}
    for name, given in inp.get("programs", {}).items():  # "{here}": this module's folder
        argv = [arg.replace("{here}", str(HERE)) for arg in given]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
        ran[name] = {"status": proc.returncode, "stdout": proc.stdout.strip()[-300:],
                     "stderr": proc.stderr.strip()[-300:]}
    return {"threads": done, "fork": forked, "subprocess": shell.stdout.strip(),
            "programs": ran}


def handle(name, request):
    rid = request["request_id"]
    inp = dict(request.get("input") or {})
    out = request["roots"]["out"]["path"]
    results = {
        "namespaces": lambda: namespaces(out),
        "capabilities": capabilities,
        "descriptors": descriptors,
        "ordinary": lambda: ordinary(inp),
    }
    return envelope("invoke", rid, result=results[name]())


if __name__ == "__main__":
    main(default, handle)
