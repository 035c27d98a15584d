"""How far a batch is: counts, rate, ETA and cost, as one immutable snapshot.

A view (``widgets.BatchView``, the tqdm bar) reads :class:`BatchProgress`; it never counts
anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BatchProgress"]


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
    state: str  # "running" | "finished" | "cancelled" | "interrupted"
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
        return (
            f"{self.finished}/{self.total} finished: {self.ok} ok, {self.failed} failed, "
            f"{self.not_run} not run, {self.running} running, {self.from_journal} from the "
            f"journal; cost {cost}"
        )
