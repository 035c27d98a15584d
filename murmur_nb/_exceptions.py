"""The one exception tree of murmur-nb.

Every error carries a stable, machine-readable ``code``; callers route on it and never
on the message text. Messages say what happened, to what, and what to do next.
Where a caller would naturally catch a builtin, the error inherits it as well
(``DeadlineExceeded`` is a ``TimeoutError``, ``InvalidInput`` a ``ValueError``).

::

    MurmurError
    ├── ModuleHostError
    │   ├── ModuleNotFound            module_not_found      (LookupError)
    │   ├── InvalidDescriptor         invalid_descriptor    (.errors)
    │   │   └── ModuleTooLarge        module_too_large
    │   ├── InvalidInput              invalid_input         (ValueError)
    │   ├── ApprovalRequired          approval_required     (PermissionError, .reasons)
    │   ├── NotGranted                not_granted           (PermissionError)
    │   ├── MissingRequirement        missing_requirement
    │   ├── DeadlineExceeded          deadline_exceeded     (TimeoutError)
    │   ├── InvocationCancelled       cancelled
    │   ├── ProtocolViolation         protocol_violation    (.rule)
    │   │   └── OutputTooLarge        output_too_large
    │   └── ArtifactRejected          artifact_missing, artifact_too_large,
    │       │                         verification_budget_exceeded
    │       ├── ConfinementViolation  confinement_violation
    │       ├── DigestMismatch        digest_mismatch
    │       └── SizeMismatch          size_mismatch
    ├── ConversationReadError         not-granted | invalid-cursor | unavailable
    ├── InvalidContextId              invalid_context_id    (ValueError)
    ├── HookError
    │   └── HookConfigError           invalid_config        (ValueError)
    ├── RenderError                   render_failed         (never raised; deprecated)
    └── MissingDependency             missing_dependency    (ImportError)

    KeyboardInterrupt
    └── BatchInterrupted              interrupted           (.batch; not a MurmurError)

The conversation errors keep the WIT seed's own spelling (``not-granted``,
``invalid-cursor``, ``unavailable: <reason>``) because they cross into guests
verbatim; ``str(err)`` is exactly the string a guest receives.
"""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "DescriptorProblem",
    "ApprovalRequired",
    "ArtifactRejected",
    "BatchInterrupted",
    "ConfinementViolation",
    "ConversationReadError",
    "DeadlineExceeded",
    "DigestMismatch",
    "HookConfigError",
    "HookConfigWarning",
    "HookError",
    "InvalidContextId",
    "InvalidDescriptor",
    "InvalidInput",
    "InvocationCancelled",
    "MissingDependency",
    "MissingRequirement",
    "ModuleHostError",
    "ModuleNotFound",
    "ModuleTooLarge",
    "MurmurError",
    "NotGranted",
    "OutputTooLarge",
    "ProtocolViolation",
    "RenderError",
    "SandboxUnavailable",
    "SandboxWarning",
    "SizeMismatch",
    "ClusterWarning",
    "warn_if_plain_cluster",
]


class MurmurError(Exception):
    """Root of every error murmur-nb raises; ``code`` is stable and machine-readable."""

    code: str = "murmur_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModuleHostError(MurmurError):
    """A host-side failure while describing or invoking a modproto module.

    When the failure happened during ``ModuleHost.invoke``, ``invocation`` holds what the
    host knew at that point (the request, the ``execution`` the module reported, stderr),
    so a failed paid call's cost is not lost; otherwise it is ``None``.
    """

    code = "module_host_error"
    #: The partial :class:`~murmur_nb.Invocation` (typed loosely: this module sits below the
    #: host and imports none of it).
    invocation: Any = None

    def __init__(
        self, message: str, *, code: str | None = None, invocation: Any = None
    ) -> None:
        super().__init__(message, code=code)
        if invocation is not None:
            self.invocation = invocation

    @property
    def evidence(self) -> Any:
        """The module run's :class:`~murmur_nb.RunEvidence` (exit status or signal, stderr
        tail, stdout head), or ``None`` when the module never ran."""
        return getattr(self.invocation, "evidence", None)

    def __str__(self) -> str:
        evidence = self.evidence
        if evidence is None:
            return self.message
        return "\n".join([self.message, *evidence.lines()])

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error left uncaught in a cell: the message, the
        module's evidence and the cell's own line, not the host's frames."""
        red, bold, off = "\x1b[31m", "\x1b[1m", "\x1b[0m"
        lines = [f"{red}{bold}{type(self).__name__}{off} ({self.code}): {self.message}"]
        if self.evidence is not None:
            lines += self.evidence.lines()
        lines += _caller_lines(self.__traceback__)
        if self.invocation is not None:
            lines.append("(sys.last_value.invocation holds the whole record)")
        return lines


