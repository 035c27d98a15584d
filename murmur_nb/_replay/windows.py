"""Which prefixes of a record ``on-compact`` is offered: the whole record, or growth windows.

A growth window is the record as it stood at some earlier moment: its first ``n`` messages.
That is pandas' *expanding* window sampled at chosen ends, so a window is named by its end
``n`` (the ``window`` column of a replay), and the last window is always the whole record.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from murmur_nb._conversations.store import Message

__all__ = ["ReplayWindows", "WindowSpec", "as_windows", "window_ends"]


@dataclass(frozen=True)
class ReplayWindows:
    """Growth windows: the prefixes of a record that ``on-compact`` is offered.

    Parameters
    ----------
    every : int, optional
        A window after every ``every`` messages (``every=20``: the first 20, 40, ...).
    chars : int, optional
        A window at the first message where the record's characters (every ``content``
        counted) pass each multiple of ``chars``.

    The whole record is always the last window. With neither set, it is the only one.

    Examples
    --------
    >>> ReplayWindows(every=2).ends([Message("a", "user", "x")] * 5)
    [2, 4, 5]
    """

    every: int | None = None
    chars: int | None = None

    def __post_init__(self) -> None:
        for name in ("every", "chars"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(
                    f"ReplayWindows({name}={value!r}): give a whole number of at least 1, "
                    f"or leave {name} out"
                )

    def ends(self, messages: Sequence[Message]) -> list[int]:
        """The sorted window ends (message counts) for ``messages``; the last is ``len``."""
        total = len(messages)
        ends: set[int] = set()
        if self.every is not None:
            ends.update(range(self.every, total, self.every))
        if self.chars is not None:
            seen, mark = 0, self.chars
            for n, message in enumerate(messages, start=1):
                seen += len(message.content)
                if seen >= mark and n < total:
                    ends.add(n)
                    mark = (seen // self.chars + 1) * self.chars
        return [*sorted(ends), total] if total else []


WindowSpec = Literal["whole"] | int | ReplayWindows


def as_windows(spec: WindowSpec) -> ReplayWindows:
    """``"whole"`` (the default), ``N`` (every N messages) or a :class:`ReplayWindows`."""
    if isinstance(spec, ReplayWindows):
        return spec
    if spec == "whole":
        return ReplayWindows()
    if hasattr(spec, "__index__") and not isinstance(spec, bool):  # an int, numpy's too
        return ReplayWindows(every=operator.index(spec))
    raise ValueError(
        f"windows={spec!r}: use 'whole' (one window, the whole record), an int N (a window "
        "every N messages, then the whole record) or mnb.ReplayWindows(every=..., chars=...)"
    )


def window_ends(messages: Sequence[Message], spec: WindowSpec) -> list[int]:
    return as_windows(spec).ends(messages)
