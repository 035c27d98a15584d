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