def _caller_lines(tb: TracebackType | None) -> list[str]:
    """``in <cell> line 3: host.invoke(...)``: the innermost frame outside murmur_nb."""
    package = str(Path(__file__).parent)
    found = [
        frame
        for frame in traceback.extract_tb(tb)
        if not frame.filename.startswith(package) and "threading.py" not in frame.filename
    ]
    if not found:
        return []
    frame = found[-1]
    cell = "ipykernel_" in frame.filename or frame.filename.startswith("<ipython-input")
    where = "your cell" if cell else frame.filename
    return [f"in {where}, line {frame.lineno}: {(frame.line or '').strip()}"]


class ModuleNotFound(ModuleHostError, LookupError):
    code = "module_not_found"


@dataclass(frozen=True, slots=True)
class DescriptorProblem:
    """One describe-time breach: where (``path``) and what is wrong (``detail``).

    A plain record, listed on :attr:`ModuleInfo.errors <murmur_nb.ModuleInfo.errors>` and
    :attr:`InvalidDescriptor.errors <murmur_nb.InvalidDescriptor.errors>`; never raised.
    """

    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


class InvalidDescriptor(ModuleHostError):
    """``describe`` returned a descriptor the host refuses; ``errors`` lists each breach."""

    code = "invalid_descriptor"

    def __init__(
        self, message: str, *, errors: Sequence[DescriptorProblem] = (), evidence: Any = None
    ) -> None:
        super().__init__(message)
        self.errors: list[DescriptorProblem] = list(errors)
        self._evidence = evidence

    @property
    def evidence(self) -> Any:
        """How ``describe`` ended (:class:`~murmur_nb.RunEvidence`: exit status, stderr tail,
        stdout head), when the refusal came from its run; ``None`` otherwise."""
        return self._evidence if self._evidence is not None else super().evidence


class ModuleTooLarge(InvalidDescriptor):
    """The module folder is past the host's budget for hashing it (``Policy.max_module_entries``
    / ``max_module_bytes``) or holds a sparse file; it is refused without being read.

    A refusal of the module like any :class:`InvalidDescriptor` (so ``except
    InvalidDescriptor`` still catches it), with its own code because the fix is not in the
    descriptor: shrink the folder, or raise the budget.
    """

    code = "module_too_large"


class InvalidInput(ModuleHostError, ValueError):
    code = "invalid_input"


