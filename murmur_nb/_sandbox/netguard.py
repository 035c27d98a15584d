"""A network grant reaches outside hosts, never this machine: the host checks every destination.

A notebook machine runs services nobody expects a hostile client of on its loopback and its
own addresses: the kernel's ZeroMQ sockets, the Jupyter server, a Dask scheduler that runs
any code it is sent. A module with ``grants.network`` gets the outside network, and none of
those.

How. The module starts under a second seccomp filter whose socket calls stop and wait for the
host (seccomp user notification): ``socket``, ``connect``, ``sendto`` with an address,
``sendmsg`` and ``sendmmsg``. One supervisor thread per kernel answers them:

* ``socket``: TCP or UDP over IPv4 or IPv6 only (never a Unix, netlink, raw or packet
  socket). The host makes the socket and puts it into the module
  (``SECCOMP_IOCTL_NOTIF_ADDFD``), keeping its own descriptor of it.
* ``connect``, ``sendto``, ``sendmsg``, ``sendmmsg``: the host copies the destination and
  the data out of the module's memory once, checks the copy, and makes the call itself, on
  its own descriptor of the same socket, with that copy. Nothing is read from the module
  twice, so a thread that rewrites the address after the check changes nothing (the
  kernel's ``SECCOMP_USER_NOTIF_FLAG_CONTINUE`` would read it again: it is never used).
  A socket the host did not make (a ``socketpair``, an accepted connection) may ``send``
  and ``write`` but not name a destination.

A destination the rule of :mod:`.destinations` refuses (loopback, this machine's own
addresses, link-local and metadata, multicast; only the granted hosts when the grant names
them) fails with ``EACCES``, and nothing is sent.

Why not a namespace: a network namespace behind a user-mode stack (pasta, slirp4netns) needs
user namespaces, which a default Docker container or Kubernetes pod refuses, and still
reaches this machine's non-loopback addresses. This needs seccomp only (Linux 5.14), and no
``pidfd_getfd`` (Docker's profile refuses it without ``CAP_SYS_PTRACE``). Reading the module's
memory needs ptrace access to it: the supervisor is an ancestor of every module; root uses
``CAP_SYS_PTRACE``, and where root has none (a default Docker container) the supervisor's
thread takes the sandbox id's credentials, for that thread alone. Kept by the host until
the call ends: its descriptor of each UDP socket, and of a TCP socket until it is connected
(then the module's ``close`` must reach the peer).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import ipaddress
import os
import platform
import select
import socket
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from murmur_nb._files.libc import LIBC
from murmur_nb._sandbox.destinations import Address, Destinations

if TYPE_CHECKING:
    import subprocess

__all__ = ["Destinations", "available", "program", "spawn"]

T = TypeVar("T")

_SYSCALLS = {  # the calls the filter stops, by architecture
    "x86_64": {"socket": 41, "connect": 42, "sendto": 44, "sendmsg": 46, "sendmmsg": 307},
    "aarch64": {"socket": 198, "connect": 203, "sendto": 206, "sendmsg": 211, "sendmmsg": 269},
}
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_SYS_CREDS = {  # setgroups, setresgid, setresuid: raw, so that they change one thread only
    "x86_64": (116, 119, 117),
    "aarch64": (159, 149, 147),
}
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_FILTER_FLAG_NEW_LISTENER = 1 << 3
_ADDFD_FLAG_SEND = 1 << 1


def _ioc(direction: int, number: int, size: int) -> int:
    return (direction << 30) | (size << 16) | (ord("!") << 8) | number


_NOTIF = struct.Struct("<QIIiIQ6Q")  # struct seccomp_notif
_RESP = struct.Struct("<QqiI")  # struct seccomp_notif_resp
_ADDFD = struct.Struct("<QIIII")  # struct seccomp_notif_addfd
_RECV = _ioc(3, 0, _NOTIF.size)
_SEND = _ioc(3, 1, _RESP.size)
_ID_VALID = _ioc(1, 2, 8)
_ADD = _ioc(1, 3, _ADDFD.size)

_MSGHDR = struct.Struct("<QI4xQQQQi4x")  # struct msghdr (64-bit)
_MMSGHDR = _MSGHDR.size + 8  # struct mmsghdr: a msghdr, an unsigned msg_len, padding
_CMSGHDR = struct.Struct("<Qii")
_SOCK_TYPE_MASK = 0xF
_SOCK_NONBLOCK = os.O_NONBLOCK
_SOCK_CLOEXEC = os.O_CLOEXEC
_MSG_DONTWAIT = 0x40
_SCM_RIGHTS, _SCM_CREDENTIALS = 1, 2
#: the most a module's one send hands the host to copy (a stream send may then be partial)
_MAX_SEND = 1 << 20
_MAX_IOV = 1024
#: calls of one module the host may be making at once (past it: EAGAIN)
_MAX_INFLIGHT = 64
_SOL_IP, _SOL_IPV6 = socket.IPPROTO_IP, socket.IPPROTO_IPV6
#: socket options that pick the interface, the source or the first hop a packet leaves by,
#: by level: on the loopback device (or through ``::1``) an allowed outside address is
#: delivered to this machine's wildcard listeners. The filter refuses them (``EACCES``).
_ROUTING_OPTIONS = {
    socket.SOL_SOCKET: (25, 62, 36),  # SO_BINDTODEVICE, SO_BINDTOIFINDEX, SO_MARK
    # IP_OPTIONS (source routes), IP_MULTICAST_IF, IP_UNICAST_IF
    _SOL_IP: (4, 32, 50),
    # IPV6_2292PKTOPTIONS, IPV6_2292RTHDR, IPV6_NEXTHOP, IPV6_MULTICAST_IF, IPV6_PKTINFO,
    # IPV6_RTHDR, IPV6_UNICAST_IF
    _SOL_IPV6: (6, 5, 9, 17, 50, 57, 76),
}
#: the only control messages a send may carry (TOS, TTL, hop limit, traffic class,
#: don't-fragment); any other (``IP_PKTINFO``, ``IPV6_PKTINFO``, ``IP_RETOPTS``, a routing
#: header or next hop, and every one at ``SOL_SOCKET``: ``SO_MARK``, ``SO_PRIORITY``,
#: ``SCM_TXTIME``) names an interface, a source, a route or a mark: ``EACCES``
_HARMLESS_CONTROL = {_SOL_IP: (1, 2), _SOL_IPV6: (52, 62, 67)}


class _Refused(Exception):
    """A module's call the host answers with an errno instead of making it."""

    def __init__(self, code: int) -> None:
        super().__init__(os.strerror(code))
        self.code = code


