"""Sandbox plans made once per launch (``murmur_nb._sandbox.plans``): a prepared call's later
runs reuse the first run's plan, and each run still binds what its paths name then.

Every test runs once with the kernel's zygote (where it works here) and once with bwrap for
every call (``MURMUR_NB_ZYGOTE=off``): both carry out the same kept plan. What the tests look
at is where the module's own writes land, and what it could read."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import open_folder, sh_module

import murmur_nb as mnb
from murmur_nb._sandbox import plans as plans_  # private: counts the plans made
from murmur_nb._sandbox import sandbox as sandbox_  # private: what plans_ plans with
from murmur_nb._sandbox import zygote as zygote_  # private: whether the zygote runs here
from murmur_nb._sandbox.zygote import SWITCH  # private: the zygote has no public switch


@pytest.fixture(params=["zygote", "bwrap"])
def forker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "bwrap":
        monkeypatch.setenv(SWITCH, "off")
    return str(request.param)


def lines(marks: Path) -> int:
    return len(marks.read_text().splitlines()) if marks.exists() else 0


@pytest.fixture
def host(tmp_path: Path, forker: str) -> Iterator[mnb.ModuleHost]:
    out, given = tmp_path / "out", tmp_path / "in"
    sh_module(tmp_path / "home", "plansh",
              before=f"echo run >> {out}/marks; cat {given}/secret >> {out}/seen 2>&1",
              reads=["in"])
    policy = mnb.Policy(roots={"out": open_folder(out), "in": open_folder(given)},
                        deadline_ms=5000)  # fmt: skip
    with mnb.ModuleHost(home=tmp_path / "home", policy=policy) as made:
        if made.sandbox.mechanism != "bwrap":
            pytest.skip(f"plans are kept for bwrap's sandboxes only ({made.sandbox.confinement})")
        yield made


def plans_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time a launch is planned in full."""
    made: list[int] = []
    planned = sandbox_.launch_resolved

    def counted(*args: object, **kwargs: object) -> sandbox_.Launch:
        made.append(1)
        return planned(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plans_, "launch_resolved", counted)
    return made


def test_a_prepared_calls_runs_share_one_plan(
    host: mnb.ModuleHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in" / "secret").write_text("s3cret\n")
    call = host.prepare("plansh.run")  # describes the module: a launch of its own
    made = plans_made(monkeypatch)
    runs = [call.run({}) for _ in range(4)]
    assert all(inv.ok for inv in runs), runs[0].error
    assert len(made) == 1
    assert lines(tmp_path / "out" / "marks") == 4
    assert (tmp_path / "out" / "seen").read_text() == "s3cret\n" * 4


@pytest.mark.parametrize("how", ["renamed", "removed"])
def test_a_root_replaced_at_its_path_is_the_one_the_next_run_writes_in(
    host: mnb.ModuleHost, tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook clears its output folder between two runs of one prepared call (renamed
    away, or removed, then made again): the path is the same, the folder is another. The
    kept plan bound the old one; the next run is planned again and writes in the new one,
    and the folder moved away is left as it was."""
    call = host.prepare("plansh.run")
    made = plans_made(monkeypatch)
    for _ in range(2):
        assert call.run({}).ok
    out = tmp_path / "out"
    old = tmp_path / "old-out"
    out.rename(old)
    if how == "removed":
        shutil.rmtree(old)
    open_folder(out)
    third = call.run({})
    assert third.ok, third.error
    assert lines(out / "marks") == 1
    if how == "renamed":
        assert lines(old / "marks") == 2
        assert len(made) == 2  # the first run's plan, then the third's
    # a folder removed and made again may get its inode back: the same file to a plan,
    # which binds whatever the path names at each run, as the lines above show
    assert call.run({}).ok and lines(out / "marks") == 2 and len(made) in (1, 2)


def test_a_root_given_as_a_link_follows_the_link_at_each_run(
    tmp_path: Path, forker: str
) -> None:
    """The policy names a link; between two runs it is pointed at another folder. The
    module tries to write in both folders: the run after the link moved writes where it
    points then, never in the first folder."""
    first, second = open_folder(tmp_path / "a"), open_folder(tmp_path / "b")
    link = tmp_path / "out-link"
    sh_module(tmp_path / "home", "plansh",
              before=f"echo run >> {first}/marks; echo run >> {second}/marks")
    link.symlink_to(first)
    policy = mnb.Policy(roots={"out": link}, deadline_ms=5000)
    with mnb.ModuleHost(home=tmp_path / "home", policy=policy) as host:
        if host.sandbox.mechanism != "bwrap":
            pytest.skip("plans are kept for bwrap's sandboxes only")
        call = host.prepare("plansh.run")
        assert call.run({}).ok and call.run({}).ok
        link.unlink()
        link.symlink_to(second)
        assert call.run({}).ok
    assert lines(first / "marks") == 2
    assert lines(second / "marks") == 1


def test_a_file_made_in_a_root_between_runs_can_be_read_at_the_next(
    host: mnb.ModuleHost, tmp_path: Path
) -> None:
    """On a root host the sandbox id is given each root again at every run (a file made
    since gets its entry), kept plan or not: the module reads a private file (``0600``)
    made after the plan was, and the host's grant is taken back when the host closes."""
    call = host.prepare("plansh.run")
    assert call.run({}).ok
    secret = tmp_path / "in" / "secret"
    secret.write_text("made after the plan\n")
    secret.chmod(0o600)
    assert call.run({}).ok
    seen = (tmp_path / "out" / "seen").read_text()
    assert seen.endswith("made after the plan\n"), seen


def test_a_folder_a_kept_plan_binds_replaced_between_runs_is_planned_afresh(
    tmp_path: Path, forker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's snapshot, a folder every run binds (the module has no roots), is renamed
    away between two runs of a prepared call and a copy put at its path. The kept plan named
    the old folder: the next run is planned afresh and runs from the copy. With the zygote
    the kernel does not look at the plan's paths itself: the zygote's look at what it binds
    refuses the old plan before anything runs, and the kernel plans again."""
    sh_module(tmp_path / "home", "keptsh", before='cat "${0%/module}/mark" >&2', writes=())
    with mnb.ModuleHost(home=tmp_path / "home", policy=mnb.Policy(deadline_ms=5000)) as host:
        if host.sandbox.mechanism != "bwrap":
            pytest.skip("plans are kept for bwrap's sandboxes only")
        call = host.prepare("keptsh.run")
        made = plans_made(monkeypatch)
        looked: list[int] = []
        same_files = plans_.same_files
        monkeypatch.setattr(plans_, "same_files",
                            lambda files: looked.append(1) or same_files(files))  # fmt: skip
        assert call.run({}).ok and call.run({}).ok
        assert len(made) == 1
        snapshot, old = call.snapshot, call.snapshot.with_name("moved-away")
        snapshot.parent.chmod(0o755)  # snapshots are read-only, to their owner too
        snapshot.rename(old)
        shutil.copytree(old, snapshot, symlinks=True)
        snapshot.chmod(0o755)
        (snapshot / "mark").write_text("the copy\n")
        third = call.run({})
        assert third.ok, third.error
        assert third.evidence is not None and third.evidence.stderr_tail.strip() == "the copy"
        assert len(made) == 2  # planned afresh, and that plan kept:
        assert call.run({}).ok and len(made) == 2
        by_zygote = forker == "zygote" and zygote_.status().startswith("used")
        assert not looked if by_zygote else looked
