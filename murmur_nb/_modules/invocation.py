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
from murmur_nb._rules import clipped, printable
from murmur_nb._sandbox import RunEvidence, RunResult
from murmur_nb.protocol import Descriptor, Envelope, Error, Execution, Request, Requirement

__all__ = ["Invocation", "ModuleInfo", "Ran", "call_problems"]


def call_problems(
    ok: bool, result_problem: str, verified: int, rejected: int, evidence: RunEvidence | None
) -> list[str]:
    """Why a call whose module answered ``ok`` is no plain ok (the one rule of the
    ``warning`` state; SPEC §1 leaves the state to the host, not the module).

    * its result breaks its ``result_schema`` (``result_problem``);
    * artifacts it reported were rejected (not rendered, not staged: SPEC §1 "Artifacts"),
      so the result is short of what the module said it made;
    * its process ended badly after the envelope was printed (an exit status other than 0,
      a signal): the module says it succeeded, its process says it did not.

    A module that answered ``ok: false`` is an error already and has no problems: exiting
    non-zero after an error envelope is ordinary.
    """
    if not ok:
        return []
    found = [result_problem] if result_problem else []
    if rejected:
        found.append(
            f"{rejected} of {verified + rejected} artifacts the module reported "
            f"{'was' if rejected == 1 else 'were'} rejected: not rendered, not staged "
            "(rejected_artifacts says why)"
        )
    if evidence is not None and evidence.crashed:
        said = f"; its stderr ends with {evidence.last_line[:200]!r}" if evidence.last_line else ""
        found.append(
            f"the module {evidence.ended} after printing its envelope{said}. The result was "
            "kept; a module that succeeded exits with status 0 (one that failed answers "
            "ok: false)"
        )
    return found


@dataclass(repr=False)
class ModuleInfo:
    """One installed module as the host sees it; a refused module lists with its errors.

    ``warnings`` are what the host works around in an accepted module (an unknown skill id
    listed by a capability, say, or a capability no call can reach because another module's
    id is a longer prefix of it) without refusing it. ``evidence`` is how a refused module's
    ``describe`` ended (exit status, stderr tail, the start of its stdout when that was no
    envelope); ``None`` for an accepted module, or when ``describe`` never ran.
    """

    id: str
    path: Path
    descriptor: Descriptor | None
    errors: list[DescriptorProblem] = field(default_factory=list)
    unmet_requirements: list[Requirement] = field(default_factory=list)
    digest: str | None = None
    warnings: list[DescriptorProblem] = field(default_factory=list)
    evidence: RunEvidence | None = None

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

    def __repr__(self) -> str:
        """One line: the id, whether it is accepted, its first capabilities or its first
        error, each cut to a label's length by the one rule (the dataclass repr ran to
        kilobytes a module, a listing to tens of them; four ids of a megabyte each were four
        megabytes of line)."""
        if not self.ok:
            first = self.errors[0] if self.errors else None
            said = f"{first.path}: {first.detail}" if first is not None else "no descriptor"
            more = f" (+{len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
            return f"ModuleInfo({self.id!r}, refused: {clipped(said)!r}{more})"
        assert self.descriptor is not None
        ids = [c.id for c in self.descriptor.capabilities or []]
        shown = ", ".join(printable(clipped(i)) for i in ids[:_REPR_IDS])
        shown += f", +{len(ids) - _REPR_IDS} more" if len(ids) > _REPR_IDS else ""
        state = "needs setup" if self.needs_setup else "ok"
        notes = f", {len(self.warnings)} warnings" if self.warnings else ""
        return f"ModuleInfo({self.id!r}, {state}, capabilities: {shown}{notes})"


#: capability ids a module's one-line repr names; the others are counted
_REPR_IDS = 4


@dataclass(repr=False)
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
    confinement); ``text/plain``, ``repr()`` and ``print()`` show the same short summary
    (as a DataFrame does), never the dataclass's fields, and write what the module said
    (control sequences, a lone surrogate) as escapes.
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
        """``ok``, ``warning`` (the module answered ok, but :attr:`problems` is not empty) or
        ``error``."""
        if not self.ok:
            return "error"
        return "warning" if self.problems else "ok"

    @property
    def problems(self) -> list[str]:
        """Why a successful call is in the ``warning`` state, one sentence each (empty: it is
        not): its result breaks its ``result_schema``, an artifact it reported was rejected,
        or its process exited non-zero (or was killed) after printing its envelope. Each is
        on :attr:`warnings` as well."""
        return call_problems(self.ok, self.result_problem, len(self.artifacts),
                             len(self.rejected_artifacts), self.evidence)  # fmt: skip

    def _repr_html_(self) -> str:
        return invocation_card(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(invocation_text(self))

    def __repr__(self) -> str:
        return invocation_text(self)

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
