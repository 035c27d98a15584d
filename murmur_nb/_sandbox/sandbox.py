"""The OS sandbox every module process runs in, and the report of what it guarantees here.

bubblewrap comes first: one ``bwrap`` exec gives the module a mount namespace holding only
what it may see, a PID namespace (nothing outlives the call), private IPC, no capabilities,
and without a network grant the :mod:`.seccomp` filter (a loopback-only network namespace
where libseccomp is missing); about 4 ms per call (``benchmarks/bench_invoke.py``). Where it
works, the kernel's :mod:`.zygote` carries out the same bwrap plan by a fork instead (about
2 ms), and bwrap runs what it refuses.
Landlock is the fallback where user namespaces are forbidden: the same path rules, scoped
signals and sockets, no ``/proc``, but no process-tree guarantee (the report then misses
``process_tree``). No cgroups: they are often not delegated, and the PID namespace already
ends every process. Only read-only system trees and the running interpreter's installation
are exposed, never a tree that is ``/`` or the home folder. The probe runs once per process;
:class:`SandboxReport` is what ``ModuleHost.sandbox`` returns.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from murmur_nb._exceptions import SandboxUnavailable
from murmur_nb._files import own_state
from murmur_nb._files.beneath import real_path
from murmur_nb._files.trust import nobody_else_can_write, trusted_which
from murmur_nb._sandbox import access, helpers, identity, interpreter, landlock, netguard, seccomp
from murmur_nb._sandbox import zygote as zygote_
from murmur_nb.protocol import Root

__all__ = [
    "GUARANTEES",
    "MECHANISMS",
    "MOST_TMPFS_BYTES",
    "NETWORK_ISOLATION",
    "SANDBOX_MODES",
    "TMPFS_BYTES",
    "Held",
    "binds_by_fd",
    "Launch",
    "SandboxReport",
    "held_copy",
    "hidden_interpreter",
    "launch",
    "release",
    "sandbox_report",
    "tmpfs_bytes",
]

SANDBOX_MODES = ("required", "best-effort", "off")
MECHANISMS = ("bwrap", "landlock", "seccomp", "reaper")
#: what a network grant reaches: outside hosts only (checked), or every address (opted in)
NETWORK_ISOLATION = ("outside-only", "none")
#: guarantee -> what it promises
GUARANTEES: dict[str, str] = {
    "filesystem": "reads only system files, its module folder, granted binaries and its "
    "roots; writes only rw roots and its working folder",
    "read_only_roots": "an ro root cannot be written",
    "network": "no network unless grants.network is non-empty (and then only outside "
    "hosts: see granted network)",
    "process_tree": "no process outlives the call",
    "process_isolation": "cannot see or signal processes outside its tree, nor read their "
    "/proc entries",
    "identity": "runs as an unprivileged uid with no capabilities, even when the kernel is "
    "root; cannot write /proc/sys or /sys, nor change the hostname",
    "kernel_objects": "shares no keyring and no SysV IPC object (shared memory, semaphores, "
    "message queues) with the kernel or another call, and cannot set a setuid or setgid bit "
    "on a file",
}
_SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_ENV = shutil.which("env", path="/usr/bin:/bin") or "/usr/bin/env"
_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
_HOW_TO_GET = {
    "bwrap": "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow "
    "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu "
    "23.10 and later AppArmor restricts them too: sysctl "
    "kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap)",
    "landlock": "a Linux kernel >= 5.13 with Landlock enabled (lsm=...,landlock)",
    "seccomp": "libseccomp (Debian/Ubuntu: apt-get install libseccomp2) and the pyseccomp "
    "package",
    "reaper": "a C compiler, to build murmur-nb's subreaper helper once (Debian/Ubuntu: "
    "apt-get install gcc libc6-dev)",
}
_REAPER_SOURCE = Path(__file__).with_name("reaper.c")
#: how many more processes than it runs now the module's uid may run (a fork bomb's ceiling)
REAPER_NPROC = 512
#: the bound of each tmpfs of a bwrap or zygote sandbox (its root, which holds ``/tmp`` and
#: the working folder, and the one over a runs folder a root holds): its files are memory
#: (shared memory, not swapped out without swap), so without a bound a module could take
#: half the machine's. ``MURMUR_NB_SANDBOX_TMPFS`` (bytes, or with a ``K``/``M``/``G``
#: suffix) sets another; a write past it fails in the module with ``ENOSPC``.
TMPFS_BYTES = 1 << 30
#: the largest tmpfs bound taken (1 PiB, no bound in effect): bwrap and the zygote read it
#: as a signed 64-bit number, and past that bwrap refused every sandbox, the module blamed
MOST_TMPFS_BYTES = 1 << 50
_TMPFS_VARIABLE = "MURMUR_NB_SANDBOX_TMPFS"
_SIZE_RE = re.compile(r"([0-9]+)([KMG]?)", re.IGNORECASE)


def tmpfs_bytes() -> int:
    """The sandbox's tmpfs bound: ``MURMUR_NB_SANDBOX_TMPFS``, else :data:`TMPFS_BYTES`.

    Raises ``ValueError`` naming the variable when it is not a size from 1 byte to
    :data:`MOST_TMPFS_BYTES`."""
    given = os.environ.get(_TMPFS_VARIABLE, "").strip()
    if not given:
        return TMPFS_BYTES
    found = _SIZE_RE.fullmatch(given)  # ASCII digits: "²" is a digit to str.isdigit
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(given[-1:].upper(), 1)
    size = int(found.group(1)) * scale if found is not None else 0
    if not 0 < size <= MOST_TMPFS_BYTES:
        raise ValueError(
            f"{_TMPFS_VARIABLE}={given!r} is not a size: give bytes, or a number with K, M "
            f"or G (like 512M), above 0 and at most {MOST_TMPFS_BYTES >> 30}G"
        )
    return size


def in_container() -> bool:
    """Whether this kernel runs in a container (Docker, Podman, a Kubernetes pod)."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") or any(
        Path(marker).exists() for marker in ("/.dockerenv", "/run/.containerenv")
    ):
        return True
    try:
        cgroups = Path("/proc/1/cgroup").read_text(errors="replace")
    except OSError:
        return False
    return any(word in cgroups for word in ("docker", "kubepods", "containerd", "libpod"))


def _how_to_get() -> dict[str, str]:
    """What gets each mechanism, for where this kernel runs."""
    if not in_container():
        return _HOW_TO_GET
    return _HOW_TO_GET | {
        "bwrap": "inside a container, bubblewrap's user namespaces come only with the "
        "container's own "
        "options (Docker: --security-opt seccomp=unconfined --security-opt "
        "apparmor=unconfined; Kubernetes: a seccomp profile that allows unshare), and they are "
        "not needed: Landlock, seccomp and the subreaper hold every guarantee without them",
    }


@dataclass(frozen=True)
class _Probe:
    bwrap: str | None  # path of a working bwrap
    bwrap_status: str
    landlock_abi: int
    landlock_status: str
    seccomp: bytes | None  # the compiled filter, when bwrap can load it
    seccomp_status: str
    reaper: str | None  # the compiled subreaper helper
    reaper_status: str


