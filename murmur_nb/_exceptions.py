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
    │   └── ArtifactRejected          artifact_too_large, verification_budget_exceeded
    │       ├── ConfinementViolation  confinement_violation
    │       ├── DigestMismatch        digest_mismatch
    │       └── SizeMismatch          size_mismatch
    ├── ConversationReadError         not-granted | invalid-cursor | unavailable
    ├── InvalidContextId              invalid_context_id    (ValueError)
    ├── HookError
    │   └── HookConfigError           invalid_config        (ValueError)
    ├── RenderError                   render_failed         (never raised; deprecated)
    └── MissingDependency             missing_dependency    (ImportError)

The conversation errors keep the WIT seed's own spelling (``not-granted``,
``invalid-cursor``, ``unavailable: <reason>``) because they cross into guests
verbatim; ``str(err)`` is exactly the string a guest receives.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DescriptorProblem",
    "ApprovalRequired",
    "ArtifactRejected",
    "ConfinementViolation",
    "ConversationReadError",
    "DeadlineExceeded",
    "DigestMismatch",
    "HookConfigError",
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

    def __init__(self, message: str, *, errors: Sequence[DescriptorProblem] = ()) -> None:
        super().__init__(message)
        self.errors: list[DescriptorProblem] = list(errors)


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


class DeadlineExceeded(ModuleHostError, TimeoutError):
    code = "deadline_exceeded"


class InvocationCancelled(ModuleHostError):
    """The caller cancelled a running invocation; the module's process tree was killed."""

    code = "cancelled"


class ProtocolViolation(ModuleHostError):
    """The module broke a modproto rule; ``rule`` names which one."""

    code = "protocol_violation"

    def __init__(self, message: str, *, rule: str, code: str | None = None) -> None:
        super().__init__(message, code=code)
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
    """Deprecated, never raised by murmur-nb; the name goes in 0.2 (README, "Changes").

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
