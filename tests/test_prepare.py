"""Prepare once, run many: ``ModuleHost.prepare`` and the batch that runs one prepared call.

Describes are counted for real: the fixture appends a line to a file each time it answers
``describe``, so these hosts run modules unconfined (``sandbox="off"``), where it may write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import murmur_nb as mnb

FACET_MODULES = [("batchy", "batchy")]
ROWS = [{"n": i, "cost": 1.0} for i in range(6)]


@pytest.fixture
def describe_log(facet_home: Path, tmp_path: Path) -> Path:
    """The file the module appends a line to on each ``describe``."""
    log = tmp_path / "describes"
    log.touch()
    log.chmod(0o666)
    (facet_home / "modules" / "batchy" / "describe-log").write_text(str(log))
    return log


def describes(log: Path) -> int:
    return len(log.read_text().splitlines())


def unconfined(**options: object) -> mnb.Policy:
    return mnb.Policy(sandbox="off", **options)  # type: ignore[arg-type]


@pytest.fixture
def host(facet_home: Path, describe_log: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, policy=unconfined()) as h:
        yield h


def test_a_batch_under_an_operator_pin_describes_once(
    host: mnb.ModuleHost, describe_log: Path
) -> None:
    digest = host.approve("batchy.paid")
    before = describes(describe_log)
    batch = host.map("batchy.paid", ROWS, progress=False, journal=None)
    assert describes(describe_log) - before <= 1
    assert batch.progress.ok == 6
    label = f"approved (operator, {digest[:19]}…)"
    assert batch.approval == f"{label}; 6 x unknown = unknown"
    assert {inv.approval for inv in batch} == {label}


def test_a_batch_under_a_policy_allow_list_describes_once(
    facet_home: Path, describe_log: Path
) -> None:
    with mnb.ModuleHost(home=facet_home, policy=unconfined(approved=["batchy.paid"])) as host:
        batch = host.map("batchy.paid", ROWS, progress=False, journal=None, estimated_cost=1)
        assert describes(describe_log) <= 1
        rows = {inv.approval for inv in batch}
    assert batch.progress.ok == 6 and len(rows) == 1
    [label] = rows
    assert label.startswith("approved (allow-list, sha256:")
    assert batch.approval == f"{label}; 6 x 1 = 6"


def test_a_batch_approved_as_a_whole_describes_once(
    host: mnb.ModuleHost, describe_log: Path
) -> None:
    batch = host.map("batchy.paid", ROWS, approve=True, progress=False, journal=None)
    assert describes(describe_log) <= 1
    assert batch.progress.ok == 6
    assert batch.approval.startswith("approved (this batch); ")


def test_a_batch_needing_no_approval_says_so(host: mnb.ModuleHost, describe_log: Path) -> None:
    batch = host.map("batchy.work", [{"n": i} for i in range(6)], progress=False, journal=None)
    assert describes(describe_log) <= 1
    assert batch.approval == "not required; 6 x unknown = unknown"
    assert {inv.approval for inv in batch} == {"not required"}


def test_a_batch_of_a_module_described_before_and_unchanged_describes_nothing(
    host: mnb.ModuleHost, describe_log: Path
) -> None:
    """A batch resolves its capability as ``invoke`` does: with the module's folder unchanged
    since its last ``describe`` and no standing approval to weigh, it runs none (a
    Python module's ``describe`` is tens of milliseconds, every ``map`` paid one)."""
    assert host.invoke("batchy.work", {"n": 1}).ok
    before = describes(describe_log)
    for _ in range(3):
        batch = host.map("batchy.work", [{"n": i} for i in range(3)], progress=False,
                         journal=None)  # fmt: skip
        assert batch.progress.ok == 3
    assert describes(describe_log) == before
    (host.modules_dir / "batchy" / "notes.txt").write_text("changed")  # the folder changes
    assert host.map("batchy.work", [{"n": 4}], progress=False, journal=None).progress.ok == 1
    assert describes(describe_log) == before + 1


def test_a_first_call_under_a_standing_approval_describes_once(
    facet_home: Path, describe_log: Path
) -> None:
    """On a cold host the lookup's ``describe`` is the current descriptor the standing
    approval is weighed against: no second one (two before)."""
    with mnb.ModuleHost(home=facet_home, policy=unconfined(approved=["batchy.paid"])) as host:
        inv = host.invoke("batchy.paid", {"n": 2, "cost": 1.0})
        assert inv.ok and inv.approval.startswith("approved (allow-list, sha256:")
        assert describes(describe_log) == 1
        assert host.invoke("batchy.paid", {"n": 3, "cost": 1.0}).ok  # a standing approval
        assert describes(describe_log) == 2  # is weighed against a fresh describe each call


def test_looking_a_capability_up_on_a_cold_host_describes_once(
    host: mnb.ModuleHost, describe_log: Path
) -> None:
    host.capability("batchy.work")
    assert describes(describe_log) == 1


def test_a_prepared_call_runs_many_inputs_on_one_describe(
    host: mnb.ModuleHost, describe_log: Path
) -> None:
    host.approve("batchy.paid")
    before = describes(describe_log)
    call = host.prepare("batchy.paid")
    assert isinstance(call, mnb.PreparedCall)
    assert call.approval.startswith("approved (operator, ")
    invs = [call.run({"n": n, "cost": 1.0}) for n in range(4)]
    assert [inv.result for inv in invs] == [{"n": n, "square": n * n} for n in range(4)]
    assert describes(describe_log) - before == 1
    assert call.input_problem({"n": -1}) is not None
    with pytest.raises(mnb.InvalidInput):
        call.run({"n": "x"})
    audit = host.audit()
    assert list(audit["outcome"]) == ["ok"] * 4 + ["invalid_input"]
    assert set(audit["approval"]) == {call.approval}


def test_a_batch_closes_its_journal_when_it_ends(host: mnb.ModuleHost, tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    batch = host.map("batchy.work", [{"n": i} for i in range(4)], progress=False, journal=path)
    # the last connection to a WAL database removes its -wal file as it closes
    assert not Path(f"{path}-wal").exists()
    with sqlite3.connect(path, isolation_level=None) as db:
        assert db.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    assert batch.to_pandas()["ok"].all()  # its rows read back all the same
    with host.map("batchy.work", [{"n": 9}], progress=False, journal=None,
                  background=True) as again:  # fmt: skip
        again.wait()
        assert again[0].result == {"n": 9, "square": 81}
    with pytest.raises(RuntimeError, match="closed"):
        again.record(0)


def test_dask_workers_leave_no_home_behind(
    facet_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real LocalCluster whose worker processes make their temporary folders under a
    folder of this test's: once the cluster is closed, no worker home is left there."""
    distributed = pytest.importorskip("distributed")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
    with mnb.ModuleHost(home=facet_home, policy=unconfined()) as host:
        with distributed.Client(cluster) as client:
            batch = host.map("batchy.work", [{"n": i} for i in range(8)], progress=False,
                             journal=None, client=client)  # fmt: skip
            assert batch.progress.ok == 8
            assert list(scratch.glob("murmur-nb-worker-*"))
        cluster.close()
    left = [*scratch.glob("murmur-nb-worker-*"), *scratch.glob("murmur-nb-runs-*")]
    assert left == []


def test_run_clicks_of_a_form_describe_nothing_while_the_module_is_unchanged(
    host: mnb.ModuleHost, describe_log: Path
) -> None:
    """Issue 40 item 4: each Run click of a form described the module twice (its approval
    check, then whether to poll), seconds per click in JupyterLab. Clicked five times on the
    real widget, with the module unchanged, the kernel describes it not once; an edit of
    the module is still seen at the next click."""
    from murmur_nb.widgets import CapabilityForm

    form = CapabilityForm(host, "batchy.work")
    form.inputs["n"].value = "3"
    before = describes(describe_log)
    for _ in range(5):
        form.run_button.click()
        assert form.wait() is not None and form.invocation.ok, form.text()
    assert describes(describe_log) == before
    (host.modules_dir / "batchy" / "notes.txt").write_text("changed")  # the folder changes
    form.run_button.click()
    assert form.wait() is not None
    assert describes(describe_log) > before
