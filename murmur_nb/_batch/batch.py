"""The :class:`Batch`: one capability over many inputs, errors as rows, resumable.

Named ``map`` after ``Executor.map``, ``client.map`` and ``Series.map``, but a failure is a
row with its code, never a raise. Every input is checked with ``invoke``'s rules before
anything runs (``on_invalid="raise"`` lists every bad row in one
:class:`~murmur_nb.InvalidInput`; ``"skip"`` keeps them as rows). Approval is asked once, for
calls times estimated cost, when the batch's call is prepared (:mod:`.plan`: one
``describe``); every row runs that one :class:`~murmur_nb.PreparedCall`, and
:attr:`Batch.approval` states the approval its rows run under. A module changed mid-batch is
not run under it. ``max_cost``
stops starting rows once known costs plus rows in flight would pass it; while no cost is known
one row runs at a time, and an unknown cost is never taken for free. Every attempt counts (a
retried row's failures cost what they reported), and so does what the journal's rows already
spent, so resuming a batch does not give it a fresh budget.

The batch holds the run's state (which rows are pending, running, delayed for a retry; what
was spent) in one place, :meth:`Batch._reset_run`; a runner is handed only what it needs. On
this machine :class:`~.local.LocalRunner`'s ``concurrency`` worker threads each take the next
row, run it and settle it through a :class:`~.local.RowSource` (the batch's lock and its
take, run, finish and fail steps); the calling thread waits. On Dask
(:class:`~.cluster.DaskRunner`: the plan, the policy, the options, the cancel event and
``host.stage``) the calling thread hands rows out in tasks and settles what comes back.
Ctrl-C or :meth:`cancel` stops starting rows, cancels running ones here (on Dask they finish
and are kept: :mod:`.cluster`), keeps finished ones, then re-raises. A failure of the host's
own (a journal that cannot be written, a listener that raises, a Dask client that closes)
stops the batch: its state is ``stopped``, no row is left ``running`` or ``pending``, and the
error reaches the caller. Concurrency defaults to two rows per usable core
(:data:`ROWS_PER_CORE`): a row's thread holds no core while its sandboxed process runs, and
the host's part of a row runs under the GIL, so a second row per core keeps a process ready
while the first is in Python. Where the first rows prove short (a median run of at most
:data:`~.local.SHORT_ROW_S`), a default batch grows to four rows per usable core
(:data:`~.local.SHORT_ROWS_PER_CORE`): the moments a row's process starts and ends leave a
core idle, a tenth of a row of a few milliseconds; a long row's module keeps its memory to
two processes per core. A ``concurrency=`` given is kept as it is. When the interpreter exits
with a background batch running, the batch is cancelled the same way first
(:func:`stop_background_batches`), so its processes end and its rows settle.

The journal's connection is closed when a run ends (reading rows back opens it again) and by
:meth:`Batch.close` (``with host.map(...) as batch:``), which also ends a running batch.
"""

from __future__ import annotations

import atexit
import hashlib
import heapq
import json
import operator
import queue
import reprlib
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from murmur_nb._batch.inputs import (
    Inputs,
    RowProblem,
    canonical,
    input_key,
    read_inputs,
)
from murmur_nb._batch.local import (
    LOOK_EVERY_S,
    ROWS_PER_CORE,
    SHORT_ROWS_PER_CORE,
    TICK_S,
    LocalRunner,
    RowSource,
    Taken,
    run_row,
)
from murmur_nb._batch.options import batch_numbers, run_key, run_options
from murmur_nb._batch.plan import Plan, input_problem, module_change, plan_for
from murmur_nb._batch.progress import BatchProgress, bar_listener
from murmur_nb._batch.record import invocation_of, not_run_record
from murmur_nb._exceptions import (
    ApprovalRequired,
    BatchInterrupted,
    InvalidInput,
    ModuleHostError,
)
from murmur_nb._modules.call import MODULE_CHANGED
from murmur_nb._modules.invocation import Invocation
from murmur_nb._modules.prepared import NOT_REQUIRED, THIS_CALL
from murmur_nb._progress import in_kernel
from murmur_nb._rules import compact_json, usable_cores

if TYPE_CHECKING:
    from murmur_nb._batch.cluster import DaskRunner
    from murmur_nb._batch.hold import Hold
    from murmur_nb._batch.journal import Journal  # sqlite3: imported on first map()
    from murmur_nb._modules.host import ModuleHost

__all__ = ["Batch"]

_DEFAULT = object()
_MAX_BACKOFF = 30.0
#: At interpreter exit, how long a cancelled background batch may take to settle its rows.
EXIT_WAIT_S = 30.0
_background: weakref.WeakSet[Batch] = weakref.WeakSet()
#: row states; ok and failed are finished (and journaled)
PENDING, RUNNING, OK, FAILED, NOT_RUN = "pending", "running", "ok", "failed", "not_run"


def _default_concurrency(client: Any) -> int:
    """Two rows per usable core here; on a cluster, two of the largest tasks of rows per
    worker thread (the runner keeps fewer out while its tasks are smaller)."""
    if client is None:
        return ROWS_PER_CORE * usable_cores()
    from murmur_nb._batch.cluster import CHUNK_MAX, dask_slots  # noqa: PLC0415

    return 2 * CHUNK_MAX * dask_slots(client)


