"""A capability prepared once and run many times: :class:`PreparedCall`.

``ModuleHost.prepare`` does what is the same for every call of one capability (resolve it to
the accepted descriptor, its digest and the verified snapshot; decide approval, a label and
its pin) and freezes the outcome here, with the validators, gate and workspace the runs need.
:meth:`PreparedCall.run` is then the per-call pipeline and nothing else: build the request
(:mod:`.call`) -> launch it confined (:mod:`.gate`, a :class:`~.invocation.Ran`) -> read the
envelope (:mod:`.envelope`) -> verify the artifacts -> check the result schema -> the
:class:`Invocation`, and its audit row, built once however the run ends.

``invoke`` is ``prepare(...).run(...)``. A driver that runs one capability many times (a
batch, a Dask worker, a Run button) prepares once and runs each input, so a standing approval
is weighed (and ``describe`` run) once, not once per row.

**What a prepared call does not follow.** It runs the snapshot it was prepared with, so an
edit of the module folder afterwards never runs under its approval. Whether a run should
*also* refuse once the live folder no longer resolves to the prepared digests is the
caller's choice: ``run(..., if_unchanged=True)`` looks first (a ``stat`` walk; ``describe``
only when the folder changed) and refuses with code ``module_changed``, audited; a batch
asks for it on every row.
"""

from __future__ import annotations

import errno
import functools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from murmur_nb._exceptions import (
    ArtifactRejected,
    InvalidDescriptor,
    ModuleHostError,
    ModuleNotFound,
    ProtocolViolation,
)
from murmur_nb._files.artifacts import (
    RejectedArtifact,
    VerifiedArtifact,
    artifact_warnings,
    rejection,
    verify_artifact,
)
from murmur_nb._modules.audit import AuditRow
from murmur_nb._modules.call import MODULE_CHANGED, Built, Call, build_request, input_problem
from murmur_nb._modules.catalog import Target
from murmur_nb._modules.envelope import read_envelope
from murmur_nb._modules.gate import SandboxGate
from murmur_nb._modules.invocation import Invocation, Ran, call_problems
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.staging import ArtifactStore, StagedArtifact
from murmur_nb._modules.workspace import Workspace
from murmur_nb._rules import compact_json
from murmur_nb._sandbox import RunEvidence
from murmur_nb._schemas.bounded import check
from murmur_nb._schemas.schemas import ValidatorCache
from murmur_nb.protocol import Capability, Descriptor, Envelope, Request

__all__ = ["NOT_REQUIRED", "THIS_CALL", "HostParts", "PreparedCall", "Verified"]

#: The approval label of a capability the policy lets run as it is.
NOT_REQUIRED = "not required"
#: The approval label of a call approved by its caller (``approve=True``).
THIS_CALL = "approved (this call)"


#: what ``exec`` says when the module's own file cannot run (no such file, not executable,
#: not a format the kernel runs, a link loop, busy being written, a folder, a noexec mount)
NOT_RUNNABLE = frozenset({errno.ENOENT, errno.EACCES, errno.ENOEXEC, errno.ENOTDIR,
                          errno.ELOOP, errno.ETXTBSY, errno.EISDIR, errno.EPERM})  # fmt: skip


def _since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


@dataclass(frozen=True)
class HostParts:
    """What a prepared call runs with, lent by its host: shared, thread-safe parts."""

    gate: SandboxGate
    validators: ValidatorCache
    workspace: Workspace
    store: Callable[[], ArtifactStore]
    keep: Callable[[AuditRow], None]
    resolve: Callable[[str], Target]


