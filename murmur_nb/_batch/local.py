"""One row on this machine: one run of the batch's prepared call (or a start and its polls).

Each row runs the :class:`~murmur_nb.PreparedCall` the batch made once (resolved, approved,
its input already checked when the batch started), from a worker thread, audited like any
call. The batch's own look at the live module is the run's ``if_unchanged=True``: a module
that no longer hashes to what the batch was approved for, or no longer resolves at all, is
not run (``module_changed``); what runs is the prepared snapshot, so nothing of a new code
runs either way. The batch asks a row to look (``look=True``) at most every
:data:`LOOK_EVERY_S` across its threads, and every row once one look saw a change: the look is
a ``stat`` walk of the module's folder, about an eighth of the host's CPU per row when every
row looked, and a row that starts between two looks runs the approved snapshot as any row
does. Artifacts are staged as the row finishes, in parallel.

:class:`LocalRunner` runs the rows on ``concurrency`` worker threads, each of which takes
the next row, runs it and settles it itself (no hand-off through a coordinating thread per
row: 10-15% less host CPU per row). It is handed what it needs of the batch as a
:class:`RowSource` (the batch's lock, and how to take, run, settle and give up a row), never
the batch itself: which row runs next, retries, ``max_cost`` and the journal stay the
batch's.
"""

from __future__ import annotations

import math
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from murmur_nb._batch.longrun import run_long
from murmur_nb._batch.plan import Plan
from murmur_nb._batch.record import error_record, invocation_record, not_run_record
from murmur_nb._exceptions import InvocationCancelled, ModuleHostError
from murmur_nb._modules.call import MODULE_CHANGED

if TYPE_CHECKING:
    from murmur_nb._modules.host import Invocation, ModuleHost

__all__ = [
    "LOOK_EVERY_S",
    "ROWS_PER_CORE",
    "SHORT_ROWS_PER_CORE",
    "SHORT_ROW_S",
    "SHORT_SAMPLES_PER_WORKER",
    "RUN_OPTIONS",
    "LocalRunner",
    "RowSource",
    "rows_are_short",
    "run_row",
    "staged_artifacts",
]

#: How often a batch's rows look at the live module (``if_unchanged=True``), at most: the
#: rows started in between run the approved snapshot without looking
LOOK_EVERY_S = 0.1
#: How often a waiting thread looks again (Ctrl-C, a retry falling due, the journal's group)
TICK_S = 0.1

#: rows in flight per usable core: one in its sandboxed process, one in the host's Python part
ROWS_PER_CORE = 2
#: what a default local batch grows to once its rows prove short (:data:`SHORT_ROW_S`): a
#: row's process start and end leave a core idle for a moment, which for rows of a few
#: milliseconds is a tenth of the time (12 paired 1,000-row maps of a trivial module on 2
#: cores: 8 at once took 9 % less time than 4 in the median, and 7 % less kernel CPU a row)
SHORT_ROWS_PER_CORE = 4
#: a row this short or shorter (the median of the first rows' runs) is a short row
SHORT_ROW_S = 0.1
#: how many rows' runs a batch times before it decides, per worker it started with
SHORT_SAMPLES_PER_WORKER = 4


def staged_artifacts(host: ModuleHost, inv: Any) -> list[dict[str, Any]]:
    """Each verified artifact of ``inv`` copied into the host's store, as record entries."""
    out = []
    for artifact in inv.artifacts:
        staged = host.stage(artifact)
        entry = artifact.model_dump(mode="json")
        entry.update(root="staged", path=staged.path, file=str(staged.file))
        out.append(entry)
    return out


#: the batch options a row's run takes (``approve`` was decided when the call was prepared)
RUN_OPTIONS = ("deadline_ms", "max_output_bytes", "extra")


