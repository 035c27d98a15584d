"""ModuleHost.map(..., client=) on a real LocalCluster with two worker processes."""

from __future__ import annotations

import importlib.util
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import descendants, still_runs

import murmur_nb as mnb

distributed = pytest.importorskip("distributed")

FACET_MODULES = [("batchy", "batchy")]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    """Two worker processes, one thread each (started once for the file)."""
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture
def host(facet_home: Path, log_root: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, policy=mnb.Policy(roots={"log": str(log_root)})) as h:
        yield h


def _outcomes(batch: mnb.Batch) -> list[tuple[object, ...]]:
    out = batch.to_pandas()
    return list(zip(out["status"], out["result_square"].astype(object),
                    out["error_code"].astype(object), strict=True))  # fmt: skip


def test_cluster_results_equal_local_map(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path
) -> None:
    inputs = [{"n": i, "fail_every": 7} for i in range(20)]
    local = host.map("batchy.work", inputs, progress=False, journal=None)
    remote = host.map("batchy.work", inputs, progress=False, journal=None, client=client)
    assert _outcomes(remote) == _outcomes(local)
    assert remote.progress.ok == 17 and remote.progress.failed == 3
    assert len(list(log_root.glob("work-*"))) == 40  # every row really ran, twice
    # the rows ran in the worker processes, not in this kernel's host
    assert len(host.audit()) == 20


def test_cluster_artifacts_come_back_content_addressed(
    host: mnb.ModuleHost, client: distributed.Client
) -> None:
    batch = host.map("batchy.image", [{"n": i} for i in range(4)], progress=False,
                     client=client)  # fmt: skip
    inv = batch[3]
    assert str(inv.artifacts[0].file).startswith(str(host.store.root))
    assert "1 artifact" in mnb.render(inv).text
    assert batch.grid().html.count("<img") >= 4
    # past the bound an artifact stays on its worker; the row says where
    big = host.map("batchy.image", [{"n": 10}], progress=False, client=client,
                   artifact_bytes=10, journal=None)  # fmt: skip
    [where] = big.to_pandas()["artifact_locations"].iloc[0]
    assert where["worker"] in client.nthreads()
    assert Path(where["file"]).is_file()
    assert big[0].artifacts == []


def test_worker_refuses_a_module_that_does_not_hash_to_its_digest(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path
) -> None:
    """Drives the worker task directly with a payload changed in transit (the kernel never
    sends one, so only the worker's own check can be observed this way)."""
    from dataclasses import replace

    from murmur_nb._batch.cluster import run_on_worker  # private: the worker task itself
    from murmur_nb._batch.payload import payload_of  # private: to change in transit
    from murmur_nb._batch.plan import plan_for  # private: the payload's plan

    plan = plan_for(host, "batchy.work", poll_every=0.2, poll_timeout=60)
    good = payload_of(plan, host.policy)
    entries = tuple((rel, kind, x, data + b"\n# changed in transit\n" if rel == "module" else data)
                    for rel, kind, x, data in good.entries)  # fmt: skip
    bad = replace(good, entries=entries)
    record, data = client.submit(run_on_worker, bad, host.policy, {"n": 3}, 1,
                                 {"approve": False}, (0.2, 60.0), 1 << 20,
                                 pure=False).result(timeout=120)  # fmt: skip
    assert record["status"] == "not_run" and record["error"]["code"] == "digest_mismatch"
    assert data == [] and list(log_root.glob("work-*")) == []
    record, _ = client.submit(run_on_worker, good, host.policy, {"n": 3}, 1, {"approve": False},
                              (0.2, 60.0), 1 << 20, pure=False).result(timeout=120)  # fmt: skip
    assert record["status"] == "ok" and record["result"] == {"n": 3, "square": 9}


def test_a_worker_killed_mid_batch_costs_only_its_rows_in_flight(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path
) -> None:
    inputs = [{"n": i, "sleep": 0.2} for i in range(40)]
    batch = host.map("batchy.work", inputs, progress=False, client=client, background=True)
    deadline = time.monotonic() + 120
    busy: list[str] = []
    while not busy and time.monotonic() < deadline:
        time.sleep(0.05)
        if batch.progress.ok >= 8:  # some rows are back; kill a worker that is running more
            busy = [addr for addr, keys in client.processing().items() if keys]
    assert busy, "no worker was running a row"
    pids = client.run(os.getpid)
    os.kill(pids[busy[0]], signal.SIGKILL)
    batch.wait(300)
    p = batch.progress
    assert p.state == "finished" and p.ok == 40, p.line()
    out = batch.to_pandas()
    assert list(out["result_square"]) == [i * i for i in range(40)]
    assert not out["from_journal"].any()
    assert len(list(log_root.glob("work-*"))) >= 40


