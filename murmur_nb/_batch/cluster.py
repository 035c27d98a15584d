"""Rows on a Dask cluster: ``map(..., client=dask.distributed.Client)``.

The kernel scatters the module's verified snapshot once
(:class:`~murmur_nb._batch.payload.Payload`); :func:`worker_host` installs it in a
private home on first use and refuses every row when its digest differs
(``digest_mismatch``), so a worker never reads a live module folder. Each row runs
:func:`murmur_nb._batch.local.run_row`, the same prepared call's run as at home (a
worker prepares it once per process and payload, and removes its home and hosts when the
process exits: :func:`close_worker_hosts`), in tasks of
several rows, two at a time within a task (the local rule, ``ROWS_PER_CORE``; a batch of the
default concurrency goes to four, ``SHORT_ROWS_PER_CORE``, once the runs of the first tasks'
rows prove short, as at home: :attr:`DaskRunner.at_once`). A task costs
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

**Cancel drops the rows not started; running ones finish and are kept** (their results and
costs, as any row's). Cancelling the Dask futures would not do it: a running task's thread is
not stopped by Dask, so its module processes, and the rest of its rows, ran on with nobody to
keep what they did. Instead each task watches a ``distributed.Event`` named for the batch
(:class:`CancelWatch`: asked as the task starts, then one long-poll of the scheduler every
:data:`WATCH_S` from a thread of the task), and a row of the task starts only while it is not
set. The kernel sets it on Cancel (or Ctrl-C) and sends nothing more; the tasks already out
come back with their rows finished or ``cancelled``, and the batch settles once they have.

**A client or cluster that closes mid-batch** (:func:`client_closed`): Dask cancels every
future of the client, so the rows that were on the cluster come back ``worker_lost`` (their
outcome went with it), rows it could no longer be sent are ``host_error``, and the batch
stops with an error saying how to resume. A closed client given to ``map`` is refused before
anything runs (:func:`check_client`).

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
import uuid
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from murmur_nb._batch.local import (
    ROWS_PER_CORE,
    SHORT_ROWS_PER_CORE,
    SHORT_SAMPLES_PER_WORKER,
    rows_are_short,
    run_row,
)
from murmur_nb._batch.payload import DigestRefused, Payload, install, payload_of, refuse_unfit
from murmur_nb._batch.record import not_run_record
from murmur_nb._exceptions import warn_if_plain_cluster
from murmur_nb._files.scratch import release, temp_folder

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

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
    "WATCH_S",
    "CancelWatch",
    "DaskRunner",
    "check_client",
    "client_closed",
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
#: how long one look of a task at its batch's cancel event waits (a long-poll of the
#: scheduler): a Cancel reaches a task's next row within about this
WATCH_S = 0.25
#: what a row says when the batch was cancelled before it started on its worker
_CANCELLED_HERE = "the batch was cancelled before this row started on its worker"
_CLOSED_LOST = ("the Dask client (or its cluster) closed while this row was on the cluster; "
                "its outcome went with it")  # fmt: skip
_CLOSED_UNSENT = "the Dask client (or its cluster) closed before this row could be sent to it"

# -- on the worker -------------------------------------------------------------------------

#: (payload contents, module digest, capability, policy, approve) -> this worker process's
#: host and plan
_hosts: dict[tuple[str, str, str, str, bool], tuple[ModuleHost, Any]] = {}
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
    runs), installed, described, checked and prepared once per process and module digest
    (a host serves only the digest it was compared with); ``approve``: the kernel approved
    the batch (this host holds none of the kernel's pins)."""
    from murmur_nb._batch.plan import plan_for  # noqa: PLC0415 - keeps the import graph flat
    from murmur_nb._modules.host import ModuleHost  # noqa: PLC0415

    refuse_unfit(payload, policy)  # before its contents are hashed for the key
    # the digest too: a host is reused only for the digest it was compared with
    key = (payload.contents, payload.module_digest, payload.capability, repr(policy), approve)
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
    # worker's copy is private, and a row runs its prepared snapshot whatever the copy holds.
    # A cancel event nothing sets: a row that started finishes and is kept (a Cancel only
    # stops rows from starting: run_chunk_on_worker)
    record = run_row(host, plan, value, attempt, cancel=threading.Event(), options=options,
                     look=False)  # fmt: skip
    return record, _shipped_artifacts(record, bound, where)