def _probe_bwrap() -> tuple[str | None, str]:
    # a root kernel runs bwrap unconfined: only one nobody else can write or replace
    found = trusted_which("bwrap") or (
        "/usr/bin/bwrap" if nobody_else_can_write(Path("/usr/bin/bwrap")) else None)
    if found is None:
        return None, ("bwrap not found on PATH" if os.geteuid() != 0 or shutil.which("bwrap")
                      is None else "bwrap not found on PATH where only root can write it")
    true = trusted_which("true") or "/bin/true"
    # the same namespaces and a fresh /proc, as each run will need (some containers allow
    # the namespaces but not the proc mount)
    try:
        flags, fds = _namespace_flags(network=False, seccomp=False)
        argv = [found, *flags, "--ro-bind", "/", "/", "--proc", "/proc",
                *_identity_prefix(), true]  # the whole tree: the drop helper is in it
        out = subprocess.run(argv, capture_output=True, env={}, timeout=10, check=False,
                             pass_fds=fds)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{found} cannot run: {exc}"
    if out.returncode != 0:
        why = out.stderr.decode("utf-8", "replace").strip()[-300:]
        return None, f"{found} cannot create namespaces here ({why or out.returncode})"
    version = subprocess.run([found, "--version"], capture_output=True, env={}, check=False)
    return found, version.stdout.decode().strip() or "bubblewrap"


def _probe_seccomp(bwrap: str | None) -> tuple[bytes | None, str]:
    """The socket filter, if libseccomp builds it and ``bwrap`` loads it (refusing a socket)."""
    bpf, status = seccomp.program(sysv_ipc=bwrap is not None)  # bwrap: an IPC namespace
    if bpf is None or bwrap is None:
        return bpf, status  # without bwrap, the child loads it itself (prctl)
    python = os.path.realpath(sys.executable)
    check = "import socket\ntry:\n socket.socket()\nexcept PermissionError:\n print('refused')"
    fd = seccomp.program_fd(bpf)
    flags, fds = _namespace_flags(network=True, seccomp=True)
    # a module's own layout, not the whole tree: on a root host the interpreter may live
    # where the sandbox id cannot pass (pyenv under a 0700 /root), as it may in a module run
    prefix = _identity_prefix()
    argv = [bwrap, *flags, "--seccomp", str(fd),
            *_layout(list(_interpreter_trees()), [], [], runs="/tmp", network=False,
                     prefix=prefix),
            "--chdir", "/", "--", *_sandboxed(prefix), python, "-I", "-S", "-c", check]
    try:
        out = subprocess.run(argv, capture_output=True, env={}, timeout=10, check=False,
                             pass_fds=(fd, *fds))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap cannot load a seccomp filter: {exc}"
    finally:
        os.close(fd)
    if out.stdout.strip() != b"refused":
        why = out.stderr.decode("utf-8", "replace").strip()[-300:]
        return None, f"bwrap did not apply the seccomp filter ({why or out.returncode})"
    return bpf, status


@functools.cache
def _probe() -> _Probe:
    bwrap, bwrap_status = _probe_bwrap()
    abi, why = landlock.abi_version()
    status = f"Landlock ABI {abi}" if abi else why
    bpf, seccomp_status = _probe_seccomp(bwrap)
    reaper = helpers.built("reaper", _REAPER_SOURCE, (("-static",), ()), _reaper_works)
    reaper_status = "subreaper helper (reaper.c)" if reaper else "no C compiler to build it"
    return _Probe(bwrap, bwrap_status, abi, status, bpf, seccomp_status, reaper,
                  reaper_status)


def _reaper_works(path: Path) -> bool:
    """Whether the built helper runs a program and passes its exit status on."""
    try:
        ran = subprocess.run([str(path), "--", "/bin/sh", "-c", "exit 7"], env={},
                             capture_output=True, check=False, timeout=10)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ran.returncode == 7


def _namespace_flags(*, network: bool, seccomp: bool) -> tuple[list[str], tuple[int, ...]]:
    """bwrap's namespace flags, and the descriptors they name (the user namespace as root)."""
    # the module is the namespace's first process: when it ends, the kernel kills every
    # process left in the namespace (and it leads its own session there)
    flags = ["--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts",
             "--die-with-parent", "--new-session"]
    fds: tuple[int, ...] = ()
    if identity.is_root():
        # root in a namespace of its own (bind mounts of root-owned folders still work),
        # keeping only what setpriv needs to leave root for the sandbox id (identity.py)
        fd = identity.userns_fd()
        flags += ["--userns", str(fd), "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        fds = (fd,)
    else:
        flags.append("--unshare-user")
    if not network and not seccomp:
        flags.append("--unshare-net")  # no socket filter: only loopback, in a namespace
    return flags, fds


def _identity_prefix() -> list[str]:
    """What bwrap runs the module through: an empty environment (bwrap sets ``PWD``) and,
    on a root host, the switch to the sandbox id (:func:`.identity.drop_argv`)."""
    return identity.drop_argv()


#: where a sandbox laid out by :func:`_layout` finds the drop helper: a name of its own, so
#: the module learns nothing of the cache (or the home folder) the helper was built in
_HELPER_AT = "/.murmur-nb/drop"


def _sandboxed(prefix: list[str]) -> list[str]:
    """``prefix`` as run inside a sandbox laid out by :func:`_layout`."""
    return prefix if prefix[0] == _ENV else [_HELPER_AT, *prefix[1:]]


@dataclass(frozen=True)
class SandboxReport:
    """Which confinement guarantees hold on this machine, and by which mechanism.

    ``guarantees`` maps each of :data:`GUARANTEES` to the mechanism that enforces it, or
    ``None`` when nothing does; ``mechanisms`` says for each mechanism whether it is used
    and why not. ``mode`` is the policy (``"required"``, ``"best-effort"`` or ``"off"``).
    """

    mode: str
    mechanism: str | None
    guarantees: Mapping[str, str | None]
    mechanisms: Mapping[str, str]
    detail: str = ""
    _bwrap: str | None = field(default=None, repr=False)
    _landlock_abi: int = field(default=0, repr=False)
    _seccomp: bytes | None = field(default=None, repr=False)
    #: the filter of a module with a network grant: every rule but the socket ones
    _seccomp_net: bytes | None = field(default=None, repr=False)
    #: how a network grant is kept to outside hosts, or ``None`` when it cannot be here
    granted_network: str | None = None
    #: the policy's ``network_isolation``, and why the check cannot run (when it cannot)
    network_isolation: str = "outside-only"
    granted_network_status: str = ""
    #: the subreaper helper that holds the process tree where there is no PID namespace
    _reaper: str | None = field(default=None, repr=False)
    #: the bound of each of the sandbox's tmpfs mounts (bwrap and the zygote)
    tmpfs_bytes: int = TMPFS_BYTES

    def granted_network_problem(self) -> str:
        """Why a network-granted call cannot be kept off this machine, and what to do."""
        if self.granted_network is not None:
            return ""
        return (
            "a network grant cannot be kept to outside hosts here: the host checks each "
            f"destination through seccomp user notification, which is unavailable "
            f"({self.granted_network_status}). Install libseccomp (apt-get install libseccomp2) "
            "on Linux 5.14 or newer, or choose Policy(network_isolation='none') to let "
            "network-granted modules reach every address, this machine's services included"
        )

    @property
    def missing(self) -> list[str]:
        """The guarantees no mechanism enforces here."""
        return list(self._missing)

    @functools.cached_property
    def _missing(self) -> tuple[str, ...]:
        return tuple(name for name, how in self.guarantees.items() if how is None)

    @property
    def makes_cwd(self) -> bool:
        """Whether :func:`launch` makes each run's working folder inside the sandbox: bwrap,
        on the sandbox's own tmpfs (on a root host the drop helper makes it the sandbox
        id's), so the host makes none on its disk."""
        return self._bwrap is not None and (
            not identity.is_root() or identity.drop_helper() is not None
        )

    @property
    def complete(self) -> bool:
        return not self._missing

    @property
    def confinement(self) -> str:
        """One line for the audit and the widgets: how module processes are confined."""
        if self.mode == "off":
            return "none (sandbox off)"
        label = self.detail or self.mechanism or "none (no sandbox mechanism available)"
        return label if self.complete else f"{label}; missing: {', '.join(self.missing)}"

    def problem(self) -> str:
        """What is missing and how to get it (empty when every guarantee holds)."""
        if self.complete or self.mode == "off":
            return ""
        why = "; ".join(f"{name}: {status}" for name, status in self.mechanisms.items())
        fixes = "; ".join(
            f"for {name}, "
            + (
                f"allow it in Policy(sandbox_mechanisms=[..., {name!r}]) (where it is "
                f"missing: {how})"
                if self.mechanisms.get(name) == "disabled by policy"
                else how
            )
            for name, how in _how_to_get().items()
            if not self.mechanisms.get(name, "").startswith(("used", "not needed"))
        )
        where = (
            "with the mechanisms this policy allows"
            if any(s == "disabled by policy" for s in self.mechanisms.values())
            else "on this machine"
        )
        choices = (
            " Or choose Policy(sandbox='best-effort') to run with a warning, or "
            "sandbox='off' to run modules unconfined"
            if self.mode == "required"
            else ""
        )
        return (
            f"the module sandbox cannot enforce {', '.join(self.missing)} {where} ({why}). "
            f"To get it: {fixes}.{choices}"
        )

    def __str__(self) -> str:
        lines = [f"module sandbox ({self.mode}): {self.confinement}"]
        for name, how in self.guarantees.items():
            lines.append(f"  {name:<18} {how or 'MISSING'}  ({GUARANTEES[name]})")
        lines.append(f"  {'granted network':<18} {self._granted_label()}")
        for name, status in self.mechanisms.items():
            lines.append(f"  [{name}] {status}")
        if self._bwrap is not None and self.mode != "off":
            lines.append(f"  [zygote] {zygote_.status()}")
            lines.append(f"  [limits] each tmpfs (/, /tmp, the working folder) "
                         f"{self.tmpfs_bytes} bytes; RLIMIT_NPROC {identity.SANDBOX_NPROC} "
                         "in the sandbox's user namespace")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{name}</td><td>{html.escape(how or 'missing')}</td>"
            f"<td>{html.escape(GUARANTEES[name])}</td></tr>"
            for name, how in self.guarantees.items()
        )
        rows += (
            f"<tr><td>granted network</td><td>{html.escape(self._granted_label())}</td>"
            "<td>with a network grant: outside hosts only, never this machine</td></tr>"
        )
        return (
            f"<div><b>module sandbox ({html.escape(self.mode)})</b>: "
            f"{html.escape(self.confinement)}<table>{rows}</table></div>"
        )

    def _granted_label(self) -> str:
        if self.mode == "off":
            return "unconfined (sandbox off)"
        if self.granted_network is not None:
            return self.granted_network
        return f"MISSING ({self.granted_network_status})"