def _destination(raw: bytes, *, connect: bool) -> tuple[Address, int] | None:
    """The address and port of a ``sockaddr_in``/``sockaddr_in6`` (``None``: ``AF_UNSPEC`` in a
    ``connect``, which disconnects). A send never names ``AF_UNSPEC``: Linux's IPv4 UDP send
    takes the address and port it carries all the same, so it would go unchecked."""
    if len(raw) < 2:
        raise _Refused(errno.EINVAL)
    family = struct.unpack_from("<H", raw)[0]
    if family == socket.AF_UNSPEC:
        if connect:
            return None
        raise _Refused(errno.EAFNOSUPPORT)
    if family == socket.AF_INET and len(raw) >= 8:
        return ipaddress.IPv4Address(raw[4:8]), struct.unpack_from(">H", raw, 2)[0]
    if family == socket.AF_INET6 and len(raw) >= 24:
        return ipaddress.IPv6Address(raw[8:24]), struct.unpack_from(">H", raw, 2)[0]
    raise _Refused(errno.EACCES)  # a Unix, netlink or packet address: never


# -- the filter -------------------------------------------------------------------------------


@functools.cache
def program() -> bytes | None:
    """The notification filter, which also refuses the socket options that pick an interface
    or a route (``None`` without libseccomp or on another architecture)."""
    if platform.machine() not in _SYSCALLS:
        return None
    try:
        import pyseccomp  # noqa: PLC0415 - optional at run time: libseccomp may be missing
    except (ImportError, OSError):
        return None
    try:
        rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
        for name in ("socket", "connect", "sendmsg", "sendmmsg"):
            rules.add_rule(pyseccomp.NOTIFY, name)
        rules.add_rule(pyseccomp.NOTIFY, "sendto", pyseccomp.Arg(4, pyseccomp.NE, 0))
        # a module connects out, never waits for others: a bound or listening socket (made
        # by the host, so owned by the kernel's uid) could join the kernel's own
        # SO_REUSEPORT listeners on loopback or hold a port a local client will connect to
        for name in ("bind", "listen"):
            rules.add_rule(pyseccomp.ERRNO(errno.EACCES), name)
        for level, options in _ROUTING_OPTIONS.items():  # int arguments: the low 32 bits
            for option in options:
                rules.add_rule(
                    pyseccomp.ERRNO(errno.EACCES),
                    "setsockopt",
                    pyseccomp.Arg(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, level),
                    pyseccomp.Arg(2, pyseccomp.MASKED_EQ, 0xFFFFFFFF, option),
                )
        with tempfile.TemporaryFile() as fh:
            rules.export_bpf(fh)
            fh.seek(0)
            return fh.read()
    except (ValueError, RuntimeError, OSError):
        return None


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _install(bpf: bytes) -> int:
    """Load the filter into the calling *thread* only; its listener's descriptor."""
    assert LIBC is not None
    if LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    buffer = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    fd = int(
        LIBC.syscall(
            _SYS_SECCOMP[platform.machine()],
            _SECCOMP_SET_MODE_FILTER,
            _FILTER_FLAG_NEW_LISTENER,
            ctypes.byref(prog),
        )
    )
    if fd < 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER) failed")
    return fd


