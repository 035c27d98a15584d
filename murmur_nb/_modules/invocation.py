"""What the module host hands back: an installed module (:class:`ModuleInfo`) and the outcome
of one call (:class:`Invocation`).

Design notes
------------
* **Plain records, no behaviour.** Both are dataclasses the host fills; they live apart from
  the host so that the envelope checks, the audit rows and the exception tree can name them
  without importing the host (no import cycle, no ``TYPE_CHECKING`` guard).
* **A module's failure is data, a host's failure is an exception.** ``Invocation.ok`` false
  with ``error`` set is the module's own answer; host failures raise a
  :class:`~murmur_nb.ModuleHostError` that carries the partial :class:`Invocation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murmur_nb._exceptions import DescriptorProblem
from murmur_nb._files.artifacts import RejectedArtifact, VerifiedArtifact
from murmur_nb.protocol import Descriptor, Envelope, Error, Execution, Request, Requirement

__all__ = ["Invocation", "ModuleInfo"]


@dataclass
class ModuleInfo:
    """One installed module as the host sees it; a refused module lists with its errors.

    ``warnings`` are what the host works around in an accepted module (an unknown skill id
    listed by a capability, say) without refusing it.
    """

    id: str
    path: Path
    descriptor: Descriptor | None
    errors: list[DescriptorProblem] = field(default_factory=list)
    unmet_requirements: list[Requirement] = field(default_factory=list)
    digest: str | None = None
    warnings: list[DescriptorProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the descriptor was accepted."""
        return self.descriptor is not None and not self.errors

    @property
    def needs_setup(self) -> bool:
        """Whether a requirement is unmet ("Needs setup"); ``unmet_requirements`` says how."""
        return bool(self.unmet_requirements)

    @property
    def setup_instructions(self) -> list[str]:
        """One line per unmet requirement: what is missing and how to fix it."""
        return [
            f"{r.kind} {r.name}: {r.detail or 'not available'}" for r in self.unmet_requirements
        ]


@dataclass
class Invocation:
    """The outcome of one :meth:`ModuleHost.invoke <murmur_nb.ModuleHost.invoke>`.

    ``ok`` false with ``error`` set is the *module's* own failure (routed on
    ``error.code``); host failures raise instead. ``execution`` is what the module says it
    actually did, kept on failures too. ``artifacts`` passed re-validation;
    ``rejected_artifacts`` did not and must not be rendered or staged.
    """

    module: str
    capability: str
    request: Request
    ok: bool = False
    result: Any = None
    error: Error | None = None
    warnings: list[str] = field(default_factory=list)
    execution: Execution = field(default_factory=Execution)
    artifacts: list[VerifiedArtifact] = field(default_factory=list)
    rejected_artifacts: list[RejectedArtifact] = field(default_factory=list)
    duration_ms: float = 0.0
    approval: str = "not required"
    stderr: str = ""
    returncode: int | None = None
    envelope: Envelope | None = None
    confinement: str = ""

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def estimated_cost(self) -> float | None:
        """``None`` is *unknown* (never free); ``0.0`` is free."""
        return self.execution.estimated_cost

    @property
    def actual_cost(self) -> float | None:
        """``None`` is *unknown* (never free); ``0.0`` is free."""
        return self.execution.actual_cost
