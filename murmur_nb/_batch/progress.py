"""How far a batch is: counts, rate, ETA and cost, as one immutable snapshot; and its bar.

A view (``widgets.BatchView``, the bar of :func:`bar_listener`) reads :class:`BatchProgress`;
it never counts anything itself. The bar follows the library's one progress policy
(:mod:`murmur_nb._progress`, a replay's too): a notebook bar in a Jupyter kernel, a text bar
in a terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from murmur_nb._progress import Progress, progress_bar

__all__ = ["BAR_EVERY_S", "BatchProgress", "bar_listener"]

#: The least time between two redraws of the bar (the listener is called after every row)
BAR_EVERY_S = 0.1


@dataclass(frozen=True)
class BatchProgress:
    """A batch's state at one moment.

    ``finished`` rows are ``ok`` + ``failed`` (those from the journal included); ``not_run``
    rows were never started (cancelled, past ``max_cost``, invalid when skipped). ``cost`` is
    the sum of the known actual costs of every attempt, retried ones and what the journal's
    rows spent included; ``cost_unknown`` counts attempts (a journal row: rows) whose cost is
    unknown (never counted as free). ``rate`` is rows run per second in this run (journal rows
    excluded); ``eta_s`` is ``None`` until a rate is known.
    """

    total: int
    ok: int
    failed: int
    running: int
    not_run: int
    from_journal: int
    cost: float
    cost_unknown: int
    elapsed_s: float
    #: "running" | "finished" | "cancelled" | "interrupted" | "stopped" (by the host's own
    #: failure, such as a journal that cannot be written or a Dask client that closed)
    state: str
    run_here: int = 0

    @property
    def finished(self) -> int:
        return self.ok + self.failed

    @property
    def pending(self) -> int:
        return self.total - self.finished - self.running - self.not_run

    @property
    def rate(self) -> float | None:
        if self.run_here == 0 or self.elapsed_s <= 0:
            return None
        return self.run_here / self.elapsed_s

    @property
    def eta_s(self) -> float | None:
        rate = self.rate
        if rate is None:
            return None
        return (self.pending + self.running) / rate

    def line(self) -> str:
        """A one-line summary without times (stable for text/plain)."""
        cost = f"{self.cost:g}" + (f" (+{self.cost_unknown} unknown)" if self.cost_unknown else "")
        # a batch that ended early says so (the counts alone read like one still starting)
        ended = f"{self.state}, " if self.state in ("cancelled", "interrupted", "stopped") else ""
        return (
            f"{ended}{self.finished}/{self.total} finished: {self.ok} ok, {self.failed} failed, "
            f"{self.not_run} not run, {self.running} running, {self.from_journal} from the "
            f"journal; cost {cost}"
        )


def bar_listener(total: int, progress: Progress) -> Callable[[BatchProgress], None] | None:
    """A listener drawing the batch's bar (redrawn at most every :data:`BAR_EVERY_S`, and
    when the batch ends, which closes it), or ``None`` when ``progress`` asks for none."""
    bar = progress_bar(total, desc="map", unit="row", progress=progress)
    if bar is None:
        return None
    drawn = [0.0, False]  # when it was last drawn; closed

    def update(p: BatchProgress) -> None:
        now, ended = time.monotonic(), p.state != "running"
        if drawn[1] or (now - drawn[0] < BAR_EVERY_S and not ended):
            return
        drawn[0] = now
        bar.n = p.finished  # rows never run do not fill it: a cancel at 16 of 120 shows 16
        said = {"ok": p.ok, "failed": p.failed, "running": p.running, "cost": f"{p.cost:g}"}
        if p.not_run:
            said["not_run"] = p.not_run
        if ended and p.state != "finished":
            said["state"] = p.state
        bar.set_postfix(said, refresh=False)
        bar.refresh()
        if ended:
            drawn[1] = True
            bar.close()

    return update