def test_module_changed_mid_batch_leaves_the_rows_not_yet_sent_not_run(
    host: mnb.ModuleHost, client: distributed.Client, facet_home: Path, log_root: Path
) -> None:
    """As on this machine: once the module's folder changes, no row left is run
    (``module_changed``), and nothing of the new code runs anywhere (the rows already on a
    worker finish on the approved snapshot shipped there)."""
    inputs = [{"n": i, "sleep": 0.2} for i in range(40)]
    batch = host.map("batchy.work", inputs, concurrency=4, progress=False, client=client,
                     background=True, journal=None)  # fmt: skip
    deadline = time.monotonic() + 120
    while batch.progress.ok < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    exe = facet_home / "modules" / "batchy" / "module"
    # the new code would leave "changed-*" files where the approved code leaves "work-*"
    exe.write_text(exe.read_text().replace('f"{name}-{n}-{rid}"', 'f"changed-{n}-{rid}"'))
    batch.wait(300)
    out = batch.to_pandas()
    assert set(out["status"]) == {"ok", "not_run"}, out["error_message"].dropna().head(2)
    changed = out[out["status"] == "not_run"]
    assert len(changed) >= 20 and set(changed["error_code"]) == {"module_changed"}
    assert "run map() again" in changed["error_message"].iloc[-1]
    assert list(log_root.glob("changed-*")) == []
    assert len(list(log_root.glob("work-*"))) == int(out["ok"].sum())
    # the rows left form the tail: each row before the edit was seen ran
    first = int(changed.index[0])
    assert (out["status"].iloc[first:] == "not_run").all()


def test_every_worker_killed_mid_batch_the_module_is_shipped_again_and_every_row_runs(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path
) -> None:
    """With every worker gone, Dask loses the scattered module with them and drops the tasks
    that needed it: the batch ships it again to the restarted workers (no row is reported
    cancelled: nobody cancelled). The homes the killed workers installed it in (no exit
    handler ran) are removed by the restarted ones as they install it again."""
    inputs = [{"n": i, "sleep": 0.2} for i in range(40)]
    batch = host.map("batchy.work", inputs, progress=False, client=client, background=True,
                     journal=None)  # fmt: skip
    deadline = time.monotonic() + 120
    while batch.progress.ok < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert batch.progress.ok >= 8, batch.progress.line()
    pids = client.run(os.getpid)

    def worker_homes() -> list[str]:  # runs on a worker (pickled by value)
        from murmur_nb._batch.cluster import _hosts  # private: a worker's own hosts

        return [str(each.home) for each, _ in _hosts.values()]

    homes = [Path(h) for found in client.run(worker_homes).values() for h in found]
    assert homes and all(home.exists() for home in homes)
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    batch.wait(300)
    p = batch.progress
    assert p.state == "finished" and p.ok == 40, p.line()
    assert list(batch.to_pandas()["result_square"]) == [i * i for i in range(40)]
    client.wait_for_workers(2, timeout=60)
    assert set(client.run(os.getpid).values()).isdisjoint(pids.values())  # really restarted
    assert [home for home in homes if home.exists()] == []


