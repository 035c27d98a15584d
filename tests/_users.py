"""The unprivileged account the root runs use to run a suite again, and its way in.

The user is made once with ``useradd``; :func:`passage_for` lets it through the folders above
the repository and the interpreter (root's home holds them here) for one run, and puts every
ACL it touched back afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

_USER = "murmur-nb-test"
_ACL = "system.posix_acl_access"


@contextlib.contextmanager
def passage_for(uid: int, paths: list[Path]) -> Iterator[None]:
    """Let ``uid`` pass through the folders above ``paths``; every ACL touched is put back."""
    from murmur_nb._sandbox import identity  # private: the ACL writer has no public path

    saved: dict[Path, bytes | None] = {}
    for path in paths:
        for parent in [*reversed(path.parents), path]:
            if parent not in saved:
                try:
                    saved[parent] = os.getxattr(parent, _ACL)
                except OSError:
                    saved[parent] = None
        identity.grant_passage(str(path / "x"), uid=uid)
    try:
        yield
    finally:
        for folder, value in saved.items():
            with contextlib.suppress(OSError):
                if value is None:
                    os.removexattr(folder, _ACL)
                else:
                    os.setxattr(folder, _ACL, value)


def test_user() -> int:
    """The uid of the test account, made the first time."""
    try:
        return pwd.getpwnam(_USER).pw_uid
    except KeyError:
        useradd = shutil.which("useradd", path="/usr/sbin:/sbin:/usr/bin:/bin") or "useradd"
        subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        _USER], check=True, capture_output=True)
        return pwd.getpwnam(_USER).pw_uid


test_user.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test