def run_row(
    host: ModuleHost,
    plan: Plan,
    value: Any,
    attempt: int,
    *,
    cancel: threading.Event,
    options: dict[str, Any],
    look: bool = True,
) -> dict[str, Any]:
    """Run one row; return its record (``ok``, ``failed`` or ``not_run``). Never raises for
    a row's own failure; a bug of the host surfaces as a ``host_error`` row, not run.
    ``look``: first look at the live module (``module_changed`` when it changed); a
    long-running capability's polls always look."""
    prepared, poll = plan.prepared, plan.poll_prepared
    run_options = {k: options[k] for k in RUN_OPTIONS if k in options}

    def invoke(capability: str, request: Any) -> Invocation:
        # the row's input was checked when the batch started (strict JSON, its canonical
        # text parsed again, and the schema); a poll's request was not
        call = prepared if capability == plan.capability else poll
        assert call is not None, "a batch runs only once its call is prepared"
        # ahead=False: the rows keep every core busy, a sandbox made ahead would only move
        # the same work to another thread (and cost the host about 0.15 ms of CPU a row)
        return call.run(request, cancel=cancel, if_unchanged=look or call is not prepared,
                        checked=call is prepared, ahead=False, **run_options)  # fmt: skip

    try:
        if plan.poll is not None:
            inv = run_long(invoke, plan.capability, value, plan.poll, cancel=cancel)
        else:
            inv = invoke(plan.capability, value)
        return invocation_record(inv, staged_artifacts(host, inv), attempt)
    except InvocationCancelled as exc:
        return not_run_record("cancelled", exc.message or "cancelled")
    except ModuleHostError as exc:
        if exc.code == MODULE_CHANGED:
            return not_run_record(MODULE_CHANGED, exc.message)
        return error_record(exc, attempt)
    except Exception as exc:
        return not_run_record("host_error", f"{type(exc).__name__}: {exc}")


#: a row taken to run: its position and its attempt (1 for the first)
Taken = tuple[int, int]


@dataclass(frozen=True)
class RowSource:
    """What the worker threads need of the batch that drives them, and nothing more."""

    #: held while a row is taken, settled or given up; notified whenever one settles
    lock: threading.Condition
    #: the next row to run, marked running (lock held); ``None``: nothing left for a worker
    take: Callable[[], Taken | None]
    #: one row's run, its record (lock not held); a row's own failure is a record
    run: Callable[[int, int], dict[str, Any]]
    #: a row's record, to settle or to retry (lock held)
    finish: Callable[[int, int, dict[str, Any]], None]
    #: the host failed while a worker held ``row`` (or none): stop the batch (lock held)
    fail: Callable[[int | None, BaseException], None]
    #: no thread could be started: the interpreter is exiting (lock held)
    exiting: Callable[[], None]
    #: looked at every :data:`TICK_S` by the waiting thread and after each row (the
    #: journal's group commit)
    tick: Callable[[], None]
    #: whether a worker waits in ``take`` for a row to settle (a retry, ``max_cost``; lock
    #: held): a settled row wakes the waiting threads only then
    waiting: Callable[[], bool]


def _shutting_down(exc: RuntimeError) -> bool:
    """Whether a thread was refused because the interpreter is exiting ("can't create new
    thread at interpreter shutdown"), not by the system ("can't start new thread": a
    process or thread limit)."""
    return sys.is_finalizing() or "shutdown" in str(exc)


def rows_are_short(runs: list[float]) -> bool:
    """Whether rows whose runs took ``runs`` seconds are short: their median is at most
    :data:`SHORT_ROW_S` (the rule of a default batch, here and on Dask)."""
    return statistics.median(runs) <= SHORT_ROW_S


