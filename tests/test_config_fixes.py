"""What the environment configures, from a platform engineer's trial: each variable murmur-nb
reads takes a bad value with a clear word, never a traceback or a silent surprise.

* a relative ``$MURMUR_NB_CACHE`` (or ``$MURMUR_NB_KEYS``) is made absolute once, against the
  working folder of its first use: a root host's sandbox was given the relative path and
  refused every module, and a notebook that changed folder made a second cache;
* a bad ``$MURMUR_NB_CACHE_MAX_MB`` is warned about and the default budget kept, where it
  crashed the hook host (``int('abc')``) or, at ``0``, deleted every compiled component right
  after compiling it;
* ``$FACET_STUDIO_HOME`` expands ``~`` as the other path variables do;
* ``$MURMUR_NB_KEYS`` naming a file is refused with the message meant for it, not a bare
  ``FileExistsError``;
* a demo home another account prepared, and that is current, is used read-only (the lock is
  taken only when something must be written); one that is not says which path to pass;
* every variable read is in ``docs/configuration.md``.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import wasmtime
from _modules import install
from _users import REPO, run_as_test_user, test_user

import murmur_nb as mnb
from murmur_nb._files.sealing_key import (  # private: the key's own rules
    key_dir,
    sealing_key,
    user_key,
)
from murmur_nb._hooks.cache import ComponentCache  # private: the cache's budget is tested
from murmur_nb._rules import cache_dir, facet_studio_home  # private: where the homes are

COMPONENT = """
(component
  (core module $m (func (export "f") (result i32) i32.const 7))
  (core instance $i (instantiate $m))
  (func $f (result u32) (canon lift (core func $i "f")))
  (export "f" (func $f)))
"""


# -- 7: a relative cache folder ------------------------------------------------------------------


def test_a_relative_cache_folder_is_made_absolute_once_at_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, ``cache_dir()`` returned the relative path itself: after ``os.chdir`` the
    same kernel used a second cache, and the keys likewise."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    relative = f"relc-{tmp_path.name}"  # a value no other test has pinned in this process
    monkeypatch.setenv("MURMUR_NB_CACHE", relative)
    monkeypatch.setenv("MURMUR_NB_KEYS", f"{relative}-keys")
    monkeypatch.chdir(first)
    assert cache_dir() == first / relative
    assert key_dir() == first / f"{relative}-keys"
    monkeypatch.chdir(second)
    assert cache_dir() == first / relative
    assert key_dir() == first / f"{relative}-keys"


def test_a_relative_cache_folder_runs_modules_on_a_root_host(tmp_path: Path) -> None:
    """``MURMUR_NB_CACHE=relc murmur-nb --home F list`` on a root host: bwrap was given
    ``relc/sandbox/dev-...`` and every describe failed ("Can't find source path")."""
    install(tmp_path / "F", "good")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_NB")}
    env["MURMUR_NB_CACHE"] = "relc"
    done = subprocess.run(
        [sys.executable, "-m", "murmur_nb", "--home", "F", "list"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"ok": true' in done.stdout, done.stdout[-3000:]
    assert (tmp_path / "relc").is_dir()


# -- 8: the cache's budget -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "0.5", "0", "-1", "1e3"])
def test_a_bad_cache_budget_is_warned_and_the_default_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Before: ``ValueError: invalid literal for int()`` out of the hook host's load for
    ``abc`` and ``0.5``; ``0`` and ``-1`` deleted the entry just compiled, so every kernel
    compiled the component again, silently."""
    monkeypatch.setenv("MURMUR_NB_CACHE_MAX_MB", value)
    path = tmp_path / "c.wasm"
    path.write_bytes(wasmtime.wat2wasm(COMPONENT))
    engine = wasmtime.Engine()
    cache = ComponentCache(engine, "plain", tmp_path / "cache", key=b"k" * 32)
    with pytest.warns(mnb.HookConfigWarning) as caught:
        first = cache.load(path)
    (warning,) = caught
    text = str(warning.message)
    assert "MURMUR_NB_CACHE_MAX_MB" in text and repr(value) in text, text
    assert "whole number of MiB" in text and "2,048" in text, text
    assert first.source == "compiled" and first.entry.is_file()
    again = ComponentCache(engine, "plain", tmp_path / "cache", key=b"k" * 32)
    assert again.load(path).source == "cache"  # kept: no kernel compiles it again