def _sh_module_home(tmp_path: Path) -> Path:
    """A home with the benchmarks' ``/bin/sh`` module (``benchsh.run``: a few ms a row)."""
    spec = importlib.util.spec_from_file_location(
        "bench_batch", Path(__file__).parents[1] / "benchmarks" / "bench_batch.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    home = tmp_path / "sh-home"
    bench.install(home)
    return home


def test_tasks_grow_for_quick_rows_and_stay_small_for_slow_ones(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path, tmp_path: Path
) -> None:
    from murmur_nb._batch.cluster import (  # private: the task sizing rule itself
        CHUNK,
        ROWS_PER_CORE,
        rows_per_task,
    )

    # the sizing rule: a task runs about TASK_SECONDS, within its bounds
    assert rows_per_task(0.25 / 40) == 40 and rows_per_task(10.0) == ROWS_PER_CORE
    assert rows_per_task(0.0) == rows_per_task(1e-9) > CHUNK

    def tasks(on: mnb.ModuleHost, capability: str, inputs: list[dict[str, object]]
              ) -> tuple[int, float]:  # fmt: skip
        """The row tasks the batch sent, and its rows' median run time in seconds."""
        with distributed.get_task_stream(client) as stream:
            batch = on.map(capability, inputs, progress=False, journal=None, client=client)
        assert batch.progress.ok == len(inputs), batch.progress.line()
        sent = sum(str(t["key"]).startswith("murmur-rows-") for t in stream.data)
        return sent, float(batch.to_pandas()["duration_ms"].median()) / 1000

    # rows of a few ms: after the first tasks of CHUNK rows, tasks carry many more. On a
    # loaded machine a row takes longer and the rule sizes tasks smaller: the bound follows
    # the rows' measured time, and is CHUNK's on a quiet one (rows of 2-10 ms)
    with mnb.ModuleHost(home=_sh_module_home(tmp_path)) as quick_host:
        quick, row_s = tasks(quick_host, "benchsh.run", [{"count": i} for i in range(400)])
    assert quick < 400 / min(CHUNK, rows_per_task(2 * row_s)), (quick, row_s)
    # rows of 0.2 s: after the first tasks, a task holds two or three (a cancel, which lets
    # running tasks finish, never waits long)
    slow, _ = tasks(host, "batchy.work", [{"n": i, "sleep": 0.2} for i in range(60)])
    assert slow >= 12, slow
    assert len(list(log_root.glob("work-*"))) == 60  # every row really ran


def test_a_plain_tcp_scheduler_is_warned_about_once(host: mnb.ModuleHost) -> None:
    """A cluster started without ``security=True`` takes code from anyone who reaches it:
    ``map`` says so, once per scheduler, with the fix; a TLS cluster (the fixture) is quiet."""
    import warnings

    plain = distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                     dashboard_address="127.0.0.1:0")  # fmt: skip
    try:
        with distributed.Client(plain) as c:
            assert c.scheduler.address.startswith("tcp://")
            with pytest.warns(mnb.ClusterWarning, match=r"plain tcp://.*security=True"):
                host.map("batchy.work", [{"n": 1}], progress=False, journal=None, client=c)
            with warnings.catch_warnings():
                warnings.simplefilter("error", mnb.ClusterWarning)
                host.map("batchy.work", [{"n": 2}], progress=False, journal=None, client=c)
    finally:
        plain.close()


def test_a_tls_scheduler_is_not_warned_about(host: mnb.ModuleHost, client: distributed.Client
                                             ) -> None:
    import warnings

    assert client.scheduler.address.startswith("tls://")
    with warnings.catch_warnings():
        warnings.simplefilter("error", mnb.ClusterWarning)
        host.map("batchy.work", [{"n": 3}], progress=False, journal=None, client=client)


def test_a_batch_needing_approval_on_dask_runs_nothing_unless_approved(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path
) -> None:
    """``batchy.paid`` declares no cost, so it needs approval. Without it the batch is
    refused in the kernel with the reason, and nothing reaches a worker; with
    ``approve=True`` every row runs on the workers under the batch's approval."""
    inputs = [{"n": i, "cost": 1.0} for i in range(12)]
    with pytest.raises(mnb.ApprovalRequired) as info:
        host.map("batchy.paid", inputs, estimated_cost=1.0, progress=False, journal=None,
                 client=client)  # fmt: skip
    assert "12 x 1 = 12" in info.value.message
    assert any("cost_known is false" in reason for reason in info.value.reasons)
    assert list(log_root.glob("paid-*")) == [] and len(host.audit()) == 0
    batch = host.map("batchy.paid", inputs, approve=True, progress=False, journal=None,
                     client=client)  # fmt: skip
    out = batch.to_pandas()
    assert out["ok"].all() and list(out["result_square"]) == [i * i for i in range(12)]
    assert batch.approval.startswith("approved (this batch); 12 x unknown")
    assert {batch.record(i)["approval"] for i in range(12)} == {"approved (this call)"}
    assert len(list(log_root.glob("paid-*"))) == 12  # every row really ran ...
    assert len(host.audit()) == 0  # ... in the worker processes, none in this kernel


def test_a_worker_refuses_a_row_the_kernel_did_not_approve(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path
) -> None:
    """Drives the worker task directly, as a kernel that skipped its own approval would
    (the batch never sends such a row): the worker's host holds none of the kernel's
    approvals, so the row is not run, and the record says why."""
    from murmur_nb._batch.cluster import run_on_worker  # private: the worker task itself
    from murmur_nb._batch.payload import payload_of  # private: the module as shipped
    from murmur_nb._batch.plan import plan_for  # private: the payload's plan

    plan = plan_for(host, "batchy.paid", poll_every=0.2, poll_timeout=60, approve=True)
    payload = payload_of(plan, host.policy)

    def on_worker(approve: bool) -> dict[str, object]:
        record, _ = client.submit(run_on_worker, payload, host.policy, {"n": 3, "cost": 1.0},
                                  1, {"approve": approve}, (0.2, 60.0), 1 << 20,
                                  pure=False).result(timeout=120)  # fmt: skip
        return dict(record)

    refused = on_worker(False)
    assert refused["status"] == "not_run"
    error = refused["error"]
    assert isinstance(error, dict) and error["code"] == "approval_required"
    assert "needs operator approval" in error["message"] and "cost_known" in error["message"]
    assert list(log_root.glob("paid-*")) == []
    ran = on_worker(True)
    assert ran["status"] == "ok" and ran["result"] == {"n": 3, "square": 9}
    assert len(list(log_root.glob("paid-*"))) == 1


