"""The unprivileged account the root runs use to run a suite again, and its way in.

The user is made once with ``useradd``; :func:`passage_for` lets it through the folders above
the repository and the interpreter (root's home holds them here) for one run, and removes its
entries afterwards, once no other run needs them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_USER = "murmur-nb-test"


@contextlib.contextmanager
def passage_for(uid: int, paths: list[Path]) -> Iterator[None]:
    """Let ``uid`` pass through the folders above ``paths``; its entries are removed after,
    and only its own: a kernel running beside the rerun keeps what it was given meanwhile.

    Runs beside each other that give ``uid`` a passage through one folder (the suite's two
    workers each rerunning a file as the user; two checkouts' suites, which share the
    interpreter's folders) share that folder's passage: each holds a shared lock on a file
    named after the uid and the folder while it runs, and only the last one out takes that
    folder's entry back. Before, the first to finish took it from the other, which then
    failed on its next import ("No module named 'unittest.mock'"; with one lock per set of
    paths, two checkouts still took the interpreter's folders from each other: "No module
    named 'importlib.readers'").
    """
    from murmur_nb._sandbox import access  # private: the ACL writer has no public path

    held: dict[Path, int] = {}
    try:
        for folder in _folders(paths):  # in one order: no two runs wait on each other
            held[folder] = _shared_lock(passage_lock(uid, folder))  # waits for a take-back
        for path in paths:
            access.grant_passage(str(path / "x"), uid=uid)
        yield
    finally:
        for folder, fd in held.items():
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another run still passes through it: the last one out takes it back
            else:
                _take_back(folder, uid)
                passage_lock(uid, folder).unlink(missing_ok=True)  # a waiting run opens anew
            os.close(fd)


def run_as_test_user(argv: list[str], scratch: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` run by the unprivileged test account, with ``scratch`` (made, and given to
    the account) as its home, working folder and cache, and a passage to this checkout and
    its interpreter."""
    uid = test_user()
    scratch.mkdir(exist_ok=True)
    os.chown(scratch, uid, uid)
    python = Path(sys.executable)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "LANG": "C.UTF-8",
           "MURMUR_NB_CACHE": str(scratch / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    with passage_for(uid, [REPO, python.parent, Path(os.path.realpath(python)).parent]):
        return subprocess.run(
            argv, user=uid, group=uid, extra_groups=[], env=env, cwd=scratch,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip


def _folders(paths: list[Path]) -> list[Path]:
    """Each of ``paths`` and every folder above it, sorted."""
    return sorted({folder for path in paths for folder in (path, *path.parents)})


def _take_back(folder: Path, uid: int) -> None:
    """Remove ``uid``'s entries from ``folder`` alone (not from the folders above it)."""
    from murmur_nb._sandbox import access  # private: the ACL writer has no public path

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # gone (a test's folder), and its entries with it
    try:
        access._take(fd, os.fstat(fd), uid)  # private: one folder's entries only
    finally:
        os.close(fd)


def passage_lock(uid: int, folder: Path) -> Path:
    """The file the runs passing ``uid`` through ``folder`` hold while they run (gone once
    none does)."""
    key = hashlib.sha256(str(folder).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"murmur-nb-test-passage-{uid}-{key}.lock"


def _shared_lock(lock: Path) -> int:
    """``lock`` opened and held shared, once it is the file the path names: the last run
    out removes it, and one that opened it before then opens the new one instead."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            named = lock.lstat()
        except FileNotFoundError:
            named = None
        held = os.fstat(fd)
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


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


REPO = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    from murmur_nb._rules import cache_dir as where  # private: the cache's one rule

    return where()


def rerun(
    files: list[str],
    *,
    user: bool,
    docker: bool,
    deselect: str | None = None,
    marks: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> tuple[int, str]:
    """Run pytest on ``files`` again, as the test user (``user``) and/or inside the
    default-Docker harness (``docker``: ``tests/_container.py``), in one process at a lower
    priority, with a scratch home (and, as a user, a cache of its own); ``deselect`` and
    ``marks`` are pytest's ``-k`` and ``-m``. Its exit status and the tail of its output."""
    import tempfile

    uid = test_user() if user else 0
    scratch = Path(tempfile.mkdtemp(prefix="mnb-rerun-"))  # short: Unix socket paths are
    os.chown(scratch, uid, uid)
    python = Path(sys.executable)
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "PYTHONDONTWRITEBYTECODE": "1",
               "MURMUR_NB_CACHE": str(scratch / "cache"), "LANG": "C.UTF-8",
               # root's own runs share root's cache (built helpers and components)
               **({} if user else {"MURMUR_NB_CACHE": str(cache_dir())}),
               "HYPOTHESIS_STORAGE_DIRECTORY": str(scratch / "hypothesis"),
               **({"MNB_IN_CONTAINER": "1"} if docker else {}), **(env or {})}
    # -rfE: the summary names failures and errors only, so the tail returned holds the
    # failure's own lines (the skips -ra lists had pushed them out of it)
    argv = [str(python), "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-p", "no:xdist",
            f"--basetemp={scratch / 'tmp'}", *(["-k", deselect] if deselect else []),
            *(["-m", marks] if marks else []), *files]
    if docker:
        prefix = [str(python), str(REPO / "tests" / "_container.py"),
                  *(["--user", str(uid)] if user else []), "--"]
    elif user:
        setpriv = shutil.which("setpriv", path="/usr/bin:/bin") or "setpriv"
        prefix = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    else:
        prefix = []
    # below the suite's own priority: the timing tests running beside it keep their CPU
    prefix = [shutil.which("nice", path="/usr/bin:/bin") or "nice", "-n", "10", *prefix]
    passage = passage_for(uid, [REPO, python.parent, Path(os.path.realpath(python)).parent]) \
        if user else contextlib.nullcontext()
    try:
        with passage:
            done = subprocess.run([*prefix, *argv], cwd=REPO, env=environ, capture_output=True,
                                  text=True, timeout=timeout, check=False)
    finally:
        from murmur_nb._files.scratch import remove_tree  # private: a test's tree at any depth

        remove_tree(scratch)
    return done.returncode, (done.stdout + done.stderr)[-3000:]


#: the pytest-timeout of a test that reruns files (:func:`rerun`), past the rerun's own
#: ``timeout``: a rerun runs at nice 10, below the suite, so a loaded machine stretches it
#: far more than the suite's tests (beside two busy loops the container reruns passed the
#: suite's 300 s, which had ended them; alone they take 80-95 s here)
RERUN_TIMEOUT = pytest.mark.timeout(960)

#: the settings a root test reruns a file in (:func:`rerun`): ``(user, docker)`` each
SETTINGS = pytest.mark.parametrize(
    ("user", "docker"),
    [(True, False), (False, True), (True, True)],
    ids=["user", "docker-root", "docker-user"],
)


def reruns_in_each_setting(test: Callable[..., None]) -> Callable[..., None]:
    """Mark ``test(user, docker)`` as the root test that reruns its file as the test user
    and inside the default-Docker harness: slow, one case per setting, skipped where it
    would be a nested run itself."""
    for mark in (
        SETTINGS,
        RERUN_TIMEOUT,
        pytest.mark.skipif(os.environ.get("MNB_IN_CONTAINER") == "1", reason="a nested run"),
        pytest.mark.skipif(os.geteuid() != 0, reason="a nested run: its root parent starts it"),
        pytest.mark.slow,
    ):
        test = mark(test)
    return test