@dataclass(frozen=True)
class Verified:
    """The artifact step's value: the verified, the rejected, and the warnings about the
    admitted ones."""

    artifacts: tuple[VerifiedArtifact, ...]
    rejected: tuple[RejectedArtifact, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class PreparedCall:
    """One capability, resolved and approved once, ready to run on many inputs.

    Made by :meth:`ModuleHost.prepare <murmur_nb.ModuleHost.prepare>`; ``invoke`` is
    ``prepare(...).run(...)``. It holds the accepted descriptor and its digest, the code
    digest and the verified snapshot that every :meth:`run` executes, the approval label
    every run's audit row and :class:`~murmur_nb.Invocation` carry, and the policy it was
    prepared under. Each run is sandboxed, checked and audited like any ``invoke``.

    Examples
    --------
    A notebook that sends many inputs to one capability::

        call = host.prepare("demo.thumbnail", approve=True)  # describe + approval, once
        print(call.approval, call.digest)
        for path in paths:
            inv = call.run({"path": path})  # build, run confined, verify, audit
    """

    capability: str
    target: Target
    approval: str
    policy: Policy
    parts: HostParts = field(repr=False, compare=False)

    @property
    def module(self) -> str:
        """The id of the module that runs."""
        return self.target.module_id

    @property
    def descriptor(self) -> Descriptor:
        """The accepted descriptor the call was prepared (and approved) against."""
        return self.target.descriptor

    @property
    def digest(self) -> str:
        """The descriptor's digest (``sha256:...``)."""
        return self.target.digest

    @property
    def code(self) -> str:
        """The digest of the module's verified snapshot: the code every run executes."""
        return self.target.code

    @property
    def snapshot(self) -> Path:
        """The read-only snapshot folder every run executes."""
        return self.target.snapshot

    @functools.cached_property
    def _program(self) -> Path:
        """The snapshot's ``module``, the program every run starts."""
        return self.target.snapshot / "module"

    # -- checks ------------------------------------------------------------------------

    def input_problem(self, value: Any) -> str | None:
        """Why :meth:`run` would refuse ``value`` (strict JSON, the request schema, within
        the policy's budgets), or ``None`` when it would be sent."""
        return input_problem(Call(self.capability, value, ""), self.target,
                             self.parts.validators, self.policy)  # fmt: skip

    def changed(self) -> str | None:
        """Why the live module folder no longer resolves to what this call was prepared with
        (its descriptor or code digest differs, or it no longer describes at all), or
        ``None``. A ``stat`` walk of the folder; ``describe`` runs only when it changed."""
        try:
            now = self.parts.resolve(self.capability)
        except (InvalidDescriptor, ModuleNotFound) as exc:
            return _changed("the module", f"it no longer resolves: {exc.message}",
                            "fix the module, then ")  # fmt: skip
        if (now.digest, now.code) != (self.digest, self.code):
            return _changed(f"module {self.module!r}", "its descriptor or code digest differs")
        return None

    # -- running -----------------------------------------------------------------------

    def run(
        self,
        input: Any = None,
        *,
        deadline_ms: int | None = None,
        max_output_bytes: int | None = None,
        extra: dict[str, Any] | None = None,
        staged: Sequence[StagedArtifact] = (),
        validate_input: bool = True,
        checked: bool = False,
        cancel: threading.Event | None = None,
        if_unchanged: bool = False,
        ahead: bool = True,
    ) -> Invocation:
        """Run the prepared capability on ``input``; the checked :class:`Invocation`.

        The parameters are :meth:`ModuleHost.invoke <murmur_nb.ModuleHost.invoke>`'s, and
        ``checked``: ``input`` is what strict JSON gives back and matched the request schema
        already (:meth:`input_problem` said ``None``; a batch checks each row as it starts),
        so neither is done again; ``if_unchanged``: first refuse (code ``module_changed``,
        nothing runs) when the live module folder no longer resolves to this call's digests
        (:meth:`changed`); ``ahead=False``: make no sandbox ahead for the next call (one made
        ahead is still used). A batch passes it: its rows keep every core busy already, and a
        sandbox made ahead only moves the same work to another thread (docs/sandbox.md).

        Raises
        ------
        InvalidInput, NotGranted, DigestMismatch, ModuleHostError (``module_changed``)
            Refused before anything ran.
        DeadlineExceeded, OutputTooLarge, ProtocolViolation, InvocationCancelled
            The module ran and its tree was killed, or it broke an envelope rule.
        """
        call = Call(self.capability, input, uuid.uuid4().hex, deadline_ms=deadline_ms,
                    max_output_bytes=max_output_bytes, extra=extra, staged=staged,
                    validate_input=validate_input, checked=checked, cancel=cancel,
                    ahead=ahead)  # fmt: skip
        return self._audited(call, if_unchanged=if_unchanged)

    def _audited(self, call: Call, *, if_unchanged: bool) -> Invocation:
        """The run's pipeline, and its audit row built once however it ends."""
        asked = (datetime.now(UTC), call.capability, call.request_id)
        t0 = time.perf_counter()
        grants = None
        try:
            self.parts.gate.check()
            if if_unchanged and (why := self.changed()) is not None:
                raise ModuleHostError(why, code=MODULE_CHANGED)
            built = self._build(call)
            wire = built.request.wire()  # what the module receives
            grants = wire["grants"]
            ran = self._launch(call, built, wire, t0)
            inv = self._checked(ran, read_envelope(ran))
        except ModuleHostError as exc:
            reached = (self.module, self.approval, grants)
            self.parts.keep(AuditRow.of(asked, reached, (exc.code, exc.message), _since(t0),
                                        exc.invocation))  # fmt: skip
            raise
        except BaseException as exc:
            code = "interrupted" if isinstance(exc, KeyboardInterrupt) else "host_error"
            outcome = (code, f"{type(exc).__name__}: {exc}")
            self.parts.keep(AuditRow.of(asked, (self.module, self.approval, grants), outcome,
                                        _since(t0)))  # fmt: skip
            raise
        reached = (self.module, self.approval, grants)
        self.parts.keep(AuditRow.of(asked, reached, AuditRow.outcome_of(inv), inv.duration_ms,
                                    inv))  # fmt: skip
        return inv

    def _build(self, call: Call) -> Built:
        """The request the module receives, decided here (:func:`.call.build_request`)."""
        parts = self.parts
        return build_request(call, self.target, policy=self.policy, store=parts.store,
                             staged_view=parts.gate.staged_view, validators=parts.validators,
                             workspace=parts.workspace)  # fmt: skip

    def _launch(self, call: Call, built: Built, wire: dict[str, Any], t0: float) -> Ran:
        """Run ``module invoke`` of the verified snapshot on the built request, confined, in
        a private working folder: the process outcome (with the sandbox's warning when a
        guarantee is missing and the policy is best-effort).

        An ``OSError`` is the module's (rule ``executable``) only when ``exec`` said its file
        cannot run (:data:`NOT_RUNNABLE`); while the host plans the sandbox, or for any other
        reason (no descriptors or memory left in the kernel), it is the host's ``host_error``.
        """
        request, gate = built.request, self.parts.gate
        exe = self._program
        payload = compact_json(wire)
        with self.parts.workspace.cwd(in_sandbox=gate.makes_cwd) as cwd:
            try:
                how = gate.launch(
                    [str(exe), "invoke"],
                    cwd,
                    exe.parent,
                    request.roots or {},
                    list((request.binaries or {}).values()),
                    network=tuple(request.grants.network or ()),
                )
            except OSError as exc:
                raise self._host_failed("could not prepare the sandbox for", exc) from exc
            try:
                confinement, warnings = how.confinement, gate.warning()
                run = gate.run(
                    how,
                    payload,
                    cwd=cwd,
                    deadline_s=request.deadline_ms / 1000.0,
                    max_output_bytes=request.max_output_bytes,
                    cancel=call.cancel,
                    ahead=call.ahead,
                )
            except OSError as exc:
                if exc.errno not in NOT_RUNNABLE:
                    raise self._host_failed("could not start", exc) from exc
                raise ProtocolViolation(
                    f"module {self.module!r} could not be started ({exc}); {exe} must be an "
                    "executable with an absolute interpreter path (there is no PATH)",
                    rule="executable",
                ) from exc
            finally:  # the run closed it; not when interrupted before (a close twice is none)
                how.close()
        return Ran(
            module=self.module,
            capability=call.capability,
            request=request,
            approval=self.approval,
            confinement=confinement,
            warnings=(*built.warnings, *warnings),
            run=run,
            evidence=RunEvidence.of(run.returncode, run.stderr_tail),
            started=t0,
        )

    def _host_failed(self, what: str, exc: OSError) -> ModuleHostError:
        """The host's own failure to run the module: not the module's fault, said so."""
        return ModuleHostError(
            f"the host {what} module {self.module!r}: {exc}. This is the kernel's side, "
            "not the module's: free what the kernel holds (open files, memory, processes) "
            "or restart it, and run the call again",
            code="host_error",
        )

    def _checked(self, ran: Ran, envelope: Envelope) -> Invocation:
        """The last steps: verify the artifacts, check the result against its schema, then
        assemble the :class:`Invocation`, once; what makes a successful call a ``warning``
        (:func:`.invocation.call_problems`) is on its warnings too."""
        verified = self._verify_artifacts(envelope, ran.request, self.target.cap)
        problem = self._result_problem(envelope)
        problems = call_problems(envelope.ok, problem, len(verified.artifacts),
                                 len(verified.rejected), ran.evidence)  # fmt: skip
        return ran.invocation(
            ok=envelope.ok,
            result=envelope.result,
            error=envelope.error,
            execution=envelope.execution,
            envelope=envelope,
            warnings=[*envelope.warnings, *ran.warnings, *verified.warnings, *problems],
            artifacts=list(verified.artifacts),
            rejected_artifacts=list(verified.rejected),
            result_problem=problem,
        )

    def _verify_artifacts(self, envelope: Envelope, request: Request, cap: Capability) -> Verified:
        """Re-validate every reported artifact within the policy's size cap and time budget:
        the verified ones, the rejected ones (kept aside, said once: on
        ``rejected_artifacts``), and the warnings about admitted ones."""
        policy = self.policy
        declared = set(cap.artifact_schemas or [])
        roots = request.roots or {}
        deadline = time.monotonic() + policy.verify_budget_ms / 1000.0
        verified: list[VerifiedArtifact] = []
        rejected: list[RejectedArtifact] = []
        warnings: list[str] = []
        for artifact in envelope.execution.artifacts or []:
            try:
                verified.append(
                    verify_artifact(
                        artifact, roots, max_bytes=policy.max_artifact_bytes, deadline=deadline
                    )
                )
            except ArtifactRejected as exc:
                rejected.append(rejection(artifact, exc))
            else:
                warnings += artifact_warnings(artifact, declared)
        return Verified(tuple(verified), tuple(rejected), tuple(warnings))

    def _result_problem(self, envelope: Envelope) -> str:
        """How a successful result breaks its ``result_schema`` (a warning state, not a
        refusal); ``""`` when it matches or there is none."""
        target, cap, policy = self.target, self.target.cap, self.policy
        if not (envelope.ok and cap.result_schema):
            return ""
        schema = (target.descriptor.result_schemas or {})[cap.result_schema]
        validators = self.parts.validators
        validator = validators.get(target.digest, "result", cap.result_schema, schema)
        fast = validators.fast(target.digest, "result", cap.result_schema, schema)
        found = check(validator, envelope.result, budget=policy.max_pattern_work,
                      steps=policy.max_schema_steps, limit=1, fast=fast, fast_refusal=True)
        if not found:
            return ""
        return f"result does not match result_schema {cap.result_schema!r}: {found[0].message}"


def _changed(subject: str, why: str, fix: str = "") -> str:
    """The message of a run refused because its module is no longer what was prepared."""
    return (
        f"{subject} changed after the call was prepared ({why}): it was not run; {fix}"
        "prepare it again (for a batch: run map() again) to approve and run the new code"
    )