@pytest.mark.parametrize("value", ["", "1", " 64 "])
def test_a_good_or_empty_cache_budget_needs_no_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Empty counts as unset, as for every other variable; a budget is whole MiB."""
    monkeypatch.setenv("MURMUR_NB_CACHE_MAX_MB", value)
    path = tmp_path / "c.wasm"
    path.write_bytes(wasmtime.wat2wasm(COMPONENT))
    cache = ComponentCache(wasmtime.Engine(), "plain", tmp_path / "cache", key=b"k" * 32)
    assert cache.load(path).entry.is_file()  # a warning would fail the test (-W error)


# -- 9: ~ in $FACET_STUDIO_HOME ------------------------------------------------------------------


def test_facet_studio_home_expands_the_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FACET_STUDIO_HOME", "~/fs")
    assert facet_studio_home() == tmp_path / "fs"  # was Path("~/fs"): ./~/fs


# -- 16: $MURMUR_NB_KEYS naming a file -----------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "under a file"])
def test_a_key_folder_that_is_a_file_is_refused_with_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Before, ``mkdir(exist_ok=True)`` raised a bare ``FileExistsError`` (or
    ``NotADirectoryError``) before the intended message could be given."""
    plain = tmp_path / "keys"
    plain.write_text("not a folder")
    monkeypatch.setenv("MURMUR_NB_KEYS", str(plain if where == "file" else plain / "sub"))
    with pytest.raises(mnb.HookError) as info:
        user_key()
    assert info.value.code == "insecure_cache_key"
    assert "is not a folder" in str(info.value) and "$MURMUR_NB_KEYS" in str(info.value)
    assert plain.read_text() == "not a folder"


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule is a root kernel's")
def test_a_root_kernel_touches_nothing_in_another_accounts_home_for_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given another account's ``HOME`` (``sudo -E``), a root kernel made its key folder
    there, and followed a link the account had put in its place: it made the folder the
    link named ``0700`` and wrote its key in it (a red-team trial). It now seals with a key
    of its own process and makes, changes and writes nothing there."""
    uid = test_user()
    victim = tmp_path / "victim"  # a folder of root's others may read
    victim.mkdir(mode=0o755)
    victim.chmod(0o755)
    theirs = tmp_path / "theirs"
    state = theirs / ".local" / "state"
    state.mkdir(parents=True)
    (state / "murmur-nb").symlink_to(victim)
    for path in (theirs, theirs / ".local", state):
        os.chown(path, uid, uid)
    os.lchown(state / "murmur-nb", uid, uid)
    for name in ("MURMUR_NB_KEYS", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(theirs))
    key, kept = sealing_key()
    assert stat.S_IMODE(victim.stat().st_mode) == 0o755 and list(victim.iterdir()) == []
    assert not kept
    plain = tmp_path / "plain"
    plain.mkdir()
    os.chown(plain, uid, uid)
    monkeypatch.setenv("HOME", str(plain))
    assert sealing_key() == (key, False)
    assert list(plain.iterdir()) == []


# -- 13: a shared demo home ----------------------------------------------------------------------

AS_USER = """
import stat
import sys
import murmur_nb as mnb
try:
    home = mnb.prepare_demo_home(sys.argv[1], hooks=False)
except PermissionError as exc:
    print("refused:", exc)
    raise SystemExit(3)
with home.host() as host:
    print(sorted(m.id for m in host.modules() if m.ok))
