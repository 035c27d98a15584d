"""A host standing for "the internet": a network namespace the test makes and routes to.

There is no real internet here, and a network-granted module may reach only what is not this
machine. As root, :func:`outside` makes a namespace joined to this one by a veth pair
(``10.213.N.1`` here, ``10.213.N.2`` there) and serves TCP and UDP on the far address from a
thread that entered the namespace; every payload it receives is recorded, and TCP gets the
reply ``outside-ok``. A run that cannot make one (an unprivileged user, a container) uses the
one its root parent made, named in ``MNB_TEST_OUTSIDE`` (``address,tcp,udp``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

_CLONE_NEWNET = 0x40000000
IP = shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin") or "ip"


@dataclass
class Outside:
    address: str
    tcp: int
    udp: int
    received: list[bytes] = field(default_factory=list)  # empty when served by a parent

    @property
    def env(self) -> str:
        return f"{self.address},{self.tcp},{self.udp}"


def _serve(namespace: str, address: str, ready: threading.Event, out: list[Outside],
           stop: threading.Event) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:  # this thread only
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(fd)
    tcp = socket.create_server((address, 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((address, 0))
    here = Outside(address, tcp.getsockname()[1], udp.getsockname()[1])
    out.append(here)
    ready.set()
    with tcp, udp:
        while not stop.is_set():
            readable, _, _ = select.select([tcp, udp], [], [], 0.1)
            if udp in readable:
                with contextlib.suppress(OSError):
                    here.received.append(udp.recv(200))
            if tcp not in readable:
                continue
            conn, _ = tcp.accept()
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    data = conn.recv(200)
                    if data:
                        here.received.append(data)
                        conn.sendall(b"outside-ok")


@contextlib.contextmanager
def outside() -> Iterator[Outside | None]:
    """The outside host: made here as root, else the parent's (``MNB_TEST_OUTSIDE``), else
    ``None`` (no way to make a namespace, and nobody made one)."""
    given = os.environ.get("MNB_TEST_OUTSIDE")
    if given:
        address, tcp, udp = given.split(",")
        yield Outside(address, int(tcp), int(udp))
        return
    if os.geteuid() != 0 or not shutil.which(IP):
        yield None
        return
    n = os.getpid() % 250 + 1
    namespace, near, far = f"mnb-out-{os.getpid()}", f"mnbh{n}", f"mnbo{n}"
    address = f"10.213.{n}.2"
    steps = [
        ["netns", "add", namespace],
        ["link", "add", near, "type", "veth", "peer", "name", far],
        ["link", "set", far, "netns", namespace],
        ["addr", "add", f"10.213.{n}.1/30", "dev", near],
        ["link", "set", near, "up"],
        ["-n", namespace, "addr", "add", f"{address}/30", "dev", far],
        ["-n", namespace, "link", "set", far, "up"],
        ["-n", namespace, "link", "set", "lo", "up"],
    ]
    stop, ready, out = threading.Event(), threading.Event(), []
    try:
        for step in steps:
            subprocess.run([IP, *step], check=True, capture_output=True, timeout=30)
        thread = threading.Thread(target=_serve, args=(namespace, address, ready, out, stop),
                                  daemon=True)
        thread.start()
        ready.wait(10)
        yield out[0]
        stop.set()
        thread.join(5)
    finally:
        subprocess.run([IP, "netns", "del", namespace], capture_output=True, check=False)
        subprocess.run([IP, "link", "del", near], capture_output=True, check=False)