def _fmt(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:g}"


class Batch:
    """The rows of one ``ModuleHost.map`` call: their state, and their outcomes on demand.

    Outcomes live in the journal, not in memory; ``batch[i]`` and :meth:`to_pandas` read
    them back. Build one with :meth:`ModuleHost.map <murmur_nb.ModuleHost.map>`.
    """

    def __init__(
        self, host: ModuleHost, plan: Plan, inputs: Inputs, texts: list[str], *,
        journal: Journal, options: dict[str, Any], concurrency: int, retries: int,
        backoff: float, max_cost: float | None, estimated_cost: float | None,
        artifact_bytes: int = 8 << 20,
    ) -> None:  # fmt: skip
        self.host, self.plan, self.inputs = host, plan, inputs
        self.capability = plan.capability
        self._texts = texts
        self._keys = [input_key(t) for t in texts]
        # the run options are part of the key: rows run with others are not this batch's
        self._jkey = (plan.capability, run_key(plan.module_digest, options))
        self.journal = journal
        self.options = options
        self.concurrency, self.retries, self.backoff = concurrency, retries, backoff
        #: whether rows may run more at once once they prove short (a default concurrency
        #: only): :class:`~.local.LocalRunner`'s ``grow_to``, :class:`~.cluster.DaskRunner`'s
        #: ``grow``
        self.grow = False
        self.max_cost, self.estimated_cost = max_cost, estimated_cost
        self.artifact_bytes = artifact_bytes
        self._state = [PENDING] * len(texts)
        # kept as rows move, so the progress a view reads after every row costs O(1), not O(N)
        self._counts = dict.fromkeys((PENDING, RUNNING, OK, FAILED, NOT_RUN), 0)
        self._counts[PENDING] = len(texts)
        self._attempts: dict[int, int] = {}
        self._journaled = bytearray(len(texts))
        self._from_journal = 0
        self._unrun: dict[int, dict[str, Any]] = {}
        self._twins: dict[int, list[int]] = {}
        # held while a row is taken or settled; notified when one settles or the batch stops
        self._wake = threading.Condition(threading.RLock())
        self._cancel = threading.Event()
        self._stop_reason: tuple[str, str] | None = None
        self._listeners: list[Callable[[BatchProgress], None]] = []
        self._cost, self._cost_unknown, self._largest_cost = 0.0, 0, estimated_cost
        # what each unsettled or failed row's attempts spent so far (None: one was unknown),
        # journaled with the row; an ok row's entry goes when it settles
        self._spent: dict[int, float | None] = {}
        self._t0, self._run_here, self._status = time.monotonic(), 0, "running"
        self._thread: threading.Thread | None = None
        self._ended = threading.Event()  # set when a background run has settled
        #: the journal's rows of this batch's key, held while a run reads and writes them
        self._hold: Hold | None = None
        self.approval = ""
        self.client: Any = None
        self._reset_run([])

    def _reset_run(self, todo: list[int]) -> None:
        """The state of one run (of :meth:`start` or :meth:`retry_failed`), all of it."""
        self._failure: BaseException | None = None  # the host's own, raised to the caller
        self._pending = list(reversed(todo))  # popped from the end: input order
        self._delayed: list[tuple[float, int, int]] = []  # (due, row, attempt), a heap
        self._retrying: dict[int, dict[str, Any]] = {}  # a delayed row's last failure
        self._running: dict[int, int] = {}  # row -> attempt
        self._local: LocalRunner | None = None
        self._dask: DaskRunner | None = None
        # on Dask: rows finished on the workers, handed over by their futures' callbacks,
        # and those gathered from there but not yet settled
        self._done: queue.SimpleQueue[tuple[int, int, Any]] = queue.SimpleQueue()
        self._inbox: deque[tuple[int, int, Any]] = deque()
        # local rows: when a row last looked at the live module; whether a look saw it changed
        self._looked = -LOOK_EVERY_S
        self._saw_change = False
        self._takers = 0  # local workers waiting in _take for a row to settle

    # -- building ----------------------------------------------------------------------

    @classmethod
    def start(
        cls, host: ModuleHost, capability: str, inputs: Any, *,
        concurrency: int | None = None, on_invalid: str = "raise", retries: int = 0,
        backoff: float = 0.5, approve: bool = False, max_cost: float | None = None,
        estimated_cost: float | None = None, journal: Any = _DEFAULT, progress: Any = "auto",
        background: bool = False, deadline_ms: int | None = None,
        max_output_bytes: int | None = None, extra: dict[str, Any] | None = None,
        poll_every: float = 0.2, poll_timeout: float = 600.0, artifact_bytes: int = 8 << 20,
        client: Any = None,
    ) -> Batch:  # fmt: skip
        """Check, approve and run a batch; :meth:`ModuleHost.map <murmur_nb.ModuleHost.map>`
        describes every parameter (``journal``'s default: ``<home>/batches/journal.sqlite``).
        Every option is checked before anything runs (:mod:`.options`)."""
        if on_invalid not in {"raise", "skip"}:
            raise ValueError(f"on_invalid must be 'raise' or 'skip', not {on_invalid!r}")
        numbers = batch_numbers(
            concurrency=concurrency, retries=retries, backoff=backoff, max_cost=max_cost,
            estimated_cost=estimated_cost, poll_every=poll_every, poll_timeout=poll_timeout,
            artifact_bytes=artifact_bytes)  # fmt: skip
        options = run_options(host.policy, capability, deadline_ms=deadline_ms,
                              max_output_bytes=max_output_bytes, extra=extra)  # fmt: skip
        if client is not None:
            from murmur_nb._batch.cluster import check_client  # noqa: PLC0415 - distributed

            check_client(client)
        plan = plan_for(host, capability, poll_every=numbers.poll_every,
                        poll_timeout=numbers.poll_timeout, approve=approve)  # fmt: skip
        rows = read_inputs(inputs)
        texts, invalid = _checked(host, plan, rows, on_invalid)
        from murmur_nb._batch.journal import Journal, default_path  # noqa: PLC0415 - not at import

        path = default_path(host.home) if journal is _DEFAULT else journal
        batch = cls(
            host, plan, rows, texts, journal=Journal(path), options=options,
            concurrency=numbers.concurrency or _default_concurrency(client),
            retries=numbers.retries, backoff=numbers.backoff, max_cost=numbers.max_cost,
            estimated_cost=numbers.estimated_cost, artifact_bytes=numbers.artifact_bytes,
        )  # fmt: skip
        batch.client = client
        batch.grow = numbers.concurrency is None
        for i, why in invalid.items():
            batch._settle(i, not_run_record("invalid_input", why))
        try:  # one block from the hold on: a Ctrl-C anywhere in it lets go (_abandon)
            batch._take_hold()
            todo = batch._resume()
            batch._approve(len(todo))
            if progress == "auto" and background and in_kernel():
                progress = False  # in a notebook a background batch's view is BatchView
            bar = bar_listener(len(rows.values), progress)
            if bar is not None:
                batch._listeners.append(bar)
            batch._begin(todo, background)
        except BatchInterrupted as exc:  # shown from here, not from the batch's inner steps
            raise exc.with_traceback(None) from None
        except BaseException as exc:
            batch._abandon(exc)
            raise
        return batch

    def _resume(self) -> list[int]:
        """Mark the rows the journal already holds; the first of each other input is to run."""
        done = self.journal.done(self._jkey, self._keys)
        for finished in done.values():  # each journal row once, however many rows share it
            self._count_spent(finished.spent, finished.spent)
        todo: list[int] = []
        first: dict[str, int] = {}
        for i, key in enumerate(self._keys):
            if self._state[i] != PENDING:
                continue
            if key in done:
                status, spent = done[key]
                self._move(i, status)
                if status == FAILED:  # retry_failed adds to what it spent
                    self._spent[i] = spent
                self._journaled[i] = 1
                self._from_journal += 1
            elif key in first:
                self._twins.setdefault(first[key], []).append(i)
            else:
                first[key] = i
                todo.append(i)
        return todo

    def _approve(self, n: int) -> None:
        """Refuse the batch when its call was not approved and rows are left to run; else
        say which approval its rows run under (the prepared call's, decided once)."""
        refusal, prepared = self.plan.refusal, self.plan.prepared
        each = self.estimated_cost
        total = None if each is None else each * n
        cost = f"{n} x {_fmt(each)} = {_fmt(total)}"
        if refusal is not None and n:
            raise ApprovalRequired(
                f"{self.capability} needs operator approval for this batch of {n} "
                f"invocation(s), estimated cost {cost}, and nothing was run: "
                + "; ".join(refusal.reasons)
                + ". Approve the whole batch with map(..., approve=True), or host.approve(...)",
                reasons=refusal.reasons,
            ) from refusal
        label = "not approved (no row left to run)" if prepared is None else prepared.approval
        # a Dask worker's host holds no pin of this kernel's: it runs what this kernel approved
        self.options["approve"] = label not in (NOT_REQUIRED, "not approved (no row left to run)")
        if label == THIS_CALL:
            label = "approved (this batch)"
        self.approval = f"{label}; {cost}"

    # -- running -----------------------------------------------------------------------

    def _take_hold(self) -> None:
        """Hold the journal's rows of this batch's key and inputs for one run (:mod:`.hold`):
        a second batch running them at once (another kernel, or this one's background batch)
        would run each row again. Refused at once (``journal_busy``) while another holds
        them; a batch over other inputs (another DataFrame) runs beside it."""
        inputs = hashlib.sha256("\n".join(sorted(set(self._keys))).encode()).hexdigest()
        self._hold = self.journal.hold((*self._jkey, inputs), self.capability)

    def _let_go(self) -> None:
        """Let go of the journal's rows once the run's last group is committed (idempotent)."""
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.release()

    def _begin(self, todo: list[int], background: bool) -> None:
        """Run ``todo`` with the journal held (:meth:`_take_hold`): the run lets go as it
        ends, in this thread or in its background thread. Its caller calls :meth:`_abandon`
        on any exception, so a run that did not start lets go too."""
        self._check_runnable(todo)
        self._t0, self._status = time.monotonic(), "running"
        self._cancel.clear()
        self._stop_reason = None
        if background:
            _background.add(self)
            self._ended.clear()
            self._thread = threading.Thread(target=self._run_in_background, args=(todo,),
                                            daemon=True)  # fmt: skip
            self._thread.start()
        else:
            self._run(todo)

    def _abandon(self, exc: BaseException) -> None:
        """A start or retry that raised ``exc`` (a refusal, a Ctrl-C at any point from the
        hold on): let go of the journal and close it, unless its run goes on in the
        background, which does both as it ends. A run made ready but never entered is
        ``interrupted`` (a Ctrl-C) or ``stopped``, not left ``running`` for ``done``,
        ``wait`` and ``close``. Idempotent: the run may have let go already."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            return
        if self._status == "running":
            self._status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped"
        self._ended.set()
        self._let_go()
        if self.journal.path is not None:  # an in-memory journal is this batch's only copy
            self.journal.close()

    def _check_runnable(self, todo: list[int]) -> None:
        if todo and self.plan.refusal is not None:  # retry_failed of a batch never approved
            raise self.plan.refusal
        if todo and self.client is not None:
            from murmur_nb._batch.cluster import client_closed  # noqa: PLC0415

            if client_closed(self.client):  # retry_failed after the cluster went away
                raise ValueError(
                    f"this batch's Dask client is closed (its status is "
                    f"{self.client.status!r}), so its rows cannot run on it, and nothing was "
                    f"run; {self._how_to_resume()}"
                )

    def _run(self, todo: list[int]) -> None:
        self._reset_run(todo)
        if self.client is not None and todo:  # nothing to ship for a retry of no row
            from murmur_nb._batch.cluster import DaskRunner  # noqa: PLC0415 - distributed lazily

            self._dask = DaskRunner(
                self.client, self.plan, self.host.policy, stage=self.host.stage,
                options=self.options, cancel=self._cancel, concurrency=self.concurrency,
                artifact_bytes=self.artifact_bytes, grow=self.grow,
            )  # fmt: skip
        try:
            with self.journal.grouped():
                if self._dask is None:
                    self._pull()
                else:
                    self._drive(self._dask)
        except KeyboardInterrupt:
            self._interrupted()
            # one line, what stopped and how to resume, without the frames of the threads
            raise BatchInterrupted(self._interrupted_line(), self) from None
        except BaseException as exc:
            self._failure = self._failure or exc
            raise
        finally:
            try:
                if self._dask is not None:
                    self._dask.close()
                if self._status == "running":
                    self._status = self._ended_as()
                self._notify(force=True)
                if self.journal.path is not None:  # reading rows back opens it again
                    self.journal.close()
            finally:
                self._let_go()  # every row committed: the next batch may read and run them

    def _ended_as(self) -> str:
        """The state a run that ended by itself is in: ``stopped`` by the host's own failure
        (each row it left unsettled is then ``not_run``, ``host_error``), else ``cancelled``
        or ``finished``."""
        if self._failure is None:
            return "cancelled" if self._cancel.is_set() else "finished"
        why = f"the batch stopped on the host's error: {self._failure}"
        for row, state in enumerate(self._state):
            if state in (PENDING, RUNNING):  # never journaled: nothing more can fail here
                self._move(row, NOT_RUN)
                self._unrun[row] = not_run_record("host_error", why)
        return "stopped"

    def _run_in_background(self, todo: list[int]) -> None:
        try:
            self._run(todo)
        except BaseException as exc:  # wait() raises it in the caller's thread
            self._failure = exc
        finally:
            self._ended.set()

    def _finished_line(self) -> str:
        p = self.progress
        return (f"{p.finished} of {p.total} rows finished ({p.ok} ok, {p.failed} failed, "
                f"{p.from_journal} from the journal), {p.not_run} not run")  # fmt: skip

    def _how_to_resume(self, *, new_client: bool = True) -> str:
        """Where the finished rows are, and how to run the others (``new_client``: with an
        open Dask client, or here)."""
        again = ("run the same map() again with client= an open client (or without client= "
                 "to run the rows here)") if new_client else "run the same map() again"  # fmt: skip
        if self.journal.path is None:
            return (f"nothing is kept past this batch (journal=None): {again} to run every "
                    "row")  # fmt: skip
        return (f"the finished rows are kept in the journal {self.journal.path}; {again} to "
                "resume: only the rows not finished run")  # fmt: skip

    def _interrupted_line(self) -> str:
        """What Ctrl-C stopped, and how to resume it."""
        how = self._how_to_resume(new_client=False)
        if self.journal.path is None:
            how += ", or read this one's rows from `except mnb.BatchInterrupted as e: e.batch`"
        return (
            f"map of {self.capability} interrupted (Ctrl-C): {self._finished_line()} "
            f"(cancelled or not started); {how}"
        )

    def _closed_line(self) -> str:
        """What a Dask client (or cluster) that closed mid-batch left, and how to resume."""
        return (
            f"the Dask client (or its cluster) closed while map of {self.capability} ran "
            f"on it: {self._finished_line()} (worker_lost: the rows that were on the "
            f"cluster; host_error: those not started); {self._how_to_resume()}"
        )

    def _interrupted(self) -> None:
        """Ctrl-C: start nothing more, cancel the running rows and keep them as they end."""
        with self._wake:
            self._stop("cancelled", "interrupted (Ctrl-C) before this row started")
            self._cancel.set()
            self._status = "interrupted"
            self._wake.notify_all()
        with self.journal.grouped():
            if self._dask is not None:
                self._drain(self._dask)
            else:
                if self._local is not None:
                    self._local.wait()
                self._leave_unstarted()

    # -- on this machine: worker threads that take and settle their own rows ---------------

    def _pull(self) -> None:
        """Run the rows on ``concurrency`` worker threads and wait for them, committing the
        journal's group of settled rows as it comes due (:data:`~.journal.GROUP_S`)."""
        source = RowSource(
            lock=self._wake, take=self._take, run=self._run_row, finish=self._finished,
            fail=self._host_failed, exiting=self._exiting, tick=self.journal.commit_due,
            waiting=lambda: self._takers > 0,
        )  # fmt: skip
        grow_to = SHORT_ROWS_PER_CORE * usable_cores() if self.grow else None
        self._local = LocalRunner(source, self.concurrency, grow_to=grow_to)
        self._local.start(len(self._pending))
        self._local.wait()
        self._leave_unstarted()
        if self._failure is not None:
            raise self._failure

    def _run_row(self, row: int, attempt: int) -> dict[str, Any]:
        with self._wake:
            now = time.monotonic()
            look = self._saw_change or now - self._looked >= LOOK_EVERY_S
            if look:
                self._looked = now
        record = run_row(self.host, self.plan, json.loads(self._texts[row]), attempt,
                         cancel=self._cancel, options=self.options, look=look)  # fmt: skip
        if (record.get("error") or {}).get("code") == MODULE_CHANGED:
            self._saw_change = True  # every later row looks (and is refused, audited)
        return record

    def _host_failed(self, row: int | None, exc: BaseException) -> None:
        """The host's own failure stopped a worker (a journal that cannot be written): the
        batch stops, the row it held is not run, and the caller of ``map`` gets the error."""
        self._failure = self._failure or exc
        why = f"the batch stopped on the host's error: {type(exc).__name__}: {exc}"
        self._stop("host_error", why)
        if row is not None:
            self._running.pop(row, None)
            if self._state[row] == RUNNING:
                self._settle(row, not_run_record("host_error", why))

    def _exiting(self) -> None:
        self._stop("cancelled", _EXITING)
        self._cancel.set()

    def _take(self) -> Taken | None:
        """The next row to run, marked running (lock held); waits while the only rows left
        are retries not yet due, or while ``max_cost`` waits for a running row's cost.
        ``None``: nothing is left for this worker (all taken, or the batch stopped)."""
        while True:
            if self._cancel.is_set():
                self._stop("cancelled", "the batch was cancelled before this row started")
            if self._stop_reason is not None:
                return None
            now = time.monotonic()
            retry = bool(self._delayed and self._delayed[0][0] <= now)
            wait = TICK_S
            if retry or self._pending:
                if self._cost_allows():
                    return self._start(retry)
                if self._stop_reason is not None:
                    return None
            elif self._delayed:  # retries not due yet
                wait = min(wait, self._delayed[0][0] - now)
            elif not self._running:
                return None
            # else a running row may still fail into a retry, or give max_cost its cost
            self._takers += 1
            try:
                self._wake.wait(max(wait, 0.0))
            finally:
                self._takers -= 1

    def _start(self, retry: bool) -> Taken:
        if retry:
            _, row, attempt = heapq.heappop(self._delayed)
        else:
            row, attempt = self._pending.pop(), 1
        self._running[row] = attempt
        self._move(row, RUNNING)
        return row, attempt

    # -- on Dask: this thread hands rows out and settles what comes back --------------------

    def _drive(self, runner: DaskRunner) -> None:
        closed_at: float | None = None  # when the client was seen closed
        while True:
            self._launch(runner)
            runner.flush()
            if not self._running and (self._stop_reason or not (self._pending or self._delayed)):
                break
            self._settle_completed(runner)
            if runner.closed:
                closed_at = closed_at or time.monotonic()
                self._stop("host_error", _CLOSED_UNSTARTED)
                if time.monotonic() - closed_at > CLOSED_GRACE_S:
                    self._lose_running()
        self._leave_unstarted()
        if closed_at is not None:
            raise ModuleHostError(self._closed_line(), code=CLUSTER_CLOSED)

    def _lose_running(self) -> None:
        """The rows still out once a closed client's futures had :data:`CLOSED_GRACE_S` to
        come back (Dask cancels them as it closes): ``worker_lost``, their outcome gone."""
        for row in list(self._running):
            self._running.pop(row)
            self._settle(row, not_run_record("worker_lost", _CLOSED_LOST))

    def _settle_completed(self, runner: DaskRunner) -> None:
        """Settle every row finished since the last look (waiting up to 50 ms for one), all
        before new rows start: rows start in rounds, not one by one. They wait in
        ``_inbox`` until settled, so a Ctrl-C while they are gathered loses none."""
        try:
            self._inbox.append(self._done.get(timeout=0.05))
            while True:
                self._inbox.append(self._done.get_nowait())
        except queue.Empty:
            pass
        if not self._inbox:
            return
        while self._inbox:
            row, attempt, fut = self._inbox.popleft()
            if self._running.get(row) == attempt:  # not one already given up as lost
                self._finished(row, attempt, runner.collect(fut))
        self.journal.commit_due()

    def _drain(self, runner: DaskRunner) -> None:
        """After Ctrl-C: let the running rows end (they are being cancelled), keep them."""
        runner.cancel_running()
        while self._running:
            self._settle_completed(runner)
        self._leave_unstarted()

    def _leave_unstarted(self) -> None:
        """Settle the rows not started: ``not_run`` with the stop's reason; a row whose retry
        was not started keeps its last failure (it ran, and spent what it reported)."""
        code, why = self._stop_reason or ("cancelled", "not started")
        rows = list(self._pending) + [r for _, r, _ in self._delayed]
        self._pending, self._delayed = [], []
        for row in rows:
            last = self._retrying.pop(row) if row in self._retrying else None
            self._settle(row, last or not_run_record(code, why))

    def _launch(self, runner: DaskRunner) -> None:
        """Hand out the rows that may start now; once the module changed, each of them is
        ``module_changed`` instead (looked at once per round, before its first row)."""
        if self._cancel.is_set():
            self._stop("cancelled", "the batch was cancelled before this row started")
        changed: str | None = None
        looked = False
        while not self._stop_reason and len(self._running) < runner.limit():
            retry = bool(self._delayed and self._delayed[0][0] <= time.monotonic())
            if not (retry or self._pending) or not self._cost_allows():
                return
            if not looked:
                changed, looked = module_change(self.plan), True
            row, attempt = self._start(retry)
            if changed is None:
                self._start_row(runner, row, attempt)
            else:
                self._finished(row, attempt, not_run_record(MODULE_CHANGED, changed))

    def _start_row(self, runner: DaskRunner, row: int, attempt: int) -> None:
        fut = runner.submit(json.loads(self._texts[row]), attempt)

        def done(f: Any, r: int = row, a: int = attempt) -> None:
            self._done.put((r, a, f))

        fut.add_done_callback(done)

    def _cost_allows(self) -> bool:
        if self.max_cost is None:
            return True
        each = self._largest_cost
        if self._cost_unknown:
            self._stop("cost_unknown", "a finished row's cost is unknown, so max_cost cannot "
                       "be kept; this row was not started")  # fmt: skip
            return False
        if each is None:
            return not self._running  # one probe at a time until a cost is known
        if self._cost + each * (len(self._running) + 1) > self.max_cost:
            if not self._running:
                self._stop(
                    "max_cost",
                    f"starting this row could pass max_cost={self.max_cost:g} "
                    f"(spent {self._cost:g}, about {each:g} per row); not started",
                )
            return False
        return True

    def _stop(self, code: str, why: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = (code, why)

    def _finished(self, row: int, attempt: int, record: dict[str, Any]) -> None:
        """A row's outcome: its cost counted, then settled, or (a retryable failure with
        retries left) delayed."""
        self._running.pop(row, None)
        status = record["status"]
        if status in (OK, FAILED):
            self._spend(row, record)
        error = record.get("error") or {}
        if (
            status == FAILED
            and error.get("retryable")
            and attempt <= self.retries
            and not self._cancel.is_set()
        ):
            wait = min(_MAX_BACKOFF, self.backoff * 2 ** (attempt - 1))
            heapq.heappush(self._delayed, (time.monotonic() + wait, row, attempt + 1))
            self._retrying[row] = record
            self._move(row, PENDING)
            return
        self._retrying.pop(row, None)  # a retry that settled
        self._run_here += 1
        self._settle(row, record)

    def _settle(self, row: int, record: dict[str, Any]) -> None:
        status = record["status"]
        if status in (OK, FAILED):
            spent = self._spent.pop(row, None) if status == OK else self._spent.get(row)
            text = compact_json(record).decode()
            self.journal.write(self._jkey, self._keys[row], status, text, spent)
        for i in [row, *self._twins.get(row, [])]:
            self._move(i, status)
            if status == NOT_RUN:
                self._unrun[i] = record
        self._notify()

    def _move(self, row: int, status: str) -> None:
        """Set one row's status, keeping the counts."""
        self._counts[self._state[row]] -= 1
        self._counts[status] += 1
        self._state[row] = status

    def _spend(self, row: int, record: dict[str, Any]) -> None:
        """Count one finished attempt's cost, and add it to what its row spent."""
        execution = record.get("execution") or {}
        actual, estimate = execution.get("actual_cost"), execution.get("estimated_cost")
        before = self._spent.get(row, 0.0)
        self._spent[row] = None if actual is None or before is None else before + float(actual)
        self._count_spent(actual, estimate)

    def _count_spent(self, actual: float | None, estimate: float | None) -> None:
        """Count a cost against ``max_cost`` (``None``: unknown, never free), and learn the
        largest cost a row may have when the caller gave no estimate."""
        if actual is None:
            self._cost_unknown += 1
        else:
            self._cost += float(actual)
        seen = [float(c) for c in (actual, estimate) if c is not None]
        if seen and self.estimated_cost is None:
            self._largest_cost = max([*seen, self._largest_cost or 0.0])

    # -- control -----------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop starting rows and cancel the running ones (on Dask they finish and are kept);
        finished rows are kept."""
        with self._wake:
            self._cancel.set()
            self._wake.notify_all()
        if self._dask is not None:
            self._dask.cancel_running()

    def wait(self, timeout: float | None = None) -> Batch:
        """Wait for a background batch to settle; return it. Raises what stopped it, if the
        host itself failed (a journal that cannot be written, a listener that raised, a Dask
        client that closed: ``ModuleHostError`` with code ``cluster_closed``): the batch is
        ``stopped`` and the rows it had not started are ``not_run`` with the code
        ``host_error``."""
        # an Event, not Thread.join: on Python 3.11 a join that Ctrl-C interrupts marks the
        # thread as ended, and every later wait() would return at once, the batch running
        if self._thread is not None and self._ended.wait(timeout) and self._failure:
            raise self._failure
        return self

    def close(self) -> None:
        """Cancel a running batch and wait for it to settle, then close its journal (an
        in-memory journal's rows go with it). Idempotent; ``with host.map(...) as batch:``
        closes it at the end of the block."""
        if not self.done:
            self.cancel()
            if self._thread is not None:
                self._ended.wait()
        self.journal.close()

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def retry_failed(self, *, background: bool = False) -> Batch:
        """Run again only the rows that failed (their journal entries are replaced); an input
        that failed in several rows runs once, and its outcome fills them all. Refused
        (``journal_busy``) while this batch, or another, runs them."""
        try:  # one block from the hold on: a Ctrl-C anywhere in it lets go (_abandon)
            self._take_hold()
            self._begin(self._failed_to_run(), background)
        except BatchInterrupted as exc:  # shown from here, not from the batch's inner steps
            raise exc.with_traceback(None) from None
        except BaseException as exc:
            self._abandon(exc)
            raise
        return self

    def _failed_to_run(self) -> list[int]:
        """The failed rows to run again, the first of each input (the others its twins)."""
        twins = {t for ts in self._twins.values() for t in ts}
        todo: list[int] = []
        first: dict[str, int] = {}
        for i, status in enumerate(self._state):
            if status != FAILED or i in twins:
                continue
            self._from_journal -= self._journaled[i]
            self._journaled[i] = 0
            key = self._keys[i]
            if key in first:  # the same input failed twice (both from the journal): run once
                self._twins.setdefault(first[key], []).append(i)
            else:
                first[key] = i
                todo.append(i)
        return todo

    def on_change(self, listener: Callable[[BatchProgress], None]) -> None:
        """Call ``listener(progress)`` as rows settle: from the thread that settled the row,
        never two at once, while no row can move (its counts match the rows' states)."""
        self._listeners.append(listener)

    def _notify(self, *, force: bool = False) -> None:
        if not self._listeners:
            return
        snap = self.progress
        for listener in list(self._listeners):
            listener(snap)

    @property
    def progress(self) -> BatchProgress:
        """The batch's counts, cost and timing right now."""
        counts = self._counts
        return BatchProgress(
            total=len(self._state), ok=counts[OK], failed=counts[FAILED],
            running=counts[RUNNING], not_run=counts[NOT_RUN],
            from_journal=self._from_journal, cost=self._cost,
            cost_unknown=self._cost_unknown, elapsed_s=time.monotonic() - self._t0,
            state=self._status, run_here=self._run_here,
        )  # fmt: skip

    @property
    def done(self) -> bool:
        return self._status != "running"

    # -- reading -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._state)

    def status(self, i: int) -> str:
        """``pending``, ``running``, ``ok``, ``failed`` or ``not_run``."""
        return self._state[i]

    def from_journal(self, i: int) -> bool:
        """Whether row ``i``'s outcome was read from the journal (a resumed batch), not run
        by this one."""
        return bool(self._journaled[i])

    def record(self, i: int) -> dict[str, Any] | None:
        """Row ``i``'s record (plain JSON), or ``None`` while it has none yet."""
        return next(self._records(range(i, i + 1)))

    def _records(self, rows: range) -> Iterator[dict[str, Any] | None]:
        """Each of ``rows``' records (``None``: none yet), the journal read
        :data:`~.journal.READ_CHUNK` rows per query."""
        from murmur_nb._batch.journal import READ_CHUNK  # noqa: PLC0415 - sqlite3 lazily

        for start in range(rows.start, rows.stop, READ_CHUNK):
            chunk = range(start, min(start + READ_CHUNK, rows.stop))
            keys = [self._keys[i] for i in chunk
                    if self._state[i] in (OK, FAILED) and i not in self._unrun]  # fmt: skip
            texts = self.journal.records(self._jkey, keys) if keys else {}
            for i in chunk:
                if i in self._unrun:
                    yield self._unrun[i]
                elif self._state[i] not in (OK, FAILED):
                    yield None
                elif (text := texts.get(self._keys[i])) is None:
                    # its entry was changed (or removed) after the batch settled it
                    yield not_run_record("journal_changed", _JOURNAL_CHANGED)
                else:
                    yield dict(json.loads(text))

    def __getitem__(self, i: int) -> Invocation:
        """Row ``i`` (position, as ``iloc``) as an :class:`~murmur_nb.Invocation`;
        ``mnb.render(batch[i])`` renders its artifacts."""
        if isinstance(i, bool) or not hasattr(i, "__index__"):
            labels = "" if self.inputs.index is None else (
                f"; for the row labelled {i!r} in the DataFrame's index, take its position "
                f"(batch[list(df.index).index({i!r})]) or its outcome from "
                f"batch.to_pandas().loc[{i!r}]")  # fmt: skip
            raise TypeError(
                f"batch rows are taken by position (0 to {len(self) - 1}, as with iloc), not "
                f"by a {type(i).__name__} ({i!r}){labels}"
            )
        i = operator.index(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"batch row {i} out of range (the batch has {len(self)} rows)")
        i %= len(self)
        record = self.record(i)
        if record is None:
            raise LookupError(f"batch row {i} has no outcome yet (it is {self._state[i]})")
        return self._invocation(i, record)

    def _invocation(self, i: int, record: dict[str, Any]) -> Invocation:
        return invocation_of(record, self.capability, self.plan.module,
                             json.loads(self._texts[i]), self.host.store.root)  # fmt: skip

    def __iter__(self) -> Iterator[Invocation]:
        for i, record in enumerate(self._records(range(len(self)))):
            if record is not None:
                yield self._invocation(i, record)

    def to_pandas(self) -> Any:
        """One row per input, in input order; see :mod:`murmur_nb._batch.frame`. The journal
        is read :data:`~.journal.READ_CHUNK` rows per query."""
        from murmur_nb._batch.frame import batch_frame  # noqa: PLC0415 - pandas when asked

        rows = (
            (self._state[i], record, bool(self._journaled[i]))
            for i, record in enumerate(self._records(range(len(self))))
        )
        return batch_frame(self.inputs, self._texts, self.plan.flat_result, rows)

    def grid(self, limit: int = 60) -> Any:
        """Every row's image artifacts side by side (one ``image_grid``), first ``limit``."""
        from murmur_nb._batch.frame import batch_grid  # noqa: PLC0415

        with_files = (
            self._invocation(i, record)
            for i, record in enumerate(self._records(range(len(self))))
            if record and any(a.get("file") for a in record.get("artifacts") or [])
        )
        first = self[0] if len(self) and self.record(0) else None
        return batch_grid(with_files, first, module=self.plan.module,
                          capability=self.capability, store_root=self.host.store.root,
                          limit=limit)  # fmt: skip

    def __repr__(self) -> str:
        return f"Batch {self.capability}: {self.progress.line()}"


def _checked(
    host: ModuleHost, plan: Plan, rows: Inputs, on_invalid: str
) -> tuple[list[str], dict[int, str]]:
    """Each row's canonical text; the invalid rows and why (or one refusal of them all)."""
    texts: list[str] = []
    invalid: dict[int, str] = {}
    cells = rows.frame is not None
    for i, value in enumerate(rows.values):
        problem: str | None
        try:
            text = canonical(value, cells=cells, integers=plan.integer_inputs)
            text.encode()  # JSON text may hold a lone surrogate, which UTF-8 cannot
        except RowProblem as exc:
            text, problem = json.dumps(reprlib.repr(value)), str(exc)
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            problem = (f"input is not strict UTF-8 JSON: it holds {bad!r}, a lone surrogate; "
                       "decode bytes with errors='replace' first")  # fmt: skip
            text = json.dumps(reprlib.repr(value))
        except (TypeError, ValueError) as exc:
            text, problem = json.dumps(reprlib.repr(value)), f"input is not JSON: {exc}"
        else:
            problem = input_problem(host, plan, json.loads(text))
        texts.append(text)
        if problem is not None:
            invalid[i] = problem
    if invalid and on_invalid == "raise":
        labels = list(rows.index) if rows.index is not None else list(range(len(texts)))
        listed = "; ".join(f"row {labels[i]!r}: {why}" for i, why in list(invalid.items())[:20])
        more = f" (+{len(invalid) - 20} more)" if len(invalid) > 20 else ""
        raise InvalidInput(
            f"{len(invalid)} of {len(texts)} inputs for {plan.capability} do not match its "
            f"request schema, and nothing was run: {listed}{more}. Fix them, or pass "
            "on_invalid='skip' to run the others and keep these as invalid_input rows"
        )
    return texts, invalid


_EXITING = "the Python interpreter exited before this row started"
#: the error code of a batch whose Dask client (or cluster) closed mid-run
CLUSTER_CLOSED = "cluster_closed"
#: how long the futures of a closed client may take to come back (cancelled) before the
#: rows still out are given up as lost
CLOSED_GRACE_S = 10.0
_CLOSED_UNSTARTED = "the Dask client (or its cluster) closed before this row started"
_CLOSED_LOST = ("the Dask client (or its cluster) closed while this row was on the cluster, "
                "and its outcome never came back")  # fmt: skip
_JOURNAL_CHANGED = (
    "this row's journal entry was changed or removed outside murmur-nb after the batch "
    "settled it (it no longer carries its seal), so its outcome is not reported; run map() "
    "again to run it again"
)


def stop_background_batches() -> None:
    """Cancel every running background batch and wait (up to :data:`EXIT_WAIT_S` each) for its
    rows to settle: running processes end, finished rows stay journaled, the rest are not run.

    Runs as the interpreter exits (threading's exit hooks, before its threads are joined): a
    batch's threads are daemon threads, which would otherwise be stopped where they stand,
    their modules still running and their settled rows not yet committed.
    """
    for batch in list(_background):
        if batch._thread is None or batch._ended.is_set():
            continue
        with batch._wake:
            batch._stop("cancelled", _EXITING)
        batch.cancel()
        batch._ended.wait(EXIT_WAIT_S)


getattr(threading, "_register_atexit", atexit.register)(stop_background_batches)
