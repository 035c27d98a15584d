"""The one progress policy a batch and a replay share (``progress="auto"``, True, False)."""

from __future__ import annotations

import io
import sys

import pytest

from murmur_nb import _progress  # private: the policy itself; its callers are tested in a kernel


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_draws_in_a_terminal_and_not_into_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not _progress.wants_bar("auto")
    assert _progress.progress_bar(3, desc="map", unit="row", progress="auto") is None
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert _progress.wants_bar("auto")
    bar = _progress.progress_bar(3, desc="map", unit="row", progress="auto")
    bar.update(3)
    bar.close()
    assert "3/3" in sys.stderr.getvalue()


def test_true_and_false_are_kept_and_anything_else_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert _progress.wants_bar(True) and not _progress.wants_bar(False)
    with pytest.raises(ValueError, match="'auto', True or False"):
        _progress.wants_bar("yes")  # type: ignore[arg-type]


def test_outside_a_kernel_nothing_counts_as_one() -> None:
    """This process imports no kernel: ``in_kernel`` answers without importing IPython."""
    assert not _progress.in_kernel()


def test_a_cancelled_batchs_bar_shows_the_rows_that_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """After Cancel at 16 of 120 rows the bar says 16/120 and cancelled, not a full bar."""
    from murmur_nb._batch.progress import BatchProgress, bar_listener  # private: the bar

    monkeypatch.setattr(sys, "stderr", _Terminal())
    update = bar_listener(120, True)
    assert update is not None
    update(BatchProgress(total=120, ok=15, failed=1, running=0, not_run=104, from_journal=0,
                         cost=0.0, cost_unknown=0, elapsed_s=2.0, state="cancelled",
                         run_here=16))  # fmt: skip
    drawn = sys.stderr.getvalue().rsplit("\r", 1)[-1]
    assert "16/120" in drawn and "state=cancelled" in drawn and "not_run=104" in drawn, drawn
    assert "120/120" not in drawn and "100%" not in drawn, drawn
