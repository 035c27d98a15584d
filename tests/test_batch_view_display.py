"""What a BatchView saves into a notebook while its batch runs: one set of counts.

Tutorial 07 saved a running batch's view whose ``text/plain`` said "0/200 finished ... 4
running" while its HTML said "5 of 200 done": the text read the batch again, the HTML was
the widgets as the last update left them (and an update landing midway tore the HTML too).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import murmur_nb as mnb
from murmur_nb.widgets import BatchView

FACET_MODULES = [("batchy", "batchy")]


@pytest.fixture
def host(facet_home: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home) as h:
        yield h


def _counts(bundle: dict[str, object]) -> tuple[dict[str, int], dict[str, int]]:
    """The counts ``text/plain`` tells, and those the HTML shows (bar, its words, badges)."""
    text, html = str(bundle["text/plain"]), str(bundle["text/html"])
    told = re.search(r"(\d+)/(\d+) finished: (\d+) ok, (\d+) failed, (\d+) not run, "
                     r"(\d+) running", text)  # fmt: skip
    assert told, text
    finished, total, ok, failed, not_run, running = map(int, told.groups())
    from_text = {"finished": finished, "ok": ok, "failed": failed, "not run": not_run,
                 "running": running}  # fmt: skip

    def one(pattern: str) -> int:
        found = {int(n) for n in re.findall(pattern, html)}
        assert len(found) == 1, (pattern, found, html)
        return found.pop()

    from_html = {
        "finished": one(rf"\b(\d+) of {total} done"),
        "ok": one(r">(\d+) ok<"), "failed": one(r">(\d+) failed<"),
        "not run": one(r">(\d+) not run<"), "running": one(r">(\d+) running<"),
    }  # fmt: skip
    assert one(rf"\b(\d+)/{total} run\b") == from_html["finished"]
    assert one(r'<progress value="(\d+)"') == from_html["finished"]
    return from_text, from_html


def test_a_running_batchs_display_has_one_set_of_counts(host: mnb.ModuleHost) -> None:
    inputs = [{"n": i, "sleep": 0.15} for i in range(40)]
    batch = host.map("batchy.work", inputs, concurrency=2, background=True, progress=False)
    try:
        lagging = BatchView(batch, refresh_s=3600.0)  # its own updates stop after the first
        live = BatchView(batch, refresh_s=0.0)  # updated on every change, from another thread
        end = time.monotonic() + 60
        while batch.progress.ok < 2 and time.monotonic() < end:
            time.sleep(0.02)
        bundle = lagging._repr_mimebundle_()  # what the notebook saves
        told, shown = _counts(bundle)
        assert "running" in str(bundle["text/html"]) and told["finished"] >= 2
        assert told == shown
        while not batch.done:
            told, shown = _counts(live._repr_mimebundle_())
            assert told == shown
    finally:
        batch.cancel()
        batch.wait(120)