def _statuses(
    probe: _Probe, allowed: set[str], bwrap: str | None, abi: int, bpf: bytes | None, *,
    reaper: str | None,
) -> dict[str, str]:
    """For each mechanism: used, not needed, disabled by policy, or why it is unavailable."""
    status: dict[str, str] = {}
    if bwrap:
        status["bwrap"] = f"used: {probe.bwrap_status}"
        status["landlock"] = f"not needed ({probe.landlock_status})"
    else:
        status["bwrap"] = probe.bwrap_status if "bwrap" in allowed else "disabled by policy"
        if abi:
            status["landlock"] = f"used: {probe.landlock_status}"
        else:
            status["landlock"] = (
                probe.landlock_status if "landlock" in allowed else "disabled by policy"
            )
    if bpf is not None:  # without bwrap the program refuses SysV IPC too: its own status
        status["seccomp"] = f"used: {probe.seccomp_status if bwrap else seccomp.program()[1]}"
    elif "seccomp" not in allowed:
        status["seccomp"] = "disabled by policy"
    else:
        status["seccomp"] = probe.seccomp_status
    if reaper is not None:
        status["reaper"] = f"used: {probe.reaper_status}"
    elif bwrap:
        status["reaper"] = "not needed (bwrap's pid namespace)"
    else:
        status["reaper"] = probe.reaper_status if "reaper" in allowed else "disabled by policy"
    return status


def _granted_network(on: bool, bpf: bytes | None, isolation: str) -> tuple[str | None, str]:
    """How a network grant is kept to outside hosts (``None`` when it cannot be), and why."""
    if isolation == "none":
        return ("every address, this machine's included (Policy(network_isolation='none'))",
                "opted out")
    if not on:
        return None, "sandbox off"
    if bpf is None:
        return None, "seccomp is not used"
    works, why = netguard.available()
    return (f"outside hosts only: {why}" if works else None), why


def sandbox_report(
    mode: str, allowed: Iterable[str], *, network_isolation: str = "outside-only",
    tmpfs: int | None = None,
) -> SandboxReport:
    """What the sandbox guarantees on this machine with the mechanisms ``allowed``;
    ``tmpfs`` bounds each of its tmpfs mounts (default :func:`tmpfs_bytes`)."""
    allowed = set(allowed)
    probe = _probe()
    on = mode != "off"
    bwrap = probe.bwrap if "bwrap" in allowed and on else None
    abi = probe.landlock_abi if "landlock" in allowed and on and not bwrap else 0
    # the filter of the sandbox used: SysV IPC allowed only where bwrap gives an IPC namespace
    works = probe.seccomp is not None and "seccomp" in allowed and on
    bpf = seccomp.program(sysv_ipc=bool(bwrap))[0] if works else None
    confined = bool(abi or bpf)
    reaper = probe.reaper if "reaper" in allowed and on and not bwrap and confined else None
    status = _statuses(probe, allowed, bwrap, abi, bpf, reaper=reaper)
    if not on:
        status = dict.fromkeys(MECHANISMS, "not used (sandbox off)")
    mechanism, detail, guarantees = _mechanism(bwrap, abi, bpf)
    if reaper is not None:
        detail += "; subreaper"
        guarantees["process_tree"] = (
            f"subreaper (every descendant killed when the call ends; RLIMIT_NPROC +"
            f"{REAPER_NPROC})"
        )
    if not on:
        guarantees = dict.fromkeys(GUARANTEES)
    net = seccomp.program(sockets=True, sysv_ipc=bool(bwrap))[0] if bpf is not None else None
    granted, why = _granted_network(on, bpf, network_isolation)
    return SandboxReport(mode, mechanism, guarantees, status, detail, bwrap, abi, bpf, net,
                         granted, network_isolation, why, reaper,
                         tmpfs if tmpfs is not None else tmpfs_bytes())


