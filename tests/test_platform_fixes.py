"""Defects a platform engineer found, each tried for real: a root above the runs folder, a
policy flag spelled as a string, an interpreter the sandbox does not show, a read-only
module home, and the zygote's switch.

Each module here is a real executable run through the real sandbox (the kernel's zygote and
bubblewrap, or Landlock where a test forces it), in real folders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import install, sh_module
from _users import REPO, passage_for, test_user

import murmur_nb as mnb
from murmur_nb._sandbox import zygote as zygote_  # private: the zygote has no public switch

#: read the fresh ``out`` root's path from the request line a sh module read (compact JSON)
_OUT = 'out=${line#*\\"out\\":{\\"path\\":\\"}; out=${out%%\\"*}'
_LANDLOCK = ("landlock", "reaper", "seccomp")


@pytest.fixture(params=["zygote", "bwrap"])
def forker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each call forked by the kernel's zygote, or made by a bubblewrap of its own."""
    if request.param == "bwrap":
        monkeypatch.setenv(zygote_.SWITCH, "off")
    else:
        monkeypatch.delenv(zygote_.SWITCH, raising=False)
    return str(request.param)


@pytest.fixture
def in_tmp() -> Iterator[Path]:
    """A folder right in ``/tmp`` (whatever pytest's base folder is), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="mnb-platform-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stderr(host: mnb.ModuleHost) -> str:
    return str(host.audit()["stderr_tail"].iloc[-1])


def _mount_namespace(tmp_path: Path) -> bool:
    """Whether the sandbox here has a mount namespace (bwrap): in a default Docker container
    (Landlock) a root holding the runs folder is refused instead (the test after these)."""
    with mnb.ModuleHost(home=tmp_path / "nothing") as host:
        return host.sandbox.mechanism == "bwrap"


def _probe_run(host: mnb.ModuleHost, tmp_path: Path) -> tuple[mnb.Invocation, str] | None:
    """``probe.run`` and its stderr; ``None`` where the host refuses it, as it must without
    a mount namespace (the refusal names the runs folder)."""
    if not _mount_namespace(tmp_path):
        with pytest.raises(mnb.ModuleHostError, match="runs folder"):
            host.invoke("probe.run", {})
        return None
    return host.invoke("probe.run", {}), _stderr(host)


# -- 2: a root that holds the runs folder --------------------------------------------------


def test_a_read_root_holding_the_runs_folder_keeps_the_working_folder_writable(
    tmp_path: Path, forker: str
) -> None:
    """The CLI's layout: ``--home F --root data=<a folder above F>`` puts the runs folder
    (``F/runs``) inside a read-only root. The call runs; it writes its working folder and
    its fresh ``out`` root (which is in the runs folder), reads ``data``, and sees nothing
    the runs folder holds on the host (another call's folders)."""
    home = tmp_path / "F"
    runs = home / "runs"
    (runs / "another-call").mkdir(parents=True)
    (runs / "another-call" / "secret").write_text("not yours")
    (tmp_path / "readme").write_text("data root")
    sh_module(home, "probe", reads=["data"], after=(
        f"{_OUT}\n"
        "echo made > here && echo \"cwd:$(cat here)\" >&2\n"
        'echo written > "$out/x" && echo "out:$(cat "$out/x")" >&2\n'
        f"echo \"data:$(cat {tmp_path}/readme)\" >&2\n"
        f"echo \"runs:$(ls -A {runs} | tr '\\n' ' ')\" >&2\n"
        f"cat {runs}/another-call/secret >&2 || echo 'secret: hidden' >&2"
    ))  # fmt: skip
    policy = mnb.Policy(roots={"data": tmp_path})
    with mnb.ModuleHost(home=home, policy=policy, runs_dir=runs) as host:
        ran = _probe_run(host, tmp_path)
        if ran is None:
            return
        inv, said = ran
    assert inv.ok, said
    assert "cwd:made" in said and "out:written" in said and "data:data root" in said
    assert "secret: hidden" in said and "not yours" not in said
    assert "another-call" not in said.split("runs:")[1].splitlines()[0]


# other accounts' files in /tmp (other tests', other users') are not given to a root host's
# module, and the host says which: whether there are any depends on the machine
@pytest.mark.filterwarnings("ignore:root /tmp.* was not given:UserWarning")
def test_a_root_of_tmp_shows_the_hosts_tmp_and_the_call_runs(
    tmp_path: Path, in_tmp: Path, forker: str
) -> None:
    """``Policy(roots={'data': '/tmp'})`` with the default runs folder (in ``/tmp``): the
    module reads the host's ``/tmp`` through its root (the zygote used to show its own
    sandbox's tmpfs there, and failed to make the fresh ``out`` root in it)."""
    (in_tmp / "marker").write_text("the host's /tmp")
    home = tmp_path / "home"
    sh_module(home, "probe", reads=["data"], after=(
        f"{_OUT}\n"
        'echo written > "$out/x" && echo "out:$(cat "$out/x")" >&2\n'
        f"echo \"seen:$(cat {in_tmp}/marker)\" >&2"
    ))  # fmt: skip
    with mnb.ModuleHost(home=home, policy=mnb.Policy(roots={"data": "/tmp"})) as host:
        ran = _probe_run(host, tmp_path)
        if ran is None:
            return
        inv, said = ran
    assert inv.ok, said
    assert "seen:the host's /tmp" in said and "out:written" in said


def test_a_root_holding_the_module_snapshot_leaves_the_module_runnable(
    tmp_path: Path, forker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root above the snapshot store the module runs from (snapshots in ``/tmp`` and a root
    of ``/tmp``, or both in the home): on a root host the sandbox uid reaches the module's
    folder through the root's own folders, a private store among them. The root's grant
    covers a budget of entries (``access.ACL_BUDGET``, an internal set to 1 here: a ``/tmp``
    or a home holds more than the 20,000 it is); the module still starts."""
    from murmur_nb._sandbox import access  # private: the budget has no public knob

    monkeypatch.setattr(access, "ACL_BUDGET", 1)
    store = tmp_path / "data" / "private" / "snapshots"
    store.mkdir(parents=True)
    (tmp_path / "data" / "private").chmod(0o700)
    monkeypatch.setenv("MURMUR_NB_SNAPSHOTS", str(store))
    home = tmp_path / "home"
    sh_module(home, "probe", reads=["data"])
    policy = mnb.Policy(roots={"data": tmp_path / "data"})
    with mnb.ModuleHost(home=home, policy=policy) as host:
        assert host.invoke("probe.run", {}).ok
    # the passage went with the host, as every entry the sandbox uid is given does
    assert "system.posix_acl_access" not in os.listxattr(tmp_path / "data" / "private")


def test_a_root_that_is_the_runs_folder_is_refused(tmp_path: Path) -> None:
    """The sandbox keeps the runs folder out of sight: such a root would show empty."""
    home, runs = tmp_path / "home", tmp_path / "runs"
    runs.mkdir()
    sh_module(home, "probe", reads=["data"], before=f"touch {tmp_path}/ran")
    policy = mnb.Policy(roots={"data": runs})
    with (mnb.ModuleHost(home=home, policy=policy, runs_dir=runs) as host,
          pytest.raises(mnb.ModuleHostError, match="is this host's runs folder") as caught):
        host.invoke("probe.run", {})
    assert caught.value.code == "root_unavailable" and "runs_dir" in caught.value.message
    assert not (tmp_path / "ran").exists()


def test_the_cli_runs_with_a_root_above_its_home(tmp_path: Path) -> None:
    """The report's own command: ``murmur-nb --home F --root data=<above F> invoke``."""
    home = tmp_path / "F"
    sh_module(home, "probe", reads=["data"])
    cli = Path(sys.executable).with_name("murmur-nb")
    done = subprocess.run([str(cli), "--home", str(home), "--root", f"data={tmp_path}",
                           "invoke", "probe.run", "{}"], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    if not _mount_namespace(tmp_path):  # refused by the host, not blamed on the module
        assert json.loads(done.stdout)["host_error"]["code"] == "root_unavailable", done.stdout
        return
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"] is True


def test_without_a_mount_namespace_a_root_holding_the_runs_folder_is_refused(
    tmp_path: Path,
) -> None:
    """Under Landlock (no mount namespace: a default Docker container) a root above the runs
    folder would show the module every other call's working folder: the call is refused by
    the host (not blamed on the module), naming the root, the runs folder and the fix, and
    nothing runs."""
    home = tmp_path / "F"
    runs = home / "runs"
    sh_module(home, "probe", reads=["data"], before=f"touch {tmp_path}/ran")
    policy = mnb.Policy(roots={"data": tmp_path}, sandbox_mechanisms=_LANDLOCK)
    with (mnb.ModuleHost(home=home, policy=policy, runs_dir=runs) as host,
          pytest.raises(mnb.ModuleHostError) as caught):
        host.invoke("probe.run", {})
    err = caught.value
    assert err.code == "root_unavailable", err
    assert "'data'" in err.message and str(tmp_path) in err.message
    assert str(runs) in err.message and "runs_dir" in err.message
    assert not (tmp_path / "ran").exists()


def test_without_a_mount_namespace_a_root_apart_from_the_runs_folder_runs(
    tmp_path: Path,
) -> None:
    home = tmp_path / "F"
    (tmp_path / "data").mkdir()
    sh_module(home, "probe", reads=["data"])
    policy = mnb.Policy(roots={"data": tmp_path / "data"}, sandbox_mechanisms=_LANDLOCK)
    with mnb.ModuleHost(home=home, policy=policy, runs_dir=home / "runs") as host:
        assert host.invoke("probe.run", {}).ok


@pytest.mark.parametrize("mapping", ["roots", "binaries"])
def test_an_empty_path_is_refused(mapping: str) -> None:
    with pytest.raises(ValueError, match=r"Policy\.\w+\['data'\] is an empty path") as caught:
        mnb.Policy(**{mapping: {"data": ""}})
    assert "current" in str(caught.value)


# -- 3: a bool field given as a string -----------------------------------------------------


@pytest.mark.parametrize("value", ["false", "no", "true", "", 0, 1, None, [True]])
def test_publish_takes_only_a_bool(value: object) -> None:
    with pytest.raises(ValueError, match=r"Policy\.publish must be true or false"):
        mnb.Policy.from_mapping({"publish": value})
    with pytest.raises(ValueError, match=r"Policy\.publish"):
        mnb.Policy(publish=value)  # type: ignore[arg-type]


def test_publish_as_a_bool_grants_as_before() -> None:
    assert mnb.Policy.from_mapping({"publish": True}).publish is True
    assert mnb.Policy.from_mapping({"publish": False}).publish is False


@pytest.mark.parametrize("kind", ["network", "credentials", "paid_providers", "subprocess",
                                  "approved"])  # fmt: skip
@pytest.mark.parametrize("value", [True, False, 1, [True], ["a", 2]])
def test_name_lists_refuse_what_is_not_names(kind: str, value: object) -> None:
    """A YAML ``network: true`` (or ``[yes]``) is no list of names: a clear ValueError, not a
    ``TypeError`` from deep inside (or, for ``[yes]``, a grant of the host ``True``)."""
    with pytest.raises(ValueError, match=rf"Policy\.{kind} must be a list of names"):
        mnb.Policy.from_mapping({kind: value})


def test_a_yaml_off_for_the_sandbox_says_to_quote_it() -> None:
    """YAML 1.1 reads an unquoted ``sandbox: off`` as ``false``."""
    with pytest.raises(ValueError, match="quote"):
        mnb.Policy.from_mapping({"sandbox": False})


# -- 6: an interpreter the sandbox does not show ---------------------------------------------


def _shebang_module(home: Path, module: str, interpreter: str) -> None:
    sh_module(home, module)
    exe = home / "modules" / module / "module"
    exe.write_text(exe.read_text().replace("#!/bin/sh", f"#!{interpreter}", 1))


@pytest.mark.parametrize("mechanisms", [None, _LANDLOCK], ids=["bwrap", "landlock"])
def test_an_interpreter_outside_the_sandbox_is_named_with_the_fix(
    tmp_path: Path, in_tmp: Path, mechanisms: tuple[str, ...] | None
) -> None:
    """A shell copied to ``/tmp/x/mysh``: the module file exists, its interpreter is what the
    sandbox does not show. The refusal names it, what the sandbox shows, and the fix; it
    does not blame the module's describe output."""
    shell = in_tmp / "mysh"
    shutil.copy2("/bin/sh", shell)
    home = tmp_path / "home"
    _shebang_module(home, "probe", str(shell))
    policy = mnb.Policy() if mechanisms is None else mnb.Policy(sandbox_mechanisms=mechanisms)
    with mnb.ModuleHost(home=home, policy=policy) as host, pytest.raises(
        mnb.InvalidDescriptor
    ) as caught:
        host.describe("probe")
    said = str(caught.value)
    assert f"interpreter {shell}" in said, said
    assert "/usr" in said and "/etc" in said and sys.prefix in said, said
    # not the module's output, nor exec's ENOENT for a file that exists, is blamed
    assert "describe printed nothing" not in said and "errno 2" not in said
    assert "describe output" not in said
    assert "install" in said.lower()


def test_a_missing_interpreter_is_said_to_be_missing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _shebang_module(home, "probe", "/usr/bin/no-such-shell-4711 -e")
    with mnb.ModuleHost(home=home) as host, pytest.raises(mnb.InvalidDescriptor) as caught:
        host.describe("probe")
    said = str(caught.value)
    assert "interpreter /usr/bin/no-such-shell-4711" in said and "does not exist" in said, said


def test_interpreters_the_sandbox_shows_still_run(tmp_path: Path) -> None:
    """``/bin/sh`` (a system tree), ``/usr/bin/env sh`` and this Python (its prefix)."""
    home = tmp_path / "home"
    _shebang_module(home, "shell", "/bin/sh")
    _shebang_module(home, "viaenv", "/usr/bin/env sh")
    install(home, "python")
    with mnb.ModuleHost(home=home) as host:
        assert host.invoke("shell.run", {}).ok
        assert host.invoke("viaenv.run", {}).ok
        assert host.describe("python").module == "python"


# -- 13: a read-only module home --------------------------------------------------------------

_STAGE = """
import json, sys
import murmur_nb as mnb
home, store = sys.argv[1], (sys.argv[2] or None)
with mnb.ModuleHost(home=home, artifact_store=store) as host:
    inv = host.invoke("producer.make", {"root": "scratch",
                                        "files": [{"name": "f.txt", "content": "frame"}]})
    try:
        staged = host.stage(inv.artifacts[0])
    except mnb.ModuleHostError as exc:
        print(json.dumps({"code": exc.code, "message": exc.message}))
    else:
        print(json.dumps({"file": str(staged.file), "bytes": staged.file.read_bytes().decode(),
                          "consumed": host.invoke("consumer.consume", staged.ref(),
                                                  staged=[staged]).ok}))
"""


@pytest.fixture
def shared_home() -> Iterator[Path]:
    """A module home another account (root) installed and the test user only reads: a
    JupyterHub's shared module home."""
    home = Path(tempfile.mkdtemp(prefix="mnb-shared-home-"))
    install(home, "producer")
    install(home, "consumer")
    for folder in (home, *home.rglob("*")):
        if folder.is_dir():
            folder.chmod(0o755)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _stage_as_the_user(home: Path, store: str = "") -> tuple[dict[str, str], Path]:
    uid = test_user()
    scratch = Path(tempfile.mkdtemp(prefix="mnb-user-"))
    os.chown(scratch, uid, uid)
    python = Path(sys.executable)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "LANG": "C.UTF-8",
           "MURMUR_NB_CACHE": str(scratch / "cache"),
           "MURMUR_NB_SNAPSHOTS": str(scratch / "snapshots")}  # fmt: skip
    try:
        with passage_for(uid, [REPO, python.parent, Path(os.path.realpath(python)).parent]):
            done = subprocess.run([str(python), "-c", _STAGE, str(home), store], env=env,
                                  user=uid, group=uid, extra_groups=[], cwd="/",
                                  capture_output=True, text=True, timeout=180,
                                  check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.splitlines()[-1]), scratch
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def test_a_read_only_home_stages_in_a_private_store(shared_home: Path) -> None:
    """The user cannot write the shared home: staging uses a store of the user's own in its
    murmur-nb cache (``0700``), and the consumer reads what was staged."""
    said, scratch = _stage_as_the_user(shared_home)
    try:
        assert said.get("bytes") == "frame" and said.get("consumed") is True, said
        store = (scratch / "cache" / "artifact-store").resolve()
        assert Path(said["file"]).is_relative_to(store), said
        assert store.stat().st_mode & 0o077 == 0
        assert not (shared_home / "artifact-store").exists()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_an_artifact_store_the_user_cannot_write_is_named_with_the_fix(
    shared_home: Path,
) -> None:
    store = shared_home / "their-store"
    store.mkdir(mode=0o755)
    said, scratch = _stage_as_the_user(shared_home, str(store))
    shutil.rmtree(scratch, ignore_errors=True)
    assert said.get("code") == "store_unavailable", said
    assert str(store) in said["message"] and "artifact_store=" in said["message"], said


# -- 15: the zygote's switch --------------------------------------------------------------


@pytest.mark.parametrize("value", ["off", "OFF", "Off", "0", "false", "False", "no", " NO "])
def test_the_zygote_is_switched_off_by_the_usual_spellings(
    value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``zygote()`` is what every call asks (an internal: it has no public switch but the
    variable); ``host.sandbox`` says it too."""
    monkeypatch.setenv(zygote_.SWITCH, value)
    assert zygote_.zygote() is None
    if _mount_namespace(tmp_path):  # else no zygote line: nothing is forked without bwrap
        with mnb.ModuleHost(home=tmp_path) as host:
            assert "[zygote] off" in str(host.sandbox)


@pytest.mark.parametrize("value", ["on", "1", "true", "yes", "ON", ""])
def test_the_zygote_stays_on_for_the_usual_spellings_of_on(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(zygote_.SWITCH, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not zygote_.switched_off()


def test_an_unknown_zygote_switch_is_warned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(zygote_.SWITCH, "disabled-4711")
    with pytest.warns(UserWarning, match=r"MURMUR_NB_ZYGOTE='disabled-4711'") as seen:
        assert not zygote_.switched_off()
    assert "off, 0, false, no" in str(seen[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not zygote_.switched_off()  # once
