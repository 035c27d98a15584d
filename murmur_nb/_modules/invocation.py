"""What the module host hands back: an installed module (:class:`ModuleInfo`) and the outcome
of one call (:class:`Invocation`).

* **Plain records, no behaviour.** Both are dataclasses the host fills; they live apart from
  the host so that the envelope checks, the audit rows and the exception tree can name them
  without importing the host (no import cycle, no ``TYPE_CHECKING`` guard).
* **Assembled once.** ``invoke`` is a pipeline of values (request built -> :class:`Ran`,
  the process outcome -> the checked envelope -> verified artifacts); the
  :class:`Invocation` is built from them once, at the end, or, when a step refuses what the
  module did, once by :meth:`Ran.invocation` for the error to carry.
* **A module's failure is data, a host's failure is an exception.** ``Invocation.ok`` false
  with ``error`` set is the module's own answer; host failures raise a
  :class:`~murmur_nb.ModuleHostError` that carries the partial :class:`Invocation`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murmur_nb._exceptions import DescriptorProblem
from murmur_nb._files.artifacts import RejectedArtifact, VerifiedArtifact
from murmur_nb._render.card import invocation_card, invocation_text
from murmur_nb._sandbox import RunEvidence, RunResult
from murmur_nb.protocol import Descriptor, Envelope, Error, Execution, Request, Requirement

__all__ = ["Invocation", "ModuleInfo", "Ran"]


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
    ``rejected_artifacts`` did not and must not be rendered or staged. ``evidence`` is how
    the module's process ended (exit status or signal, stderr tail, and the start of stdout
    when it was no envelope); ``result_problem`` says how a successful result breaks its
    ``result_schema`` (``""`` when it does not: see :attr:`state`).

    In a notebook it displays as a compact card (outcome, result, artifacts, warnings,
    confinement); ``text/plain`` is a short summary, not the dataclass repr.
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
    evidence: RunEvidence | None = None
    result_problem: str = ""

    @property
    def state(self) -> str:
        """``ok``, ``warning`` (a result that breaks its ``result_schema``) or ``error``."""
        if not self.ok:
            return "error"
        return "warning" if self.result_problem else "ok"

    def _repr_html_(self) -> str:
        return invocation_card(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(invocation_text(self))

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


@dataclass(frozen=True)
class Ran:
    """The process outcome: what was sent, how it ran confined, how the process ended.

    ``warnings`` are the host's so far (how the request was built, a missing sandbox
    guarantee); the envelope's own come later.
    """

    module: str
    capability: str
    request: Request
    approval: str
    confinement: str
    warnings: tuple[str, ...]
    run: RunResult
    evidence: RunEvidence
    #: ``time.perf_counter()`` when the call's pipeline started
    started: float = field(default_factory=time.perf_counter)

    def invocation(self, **fields: Any) -> Invocation:
        """The :class:`Invocation` of this run, with ``fields`` (the envelope's facts).

        Its ``duration_ms`` is the whole call's, however it ends: from the start of the
        pipeline (input check, request, launch) to now, the process's run included.
        """
        fields.setdefault("duration_ms", (time.perf_counter() - self.started) * 1000.0)
        fields.setdefault("evidence", self.evidence)
        fields.setdefault("warnings", list(self.warnings))
        return Invocation(
            module=self.module,
            capability=self.capability,
            request=self.request,
            approval=self.approval,
            confinement=self.confinement,
            stderr=self.run.stderr_text,
            returncode=self.run.returncode,
            **fields,
        )
