"""The modproto v1 module host: describe, approve, invoke, verify, stage, audit.

Design notes
------------
* **One enforcement point.** Everything a module is given is built here, never by the
  module: the request envelope fields, roots, grants and binaries (see :mod:`._policy`),
  the bounds. ``input`` is validated against the capability's ``request_schema`` before
  anything runs; ``extra`` is inlined at the request root and can never shadow a host field.
* **Descriptors are cached** by the ``stat`` of the module executable and its folder, so the
  hot path of :meth:`ModuleHost.invoke` does not re-run ``describe``. :meth:`describe`
  always re-runs it, and so does any call that relies on a standing approval.
* **Approval pinning.** An approval (``approve()`` or the policy allow-list) is pinned to the
  SHA-256 of the module's canonical descriptor *and* to the SHA-256 of every file of its
  folder (:func:`code_digest`). When ``describe`` later returns another descriptor, or the
  code changed behind the same descriptor, the approval no longer counts, and the reasons
  say what changed.
* **Sandbox.** Every module process runs confined (:mod:`.sandbox`); ``host.sandbox`` says
  which guarantees hold and ``Policy.sandbox`` what to do when one is missing.
* **Envelope rules** live in :mod:`._envelope`; the audit rows and their DataFrame in
  :mod:`._audit`; skills and agent overlays (listing, verified loading, budgets) in
  :mod:`.knowledge` and the agent's capability list in :mod:`.agent_listing`, behind thin
  methods here.
* **Hostile output is bounded.** What a module prints may nest at most
  :data:`~.nesting.MAX_JSON_DEPTH` levels; its schemas' patterns run on RE2 (linear
  time); its artifacts are size-capped, hashed within a time budget, and read later only
  through the descriptor that was verified. What a caller passes is checked first
  (:mod:`.request`: strict JSON, bounds, ``extra`` keys as a Go decoder folds them).
* **Every invocation is audited**, also the refused and failed ones; host failures keep the
  partial :class:`Invocation` on the exception (``exc.invocation``).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import (
    ApprovalRequired,
    ArtifactRejected,
    DeadlineExceeded,
    InvalidDescriptor,
    InvalidInput,
    MissingRequirement,
    ModuleHostError,
    ModuleNotFound,
    NotGranted,
    OutputTooLarge,
    ProtocolViolation,
    SandboxUnavailable,
    SandboxWarning,
)
from murmur_nb._modules.agent_listing import AgentListing, agent_listing
from murmur_nb._modules.artifacts import (
    STAGED_ROOT,
    ArtifactStore,
    RejectedArtifact,
    StagedArtifact,
    VerifiedArtifact,
    rejection,
    staged_view,
    verify_artifact,
)
from murmur_nb._modules.audit import _audit_frame, _fill_row, _new_row
from murmur_nb._modules.descriptor import (
    DescriptorError,
    code_digest,
    describe_changes,
    descriptor_digest,
    parse_describe_output,
    schema_validator_class,
)
from murmur_nb._modules.envelope import _check_envelope
from murmur_nb._modules.knowledge import (
    KnowledgeDocument,
    KnowledgeLog,
    SkillSelection,
    find_document,
    knowledge_warnings,
    load_document,
    select_skills,
    warn_about,
)
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.request import canonical_path, check_bounds, shadowing_keys, strict_json
from murmur_nb._modules.runner import RunResult, run_process
from murmur_nb._modules.sandbox import Launch, SandboxReport, launch, sandbox_report
from murmur_nb.protocol import (
    PROTOCOL_ID,
    Capability,
    Descriptor,
    Envelope,
    Error,
    Execution,
    Overlay,
    Request,
    Requirement,
    Root,
    Skill,
)

if TYPE_CHECKING:
    import pandas as pd
    from jsonschema.protocols import Validator

__all__ = ["Invocation", "ModuleHost", "ModuleInfo", "default_home"]

_MODULE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HOST_FIELDS = frozenset(Request.model_fields) - {"extra"}


def default_home() -> Path:
    """``$FACET_STUDIO_HOME``, else ``~/.facet-studio``."""
    env = os.environ.get("FACET_STUDIO_HOME")
    return Path(env) if env else Path.home() / ".facet-studio"


@dataclass
class ModuleInfo:
    """One installed module as the host sees it; a refused module lists with its errors.

    ``warnings`` are what the host works around in an accepted module (an unknown skill id
    listed by a capability, say) without refusing it.
    """

    id: str
    path: Path
    descriptor: Descriptor | None
    errors: list[DescriptorError] = field(default_factory=list)
    unmet_requirements: list[Requirement] = field(default_factory=list)
    digest: str | None = None
    warnings: list[DescriptorError] = field(default_factory=list)

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
    """The outcome of one :meth:`ModuleHost.invoke`.

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


@dataclass
class _Described:
    key: tuple[int, ...]
    descriptor: Descriptor | None
    errors: list[DescriptorError]
    digest: str | None
    code: str = ""


