"""Run a command the way a default Docker container runs it: no namespaces, Docker's caps.

``python tests/_container.py [--user UID] -- COMMAND...`` (as root) gives COMMAND what a
container started with Docker's defaults gets (and a Kubernetes pod with the
``RuntimeDefault`` profile): Docker's default capability set, and a seccomp filter with the
effect of Docker's default profile (moby ``profiles/seccomp/default.json``) on a container
without ``CAP_SYS_ADMIN`` or ``CAP_SYS_PTRACE``: no ``unshare``, ``setns``, ``mount`` or
``clone`` with a namespace flag (``EPERM``), ``clone3`` fails with ``ENOSYS`` (so the C
library falls back to ``clone``), and ``pidfd_getfd``, ``kcmp``, ``process_madvise``,
``bpf``, ``perf_event_open`` fail with ``EPERM``. Landlock and seccomp stay allowed, as there.
With ``--user`` it then becomes that uid (a pod's ``jovyan``), keeping no capability.
Docker does not set no_new_privs by default, and neither does this.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

import pyseccomp

#: Docker's default capabilities (moby oci/caps/defaults.go)
DOCKER_CAPS = {
    "CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
    "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_CHROOT": 18,
    "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31,
}
_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                    0x40000000)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_PR_CAPBSET_DROP = 24
_LAST_CAP = 63


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32))


def _docker_filter() -> None:
    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for name in ("unshare", "setns", "mount", "umount2", "pivot_root", "move_mount",
                 "open_tree", "fsopen", "fsmount", "fspick", "mount_setattr", "pidfd_getfd",
                 "kcmp", "process_madvise", "bpf", "perf_event_open"):
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    for flag in _NAMESPACE_FLAGS:
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone",
                       pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.load()  # as root with CAP_SYS_ADMIN: no no_new_privs needed, as with Docker


def _docker_caps(libc: ctypes.CDLL) -> None:
    keep = sum(1 << bit for bit in DOCKER_CAPS.values())
    for cap in range(_LAST_CAP + 1):
        if not keep >> cap & 1 and libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break  # past the kernel's last capability
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    for i in range(2):
        word = (keep >> (32 * i)) & 0xFFFFFFFF
        data[i] = _CapData(word, word, 0)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def main(argv: list[str]) -> None:
    user = None
    if argv[:1] == ["--user"]:
        user, argv = int(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    _docker_filter()
    _docker_caps(libc)
    if user is not None:
        os.setgroups([])
        os.setresgid(user, user, user)
        os.setresuid(user, user, user)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
