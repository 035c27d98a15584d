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
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import install
from _users import run_as_test_user

import murmur_nb as mnb

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


@pytest.fixture
def shared() -> Iterator[Path]:
    """A ``0755`` folder every account may pass through, as a ``0755`` home is
    (``tmp_path`` is root's alone, so nothing in it could leak)."""
    folder = Path(tempfile.mkdtemp(prefix="mnb-private-runs-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
    setting: str, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outputs, the staged view and the store, by their real paths, while the host is
    open: each listing and read is refused; the sandbox still wrote and read them, and the
    host (root) still checks and reads them."""
    home = tmp_path / "home"
    install(home, "plain")
    with _host(home, shared / "store", setting, monkeypatch) as host:
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
        seen = _attack(targets, shared / "user")
    refused = {str(p): "PermissionError" for p in targets}
    assert seen == refused, seen


def test_another_account_reads_nothing_while_a_root_host_closes(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the host removes its runs folder. The removal made every folder ``0755`` first
    (so that a read-only one can go): the trial's attacker, polling, read the calls' outputs
    in that window. Here the other account tries at each removal step (each ``rmtree`` in the
    runs folder), and is refused whatever is left."""
    home = tmp_path / "home"
    install(home, "plain")
    attacks: list[dict[str, str]] = []
    real_rmtree = shutil.rmtree
    targets: list[Path] = []

    def attack_then_remove(path: Any, *args: Any, **kwargs: Any) -> None:
        if targets and Path(path).is_relative_to(targets[0].parent):
            attacks.append(_attack(targets, shared / "user"))
        real_rmtree(path, *args, **kwargs)

    with mnb.ModuleHost(home=home, artifact_store=shared / "store") as host:
        made, used, _ = _produce_and_consume(host)
        output = Path(made.artifacts[0].file)
        call, consumer = output.parent.parent, output.parent.parent.parent / used.request_id
        view = consumer / "staged-view"
        targets += [call, output.parent, output, consumer, consumer / "w0-out" / "ran-consume",
                    view, *view.glob("sha256/*")]  # fmt: skip
        assert all(path.exists() for path in targets), targets
        monkeypatch.setattr(shutil, "rmtree", attack_then_remove)
    monkeypatch.undo()
    assert attacks, "the runs folder was not removed"
    outcomes = {outcome for seen in attacks for outcome in seen.values()}
    assert outcomes <= {"PermissionError", "FileNotFoundError"}, attacks
    assert attacks[0][str(output)] == "PermissionError", attacks  # tried while it was there


def test_another_account_cannot_read_a_batch_journal(shared: Path, tmp_path: Path) -> None:
    """Finding 8: a batch journal (row results) in a ``0755`` home was ``0644``."""
    home = shared / "home"
    install(home, "plain")
    with mnb.ModuleHost(home=home) as host:
        batch = host.map("plain.make", [{"files": [{"name": f"{i}.png", "content": "row"}]}
                                        for i in range(2)], progress=False)  # fmt: skip
        assert batch.progress.ok == 2, batch.progress
        journal = home / "batches" / "journal.sqlite"
        wal = journal.with_name(journal.name + "-wal")
        targets = [journal, *([wal] if wal.exists() else [])]
        seen = _attack(targets, shared / "user")
        assert seen == {str(p): "PermissionError" for p in targets}, seen
        assert journal.read_bytes()[:15] == b"SQLite format 3"  # still the host's to read
        assert journal.stat().st_mode & 0o777 == 0o600
