"""A hostile fixture module: each capability really tries one attack and reports what happened.

The test that invokes it checks the world afterwards (files, a loopback listener, live
processes); what the module reports is only a second witness. Targets come in the input, as
if the attacker had guessed them.
"""

import ctypes
import os
import platform
import signal
import socket
import sys
import time
from pathlib import Path

from _proto import capability, descriptor, envelope, main


def default():
    return descriptor(
        [capability(n) for n in ("read", "write", "connect", "sockets", "spy", "signal",
                                 "daemons", "listdir", "forkbomb", "hold")],
        permissions={"filesystem_read": ["src", "staged"], "filesystem_write": ["out"],
                     "network": ["api.example"]},
    )


def attempt(action):
    try:
        return {"ok": True, "value": action()}
    except OSError as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc.strerror or exc}"}


def write_into(path):
    def action():
        with open(path, "a") as fh:  # noqa: PTH123
            fh.write("pwned")
        return "written"
    return action


def walk(top):
    """Every file under ``top``, relative; an unreadable folder raises."""
    def fail(exc):
        raise exc
    return sorted(str(Path(d, f).relative_to(top))
                  for d, _, files in os.walk(top, onerror=fail) for f in files)


def connect(host, port):
    with socket.create_connection((host, port), timeout=2) as sock:
        sock.sendall(b"exfiltrated")
    return "sent"


def send_udp(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"exfiltrated", ("127.0.0.1", port))
    return "sent"


def send_unix(address):
    """Connect to a Unix socket (``@name``: the abstract namespace) and send."""
    where = "\0" + address[1:] if address.startswith("@") else address
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect(where)
        sock.sendall(b"exfiltrated")
    return "sent"


def _unix(address):
    return "\0" + address[1:] if address.startswith("@") else address


def pair_send(address, how):
    """Through a pair of datagram sockets of its own (``socketpair`` is not ``socket``), send
    to a Unix address (``@name``: abstract): ``sendto``, ``connect`` then ``send``, or
    ``sendmsg`` (whose address no filter can read)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        if how == "sendto":
            a.sendto(b"exfiltrated", _unix(address))
        elif how == "connect":
            b.connect(_unix(address))
            b.send(b"exfiltrated")
        else:
            a.sendmsg([b"exfiltrated"], [], 0, _unix(address))
    return "sent"


def pair_squat(address):
    """One end of a datagram pair bound to a Unix name (``@name``) a kernel-side client
    sends to: what it receives within two seconds."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.connect(b.fileno(), bytes(2), 2) != 0:  # AF_UNSPEC: anyone may send to it
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        b.bind(_unix(address))
        b.settimeout(2)
        return b.recv(100).decode()


def io_uring():
    """Set up an io_uring (whose IORING_OP_SOCKET makes sockets without ``socket``)."""
    if platform.machine() not in ("x86_64", "aarch64"):
        return "not tried on this architecture"
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(425, 4, params)  # io_uring_setup has the same number on both
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    os.close(fd)
    return "ring created"


def heartbeat(out, i):
    """A fully detached daemon: double fork, setsid, stdio closed, cwd moved; beats forever."""
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.chdir("/")
    ident = f"{os.getpid()} {Path('/proc/self/ns/pid').readlink()}"
    Path(out, f"daemon{i}.pid.tmp").write_text(ident)
    Path(out, f"daemon{i}.pid.tmp").replace(Path(out, f"daemon{i}.pid"))
    while True:
        with open(Path(out, f"beat{i}"), "a") as fh:  # noqa: PTH123
            fh.write(".")
        time.sleep(0.02)


def forkbomb(limit):
    """Fork up to ``limit`` children that each hold on for a minute; how many were made."""
    made, pids, refused = 0, [], None
    for _ in range(limit):
        try:
            pid = os.fork()
        except OSError as exc:
            refused = errno_name(exc)
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
        pids.append(pid)
    return {"made": made, "refused": refused, "pids": pids}


def errno_name(exc):
    import errno
    return errno.errorcode.get(exc.errno, str(exc.errno))