def _identity(bwrap: str | None, confined: bool) -> str | None:
    """How the module's identity is kept unprivileged, or ``None`` when it is not."""
    if not confined:
        return None
    if identity.is_root():
        how = "a user namespace, ids switched before exec" if bwrap else "setuid before exec"
        return f"uid {identity.sandbox_id()} ({how}), no capabilities"
    if bwrap:
        return "the user's own uid in a user namespace, no capabilities"
    return "the user's own uid (not root), no capabilities"


def _mechanism(
    bwrap: str | None, abi: int, bpf: bytes | None
) -> tuple[str | None, str, dict[str, str | None]]:
    """``(mechanism, detail, guarantees)`` of the mechanisms in use."""
    guarantees: dict[str, str | None] = dict.fromkeys(GUARANTEES)
    rules = "seccomp: no sockets, keyring or setuid bits"
    if bpf:
        guarantees["kernel_objects"] = (
            "seccomp (keyctl and setuid/setgid modes refused); SysV IPC: "
            + ("bwrap ipc namespace" if bwrap else "seccomp (refused)")
        )
    guarantees["identity"] = _identity(bwrap, bool(bwrap or abi or bpf))
    if bwrap:
        userns = "user, " if not identity.is_root() else "user (uid mapped), "
        spaces = "mount, pid, ipc, uts" if bpf else "mount, pid, ipc, uts, net"
        socket_rule = f"{rules}; " if bpf else ""
        ident = f"uid {identity.sandbox_id()}, " if identity.is_root() else ""
        detail = f"bwrap ({userns}{spaces} namespaces; {socket_rule}{ident}no capabilities)"
        guarantees |= {
            "filesystem": "bwrap mount namespace",
            "read_only_roots": "bwrap read-only bind mounts",
            "network": "seccomp (no socket can be opened)" if bpf else "bwrap network namespace",
            "process_tree": "bwrap pid namespace",
            "process_isolation": "bwrap pid namespace",
        }
        return "bwrap", detail, guarantees
    if abi:
        ident = f"; uid {identity.sandbox_id()}" if identity.is_root() else ""
        detail = f"landlock ABI {abi}" + (f"; {rules}" if bpf else "") + ident
        guarantees["filesystem"] = guarantees["read_only_roots"] = f"landlock ABI {abi}"
        if bpf:
            guarantees["network"] = "seccomp (no socket can be opened)"
        elif abi >= 4:
            guarantees["network"] = f"landlock ABI {abi} (TCP only)"
        if abi >= 6:
            guarantees["process_isolation"] = (
                f"landlock ABI {abi} (ptrace and signal scopes, no /proc)"
            )
        return "landlock", detail, guarantees
    if bpf:
        guarantees["network"] = "seccomp (no socket can be opened)"
        return "seccomp", rules, guarantees
    return None, "", guarantees


@dataclass
class Launch:
    """How to start one confined module process."""

    argv: list[str]
    preexec: Callable[[], None] | None
    confinement: str
    close: Callable[[], None]
    #: descriptors the process must inherit (the seccomp program for bwrap)
    pass_fds: tuple[int, ...] = ()
    #: the process holds its whole tree (it leads a PID namespace, or it is the subreaper
    #: helper): nothing it starts can outlive it, so the runner need not walk the tree
    #: while it runs
    owns_pid_namespace: bool = False
    #: the uid and gid the child switches to before ``preexec`` (a root host without bwrap)
    user: int | None = None
    #: where the launcher starts when the working folder exists only inside the sandbox
    start_in: Path | None = None
    #: a network grant kept to these destinations (:mod:`.netguard`), checked by the host
    destinations: netguard.Destinations | None = None
    #: bwrap's seccomp program when the launch can be set up ahead of a call (no network
    #: grant, a private working folder): :func:`held_copy`
    program: bytes | None = None
    #: a launch set up ahead: bwrap waits, the sandbox made, until :func:`release`
    held: Held | None = None
    #: the kernel's sandbox parent, which forks this bwrap plan's sandbox (:mod:`.zygote`)
    zygote: zygote_.Zygote | None = None
    #: the zygote's message for this plan, with the descriptors it sends: made once for
    #: every call of the plan (:mod:`.plans`), else from ``argv`` when the call starts
    message: tuple[bytes, tuple[int, ...]] | None = None
    #: ``(index in argv, descriptor, program)`` when ``argv``'s seccomp descriptor is the
    #: one the zygote reads every call's program from (:func:`.seccomp.kept_program_fd`):
    #: never bwrap's, which reads it to its end (:meth:`for_bwrap`)
    bwrap_program: tuple[int, int, bytes] | None = None
    #: a kept plan the zygote alone checks (:mod:`.plans`): when the zygote refuses the call
    #: as stale (a bind source is another file than the plan's), the plan is dropped and
    #: this gives the call's launch planned afresh
    on_stale: Callable[[], Launch] | None = None

    def for_bwrap(self) -> Launch:
        """This launch as bwrap runs it (without a zygote, or when the zygote refuses the
        call): its seccomp program on a pipe of its own, closed by the returned launch's
        ``close``."""
        if self.bwrap_program is None:
            return self
        at, kept, bpf = self.bwrap_program
        fds = [seccomp.program_fd(bpf)]
        try:
            argv = list(self.argv)
            argv[at] = str(fds[0])
            pass_fds = (*(fd for fd in self.pass_fds if fd != kept), fds[0])
            return dataclasses.replace(self, argv=argv, pass_fds=pass_fds, bwrap_program=None,
                                       close=lambda: close_all(fds, None))  # fmt: skip
        except BaseException:  # no launch will own the pipe: close it here
            close_all(fds, None)
            raise


@dataclass
class Held:
    """The write ends a held launch waits on: a byte on its ``--block-fd`` pipe (``go``), then
    the launch's seccomp program on its ``--seccomp`` pipe (``program_fd``, written by
    :func:`release` only: a held bwrap whose host dies reads an empty program, refuses it and
    never runs the module)."""

    go: int
    program_fd: int
    #: each path the sandbox binds and the ``(st_dev, st_ino)`` of the folder (or file) it
    #: bound, ``None`` for a ``-try`` bind whose path did not exist (:func:`held_copy`)
    sources: tuple[tuple[str, tuple[int, int] | None], ...] = ()
    #: our copies of what bwrap inherits (its pipes' read ends, the folders it binds),
    #: closed once it has started with its own (:meth:`started`)
    inherited: list[int] = field(default_factory=list)

    def started(self) -> None:
        """bwrap has its own copies of the inherited descriptors now: close ours (what it
        binds stays pinned by its copy, then by its mount)."""
        close_all(self.inherited, None)

    def current(self) -> bool:
        """Whether each path the sandbox binds still names what it bound: a root renamed
        away, or removed and made again, is another folder at the same path."""
        return same_files(self.sources)


def same_files(files: Iterable[tuple[str, tuple[int, int] | None]]) -> bool:
    """Whether each path still names the file it named: the same ``(st_dev, st_ino)``, links
    followed (``None``: the path named nothing, and still names nothing)."""
    try:
        return all(zygote_.identity_of(path) == then for path, then in files)
    except OSError:
        return False


@functools.cache
def binds_by_fd(bwrap: str) -> bool:
    """Whether ``bwrap`` binds an open descriptor (``--bind-fd``, ``--ro-bind-fd``: 0.10 and
    later, and some distributions' earlier builds): what a sandbox made ahead needs."""
    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, env={}, timeout=10,
                               check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--ro-bind-fd" in shown.stdout + shown.stderr


