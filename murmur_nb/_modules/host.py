"""The modproto v1 module host: describe, approve, invoke, verify, stage, audit.

* **Prepare once, run many** (:meth:`ModuleHost.prepare`): what is the same for every call
  of a capability (resolve it to a ``Target``, :mod:`.catalog`: the verified snapshot is what
  runs; approval, a label, :mod:`.approval`) is decided once into a frozen
  :class:`~.prepared.PreparedCall`, whose ``run`` is the per-call pipeline of values (build
  the request, run it confined, read the envelope, verify artifacts, check the result
  schema). ``invoke`` is ``prepare(...).run(...)``; a batch prepares once for all its rows.
* **Every invocation is audited** (:mod:`.audit`), refused and failed ones too: the row is
  built once when the call ended, from how far it got (by ``invoke`` for a refusal before
  the run, by the prepared call's ``run`` from then on).
* Skills and agent overlays are thin methods here over
  :mod:`murmur_nb._knowledge.knowledge` and :mod:`murmur_nb._knowledge.agent_listing`.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import (
    ApprovalRequired,
    MissingRequirement,
    ModuleHostError,
)
from murmur_nb._files.artifacts import VerifiedArtifact
from murmur_nb._knowledge.knowledge import (
    KnowledgeLog,
    knowledge_warnings,
    warn_about,
)
from murmur_nb._modules.approval import APPROVE_IN_PYTHON, Approvals
from murmur_nb._modules.audit import AuditRow, Called, Reached, audit_frame
from murmur_nb._modules.call import Call, input_problem
from murmur_nb._modules.catalog import Catalog, Target
from murmur_nb._modules.gate import SandboxGate
from murmur_nb._modules.host_knowledge import KnowledgeMethods
from murmur_nb._modules.invocation import Invocation, ModuleInfo
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.prepared import NOT_REQUIRED, THIS_CALL, HostParts, PreparedCall
from murmur_nb._modules.staging import ArtifactStore, StagedArtifact, open_store
from murmur_nb._modules.workspace import Workspace
from murmur_nb._rules import cache_dir, facet_studio_home
from murmur_nb._sandbox import SandboxReport
from murmur_nb._schemas.schemas import ValidatorCache
from murmur_nb.protocol import Capability, Descriptor

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Invocation", "ModuleHost", "ModuleInfo", "PreparedCall", "register_driver"]

#: The drivers above the host that it offers as methods, by method name: ``"map"`` is the
#: batch (:mod:`murmur_nb._batch`). The host never imports a driver (layers point down); the
#: driver's package registers itself with :func:`register_driver` when it is imported, and
#: ``import murmur_nb`` imports it (as does any ``import murmur_nb.<anything>``, which runs
#: the package's ``__init__`` first).
_drivers: dict[str, Callable[..., Any]] = {}


def register_driver(name: str, driver: Callable[..., Any]) -> None:
    """Offer ``driver(host, *args, **options)`` as ``ModuleHost.<name>`` (``"map"`` only)."""
    if name != "map":
        raise ValueError(f"the host offers no driver method {name!r}")
    _drivers[name] = driver


def _since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def _refused(asked: Called, reached: Reached, exc: BaseException, ms: float) -> AuditRow:
    """The audit row of an ``invoke`` that ended before its prepared call ran."""
    if isinstance(exc, ModuleHostError):
        if isinstance(exc, ApprovalRequired):
            reached = (reached[0], "refused", reached[2])
        return AuditRow.of(asked, reached, (exc.code, exc.message), ms, exc.invocation)
    code = "interrupted" if isinstance(exc, KeyboardInterrupt) else "host_error"
    return AuditRow.of(asked, reached, (code, f"{type(exc).__name__}: {exc}"), ms)


class ModuleHost(KnowledgeMethods):
    """Host modproto v1 modules installed under ``<home>/modules/<id>/module``.

    Parameters
    ----------
    home
        The facet-studio home; default ``$FACET_STUDIO_HOME`` else ``~/.facet-studio``.
    policy
        What invocations may be given and when approval is needed; default allows nothing.
    artifact_store
        Folder of the content-addressed staging store; default ``<home>/artifact-store``,
        or, where that cannot be made or written (a shared, read-only module home), the
        private ``<murmur-nb cache>/artifact-store`` (``host.store.root`` says which). A
        folder given here is used or refused (``store_unavailable``), never replaced. A
        root kernel (``sudo -E`` keeps a user's ``HOME``) uses a store only where nobody
        else can change the way to it: its default one goes to the cache's, else to a
        private one of the process; a folder given here is refused with a ``ValueError``
        on first use, before anything is made there.
    runs_dir
        Where per-invocation working folders and fresh write roots live. By default a
        private temporary folder that :meth:`close` removes (stage what you keep). A root
        kernel refuses a folder given here that another account could change the way to
        (theirs, or writable by them, on the way or the folder itself) with a
        ``ValueError`` on first use, before anything is made there.

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
        if self.home.exists() and not self.home.is_dir():
            raise ValueError(
                f"home={str(self.home)!r} is a file, not a facet-studio home: pass the folder "
                "that holds (or will hold) modules/<id>/module"
            )
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError(
                f"policy must be an mnb.Policy, not a {type(policy).__name__}; build one with "
                "mnb.Policy(...) or mnb.Policy.from_mapping(a_dict)"
            )
        self.policy = policy if policy is not None else Policy()
        self._store_path = (
            Path(artifact_store) if artifact_store is not None else self.home / "artifact-store"
        )
        #: where the store goes when the default one cannot be written; ``None``: it was named
        self._private_store = cache_dir() / "artifact-store" if artifact_store is None else None
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
        """The content-addressed staging store (created on first use; see ``artifact_store``).

        Raises
        ------
        ModuleHostError
            ``store_unavailable``: no store can be written (the message names the folder).
        ValueError
            A root kernel's ``artifact_store`` another account could change the way to.
        """
        if self._store is None:
            self._store = open_store(self._store_path, private=self._private_store,
                                     max_bytes=self.policy.max_artifact_bytes)  # fmt: skip
        return self._store

    def close(self) -> None:
        """Kill the sandboxes made ahead for this host's next calls, remove the private
        runs folder (unless ``runs_dir`` was given) and let go of the module snapshots only
        this host held (a prepared call keeps its own). Idempotent."""
        self._gate.close()
        self._workspace.close()
        self._catalog.close()

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
            :meth:`murmur_nb.widgets.LiveRun.in_cell` to see it live below the cell
            (ipywidgets, which murmur-nb always installs, and a notebook front end to show
            it; interrupting the kernel cancels the run). The host supplies no view itself:
            it never imports the widgets.

        Raises
        ------
        ModuleNotFound, InvalidDescriptor, MissingRequirement, InvalidInput,
        ApprovalRequired, NotGranted, DigestMismatch
            Refused before anything ran.
        ValueError
            A root kernel's ``runs_dir`` another account could change the way to: nothing
            ran, nothing was made there.
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
        asked = (datetime.now(UTC), capability, uuid.uuid4().hex)
        prepared = self._prepare(capability, approve=approve, refresh=False, audit=asked)
        return prepared.run(input, deadline_ms=deadline_ms, max_output_bytes=max_output_bytes,
                            extra=extra, staged=staged, validate_input=validate_input,
                            cancel=cancel)  # fmt: skip

    def prepare(
        self, capability: str, *, approve: bool = False, refresh: bool = False
    ) -> PreparedCall:
        """Resolve ``capability`` and decide its approval once; a :class:`PreparedCall` that
        runs it on many inputs (``prepare(...).run(input)`` is :meth:`invoke`).

        Parameters
        ----------
        capability
            ``"<module-id>.<name>"``.
        approve
            Operator approval for every run of this prepared call.
        refresh
            Run ``describe`` now, even when the module's folder is unchanged since the last
            one; a standing approval is then weighed against that descriptor, with no second
            ``describe``. Otherwise the cached descriptor is used unless the folder changed,
            and relying on a standing approval runs ``describe`` once, as ``invoke`` does.

        Raises
        ------
        ModuleNotFound, InvalidDescriptor, MissingRequirement, ApprovalRequired
            Nothing can run (not audited: nothing was invoked).
        """
        return self._prepare(capability, approve=approve, refresh=refresh)

    def _prepare(
        self, capability: str, *, approve: bool, refresh: bool, audit: Called | None = None
    ) -> PreparedCall:
        """:meth:`prepare`; with ``audit`` (``invoke``'s call), a refusal is audited too."""
        t0 = time.perf_counter()
        module, approval = None, "not evaluated"
        try:
            self._gate.check()
            target, fresh = self._ready(capability, refresh=refresh)
            module = target.module_id
            target, approval = self._approval(capability, target, approve=approve,
                                              fresh=fresh)  # fmt: skip
        except BaseException as exc:
            if audit is not None:
                self._keep(_refused(audit, (module, approval, None), exc, _since(t0)))
            raise
        parts = HostParts(self._gate, self._validators, self._workspace, lambda: self.store,
                          self._keep, self._target)  # fmt: skip
        return PreparedCall(capability, target, approval, self.policy, parts)

    def _keep(self, row: AuditRow) -> None:
        with self._lock:
            self._audit.append(row)

    def _ready(self, capability: str, *, refresh: bool = False) -> tuple[Target, bool]:
        """Resolve ``capability`` (and whether ``describe`` just ran for it); refuse when its
        module still needs setup."""
        target, fresh = self._catalog.resolved(capability, refresh=refresh)
        unmet = [r for r in target.descriptor.requirements or [] if not r.available]
        if unmet:
            fixes = "; ".join(f"{r.kind} {r.name}: {r.detail or 'not available'}" for r in unmet)
            raise MissingRequirement(
                f"module {target.module_id!r} needs setup before {capability} can run: {fixes}"
            )
        return target, fresh

    def _approval(
        self, capability: str, target: Target, *, approve: bool, fresh: bool
    ) -> tuple[Target, str]:
        """How the call is approved, or :class:`ApprovalRequired` (nothing runs).

        A standing approval counts only for the module's *current* descriptor, so relying on
        one re-runs ``describe`` (unless ``target`` was just described: ``fresh``) and the
        call goes on with the fresh descriptor.
        """
        if not self.policy.approval_reasons(target.descriptor, target.cap):
            return target, NOT_REQUIRED
        if approve:
            return target, THIS_CALL
        if not fresh:
            target = self._target(capability, refresh=True)
        verdict = self._approvals.verdict(self.policy, target, capability)
        if verdict.reasons:
            raise ApprovalRequired(
                f"{capability} needs operator approval and was not run: "
                + "; ".join(verdict.reasons)
                + f". {APPROVE_IN_PYTHON}",
                reasons=verdict.reasons,
            )
        return target, verdict.label

    # -- batches -----------------------------------------------------------------------

    def map(self, capability: str, inputs: Any, **options: Any) -> Any:
        """Run ``capability`` over every input; one :class:`~murmur_nb.Batch` of rows.

        Named after ``Executor.map``, ``client.map`` and ``Series.map``: one callable over
        an iterable, outcomes in input order. The capability is prepared once
        (:meth:`prepare`: at most one ``describe``, one approval decision) and each row is
        one run of it, audited like :meth:`invoke`; an error is a row, never an exception
        (a module that cannot run at all raises, as ``invoke`` would). More in
        ``docs/batches.md``.

        Parameters
        ----------
        capability : str
            The capability id, as for :meth:`invoke`.
        inputs : list of dict, iterable of dict, pandas.DataFrame or Series of dict
            One input per row; a DataFrame's rows are inputs, its columns their properties
            (a missing value leaves the property out) and its index labels the outcome rows.
            A Series of dicts keeps its index the same way (a Series of plain values is a
            ``TypeError``: ``s.to_frame("name")`` makes it a DataFrame).
        concurrency : int, optional
            Rows run at once; default two per usable core (a container's CPU quota caps the
            cores; on a cluster, two of the largest tasks of rows per worker thread).
        on_invalid : {"raise", "skip"}, default "raise"
            Inputs that break the request schema: refuse the whole batch before anything
            runs (``InvalidInput`` listing them), or keep them as ``invalid_input`` rows and
            run the others.
        retries : int, default 0
            Further attempts of a row whose module answered a *retryable* error.
        backoff : float, default 0.5
            Seconds before the first retry, doubling with each next one.
        approve : bool, default False
            Operator approval for the whole batch, as ``invoke(..., approve=True)`` for one
            call; without it a capability that needs approval refuses the batch, naming the
            estimated cost.
        max_cost : float, optional
            Stop starting rows once the costs reported so far, plus the rows running, could
            pass it; an unknown cost stops a capped batch.
        estimated_cost : float, optional
            The cost of one row, for the approval message and ``max_cost`` before any row
            reported one.
        journal : path or None, default ``<home>/batches/journal.sqlite``
            Where finished rows are kept, so the same ``map`` again skips them (resume);
            ``None`` keeps nothing. A root kernel refuses a journal in a folder another
            account can write (above it too), before anything runs; its default one then
            goes to ``<murmur-nb cache>/batches`` (``batch.journal.path`` says which).
            While a batch runs, a second one of the same capability (and module, run
            options and inputs) on its journal is refused at once (``ModuleHostError``, code
            ``journal_busy``, naming the process running it): it would run every row again.
        progress : "auto", True or False, default "auto"
            A progress bar: in a notebook a widget, in a terminal text, else none.
        background : bool, default False
            Return at once with the batch running; ``batch.wait()`` waits for it and
            ``widgets.BatchView(batch)`` shows it.
        deadline_ms, max_output_bytes, extra
            Each row's, as for :meth:`invoke`.
        poll_every : float, default 0.2
            Seconds between polls of a long-running capability's job.
        poll_timeout : float, default 600
            Seconds a long-running row may poll before it fails (``deadline_exceeded``).
        artifact_bytes : int, default 8 MiB
            On a cluster, artifacts up to this size come back to the kernel's store; larger
            ones stay on the worker (their ``location``).
        client : dask.distributed.Client, optional
            Run the rows on its workers instead of in this process.

        Returns
        -------
        Batch
            The rows: ``to_pandas()``, ``batch[i]`` (an :class:`Invocation`), ``progress``,
            ``approval``, ``retry_failed()``, ``cancel()``.

        The batch is a driver above the host, on its public API (:mod:`murmur_nb._batch`);
        this method only hands the call to it (the host imports nothing of it: see
        :func:`register_driver`).
        """
        driver = _drivers.get("map")
        if driver is None:  # pragma: no cover - murmur_nb's __init__ registers it
            raise RuntimeError("no batch driver is registered: import murmur_nb first")
        return driver(self, capability, inputs, **options)

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
        return input_problem(Call(target.cap.id, value, ""), target, self._validators, self.policy)

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