def _worker_module_processes(pids: dict[str, int]) -> list[tuple[int, str]]:
    """The live processes below the workers (the rows' module processes, in their sandboxes;
    a worker's zygote left out, the calls it forks counted)."""
    return [p for pid in pids.values() for p in descendants(pid) if still_runs(p)]


def test_cancel_on_dask_lets_the_running_rows_finish_and_keeps_them(
    host: mnb.ModuleHost, client: distributed.Client, log_root: Path
) -> None:
    """As the docs say of a cluster: Cancel drops the rows not started, and the running ones
    finish and are kept, their results and costs with them. Each task gave its rows a
    cancel event of its own that nothing set, and the kernel cancelled the Dask futures: the
    rows running were reported ``cancelled`` (not run, cost 0) while their module processes,
    and the rest of their tasks' rows, ran on for seconds, their results thrown away."""
    pids = client.run(os.getpid)
    inputs = [{"n": i, "sleep": 1.5, "cost": 1.0} for i in range(40)]
    batch = host.map("batchy.work", inputs, progress=False, client=client, background=True,
                     journal=None)  # fmt: skip
    deadline = time.monotonic() + 120
    while len(list(log_root.glob("work-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    running = {p.name for p in log_root.glob("work-*")}
    assert len(running) >= 4, batch.progress.line()
    batch.cancel()
    batch.wait(120)
    # wait() returned once the rows settled: no module process runs on the workers
    assert _worker_module_processes(pids) == []
    started = {p.name for p in log_root.glob("work-*")}
    p = batch.progress
    out = batch.to_pandas()
    kept = out[out["status"] == "ok"]
    # every row whose module started ran to its end and is kept, its cost counted
    assert running <= started
    assert sorted(int(name.split("-")[1]) for name in started) == sorted(kept["result_n"])
    assert p.state == "cancelled" and p.ok == len(started) < 40 and p.cost == p.ok
    assert p.not_run == 40 - p.ok and p.running == 0
    assert set(out.loc[out["status"] == "not_run", "error_code"]) == {"cancelled"}
    time.sleep(2.0)  # and nothing starts later
    assert {p.name for p in log_root.glob("work-*")} == started


def test_a_cluster_closed_mid_batch_leaves_no_row_hanging_and_says_how_to_resume(
    host: mnb.ModuleHost, log_root: Path, tmp_path: Path
) -> None:
    """A client and cluster closed mid-batch: ``wait()`` raised Dask's ``ClosedClientError``,
    the batch said ``finished`` with rows ``running`` and ``pending`` forever,
    ``retry_failed`` raised "IOLoop is closed", and a closed client given to ``map``
    raised "'NoneType' object has no attribute 'ncores'"."""
    journal = tmp_path / "closed.sqlite"
    inputs = [{"n": i, "sleep": 0.3, "fail_every": 5} for i in range(60)]
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
    c = distributed.Client(cluster)
    try:
        batch = host.map("batchy.work", inputs, progress=False, client=c, background=True,
                         journal=journal)  # fmt: skip
        deadline = time.monotonic() + 120
        while batch.progress.finished < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        c.close()
        cluster.close()
        with pytest.raises(mnb.ModuleHostError) as info:
            batch.wait(120)
    finally:
        c.close()
        cluster.close()
    said = info.value.message
    assert info.value.code == "cluster_closed"
    assert "Dask client" in said and "closed" in said
    assert str(journal) in said and "client=" in said and "run the same map() again" in said
    p = batch.progress
    assert p.state == "stopped" and p.running == 0 and p.pending == 0, p.line()
    assert 6 <= p.finished < 60 and p.not_run == 60 - p.finished
    out = batch.to_pandas()
    assert set(out["status"]) == {"ok", "failed", "not_run"}
    assert set(out.loc[out["status"] == "not_run", "error_code"]) <= {"worker_lost", "host_error"}
    # the closed client is refused by name, before anything runs
    with pytest.raises(ValueError, match=r"Dask client .*is closed.*client="):
        batch.retry_failed()
    with pytest.raises(ValueError, match=r"Dask client .*is closed.*client="):
        host.map("batchy.work", inputs[:2], progress=False, journal=None, client=c)
    # resumed here from the journal, as the error says: only the rows not finished run
    ran = len(list(log_root.glob("work-*")))
    again = host.map("batchy.work", inputs, progress=False, journal=journal)
    assert again.progress.from_journal == p.finished
    assert again.progress.finished == 60
    assert len(list(log_root.glob("work-*"))) - ran == 60 - p.finished
