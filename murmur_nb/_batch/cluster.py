"""Rows on a Dask cluster: ``map(..., client=dask.distributed.Client)``.

The kernel scatters the module's verified snapshot once
(:class:`~murmur_nb._batch.payload.Payload`); :func:`worker_host` installs it in a
private home on first use and refuses every row when its digest differs
(``digest_mismatch``), so a worker never reads a live module folder. Each row runs
:func:`murmur_nb._batch.local.run_row`, the same prepared call's run as at home (a
worker prepares it once per process and payload, and removes its home and hosts when the
process exits: :func:`close_worker_hosts`), in tasks of
several rows, two at a time within a task (the local rule, ``ROWS_PER_CORE``). A task costs
the scheduler and both ends about a millisecond of work, so, as Dask's own advice goes, a task
should run for a good fraction of a second: the first tasks have :data:`CHUNK` rows, then
each task is sized from the rows' measured time to run about :data:`TASK_SECONDS` (between
``ROWS_PER_CORE`` and :data:`CHUNK_MAX` rows). A partial task goes only while a worker thread
would idle.
Artifacts come back as bytes up to ``artifact_bytes``, checked and staged in the kernel's
store; larger ones stay on the worker (``location``). The journal, retries, ``max_cost`` and
cancel stay in the kernel; a task lost with its worker is resubmitted up to
:data:`LOST_WORKER_RETRIES` times before its rows are ``worker_lost`` (when every worker that
held the snapshot is gone, Dask drops the tasks that needed it: it is scattered again first).
Cancel drops queued rows; running ones finish and are kept.

A module edited mid-batch is seen in the kernel, as at home: before each round of rows is
handed out the kernel looks at the module (:func:`~murmur_nb._batch.plan.module_change`),
and once it no longer resolves to the approved digests every row not yet handed out is
``module_changed``, not run. Rows already with Dask finish on the approved snapshot shipped
to the workers, so nothing of the new code runs there either.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import tempfile
import threading
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from murmur_nb._batch.local import ROWS_PER_CORE, run_row
from murmur_nb._batch.payload import DigestRefused, Payload, install, payload_of
from murmur_nb._batch.record import not_run_record
from murmur_nb._exceptions import warn_if_plain_cluster
from murmur_nb._files.scratch import release

if TYPE_CHECKING:
    from collections.abc import Callable

    from murmur_nb._batch.plan import Plan
    from murmur_nb._files.artifacts import VerifiedArtifact
    from murmur_nb._modules.host import ModuleHost
    from murmur_nb._modules.policy import Policy
    from murmur_nb._modules.staging import StagedArtifact

__all__ = [
    "CHUNK",
    "CHUNK_MAX",
    "LOST_WORKER_RETRIES",
    "TASK_SECONDS",
    "DaskRunner",
    "close_worker_hosts",
    "dask_slots",
    "run_chunk_on_worker",
    "rows_per_task",
    "run_on_worker",
    "worker_host",
]

#: rows in each of the first Dask tasks, before any row's time is known
CHUNK = 8
#: the most rows in one task (what a dead worker's task costs to run again stays small)
CHUNK_MAX = 64
#: how long a task should run: long enough that Dask's cost per task (scheduler round trips,
#: about a millisecond) is small beside it, short enough that a cancel, which lets running
#: tasks finish, is not kept waiting
TASK_SECONDS = 0.25
#: a row on its way: the coordinator's future, the input, the attempt
_Row = tuple[Future[Any], Any, int]
#: how often a row whose worker died is submitted again before it is a ``worker_lost`` row
LOST_WORKER_RETRIES = 3
#: tries to scatter the payload again while the workers come back after they all died
RESCATTER_TRIES = 5

# -- on the worker -------------------------------------------------------------------------

#: (payload contents, capability, policy, approve) -> this worker process's host and plan
_hosts: dict[tuple[str, str, str, bool], tuple[ModuleHost, Any]] = {}
_hosts_lock = threading.Lock()


def close_worker_hosts() -> None:
    """Close every host this process installed a payload for, and remove its private home
    (registered with ``atexit`` in a worker process when it installs its first payload)."""
    with _hosts_lock:
        hosts = [host for host, _ in _hosts.values()]
        _hosts.clear()
    for host in hosts:
        host.close()
        release(host.home)


def worker_host(payload: Payload, policy: Policy, poll_every: float, poll_timeout: float,
                approve: bool = False) -> tuple[ModuleHost, Any]:  # fmt: skip
    """This worker process's host for ``payload`` and its plan (the prepared call every row
    runs), installed, described, checked and prepared once per process; ``approve``: the
    kernel approved the batch (this host holds none of the kernel's pins)."""
    from murmur_nb._batch.plan import plan_for  # noqa: PLC0415 - keeps the import graph flat
    from murmur_nb._modules.host import ModuleHost  # noqa: PLC0415

    key = (payload.contents, payload.capability, repr(policy), approve)
    with _hosts_lock:
        if key in _hosts:
            return _hosts[key]
        home = install(payload, policy)
        host = ModuleHost(home=home, policy=policy)
        try:
            plan = plan_for(host, payload.capability, poll_every=poll_every,
                            poll_timeout=poll_timeout, approve=approve)  # fmt: skip
        except BaseException:
            host.close()
            release(home)
            raise
        if plan.module_digest != payload.module_digest:
            host.close()
            release(home)
            raise DigestRefused(
                f"module {payload.name!r} as received hashes to {plan.module_digest}, not the "
                f"{payload.module_digest} the batch was approved for; nothing was run here"
            )
        if not _hosts:
            atexit.register(close_worker_hosts)
        _hosts[key] = (host, plan)
        return host, plan


def _worker_address() -> str:
    """This worker's address (asked from the task's own thread: Dask knows it there)."""
    from distributed import get_worker  # noqa: PLC0415 - only ever runs on a worker

    return str(get_worker().address)


def _shipped_artifacts(record: dict[str, Any], bound: int, where: str | None
                       ) -> list[bytes | None]:  # fmt: skip
    """Each artifact's bytes (``None`` past ``bound``: it stays, its record says where)."""
    out: list[bytes | None] = []
    for entry in record["artifacts"]:
        if entry["bytes"] > bound:
            address = where or _worker_address()
            entry["location"] = {"worker": address, "file": entry.pop("file")}
            out.append(None)
        else:
            out.append(Path(entry["file"]).read_bytes())
    return out


def run_on_worker(  # noqa: PLR0917 - a Dask task takes its arguments positionally
    payload: Payload, policy: Policy, value: Any, attempt: int, options: dict[str, Any],
    poll: tuple[float, float], bound: int, where: str | None = None,
) -> tuple[dict[str, Any], list[bytes | None]]:  # fmt: skip
    """One row on a worker: its record and its artifacts' bytes (``where``: the worker's
    address, asked from Dask when not given)."""
    try:
        host, plan = worker_host(payload, policy, *poll, approve=bool(options.get("approve")))
    except DigestRefused as exc:
        return not_run_record(DigestRefused.code, str(exc)), []
    if plan.refusal is not None:  # the kernel did not approve what this module needs
        refusal = plan.refusal
        return not_run_record(refusal.code, f"not run on this worker: {refusal.message}"), []
    # look=False: the kernel looks at the live module before each round of rows; this
    # worker's copy is private, and a row runs its prepared snapshot whatever the copy holds
    record = run_row(host, plan, value, attempt, cancel=threading.Event(), options=options,
                     look=False)  # fmt: skip
    return record, _shipped_artifacts(record, bound, where)


def run_chunk_on_worker(  # noqa: PLR0917 - a Dask task takes its arguments positionally
    payload: Payload, policy: Policy, rows: list[tuple[Any, int]], options: dict[str, Any],
    poll: tuple[float, float], bound: int,
) -> tuple[list[tuple[dict[str, Any], list[bytes | None]]], float]:  # fmt: skip
    """A few rows on a worker (a Dask task), :data:`ROWS_PER_CORE` at a time, in order;
    with the seconds they took here (which size the next tasks)."""
    start = time.monotonic()
    where = _worker_address()

    def one(row: tuple[Any, int]) -> tuple[dict[str, Any], list[bytes | None]]:
        return run_on_worker(payload, policy, row[0], row[1], options, poll, bound, where)

    with ThreadPoolExecutor(ROWS_PER_CORE, thread_name_prefix="murmur-task") as pool:
        results = list(pool.map(one, rows))
    return results, time.monotonic() - start


# -- in the kernel -------------------------------------------------------------------------


def dask_slots(client: Any) -> int:
    """The cluster's worker threads, at least 1."""
    return max(1, sum(int(n) for n in client.nthreads().values()))


def rows_per_task(row_seconds: float) -> int:
    """Rows for a task to run about :data:`TASK_SECONDS` when each row's share of its task
    is ``row_seconds`` (between ``ROWS_PER_CORE`` and :data:`CHUNK_MAX`).

    Examples
    --------
    >>> rows_per_task(0.004), rows_per_task(0.02), rows_per_task(3.0)
    (62, 12, 2)
    """
    wanted = round(TASK_SECONDS / max(row_seconds, 1e-6))
    return max(ROWS_PER_CORE, min(CHUNK_MAX, wanted))


def _lost(exc: BaseException) -> bool:
    from distributed import KilledWorker  # noqa: PLC0415

    return isinstance(exc, KilledWorker | OSError)  # CommClosedError is an OSError


class DaskRunner:
    """Rows as Dask tasks of ``chunk`` rows (sized as rows finish, see the module's text);
    the kernel's coordinator sees one plain ``concurrent.futures`` future per row.

    It is given what it needs, not the batch: the plan (the snapshot to ship, the approval
    its rows run under), the host's policy, the options each row runs with, the batch's
    cancel event, ``stage`` (the kernel host's :meth:`~murmur_nb.ModuleHost.stage`, for the
    artifacts that come back), the batch's ``concurrency`` and the artifact size bound.
    """

    def __init__(
        self, client: Any, plan: Plan, policy: Policy, *,
        stage: Callable[[VerifiedArtifact], StagedArtifact], options: dict[str, Any],
        cancel: threading.Event, concurrency: int, artifact_bytes: int,
    ) -> None:  # fmt: skip
        warn_if_plain_cluster(client)
        self.client, self.chunk, self.plan, self.policy = client, CHUNK, plan, policy
        self.stage, self.options, self.cancel = stage, options, cancel
        self.concurrency, self.artifact_bytes = concurrency, artifact_bytes
        self._row_seconds: float | None = None  # a row's share of its task's time, smoothed
        self._data = payload_of(plan, policy)
        self.payload = self._scatter()
        self._scatter_lock = threading.Lock()
        self.poll = (plan.poll.every, plan.poll.timeout) if plan.poll else (0.2, 600.0)
        self._live: dict[int, Any] = {}
        self._buffer: list[_Row] = []
        self.slots = dask_slots(client)
        self._lock = threading.Lock()
        self._count = 0
        self._stopping = False

    def _scatter(self) -> Any:
        """The payload on every worker, under a key of its own (``hash=False``): a content
        key would be shared with an earlier batch of the same module, whose release can
        race this copy on the scheduler ("key lost during replication")."""
        return self.client.scatter(self._data, broadcast=True, hash=False)

    def _rescatter(self, lost: Any) -> None:
        """Scatter the payload again, once, when ``lost`` (the copy a task was given) is gone.

        The workers are coming back at this moment: the scheduler may still list one that
        died (``KeyError`` of its address), so a failed try waits for a worker and tries again
        (:data:`RESCATTER_TRIES` in all) before the rows are reported lost.
        """
        with self._scatter_lock:
            if self.payload is not lost:
                return
            for tries_left in range(RESCATTER_TRIES - 1, -1, -1):
                try:
                    self.payload = self._scatter()
                    return
                except Exception:
                    if tries_left == 0:
                        raise
                    time.sleep(1.0)
                    with contextlib.suppress(Exception):
                        self.client.wait_for_workers(1, timeout=30)

    def submit(self, value: Any, attempt: int) -> Future[dict[str, Any]]:
        out: Future[dict[str, Any]] = Future()
        self._buffer.append((out, value, attempt))
        if len(self._buffer) >= self.chunk:
            self.flush()
        return out

    def flush(self) -> None:
        """Send the rows submitted so far as tasks of :data:`CHUNK` rows; a partial task only
        while fewer tasks than worker threads are out (the coordinator calls this after each
        round of starts: rows finish a task at a time, and the rows started in their place
        make the next task whole, not one task per row)."""
        if self.cancel.is_set():
            self._drop_buffer()
        while len(self._buffer) >= self.chunk or (self._buffer and self._idle()):
            rows, self._buffer = self._buffer[: self.chunk], self._buffer[self.chunk :]
            self._send(rows, 0)

    def limit(self) -> int:
        """How many rows may be out at once: two tasks per worker thread (one running,
        one queued behind it, so a worker never waits for the kernel), within the batch's
        ``concurrency``."""
        return min(self.concurrency, 2 * self.chunk * self.slots)

    def _sized(self, rows: int, seconds: float) -> None:
        """Learn from a task of ``rows`` rows that ran ``seconds``: the next tasks aim at
        :data:`TASK_SECONDS`."""
        share = seconds / max(rows, 1)
        with self._lock:
            old = self._row_seconds
            self._row_seconds = share if old is None else 0.7 * old + 0.3 * share
            self.chunk = rows_per_task(self._row_seconds)

    def _idle(self) -> bool:
        with self._lock:
            return len(self._live) < self.slots

    def _drop_buffer(self) -> None:
        rows, self._buffer = self._buffer, []
        for out, _, _ in rows:
            out.set_result(not_run_record("cancelled", "the batch was cancelled before this "
                                          "row was sent to a worker"))  # fmt: skip

    def _send(self, rows: list[_Row], lost: int) -> None:
        with self._lock:
            self._count += 1
            n = self._count
        payload = self.payload
        fut = self.client.submit(
            run_chunk_on_worker, payload, self.policy, [(v, a) for _, v, a in rows],
            self.options, self.poll, self.artifact_bytes, pure=False,
            key=f"murmur-rows-{n}-{os.getpid()}-{id(self)}",
        )  # fmt: skip
        with self._lock:
            self._live[n] = fut
        fut.add_done_callback(lambda f: self._done(f, n, rows, lost, payload))

    def _done(self, fut: Any, n: int, rows: list[_Row], lost: int, payload: Any) -> None:
        with self._lock:
            self._live.pop(n, None)
        done: tuple[list[Any], float] | None = None
        try:
            if fut.status == "finished":
                done = fut.result()  # fetched from its worker, which may be gone by now
            exc = fut.exception() if fut.status == "error" else None
        except Exception as failure:  # the result went with its worker: no row may hang
            exc = failure
        if done is not None:
            results, seconds = done
            self._sized(len(rows), seconds)
            for (out, _, _), result in zip(rows, results, strict=True):
                out.set_result(result)
            return
        # cancelled by Dask, not by the batch: the payload was lost with the last worker that
        # held it (every worker died or restarted), so the task cannot run (again) as it is
        dropped = exc is None or isinstance(exc, CancelledError)
        stopping = self._stopping or self.cancel.is_set()
        if dropped and stopping:
            why = "the batch was cancelled before this row ran on a worker"
            for out, _, _ in rows:
                out.set_result(not_run_record("cancelled", why))
            return
        gone = dropped or (exc is not None and _lost(exc))
        if gone and lost < LOST_WORKER_RETRIES and not stopping:
            try:
                if dropped:
                    self._rescatter(payload)
                self._send(rows, lost + 1)
                return
            except Exception as again:  # no worker came back: the rows say why
                exc = again
        if exc is None:
            exc = RuntimeError("the module's payload was lost with every worker that held it")
        code = "worker_lost" if gone else "host_error"
        for out, _, _ in rows:
            out.set_result(not_run_record(code, f"{type(exc).__name__}: {exc}"))

    def collect(self, fut: Future[dict[str, Any]]) -> dict[str, Any]:
        result = fut.result()
        if isinstance(result, dict):  # a not-run record made in the kernel
            return result
        record, data = result
        if record.get("approval") and self.plan.prepared is not None:
            # the worker ran it under the approval this kernel decided for the batch
            record["approval"] = self.plan.prepared.approval
        for entry, blob in zip(record["artifacts"], data, strict=True):
            if blob is not None:
                entry.update(self._store(entry, blob))
        return record

    def _store(self, entry: dict[str, Any], blob: bytes) -> dict[str, Any]:
        """The artifact's bytes, checked against its digest, staged into the kernel's store."""
        from murmur_nb._files.artifacts import VerifiedArtifact  # noqa: PLC0415

        art = {k: v for k, v in entry.items() if k not in {"file", "location"}}
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        if len(blob) != art["bytes"] or digest != art["digest"]:
            return {
                "file": None,
                "location": {
                    "problem": (f"the bytes received for {art['id']!r} do not match its digest")
                },
            }
        with tempfile.TemporaryDirectory(prefix="murmur-nb-incoming-") as tmp:
            path = Path(os.path.realpath(tmp), "artifact")
            path.write_bytes(blob)
            staged = self.stage(VerifiedArtifact(**art, file=path))
        return {"root": "staged", "path": staged.path, "file": str(staged.file)}

    def cancel_running(self) -> None:
        self._stopping = True
        self._drop_buffer()
        with self._lock:
            futs = list(self._live.values())
        if futs:
            self.client.cancel(futs)

    def close(self) -> None:
        self.cancel_running()