class ApprovalRequired(ModuleHostError, PermissionError):
    """The capability needs operator approval; ``reasons`` says why. Nothing ran."""

    code = "approval_required"

    def __init__(self, message: str, *, reasons: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.reasons: list[str] = list(reasons)


class NotGranted(ModuleHostError, PermissionError):
    code = "not_granted"


class MissingRequirement(ModuleHostError):
    code = "missing_requirement"


class SandboxUnavailable(ModuleHostError):
    """The policy requires the module sandbox and a guarantee is missing here. Nothing ran.

    ``missing`` names the guarantees (see ``ModuleHost.sandbox``); the message says how to
    get them, or how to choose ``Policy(sandbox="best-effort")``.
    """

    code = "sandbox_unavailable"

    def __init__(self, message: str, *, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing: list[str] = list(missing)


class SandboxWarning(UserWarning):
    """A module ran with ``Policy(sandbox="best-effort")`` while a guarantee was missing."""


class HookConfigWarning(UserWarning):
    """A hook setting is not what it seems to say. ``murmur.yaml`` grants a hook less than
    it reads: ``read: yes`` (a string, not the YAML boolean ``true``), ``conversations:``,
    ``raed:``; the hook still loads and runs, default-deny (SPEC §3). Or an environment
    variable of the hooks is unusable (``MURMUR_NB_CACHE_MAX_MB=lots``) and its default is
    used. The warning names the key or variable and the fix."""


class ClusterWarning(UserWarning):
    """``map`` or ``replay`` was given a Dask client whose scheduler takes plain ``tcp://``:
    anyone who can reach it (another account, a network-granted module under
    ``network_isolation="none"``) can run code on its workers."""


class DeadlineExceeded(ModuleHostError, TimeoutError):
    code = "deadline_exceeded"


class InvocationCancelled(ModuleHostError):
    """The caller cancelled a running invocation; the module's process tree was killed."""

    code = "cancelled"


class ProtocolViolation(ModuleHostError):
    """The module broke a modproto rule; ``rule`` names which one."""

    code = "protocol_violation"

    def __init__(
        self, message: str, *, rule: str, code: str | None = None, invocation: Any = None
    ) -> None:
        super().__init__(message, code=code, invocation=invocation)
        self.rule = rule


class OutputTooLarge(ProtocolViolation):
    code = "output_too_large"


class ArtifactRejected(ModuleHostError):
    """A produced artifact failed re-validation and was neither rendered nor staged.

    The one name of a failed artifact check: the host raises it when an invocation returns
    (and records it on ``Invocation.rejected_artifacts`` as a
    :class:`~murmur_nb.RejectedArtifact`, its public record) and when staging. Its
    confinement and digest subclasses also refuse a module's skill or agent overlay at load
    time (nothing of it is returned); ``artifact_id`` then names that document.
    """

    code = "artifact_rejected"

    def __init__(self, message: str, *, artifact_id: str = "", code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.artifact_id = artifact_id


class ConfinementViolation(ArtifactRejected):
    code = "confinement_violation"


class DigestMismatch(ArtifactRejected):
    code = "digest_mismatch"


class SizeMismatch(ArtifactRejected):
    code = "size_mismatch"


class ConversationReadError(MurmurError):
    """A ``read-messages`` failure. ``str(err)`` is the exact WIT error string.

    ``code`` is ``not-granted``, ``invalid-cursor`` or ``unavailable``; for
    ``unavailable`` the string is ``"unavailable: <reason>"``.
    """

    code = "unavailable"

    def __init__(self, code: str, reason: str = "") -> None:
        text = f"{code}: {reason}" if code == "unavailable" else code
        super().__init__(text, code=code)
        self.reason = reason


class InvalidContextId(MurmurError, ValueError):
    code = "invalid_context_id"


class HookError(MurmurError):
    code = "hook_error"


class HookConfigError(HookError, ValueError):
    """``murmur.yaml`` could not be used; the message names the path and the fix."""

    code = "invalid_config"


class RenderError(MurmurError):
    """Deprecated, never raised by murmur-nb; the name goes in 0.2 (docs/changes.md).

    A rendering that fails, a file changed since its invocation included, is an error card
    (``Rendering.error_code``); an artifact refused when the module returns it raises
    :class:`ArtifactRejected` from ``invoke``. Kept so ``except RenderError`` still imports;
    making one warns (``DeprecationWarning``).
    """

    code = "render_failed"

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        warnings.warn(
            "RenderError is never raised by murmur-nb and goes in 0.2: a failed rendering, a "
            "changed file included, is an error card (Rendering.error_code); an artifact "
            "refused by invoke raises ArtifactRejected",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(message, code=code)


class MissingDependency(MurmurError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    code = "missing_dependency"

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the optional package {package!r}, which is not installed. "
            f"Install it with: pip install 'murmur-nb[{extra}]'"
        )
        self.package = package
        self.extra = extra


_WARNED_SCHEDULERS: set[str] = set()


def warn_if_plain_cluster(client: Any) -> None:
    """Warn once per scheduler when ``client`` talks to it in plain ``tcp://``."""
    address = str(getattr(getattr(client, "scheduler", None), "address", "") or "")
    if not address.startswith("tcp://") or address in _WARNED_SCHEDULERS:
        return
    _WARNED_SCHEDULERS.add(address)
    warnings.warn(
        f"the Dask scheduler at {address} takes plain tcp:// with no authentication: any "
        "process on this machine that can reach it (another account, or a module granted "
        "the network under Policy(network_isolation='none')) can run code on its workers, "
        "as the account that runs them. Start the cluster with "
        "LocalCluster(..., security=True, dashboard_address='127.0.0.1:0') (TLS with "
        "credentials made for this cluster), or give the scheduler a Security of your own",
        ClusterWarning,
        stacklevel=3,
    )


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a foreground ``map``; the message says what stopped and how to resume.

    A ``KeyboardInterrupt``, not a :class:`MurmurError`: a script still stops, and ``except
    KeyboardInterrupt`` still catches it. ``batch`` is the interrupted batch, its finished rows
    kept. IPython and Jupyter show the message alone (``_render_traceback_``), not the frames
    of the host's and the batch's threads; it is raised ``from None``, so a terminal's
    traceback does not show them either.
    """

    code = "interrupted"

    def __init__(self, message: str, batch: Any = None) -> None:
        super().__init__(message)
        self.batch = batch

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this exception: one line."""
        return [f"BatchInterrupted: {self.message}"]
