"""What a root kernel's calls leave on disk is for no other account (red-team trial 18b).

A root host runs each module as its sandbox uid, so its runs folder is ``0711`` (the uid
passes through). Each call's folder ``<runs>/<request_id>`` is named to every account by the
sandboxed call's ``/proc/<pid>/mountinfo`` (zygote calls) or by bwrap's command line, and it
was ``0755``, its fresh write roots ``0755`` and the module's files ``0644``: another account
polling ``/proc`` read every output of every call, and the staged artifact hard-linked into
a consumer's view. The call folder, its write roots and its staged view are ``0700`` now (the
sandbox uid gets in by its ACL entries, and on the Landlock path by the passage each folder
above a root gets), the artifact store's folders ``0700``, a batch journal ``0600``.

Each test makes a real root host run a fixture module that writes an output, stages it and
hands it to a consumer, then (the call folders are kept until the host closes) the
unprivileged test account tries to list and read all of it by its real paths, as the
attacker did once ``/proc`` had named them.

The runs folder itself is made only where nobody else can change the way to it: the test
account really makes ``<home>/runs`` a link to a folder only root may write, and a root
kernel's invoke (the command's default ``<home>/runs``, a ``runs_dir`` or ``--runs-dir``
named there) made its call folders and wrote the module's output there.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _modules import install
from _users import run_as_test_user, test_user

import murmur_nb as mnb
from murmur_nb._files import scratch  # private: the removal step the attack runs beside

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a root host's calls")

#: each setting: the mechanisms the policy allows, and whether the zygote may fork the call
SETTINGS = {
    "zygote": (["bwrap", "landlock", "seccomp", "reaper"], True),
    "bwrap": (["bwrap", "landlock", "seccomp", "reaper"], False),
    "reaper": (["landlock", "seccomp", "reaper"], True),
}

#: the other account: for each path, how listing (a folder) or reading (a file) it ended
ATTACK = """
import json, os, sys
seen = {}
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            seen[path] = "listed " + ",".join(sorted(os.listdir(path)))
        else:
            with open(path, "rb") as handle:
                seen[path] = "read %d bytes" % len(handle.read())
    except OSError as exc:
        seen[path] = type(exc).__name__
print(json.dumps(seen))
"""


def _attack(paths: list[Path], scratch: Path) -> dict[str, str]:
    done = run_as_test_user([sys.executable, "-S", "-c", ATTACK, *map(str, paths)], scratch)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    seen: dict[str, str] = json.loads(done.stdout)
    return seen


def _host(home: Path, store: Path, setting: str, monkeypatch: pytest.MonkeyPatch) -> mnb.ModuleHost:
    mechanisms, zygote = SETTINGS[setting]
    if not zygote:
        monkeypatch.setenv("MURMUR_NB_ZYGOTE", "off")
    host = mnb.ModuleHost(home=home, artifact_store=store, policy=mnb.Policy(
        deadline_ms=60_000, sandbox="required", sandbox_mechanisms=mechanisms))  # fmt: skip
    wanted = "landlock" if setting == "reaper" else "bwrap"
    if host.sandbox.mechanism != wanted:
        host.close()
        pytest.skip(f"{setting}: {wanted} does not run here ({host.sandbox.mechanism})")
    return host


def _produce_and_consume(host: mnb.ModuleHost) -> tuple[mnb.Invocation, mnb.Invocation, Any]:
    made = host.invoke("plain.make", {"files": [{"name": "secret.png", "content": "pixels"}]})
    assert made.ok, made.error
    staged = host.stage(made.artifacts[0])
    used = host.invoke("plain.consume", {"root": "staged", "path": staged.path},
                       staged=[staged])  # fmt: skip
    assert used.ok, used.error
    return made, used, staged


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_another_account_reads_nothing_of_a_root_kernels_calls(
    setting: str, reachable: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outputs, the staged view and the store, by their real paths, while the host is
    open: each listing and read is refused; the sandbox still wrote and read them, and the
    host (root) still checks and reads them."""
    home = tmp_path / "home"
    install(home, "plain")
    with _host(home, reachable / "store", setting, monkeypatch) as host:
        made, used, staged = _produce_and_consume(host)
        output = Path(made.artifacts[0].file)
        assert output.read_bytes() == b"pixels"  # the host reads what the module wrote
        assert used.result["bytes"] == len(b"pixels")  # the consumer read its staged view
        w0 = output.parent
        call = w0.parent
        assert call.name == made.request_id and w0.name == "w0-out", (call, w0)
        assert call.parent.name.startswith("murmur-nb-runs-"), call  # the private runs folder
        consumer = call.parent / used.request_id
        view = consumer / "staged-view"
        linked = view / staged.path
        assert linked.read_bytes() == b"pixels"  # the consumer's view is there, kept
        targets = [call, w0, output, w0 / "ran-make", consumer, consumer / "w0-out",
                   consumer / "w0-out" / "ran-consume", view, view / "sha256", linked,
                   staged.file.parent, staged.file]  # fmt: skip
        for path in targets:
            assert path.exists(), path  # the attacker tries real paths, not missing ones
        seen = _attack(targets, reachable / "user")
    refused = {str(p): "PermissionError" for p in targets}
    assert seen == refused, seen


