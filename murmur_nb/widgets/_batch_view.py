"""A batch live in a notebook: progress, counts, rate, ETA, cost, Cancel, rows as they finish.

A thin view over :class:`~murmur_nb.Batch`: it reads :attr:`Batch.progress` (never counts
anything itself), Cancel is :meth:`Batch.cancel`, and a row is shown by ``batch[i]`` in an
:class:`InvocationView` (a crashed row with its exit status and stderr's tail, as a form
shows it). The bar counts the rows that ran, so a cancelled batch stops short and says so;
a row read from the journal (a resumed batch) is marked in the list. Updates come from the
batch's coordinating thread through
:meth:`Batch.on_change`, at most every ``refresh_s`` seconds (and always at the end). The
rate and ETA are run-to-run facts: shown live, left out of ``text/plain`` and the static
HTML that nbval compares; so is the histogram of the finished rows' durations (one inline
SVG, :mod:`murmur_nb.widgets._batch_chart`), redrawn with the rest when rows finish. Each
row's duration is read from its record once, when it settles.

A display (``text/plain`` and the static HTML) is drawn from one reading of the progress,
under the lock the coordinating thread's updates take: read separately, a running batch's
text said "0/200 finished" beside HTML that said "5 of 200 done", and an update landing
midway tore the HTML itself (the bar already moved, its words not yet).

The row list holds at most ``max_rows`` rows (a Select of thousands is slow to draw and to
scroll). Past that, the rows a user comes looking for are kept: every failed or unrun row,
then ok rows in input order up to the cap, all listed in input order, and a line above the
list says how many of the settled rows it holds. Any row is still one call away
(:meth:`BatchView.show`). A settled row's label is read from its record once.

"Copy as code" writes the ``host.map(...)`` call of the whole batch (its inputs as the
rows sent them, and the options it ran with), "Copy row as code" the ``host.invoke(...)``
of the selected row, both into ``code_box`` (see :mod:`murmur_nb.widgets._code_box`).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import ipywidgets as w

from murmur_nb._batch.inputs import canonical
from murmur_nb._forms.as_code import invoke_code, map_code
from murmur_nb.widgets._batch_chart import BINS, duration_histogram
from murmur_nb.widgets._code_box import CodeBox, host_name, insert_next_cell
from murmur_nb.widgets._html import (
    TextView,
    badge,
    esc,
    printable,
    require,
    set_output,
    volatile,
)
from murmur_nb.widgets._invocation_view import InvocationView

__all__ = ["BatchView"]

_SETTLED = ("ok", "failed", "not_run")
_FINISHED = ("ok", "failed")
#: The call options a row's ``host.invoke`` repeats (those the batch was given).
_ROW_OPTIONS = ("deadline_ms", "max_output_bytes", "extra")
_TONE = {"ok": "ok", "failed": "error", "not_run": "warn"}


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA unknown"
    return f"ETA {seconds:.0f} s" if seconds < 120 else f"ETA {seconds / 60:.1f} min"


def _cost_words(p: Any) -> str:
    """The cost so far: the known sum, and how many attempts' cost is unknown."""
    return f"{p.cost:g}" + (f" + {p.cost_unknown} unknown" if p.cost_unknown else "")