@dataclass
class _Pin:
    digest: str
    descriptor: Descriptor
    source: str  # "operator" | "allow-list"
    code: str = ""  # code_digest() of the module folder when approved


_STAT_KEY_MAX_ENTRIES = 512


def _stat_key(module_dir: Path, module_file: Path) -> tuple[int, ...]:
    """A cheap fingerprint of a module's installed files, to tell when to describe again.

    A module is often a launcher beside its real code (``module`` runs ``main.py``), so the
    whole folder counts, not just the launcher: any file added, removed, replaced or edited
    changes the key. Past ``_STAT_KEY_MAX_ENTRIES`` entries the key cannot be trusted and
    becomes unique, so a huge folder is simply described on every call.
    """
    fs = module_file.stat()
    key = [fs.st_ino, fs.st_size, fs.st_mtime_ns, fs.st_ctime_ns]
    pending = [str(module_dir)]
    seen = 0
    while pending:
        with os.scandir(pending.pop()) as it:
            entries = sorted((e for e in it if e.name != "__pycache__"), key=lambda e: e.name)
        for entry in entries:
            seen += 1
            if seen > _STAT_KEY_MAX_ENTRIES:
                return (*key, time.monotonic_ns())
            st = entry.stat(follow_symlinks=False)
            key += (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return tuple(key)


class ModuleHost:
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
        self.home = Path(home) if home is not None else default_home()
        self.policy = policy if policy is not None else Policy()
        self._store_path = (
            Path(artifact_store) if artifact_store is not None else self.home / "artifact-store"
        )
        self._store: ArtifactStore | None = None
        self._runs_given = runs_dir is not None
        self._runs: Path | None = Path(runs_dir) if runs_dir is not None else None
        self._lock = threading.RLock()
        self._described: dict[str, _Described] = {}
        self._pins: dict[str, _Pin] = {}
        self._validators: dict[tuple[str, str, str], Validator] = {}
        self._audit: list[dict[str, Any]] = []
        self._knowledge_log = KnowledgeLog()
        self._cwd_pool: list[Path] = []
        self._runs_ready = False
        self._closed = False
        self._exit_cleanup: functools.partial[None] | None = None
        self._sandbox: SandboxReport | None = None
        self._sandbox_warned = False

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

    def _runs_dir(self) -> Path:
        if self._closed:
            raise ModuleHostError(
                "this ModuleHost is closed; create a new one to describe or invoke modules"
            )
        if self._runs is None:
            self._runs = Path(tempfile.mkdtemp(prefix="murmur-nb-runs-"))
            # a host left open (a notebook kernel shut down mid-session) still leaves no
            # private folder behind when the interpreter exits; close() removes it sooner
            self._exit_cleanup = functools.partial(shutil.rmtree, self._runs, ignore_errors=True)
            atexit.register(self._exit_cleanup)
        elif not self._runs_ready:
            self._runs.mkdir(parents=True, exist_ok=True)
        self._runs_ready = True
        return self._runs

    def _take_cwd(self) -> Path:
        """A private, empty working folder for one run (recycled: mkdir/rmdir are slow)."""
        with self._lock:
            if self._cwd_pool:
                return self._cwd_pool.pop()
        return Path(tempfile.mkdtemp(prefix="cwd-", dir=self._runs_dir()))

    def _give_back_cwd(self, cwd: Path) -> None:
        """Recycle a working folder the module left empty and untouched; remove any other."""
        try:
            st = cwd.lstat()
            with os.scandir(cwd) as entries:
                empty = next(entries, None) is None
            clean = empty and stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        except OSError:
            clean = False
        with self._lock:
            if clean and not self._closed and len(self._cwd_pool) < 8:
                self._cwd_pool.append(cwd)
                return
        shutil.rmtree(cwd, ignore_errors=True)

    def close(self) -> None:
        """Remove the private runs folder (unless ``runs_dir`` was given). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for cwd in self._cwd_pool:
            shutil.rmtree(cwd, ignore_errors=True)
        self._cwd_pool.clear()
        if self._runs is not None and not self._runs_given:
            shutil.rmtree(self._runs, ignore_errors=True)
        if self._exit_cleanup is not None:
            atexit.unregister(self._exit_cleanup)
            self._exit_cleanup = None

    def __enter__(self) -> ModuleHost:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- sandbox -----------------------------------------------------------------------

    @property
    def sandbox(self) -> SandboxReport:
        """Which confinement guarantees hold for module processes on this machine, and how.

        ``print(host.sandbox)`` lists each guarantee (filesystem, read-only roots, network,
        process tree, process isolation) with the mechanism enforcing it, or MISSING.
        """
        if self._sandbox is None:
            self._sandbox = sandbox_report(self.policy.sandbox, self.policy.sandbox_mechanisms)
        return self._sandbox

    def _check_sandbox(self) -> None:
        """Refuse (``sandbox="required"``) or warn once (``"best-effort"``) when incomplete."""
        report = self.sandbox
        if report.complete or report.mode == "off":
            return
        if report.mode == "required":
            raise SandboxUnavailable(
                f"no module was run: {report.problem()}", missing=report.missing
            )
        if not self._sandbox_warned:
            self._sandbox_warned = True
            warnings.warn(
                f"modules run only partly confined: {report.problem()}",
                SandboxWarning,
                stacklevel=4,
            )

    def _launch(
        self,
        argv: list[str],
        cwd: Path,
        module_dir: Path,
        roots: dict[str, Root],
        binaries: Sequence[str] = (),
        *,
        network: bool = False,
    ) -> Launch:
        self._check_sandbox()
        return launch(
            self.sandbox,
            argv,
            cwd=cwd,
            module_dir=module_dir,
            roots=roots,
            binaries=binaries,
            network=network,
        )

    def _sandbox_warning(self) -> list[str]:
        report = self.sandbox
        if report.complete or report.mode != "best-effort":
            return []
        return [f"sandbox (best-effort): {report.confinement}"]

    def _staged_view(self, run_dir: Path, staged: Sequence[StagedArtifact]) -> Path:
        # hard links only when the sandbox keeps ro roots read-only (no write reaches the store)
        link = self.sandbox.guarantees.get("read_only_roots") is not None
        return staged_view(run_dir / "staged-view", staged, link=link)

    # -- describe ----------------------------------------------------------------------

    def _module_paths(self, module_id: str) -> tuple[Path, Path]:
        if not _MODULE_ID_RE.fullmatch(module_id) or module_id in {".", ".."}:
            raise ModuleNotFound(
                f"{module_id!r} is not a valid module id (letters, digits, '.', '_', '-'); "
                "check the spelling: host.modules() lists the installed modules"
            )
        folder = self.modules_dir / module_id
        exe = folder / "module"
        if not folder.is_dir():
            raise ModuleNotFound(
                f"no module {module_id!r}: {folder} does not exist; install it there with an "
                "executable file named 'module'"
            )
        return folder, exe

    def _run_describe(self, module_id: str) -> _Described:
        folder, exe = self._module_paths(module_id)
        try:
            key = _stat_key(folder, exe)
        except OSError:
            return _Described(
                (),
                None,
                [
                    DescriptorError(
                        "module", f"{exe} is missing; install the module executable there"
                    )
                ],
                None,
            )
        if not stat.S_ISREG(exe.stat().st_mode) or not os.access(exe, os.X_OK):
            return _Described(
                key,
                None,
                [DescriptorError("module", f"{exe} is not an executable file; chmod +x it")],
                None,
            )
        previous = self._described.get(module_id)
        try:
            # the stat key includes every file's ctime, which any write updates: an
            # unchanged key means unchanged bytes, so a large folder is not hashed again
            same = previous is not None and previous.key == key and previous.code
            code = previous.code if same and previous is not None else code_digest(folder)
        except OSError as exc:
            return _Described(
                key, None, [DescriptorError("module", f"{folder} cannot be read: {exc}")], None
            )
        cwd = self._take_cwd()
        try:
            how = self._launch([str(exe), "describe"], cwd, folder, {})
            try:
                run = run_process(
                    how.argv,
                    b"",
                    cwd=cwd,
                    deadline_s=self.policy.describe_deadline_ms / 1000.0,
                    max_output_bytes=self.policy.describe_max_output_bytes,
                    preexec=how.preexec,
                )
            finally:
                how.close()
        except SandboxUnavailable as exc:
            return _Described(key, None, [DescriptorError("sandbox", exc.message)], None)
        except OSError as exc:
            return _Described(
                key,
                None,
                [DescriptorError("module", f"{exe} cannot be executed: {exc}")],
                None,
            )
        finally:
            self._give_back_cwd(cwd)
        tail = run.stderr_text.strip()[-500:]
        hint = ""
        if run.returncode or tail:
            hint = f" (exit status {run.returncode}" + (f"; stderr: {tail!r})" if tail else ")")
        if run.timed_out:
            errors = [
                DescriptorError(
                    "describe",
                    f"did not finish within {self.policy.describe_deadline_ms} ms{hint}",
                )
            ]
            return _Described(key, None, errors, None)
        if run.output_exceeded:
            errors = [
                DescriptorError(
                    "describe",
                    f"printed more than {self.policy.describe_max_output_bytes} bytes{hint}",
                )
            ]
            return _Described(key, None, errors, None)
        if not run.stdout.strip():
            errors = [DescriptorError("envelope", f"describe printed nothing{hint}")]
            return _Described(key, None, errors, None)
        descriptor, errors = parse_describe_output(run.stdout, module_id, folder)
        digest = descriptor_digest(descriptor) if descriptor is not None else None
        return _Described(key, descriptor, errors, digest, code)

    def _describe_cached(self, module_id: str, *, refresh: bool = False) -> _Described:
        folder, exe = self._module_paths(module_id)
        if not refresh:
            cached = self._described.get(module_id)
            if cached is not None:
                try:
                    if cached.key == _stat_key(folder, exe):
                        return cached
                except OSError:
                    pass
        described = self._run_describe(module_id)
        with self._lock:
            self._described[module_id] = described
        return described

    def describe(self, module_id: str) -> Descriptor:
        """Run ``module describe`` now and return the accepted descriptor.

        Raises
        ------
        ModuleNotFound
            No such module folder.
        InvalidDescriptor
            The describe envelope or descriptor breaks a SPEC §1 rule; ``.errors`` lists
            each breach as a :class:`~murmur_nb.DescriptorError` (path and detail).

        Warns
        -----
        KnowledgeWarning
            The module is accepted, but a capability lists an unknown skill id, an id is
            duplicated or a token estimate is not positive (also on ``ModuleInfo.warnings``).
        """
        self._check_sandbox()
        described = self._describe_cached(module_id, refresh=True)
        descriptor = self._accepted(module_id, described)
        warn_about(module_id, knowledge_warnings(descriptor))
        return descriptor

    def _accepted(self, module_id: str, described: _Described) -> Descriptor:
        if described.descriptor is None or described.errors:
            listed = "; ".join(str(e) for e in described.errors[:5])
            more = f" (+{len(described.errors) - 5} more)" if len(described.errors) > 5 else ""
            raise InvalidDescriptor(
                f"module {module_id!r} was refused: {listed}{more}. Fix the module's describe "
                "output; host.modules() lists every error",
                errors=described.errors,
            )
        return described.descriptor

    def modules(self) -> list[ModuleInfo]:
        """Every module folder under ``<home>/modules``, sorted by id, refused ones included."""
        if not self.modules_dir.is_dir():
            return []
        infos = []
        for entry in sorted(self.modules_dir.iterdir()):
            if not entry.is_dir() or not _MODULE_ID_RE.fullmatch(entry.name):
                continue
            described = self._describe_cached(entry.name)
            desc = described.descriptor
            unmet = [r for r in (desc.requirements or []) if not r.available] if desc else []
            infos.append(
                ModuleInfo(
                    id=entry.name,
                    path=entry,
                    descriptor=desc if not described.errors else None,
                    errors=list(described.errors),
                    unmet_requirements=unmet,
                    digest=described.digest if not described.errors else None,
                    warnings=knowledge_warnings(desc) if desc and not described.errors else [],
                )
            )
        return infos

    # -- approval ----------------------------------------------------------------------

    def _resolve(self, capability: str) -> tuple[str, _Described]:
        """The module id owning ``capability`` (longest existing prefix) and its descriptor."""
        module_id = self._owner(capability)
        return module_id, self._describe_cached(module_id)

    def _owner(self, capability: str) -> str:
        """The module id owning ``capability``: its longest prefix that is a module folder."""
        candidates = [capability[:i] for i, ch in enumerate(capability) if ch == "."]
        for module_id in reversed(candidates):
            if _MODULE_ID_RE.fullmatch(module_id) and (self.modules_dir / module_id).is_dir():
                return module_id
        raise ModuleNotFound(
            f"no installed module offers {capability!r}: capability ids are "
            f"'<module-id>.<name>' and no matching folder exists under {self.modules_dir}"
        )

    def _capability(
        self, capability: str, *, refresh: bool = False
    ) -> tuple[str, Descriptor, str, Capability]:
        module_id, described = self._resolve(capability)
        if refresh:
            described = self._describe_cached(module_id, refresh=True)
        descriptor = self._accepted(module_id, described)
        cap = descriptor.capability(capability)
        if cap is None:
            known = ", ".join(c.id for c in descriptor.capabilities or []) or "none"
            raise ModuleNotFound(
                f"module {module_id!r} has no capability {capability!r} (it offers: {known})"
            )
        assert described.digest is not None
        return module_id, descriptor, described.digest, cap

    def _pin_status(
        self, capability: str, descriptor: Descriptor, digest: str
    ) -> tuple[_Pin | None, list[str]]:
        """The pin that approves ``capability`` now, or the changes that voided one."""
        current = self._described.get(descriptor.module)
        code = current.code if current is not None else ""
        with self._lock:
            pin = self._pins.get(capability)
            if pin is None and capability in self.policy.approved:
                pin = _Pin(digest, descriptor, "allow-list", code)
                self._pins[capability] = pin
        if pin is None:
            return None, []
        if pin.digest == digest and pin.code != code:
            return None, [
                f"the {pin.source} approval of {capability} was pinned to the module's code "
                f"{pin.code[:19]}…, and its folder now hashes to {code[:19]}…: the executable "
                "or a file beside it changed, so the approval no longer counts"
            ]
        if pin.digest == digest:
            return pin, []
        changes = describe_changes(pin.descriptor, descriptor) or ["the descriptor changed"]
        return None, [
            f"the {pin.source} approval of {capability} was pinned to descriptor "
            f"{pin.digest[:19]}…, and describe now returns {digest[:19]}…; it no longer "
            "counts. What changed: " + "; ".join(changes)
        ]

    def approval_reasons(self, capability: str) -> list[str]:
        """Why ``capability`` needs approval right now; empty when it may run as is.

        Re-runs ``describe``, so a standing approval is checked against the module's
        current descriptor; a voided approval adds a reason that says what changed.
        """
        self._check_sandbox()
        _, descriptor, digest, cap = self._capability(capability, refresh=True)
        reasons = self.policy.approval_reasons(descriptor, cap)
        if not reasons:
            return []
        pin, voided = self._pin_status(capability, descriptor, digest)
        if pin is not None:
            return []
        return reasons + voided

    def approve(self, capability: str) -> str:
        """Record an operator approval pinned to the current descriptor; return its digest."""
        self._check_sandbox()
        _, descriptor, digest, _ = self._capability(capability, refresh=True)
        current = self._described.get(descriptor.module)
        with self._lock:
            self._pins[capability] = _Pin(
                digest, descriptor, "operator", current.code if current is not None else ""
            )
        return digest

    def revoke(self, capability: str) -> None:
        """Forget any standing approval of ``capability``."""
        with self._lock:
            self._pins.pop(capability, None)

    # -- skills and overlays ------------------------------------------------------------

    def _held(self, module_id: str) -> tuple[Path, Descriptor]:
        """The module folder and the descriptor the host holds (described once if never).

        Knowledge is verified against the host's last describe, not a fresh one: a file
        changed since is caught at load time, whatever a new describe would now declare.
        """
        folder, _ = self._module_paths(module_id)
        with self._lock:
            described = self._described.get(module_id)
        if described is None:
            described = self._describe_cached(module_id)
        return folder, self._accepted(module_id, described)

    def skills(self, module_id: str) -> list[Skill]:
        """The skills ``module_id`` declares (id, title, summary, path, digest, tokens).

        Nothing is read: use :meth:`load_skill` or :meth:`skills_for` for the content.
        """
        return list(self._held(module_id)[1].skills or [])

    def overlays(self, module_id: str) -> list[Overlay]:
        """The agent overlays ``module_id`` declares (id, title, path, digest, tokens)."""
        return list(self._held(module_id)[1].agent_overlays or [])

    def load_skill(self, module_id: str, skill_id: str) -> KnowledgeDocument:
        """Read one skill, verified now against its declared digest, and audit the load.

        The declaration checked is the one the host holds from its last describe (of
        :meth:`describe`, :meth:`modules` or an invocation); a file changed since is refused
        whatever a new describe would declare. Describe the module again to accept a new
        version of its files.

        Raises
        ------
        ModuleNotFound
            No such module, or it declares no such skill.
        ConfinementViolation
            The file is not a regular file beneath the module folder (a link out of it,
            say); nothing is returned.
        DigestMismatch
            Its SHA-256 is not the declared digest (it changed since the module declared
            it); nothing is returned.

        Examples
        --------
        >>> doc = host.load_skill("critic", "critic.reviewing")  # doctest: +SKIP
        >>> doc.provenance()  # doctest: +SKIP
        'skill critic.reviewing · critic/skills/reviewing.md · 110 tokens · sha256:362e79ce6328'
        """
        folder, descriptor = self._held(module_id)
        entry = find_document(descriptor, "skill", skill_id)
        return load_document(folder, module_id, "skill", entry, self._knowledge_log)

    def load_overlay(self, module_id: str, overlay_id: str) -> KnowledgeDocument:
        """Read one agent overlay, verified like :meth:`load_skill`, and audit the load."""
        folder, descriptor = self._held(module_id)
        entry = find_document(descriptor, "overlay", overlay_id)
        return load_document(folder, module_id, "overlay", entry, self._knowledge_log)

    def skills_for(self, capability: str, *, budget_tokens: int | None = None) -> SkillSelection:
        """Load the skills ``capability`` lists, in its order, within ``budget_tokens``.

        Skills are picked by their declared ``tokens`` before anything is read, first fit
        (a skill that does not fit is left out, later smaller ones are still tried); only
        picked skills are loaded and verified. ``left_out`` says what was not folded in and
        why: ``budget``, ``unknown_skill``, ``no_estimate``, or a refusal code such as
        ``digest_mismatch`` (a refused skill never raises here: the others still load).

        Examples
        --------
        >>> host.skills_for("critic.review", budget_tokens=2000)  # doctest: +SKIP
        skills for critic.review · budget 2000 · 1 loaded, 110 tokens
          + skill critic.reviewing · critic/skills/reviewing.md · 110 tokens · sha256:362e79ce6328
        """
        folder, descriptor = self._held(self._owner(capability))
        cap = descriptor.capability(capability)
        if cap is None:
            raise ModuleNotFound(
                f"module {descriptor.module!r} has no capability {capability!r}; "
                "ModuleBrowser(host) or host.agent_listing() lists them"
            )
        return select_skills(folder, descriptor, cap, budget_tokens, self._knowledge_log)

    def agent_listing(self) -> AgentListing:
        """The capability list an agent would see, one line per enabled capability, priced.

        Enabled means accepted and with every requirement met. Each line carries the
        declared token cost of the module's overlays and of the capability's skills, so an
        operator sees what enabling a module costs; nothing is loaded.
        """
        return agent_listing(self.modules())

    def knowledge_audit(self) -> pd.DataFrame:
        """One row per skill or overlay load (refused ones too), oldest first.

        Columns: time, module, kind (``skill``/``overlay``), id, path, capability (set by
        :meth:`skills_for`), digest and tokens (as declared), bytes (read; ``<NA>`` when
        refused), outcome (``ok`` or the error code), message.
        """
        return self._knowledge_log.frame()

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

    def _validator(self, digest: str, kind: str, schema_id: str, schema: Any) -> Validator:
        key = (digest, kind, schema_id)
        validator = self._validators.get(key)
        if validator is None:
            validator = schema_validator_class(schema)(schema)
            self._validators[key] = validator
        return validator

    def _bounds(self, deadline_ms: int | None, max_output_bytes: int | None) -> tuple[int, int]:
        """The call's ``deadline_ms`` and ``max_output_bytes``, checked against the policy."""
        deadline = self.policy.deadline_ms if deadline_ms is None else deadline_ms
        bound = self.policy.max_output_bytes if max_output_bytes is None else max_output_bytes
        check_bounds(
            {"deadline_ms": deadline, "max_output_bytes": bound},
            {
                "deadline_ms": self.policy.deadline_ms_limit,
                "max_output_bytes": self.policy.max_output_bytes_limit,
            },
        )
        return deadline, bound

    @staticmethod
    def _extra_fields(
        extra: dict[str, Any] | None, capability: str, warnings: list[str]
    ) -> dict[str, Any]:
        """``extra`` as strict JSON, without any key a Go decoder would take for a host field."""
        if not extra:
            return {}
        if not isinstance(extra, dict):
            raise InvalidInput(
                f"extra for {capability} must be a dict of root-level request fields, got "
                f"{type(extra).__name__}; nothing was run"
            )
        fields: dict[str, Any] = strict_json(dict(extra), "extra", capability)
        shadowed = shadowing_keys(fields, _HOST_FIELDS)
        if shadowed:
            warnings.append(
                f"extra fields {shadowed!r} name host-owned request fields (matched as a Go "
                "decoder matches keys: case-insensitively, with Unicode simple folding) and "
                "were ignored: the host fills them"
            )
            for key in shadowed:
                del fields[key]
        return fields

    def _build_roots(
        self,
        descriptor: Descriptor,
        run_dir: Path,
        staged: Sequence[StagedArtifact],
        warnings: list[str],
    ) -> dict[str, Root]:
        perms = descriptor.permissions
        roots: dict[str, Root] = {}
        for name in perms.filesystem_read or []:
            if name == STAGED_ROOT and staged:
                view = self._staged_view(run_dir, staged)
                roots[name] = Root(path=canonical_path(view), mode="ro")
                continue
            path = self.policy.root_path(name)
            if path is not None and path.is_dir():
                roots[name] = Root(path=canonical_path(path), mode="ro")
            elif path is not None:
                warnings.append(
                    f"policy maps read root {name!r} to {path}, which is not a "
                    "folder; it was not supplied"
                )
        fresh = 0
        for name in perms.filesystem_write or []:
            path = self.policy.root_path(name)
            if path is None:
                safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64] or "root"
                path = run_dir / f"w{fresh}-{safe}"
                fresh += 1
                path.mkdir(parents=True)
            elif not path.is_dir():
                warnings.append(
                    f"policy maps write root {name!r} to {path}, which is not a "
                    "folder; it was not supplied"
                )
                continue
            roots[name] = Root(path=canonical_path(path), mode="rw")
        return roots

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

        Raises
        ------
        ModuleNotFound, InvalidDescriptor, MissingRequirement, InvalidInput,
        ApprovalRequired, NotGranted, DigestMismatch
            Refused before anything ran.
        DeadlineExceeded, OutputTooLarge, ProtocolViolation
            The module ran and its tree was killed, or it broke an envelope rule.
        """
        request_id = uuid.uuid4().hex
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        row = _new_row(capability, request_id, started)
        inv: Invocation | None = None
        try:
            self._check_sandbox()
            inv = self._invoke(
                capability,
                input,
                request_id,
                row,
                approve=approve,
                deadline_ms=deadline_ms,
                max_output_bytes=max_output_bytes,
                extra=extra,
                staged=staged,
                validate_input=validate_input,
            )
        except ModuleHostError as exc:
            row["outcome"] = exc.code
            row["message"] = exc.message
            if exc.invocation is not None:
                _fill_row(row, exc.invocation)
            row["ok"] = False
            row["duration_ms"] = (time.perf_counter() - t0) * 1000.0
            self._record(row)
            raise
        except BaseException as exc:
            row["outcome"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "host_error"
            row["message"] = f"{type(exc).__name__}: {exc}"
            row["duration_ms"] = (time.perf_counter() - t0) * 1000.0
            self._record(row)
            raise
        inv.duration_ms = (time.perf_counter() - t0) * 1000.0
        _fill_row(row, inv)
        row["duration_ms"] = inv.duration_ms
        row["outcome"] = "ok" if inv.ok else (inv.error.code if inv.error else "error")
        row["message"] = "" if inv.ok or inv.error is None else inv.error.message
        self._record(row)
        return inv

    def _record(self, row: dict[str, Any]) -> None:
        with self._lock:
            self._audit.append(row)

    def _invoke(
        self,
        capability: str,
        input_value: Any,
        request_id: str,
        row: dict[str, Any],
        *,
        approve: bool,
        deadline_ms: int | None,
        max_output_bytes: int | None,
        extra: dict[str, Any] | None,
        staged: Sequence[StagedArtifact],
        validate_input: bool,
    ) -> Invocation:
        module_id, descriptor, digest, cap = self._capability(capability)
        row["module"] = module_id
        unmet = [r for r in descriptor.requirements or [] if not r.available]
        if unmet:
            fixes = "; ".join(f"{r.kind} {r.name}: {r.detail or 'not available'}" for r in unmet)
            raise MissingRequirement(
                f"module {module_id!r} needs setup before {capability} can run: {fixes}"
            )
        # -- approval -----------------------------------------------------------------
        approval = "not required"
        reasons = self.policy.approval_reasons(descriptor, cap)
        if reasons:
            if approve:
                approval = "approved (this call)"
            else:
                # a standing approval counts only for the module's *current* descriptor
                module_id, descriptor, digest, cap = self._capability(capability, refresh=True)
                reasons = self.policy.approval_reasons(descriptor, cap)
                pin, voided = self._pin_status(capability, descriptor, digest)
                if reasons and pin is None:
                    row["approval"] = "refused"
                    raise ApprovalRequired(
                        f"{capability} needs operator approval and was not run: "
                        + "; ".join(reasons + voided)
                        + ". Approve it with host.approve(...) or invoke(..., approve=True)",
                        reasons=reasons + voided,
                    )
                approval = f"approved ({pin.source}, {pin.digest[:19]}…)" if pin else approval
        row["approval"] = approval
        # -- input, bounds, extra ------------------------------------------------------
        if input_value is None:
            input_value = {}
        input_value = strict_json(input_value, "input", capability)
        schema = (descriptor.request_schemas or {})[cap.request_schema]
        validator = self._validator(digest, "request", cap.request_schema, schema)
        problems = sorted(validator.iter_errors(input_value), key=lambda e: list(e.path))
        if problems and validate_input:
            first = problems[0]
            where = "input" + "".join(
                f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in first.path
            )
            raise InvalidInput(
                f"input for {capability} does not match its request_schema "
                f"{cap.request_schema!r}: at {where}: {first.message}"
                + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
                + "; nothing was run. Fix the input and invoke again"
            )
        deadline, bound = self._bounds(deadline_ms, max_output_bytes)
        host_warnings: list[str] = []
        extra_fields = self._extra_fields(extra, capability, host_warnings)
        # -- grants, binaries ---------------------------------------------------------
        grants = self.policy.grants_for(descriptor)
        row["grants"] = grants.model_dump(mode="json")
        binaries: dict[str, str] = {}
        for name in grants.subprocess or []:
            # resolved per invocation: a binary installed (or removed) since the last
            # call is supplied (or absent) now, never a stale path
            path = self.policy.resolve_binary(name)
            if path is not None:
                binaries[name] = path
        # -- staged inputs -------------------------------------------------------------
        if staged:
            if STAGED_ROOT not in (descriptor.permissions.filesystem_read or []):
                raise NotGranted(
                    f"module {module_id!r} was handed staged artifacts but does not declare "
                    f"the read root {STAGED_ROOT!r} in permissions.filesystem_read; nothing "
                    "was run. Add that root to the module's descriptor, or invoke it "
                    "without staged="
                )
            for item in staged:
                self.store.verify(item)
        # -- request ------------------------------------------------------------------
        run_dir = self._runs_dir() / request_id
        roots = self._build_roots(descriptor, run_dir, staged, host_warnings)
        cwd = self._take_cwd()
        request = Request(
            protocol=PROTOCOL_ID,
            capability=capability,
            request_id=request_id,
            input=input_value,
            roots=roots,
            grants=grants,
            binaries=binaries,
            deadline_ms=deadline,
            max_output_bytes=bound,
            extra=extra_fields,
        )
        inv = Invocation(
            module=module_id,
            capability=capability,
            request=request,
            approval=approval,
            warnings=list(host_warnings),
        )
        payload = json.dumps(
            request.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False
        ).encode()
        exe = self.modules_dir / module_id / "module"
        try:
            run = self._run_confined(inv, exe, payload, cwd, deadline=deadline, bound=bound)
        except OSError as exc:
            raise ProtocolViolation(
                f"module {module_id!r} could not be started ({exc}); {exe} must be an "
                "executable with an absolute interpreter path (there is no PATH)",
                rule="executable",
            ) from exc
        finally:
            self._give_back_cwd(cwd)
        inv.stderr = run.stderr_text
        inv.returncode = run.returncode
        try:
            self._check_run(run, inv, deadline, bound)
            envelope = _check_envelope(run.stdout, module_id, request_id, inv)
        except ModuleHostError as exc:
            exc.invocation = inv
            raise
        inv.envelope = envelope
        inv.ok = envelope.ok
        inv.result = envelope.result
        inv.error = envelope.error
        inv.execution = envelope.execution
        inv.warnings = list(envelope.warnings) + inv.warnings
        self._verify_artifacts(envelope, roots, set(cap.artifact_schemas or []), inv)
        if inv.ok and cap.result_schema:
            schema = (descriptor.result_schemas or {})[cap.result_schema]
            validator = self._validator(digest, "result", cap.result_schema, schema)
            problem = next(iter(validator.iter_errors(inv.result)), None)
            if problem is not None:
                inv.warnings.append(
                    f"result does not match result_schema {cap.result_schema!r}: {problem.message}"
                )
        return inv

    def _run_confined(
        self, inv: Invocation, exe: Path, payload: bytes, cwd: Path, *, deadline: int, bound: int
    ) -> RunResult:
        """Run ``module invoke`` inside the sandbox the policy asks for."""
        request = inv.request
        how = self._launch(
            [str(exe), "invoke"],
            cwd,
            exe.parent,
            request.roots or {},
            list((request.binaries or {}).values()),
            network=bool(request.grants.network),
        )
        inv.confinement = how.confinement
        inv.warnings.extend(self._sandbox_warning())
        try:
            return run_process(
                how.argv,
                payload,
                cwd=cwd,
                deadline_s=deadline / 1000.0,
                max_output_bytes=bound,
                preexec=how.preexec,
            )
        finally:
            how.close()

    def _verify_artifacts(
        self, envelope: Envelope, roots: dict[str, Root], declared: set[str], inv: Invocation
    ) -> None:
        """Re-validate every produced artifact within the policy's size cap and time budget."""
        deadline = time.monotonic() + self.policy.verify_budget_ms / 1000.0
        for artifact in envelope.execution.artifacts or []:
            try:
                inv.artifacts.append(
                    verify_artifact(
                        artifact,
                        roots,
                        declared_kinds=declared,
                        warnings=inv.warnings,
                        max_bytes=self.policy.max_artifact_bytes,
                        deadline=deadline,
                    )
                )
            except ArtifactRejected as exc:
                inv.rejected_artifacts.append(rejection(artifact, exc))
                inv.warnings.append(f"artifact {artifact.id!r} rejected ({exc.code}): {exc}")

    @staticmethod
    def _check_run(run: RunResult, inv: Invocation, deadline: int, bound: int) -> None:
        tail = run.stderr_text.strip()[-300:]
        hint = f" Last stderr: {tail!r}." if tail else ""
        if run.output_exceeded:
            raise OutputTooLarge(
                f"{inv.capability} printed more than max_output_bytes={bound} bytes on "
                f"standard output; its process tree was killed.{hint} Large results belong "
                "in an artifact, not in the envelope",
                rule="max_output_bytes",
            )
        if run.timed_out:
            raise DeadlineExceeded(
                f"{inv.capability} did not finish within deadline_ms={deadline}; its whole "
                f"process tree was killed.{hint} Raise the deadline or make the capability "
                "long-running with a poll capability"
            )

    # -- audit -------------------------------------------------------------------------

    def audit(self) -> pd.DataFrame:
        """One row per invocation (also refused and failed ones), oldest first.

        Columns: time, module, capability, request_id, grants, approval, duration_ms,
        outcome (``ok``, the module's error code, or the host code), ok, estimated_cost and
        actual_cost (nullable: ``<NA>`` is *unknown*, ``0`` is free), artifacts (digests),
        rejected_artifacts (``id:code``), warnings (count), message.
        """
        with self._lock:
            rows = [dict(r) for r in self._audit]
        return _audit_frame(rows)