"""


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder every account may pass through (``tmp_path`` is root's alone): the other
    account gets no passage of its own for it, so its passage is the one every rerun as
    that user shares (``_users.passage_for``), never taken back under another's feet."""
    folder = Path(tempfile.mkdtemp(prefix="mnb-shared-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _as_test_user(folder: Path, shared: Path) -> subprocess.CompletedProcess[str]:
    return run_as_test_user([sys.executable, "-c", AS_USER, str(shared)], folder / "user")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to prepare a home another account uses")
def test_a_current_demo_home_of_another_account_is_used_read_only(shared_folder: Path) -> None:
    """Every tutorial's first cell calls ``prepare_demo_home()``: on a shared
    ``$MURMUR_NB_DEMO_HOME`` root had prepared, each failed with ``PermissionError`` on
    ``.prepare.lock``, though nothing needed writing."""
    shared = shared_folder / "shared"
    mnb.prepare_demo_home(shared, hooks=False)
    before = sorted((p.relative_to(shared), p.stat().st_mtime_ns) for p in shared.rglob("*"))
    done = _as_test_user(shared_folder, shared)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "'critic', 'docs', 'gallery', 'oracle', 'studio'" in done.stdout, done.stdout
    after = sorted((p.relative_to(shared), p.stat().st_mtime_ns) for p in shared.rglob("*"))
    assert after == before  # nothing was written


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to prepare a home another account uses")
def test_a_stale_demo_home_of_another_account_says_which_path_to_pass(
    shared_folder: Path,
) -> None:
    shared = shared_folder / "shared"
    home = mnb.prepare_demo_home(shared, hooks=False)
    home.murmur_yaml.write_text("# an older murmur-nb wrote this\n")
    done = _as_test_user(shared_folder, shared)
    assert done.returncode == 3, done.stdout + done.stderr[-3000:]
    said = " ".join(done.stdout.split())
    assert f"the demo home {shared} is not up to date" in said, said
    assert "prepare_demo_home(" in said and "$MURMUR_NB_DEMO_HOME" in said, said
    assert home.murmur_yaml.read_text() == "# an older murmur-nb wrote this\n"


#: another account takes the shared home's lock and holds it (what stalled root's update)
TAKE_THE_LOCK = """
import fcntl, sys
try:
    handle = open(sys.argv[1], "rb")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("held")
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to prepare a home another account uses")
def test_another_account_cannot_take_the_lock_of_a_shared_demo_home(shared_folder: Path) -> None:
    """A red-team trial opened root's ``0644`` lock read-only and held ``flock`` on it: root's
    next update of the shared home waited for ever. The lock is ``0600`` now, also when an
    older version left it readable, and the update goes through."""
    shared = shared_folder / "shared"
    home = mnb.prepare_demo_home(shared, hooks=False)
    lock = shared / ".prepare.lock"
    lock.chmod(0o644)  # as an older murmur-nb left it
    home.murmur_yaml.write_text("# stale\n")
    mnb.prepare_demo_home(shared, hooks=False)  # locks (and repairs) it once
    assert lock.stat().st_mode & 0o777 == 0o600
    home.murmur_yaml.write_text("# stale again\n")
    done = run_as_test_user([sys.executable, "-c", TAKE_THE_LOCK, str(lock)],
                            shared_folder / "user")  # fmt: skip
    assert done.stdout.strip() == "PermissionError", done.stdout + done.stderr[-2000:]
    mnb.prepare_demo_home(shared, hooks=False)
    assert "stale" not in home.murmur_yaml.read_text()


def test_a_current_demo_home_is_not_locked_again(tmp_path: Path) -> None:
    """The lock is taken only when something is written: a current home is read as is."""
    shared = tmp_path / "shared"
    mnb.prepare_demo_home(shared, hooks=False)
    (shared / ".prepare.lock").unlink()
    mnb.prepare_demo_home(shared, hooks=False)
    assert not (shared / ".prepare.lock").exists()
    (shared / "facet-studio" / "modules" / "critic" / "module").chmod(0o644)
    mnb.prepare_demo_home(shared, hooks=False)  # stale: locked and repaired
    assert (shared / ".prepare.lock").exists()
    assert (shared / "facet-studio" / "modules" / "critic" / "module").stat().st_mode & 0o777 \
        == 0o755


# -- 17: every variable is documented ------------------------------------------------------------

#: ``os.environ.get("X")``, ``os.environ["X"]``, ``env_folder("X")`` (the folders' one rule)
READ = re.compile(
    r"""(?:environ\.get|env_folder)\(\s*["']([A-Z][A-Z0-9_]+)["']|environ\[["']([A-Z][A-Z0-9_]+)"""
)


def variables_read() -> set[str]:
    """Each environment variable murmur-nb's code and scripts read, by name."""
    found: set[str] = set()
    for path in [*(REPO / "murmur_nb").rglob("*.py"), *(REPO / "scripts").iterdir()]:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found |= {a or b for a, b in READ.findall(text)}
        found |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]+):-", text))  # a shell default
        found |= set(re.findall(r'^SWITCH = "([A-Z_]+)"', text, re.M))  # the zygote's
    return found


def test_every_variable_read_is_in_the_configuration_page() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    rows = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", page, re.M))
    wanted = variables_read() - {"HOME", "JUPYTER_RUNTIME_DIR"}  # set for children, not read
    assert {"MURMUR_NB_CACHE", "MURMUR_NB_DEMO_PORT", "MURMUR_NB_ZYGOTE"} <= wanted, wanted
    assert wanted <= rows, f"not in the table of docs/configuration.md: {wanted - rows}"
    assert "(docs/configuration.md)" in (REPO / "README.md").read_text()