def spawn(
    destinations: Destinations, start: Callable[[], T], abandon: Callable[[T], None]
) -> tuple[T, Callable[[], None]]:
    """Run ``start`` (which starts the module process) in a fresh thread that first loads the
    filter into itself: the module inherits it, the kernel's other threads never have it.
    The supervisor answers the module's socket calls from then on.

    Returns what ``start`` returned and ``release``, to call once the process has ended: the
    thread waits until then, because a parent-death signal (bwrap's ``--die-with-parent``)
    follows the *thread* that started a process, not its process. When this call is
    interrupted (a Ctrl-C as it waits for the start) what ``start`` started is nobody's:
    the thread hands it to ``abandon`` (which ends it) and ends too. Before, the process
    ran on unread and unreaped, and the thread waited for good.
    """
    bpf = program()
    if bpf is None:
        raise OSError("the network check needs libseccomp (pyseccomp) on x86-64 or AArch64")
    supervisor = _supervisor()
    out: list[T] = []
    failed: list[BaseException] = []
    started, ended, abandoned = threading.Event(), threading.Event(), threading.Event()

    def run() -> None:
        try:
            listener = _install(bpf)
        except BaseException as exc:
            failed.append(exc)
            started.set()
            return
        try:
            out.append(start())
        except BaseException as exc:
            failed.append(exc)
        finally:  # a started module waits for the supervisor; a failed start closes it
            supervisor.watch(listener, destinations)
            started.set()
        ended.wait()
        if abandoned.is_set() and out:
            abandon(out[0])

    thread = threading.Thread(target=run, name="murmur-nb module start", daemon=True)
    try:
        thread.start()
        started.wait()
        if failed:
            raise failed[0]
        return out[0], ended.set
    except BaseException:
        abandoned.set()  # what was started, or will be, is ended by the thread
        ended.set()
        raise


# -- the module's memory ------------------------------------------------------------------------


class _Iovec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