class BatchView(TextView):
    """Progress, counts, rate, ETA, cost and a Cancel button; a row list that fills in as
    rows finish; selecting a row (``rows.value = i`` or :meth:`show`) shows its invocation.

    Parameters
    ----------
    batch
        A :class:`~murmur_nb.Batch`, usually started with ``background=True``.
    max_rows
        How many settled rows the list holds: past it, every failed or unrun row first,
        then the first ok rows; ``rows_note`` says how many are listed.
    refresh_s
        The least time between two updates while the batch runs.
    bins
        The bars of the duration histogram (``chart``).
    host_name
        The host's variable in generated code (by default the notebook's name for it).

    Attributes
    ----------
    rows : ipywidgets.Select
        The settled rows listed (values are row positions).
    rows_note : ipywidgets.HTML
        "N of M rows listed" when the list holds fewer than the settled rows (else hidden).
    chart : ipywidgets.HTML
        The finished rows' durations as a histogram, and the cost so far (an inline SVG).
    code_button, row_code_button : ipywidgets.Button
        "Copy as code" (:meth:`copy_as_code`) and "Copy row as code"
        (:meth:`copy_row_as_code`): the call shown in ``code_box``.
    """

    def __init__(
        self, batch: Any, *, max_rows: int = 500, refresh_s: float = 0.2, bins: int = BINS,
        host_name: str | None = None,
    ) -> None:  # fmt: skip
        require(batch, "on_change", "BatchView", "the Batch that host.map(...) returns")
        self.batch = batch
        self.max_rows, self.refresh_s = max_rows, refresh_s
        self.bins, self.host_name = bins, host_name
        self.chart = w.HTML()
        self._durations: dict[int, float] = {}  # finished row -> seconds, read once
        self._drawn: tuple[int, str] | None = None  # (rows, cost) the chart shows
        self.code_button = w.Button(description="Copy as code", icon="code",
                                    tooltip="the host.map(...) call of this batch",
                                    layout=w.Layout(width="auto"))  # fmt: skip
        self.row_code_button = w.Button(description="Copy row as code", icon="code",
                                        tooltip="the host.invoke(...) call of the selected row",
                                        layout=w.Layout(width="auto"), disabled=True)  # fmt: skip
        self.code_button.add_class("murmur-batch-code")
        self.row_code_button.add_class("murmur-row-code")
        self.code_button.on_click(lambda _b: self.copy_as_code())
        self.row_code_button.on_click(lambda _b: self.copy_row_as_code())
        self.code_box = CodeBox()
        self.bar = w.IntProgress(value=0, min=0, max=max(1, len(batch)), description="rows")
        self.bar_label = w.HTML()  # "16/120 run · cancelled": what the bar shows, in words
        self.counts = w.HTML()
        self.live = w.HTML()
        self.cancel_button = w.Button(description="Cancel", button_style="warning",
                                      icon="stop")  # fmt: skip
        self.cancel_button.on_click(lambda _b: self.cancel())
        # width 100% plus the widget's own 2 px margins stuck out 4 px (a stray scrollbar):
        # the list stretches across its box instead, margins inside it
        self.rows = w.Select(options=[], rows=10,
                             layout=w.Layout(width="auto", align_self="stretch"))  # fmt: skip
        self.rows.observe(self._picked, names="value")
        self.rows_note = w.HTML(layout=w.Layout(display="none"))
        self.detail = w.Output()
        self.shown: InvocationView | None = None
        self._labels: dict[int, str] = {}  # settled row -> its label, read once
        self._listed: list[int] = []  # the rows in the list, in input order
        self._note = ""  # what rows_note says, as plain text
        self._lock = threading.RLock()  # a display holds it while text() refreshes
        self._last = 0.0
        super().__init__([w.HBox([self.bar, self.bar_label, self.cancel_button],
                                 layout=w.Layout(align_items="center")),
                          self.counts, self.live, self.chart,
                          w.HBox([self.code_button, self.row_code_button]), self.code_box,
                          self.rows_note, self.rows, self.detail])  # fmt: skip
        batch.on_change(self._changed)
        self.refresh()

    # -- plain calls -----------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the batch (:meth:`Batch.cancel`); finished rows are kept."""
        self.batch.cancel()
        self.cancel_button.disabled = True
        self.refresh()

    def show(self, i: int) -> InvocationView:
        """Show row ``i``'s invocation (result, artifacts, error) below the list."""
        self.shown = InvocationView(self.batch[i])
        set_output(self.detail, self.shown)
        return self.shown

    def code(self) -> str:
        """The ``host.map(...)`` call that runs this batch's inputs again, with its options."""
        frame = self.batch.inputs.frame is not None
        inputs = [json.loads(canonical(v, cells=frame)) for v in self.batch.inputs.values]
        return map_code(self.batch.capability, inputs, host=self._host(),
                        options=self._map_options())  # fmt: skip

    def row_code(self, i: int) -> str:
        """The ``host.invoke(...)`` call that sends row ``i``'s input again."""
        sent = self.batch[i].request.input
        options = {k: v for k in _ROW_OPTIONS if (v := self.batch.options.get(k)) is not None}
        return invoke_code(self.batch.capability, sent, host=self._host(), options=options)

    def copy_as_code(self) -> str:
        """Show :meth:`code` in ``code_box`` and return it (in a cell: also the next cell)."""
        code = self.code()
        self.code_box.show(code, f"this batch of {len(self.batch)} rows")
        insert_next_cell(code)
        return code

    def copy_row_as_code(self, i: int | None = None) -> str:
        """Show :meth:`row_code` of row ``i`` (the selected row) in ``code_box``; return it."""
        i = self.rows.value if i is None else i
        if i is None:
            raise ValueError("no row is selected: pick one in the list, or pass its position")
        code = self.row_code(int(i))
        self.code_box.show(code, f"row {self._name(int(i))}")
        insert_next_cell(code)
        return code

    def refresh(self) -> None:
        """Read the batch's progress and its newly settled rows into the view."""
        with self._lock:
            self._draw(self.batch.progress)

    # -- internals -------------------------------------------------------------------------

    def _draw(self, p: Any) -> None:
        """Show one reading of the progress (``p``) and the newly settled rows (the caller
        holds the lock)."""
        # the rows that ran (the journal's included): rows a Cancel left unrun never
        # fill the bar, and the words beside it say why it stopped short
        self.bar.value = p.finished
        self.bar.bar_style = "" if p.state == "running" else (
            "success" if p.failed == 0 and p.not_run == 0 else "warning")  # fmt: skip
        self.bar_label.value = self._bar_words(p)
        self.counts.value = self._counts_html(p)
        rate = f"{p.rate:.1f} rows/s" if p.rate is not None else "rate unknown"
        self.live.value = volatile(esc(f"{rate} · {_eta(p.eta_s)} · {p.elapsed_s:.1f} s"))
        if p.state != "running":
            self.cancel_button.disabled = True
        self._list_new_rows()
        self._draw_chart(p)

    def _changed(self, p: Any) -> None:
        now = time.monotonic()
        if p.state == "running" and now - self._last < self.refresh_s:
            return
        self._last = now
        self.refresh()

    def _host(self) -> str:
        return host_name(self.batch.host, self.host_name)

    def _map_options(self) -> dict[str, Any]:
        """The options the batch ran with, as ``host.map`` keywords (defaults left out)."""
        b = self.batch
        given = {"concurrency": b.concurrency, "retries": b.retries or None,
                 "max_cost": b.max_cost, "estimated_cost": b.estimated_cost,
                 **{k: b.options.get(k) for k in _ROW_OPTIONS}}  # fmt: skip
        return {k: v for k, v in given.items() if v is not None}

    def _draw_chart(self, p: Any) -> None:
        """Read the newly finished rows' durations; redraw when rows or cost changed."""
        for i in range(len(self.batch)):
            if i not in self._durations and self.batch.status(i) in _FINISHED:
                record = self.batch.record(i) or {}
                self._durations[i] = float(record.get("duration_ms") or 0.0) / 1000
        cost = _cost_words(p)
        if self._drawn == (len(self._durations), cost):
            return
        self._drawn = (len(self._durations), cost)
        svg = duration_histogram(list(self._durations.values()), cost=cost, bins=self.bins)
        self.chart.value = volatile(svg)

    def _bar_words(self, p: Any) -> str:
        words = f"{p.finished}/{p.total} run"
        if p.state != "running":
            words += f" · {p.state}"
        if p.not_run:
            words += f" · {p.not_run} not run"
        return f'<span class="murmur-batch-bar" data-state="{esc(p.state)}">{esc(words)}</span>'

    def _counts_html(self, p: Any) -> str:
        cost = _cost_words(p)
        return " ".join([
            badge(p.state, "info" if p.state == "running" else "muted"),
            badge(f"{p.ok} ok", "ok"), badge(f"{p.failed} failed", "error"),
            badge(f"{p.running} running", "info"), badge(f"{p.not_run} not run", "warn"),
            badge(f"{p.from_journal} from the journal", "muted"),
            badge(f"cost {cost}", "muted"),
            esc(f"{p.finished + p.not_run}/{p.total} settled"),
        ])  # fmt: skip

    def _name(self, i: int) -> Any:
        index = self.batch.inputs.index
        return index[i] if index is not None else i

    def _label(self, i: int) -> str:
        name = self._name(i)
        status = self.batch.status(i)
        record = self.batch.record(i) or {}
        if record.get("ok"):
            what = json.dumps(record.get("result"), sort_keys=True, default=str)
        else:
            error = record.get("error") or {}
            what = f"{error.get('code', '')}: {error.get('message', '')}"
        what = what if len(what) <= 80 else what[:79] + "…"
        kept = " · from the journal" if self.batch.from_journal(i) else ""
        return printable(f"{name} · {status}{kept} · {what}")  # a module's words: escaped

    def _list_new_rows(self) -> None:
        """Label the newly settled rows; list them, or the rows :meth:`_chosen` keeps."""
        settled = [i for i in range(len(self.batch)) if self.batch.status(i) in _SETTLED]
        new = [i for i in settled if i not in self._labels]
        if not new:
            return
        for i in new:
            self._labels[i] = self._label(i)
        keep = self.rows.value
        listed = self._chosen(settled, keep)
        if listed != self._listed:
            self._listed = listed
            self.rows.options = [(self._labels[i], i) for i in listed]
            self.rows.value = keep if keep in listed else None
        self._note = self._rows_note(settled)
        self.rows_note.value = f'<div class="murmur-rows-note">{esc(self._note)}</div>'
        self.rows_note.layout.display = None if self._note else "none"

    def _chosen(self, settled: list[int], keep: int | None) -> list[int]:
        """The rows to list, in input order: all of them up to ``max_rows``; past it, the
        selected row, the failed and unrun rows, then the first ok rows."""
        if len(settled) <= self.max_rows:
            return settled
        bad = [i for i in settled if i != keep and self.batch.status(i) != "ok"]
        ok = [i for i in settled if i != keep and self.batch.status(i) == "ok"]
        first = [keep] if keep in settled else []
        return sorted((first + bad + ok)[: max(self.max_rows, 0)])

    def _rows_note(self, settled: list[int]) -> str:
        """``"N of M rows listed: ..."`` when the list holds fewer than the settled rows."""
        if len(self._listed) >= len(settled):
            return ""
        bad = sum(1 for i in settled if self.batch.status(i) != "ok")
        bad_listed = sum(1 for i in self._listed if self.batch.status(i) != "ok")
        if bad == 0:
            which = "the first ones"
        elif bad_listed == bad:
            which = f"all {bad} failed or not run, then the first ok ones"
        else:
            which = f"{bad_listed} of the {bad} failed or not run"
        return (f"{len(self._listed)} of {len(settled)} rows listed ({which}); "
                "view.show(i) shows any row")  # fmt: skip

    def _picked(self, change: dict[str, Any]) -> None:
        self.row_code_button.disabled = change["new"] is None
        if change["new"] is not None:
            self.show(int(change["new"]))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        with self._lock:  # text() draws the reading it tells; no update lands in between
            return super()._repr_mimebundle_(**kwargs)

    def text(self) -> str:
        with self._lock:
            p = self.batch.progress
            self._draw(p)
            line = f"BatchView {self.batch.capability}: {p.line()}"
            return f"{line}\n  {self._note}" if self._note else line
