"""Where a network-granted module may connect: outside hosts, never this machine.

The address rule :mod:`.netguard` applies to every destination a module names. Refused:
loopback, ``0.0.0.0/8`` and ``::``, link-local (cloud metadata included), multicast and
broadcast, every address the kernel takes as this machine's own (its local and broadcast
routes, with their prefixes, and every address of its interfaces; looked up again at most
every second), and the IPv4-mapped, -compatible and 6to4 forms of these. Allowed on port 53 only:
the name servers of ``/etc/resolv.conf`` (in Docker, ``127.0.0.11``), which a module needs
to resolve an outside name. A grant naming hosts allows only their addresses.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Address", "Destinations"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NEVER = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "224.0.0.0/4",
        "255.255.255.255/32",
        "::/128",
        "::1/128",
        "fe80::/10",
        "ff00::/8",
        "fd00:ec2::254/128",
    )
)


@functools.cache
def _name_servers() -> frozenset[Address]:
    found: set[Address] = set()
    try:
        with open("/etc/resolv.conf", encoding="utf-8", errors="replace") as fh:  # noqa: PTH123
            for line in fh:
                words = line.split()
                if len(words) >= 2 and words[0] == "nameserver":
                    with contextlib.suppress(ValueError):
                        found.add(ipaddress.ip_address(words[1].split("%")[0]))
    except OSError:
        pass
    return frozenset(found)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_own: tuple[float, frozenset[Network]] = (0.0, frozenset())
_own_lock = threading.Lock()
#: IPv6 route flags of what the kernel delivers here (RTF_LOCAL, RTF_ANYCAST)
_RTF_LOCAL, _RTF_ANYCAST = 0x80000000, 0x00100000


def _own_networks() -> frozenset[Network]:
    """What this machine takes as its own (cached for 1 s): every local and broadcast route
    of the kernel's tables, with its prefix (an address added to ``lo`` as ``/24`` makes the
    whole ``/24`` local; a broadcast nobody declared is still delivered here), and, as a
    floor, every address and broadcast psutil lists for its interfaces."""
    global _own  # noqa: PLW0603 - one cache for the process, refreshed in place
    with _own_lock:
        if time.monotonic() - _own[0] < 1.0:
            return _own[1]
        import psutil  # noqa: PLC0415 - only for a granted module's destinations

        found: set[Network] = set(_local_routes())
        for entries in psutil.net_if_addrs().values():
            for entry in entries:
                for text in (entry.address, entry.broadcast):
                    if text and entry.family in (socket.AF_INET, socket.AF_INET6):
                        with contextlib.suppress(ValueError):
                            found.add(ipaddress.ip_network(text.split("%")[0]))
        _own = (time.monotonic(), frozenset(found))
        return _own[1]


def _local_routes() -> list[Network]:
    """The IPv4 ``LOCAL`` and ``BROADCAST`` entries of ``/proc/net/fib_trie`` and the IPv6
    local and anycast routes of ``/proc/net/ipv6_route`` (nothing where they cannot be read)."""
    found: list[Network] = []
    with contextlib.suppress(OSError), open("/proc/net/fib_trie", encoding="ascii") as fh:  # noqa: PTH123
        leaf = ""
        for line in fh:
            words = line.split()
            if len(words) == 2 and words[0] == "|--":
                leaf = words[1]
            elif (
                len(words) == 3
                and words[0].startswith("/")
                and leaf
                and words[2] in ("LOCAL", "BROADCAST")
            ):
                with contextlib.suppress(ValueError):
                    found.append(ipaddress.ip_network(f"{leaf}{words[0]}", strict=False))
    with contextlib.suppress(OSError), open("/proc/net/ipv6_route", encoding="ascii") as fh:  # noqa: PTH123
        for line in fh:
            words = line.split()
            with contextlib.suppress(ValueError, IndexError):
                if int(words[8], 16) & (_RTF_LOCAL | _RTF_ANYCAST):
                    found.append(
                        ipaddress.ip_network(
                            (ipaddress.IPv6Address(bytes.fromhex(words[0])), int(words[1], 16)),
                            strict=False,
                        )
                    )
    return found


def _embedded(address: Address) -> Address:
    """The IPv4 address an IPv6 one stands for (mapped, compatible, 6to4), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if int(address) >> 32 == 0 and int(address) > 1:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


@dataclass
class Destinations:
    """Where one network-granted call may connect: outside hosts, or only the granted ones.

    ``grants`` is the call's ``grants.network``: ``"*"`` allows every outside host; an
    address or network (``"203.0.113.7"``, ``"198.51.100.0/24"``) allows it; any other name
    is a host name the host resolves, the first time the module reaches for an address not
    yet allowed.
    """

    grants: tuple[str, ...]
    anywhere: bool = field(init=False)
    _networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(init=False, repr=False)
    _names: list[str] = field(init=False, repr=False)
    _resolved: bool = field(init=False, repr=False, default=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.anywhere = "*" in self.grants
        self._networks, self._names = [], []
        for name in self.grants:
            try:
                self._networks.append(ipaddress.ip_network(name, strict=False))
            except ValueError:
                if name != "*":
                    self._names.append(name)

    def refusal(self, address: Address, port: int) -> str | None:
        """Why the module may not reach ``address:port``, or ``None`` when it may."""
        plain = _embedded(address)
        if port == 53 and (address in _name_servers() or plain in _name_servers()):
            return None
        for candidate in {address, plain}:
            if any(candidate in net for net in _NEVER if net.version == candidate.version):
                return f"{address} is loopback, link-local, multicast or unspecified"
        own = _own_networks()
        if any(c in net for c in {address, plain} for net in own if net.version == c.version):
            return f"{address} is an address of this machine"
        if self.anywhere or self._granted(address) or self._granted(plain):
            return None
        return f"{address} is none of the granted hosts ({', '.join(self.grants)})"

    def _granted(self, address: Address) -> bool:
        if any(address in net for net in self._networks if net.version == address.version):
            return True
        with self._lock:  # names resolve once, when first needed
            if not self._resolved:
                self._resolved = True
                for name in self._names:
                    with contextlib.suppress(OSError, UnicodeError):
                        for *_, where in socket.getaddrinfo(name, None):
                            self._networks.append(ipaddress.ip_network(str(where[0]).split("%")[0]))
        return any(address in net for net in self._networks if net.version == address.version)

    @property
    def needs_lookup(self) -> bool:
        return bool(self._names) and not self._resolved
