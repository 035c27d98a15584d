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

from murmur_nb._rules import printable

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
    """Root of every error murmur-nb raises; ``code`` is stable and machine-readable.

    ``except MurmurError`` catches them all; route on ``code`` (``murmur_error`` is this root's
    own, never raised by murmur-nb), never on the message, which says what to do. What a
    module, a guest or a record wrote into the message (a name, a path, its own words) shows
    as it is: control characters but newline and tab, and bidirectional overrides, are
    escapes, and so are lone surrogates, which no notebook could be sent
    (:func:`~murmur_nb._rules.printable`), so a traceback cannot be recoloured, cleared or
    reordered by them.
    """

    code: str = "murmur_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(printable(message) if isinstance(message, str) else message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModuleHostError(MurmurError):
    """A host-side failure while describing or invoking a modproto module.

    When the failure happened during ``ModuleHost.invoke``, ``invocation`` holds what the
    host knew at that point (the request, the ``execution`` the module reported, stderr),
    so a failed paid call's cost is not lost; otherwise it is ``None``. ``code`` is the
    subclass's own (``module_host_error`` is this base's, for a failure no subclass names).
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
    """No installed module answers to the id or capability id given. Nothing ran.

    Raised by ``ModuleHost.describe``, ``invoke`` and ``map`` (and ``check_module``) when the
    module folder does not exist, the id is not a valid module id, or a module id was given
    where a capability id (``"<module-id>.<name>"``) belongs, or the reverse. ``code`` is
    ``module_not_found``; a ``LookupError``. Check the spelling against ``host.modules()``, or
    install the module as ``<home>/modules/<id>/module``.
    """

    code = "module_not_found"


@dataclass(frozen=True, slots=True)
class DescriptorProblem:
    """One describe-time breach: where (``path``) and what is wrong (``detail``).

    A plain record, listed on :attr:`ModuleInfo.errors <murmur_nb.ModuleInfo.errors>` and
    :attr:`InvalidDescriptor.errors <murmur_nb.InvalidDescriptor.errors>`; never raised.

    ``murmur_nb.DescriptorError`` is this same class under its former name (it is a record,
    not an exception, whatever the old name said): kept so existing imports and
    ``isinstance`` checks keep working. New code names ``DescriptorProblem``.
    """

    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


class InvalidDescriptor(ModuleHostError):
    """``describe`` returned a descriptor the host refuses; ``errors`` lists each breach.

    Raised by ``ModuleHost.describe`` and before ``invoke`` runs anything; ``host.modules()``
    lists the same module with ``ok`` false and the same errors instead. ``code`` is
    ``invalid_descriptor``; each :class:`DescriptorProblem` in ``errors`` names the field
    (``path``) and what is wrong (``detail``). Fix the module's descriptor; ``murmur-nb check``
    shows every breach.
    """

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
    descriptor: shrink the folder, or raise the budget. ``code`` is ``module_too_large``.
    """

    code = "module_too_large"


class InvalidInput(ModuleHostError, ValueError):
    """An input the host refuses to send. Nothing ran.

    Raised by ``ModuleHost.invoke`` when the input does not match the capability's
    ``request_schema`` (the message lists each place and why) or is not JSON, when ``extra``
    is not a dict, and by ``map`` for a row or an option it cannot use. ``code`` is
    ``invalid_input``; a ``ValueError``. Fix the input (``host.describe(module_id)`` shows
    the schema) and call again.
    """

    code = "invalid_input"