class LocalRunner:
    """Rows on ``concurrency`` worker threads of this process; see the module's text.

    ``grow_to``: more workers, up to this many, once the median run of the first rows to
    start (:data:`SHORT_SAMPLES_PER_WORKER` per worker) took at most :data:`SHORT_ROW_S`; the batch
    passes it only for its default concurrency (:data:`SHORT_ROWS_PER_CORE`), never over a
    number the caller gave.
    """

    def __init__(self, rows: RowSource, concurrency: int, grow_to: int | None = None) -> None:
        self.rows, self.concurrency = rows, concurrency
        self._live = 0  # worker threads still running
        self._threads: list[threading.Thread] = []
        self._grow_to = grow_to if grow_to is not None and grow_to > concurrency else None
        #: the runs the batch decides on: how many, when each began, each one's time once
        #: it ended (by index: :meth:`_sample`)
        self._samples = SHORT_SAMPLES_PER_WORKER * concurrency
        self._began: list[float] = []
        self._runs: dict[int, float] = {}

    def start(self, n_rows: int) -> None:
        """Start the workers (no more than there are rows to run)."""
        self._add(min(self.concurrency, n_rows))

    def _add(self, count: int) -> None:
        lock = self.rows.lock
        for _ in range(count):
            i = len(self._threads)
            worker = threading.Thread(target=self._work, name=f"murmur-batch_{i}", daemon=True)
            self._threads.append(worker)
            with lock:
                self._live += 1
            try:
                worker.start()
            except RuntimeError as exc:
                with lock:
                    self._live -= 1
                    self._threads.pop()
                    if _shutting_down(exc):
                        self.rows.exiting()
                    elif not self._live:  # no worker at all: the batch cannot run here
                        self.rows.fail(None, exc)
                    # else the system gave no more threads (a container's limit): the
                    # workers there are run the rows
                    lock.notify_all()
                break

    def wait(self) -> None:
        """Until every worker has ended; Ctrl-C reaches this thread between waits. (Not
        ``Thread.join``: on Python 3.11 a join that Ctrl-C interrupts marks the thread as
        ended while it still runs, and the next join returns at once.) The count of live
        workers answers at once; their threads are looked at too, in case a Ctrl-C came
        between counting a worker and starting it."""
        lock = self.rows.lock
        while True:
            with lock:
                if not self._live or not any(t.is_alive() for t in self._threads):
                    return
                lock.wait(TICK_S)
            self.rows.tick()

    def _work(self) -> None:
        """One worker thread: take a row, run it, settle it, until none is left to take. A
        failure of the host's own (a journal that cannot be written) stops the batch."""
        rows, lock = self.rows, self.rows.lock
        held: int | None = None  # the row this worker has taken and not yet settled
        try:
            while True:
                with lock:
                    taken = rows.take()
                    if taken is None:
                        lock.notify_all()  # the others look again (a stop, the last row)
                        return
                    row, attempt = taken
                    held = row
                    began = time.monotonic()
                    sample = self._sample(began)
                record = rows.run(row, attempt)
                took = time.monotonic() - began
                with lock:
                    rows.finish(row, attempt, record)
                    held = None
                    if sample is not None:
                        self._runs[sample] = took
                    if self._grow_to is not None:
                        self._maybe_grow()
                    # not for the thread in wait(): it looks every TICK_S, and a worker's
                    # end wakes it (a wake-up per row cost the host about 6% of its CPU)
                    if rows.waiting():
                        lock.notify_all()
                rows.tick()
        except BaseException as exc:
            with lock:
                rows.fail(held, exc)
        finally:
            with lock:
                self._live -= 1
                lock.notify_all()

    def _sample(self, began: float) -> int | None:
        """The index of a run that starts at ``began`` among the runs the batch decides on,
        the first :data:`SHORT_SAMPLES_PER_WORKER` per worker to start; ``None`` past them
        or once decided (lock held)."""
        if self._grow_to is None or len(self._began) >= self._samples:
            return None
        self._began.append(began)
        return len(self._began) - 1

    def _maybe_grow(self) -> None:
        """Once each of the first runs to start (:meth:`_sample`) has ended or run longer
        than :data:`SHORT_ROW_S`, start the workers up to ``grow_to`` if the rows are short
        (lock held; one that finds no row left ends at once). Decided once per batch.

        The runs are the first to *start*, not the first to end: short ones end first, so
        the first to end were the short ones of a batch whose rows are mostly long (each
        worker held up by a long row let the others' short rows be counted in its place).
        A run still going counts as longer than any (``inf``)."""
        if len(self._began) < self._samples:
            return
        now = time.monotonic()
        runs = [self._runs.get(i, math.inf) for i in range(self._samples)]
        if any(r == math.inf and now - b <= SHORT_ROW_S for r, b in zip(runs, self._began,
                                                                       strict=True)):  # fmt: skip
            return  # one of them is still short enough to be either
        grow_to, self._grow_to = self._grow_to, None
        if grow_to is not None and rows_are_short(runs):
            self._add(grow_to - len(self._threads))
