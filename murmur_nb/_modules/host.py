"""The modproto v1 module host: describe, approve, invoke, verify, stage, audit.

* **invoke is a pipeline of values** (:meth:`ModuleHost._audited`): resolve the capability
  (a ``Target``, :mod:`.catalog`: the verified snapshot is what runs), approval (a label,
  :mod:`.approval`), build the request (``Built``, :mod:`.call`), run it confined (a
  :class:`~.invocation.Ran` with its evidence, through :mod:`.gate`), read the envelope
  (:mod:`.envelope`), verify artifacts (:class:`Verified`), check the result schema (a
  problem or none). Each step returns its own value, warnings included; the
  :class:`Invocation` is assembled once at the end, or by the step that refuses, for the
  error to carry (``exc.invocation``, ``exc.evidence``).
* **Every invocation is audited** (:mod:`.audit`), refused and failed ones too: the row is
  built once when the call ended, from how far it got.
* Skills and agent overlays are thin methods here over
  :mod:`murmur_nb._knowledge.knowledge` and :mod:`murmur_nb._knowledge.agent_listing`.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import (
    ApprovalRequired,
    ArtifactRejected,
    InvalidDescriptor,
    InvalidInput,
    MissingRequirement,
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
from murmur_nb._knowledge.knowledge import (
    KnowledgeLog,
    knowledge_warnings,
    warn_about,
)
from murmur_nb._modules.approval import Approvals
from murmur_nb._modules.audit import AuditRow, audit_frame
from murmur_nb._modules.call import MODULE_CHANGED, Built, Call, build_request, checked_input
from murmur_nb._modules.catalog import Catalog, Target
from murmur_nb._modules.envelope import read_envelope
from murmur_nb._modules.gate import SandboxGate
from murmur_nb._modules.host_knowledge import KnowledgeMethods
from murmur_nb._modules.invocation import Invocation, ModuleInfo, Ran
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.staging import ArtifactStore, StagedArtifact
from murmur_nb._modules.workspace import Workspace
from murmur_nb._rules import facet_studio_home
from murmur_nb._sandbox import RunEvidence, SandboxReport, run_launched
from murmur_nb._schemas.bounded import check
from murmur_nb._schemas.schemas import ValidatorCache
from murmur_nb.protocol import Capability, Descriptor, Envelope, Request

if TYPE_CHECKING:
    import pandas as pd

    from murmur_nb._modules.batch.batch import Batch

__all__ = ["Invocation", "ModuleHost", "ModuleInfo"]


def _since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def _changed(subject: str, why: str, fix: str = "") -> ModuleHostError:
    """The refusal of a batch row whose module is no longer what the batch approved."""
    return ModuleHostError(
        f"{subject} changed after the batch started ({why}): this row was not run; {fix}run "
        "map() again to approve and run the new code",
        code=MODULE_CHANGED,
    )


@contextmanager
def _resolves(call: Call) -> Iterator[None]:
    """For a batch row, a module that no longer resolves at all (its new describe fails or is
    refused, as when a row reads a file an editor is still writing, or the module is gone) is
    a changed module, not a failed row: the approved code is not what would run."""
    try:
        yield
    except (InvalidDescriptor, ModuleNotFound) as exc:
        if call.expect is None:
            raise
        raise _changed("the module", f"it no longer resolves: {exc.message}",
                       "fix the module, then ") from exc  # fmt: skip


def _unchanged(call: Call, target: Target) -> None:
    """Refuse a batch row whose module no longer resolves to what the batch approved."""
    if call.expect is not None and (target.digest, target.code) != call.expect:
        raise _changed(f"module {target.module_id!r}", "its descriptor or code digest differs")


@dataclass(frozen=True)
class Verified:
    """The artifact step's value: the verified, the rejected, and the warnings about the
    admitted ones."""

    artifacts: tuple[VerifiedArtifact, ...]
    rejected: tuple[RejectedArtifact, ...]
    warnings: tuple[str, ...]


class ModuleHost(KnowledgeMethods):
    """Host modproto v1 modules installed under ``<home>/modules/<id>/module``.

    Parameters
    ----------
    home
        The facet-studio home; default ``$FACET_STUDIO_HOME`` else ``~/.facet-studio``.
    policy
        What invocations may be given and when approval is needed; default allows nothing.
    artifact_store
        Folder of the content-addressed staging store; default ``<home>/artifact-store``.
    runs_dir
        Where per-invocation working folders and fresh write roots live. By default a
        private temporary folder that :meth:`close` removes (stage what you keep).

    Examples
    --------
    >>> with ModuleHost(home="/nonexistent") as host:
    ...     host.modules()
    []
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        policy: Policy | None = None,
        artifact_store: str | os.PathLike[str] | None = None,
        *,
        runs_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.home = Path(home) if home is not None else facet_studio_home()
        self.policy = policy if policy is not None else Policy()
        self._store_path = (
            Path(artifact_store) if artifact_store is not None else self.home / "artifact-store"
        )
        self._store: ArtifactStore | None = None
        self._workspace = Workspace(runs_dir)
        self._lock = threading.RLock()
        self._approvals = Approvals()
        self._validators = ValidatorCache()
        self._audit: list[AuditRow] = []
        self._knowledge_log = KnowledgeLog()
        self._gate = SandboxGate(lambda: self.policy)
        self._catalog = Catalog(
            lambda: self.modules_dir, lambda: self.policy, self._workspace, self._gate
        )

    # -- resources ---------------------------------------------------------------------

    @property
    def modules_dir(self) -> Path:
        return self.home / "modules"

    @property
    def store(self) -> ArtifactStore:
        """The content-addressed staging store (created on first use)."""
        if self._store is None:
            self._store = ArtifactStore(self._store_path, max_bytes=self.policy.max_artifact_bytes)
        return self._store

    def close(self) -> None:
        """Remove the private runs folder (unless ``runs_dir`` was given). Idempotent."""
        self._workspace.close()

    def __enter__(self) -> ModuleHost:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def sandbox(self) -> SandboxReport:
        """Which confinement guarantees hold for module processes on this machine, and how.

        ``print(host.sandbox)`` lists each guarantee (filesystem, read-only roots, network,
        process tree, process isolation) with the mechanism enforcing it, or MISSING.
        """
        return self._gate.report

    # -- describe ----------------------------------------------------------------------

    def describe(self, module_id: str) -> Descriptor:
        """Run ``module describe`` now and return the accepted descriptor.

        Raises
        ------
        ModuleNotFound
            No such module folder.
        InvalidDescriptor
            The describe envelope or descriptor breaks a SPEC §1 rule; ``.errors`` lists
            each breach as a :class:`~murmur_nb.DescriptorProblem` (path and detail).

        Warns
        -----
        KnowledgeWarning
            The module is accepted, but a capability lists an unknown skill id, an id is
            duplicated or a token estimate is not positive (also on ``ModuleInfo.warnings``).
        """
        self._gate.check()
        descriptor = self._catalog.accepted(module_id, refresh=True)
        warn_about(module_id, knowledge_warnings(descriptor))
        return descriptor

    def modules(self) -> list[ModuleInfo]:
        """Every module folder under ``<home>/modules``, sorted by id, refused ones included."""
        return self._catalog.infos()

    def _target(self, capability: str, *, refresh: bool = False) -> Target:
        return self._catalog.target(capability, refresh=refresh)

    def capability(self, capability: str) -> tuple[Descriptor, Capability]:
        """The module's current descriptor and the capability ``capability`` names.

        Re-runs ``describe``, like :meth:`describe`.

        Raises
        ------
        ModuleNotFound
            No installed module owns the id, or its module does not offer it.
        InvalidDescriptor
            The owning module was refused.
        """
        target = self._target(capability, refresh=True)
        return target.descriptor, target.cap

    # -- approval ----------------------------------------------------------------------

    def approval_reasons(self, capability: str) -> list[str]:
        """Why ``capability`` needs approval right now; empty when it may run as is.

        Re-runs ``describe``, so a standing approval is checked against the module's
        current descriptor; a voided approval adds a reason that says what changed.
        """
        self._gate.check()
        target = self._target(capability, refresh=True)
        return self._approvals.verdict(self.policy, target, capability).reasons

    def approve(self, capability: str) -> str:
        """Record an operator approval pinned to the current descriptor; return its digest."""
        self._gate.check()
        target = self._target(capability, refresh=True)
        self._approvals.pin(target, capability)
        return target.digest

    def revoke(self, capability: str) -> None:
        """Forget any standing approval of ``capability``."""
        self._approvals.revoke(capability)

    # -- staging -----------------------------------------------------------------------

    def stage(self, artifact: VerifiedArtifact) -> StagedArtifact:
        """Copy a verified artifact into the content-addressed store for another module.

        Pass the result to a consumer with ``invoke(..., staged=[staged])``: the store is
        supplied as the read-only root ``"staged"`` (the consumer must declare it in
        ``permissions.filesystem_read``) and ``staged.ref()`` names the file inside it.
        """
        if not isinstance(artifact, VerifiedArtifact):
            raise TypeError(
                "host.stage() takes an artifact from inv.artifacts (verified); rejected or "
                "unverified artifacts are never staged"
            )
        return self.store.stage(artifact)

    # -- invoke ------------------------------------------------------------------------

    def invoke(
        self,
        capability: str,
        input: Any = None,
        *,
        approve: bool = False,
        deadline_ms: int | None = None,
        max_output_bytes: int | None = None,
        extra: dict[str, Any] | None = None,
        staged: Sequence[StagedArtifact] = (),
        validate_input: bool = True,
        cancel: threading.Event | None = None,
        progress: Callable[..., Invocation] | bool | None = None,
    ) -> Invocation:
        """Invoke ``capability`` with ``input`` and return the checked :class:`Invocation`.

        Parameters
        ----------
        capability
            ``"<module-id>.<name>"``.
        input
            The capability's input; validated against its ``request_schema`` first.
            ``None`` means ``{}``.
        approve
            Operator approval for this one call.
        deadline_ms, max_output_bytes
            Override the policy's bounds for this call.
        extra
            Additional root-level request fields; host fields always win.
        staged
            Staged artifacts the consumer reads through the read-only root ``"staged"``;
            each is re-verified before the module starts.
        validate_input
            ``False`` sends ``input`` without checking it against the ``request_schema``
            (it must still be JSON). The module checker uses it to see how a module answers
            input it cannot use; a module must survive any input, so this grants nothing.
        cancel
            Setting this event (from another thread: a Cancel button) stops the run: the
            module's whole process tree is killed and :class:`InvocationCancelled` raised.
        progress
            A view that shows the run while it runs and returns its invocation, called as
            ``progress(host, capability, input, **the other arguments)``: pass
            :meth:`murmur_nb.widgets.LiveRun.in_cell` to see it live below the cell (needs
            ``murmur-nb[widgets]``; interrupting the kernel cancels the run). The host
            supplies no view itself: it never imports the widgets.

        Raises
        ------
        ModuleNotFound, InvalidDescriptor, MissingRequirement, InvalidInput,
        ApprovalRequired, NotGranted, DigestMismatch
            Refused before anything ran.
        DeadlineExceeded, OutputTooLarge, ProtocolViolation, InvocationCancelled
            The module ran and its tree was killed, or it broke an envelope rule.
        """
        if progress is not None and progress is not False:  # False: no view, as in 0.1.0
            if not callable(progress):
                raise TypeError(
                    "progress takes a view, not a flag: pass "
                    "progress=murmur_nb.widgets.LiveRun.in_cell to show the run below the cell"
                )
            shown: Invocation = progress(
                self, capability, input, approve=approve, deadline_ms=deadline_ms,
                max_output_bytes=max_output_bytes, extra=extra, staged=staged, cancel=cancel,
                validate_input=validate_input,
            )  # fmt: skip
            return shown
        call = Call(
            capability,
            input,
            uuid.uuid4().hex,
            approve=approve,
            deadline_ms=deadline_ms,
            max_output_bytes=max_output_bytes,
            extra=extra,
            staged=staged,
            validate_input=validate_input,
            cancel=cancel,
        )
        return self._audited(call)

    def _invoke_planned(
        self, capability: str, input: Any, expect: tuple[str, str], **options: Any
    ) -> Invocation:
        """:meth:`invoke` for a batch row: refused with code ``module_changed`` unless the
        module resolves to ``expect`` (the descriptor and code digests the batch was approved
        for), checked on the same resolution that picks the snapshot which runs."""
        return self._audited(Call(capability, input, uuid.uuid4().hex, expect=expect, **options))

    def _audited(self, call: Call) -> Invocation:
        """The pipeline, and its audit row built once however the call ends.

        Each step refuses (raises) or returns its own value to the next; how far the call
        got (module, approval, grants) is what the row of a refusal records.
        """
        asked = (datetime.now(UTC), call.capability, call.request_id)
        t0 = time.perf_counter()
        module, approval, grants = None, "not evaluated", None
        try:
            self._gate.check()
            with _resolves(call):
                target = self._ready(call.capability)
                module = target.module_id
                target, approval = self._approval(call, target)
            _unchanged(call, target)
            built = self._build(call, target)
            grants = built.request.grants.model_dump(mode="json")
            ran = self._run(call, target, approval, built)
            inv = self._checked(ran, read_envelope(ran), target, t0)
        except ModuleHostError as exc:
            if isinstance(exc, ApprovalRequired):
                approval = "refused"
            reached = (module, approval, grants)
            outcome = (exc.code, exc.message)
            self._keep(AuditRow.of(asked, reached, outcome, _since(t0), exc.invocation))
            raise
        except BaseException as exc:
            code = "interrupted" if isinstance(exc, KeyboardInterrupt) else "host_error"
            outcome = (code, f"{type(exc).__name__}: {exc}")
            self._keep(AuditRow.of(asked, (module, approval, grants), outcome, _since(t0)))
            raise
        reached = (module, approval, grants)
        self._keep(AuditRow.of(asked, reached, AuditRow.outcome_of(inv), inv.duration_ms, inv))
        return inv

    def _keep(self, row: AuditRow) -> None:
        with self._lock:
            self._audit.append(row)

    def _ready(self, capability: str) -> Target:
        """Resolve ``capability``; refuse when its module still needs setup."""
        target = self._target(capability)
        unmet = [r for r in target.descriptor.requirements or [] if not r.available]
        if unmet:
            fixes = "; ".join(f"{r.kind} {r.name}: {r.detail or 'not available'}" for r in unmet)
            raise MissingRequirement(
                f"module {target.module_id!r} needs setup before {capability} can run: {fixes}"
            )
        return target

    def _approval(self, call: Call, target: Target) -> tuple[Target, str]:
        """How the call is approved, or :class:`ApprovalRequired` (nothing runs).

        A standing approval counts only for the module's *current* descriptor, so relying on
        one re-runs ``describe`` and the call goes on with the fresh descriptor.
        """
        if not self.policy.approval_reasons(target.descriptor, target.cap):
            return target, "not required"
        if call.approve:
            return target, "approved (this call)"
        target = self._target(call.capability, refresh=True)
        verdict = self._approvals.verdict(self.policy, target, call.capability)
        if verdict.reasons:
            raise ApprovalRequired(
                f"{call.capability} needs operator approval and was not run: "
                + "; ".join(verdict.reasons)
                + ". Approve it with host.approve(...) or invoke(..., approve=True)",
                reasons=verdict.reasons,
            )
        return target, verdict.label

    def _build(self, call: Call, target: Target) -> Built:
        """The request the module receives, decided here (:func:`.call.build_request`)."""
        return build_request(
            call,
            target,
            policy=self.policy,
            store=lambda: self.store,
            staged_view=self._gate.staged_view,
            validators=self._validators,
            workspace=self._workspace,
        )

    def _run(self, call: Call, target: Target, approval: str, built: Built) -> Ran:
        """Run ``module invoke`` of the module's verified snapshot on the built request,
        confined, in a private working folder: the process outcome (with the sandbox's
        warning when a guarantee is missing and the policy is best-effort)."""
        request, module_id = built.request, target.module_id
        exe = target.snapshot / "module"
        payload = json.dumps(
            request.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False
        ).encode()
        with self._workspace.cwd(in_sandbox=self._gate.makes_cwd) as cwd:
            try:
                how = self._gate.launch(
                    [str(exe), "invoke"],
                    cwd,
                    exe.parent,
                    request.roots or {},
                    list((request.binaries or {}).values()),
                    network=tuple(request.grants.network or ()),
                )
                confinement, warnings = how.confinement, self._gate.warning()
                run = run_launched(
                    how,
                    payload,
                    cwd=cwd,
                    deadline_s=request.deadline_ms / 1000.0,
                    max_output_bytes=request.max_output_bytes,
                    cancel=call.cancel,
                )
            except OSError as exc:
                raise ProtocolViolation(
                    f"module {module_id!r} could not be started ({exc}); {exe} must be an "
                    "executable with an absolute interpreter path (there is no PATH)",
                    rule="executable",
                ) from exc
        return Ran(
            module=module_id,
            capability=call.capability,
            request=request,
            approval=approval,
            confinement=confinement,
            warnings=(*built.warnings, *warnings),
            run=run,
            evidence=RunEvidence.of(run.returncode, run.stderr_tail),
        )

    def _checked(self, ran: Ran, envelope: Envelope, target: Target, t0: float) -> Invocation:
        """The last steps: verify the artifacts, check the result against its schema, then
        assemble the :class:`Invocation`, once."""
        verified = self._verify_artifacts(envelope, ran.request, target.cap)
        problem = self._result_problem(envelope, target)
        schema_warning = [problem] if problem else []
        return ran.invocation(
            ok=envelope.ok,
            result=envelope.result,
            error=envelope.error,
            execution=envelope.execution,
            envelope=envelope,
            warnings=[*envelope.warnings, *ran.warnings, *verified.warnings, *schema_warning],
            artifacts=list(verified.artifacts),
            rejected_artifacts=list(verified.rejected),
            result_problem=problem,
            duration_ms=_since(t0),
        )

    def _verify_artifacts(self, envelope: Envelope, request: Request, cap: Capability) -> Verified:
        """Re-validate every reported artifact within the policy's size cap and time budget:
        the verified ones, the rejected ones (kept aside, said once: on
        ``rejected_artifacts``), and the warnings about admitted ones."""
        declared = set(cap.artifact_schemas or [])
        roots = request.roots or {}
        deadline = time.monotonic() + self.policy.verify_budget_ms / 1000.0
        verified: list[VerifiedArtifact] = []
        rejected: list[RejectedArtifact] = []
        warnings: list[str] = []
        for artifact in envelope.execution.artifacts or []:
            try:
                verified.append(
                    verify_artifact(
                        artifact, roots, max_bytes=self.policy.max_artifact_bytes, deadline=deadline
                    )
                )
            except ArtifactRejected as exc:
                rejected.append(rejection(artifact, exc))
            else:
                warnings += artifact_warnings(artifact, declared)
        return Verified(tuple(verified), tuple(rejected), tuple(warnings))

    def _result_problem(self, envelope: Envelope, target: Target) -> str:
        """How a successful result breaks its ``result_schema`` (a warning state, not a
        refusal); ``""`` when it matches or there is none."""
        cap = target.cap
        if not (envelope.ok and cap.result_schema):
            return ""
        schema = (target.descriptor.result_schemas or {})[cap.result_schema]
        validator = self._validators.get(target.digest, "result", cap.result_schema, schema)
        fast = self._validators.fast(target.digest, "result", cap.result_schema, schema)
        policy = self.policy
        found = check(validator, envelope.result, budget=policy.max_pattern_work,
                      steps=policy.max_schema_steps, limit=1, fast=fast, fast_refusal=True)
        if not found:
            return ""
        return f"result does not match result_schema {cap.result_schema!r}: {found[0].message}"

    # -- batches -----------------------------------------------------------------------

    def map(self, capability: str, inputs: Any, **options: Any) -> Batch:
        """Run ``capability`` over every input; one :class:`~murmur_nb.Batch` of rows.

        Named after ``Executor.map``, ``client.map`` and ``Series.map``: one callable over
        an iterable, outcomes in input order. Each row is one :meth:`invoke`; an error is a
        row, never an exception. ``inputs`` is a list or iterable of input dicts, or a
        pandas DataFrame (each row an input, missing values left out). The options
        (``concurrency``, ``on_invalid``, ``retries``, ``backoff``, ``approve``,
        ``max_cost``, ``estimated_cost``, ``journal``, ``progress``, ``background``,
        ``deadline_ms``, ``poll_every``, ``poll_timeout``, ``artifact_bytes``, ``client``:
        a ``dask.distributed.Client`` runs the rows on its workers)
        are described in :mod:`murmur_nb._modules.batch` and the README's "Running over a dataset".
        """
        from murmur_nb._modules.batch.batch import Batch  # noqa: PLC0415 - _batch sits above the host

        return Batch.start(self, capability, inputs, **options)

    def resolve(self, capability: str, *, refresh: bool = False) -> Target:
        """``capability`` resolved against its module, as ``invoke`` resolves it: the
        accepted descriptor and its digest, the code digest and the verified snapshot.

        For callers that run one capability many times (``map``): ``refresh=True`` runs
        ``describe`` again; otherwise the module's folder is only compared (a ``stat`` walk)
        with what was last described.
        """
        return self._target(capability, refresh=refresh)

    def input_problem(self, target: Target, value: Any) -> str | None:
        """Why ``invoke`` would refuse ``value`` for ``target`` (from :meth:`resolve`), with
        the same rules and budgets, or ``None`` when it would be sent."""
        try:
            checked_input(Call(target.cap.id, value, ""), target, self._validators, self.policy)
        except InvalidInput as exc:
            return exc.message
        return None

    # -- audit -------------------------------------------------------------------------

    def audit(self) -> pd.DataFrame:
        """One row per invocation (also refused and failed ones), oldest first.

        Columns: time, module, capability, request_id, grants, approval, duration_ms,
        outcome (``ok``, the module's error code, or the host code), ok, estimated_cost and
        actual_cost (nullable: ``<NA>`` is *unknown*, ``0`` is free), artifacts (digests),
        rejected_artifacts (``id:code``), warnings (count), message, confinement, exit (how
        the module's process ended: ``exited with status 1``, ``was killed by SIGKILL
        (status -9)``; empty when nothing ran) and stderr_tail (its last stderr lines).
        """
        with self._lock:
            rows = [row.as_dict() for row in self._audit]
        return audit_frame(rows)