class ApprovalRequired(ModuleHostError, PermissionError):
    """The capability needs operator approval; ``reasons`` says why. Nothing ran.

    Raised by ``ModuleHost.invoke`` when the policy asks for approval (an unknown cost, paid
    providers, publishing, credentials, external writes). ``code`` is ``approval_required``; a
    ``PermissionError``. Call again with ``approve=True`` (one call) or pre-approve it in
    ``Policy(approved=[...])``.
    """

    code = "approval_required"

    def __init__(self, message: str, *, reasons: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.reasons: list[str] = list(reasons)


class NotGranted(ModuleHostError, PermissionError):
    """The call needs something the module's descriptor does not declare. Nothing ran.

    Raised by ``ModuleHost.invoke`` when staged artifacts are handed to a module that does not
    declare the ``staged`` read root in ``permissions.filesystem_read``. ``code`` is
    ``not_granted``; a ``PermissionError``. Declare that root in the module's descriptor, or
    invoke it without ``staged=``.
    """

    code = "not_granted"


class MissingRequirement(ModuleHostError):
    """The module reports a requirement that is not met here (``available: false``). Nothing
    ran.

    Raised by ``ModuleHost.invoke`` before the module starts; the message lists each unmet
    requirement with the module's own ``detail`` on how to meet it (install a binary,
    download a model). ``code`` is ``missing_requirement``. Meet the requirement, then call
    again: ``describe`` runs again and sees it.
    """

    code = "missing_requirement"


class SandboxUnavailable(ModuleHostError):
    """The policy requires the module sandbox and a guarantee is missing here. Nothing ran.

    ``missing`` names the guarantees (see ``ModuleHost.sandbox``); the message says how to
    get them, or how to choose ``Policy(sandbox="best-effort")``. ``code`` is
    ``sandbox_unavailable``.
    """

    code = "sandbox_unavailable"

    def __init__(self, message: str, *, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing: list[str] = list(missing)


class SandboxWarning(UserWarning):
    """A module ran with ``Policy(sandbox="best-effort")`` while a guarantee was missing.

    The message names what is missing and how to get it; ``host.sandbox`` says which
    guarantee holds. Install what it names, or run such modules only if you trust them.
    """


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
    """The module did not finish within its deadline; its whole process tree was killed.

    Raised by ``ModuleHost.invoke`` after ``deadline_ms`` (the call's, else the policy's), and
    by ``map`` when a long-running job is still unfinished after ``poll_timeout``.
    ``code`` is ``deadline_exceeded``; a ``TimeoutError``. ``invocation`` holds what was
    known (stderr, the request). Raise ``deadline_ms=`` for this call (or the policy's), or
    make the capability long-running with a poll capability.
    """

    code = "deadline_exceeded"


class InvocationCancelled(ModuleHostError):
    """The caller cancelled a running invocation; the module's process tree was killed."""

    code = "cancelled"


class ProtocolViolation(ModuleHostError):
    """The module broke a modproto rule; ``rule`` names which one.

    Raised by ``ModuleHost.invoke`` (and ``describe``) when what the module printed is not
    the one envelope the protocol asks for: not JSON, another request id, a result that
    does not match its ``result_schema``, a crash with no envelope. ``code`` is
    ``protocol_violation``; ``evidence`` shows the exit status, stderr tail and stdout head.
    Fix the module (``murmur-nb check`` names the rule), or report it to its author.
    """

    code = "protocol_violation"

    def __init__(
        self, message: str, *, rule: str, code: str | None = None, invocation: Any = None
    ) -> None:
        super().__init__(message, code=code, invocation=invocation)
        self.rule = rule


class OutputTooLarge(ProtocolViolation):
    """The module printed more than ``max_output_bytes`` on standard output; its process tree
    was killed.

    Raised by ``ModuleHost.invoke``; ``code`` is ``output_too_large``, ``rule`` is
    ``max_output_bytes``, and ``evidence`` shows the head of what it printed. Large results
    belong in an artifact, not in the envelope; or raise ``max_output_bytes=`` for the call.
    """

    code = "output_too_large"


class ArtifactRejected(ModuleHostError):
    """A produced artifact failed re-validation and was neither rendered nor staged.

    The one name of a failed artifact check: the host raises it when an invocation returns
    (and records it on ``Invocation.rejected_artifacts`` as a
    :class:`~murmur_nb.RejectedArtifact`, its public record) and when staging. Its
    confinement and digest subclasses also refuse a module's skill or agent overlay at load
    time (nothing of it is returned); ``artifact_id`` then names that document. ``code`` is
    ``artifact_rejected`` or, on this class itself, ``artifact_missing``,
    ``artifact_too_large`` or ``verification_budget_exceeded``; the subclasses have their own.
    """

    code = "artifact_rejected"

    def __init__(self, message: str, *, artifact_id: str = "", code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.artifact_id = artifact_id


class ConfinementViolation(ArtifactRejected):
    """An artifact (or a skill or overlay document) is not a regular file inside the root it
    names: an absolute or ``..`` path, a link leading out, a root not supplied, a hard link.

    Raised by ``ModuleHost.invoke`` when the module returns, and when staging or loading a
    module's documents; ``code`` is ``confinement_violation``, ``artifact_id`` names the
    artifact. The module must write each artifact as a new file under a root it was given.
    """

    code = "confinement_violation"


class DigestMismatch(ArtifactRejected):
    """A file's SHA-256 is not the digest declared for it, or the digest is malformed.

    Raised by ``ModuleHost.invoke`` when a returned artifact does not hash as the module
    said, by staging and by ``invoke(..., staged=...)`` when a staged file changed since it
    was staged, and when a module's skill or overlay differs from its descriptor. ``code``
    is ``digest_mismatch``, ``artifact_id`` names the file. Invoke the producer again, or
    stage the artifact again.
    """

    code = "digest_mismatch"


class SizeMismatch(ArtifactRejected):
    """A file's size is not the ``bytes`` declared for it.

    Raised by ``ModuleHost.invoke`` when a returned artifact's file has another size than
    the module reported, and when a staged file changed after it was staged. ``code`` is
    ``size_mismatch``, ``artifact_id`` names the file. Invoke the producer again, or stage
    the artifact again.
    """

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
    """A conversation's ``context_id`` is not a plain name. Nothing was read or run.

    Raised by ``read_conversation``, ``ConversationStore`` and the ``HookHost`` events for an
    id that is not 1 to 128 characters of ``A-Z a-z 0-9 . _ -`` starting with a letter or
    digit (never a path). ``code`` is ``invalid_context_id``; a ``ValueError``. Pass the
    ``context_id`` the runtime reported for the task.
    """

    code = "invalid_context_id"


class HookError(MurmurError):
    """A hook could not be built, loaded or called; the base of the hook errors.

    Raised by ``HookHost`` (``unknown_hook``: no hook of that id; ``hook_error``: the host is
    closed), by ``build_python_hook`` and ``build_demo_hook`` (``hook_build_failed``), by
    ``check_hook`` (``hook_not_found``), and when the compiled-hook cache's key is unsafe
    (``insecure_cache_key``). ``code`` says which; the message names the file or hook and the
    fix. A hook that traps or overruns its limits raises nothing: its ``HookResult`` says so.
    """

    code = "hook_error"


class HookConfigError(HookError, ValueError):
    """``murmur.yaml`` could not be used; the message names the path and the fix.

    Raised by ``HookHost.from_config`` and ``HookConfig`` (and ``check_hook(config=...)``)
    for a file that is not YAML, a key of the wrong type or a limit out of range. ``code`` is
    ``invalid_config``; a ``ValueError``.
    """

    code = "invalid_config"


class RenderError(MurmurError):
    """Deprecated, never raised by murmur-nb; the name goes in 0.2 (docs/changes.md).

    A rendering that fails, a file changed since its invocation included, is an error card
    (``Rendering.error_code``); an artifact refused when the module returns it raises
    :class:`ArtifactRejected` from ``invoke``. Kept so ``except RenderError`` still imports;
    making one warns (``DeprecationWarning``). Its ``code`` was ``render_failed``.
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
    """An optional dependency is missing; the message names the extra to install.

    Raised when a feature behind an extra is first used (``render``: PDF, video and Parquet
    rendering; ``hooks``: building a hook with componentize-py; ``dask``: ``client=``).
    ``code`` is ``missing_dependency``; ``package`` and ``extra`` name what is missing. Install
    the extra, ``pip install 'murmur-nb[<extra>]'``, or in a murmur-nb checkout
    ``pip install -e '.[<extra>]'``, and restart the kernel.
    """

    code = "missing_dependency"

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the optional package {package!r}, which is not installed. "
            f"Install it with: pip install 'murmur-nb[{extra}]' (in a murmur-nb checkout: "
            f"pip install -e '.[{extra}]')"
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
