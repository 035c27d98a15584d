"""BatchView's "copy as code" and its duration histogram, over real batches (batchy).

The code a BatchView writes is run for real: the ``host.map(...)`` call of the batch finds
every row in the journal (the journal keys a row on its exact input, so every row read back
proves the code sent the same input), and a row's ``host.invoke(...)`` call gets the row's
result again. The histogram's SVG is read as a page gets it.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

import murmur_nb as mnb
from murmur_nb.widgets import BatchView

FACET_MODULES = [("batchy", "batchy")]
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def host(facet_home: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home) as h:
        yield h


def _until(check: Callable[[], bool], timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not check() and time.monotonic() < end:
        time.sleep(0.02)


def _chart(view: BatchView) -> ET.Element:
    svg = view.chart.value
    return ET.fromstring(svg[svg.index("<svg") : svg.index("</svg>") + 6])


def test_the_batchs_code_runs_the_same_inputs(host: mnb.ModuleHost) -> None:
    df = pd.DataFrame({"n": [0, 1, 2, 3], "tag": ["a", None, "c'\"", "Ü"], "sleep": 0.0},
                      index=pd.Index(["w", "x", "y", "z"], name="key"))  # fmt: skip
    batch = host.map("batchy.work", df, concurrency=2, retries=1, progress=False)
    view = BatchView(batch, host_name="h")
    assert view.code_box.layout.display == "none"
    view.code_button.click()
    code = view.code_box.code
    assert code == view.code_box.area.value
    assert code.startswith("h.map(\n    'batchy.work',\n    [{")
    assert "concurrency=2" in code and "retries=1" in code
    again = eval(code, {"h": host})
    assert again.progress.from_journal == 4  # every row's exact input was journaled already
    assert [inv.result for inv in again] == [inv.result for inv in batch]


def test_a_rows_code_makes_that_row_again(host: mnb.ModuleHost) -> None:
    inputs = [{"n": i, "sleep": 0.0, "fail_every": 3} for i in range(5)]
    batch = host.map("batchy.work", inputs, progress=False, deadline_ms=20_000)
    view = BatchView(batch)
    view.rows.value = 4  # a click on row 4; its input as the module got it (keys sorted)
    view.row_code_button.click()
    code = view.code_box.code
    assert code == (
        "host.invoke('batchy.work', {'fail_every': 3, 'n': 4, 'sleep': 0.0}, deadline_ms=20000)"
    )
    inv = eval(code, {"host": host})
    assert inv.ok and inv.result == batch[4].result == {"n": 4, "square": 16}
    assert inv.request.input == batch[4].request.input
    view.rows.value = 3  # a failed row is code too: the module fails it again
    assert view.copy_row_as_code() == code.replace("'n': 4", "'n': 3")
    assert eval(view.code_box.code, {"host": host}).error.code == batch[3].error.code


def test_the_histogram_counts_the_finished_rows_as_they_finish(host: mnb.ModuleHost) -> None:
    inputs = [{"n": i, "sleep": 0.05 * (i % 4)} for i in range(16)]
    batch = host.map("batchy.work", inputs, concurrency=2, background=True, progress=False)
    view = BatchView(batch, refresh_s=0.0)
    seen: list[int] = []

    def midway() -> bool:
        seen.append(int(_chart(view).get("data-rows", "")))
        return 0 < seen[-1] < 16

    _until(midway, 60)
    batch.wait(120)
    view.refresh()
    root = _chart(view)
    bars = root.findall(f"{SVG}rect")
    p = batch.progress
    assert any(0 < s < 16 for s in seen), seen  # drawn while rows were still running
    assert len(bars) == int(root.get("data-bins", "")) == view.bins
    assert sum(int(b.get("data-count", "")) for b in bars) == p.finished == 16
    assert int(root.get("data-rows", "")) == 16
    assert f"cost so far {p.cost:g}" in (root.find(f"{SVG}text").text or "")  # type: ignore[union-attr]
    assert "murmur-batch-hist" not in view.static_html()  # timings: live only, as the rate


def test_a_cancelled_batchs_histogram_holds_only_the_rows_that_ran(host: mnb.ModuleHost) -> None:
    inputs = [{"n": i, "sleep": 0.2} for i in range(30)]
    batch = host.map("batchy.work", inputs, concurrency=2, background=True, progress=False)
    view = BatchView(batch, refresh_s=0.0, bins=5)
    _until(lambda: batch.progress.finished >= 2, 60)
    view.cancel_button.click()
    batch.wait(120)
    view.refresh()
    root = _chart(view)
    p = batch.progress
    assert p.not_run > 0
    assert len(root.findall(f"{SVG}rect")) == 5
    assert int(root.get("data-rows", "")) == p.finished < 30
    counts = [int(b.get("data-count", "")) for b in root.findall(f"{SVG}rect")]
    assert sum(counts) == p.finished