def _copy(pid: int, address: int, size: int, *, write: bytes | None = None) -> bytes:
    """Read ``size`` bytes at ``address`` of process ``pid`` (or write ``write`` there)."""
    if size == 0:
        return b""
    assert LIBC is not None
    buffer = ctypes.create_string_buffer(write or b"", size)
    local = _Iovec(ctypes.cast(buffer, ctypes.c_void_p), size)
    remote = _Iovec(address, size)
    call = LIBC.process_vm_writev if write is not None else LIBC.process_vm_readv
    done = call(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if done != size:
        raise _Refused(errno.EFAULT)
    return buffer.raw


# -- the supervisor ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Socket:
    fd: int  # the host's own descriptor of the module's socket (in a call: the call's own)
    inode: int
    family: int
    kind: int  # SOCK_STREAM or SOCK_DGRAM


@dataclass
class _Watch:
    """One module's listener, and the sockets the host made for it."""

    listener: int
    destinations: Destinations
    sockets: dict[int, _Socket] = field(default_factory=dict)  # by inode
    connected: set[int] = field(default_factory=set)  # inodes of TCP sockets let go
    inflight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        with self.lock:
            for sock in self.sockets.values():
                with contextlib.suppress(OSError):
                    os.close(sock.fd)
            self.sockets.clear()
        with contextlib.suppress(OSError):
            os.close(self.listener)


class _Supervisor:
    """One thread answering every granted module's socket calls (an epoll over listeners)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._watches: dict[int, _Watch] = {}
        self._connecting: dict[int, tuple[_Watch, _Socket]] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._failed: OSError | None = None
        self._thread = threading.Thread(target=self._loop, name="murmur-nb netguard", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise self._failed

    def watch(self, listener: int, destinations: Destinations) -> None:
        with self._lock:
            self._watches[listener] = _Watch(listener, destinations)
            self._epoll.register(listener, select.EPOLLIN)

    def when_connected(self, watch: _Watch, sock: _Socket) -> None:
        """Let the host's descriptor of a TCP socket go once its connect completes. The
        supervisor waits on a descriptor of its own (``sock`` is the call's, closed after)."""
        fd = os.dup(sock.fd)
        with self._lock:
            self._connecting[fd] = (watch, _Socket(fd, sock.inode, sock.family, sock.kind))
            self._epoll.register(fd, select.EPOLLOUT | select.EPOLLONESHOT)

    def unwatch_connect(self, watch: _Watch, inode: int) -> None:
        with self._lock:
            for fd in [
                fd for fd, (w, s) in self._connecting.items() if w is watch and s.inode == inode
            ]:
                self._drop_connecting(fd)

    def _drop_connecting(self, fd: int) -> None:
        """Forget a connect being waited for, and close its descriptor (``_lock`` held)."""
        del self._connecting[fd]
        with contextlib.suppress(OSError):
            self._epoll.unregister(fd)
        os.close(fd)

    def _connected(self, fd: int) -> None:
        with self._lock:
            entry = self._connecting.get(fd)
            if entry is None:
                return  # let go meanwhile
            watch, sock = entry
            ready = select.poll()
            ready.register(fd, select.POLLOUT)
            if not ready.poll(0):  # the event was a closed namesake's: still connecting
                with contextlib.suppress(OSError):
                    self._epoll.modify(fd, select.EPOLLOUT | select.EPOLLONESHOT)
                return
            probe = socket.socket(fileno=fd)
            try:
                probe.getpeername()  # not SO_ERROR, which the module reads (and reading clears)
                done = True
            except OSError:
                done = False  # it failed: the module may connect again, through the host
            finally:
                probe.detach()
            self._drop_connecting(fd)
        if done:
            let_go(watch, sock.inode)

    def _loop(self) -> None:
        try:
            _take_sandbox_credentials()
        except OSError as exc:  # the caller raises it: a module must not wait on nobody
            self._failed = exc
            return
        finally:
            self._ready.set()
        while True:
            try:
                events = self._epoll.poll()
            except InterruptedError:
                continue
            for fd, mask in events:
                with self._lock:
                    watch = self._watches.get(fd)
                    connecting = fd in self._connecting
                if connecting:
                    self._connected(fd)
                if watch is None:
                    continue
                if mask & select.EPOLLIN:
                    self._receive(watch)
                elif mask & (select.EPOLLHUP | select.EPOLLERR):
                    self._forget(watch)

    def _forget(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.pop(watch.listener, None)
            for fd in [fd for fd, (w, _) in self._connecting.items() if w is watch]:
                self._drop_connecting(fd)
            with contextlib.suppress(OSError):
                self._epoll.unregister(watch.listener)
        watch.close()

    def _receive(self, watch: _Watch) -> None:
        buffer = bytearray(_NOTIF.size)
        try:
            fcntl.ioctl(watch.listener, _RECV, buffer, True)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EINTR):
                self._forget(watch)
            return
        ident, pid, _flags, nr, _arch, _ip, *args = _NOTIF.unpack(buffer)
        call = _Call(watch, ident, pid, nr, tuple(args))
        if call.blocks():
            with watch.lock:
                busy = watch.inflight >= _MAX_INFLIGHT
                watch.inflight += not busy
            if busy:
                call.answer(-errno.EAGAIN)
                return
            threading.Thread(target=call.run_counted, daemon=True).start()
        else:
            call.run()


def _can_trace() -> bool:
    """Whether this thread holds ``CAP_SYS_PTRACE`` (root, but not in a default container)."""
    try:
        with open("/proc/thread-self/status", encoding="ascii") as fh:  # noqa: PTH123
            for line in fh:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> 19 & 1)
    except (OSError, ValueError):
        pass
    return False


def _take_sandbox_credentials() -> None:
    """On a root host without ``CAP_SYS_PTRACE`` (a default Docker container), this thread
    (and the threads it starts) becomes the sandbox id, the module's uid, so that reading the
    module's memory needs no capability. Elsewhere root keeps its own: a module in a user
    namespace of root's is root's to trace, not the sandbox id's."""
    if os.geteuid() != 0 or LIBC is None or _can_trace():
        return
    from murmur_nb._sandbox import identity  # noqa: PLC0415 - only on root hosts

    ident = identity.sandbox_id()
    groups, gids, uids = _SYS_CREDS[platform.machine()]
    for number, values in ((groups, (0, None)), (gids, (ident,) * 3), (uids, (ident,) * 3)):
        if LIBC.syscall(number, *values) != 0:
            raise OSError(ctypes.get_errno(), "cannot take the sandbox id's credentials")


def let_go(watch: _Watch, inode: int) -> None:
    """A connected TCP socket is the module's alone: its ``close`` must reach the peer (once
    the calls in flight on it, each on a descriptor of its own, have closed theirs)."""
    _supervisor().unwatch_connect(watch, inode)
    with watch.lock:
        sock = watch.sockets.pop(inode, None)
        if sock is None:
            return  # let go already
        watch.connected.add(inode)
    os.close(sock.fd)


_SUPERVISOR: list[tuple[int, _Supervisor]] = []
_SUPERVISOR_LOCK = threading.Lock()


def _supervisor() -> _Supervisor:
    """This process's supervisor (a forked child makes its own: threads do not fork)."""
    with _SUPERVISOR_LOCK:
        if not _SUPERVISOR or _SUPERVISOR[0][0] != os.getpid():
            _SUPERVISOR[:] = [(os.getpid(), _Supervisor())]
        return _SUPERVISOR[0][1]


@functools.cache
def _numbers() -> dict[int, str]:
    return {nr: name for name, nr in _SYSCALLS[platform.machine()].items()}


@dataclass
class _Call:
    """One stopped socket call of a module, answered once."""

    watch: _Watch
    ident: int
    pid: int
    nr: int
    args: tuple[int, ...]

    @property
    def name(self) -> str:
        return _numbers().get(self.nr, "")

    def blocks(self) -> bool:
        """Whether answering may wait (a blocking socket, or a host name to resolve)."""
        if self.name == "socket":
            return False
        if self.watch.destinations.needs_lookup:
            return True
        flags = self.args[2] if self.name in ("sendmsg",) else self.args[3]
        if self.name != "connect" and flags & _MSG_DONTWAIT:
            return False
        with self._held(quiet=True) as sock:
            if sock is None:
                return False
            try:
                return not fcntl.fcntl(sock.fd, fcntl.F_GETFL) & os.O_NONBLOCK
            except OSError:
                return False

    def run_counted(self) -> None:
        try:
            self.run()
        finally:
            with self.watch.lock:
                self.watch.inflight -= 1

    def run(self) -> None:
        handler = {
            "socket": self._new_socket,
            "connect": self._connect,
            "sendto": self._sendto,
            "sendmsg": self._sendmsg,
            "sendmmsg": self._sendmmsg,
        }.get(self.name)
        try:
            if handler is None:
                raise _Refused(errno.ENOSYS)
            handler()
        except _Refused as exc:
            self.answer(-exc.code)
        except OSError as exc:
            self.answer(-(exc.errno or errno.EIO))

    def answer(self, value: int) -> None:
        """Return ``value`` (a result, or ``-errno``) from the module's call."""
        error, value = (value, 0) if value < 0 else (0, value)
        with contextlib.suppress(OSError):  # ENOENT: the module is gone
            fcntl.ioctl(
                self.watch.listener, _SEND, bytearray(_RESP.pack(self.ident, value, error, 0))
            )

    def _valid(self) -> None:
        """The module is still in this call: what was read from ``pid`` was its memory."""
        try:
            fcntl.ioctl(self.watch.listener, _ID_VALID, bytearray(struct.pack("<Q", self.ident)))
        except OSError as exc:
            raise _Refused(errno.ESRCH) from exc

    def _read(self, address: int, size: int) -> bytes:
        return _copy(self.pid, address, size)

    @contextlib.contextmanager
    def _held(self, *, quiet: bool = False) -> Iterator[_Socket | None]:
        """The socket the call names, on a descriptor of the call's own: another thread's
        ``let_go`` closes the host's, and that number may be the kernel's next socket."""
        sock = self._socket(quiet=quiet)
        try:
            yield sock
        finally:
            if sock is not None:
                os.close(sock.fd)

    def _socket(self, *, quiet: bool = False) -> _Socket | None:
        """The socket the call names, on a copy of the host's descriptor (the caller's)."""
        try:
            link = os.readlink(f"/proc/{self.pid}/fd/{self.args[0] & 0xFFFFFFFF}")  # noqa: PTH115
        except OSError as exc:
            if quiet:
                return None
            raise _Refused(errno.EBADF) from exc
        inode = int(link[8:-1]) if link.startswith("socket:[") else -1
        with self.watch.lock:
            sock = self.watch.sockets.get(inode)
            gone = inode in self.watch.connected
            if sock is not None:
                sock = _Socket(os.dup(sock.fd), sock.inode, sock.family, sock.kind)
        if sock is None and not quiet:
            # a socket the host did not make, or a TCP one it let go once connected
            raise _Refused(
                errno.EISCONN if gone else (errno.EACCES if inode >= 0 else errno.ENOTSOCK)
            )
        return sock

    def _check(self, raw: bytes, sock: _Socket, *, connect: bool = False) -> None:
        where = _destination(raw, connect=connect)
        if where is None:
            return
        if (sock.family == socket.AF_INET) != isinstance(where[0], ipaddress.IPv4Address):
            raise _Refused(errno.EAFNOSUPPORT)
        if self.watch.destinations.refusal(*where) is not None:
            raise _Refused(errno.EACCES)

    # the calls ---------------------------------------------------------------------------

    def _new_socket(self) -> None:
        domain, kind, proto = (a & 0xFFFFFFFF for a in self.args[:3])
        base = kind & _SOCK_TYPE_MASK
        if (
            domain not in (socket.AF_INET, socket.AF_INET6)
            or base not in (socket.SOCK_STREAM, socket.SOCK_DGRAM)
            or proto not in (0, socket.IPPROTO_TCP, socket.IPPROTO_UDP)
        ):
            raise _Refused(errno.EACCES)
        made = socket.socket(domain, base | (kind & _SOCK_NONBLOCK), proto)
        fd = made.detach()
        try:
            inode = os.fstat(fd).st_ino
            request = _ADDFD.pack(
                self.ident, _ADDFD_FLAG_SEND, fd, 0, os.O_CLOEXEC if kind & _SOCK_CLOEXEC else 0
            )
            given = fcntl.ioctl(self.watch.listener, _ADD, bytearray(request))
        except OSError:
            os.close(fd)
            raise
        del given  # the module's call returned its number
        with self.watch.lock:
            self.watch.sockets[inode] = _Socket(fd, inode, domain, base)

    def _connect(self) -> None:
        with self._held() as sock:
            assert sock is not None
            self._connect_on(sock)

    def _connect_on(self, sock: _Socket) -> None:
        raw = self._read(self.args[1], min(self.args[2] & 0xFFFFFFFF, 128))
        self._valid()
        self._check(raw, sock, connect=True)
        assert LIBC is not None
        done = LIBC.connect(sock.fd, raw, len(raw))
        code = ctypes.get_errno() if done != 0 else 0
        if sock.kind == socket.SOCK_STREAM and code in (0, errno.EISCONN):
            let_go(self.watch, sock.inode)
        elif sock.kind == socket.SOCK_STREAM and code == errno.EINPROGRESS:
            _supervisor().when_connected(self.watch, sock)
        self.answer(-code if code else 0)

    def _sendto(self) -> None:
        with self._held() as sock:
            assert sock is not None
            self._sendto_on(sock)

    def _sendto_on(self, sock: _Socket) -> None:
        size, flags = min(self.args[2], _MAX_SEND), self.args[3] & 0xFFFFFFFF
        raw = self._read(self.args[4], min(self.args[5] & 0xFFFFFFFF, 128))
        data = self._read(self.args[1], size)
        self._valid()
        self._check(raw, sock)
        assert LIBC is not None
        sent = LIBC.sendto(sock.fd, data, ctypes.c_size_t(len(data)), flags, raw, len(raw))
        self.answer(sent if sent >= 0 else -ctypes.get_errno())

    def _message(self, address: int, sock: _Socket) -> tuple[bytes, list[bytes], bytes]:
        """A ``struct msghdr`` of the module: its name, data and control, copied and checked."""
        name_at, name_len, iov_at, iov_len, control_at, control_len, _ = _MSGHDR.unpack(
            self._read(address, _MSGHDR.size)
        )
        if iov_len > _MAX_IOV or control_len > 65536:
            raise _Refused(errno.EMSGSIZE)
        name = self._read(name_at, min(name_len, 128)) if name_at else b""
        chunks: list[bytes] = []
        left = _MAX_SEND
        vectors = self._read(iov_at, 16 * iov_len) if iov_len else b""
        for base, length in struct.iter_unpack("<QQ", vectors):
            take = min(length, left)
            chunks.append(self._read(base, take))
            left -= take
        control = self._read(control_at, control_len) if control_at else b""
        at = 0
        while at + _CMSGHDR.size <= len(control):
            length, level, kind = _CMSGHDR.unpack_from(control, at)
            if level == socket.SOL_SOCKET and kind in (_SCM_RIGHTS, _SCM_CREDENTIALS):
                raise _Refused(errno.EPERM)  # descriptors and credentials of the module's
            if kind not in _HARMLESS_CONTROL.get(level, ()):
                # an interface, a source address, a route, a mark (SO_MARK, applied with the
                # host's own capabilities as root): only the listed ones are sent
                raise _Refused(errno.EACCES)
            if length < _CMSGHDR.size:
                break
            at += (length + 7) & ~7
        if name:
            self._check(name, sock)
        return name, chunks, control

    def _send_message(
        self, sock: _Socket, name: bytes, chunks: list[bytes], control: bytes, flags: int
    ) -> int:
        assert LIBC is not None
        buffers = [ctypes.create_string_buffer(chunk, len(chunk)) for chunk in chunks]
        iov = (_Iovec * max(1, len(buffers)))(
            *(
                _Iovec(ctypes.cast(b, ctypes.c_void_p), len(c))
                for b, c in zip(buffers, chunks, strict=True)
            )
        )
        name_buf = ctypes.create_string_buffer(name, len(name)) if name else None
        control_buf = ctypes.create_string_buffer(control, len(control)) if control else None
        header = ctypes.create_string_buffer(
            _MSGHDR.pack(
                ctypes.cast(name_buf, ctypes.c_void_p).value or 0 if name_buf else 0,
                len(name),
                ctypes.addressof(iov),
                len(buffers),
                ctypes.cast(control_buf, ctypes.c_void_p).value or 0 if control_buf else 0,
                len(control),
                0,
            )
        )
        sent = LIBC.sendmsg(sock.fd, header, flags)
        return int(sent) if sent >= 0 else -ctypes.get_errno()

    def _sendmsg(self) -> None:
        with self._held() as sock:
            assert sock is not None
            name, chunks, control = self._message(self.args[1], sock)
            self._valid()
            self.answer(self._send_message(sock, name, chunks, control, self.args[2] & 0xFFFFFFFF))

    def _sendmmsg(self) -> None:
        with self._held() as sock:
            assert sock is not None
            self._sendmmsg_on(sock)

    def _sendmmsg_on(self, sock: _Socket) -> None:
        """Each message copied, checked and sent in turn; its ``msg_len`` written back only
        while the module is still in the call (its pid could be another process's)."""
        count, flags = min(self.args[2] & 0xFFFFFFFF, _MAX_IOV), self.args[3] & 0xFFFFFFFF
        sent = 0
        for index in range(count):
            at = self.args[1] + index * _MMSGHDR
            try:
                name, chunks, control = self._message(at, sock)
                self._valid()
            except _Refused as exc:
                if sent == 0:
                    raise
                del exc
                break
            result = self._send_message(sock, name, chunks, control, flags)
            if result < 0:
                if sent == 0:
                    self.answer(result)
                    return
                break
            try:
                self._valid()
                _copy(self.pid, at + _MSGHDR.size, 4, write=struct.pack("<I", result))
            except _Refused:
                return  # the module left the call: nobody to answer
            sent += 1
        self._valid()
        self.answer(sent)


def available() -> tuple[bool, str]:
    """Whether the check works here, tried for real once: a child under the filter opens a
    socket (which must work) and connects to a loopback listener (which must be refused)."""
    return _probe()


def _ended(proc: subprocess.Popen[bytes]) -> None:
    """The probe's process killed, reaped and its pipes closed (its check was interrupted)."""
    with contextlib.suppress(OSError):
        proc.kill()
    proc.communicate()


@functools.cache
def _probe() -> tuple[bool, str]:
    if program() is None:
        return False, "libseccomp (pyseccomp) is missing, or this is not x86-64 or AArch64"
    import subprocess  # noqa: PLC0415 - once per process

    bash = "/bin/bash" if os.path.exists("/bin/bash") else None  # noqa: PTH110
    if bash is None:
        return False, "the check's probe needs /bin/bash"
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0)
    port = server.getsockname()[1]
    user = None
    if os.geteuid() == 0:
        from murmur_nb._sandbox import identity  # noqa: PLC0415 - only on root hosts

        user = identity.sandbox_id()
    script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo reached"
    try:
        proc, release = spawn(
            Destinations(("*",)),
            lambda: subprocess.Popen(
                [bash, "--noprofile", "--norc", "-c", script],
                env={},
                cwd="/",
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                user=user,
                group=user,
                extra_groups=[] if user is not None else None,
            ),
            _ended,
        )
        try:
            out, err = proc.communicate(timeout=10)
        finally:
            release()
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"seccomp user notification cannot run here ({exc})"
    finally:
        with contextlib.suppress(BlockingIOError, OSError):
            server.accept()[0].close()
            out = b"reached"
        server.close()
    said = err.decode("utf-8", "replace").strip()
    if out.strip() or "Permission denied" not in said:
        return False, f"the loopback check did not hold ({said[-200:] or 'reached'})"
    return True, "seccomp user notification (each destination checked by the host)"
