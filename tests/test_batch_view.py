"""BatchView over a real batch (tests/modules/batchy.py, sandboxed), driven headlessly."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import murmur_nb as mnb
from murmur_nb.widgets import BatchView, InvocationView

FACET_MODULES = [("batchy", "batchy"), ("crashy", "crashy")]


@pytest.fixture
def host(facet_home: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home) as h:
        yield h


def _until(check: object, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not check() and time.monotonic() < end:  # type: ignore[operator]
        time.sleep(0.02)


def test_progress_moves_and_rows_fill_in_then_a_row_shows_its_invocation(
    host: mnb.ModuleHost,
) -> None:
    df = pd.DataFrame({"n": range(8), "fail_every": 3, "sleep": 0.1},
                      index=pd.Index([f"k{i}" for i in range(8)], name="key"))  # fmt: skip
    batch = host.map("batchy.work", df, concurrency=2, background=True, progress=False)
    view = BatchView(batch, refresh_s=0.0)
    _until(lambda: 0 < view.bar.value < 8, 30)
    seen_midway = view.bar.value
    batch.wait(120)
    view.refresh()
    assert 0 < seen_midway <= 8 and view.bar.value == 8 and view.bar.max == 8
    assert "5 ok" in view.counts.value and "3 failed" in view.counts.value
    assert view.cancel_button.disabled
    labels = [label for label, _ in view.rows.options]
    assert len(labels) == 8 and labels[0].startswith("k0 · failed · bad_number")
    assert labels[4] == 'k4 · ok · {"n": 4, "square": 16}'
    view.rows.value = 4  # what a click on the row does
    assert isinstance(view.shown, InvocationView) and view.shown.status == "ok"
    assert '"square"' in view.shown.static_html() or "square" in view.shown.text()
    view.rows.value = 3
    assert view.shown.status != "ok" and "bad_number" in view.shown.text()
    text = repr(view)
    assert text.startswith("BatchView batchy.work: 8/8 finished: 5 ok, 3 failed")
    assert "rows/s" not in view.static_html()  # the rate is live only


def test_cancel_button_stops_the_batch_and_keeps_finished_rows(host: mnb.ModuleHost) -> None:
    inputs = [{"n": i, "sleep": 0.3} for i in range(30)]
    batch = host.map("batchy.work", inputs, concurrency=2, background=True, progress=False)
    view = BatchView(batch, refresh_s=0.0)
    _until(lambda: batch.progress.ok >= 2)
    view.cancel_button.click()
    batch.wait(120)
    view.refresh()
    p = batch.progress
    assert p.state == "cancelled" and p.ok >= 2 and p.not_run > 0
    assert view.cancel_button.disabled and "cancelled" in view.counts.value
    assert f"{p.ok} ok" in view.counts.value
    # the bar holds the rows that ran, never the ones the Cancel left unrun (issue 40)
    assert view.bar.value == p.finished < view.bar.max == 30
    said = f"{p.finished}/30 run · cancelled · {p.not_run} not run"
    assert said in view.bar_label.value and 'data-state="cancelled"' in view.bar_label.value
    assert len(view.rows.options) == p.ok + p.failed + p.not_run


def test_a_crashed_row_shows_its_exit_status_and_stderr_tail(host: mnb.ModuleHost) -> None:
    """Issue 40: the form shows how a crashed module ended; a batch row showed only the code.
    The journal now keeps the row's evidence, so ``batch[i]`` (this kernel or the next)
    and the view show it."""
    batch = host.map("crashy.raise", [{"note": "a"}, {"note": "b"}], progress=False)
    view = BatchView(batch)
    assert batch.progress.failed == 2
    shown = view.show(1)
    assert shown.status != "ok"
    text = shown.text()
    assert "ZeroDivisionError: division by zero" in text and "exited with status 1" in text
    assert "murmur-evidence" in shown.static_html()
    again = host.map("crashy.raise", [{"note": "a"}, {"note": "b"}], progress=False)
    assert again.from_journal(0) and again[0].evidence is not None  # read back from the journal
    assert "ZeroDivisionError" in again[0].evidence.stderr_tail


def test_rows_read_from_the_journal_are_marked(host: mnb.ModuleHost) -> None:
    inputs = [{"n": i} for i in range(4)]
    host.map("batchy.work", inputs[:2], progress=False)  # rows 0 and 1 are journaled
    batch = host.map("batchy.work", inputs, progress=False)  # a resumed batch
    view = BatchView(batch)
    labels = [label for label, _ in view.rows.options]
    assert [batch.from_journal(i) for i in range(4)] == [True, True, False, False]
    assert labels[0].startswith("0 · ok · from the journal · ")
    assert labels[1].startswith("1 · ok · from the journal · ")
    assert labels[2].startswith("2 · ok · {") and "journal" not in labels[3]
    assert "4/4 run · finished" in view.bar_label.value


def test_failed_rows_past_max_rows_stay_listed_and_the_view_says_how_many(
    host: mnb.ModuleHost,
) -> None:
    """A list capped at ``max_rows`` keeps every failed row (the rows a user comes for),
    fills the rest with ok rows in input order, and says how many of the rows it lists."""
    inputs = [{"n": i} for i in range(1, 9)] + [{"n": 9, "fail_every": 9}, {"n": 10,
                                                 "fail_every": 5}]  # fmt: skip
    batch = host.map("batchy.work", inputs, progress=False)
    view = BatchView(batch, max_rows=4)
    assert batch.progress.failed == 2
    listed = [i for _, i in view.rows.options]
    assert listed == [0, 1, 8, 9]  # input order: the first ok rows, then both failures
    assert [view.batch.status(i) for i in listed[2:]] == ["failed", "failed"]
    said = "4 of 10 rows listed (all 2 failed or not run, then the first ok ones)"
    assert said in view.rows_note.value and said in view.static_html()
    assert said in view.text()
    view.rows.value = 9
    assert view.shown is not None and "bad_number" in view.shown.text()
    assert 5 not in listed and view.show(5).status == "ok"  # any row, listed or not
    assert BatchView(batch).rows_note.layout.display == "none"  # all listed: nothing to say
