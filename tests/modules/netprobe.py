"""A network-granted fixture module that reaches for this machine's services, as an attacker.

``reach`` tries each target of its input for real (TCP connect and send, a UDP datagram by
``sendto`` or ``sendmsg``, an abstract Unix socket) and reports what happened. ``race``
connects (or sends) again and again through one ``sockaddr`` buffer that a second thread
rewrites, as fast as it can, between an allowed address and a forbidden one. ``unspec``
sends UDP to loopback through a ``sockaddr_in`` whose family says ``AF_UNSPEC``;
``interface`` sends to an outside address out of the loopback device (``SO_BINDTODEVICE``,
``IP_UNICAST_IF``, an ``IP_PKTINFO`` control message) or with an ``SO_MARK`` control
message; ``reuse`` blocks one thread in a long ``sendmsg`` while another disconnects the
socket, so that the host would send on a closed descriptor whose number the kernel has
reused; ``listen`` joins a loopback service of this machine (``SO_REUSEPORT``) and answers
its clients. The tests check the listeners, not only this report.
"""

import ctypes
import errno
import socket
import struct
import threading
import time

from _proto import capability, descriptor, envelope, main


def default():
    return descriptor([capability(c) for c in ("reach", "race", "unspec", "interface",
                                                 "reuse", "listen")],
                      permissions={"network": ["*"]})


def attempt(action):
    try:
        return {"ok": True, "value": action()}
    except OSError as exc:
        return {"ok": False, "errno": exc.errno,
                "error": f"{type(exc).__name__}: {exc.strerror or exc}"}


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def tcp(host, port, payload):
    with socket.socket(family_of(host), socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        sock.connect((host, port))
        sock.sendall(payload.encode())
        sock.settimeout(1)
        try:
            return sock.recv(200).decode("latin-1")
        except TimeoutError:
            return ""


def udp(host, port, payload, how):
    with socket.socket(family_of(host), socket.SOCK_DGRAM) as sock:
        if how == "sendmsg":
            return sock.sendmsg([payload.encode()], [], 0, (host, port))
        if how == "connect":
            sock.connect((host, port))
            return sock.send(payload.encode())
        return sock.sendto(payload.encode(), (host, port))


def unix(name, payload):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect("\0" + name)
        sock.sendall(payload.encode())
    return "sent"


def reach(target):
    kind, payload = target["kind"], target.get("payload", "exfiltrated")
    if kind == "tcp":
        return attempt(lambda: tcp(target["host"], target["port"], payload))
    if kind == "udp":
        return attempt(lambda: udp(target["host"], target["port"], payload,
                                   target.get("how", "sendto")))
    if kind == "unix":
        return attempt(lambda: unix(target["socket"], payload))
    raise ValueError(kind)


def sockaddr_in(host, port):
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + \
        socket.inet_aton(host) + bytes(8)


def race(inp):
    """``rounds`` connects (or UDP sends) through one buffer flipped by another thread."""
    libc = ctypes.CDLL(None, use_errno=True)
    good, bad = sockaddr_in(*inp["allowed"]), sockaddr_in(*inp["forbidden"])
    buf = ctypes.create_string_buffer(good, len(good))
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            ctypes.memmove(buf, bad, len(bad))
            ctypes.memmove(buf, good, len(good))

    flippers = [threading.Thread(target=flip) for _ in range(2)]
    for thread in flippers:
        thread.start()
    counts = {}
    udp_mode = inp.get("udp", False)
    try:
        for _ in range(inp["rounds"]):
            kind = socket.SOCK_DGRAM if udp_mode else socket.SOCK_STREAM
            with socket.socket(socket.AF_INET, kind) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 1, 0))
                if udp_mode:
                    done = libc.sendto(sock.fileno(), b"raced", 5, 0, buf, 16)
                else:
                    done = libc.connect(sock.fileno(), buf, 16)
                code = "ok" if done >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
                counts[code] = counts.get(code, 0) + 1
    finally:
        stop.set()
        for thread in flippers:
            thread.join()
    return counts


LIBC = ctypes.CDLL(None, use_errno=True)


def raw_call(done):
    return done if done >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def message(name, payload, count=1):
    """A ``struct msghdr`` naming ``name`` with ``count`` copies of ``payload`` (kept alive)."""
    keep = [ctypes.create_string_buffer(name, len(name)),
            ctypes.create_string_buffer(payload, len(payload))]
    iov = struct.pack("<QQ", ctypes.addressof(keep[1]), len(payload)) * count
    keep.append(ctypes.create_string_buffer(iov, len(iov)))
    header = struct.pack("<QI4xQQQQi4x", ctypes.addressof(keep[0]) if name else 0, len(name),
                         ctypes.addressof(keep[2]), count, 0, 0, 0)
    return header, keep