#: bwrap's binds of a path, and the same bind of a descriptor
_BY_FD = {"--bind": "--bind-fd", "--ro-bind": "--ro-bind-fd",
          "--bind-try": "--bind-fd", "--ro-bind-try": "--ro-bind-fd"}  # fmt: skip


def release(how: Launch) -> None:
    """Let a held bwrap go on: the seccomp program first (then its end of file), then the
    byte it blocks on. Each write end is closed here."""
    held = how.held
    assert held is not None and how.program is not None
    try:
        os.write(held.program_fd, how.program)  # a few hundred bytes: fits the pipe's buffer
    finally:
        os.close(held.program_fd)
        held.program_fd = -1
    try:
        os.write(held.go, b"\0")
    finally:
        os.close(held.go)
        held.go = -1


def _pair(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(real path, absolute path as given): bind the real one where the module looks."""
    return real_path(path), str(Path(path).absolute())


@functools.cache
def _interpreter_trees() -> tuple[tuple[str, str], ...]:
    """What every module reads of the running Python: its installation (the prefixes), and
    the packages an editable install of it imports from outside them
    (:func:`_editable_packages`)."""
    home = os.path.realpath(Path.home())
    trees: list[tuple[str, str]] = []
    for value in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        real, given = _pair(value)
        if real in ("/", home) or _beneath(real, _SYSTEM_TREES):
            continue  # never / or the home folder; a system tree is bound already
        for pair in ((real, real), (real, given)):
            if pair not in trees:
                trees.append(pair)
    bound = [real for real, _ in trees]
    for pair in _editable_packages(bound, home):
        if pair not in trees:
            trees.append(pair)
    return tuple(trees)


def _beneath(real: str, trees: Iterable[str]) -> bool:
    return any(real == tree or real.startswith(tree.rstrip("/") + "/") for tree in trees)


#: what :func:`_editable_packages` reads at most: ``.pth`` files, bytes of each, folders
#: they name, entries of each folder
_PTH_FILES, _PTH_BYTES, _PTH_PATHS, _PTH_ENTRIES = 64, 65536, 64, 4096


def _editable_packages(bound: Sequence[str], home: str) -> list[Pair]:
    """The package folders the interpreter imports through a ``.pth`` path outside its
    installation: an editable install (``pip install -e``, ``scripts/demo``), whose
    ``_editable_impl_<name>.pth`` names the project's folder, not a copy in site-packages.

    Without them a module run by this interpreter cannot import the package at all (a
    module importing ``murmur_nb.protocol``, the helper package for module authors, failed
    with ``ModuleNotFoundError``). A regular install is readable already (site-packages is
    part of the prefix), so this gives an editable install the same, and no more:

    * only the top-level *packages* found there (a folder with ``__init__.py`` and an
      identifier for a name), each bound read-only at the path Python looks for it; never
      the folder the ``.pth`` names (a project checkout: ``.git``, notebooks, a ``.env``),
      loose files, or anything a ``.pth`` ``import`` line would run;
    * only existing folders, never ``/``, the home folder or a folder above it, and never
      one another account could change: every component of its real path is owned by root
      or this account and is not world-writable (a sticky parent such as ``/tmp`` aside);
    * bounded: :data:`_PTH_FILES` files of :data:`_PTH_BYTES` each, :data:`_PTH_PATHS`
      paths, :data:`_PTH_ENTRIES` entries per folder.

    A namespace package (no ``__init__.py``), a single-file module and setuptools' import-hook
    editable mode (a ``__editable___*_finder.py``, no path) are not bound: such a module
    still fails to import, as it did. Under the Landlock fallback (no mount namespace) the
    import fails as well: Python finds a package by listing the folder the ``.pth`` names,
    which Landlock is not given (that would show every name in the checkout).
    """
    found: list[Pair] = []
    for folder in _pth_folders():
        real = os.path.realpath(folder)
        if real in ("/", home) or home.startswith(real + "/"):
            continue
        if _beneath(real, [*bound, *_SYSTEM_TREES]):
            continue  # readable already
        try:
            with os.scandir(folder) as listing:
                entries = sorted(e.name for _, e in zip(range(_PTH_ENTRIES), listing,
                                                        strict=False))  # fmt: skip
        except OSError:
            continue
        for name in entries:
            package = Path(folder, name)
            if not name.isidentifier() or not (package / "__init__.py").is_file():
                continue
            pair = _pair(package)
            if pair[0] in (home, "/") or _foreign(pair[0]):
                continue
            for bind in ((pair[0], pair[0]), pair):
                if bind not in found:
                    found.append(bind)
    return found


def _pth_folders() -> list[str]:
    """The folders the ``.pth`` files of the interpreter's site-packages add to ``sys.path``
    (read as :mod:`site` reads them: a line is a path unless it is blank, a comment or an
    ``import``), those that exist."""
    import site  # noqa: PLC0415 - only for the probe, once

    folders: list[str] = []
    for site_dir in site.getsitepackages():
        try:
            files = sorted(Path(site_dir).glob("*.pth"))[:_PTH_FILES]
        except OSError:
            continue
        for pth in files:
            try:
                with pth.open("rb") as fh:
                    text = fh.read(_PTH_BYTES).decode("utf-8", "replace")
            except OSError:
                continue
            for entry in (line.rstrip() for line in text.splitlines()):
                if not entry or entry.startswith(("#", "import ", "import\t")):
                    continue
                folder = os.path.normpath(Path(site_dir, entry).absolute())  # as site does
                if folder not in folders and Path(folder).is_dir():
                    folders.append(folder)
    return folders[:_PTH_PATHS]


def _foreign(real: str) -> bool:
    """Whether an account other than root and this one could change what is at ``real``: a
    component of it (the folder or a parent) is owned by another account, or world-writable.
    A world-writable parent with the sticky bit (``/tmp``) does not count: there only the
    owner of the folder below it (root or this account, checked first) may rename or
    remove that folder."""
    me = os.getuid()
    path = Path(real)
    for part in (path, *path.parents):
        try:
            st = part.stat()
        except OSError:
            return True
        if st.st_uid not in (0, me):
            return True
        if st.st_mode & 0o002 and (part == path or not st.st_mode & stat.S_ISVTX):
            return True
    return False


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def launch(
    report: SandboxReport,
    argv: Sequence[str],
    *,
    cwd: Path,
    module_dir: Path,
    roots: Mapping[str, Root],
    binaries: Iterable[str] = (),
    network: Sequence[str] = (),
    private_cwd: bool = False,
) -> Launch:
    """The argv, ``preexec_fn`` and label that run ``argv`` as confined as ``report`` allows.

    ``network`` is the call's ``grants.network``: empty, no socket at all; else, unless the
    policy opted out, every destination is checked by the host (:mod:`.netguard`).

    On a root host the working folder is handed to the sandbox id and each root is made
    reachable for it (:mod:`.identity`); a root it cannot be given is refused with
    :class:`~murmur_nb.SandboxUnavailable`. With ``private_cwd`` (bwrap only) ``cwd`` is
    just a name: bwrap makes the folder on the sandbox's own tmpfs, new and empty, and it
    is gone with the sandbox.
    """
    module, reads, ro, rw = resolved(module_dir, roots, binaries)
    return launch_resolved(report, argv, cwd=cwd, module=module, reads=reads, ro=ro, rw=rw,
                           network=network, private_cwd=private_cwd)  # fmt: skip


def hidden_interpreter(
    report: SandboxReport,
    exe: str,
    *,
    module_dir: Path,
    roots: Mapping[str, Root],
    binaries: Iterable[str] = (),
) -> str:
    """Why the interpreter on ``exe``'s ``#!`` line cannot start in the sandbox :func:`launch`
    would make for these paths, with the fix; ``""`` when it can, or where no file rule
    holds (sandbox off, no bwrap or Landlock). Paths as given, as bwrap binds them (roots
    and granted binaries are given canonical), so nothing is resolved per call."""
    if report.mode == "off" or not (report._bwrap or report._landlock_abi):
        return ""
    trees = [given for _, given in _interpreter_trees()]
    shown = (*_SYSTEM_TREES, *trees, str(module_dir), *binaries,
             *(str(root.path) for root in roots.values()))  # fmt: skip
    return interpreter.interpreter_problem(exe, shown, by_real_path=report._bwrap is None,
                                           described=_shown_trees())  # fmt: skip


@functools.cache
def _shown_trees() -> str:
    """What a module's sandbox shows, in words (the table of ``docs/sandbox.md``)."""
    prefixes: list[str] = []
    for value in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        for path in (value, os.path.realpath(value)):
            if path not in prefixes and not _beneath(path, _SYSTEM_TREES):
                prefixes.append(path)
    python = f" ({', '.join(prefixes)})" if prefixes else " (under /usr)"
    return (
        f"/usr, /bin, /sbin, /lib*, /etc, the running Python's installation{python}, the "
        "module's own folder, the binaries it was granted and the roots it was given"
    )


#: ``(real path, path as given)`` of one folder or file the sandbox binds
Pair = tuple[str, str]


def resolved(
    module_dir: Path, roots: Mapping[str, Root], binaries: Iterable[str]
) -> tuple[Pair, list[Pair], list[Pair], list[Pair]]:
    """The pairs a launch binds: the module folder, everything read (the interpreter's trees,
    the module folder, the binaries), the ``ro`` roots and the ``rw`` roots."""
    module = _pair(module_dir)
    reads = [*_interpreter_trees(), module, *(_pair(b) for b in binaries)]
    ro = [_pair(r.path) for r in roots.values() if r.mode != "rw"]
    rw = [_pair(r.path) for r in roots.values() if r.mode == "rw"]
    return module, reads, ro, rw


def launch_resolved(
    report: SandboxReport,
    argv: Sequence[str],
    *,
    cwd: Path,
    module: Pair,
    reads: list[Pair],
    ro: list[Pair],
    rw: list[Pair],
    network: Sequence[str],
    private_cwd: bool,
) -> Launch:
    """:func:`launch` of the pairs :func:`resolved` gave."""
    if private_cwd and not report.makes_cwd:
        raise ValueError("private_cwd needs bwrap (and the drop helper on a root host)")
    if report.mode != "off" and report.guarantees.get("identity"):
        reachable_for_the_sandbox_id(None if private_cwd else cwd, [module, *ro], rw)
        if report._bwrap is None:  # real paths, no mount namespace: pass through parents
            for real, _ in [*reads, *ro, *rw, _pair(cwd)]:
                access.grant_passage(real)
        else:
            for path in _reached_through_a_root(reads, [*ro, *rw]):
                access.grant_passage(path)
    how = _plan(report, argv, cwd=cwd, reads=reads, ro=ro, rw=rw, network=bool(network),
                private_cwd=private_cwd)
    if network and report.mode != "off":
        try:
            checked = report.granted_network is not None and report.network_isolation != "none"
            if checked:
                how.destinations = netguard.Destinations(tuple(network))
            how.confinement += "; network granted" + (
                " (outside hosts only)" if checked else " (every address)"
            )
        except BaseException:  # the caller never gets the launch: close what it holds
            how.close()
            raise
    return how


def _reached_through_a_root(reads: list[Pair], roots: list[Pair]) -> list[str]:
    """The host paths of the reads (the module's folder, the interpreter, a binary) bound
    inside a root (a root of ``/tmp`` holding the snapshot store, of the home holding the
    cache): the sandbox reaches each through that root's own folders, which the sandbox id
    of a root host may not pass (a ``0700`` store), and which the root's grant reaches only
    within its entry budget. So each gets a passage (``--x``, taken back with the rest)."""
    found: list[str] = []
    for _, given in reads:
        holders = [(real, shown) for real, shown in roots
                   if given != shown and _beneath(given, [shown])]  # fmt: skip
        if holders:
            real, shown = max(holders, key=lambda r: _depth(r[1]))
            found.append(real.rstrip("/") + given[len(shown.rstrip("/")):])
    return found


def _plan(
    report: SandboxReport,
    argv: Sequence[str],
    *,
    cwd: Path,
    reads: list[tuple[str, str]],
    ro: list[tuple[str, str]],
    rw: list[tuple[str, str]],
    network: bool,
    private_cwd: bool,
) -> Launch:
    bpf = report._seccomp_net if network else report._seccomp
    if report._bwrap is not None:
        inherited: list[int] = []  # the program's read end: bwrap's; ours closed after the run
        try:
            filtered: list[str] = []
            if bpf is not None:
                inherited.append(seccomp.program_fd(bpf))
                filtered = ["--seccomp", str(inherited[0])]
            out, fds = _bwrap_argv(report._bwrap, argv, cwd, reads, ro=ro, rw=rw,
                                   network=network, filtered=filtered,
                                   private_cwd=private_cwd, tmpfs=report.tmpfs_bytes)  # fmt: skip
            # a call without a network grant is forked by the zygote where there is one,
            # instead of a bwrap of its own; nothing is then made ahead (:mod:`.warm`): a fork
            # takes less time than letting a waiting bwrap go, and half the CPU of making it
            forker = zygote_.zygote() if not network else None
            return Launch(
                out,
                None,
                report.confinement,
                lambda: close_all(inherited, None),
                pass_fds=(*fds, *inherited),
                owns_pid_namespace=True,
                start_in=cwd.parent if private_cwd else None,
                program=bpf if not network and private_cwd and forker is None else None,
                zygote=forker,
            )
        except BaseException:  # no Launch will own the pipe: close it here
            close_all(inherited, None)
            raise
    user = identity.sandbox_id() if identity.is_root() and report.mode != "off" else None
    if report._reaper is not None:
        return _reaped(report, argv, cwd=cwd, reads=reads, ro=ro, rw=rw, network=network,
                       bpf=bpf, user=user)
    rules = _filter(bpf) if bpf is not None else None
    if report._landlock_abi:
        ruleset = _landlock_ruleset(report, cwd, reads, ro, rw, network=network, rules=rules)
        try:
            return Launch(list(argv), ruleset.preexec, report.confinement, ruleset.close,
                          user=user)
        except BaseException:  # no Launch will own the ruleset: close it here
            ruleset.close()
            raise
    if rules is not None:
        return Launch(list(argv), rules.apply, report.confinement, lambda: None, user=user)
    return Launch(list(argv), None, report.confinement, lambda: None)


def held_copy(how: Launch, cwd: Path, new: Path) -> Launch:
    """``how`` (a plan with a ``program``, for working folder ``cwd``) again for working folder
    ``new``, held (:class:`Held`): the same sandbox, to be made ahead of the plan's next call.
    Nothing is resolved or given again: that was done for ``how``'s own call, and the next
    call plans afresh and uses this one only for the same plan (:mod:`.warm`).

    Each path bind becomes a bind of the folder the path names now, opened here
    (``--bind-fd``; bwrap checks that what it mounted is that descriptor's): the sandbox
    binds exactly the folders :attr:`Held.sources` records, which the call compares with
    what its own plan's paths name then (:meth:`Held.current`). A ``-try`` bind whose path
    does not exist is left out, as bwrap would. Raises ``OSError`` when a path cannot be
    opened."""
    if how.program is None or how.held is not None:
        raise ValueError("held_copy needs a plan with a seccomp program, not a held one")
    inherited: list[int] = []
    held = None
    argv: list[str] = []
    sources: list[tuple[str, tuple[int, int] | None]] = []
    old = ""  # the plan's own program descriptor (bwrap's options come before the module's)
    try:
        block, go = os.pipe2(os.O_CLOEXEC)
        inherited.append(block)
        held = Held(go, -1)
        program, held.program_fd = os.pipe2(os.O_CLOEXEC)
        inherited.append(program)
        args = iter(how.argv)
        for arg in args:
            if arg == "--":  # the module's own argv: no option of bwrap's from here
                argv += [arg, *(rest.replace(cwd.name, new.name) for rest in args)]
            elif arg == "--seccomp" and not old:
                old = next(args)
                argv += ["--block-fd", str(block), "--seccomp", str(program)]
            elif arg in _BY_FD:
                source, dest = (next(args).replace(cwd.name, new.name) for _ in range(2))
                try:
                    fd = os.open(source, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    if not arg.endswith("-try"):
                        raise
                    sources.append((source, None))
                    continue
                inherited.append(fd)
                st = os.fstat(fd)
                sources.append((source, (st.st_dev, st.st_ino)))
                argv += [_BY_FD[arg], str(fd), dest]
            else:
                argv.append(arg.replace(cwd.name, new.name))
        held.sources = tuple(sources)
        held.inherited = inherited  # the same list: closed once, whoever closes it first
    except BaseException:
        close_all(inherited, held)
        raise
    kept = tuple(fd for fd in how.pass_fds if str(fd) != old)
    return dataclasses.replace(how, argv=argv, close=lambda: close_all(inherited, held),
                               pass_fds=(*kept, *inherited), held=held)  # fmt: skip


def close_all(fds: list[int], held: Held | None) -> None:
    """Close our read ends, and a held launch's write ends that :func:`release` did not
    (once: a second call closes nothing, so never a number reused meanwhile)."""
    todo = [*fds]
    fds.clear()
    if held is not None:
        todo += [fd for fd in (held.go, held.program_fd) if fd >= 0]
        held.go = held.program_fd = -1
    for fd in todo:  # nothing entered between two closes that an interrupt could stop at
        try:  # noqa: SIM105 - contextlib.suppress is entered: a Ctrl-C there skips the rest
            os.close(fd)
        except OSError:
            pass


def _landlock_ruleset(
    report: SandboxReport,
    cwd: Path,
    reads: list[tuple[str, str]],
    ro: list[tuple[str, str]],
    rw: list[tuple[str, str]],
    *,
    network: bool,
    rules: seccomp.Filter | None = None,
) -> landlock.Ruleset:
    return landlock.build_ruleset(
        report._landlock_abi,
        # no /proc at all: Landlock's ptrace scope blocks /proc/<pid>/mem but (measured
        # on kernel 6.18) not environ, maps or cmdline of an outside process
        [*_SYSTEM_TREES, *_DEVICES, *(real for real, _ in [*reads, *ro])],
        ["/dev/null", *(real for real, _ in rw), str(cwd)],
        network=network,
        socket_filter=rules,
    )


def _reaped(
    report: SandboxReport,
    argv: Sequence[str],
    *,
    cwd: Path,
    reads: list[tuple[str, str]],
    ro: list[tuple[str, str]],
    rw: list[tuple[str, str]],
    network: bool,
    bpf: bytes | None,
    user: int | None,
) -> Launch:
    """Without a PID namespace: the subreaper helper (``reaper.c``) starts the module as its
    only child, which applies the Landlock ruleset and the seccomp program it is handed and
    (on a root host) switches to the sandbox id; the helper kills the whole tree at the end."""
    assert report._reaper is not None
    out = [report._reaper, "-n", str(REAPER_NPROC)]
    fds: list[int] = []
    try:
        if user is not None:
            out += ["-u", str(user)]
        if report._landlock_abi:
            ruleset = _landlock_ruleset(report, cwd, reads, ro, rw, network=network)
            fds.append(ruleset.fd)
            out += ["-l", str(ruleset.fd)]
        if bpf is not None:
            fds.append(seccomp.program_fd(bpf))
            out += ["-s", str(fds[-1])]
        return Launch([*out, "--", *argv], None, report.confinement,
                      lambda: close_all(fds, None), pass_fds=tuple(fds),
                      owns_pid_namespace=True)  # fmt: skip
    except BaseException:  # no Launch will own them: close them here
        close_all(fds, None)
        raise


def reachable_for_the_sandbox_id(
    cwd: Path | None, ro: list[tuple[str, str]], rw: list[tuple[str, str]]
) -> None:
    """Root hosts: the working folder (one on the host's disk) becomes the sandbox id's,
    the module's folder (a private snapshot) and each root reachable for it."""
    if not identity.is_root():
        return
    if cwd is not None:
        identity.hand_over(cwd)
    for paths, write in ((rw, True), (ro, False)):
        for real, given in paths:
            problem = access.grant_root(real, write=write)
            if problem:
                raise SandboxUnavailable(f"no module was run: root {given}: {problem}",
                                         missing=["identity"])


@functools.cache
def _filter(bpf: bytes) -> seccomp.Filter:
    return seccomp.Filter(bpf)


@functools.cache
def _system_args() -> tuple[str, ...]:
    """The read-only system trees, ``/proc``, a private ``/tmp`` and the safe devices."""
    out: list[str] = []
    for tree in _SYSTEM_TREES:
        system = Path(tree)
        if system.is_symlink():
            out += ["--symlink", str(system.readlink()), tree]
        elif system.is_dir():
            out += ["--ro-bind", tree, tree]
    # the sandbox root is already a private tmpfs: /tmp on it is private and thrown away
    out += ["--proc", "/proc"]
    folder = identity.device_folder(_DEVICES)
    if folder is not None:  # root hosts: the safe devices in one mount, a folder of root's
        out += ["--dev-bind", folder, "/dev"]
    else:
        for dev in _DEVICES:
            out += ["--dev-bind-try", dev, dev]
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _folders_from_root(folder: str) -> tuple[str, ...]:
    """``folder`` and every folder above it but ``/`` and the system trees (bound as such)."""
    out: list[str] = []
    while folder not in ("", "/"):
        if not any(folder == tree or folder.startswith(tree + "/") for tree in _SYSTEM_TREES):
            out.append(folder)
        folder = os.path.dirname(folder)  # noqa: PTH120 - string paths, cached
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _parent_dirs(dests: tuple[str, ...], runs: str) -> tuple[str, ...]:
    """``--dir`` (mode 0755) for each folder above a mount point and for the runs folder
    (with what is above it), where each call's working folder is.

    bwrap would otherwise create them with the mode of the host folder (a pytest or
    ``mkdtemp`` folder is ``0700``), which the sandbox id, not their owner, cannot pass.
    Cached: the same folders call after call (a working folder's name is new, its runs
    folder is not).
    """
    parents: set[str] = set(_folders_from_root(runs))
    for dest in dests:
        parents.update(_folders_from_root(os.path.dirname(dest.rstrip("/"))))  # noqa: PTH120
    # /tmp first, sticky and world-writable like any /tmp (on a root host the module is not
    # its owner); the sandbox root is a private tmpfs, so it is private and thrown away
    out: list[str] = ["--perms", "1777", "--dir", "/tmp"]
    parents.discard("/tmp")
    for folder in sorted(parents, key=lambda p: (_depth(p), p)):
        out += ["--dir", folder]
    return tuple(out)


def _layout(
    reads: list[tuple[str, str]],
    ro: list[tuple[str, str]],
    rw: list[tuple[str, str]],
    *,
    runs: str,
    network: bool,
    prefix: list[str],
    tmpfs: int = TMPFS_BYTES,
    masked: tuple[str, ...] = (),
) -> list[str]:
    """The sandbox's file system: its root, a tmpfs bounded by ``tmpfs`` bytes, its folders,
    the system trees, ``reads`` and the roots, an empty tmpfs over each of ``masked``
    (murmur-nb's own folders inside a root, where the sandbox shows them: :func:`_masked`),
    and the drop helper (the first word of ``prefix``) at :data:`_HELPER_AT`."""
    devices = () if identity.device_folder(_DEVICES) else _DEVICES  # else bound at /dev
    parents = _parent_dirs((*(given for _, given in [*reads, *ro, *rw]), *devices), runs)
    # bwrap's own root tmpfs has no bound: a bounded one over it, first (the zygote lays it
    # over its own the same way)
    out = ["--size", str(tmpfs), "--tmpfs", "/", *parents, *_system_args()]
    if network:
        # name resolution: /etc/resolv.conf may point into /run (systemd-resolved)
        resolv = os.path.realpath("/etc/resolv.conf")
        if not resolv.startswith("/etc/"):
            out += ["--ro-bind-try", str(Path(resolv).parent), str(Path(resolv).parent)]
    # deeper binds after shallower ones, so a root nested in another keeps its own mode, and
    # a root holding the module's folder or the interpreter (a root of /tmp or of the home)
    # leaves them bound as they are (read-only, reachable by the sandbox id)
    binds = sorted([("--ro-bind-try", p) for p in reads] + [("--ro-bind", p) for p in ro]
                   + [("--bind", p) for p in rw], key=lambda m: _depth(m[1][1]))  # fmt: skip
    covers = [*masked, *([runs] if _beneath(runs, (*_SYSTEM_TREES, *(given for _, (_, given)
                                                                        in binds))) else [])]
    out += _covered(binds, covers, tmpfs)
    if prefix[0] != _ENV:  # the drop helper
        out += ["--ro-bind", prefix[0], _HELPER_AT]
    return out


def _covered(binds: list[tuple[str, Pair]], covers: list[str], tmpfs: int) -> list[str]:
    """The options of ``binds`` in order, with a fresh tmpfs at each of ``covers`` after
    every bind that holds it and before those inside it, whose folders above them are made
    again on the tmpfs (``0755``, as :func:`_parent_dirs` makes them: the sandbox id passes
    through).

    A cover is the runs folder where a bind holds it (a root mapped to a folder above it:
    ``--root data=<above the home>``, or ``/tmp``), or one of murmur-nb's own folders inside
    a root (:func:`_masked`). Without it the runs folder is the covering bind's: read-only for
    an ``ro`` root, so neither bwrap nor the drop helper could make the call's working folder
    there, and the module would see every other call's folders in it through its root; and a
    root of the home folder would show the sealing key and every module's snapshot. The tmpfs
    is the sandbox's own and goes with it, like its ``/tmp``: the working folder is made on
    it, the module's own snapshot and the fresh write roots are bound over it, and nothing
    else of the host's folder shows.
    """
    outer = sorted({c for c in covers if not any(_beneath(c, [o]) and c != o for o in covers)},
                   key=lambda p: (_depth(p), p))  # fmt: skip
    if not outer:
        return [arg for how, (real, given) in binds for arg in (how, real, given)]
    insides = [cover.rstrip("/") + "/" for cover in outer]
    after = [bind for bind in binds if bind[1][1].startswith(tuple(insides))]
    out = [arg for bind in binds if bind not in after for arg in (bind[0], *bind[1])]
    for cover in outer:
        out += ["--size", str(tmpfs), "--tmpfs", cover]
    folders = {folder for _, (_, given) in after
               for folder in _folders_from_root(os.path.dirname(given.rstrip("/")))  # noqa: PTH120
               if folder.startswith(tuple(insides))}  # fmt: skip
    for folder in sorted(folders, key=lambda p: (_depth(p), p)):
        out += ["--dir", folder]
    return out + [arg for how, (real, given) in after for arg in (how, real, given)]


def _masked(roots: list[Pair]) -> tuple[str, ...]:
    """Where murmur-nb's own folders (:func:`~murmur_nb._files.own_state.folders`) show in
    the sandbox through a root that holds them (or is one, which the host refuses first):
    each root's path as given, followed by the folder's path below the root's real path."""
    found: list[str] = []
    for own in own_state.folders():
        for real, given in roots:
            if _beneath(own, [real]):
                found.append(given.rstrip("/") + own[len(real.rstrip("/")):] or "/")
    return tuple(dict.fromkeys(found))


def _bwrap_argv(
    bwrap: str,
    argv: Sequence[str],
    cwd: Path,
    reads: list[tuple[str, str]],
    *,
    ro: list[tuple[str, str]],
    rw: list[tuple[str, str]],
    network: bool,
    filtered: list[str],
    private_cwd: bool,
    tmpfs: int = TMPFS_BYTES,
) -> tuple[list[str], tuple[int, ...]]:
    flags, fds = _namespace_flags(network=network, seccomp=bool(filtered))
    if private_cwd:  # it exists only in the sandbox: resolve the runs folder it is in
        runs = real_path(cwd.parent)
        real_cwd = os.path.join(runs, cwd.name)  # noqa: PTH118 - argv strings
    else:
        real_cwd = real_path(cwd)
        runs = os.path.dirname(real_cwd)  # noqa: PTH120
    prefix = _identity_prefix()
    out = [bwrap, *flags, *filtered,
           *_layout(reads, ro, rw, runs=runs, network=network, prefix=prefix, tmpfs=tmpfs,
                    masked=_masked([*ro, *rw]))]  # fmt: skip
    if not private_cwd:
        out += ["--bind", real_cwd, real_cwd, "--chdir", real_cwd]
    elif identity.is_root():  # the drop helper makes it, the sandbox id's, and starts there
        prefix = [*prefix, "-C", real_cwd]
    else:  # made on the sandbox's own tmpfs by bwrap, as the user
        out += ["--perms", "0700", "--dir", real_cwd, "--chdir", real_cwd]
    out += ["--", *_sandboxed(prefix), *argv]
    return out, fds
