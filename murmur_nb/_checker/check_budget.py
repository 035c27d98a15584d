"""A capability's time budget in the module checker: each call's deadline fits what is left.

``--budget 5`` promises a check that ends. Not starting inputs once the time is spent is not
enough: an input started just before the end runs for as long as the module takes, up to the
policy's deadline (60 s by default), and a schema that allows a 30 s wait gets one at its
``maximum``. So every call of a capability (boundary, random and refused inputs, the poll)
runs with the policy's deadline or what is left of the budget, whichever is shorter, and no
call starts with less than :data:`MIN_CALL_S` left. A call the budget stops is *left out*,
like one never started: the module's own deadline was never reached, so it is no
``invoke.bounds`` failure. The report counts both, per capability and kind.
"""

from __future__ import annotations

import math
import time
from typing import Literal

from murmur_nb._exceptions import DeadlineExceeded

__all__ = ["MIN_CALL_S", "Budget", "LeftOut"]

#: The least time worth starting a module for (a call sets up its sandbox first).
MIN_CALL_S = 0.25
#: Why an input has no outcome: never started, or stopped when the budget ran out.
LeftOut = Literal["unsent", "stopped"]


class Budget:
    """The time one capability's calls may take (``seconds`` <= 0: no limit), under a
    policy whose deadline is ``policy_ms``."""

    def __init__(self, seconds: float, policy_ms: int) -> None:
        self.seconds = seconds
        self.policy_ms = policy_ms
        self.ends = time.monotonic() + seconds if seconds > 0 else math.inf

    def call_deadline_ms(self) -> int | None:
        """The deadline for a call starting now, or ``None`` when too little time is left."""
        left = self.ends - time.monotonic()
        if left < MIN_CALL_S:
            return None
        return self.policy_ms if left == math.inf else min(self.policy_ms, int(left * 1000))

    def stopped(self, deadline_ms: int, outcome: object) -> bool:
        """Whether a call run with ``deadline_ms`` was stopped by the budget (not by the
        policy's own deadline)."""
        return isinstance(outcome, DeadlineExceeded) and deadline_ms < self.policy_ms

    def words(self) -> str:
        """``the 5 s budget``, as a report names it."""
        return f"the {self.seconds:g} s budget"