def _event(name: str, client: Any = None) -> Any:
    """The ``distributed.Event`` called ``name`` (on a worker, through its own client)."""
    from distributed import Event  # noqa: PLC0415 - distributed lazily

    return Event(name, client=client)  # type: ignore[no-untyped-call]


class CancelWatch:
    """The batch's Cancel as one task sees it: the ``distributed.Event`` named ``name``.

    Asked once as the task starts, then watched from a thread of the task (a long-poll of
    :data:`WATCH_S` at a time, until the task ends); :attr:`stop` is set once it is. A
    scheduler that cannot be asked stops the watching, not the rows: the task's result has
    nowhere to go then anyway. ``name=None`` (a task sent without one) watches nothing.
    """

    def __init__(self, name: str | None) -> None:
        self.stop = threading.Event()
        self._over = threading.Event()
        self._event: Any = None
        if name is None:
            return
        with contextlib.suppress(Exception):  # no scheduler to ask: the rows run as sent
            self._event = _event(name)
            if self._event.is_set():
                self.stop.set()
                return
            threading.Thread(target=self._watch, name="murmur-cancel-watch",
                             daemon=True).start()  # fmt: skip

    def _watch(self) -> None:
        while not self._over.is_set():
            try:
                if self._event.wait(WATCH_S):
                    self.stop.set()
                    return
            except Exception:
                return

    @contextlib.contextmanager
    def watching(self) -> Iterator[threading.Event]:
        """:attr:`stop`, watched until the block ends."""
        try:
            yield self.stop
        finally:
            self._over.set()


def run_chunk_on_worker(  # noqa: PLR0917 - a Dask task takes its arguments positionally
    payload: Payload, policy: Policy, rows: list[tuple[Any, int]], options: dict[str, Any],
    poll: tuple[float, float], bound: int, cancel_key: str | None = None,
    at_once: int = ROWS_PER_CORE,
) -> tuple[list[tuple[dict[str, Any], list[bytes | None]]], float, list[float]]:  # fmt: skip
    """A few rows on a worker (a Dask task), ``at_once`` at a time, in order; with the
    seconds they took here (which size the next tasks) and each started row's own run time
    (which tell the kernel whether they are short). Once the batch's cancel event
    ``cancel_key`` is set, no row of the task starts (each is ``cancelled``); the running
    ones finish."""
    start = time.monotonic()
    where = _worker_address()
    runs: list[float] = []

    with CancelWatch(cancel_key).watching() as stop:

        def one(row: tuple[Any, int]) -> tuple[dict[str, Any], list[bytes | None]]:
            if stop.is_set():
                return not_run_record("cancelled", _CANCELLED_HERE), []
            began = time.monotonic()
            try:
                return run_on_worker(payload, policy, row[0], row[1], options, poll, bound,
                                     where)  # fmt: skip
            finally:
                runs.append(time.monotonic() - began)

        with ThreadPoolExecutor(at_once, thread_name_prefix="murmur-task") as pool:
            results = list(pool.map(one, rows))
    return results, time.monotonic() - start, runs


# -- in the kernel -------------------------------------------------------------------------


def dask_slots(client: Any) -> int:
    """The cluster's worker threads, at least 1."""
    return max(1, sum(int(n) for n in client.nthreads().values()))


def client_closed(client: Any) -> bool:
    """Whether ``client`` is closed or closing (it closes with its ``LocalCluster`` too)."""
    return getattr(client, "status", None) in {"closing", "closed"}