def resolve(request, path):
    """``root:<name>/<rel>`` names a path under a supplied root, ``self:<rel>`` one in the
    module's own folder (the snapshot it runs from); anything else is literal."""
    if path.startswith("self:"):
        return str(Path(__file__).resolve().parent / path[5:])
    if not path.startswith("root:"):
        return path
    name, _, rel = path[5:].partition("/")
    return str(Path(request["roots"][name]["path"], rel))


def handle(name, request):
    rid = request["request_id"]
    inp = dict(request.get("input") or {})
    if "paths" in inp:
        inp["paths"] = {p: resolve(request, p) for p in inp["paths"]}
    if name == "read":
        return envelope("invoke", rid, result={
            p: attempt(lambda r=r: Path(r).read_bytes().decode("utf-8", "replace"))
            for p, r in inp["paths"].items()})
    if name == "listdir":
        return envelope("invoke", rid, result={
            p: attempt(lambda r=r: walk(r)) for p, r in inp["paths"].items()})
    if name == "write":
        return envelope("invoke", rid, result={
            p: attempt(write_into(r)) for p, r in inp["paths"].items()})
    if name == "connect":
        return envelope("invoke", rid, result=attempt(lambda: connect("127.0.0.1", inp["port"])))
    if name == "sockets":  # every other way out: UDP, abstract and path-named Unix sockets
        return envelope("invoke", rid, result={
            "udp": attempt(lambda: send_udp(inp["udp"])),
            "abstract": attempt(lambda: send_unix(inp["abstract"])),
            "path": attempt(lambda: send_unix(resolve(request, inp["path"]))),
            **{f"pair_{how}": attempt(lambda how=how: pair_send(inp["dgram"], how))
               for how in ("sendto", "connect", "sendmsg")},
            "pair_path": attempt(lambda: pair_send(resolve(request, inp["dgram_path"]),
                                                   "sendto")),
            "pair_squat": attempt(lambda: pair_squat(inp["squat"])),
            "io_uring": attempt(io_uring),
        })
    if name == "spy":
        pid = inp["pid"]
        found = {}
        for what in ("environ", "cmdline", "mem", "maps"):
            found[what] = attempt(lambda w=what: Path(f"/proc/{pid}/{w}").read_bytes()[:4096]
                                  .decode("latin-1"))
        # every process this module can see, and its command line
        found["visible_pids"] = attempt(
            lambda: sorted(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()))
        seen = found["visible_pids"].get("value", [])
        found["cmdlines"] = {"ok": True, "value": [
            attempt(lambda p=p: Path(f"/proc/{p}/cmdline").read_bytes().decode("latin-1"))
            for p in seen]}
        return envelope("invoke", rid, result=found)
    if name == "signal":
        return envelope("invoke", rid, result=attempt(
            lambda: os.kill(inp["pid"], signal.SIGKILL) or "sent"))
    if name == "forkbomb":
        return envelope("invoke", rid, result=forkbomb(inp["limit"]))
    if name == "hold":  # say who we are, then stay until told
        out = request["roots"]["out"]["path"]
        mine = Path(out, f"{inp['role']}.pid")  # whole or absent: the other call reads it
        mine.with_suffix(".tmp").write_text(str(os.getpid()))
        mine.with_suffix(".tmp").replace(mine)
        while not Path(out, f"{inp['role']}.stop").exists():
            time.sleep(0.02)
        return envelope("invoke", rid, result={"held": inp["role"]})
    if name == "daemons":
        out = request["roots"]["out"]["path"]
        for i in range(5):
            heartbeat(out, i)
        end = time.monotonic() + 10  # every daemon is up and beating before going on
        while time.monotonic() < end and not all(
                Path(out, f"beat{i}").exists() for i in range(5)):
            time.sleep(0.01)
        then = inp.get("then", "answer")
        if then == "hang":
            time.sleep(3600)
        if then == "flood":
            chunk = b"x" * (1 << 20)
            for _ in range(64):
                sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        return envelope("invoke", rid, result={"daemons": 5})
    return envelope("invoke", rid, error={"code": "unknown", "message": name,
                                          "retryable": False, "details": None})


main(default, handle)