def unspec(inp):
    """UDP to ``host:port`` by ``sendto``, ``sendmsg`` and ``sendmmsg``, family AF_UNSPEC."""
    name = struct.pack("<H", socket.AF_UNSPEC) + struct.pack(">H", inp["port"]) + \
        socket.inet_aton(inp["host"]) + bytes(8)
    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fd = sock.fileno()
        out["sendto"] = raw_call(LIBC.sendto(fd, b"unspec-sendto", 13, 0, name, len(name)))
        header, keep = message(name, b"unspec-sendmsg")
        out["sendmsg"] = raw_call(LIBC.sendmsg(fd, header, 0))
        header, keep = message(name, b"unspec-sendmmsg")
        vector = ctypes.create_string_buffer(header + bytes(8), len(header) + 8)
        out["sendmmsg"] = raw_call(LIBC.sendmmsg(fd, vector, 1, 0))
        del keep
    return out


def interface(inp):
    """UDP to an outside address out of the loopback device, three ways, and with a mark a
    routing rule may send out of it (``SO_MARK`` as a control message)."""
    where = (inp["host"], inp["port"])
    lo = socket.if_nametoindex("lo")

    def bound(sock):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")
        return sock.sendto(b"bindtodevice", where)

    def unicast_if(sock):
        sock.setsockopt(socket.IPPROTO_IP, 50, struct.pack(">I", lo))  # IP_UNICAST_IF
        return sock.sendto(b"unicast-if", where)

    def pktinfo(sock):
        info = struct.pack("<I4s4s", lo, bytes(4), bytes(4))
        return sock.sendmsg([b"pktinfo"], [(socket.IPPROTO_IP, 8, info)], 0, where)

    def mark(sock):  # SO_MARK as a control message: the host would apply it, as root
        value = struct.pack("I", inp.get("mark", 0x1337))
        return sock.sendmsg([b"marked"], [(socket.SOL_SOCKET, 36, value)], 0, where)

    out = {}
    for name, how in (("bindtodevice", bound), ("unicast_if", unicast_if),
                      ("pktinfo", pktinfo), ("mark", mark)):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            out[name] = attempt(lambda: how(sock))  # noqa: B023 - called at once
    return out


def listen(inp):
    """Join a service of this machine on ``127.0.0.1:port`` (``SO_REUSEPORT``: the kernel
    shares its connections among the sockets of one owner) and take what its clients send
    for ``seconds``."""
    taken = []
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", inp["port"]))
        sock.listen(16)
        sock.settimeout(0.1)
        deadline = time.monotonic() + inp["seconds"]
        while time.monotonic() < deadline:
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                taken.append(conn.recv(100).decode())
                conn.sendall(b"module-answer")
    return taken


def reuse(inp):
    """``rounds`` times (or until ``seconds`` pass): a thread's 1024-piece ``sendmsg`` on a
    fresh TCP socket, and this thread's ``connect(AF_UNSPEC)`` on it meanwhile."""
    header, keep = message(b"", b"MODULE-INJECTED|", 1024)
    disconnect = bytes(16)
    counts = {}
    deadline = time.monotonic() + inp["seconds"]
    while sum(counts.values()) < inp["rounds"] and time.monotonic() < deadline:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            fd = sock.fileno()
            done = []
            sender = threading.Thread(target=lambda f, d: d.append(
                raw_call(LIBC.sendmsg(f, header, 0))), args=(fd, done))
            sender.start()
            time.sleep(0.001)
            LIBC.connect(fd, disconnect, len(disconnect))
            sender.join()
        key = "sent" if isinstance(done[0], int) else done[0]
        counts[key] = counts.get(key, 0) + 1
    del keep
    return counts


def handle(name, request):
    rid = request["request_id"]
    inp = request.get("input") or {}
    if name == "reach":
        return envelope("invoke", rid, result={t["name"]: reach(t) for t in inp["targets"]})
    if name in ("race", "unspec", "interface", "reuse"):
        return envelope("invoke", rid, result=globals()[name](inp))
    if name == "listen":
        return envelope("invoke", rid, result=attempt(lambda: listen(inp)))
    return envelope("invoke", rid, error={"code": "unknown", "message": name,
                                          "retryable": False, "details": None})


main(default, handle)
