"""A run that does not freeze the notebook: elapsed time, Cancel, then the result; auto-poll.

The invocation runs in a worker thread, so the kernel handles Cancel and Stop. Cancel sets the
:class:`threading.Event` passed as ``host.invoke(cancel=...)``: the runner kills the module's
process tree as at a deadline, and the widget never knows a pid. A second thread ticks the
elapsed time. A long-running capability is polled every ``interval`` seconds with the keys
:func:`murmur_nb._modules.request.poll_request` picks, until
:func:`~murmur_nb._modules.request.poll_finished`, a failure or Stop; ``done``/``total`` drive
the bar. :meth:`wait` joins the worker. ``text/plain`` never holds a time.

The end is drawn, then signalled: the worker draws the final status before it sets what
:meth:`wait` waits on, so code that waits and then reads the widget reads the end (it read
``running`` in 32 of 50 runs when threads switched often). The clock's draws and the
worker's are one at a time (``_drawing``): a tick that read the state before the end cannot
write it over the final status.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as w
from IPython import get_ipython
from IPython.display import display

from murmur_nb._exceptions import InvocationCancelled, ModuleHostError
from murmur_nb._modules.request import poll_finished, poll_request
from murmur_nb._render.card import evidence_html, problems_of, said
from murmur_nb._rules import clipped
from murmur_nb.widgets._html import TextView, badge, close_tree, esc, progress_of, volatile
from murmur_nb.widgets._invocation_view import InvocationView

__all__ = ["LiveRun"]

_TICK = 0.25


def poll_input(host: Any, poll_id: str, result: Any) -> dict[str, Any]:
    """The poll capability's request: the result's keys its request schema names."""
    descriptor, cap = host.capability(poll_id)
    return poll_request((descriptor.request_schemas or {}).get(cap.request_schema), result)


def _state_of(inv: Any) -> str:
    """``ok``, ``warning`` (``Invocation.problems``) or ``failed``."""
    if not inv.ok:
        return "failed"
    return "warning" if problems_of(inv) else "ok"


def _failed_or_refused(exc: BaseException) -> str:
    """``failed`` when the module ran (the host error holds its record: a crash, a broken
    envelope, a deadline), ``refused`` when the host stopped the call before it ran."""
    return "failed" if getattr(exc, "invocation", None) is not None else "refused"


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def _shown_once(run: LiveRun, handle: Any, inv: Any) -> None:
    """When the cell's value is ``inv`` itself (``host.invoke(..., progress=LiveRun.in_cell)``
    as its last line), IPython draws it as the cell's result: the live card then keeps its
    status line and drops its copy of the result, so the result is shown once. Assigned
    (``report = host.invoke(...)``), the card keeps the result: it is the only one shown.
    Known only once the cell ran, so it is done in IPython's ``post_run_cell``."""
    shell = get_ipython()
    if shell is None or handle is None:
        return

    def after(result: Any) -> None:
        shell.events.unregister("post_run_cell", after)
        if getattr(result, "result", None) is inv:
            run.view = None
            run.result_box.children = ()
            run.progress_row.layout.display = "none"
            handle.update(run)

    shell.events.register("post_run_cell", after)