def check_client(client: Any) -> None:
    """Refuse a ``client=`` that no row could run on, before anything runs: not a Dask client
    (``TypeError``), or one that is closed (``ValueError``)."""
    if not (callable(getattr(client, "submit", None)) and callable(getattr(client, "scatter", None))
            and callable(getattr(client, "nthreads", None))):  # fmt: skip
        raise TypeError(
            f"client= takes a dask.distributed.Client (Client(cluster)), not a "
            f"{type(client).__name__}; nothing was run"
        )
    if client_closed(client):
        raise ValueError(
            f"the Dask client given as client= is closed (its status is {client.status!r}), "
            "so no row can run on it, and nothing was run. Pass an open one "
            "(Client(cluster)), or leave client= out to run the rows here"
        )


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
    artifacts that come back), the batch's ``concurrency``, the artifact size bound and
    ``grow`` (the batch's concurrency is its default: :attr:`at_once` may grow). The batch's
    cancel reaches the workers through :meth:`cancel_running` (the tasks'
    :class:`CancelWatch`).
    """

    def __init__(
        self, client: Any, plan: Plan, policy: Policy, *,
        stage: Callable[[VerifiedArtifact], StagedArtifact], options: dict[str, Any],
        cancel: threading.Event, concurrency: int, artifact_bytes: int, grow: bool = False,
    ) -> None:  # fmt: skip
        warn_if_plain_cluster(client)
        self.client, self.chunk, self.plan, self.policy = client, CHUNK, plan, policy
        self.stage, self.options, self.cancel = stage, options, cancel
        self.concurrency, self.artifact_bytes = concurrency, artifact_bytes
        self._row_seconds: float | None = None  # a row's share of its task's time, smoothed
        #: rows a task runs at once: :data:`ROWS_PER_CORE` (a task per worker thread), or
        #: :data:`SHORT_ROWS_PER_CORE` once the first tasks sent, holding
        #: :data:`SHORT_SAMPLES_PER_WORKER` rows per row slot, ran them short in the median
        #: (the local rule, decided once; only when ``grow``)
        self.at_once = ROWS_PER_CORE
        self._grow = grow
        #: the first tasks sent (number -> rows), whose rows' runs decide :attr:`at_once`
        #: once every one of them is back (the first to come back are the short ones)
        self._first: dict[int, int] = {}
        self._first_runs: dict[int, list[float]] = {}
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
        #: the distributed.Event every task of this run watches (set: start no more rows)
        self.cancel_key = f"murmur-cancel-{uuid.uuid4().hex}"
        self._cancel_sent = False

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

    def _sized(self, n: int, rows: int, seconds: float, runs: list[float]) -> None:
        """Learn from task ``n`` of ``rows`` rows that ran ``seconds``, its rows' runs taking
        ``runs``: the next tasks aim at :data:`TASK_SECONDS`, and, once the first tasks sent
        are all back, run more rows at once if those rows proved short (:attr:`at_once`)."""
        share = seconds / max(rows, 1)
        with self._lock:
            old = self._row_seconds
            self._row_seconds = share if old is None else 0.7 * old + 0.3 * share
            self.chunk = rows_per_task(self._row_seconds)
            if n not in self._first or not self._grow:
                return
            self._first_runs[n] = runs
            if len(self._first_runs) == len(self._first) and self._sampled():
                self._grow = False
                if rows_are_short([r for got in self._first_runs.values() for r in got]):
                    self.at_once = SHORT_ROWS_PER_CORE

    def _sampled(self) -> bool:
        """Whether the first tasks sent hold the rows :attr:`at_once` is decided on:
        :data:`SHORT_SAMPLES_PER_WORKER` per row slot (lock held)."""
        wanted = SHORT_SAMPLES_PER_WORKER * ROWS_PER_CORE * self.slots
        return sum(self._first.values()) >= wanted

    def _idle(self) -> bool:
        with self._lock:
            return len(self._live) < self.slots

    def _drop_buffer(self) -> None:
        rows, self._buffer = self._buffer, []
        for out, _, _ in rows:
            out.set_result(not_run_record("cancelled", "the batch was cancelled before this "
                                          "row was sent to a worker"))  # fmt: skip

    @property
    def closed(self) -> bool:
        """Whether the client closed (or its cluster did): no row can be sent or come back."""
        return client_closed(self.client)

    def _send(self, rows: list[_Row], lost: int) -> None:
        with self._lock:
            self._count += 1
            n = self._count
            if self._grow and not self._sampled():
                self._first[n] = len(rows)
        payload = self.payload
        try:
            fut = None if self.closed else self.client.submit(
                run_chunk_on_worker, payload, self.policy, [(v, a) for _, v, a in rows],
                self.options, self.poll, self.artifact_bytes, self.cancel_key, self.at_once,
                pure=False,
                key=f"murmur-rows-{n}-{os.getpid()}-{id(self)}",
            )  # fmt: skip
        except Exception:  # Dask's own words for it: ClosedClientError, "IOLoop is closed"
            if not self.closed:
                raise
            fut = None
        if fut is None:
            for out, _, _ in rows:
                out.set_result(not_run_record("host_error", _CLOSED_UNSENT))
            return
        with self._lock:
            self._live[n] = fut
        fut.add_done_callback(lambda f: self._done(f, n, rows, lost, payload))

    @staticmethod
    def _outcome(
        fut: Any,
    ) -> tuple[tuple[list[Any], float, list[float]] | None, BaseException | None]:
        """A finished task's rows, seconds and row runs, or what stopped it (``None``,
        ``None``: cancelled)."""
        try:
            if fut.status == "finished":
                return fut.result(), None  # fetched from its worker, which may be gone by now
            return None, fut.exception() if fut.status == "error" else None
        except Exception as failure:  # the result went with its worker: no row may hang
            return None, failure

    def _done(self, fut: Any, n: int, rows: list[_Row], lost: int, payload: Any) -> None:
        with self._lock:
            self._live.pop(n, None)
        done, exc = self._outcome(fut)
        if done is not None:
            results, seconds, runs = done
            self._sized(n, len(rows), seconds, runs)
            for (out, _, _), result in zip(rows, results, strict=True):
                out.set_result(result)
            return
        if self.closed:  # Dask cancelled the client's futures as it closed
            for out, _, _ in rows:
                out.set_result(not_run_record("worker_lost", _CLOSED_LOST))
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
        with tempfile.TemporaryDirectory(prefix="murmur-nb-incoming-", dir=temp_folder()) as tmp:
            path = Path(os.path.realpath(tmp), "artifact")
            path.write_bytes(blob)
            staged = self.stage(VerifiedArtifact(**art, file=path))
        return {"root": "staged", "path": staged.path, "file": str(staged.file)}

    def cancel_running(self) -> None:
        """Start no more rows: drop the ones not sent, and set the event every task out
        watches, so their rows not started stay so. The running rows finish and come back
        (their futures are not cancelled: that would lose what they did, not stop them)."""
        self._stopping = True
        self._drop_buffer()
        if self._cancel_sent or self.closed:
            return
        with contextlib.suppress(Exception):  # a client closing meanwhile: nothing runs on
            _event(self.cancel_key, self.client).set()
            self._cancel_sent = True

    def close(self) -> None:
        """After the run: nothing is left to send. Tasks still out (the batch stopped on an
        error of the host's, without waiting for them) start no more rows and are dropped;
        otherwise the scheduler forgets the cancel event."""
        self._drop_buffer()
        with self._lock:
            futs = list(self._live.values())
        if futs:
            self.cancel_running()
            with contextlib.suppress(Exception):
                self.client.cancel(futs)
        elif self._cancel_sent and not self.closed:
            with contextlib.suppress(Exception):
                _event(self.cancel_key, self.client).clear()
