"""A network-granted fixture module that reaches for this machine's services, as an attacker.

``reach`` tries each target of its input for real (TCP connect and send, a UDP datagram by
``sendto`` or ``sendmsg``, an abstract Unix socket) and reports what happened. ``race``
connects (or sends) again and again through one ``sockaddr`` buffer that a second thread
rewrites, as fast as it can, between an allowed address and a forbidden one. The tests
check the listeners, not only this report.
"""

import ctypes
import errno
import socket
import struct
import threading

from _proto import capability, descriptor, envelope, main


def default():
    return descriptor([capability("reach"), capability("race")],
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


def handle(name, request):
    rid = request["request_id"]
    inp = request.get("input") or {}
    if name == "reach":
        return envelope("invoke", rid, result={t["name"]: reach(t) for t in inp["targets"]})
    if name == "race":
        return envelope("invoke", rid, result=race(inp))
    return envelope("invoke", rid, error={"code": "unknown", "message": name,
                                          "retryable": False, "details": None})


main(default, handle)