def test_another_account_reads_nothing_while_a_root_host_closes(
    reachable: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the host removes its runs folder. The removal made every folder ``0755`` first
    (so that a read-only one can go): the trial's attacker, polling, read the calls' outputs
    in that window. Here the other account tries at each removal step (each folder of the
    runs folder listed to be emptied, ``scratch._listing``), and is refused whatever is
    left."""
    home = tmp_path / "home"
    install(home, "plain")
    attacks: list[dict[str, str]] = []
    real_listing = scratch._listing  # private: remove_tree lists each folder it empties
    targets: list[Path] = []

    def attack_then_remove(fd: int) -> list[os.DirEntry[str]]:
        if targets and Path(f"/proc/self/fd/{fd}").readlink().is_relative_to(
            targets[0].parent
        ):
            attacks.append(_attack(targets, reachable / "user"))
        return real_listing(fd)

    with mnb.ModuleHost(home=home, artifact_store=reachable / "store") as host:
        made, used, _ = _produce_and_consume(host)
        output = Path(made.artifacts[0].file)
        call, consumer = output.parent.parent, output.parent.parent.parent / used.request_id
        view = consumer / "staged-view"
        targets += [call, output.parent, output, consumer, consumer / "w0-out" / "ran-consume",
                    view, *view.glob("sha256/*")]  # fmt: skip
        assert all(path.exists() for path in targets), targets
        monkeypatch.setattr(scratch, "_listing", attack_then_remove)
    monkeypatch.undo()
    assert attacks, "the runs folder was not removed"
    outcomes = {outcome for seen in attacks for outcome in seen.values()}
    assert outcomes <= {"PermissionError", "FileNotFoundError"}, attacks
    assert attacks[0][str(output)] == "PermissionError", attacks  # tried while it was there


def test_another_account_cannot_read_a_batch_journal(reachable: Path, tmp_path: Path) -> None:
    """Finding 8: a batch journal (row results) in a ``0755`` home was ``0644``."""
    home = reachable / "home"
    install(home, "plain")
    with mnb.ModuleHost(home=home) as host:
        batch = host.map("plain.make", [{"files": [{"name": f"{i}.png", "content": "row"}]}
                                        for i in range(2)], progress=False)  # fmt: skip
        assert batch.progress.ok == 2, batch.progress
        journal = home / "batches" / "journal.sqlite"
        wal = journal.with_name(journal.name + "-wal")
        targets = [journal, *([wal] if wal.exists() else [])]
        seen = _attack(targets, reachable / "user")
        assert seen == {str(p): "PermissionError" for p in targets}, seen
        assert journal.read_bytes()[:15] == b"SQLite format 3"  # still the host's to read
        assert journal.stat().st_mode & 0o777 == 0o600


# -- the runs folder behind another account's link -----------------------------------------


def _plant_runs_link(home: Path, only_root: Path, reachable: Path) -> Path:
    """The test account makes ``<home>/runs`` a link to ``only_root`` (a folder that exists:
    ``mkdir(parents=True)`` goes through a link only to one)."""
    link = home / "runs"
    done = run_as_test_user(["ln", "-s", str(only_root), str(link)], reachable / "scratch")
    assert done.returncode == 0, done.stdout + done.stderr
    assert link.lstat().st_uid == test_user() and link.readlink() == only_root
    return link


def _make_input() -> dict[str, Any]:
    """``producer.make``'s input: one file in its fresh write root, content no other file
    holds."""
    content = f"private output {secrets.token_hex(16)}"
    return {"root": "scratch", "files": [{"name": "f.png", "content": content}]}


def _cli(home: Path, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``murmur-nb --home HOME ARGV`` run by root, as other command tests run it (``python
    -m murmur_nb`` in a subprocess), with a murmur-nb cache of root's."""
    env = {**os.environ, "MURMUR_NB_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "murmur_nb", "--home", str(home), *argv],
                          capture_output=True, text=True, timeout=300, check=False,
                          env=env)  # fmt: skip


def _why(open_folder: Path) -> str:
    """How a refusal names what another account can change in ``open_folder``'s case."""
    if open_folder.name == "shared":
        return f"another account can write {open_folder}"
    return f"{open_folder} belongs to another account (uid {test_user()})"


def _nobody_else_can_change(runs: Path) -> None:
    """``runs`` and every folder above it: root's, no link, writable by nobody else (but a
    sticky one, ``/tmp``)."""
    for folder in (runs, *runs.parents):
        st = folder.lstat()
        assert st.st_uid == 0 and not stat.S_ISLNK(st.st_mode), folder
        assert not st.st_mode & 0o022 or st.st_mode & stat.S_ISVTX, (folder, oct(st.st_mode))


def test_a_root_command_makes_nothing_where_another_accounts_runs_link_leads(
    open_folder: Path, only_root: Path, reachable: Path, tmp_path: Path
) -> None:
    """``murmur-nb --home <theirs> invoke``, its default runs folder ``<home>/runs`` a link
    the account planted: root made the call folders where it led and wrote ``f.png`` there.
    Now the call runs in a private runs folder of root's, and the command says why in one
    line."""
    install(open_folder, "producer")
    link = _plant_runs_link(open_folder, only_root, reachable)
    given = _make_input()
    done = _cli(open_folder, tmp_path, "invoke", "producer.make", json.dumps(given))
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(only_root.iterdir()) == [] and link.readlink() == only_root
    inv = json.loads(done.stdout)
    file = Path(inv["artifacts"][0]["file"])
    runs = file.parents[2]  # <runs>/<request_id>/w0-scratch/f.png
    assert runs.name.startswith("murmur-nb-runs-") and not runs.exists(), file
    _nobody_else_can_change(runs.parent)
    assert not file.is_relative_to(open_folder) and not file.is_relative_to(only_root), file
    (note,) = done.stderr.splitlines()
    assert note.startswith(f"murmur-nb: {link} cannot be used ({_why(open_folder)})"), note
    assert "private temporary folder" in note and "--runs-dir" in note, note


def test_a_root_command_refuses_a_runs_dir_behind_another_accounts_link(
    open_folder: Path, only_root: Path, reachable: Path, tmp_path: Path
) -> None:
    """``--runs-dir <theirs>/runs``, a link the account planted: root made the call folders
    where it led. Now the command is refused before anything runs (exit 2, one line),
    naming the folder another account can change, that nothing was made, and the fix."""
    install(open_folder, "producer")
    link = _plant_runs_link(open_folder, only_root, reachable)
    done = _cli(open_folder, tmp_path, "--runs-dir", str(link), "invoke", "producer.make",
                json.dumps(_make_input()))  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    said = done.stderr
    assert "cannot be used by a root process" in said and _why(open_folder) in said, said
    assert "nothing was made there" in said and "--runs-dir" in said, said
    assert "a folder only root can write" in said, said
    assert list(only_root.iterdir()) == [] and link.readlink() == only_root


def test_a_root_host_refuses_a_runs_dir_behind_another_accounts_link(
    open_folder: Path, only_root: Path, reachable: Path, tmp_path: Path
) -> None:
    """``ModuleHost(runs_dir=<theirs>/runs)``, a link the account planted: the invoke made
    the call folders where it led and the module wrote its output there. Now the call is
    refused with a ``ValueError`` before the module runs, and the fix it names (no
    ``runs_dir``) runs the call in a private runs folder of root's."""
    install(open_folder, "producer")
    link = _plant_runs_link(open_folder, only_root, reachable)
    out = tmp_path / "out"
    out.mkdir()
    policy = mnb.Policy(roots={"out": out})  # the module drops ran-make there when it runs
    with (
        mnb.ModuleHost(home=open_folder, policy=policy, runs_dir=link) as host,
        pytest.raises(ValueError, match="cannot be used by a root process") as err,
    ):
        host.invoke("producer.make", _make_input())
    said = str(err.value)
    assert _why(open_folder) in said and "nothing was made there" in said, said
    assert "runs_dir=" in said and "a folder only root can write" in said, said
    assert list(only_root.iterdir()) == [] and list(out.iterdir()) == []
    with mnb.ModuleHost(home=open_folder, policy=policy) as host:
        given = _make_input()
        inv = host.invoke("producer.make", given)
        assert inv.ok, inv.error
        file = Path(inv.artifacts[0].file)
        assert file.read_text() == given["files"][0]["content"]
        _nobody_else_can_change(file.parents[2])  # the runs folder, and the way to it
    assert list(only_root.iterdir()) == [] and link.readlink() == only_root