class LiveRun(TextView):
    """Run one capability in the background and show it live.

    Parameters
    ----------
    host : ModuleHost
    capability_id : str
    input : Any
        The request input.
    staged : sequence of StagedArtifact
    approve : bool
        Operator approval for this call (``host.invoke(approve=...)``).
    poll : bool
        Poll a long-running capability's job automatically (default).
    interval : float
        Seconds between polls; the ``interval_input`` shows it and can change it.
    start : bool
        Start at once (default); otherwise call :meth:`start`. A run cancelled before it
        started never starts: :meth:`start` then does nothing.
    on_done : callable, optional
        Called with this object in the worker thread when everything ended (by
        :meth:`cancel` itself for a run cancelled before it started).
    capability : Capability, optional
        The capability's declaration when the caller holds it (a form does): whether to
        poll is read from it, instead of a ``describe`` after the run.

    Attributes
    ----------
    state : str
        ``ready``, ``running``, ``polling``, ``ok``, ``warning`` (a result that breaks its
        ``result_schema``), ``failed`` (the module ran and said not ok, crashed, broke its
        envelope or ran out of time: the error box shows its exit status and stderr tail),
        ``refused`` (the host stopped the call before anything ran), ``cancelled`` (also
        before it started: then nothing ran) or ``stopped`` (polling stopped: the job
        may still run).
    invocation
        The first invocation (the run itself), or ``None``.
    last
        The last invocation (the last poll, or the run).
    polls : int
        Poll calls made.
    error : ModuleHostError or None
        What the host raised: its message whole (the display cuts it at 2,000 characters,
        as every display of a module's words, :func:`~murmur_nb._render.card.said`).
    cancel_button, stop_button : ipywidgets.Button
    interval_input : ipywidgets.BoundedFloatText
    progress : ipywidgets.IntProgress
        Shown when a result carries ``done``/``total``.
    view : InvocationView or None
        The view of :attr:`last`.
    """

    def __init__(
        self,
        host: Any,
        capability_id: str,
        input: Any = None,
        *,
        staged: Sequence[Any] = (),
        approve: bool = False,
        poll: bool = True,
        interval: float = 1.0,
        start: bool = True,
        on_done: Callable[[LiveRun], None] | None = None,
        capability: Any = None,
    ) -> None:
        self.host = host
        self._declared = capability  # the capability's declaration, when the caller has it
        self.capability_id = capability_id
        self.input = input
        self.staged = list(staged)
        self.approve = approve
        self.auto_poll = poll
        self.on_done = on_done
        self.state = "ready"
        self.invocation: Any = None
        self.last: Any = None
        self.polls = 0
        self.error: ModuleHostError | None = None
        self.view: InvocationView | None = None
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._worker: threading.Thread | None = None
        self._launch = threading.Lock()  # start and a cancel before it: one of them wins
        self._drawing = threading.Lock()  # a status is read and written by one thread at a time
        self._called_off = False  # cancelled before it started: never launched
        self._started = 0.0
        self.status = w.HTML()
        self.cancel_button = w.Button(
            description="Cancel", icon="stop", button_style="danger",
            tooltip="stop this run: the module's processes are killed",
        )  # fmt: skip
        self.stop_button = w.Button(
            description="Stop polling", icon="pause", tooltip="stop asking the job for news"
        )
        self.interval_input = w.BoundedFloatText(
            value=interval, min=0.1, max=3600.0, step=0.5, description="Poll every (s)",
            style={"description_width": "initial"}, layout=w.Layout(width="190px"),
        )  # fmt: skip
        self.progress = w.IntProgress(value=0, min=0, max=1, description="Progress")
        self.progress_label = w.Label()
        self.progress_row = w.HBox([self.progress, self.progress_label])
        self.poll_row = w.HBox([self.interval_input, self.stop_button])
        self.result_box = w.VBox()
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.stop_button.on_click(lambda _b: self.stop())
        for row in (self.progress_row, self.poll_row, self.cancel_button):
            row.layout.display = "none"
        super().__init__(
            [
                w.HBox([self.status, self.cancel_button]),
                self.progress_row,
                self.poll_row,
                self.result_box,
            ]
        )
        self._show_status()
        if start:
            self.start()

    # plain calls

    def start(self) -> None:
        """Start the run in a worker thread (once); a run cancelled before does nothing."""
        with self._launch:
            if self._worker is not None:
                raise RuntimeError(f"{self.capability_id} was already started; make a new LiveRun")
            if self._called_off:
                return  # cancelled before it started: it never launches
            self._started = time.monotonic()
            self.state = "running"
            self._worker = threading.Thread(
                target=self._work, name=f"murmur-run-{self.capability_id}", daemon=True
            )
        self.cancel_button.layout.display = None
        self._show_status()
        self._worker.start()
        threading.Thread(target=self._tick, name="murmur-run-clock", daemon=True).start()

    def cancel(self) -> None:
        """Kill the running call's process tree and stop polling; before :meth:`start`,
        the run is ``cancelled`` at once and never starts."""
        with self._launch:
            self._stop.set()
            self._cancel.set()
            if self.state != "ready":
                return
            self._called_off = True
            self.state = "cancelled"
        self._show_status()  # drawn, then signalled: a waiter reads the end
        self._done.set()
        if self.on_done is not None:
            self.on_done(self)

    def stop(self) -> None:
        """Stop polling after the call now out (the job itself is left alone)."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run (and its polling) ended; ``False`` when ``timeout`` passed."""
        return self._done.wait(timeout)

    @property
    def running(self) -> bool:
        return self._worker is not None and not self._done.is_set()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started if self._started else 0.0

    # the worker

    def _work(self) -> None:
        try:
            inv = self._call(self.capability_id, self.input, staged=self.staged)
            if inv is None:
                return
            self.invocation = inv
            cap = self._capability()
            poll_id = getattr(cap, "poll_capability", None) if cap is not None else None
            if inv.ok and self.auto_poll and poll_id and getattr(cap, "long_running", False):
                self._poll(poll_id, inv.result)
            elif self.state == "running":
                self.state = _state_of(inv)
        finally:
            self.cancel_button.layout.display = "none"
            self.poll_row.layout.display = "none"
            self._show_status()  # drawn, then signalled: a waiter reads the end
            self._done.set()
            if self.on_done is not None:
                self.on_done(self)

    def _capability(self) -> Any:
        if self._declared is not None:
            return self._declared
        try:
            return self.host.capability(self.capability_id)[1]
        except ModuleHostError:
            return None

    def _call(self, capability: str, value: Any, *, staged: Sequence[Any] = ()) -> Any:
        """One ``host.invoke``; the outcome is shown, a host refusal ends the run."""
        try:
            inv = self.host.invoke(
                capability, value, approve=self.approve, staged=staged, cancel=self._cancel
            )
        except InvocationCancelled as exc:
            self.error = exc
            self.state = "cancelled"
            return None
        except ModuleHostError as exc:
            self.error = exc
            self.state = _failed_or_refused(exc)
            return None
        self.last = inv
        self._show(inv)
        return inv

    def _poll(self, poll_id: str, result: Any) -> None:
        ask = poll_input(self.host, poll_id, result)
        self.state = "polling"
        self.poll_row.layout.display = None
        while not poll_finished(result):
            self._show_status()
            if self._stop.wait(max(0.1, float(self.interval_input.value))):
                self.state = "cancelled" if self._cancel.is_set() else "stopped"
                return
            inv = self._call(poll_id, ask)
            if inv is None:
                return
            self.polls += 1
            if not inv.ok:
                self.state = "failed"
                return
            result = inv.result
        self.state = _state_of(inv)

    def _tick(self) -> None:
        while not self._done.wait(_TICK):
            self._show_status()

    # drawing

    def _show(self, inv: Any) -> None:
        replaced, self.view = self.view, InvocationView(inv, progress=False)
        self.result_box.children = (self.view,)
        if replaced is not None:  # a poll's view, gone for good: one stayed open per poll
            close_tree(replaced)
        progress = progress_of(getattr(inv, "result", None))
        if progress is not None:
            done, total = progress
            self.progress.max = total
            self.progress.value = done
            self.progress_label.value = f"{done} of {total} done"
            self.progress_row.layout.display = None

    def _show_status(self) -> None:
        with self._drawing:
            self.status.value = self._status_html()

    def _status_html(self) -> str:
        tone = {
            "running": "info", "polling": "info", "ok": "ok", "warning": "warn",
            "failed": "error", "refused": "error", "cancelled": "warn", "stopped": "warn",
        }.get(self.state, "muted")  # fmt: skip
        label = self.state
        if self.state == "cancelled" and self._cancel.is_set():
            tone, label = "muted", "cancelled by you"  # the user's own click: no alarm
        took = f" · {_elapsed(self.elapsed_s)}" if self._started else ""
        polls = f" · {self.polls} polls" if self.polls else ""
        if self.state == "polling":
            polls += f" · every {float(self.interval_input.value):g} s"
        return (
            f'<div class="murmur-live" data-state="{esc(self.state)}">'
            f"{badge(label, tone)}<b>{esc(clipped(self.capability_id))}</b>"
            f'<span class="murmur-elapsed">{volatile(esc(took + polls))}</span>'
            f"{self._error_html()}</div>"
        )

    def _error_html(self) -> str:
        """The error box: what the host refused and, when the module ran, how it ended."""
        if self._called_off:
            return "<div>cancelled before it started: nothing ran</div>"
        if self.error is None:
            return ""
        if self.state == "cancelled" and self._cancel.is_set():
            return "<div>stopped as you asked: the module's whole process tree was killed</div>"
        return (
            f'<div class="murmur-error-box">{badge(self.error.code, "error")}'
            f"{esc(said(self.error.message))}{evidence_html(self.error.evidence)}</div>"
        )

    @classmethod
    def in_cell(cls, host: Any, capability: str, input: Any = None, **kwargs: Any) -> Any:
        """``host.invoke(..., progress=LiveRun.in_cell)``: the call, shown live below the cell.

        The call runs in a worker thread while the cell's own thread refreshes a
        :class:`LiveRun` display (elapsed time, then the outcome and progress); the kernel
        is busy with the cell, so interrupting the kernel is the cancel: the run's process
        tree is killed and ``KeyboardInterrupt`` re-raised. Returns the invocation; a host
        error is raised as ``invoke`` raises it. The result is shown once: when the cell's
        value is the invocation (IPython draws it below), the card keeps its status only.
        """
        cancel = kwargs.pop("cancel", None) or threading.Event()
        run = cls(host, capability, input, poll=False, start=False)
        run._cancel = cancel
        outcome: dict[str, Any] = {}
        ended = threading.Event()

        def call() -> None:
            try:
                outcome["inv"] = host.invoke(capability, input, cancel=cancel, **kwargs)
            except BaseException as exc:  # handed over to the cell's thread below
                outcome["exc"] = exc
            finally:
                ended.set()

        run._started = time.monotonic()
        run.state = "running"
        run._show_status()
        handle = display(run, display_id=True)  # type: ignore[no-untyped-call]
        worker = threading.Thread(target=call, name=f"murmur-invoke-{capability}", daemon=True)
        worker.start()
        # an Event, not Thread.join: on Python 3.11 a join that Ctrl-C interrupts marks the
        # thread as ended while it still runs, and the next join returns at once
        try:
            while not ended.wait(_TICK):
                run._show_status()
        except KeyboardInterrupt:
            cancel.set()
            ended.wait()  # the call ends as a cancelled invoke: its processes gone, audited
            raise
        finally:
            run._done.set()
        exc = outcome.get("exc")
        if exc is None:
            inv = outcome["inv"]
            run.invocation = run.last = inv
            run.state = _state_of(inv)
            run._show(inv)
        else:
            run.error = exc if isinstance(exc, ModuleHostError) else None
            run.state = ("cancelled" if isinstance(exc, InvocationCancelled)
                         else _failed_or_refused(exc))  # fmt: skip
        run._show_status()
        if handle is not None:  # the saved output (text, static HTML) is the final state
            handle.update(run)
        if exc is not None:
            raise exc
        _shown_once(run, handle, inv)
        return inv

    def text(self) -> str:
        lines = [f"LiveRun {clipped(self.capability_id)}: {self.state}"]
        progress = progress_of(getattr(self.last, "result", None))
        if progress is not None:
            lines.append(f"  progress: {progress[0]} of {progress[1]} done")
        if self._called_off:
            lines.append("  cancelled before it started: nothing ran")
        if self.error is not None and not (self.state == "cancelled" and self._cancel.is_set()):
            lines.append(f"  {self.error.code}: {said(self.error.message)}")
            if self.error.evidence is not None:
                lines.extend(f"  {line}" for line in self.error.evidence.lines())
        if self.view is not None:
            lines.extend(f"  {line}" for line in self.view.text().splitlines())
        return "\n".join(lines)
