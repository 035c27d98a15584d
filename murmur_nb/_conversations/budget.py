"""What one read made on a guest's behalf may cost: the bytes of its page and its time.

A hook's ``read-messages`` runs in the kernel, outside the guest's store, where neither the
store's memory limit nor its epoch deadline reaches: the host used to read and decode a whole
page (100 messages of 2 MiB: 200 MiB, 600 MiB of the kernel, 1.3 s) before wasmtime found
that a guest of 4 MiB could not hold it, and the first read of a 376 MiB record indexed all of
it (800 ms) against a 20 ms limit. SPEC §1 bounds such work like the guest's own, so a read
carries a :class:`ReadBudget`:

- *Bytes.* A page is sized from the index's byte offsets before a line is read: it holds the
  newest messages of the span ``limit`` names whose record lines, plus
  :data:`MESSAGE_OVERHEAD` each, fit the guest's memory (a page it cannot hold is of no use
  to it) and :data:`PAGE_CEILING`. Fewer messages is within the WIT (``limit`` is a maximum;
  a loop ends at ``next-cursor: none``), and the page's ``next-cursor`` names the first
  message it left out. A page always makes progress: its newest message is served alone even
  past the ceiling while it fits the guest's memory, and one that does not is
  ``unavailable``, naming the message, its size and the limit. A message's record line is
  never shorter than the text the guest receives for it (a JSON string decodes to at most
  its own bytes), but a tool result's envelope can be several times its line (``1e15`` is
  written back as ``1000000000000000.0``): once decoded, the page is measured again by what
  the guest receives and cut (or found ``unavailable``) by the same rule.
- *Time.* :meth:`ReadBudget.check` raises :class:`ReadDeadline` once the call's deadline
  has passed: the index checks it between scan chunks (of :data:`SCAN_CHUNK` bytes, a few
  milliseconds each) and the reader before and after decoding. What the index scanned stays
  indexed, so the next read goes on from there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "MESSAGE_OVERHEAD",
    "PAGE_CEILING",
    "SCAN_CHUNK",
    "ReadBudget",
    "ReadDeadline",
]

#: Bytes counted for each message beyond its record line: the canonical ABI's record of
#: five fields (48 bytes) and a tool result's envelope keys.
MESSAGE_OVERHEAD = 128

#: The most record bytes one page of several messages holds, whatever the guest's memory.
PAGE_CEILING = 16 << 20

#: Bytes the index scans between two looks at the deadline (about 2 ms of parsing).
SCAN_CHUNK = 1 << 20


class ReadDeadline(Exception):
    """The read's deadline passed before its page was served; the index keeps its progress.

    Not an ``OSError`` (as ``TimeoutError`` is): the reader turns those into ``unavailable``.
    """


@dataclass(frozen=True, slots=True)
class ReadBudget:
    """The bounds of one read made on a guest's behalf.

    ``memory_bytes`` is what the guest's memory may hold in all (a hook's ``memory_mib``);
    ``deadline`` is ``time.monotonic()`` seconds, the call's own, or ``None``.
    """

    memory_bytes: int
    deadline: float | None = None

    def check(self) -> None:
        """Raise :class:`ReadDeadline` when the deadline has passed."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise ReadDeadline("the read reached the call's time limit")

    def fitting(self, sizes: npt.NDArray[np.int64]) -> int:
        """How many of the newest messages of a page to serve; ``sizes`` are the byte sizes
        of its record lines, oldest first. ``0`` when even the newest one alone is more than
        the guest's memory."""
        import numpy as np  # noqa: PLC0415 - numpy loads on the first read

        costs = np.cumsum(sizes[::-1] + MESSAGE_OVERHEAD)
        room = min(self.memory_bytes, PAGE_CEILING)
        fits = int(np.searchsorted(costs, room, side="right"))
        if fits == 0 and len(costs) and int(costs[0]) <= self.memory_bytes:
            return 1
        return fits
