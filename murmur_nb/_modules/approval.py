"""Standing approvals, each pinned to the descriptor it approved.

An approval (``host.approve`` or the policy's ``approved`` list, pinned to what the host sees
first) counts only while ``describe`` returns the same descriptor digest and the folder the
same code digest; a voided one adds a reason naming both digests and what changed.
:meth:`Approvals.verdict` is the one place that weighs the policy's reasons against the pins.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from murmur_nb._modules.catalog import Target
from murmur_nb._modules.policy import Policy
from murmur_nb._schemas.descriptor import describe_changes
from murmur_nb.protocol import Descriptor

__all__ = ["APPROVE_IN_PYTHON", "Approvals", "Pin", "Verdict"]

#: how a refusal for want of approval says to approve, in Python (the ``murmur-nb`` command
#: says its own flags in its place)
APPROVE_IN_PYTHON = "Approve it with host.approve(...) or invoke(..., approve=True)"


@dataclass(frozen=True)
class Pin:
    """A standing approval: who gave it and the descriptor digest it holds for."""

    digest: str
    descriptor: Descriptor
    source: str  # "operator" | "allow-list"
    code: str = ""  # digest of the module folder's snapshot when approved

    @property
    def label(self) -> str:
        """How the audit shows the approval, e.g. ``approved (operator, sha256:0123…)``."""
        return f"approved ({self.source}, {self.digest[:19]}…)"


@dataclass(frozen=True)
class Verdict:
    """Whether a capability may run now: ``reasons`` empty means yes."""

    reasons: list[str] = field(default_factory=list)
    pin: Pin | None = None

    @property
    def label(self) -> str:
        """The audit's approval column when the call may run."""
        return self.pin.label if self.pin is not None else "not required"


class Approvals:
    """The pins of one host, by capability id (thread-safe)."""

    def __init__(self) -> None:
        self._pins: dict[str, Pin] = {}
        self._lock = threading.Lock()

    def pin(self, target: Target, capability: str) -> None:
        """Record an operator approval of ``capability`` pinned to ``target``'s descriptor."""
        with self._lock:
            self._pins[capability] = Pin(
                target.digest, target.descriptor, "operator", target.code
            )

    def revoke(self, capability: str) -> None:
        with self._lock:
            self._pins.pop(capability, None)

    def verdict(self, policy: Policy, target: Target, capability: str) -> Verdict:
        """The policy's reasons to ask approval, unless a pin still holds for ``target``."""
        reasons = policy.approval_reasons(target.descriptor, target.cap)
        if not reasons:
            return Verdict()
        pin, voided = self._standing(policy, target, capability)
        if pin is not None:
            return Verdict(pin=pin)
        return Verdict(reasons + voided)

    def _standing(
        self, policy: Policy, target: Target, capability: str
    ) -> tuple[Pin | None, list[str]]:
        """The pin that approves ``capability`` now, or the changes that voided one."""
        with self._lock:
            pin = self._pins.get(capability)
            if pin is None and capability in policy.approved:
                pin = Pin(target.digest, target.descriptor, "allow-list", target.code)
                self._pins[capability] = pin
        if pin is None:
            return None, []
        if pin.digest == target.digest and pin.code != target.code:
            return None, [
                f"the {pin.source} approval of {capability} was pinned to the module's code "
                f"{pin.code[:19]}…, and its folder now hashes to {target.code[:19]}…: the "
                "executable or a file beside it changed, so the approval no longer counts"
            ]
        if pin.digest == target.digest:
            return pin, []
        changes = describe_changes(pin.descriptor, target.descriptor) or ["the descriptor changed"]
        return None, [
            f"the {pin.source} approval of {capability} was pinned to descriptor "
            f"{pin.digest[:19]}…, and describe now returns {target.digest[:19]}…; it no "
            "longer counts. What changed: " + "; ".join(changes)
        ]
