"""What is installed: module folders, running ``describe``, and the descriptor cache key.

``<home>/modules/<id>/module`` is the executable; the folder name is the module id, a plain
name (:data:`MODULE_ID_RE`). Descriptors are cached by :func:`stat_key`, a fingerprint of the
whole folder, so any change describes again. ``describe`` runs the verified, read-only
snapshot (:mod:`.snapshot`), never the live folder. :func:`run_describe` never raises for a
broken module: its :class:`Described` carries the ``errors`` and the run's evidence, so a
refused module still lists, saying why as ``invoke`` would (a stray line before the
envelope is named by what it starts with). A folder whose name is no module id is listed
refused too, never described (hidden folders, ``.git`` or ``.ipynb_checkpoints``, and
``__pycache__`` are no modules and are left out). A capability that a module with a longer
id takes from its own module (``a.b.run`` of ``a`` beside a module ``a.b``) is a warning on
the module that loses it, naming both.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from murmur_nb._exceptions import (
    DescriptorProblem,
    InvalidDescriptor,
    ModuleNotFound,
    ModuleTooLarge,
    SandboxUnavailable,
)
from murmur_nb._knowledge.knowledge import knowledge_warnings
from murmur_nb._modules.envelope import sandbox_hint
from murmur_nb._modules.gate import SandboxGate
from murmur_nb._modules.invocation import ModuleInfo
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.snapshot import Entry, Hold, Refused, Snapshot, SnapshotStore, walk
from murmur_nb._modules.workspace import Workspace
from murmur_nb._rules import PLAIN_ID_CHARS, PLAIN_ID_RE
from murmur_nb._sandbox import RunEvidence, RunResult, run_launched
from murmur_nb._schemas.descriptor import descriptor_digest, parse_describe_output
from murmur_nb.protocol import Capability, Descriptor

__all__ = [
    "MODULE_ID_RE",
    "Catalog",
    "Described",
    "Target",
    "is_module_id",
    "run_describe",
    "stat_key",
]

#: A module id: a plain name, the same rule as every other id murmur-nb accepts.
MODULE_ID_RE = PLAIN_ID_RE


def is_module_id(name: str) -> bool:
    """Whether ``name`` may name a module folder."""
    return MODULE_ID_RE.fullmatch(name) is not None and name not in {".", ".."}


@dataclass
class Described:
    """The outcome of one ``describe``: the descriptor, or the errors that refused it.

    ``code`` is the digest of the module folder's snapshot (:mod:`.snapshot`) that was
    described; approvals are pinned to it as well as to ``digest``, and ``invoke`` runs
    that ``snapshot``. ``refusal`` is the error code a refused module raises with.
    """

    key: tuple[object, ...]
    descriptor: Descriptor | None
    errors: list[DescriptorProblem]
    digest: str | None
    code: str = ""
    snapshot: Snapshot | None = None
    refusal: str = InvalidDescriptor.code
    evidence: RunEvidence | None = None

    @classmethod
    def refused(
        cls,
        key: tuple[object, ...],
        where: str,
        detail: str,
        *,
        code: str = "",
        evidence: RunEvidence | None = None,
    ) -> Described:
        return cls(key, None, [DescriptorProblem(where, detail)], None,
                   refusal=code or InvalidDescriptor.code, evidence=evidence)  # fmt: skip


def _needs_setup(described: Described) -> bool:
    desc = described.descriptor
    return desc is not None and any(not r.available for r in desc.requirements or [])


@dataclass(frozen=True)
class Target:
    """A capability resolved against its module's accepted descriptor (and its code).

    ``hold`` keeps ``snapshot`` in the store (no prune of any process removes it) for as
    long as the target, or a prepared call or batch made from it, lives."""

    module_id: str
    descriptor: Descriptor
    digest: str
    cap: Capability
    code: str = ""
    snapshot: Path = Path()
    hold: Hold | None = field(default=None, compare=False, repr=False)


def stat_key(module_dir: Path, policy: Policy) -> tuple[Entry, ...]:
    """A cheap fingerprint of a module's installed files, to tell when to describe again.

    A module is often a launcher beside its real code (``module`` runs ``main.py``), so the
    whole folder counts, not just the launcher: any file added, removed, replaced or edited
    changes the key (name, kind, device, inode, size, mtime and ctime of every entry).
    Raises :class:`~.snapshot.Refused` past the policy's entry or byte budget.
    """
    return tuple(
        walk(module_dir, max_entries=policy.max_module_entries,
             max_bytes=policy.max_module_bytes)
    )  # fmt: skip


def run_describe(
    module_id: str,
    folder: Path,
    policy: Policy,
    *,
    workspace: Workspace,
    gate: SandboxGate,
    previous: Described | None,
    store: SnapshotStore,
) -> Described:
    """Run ``module describe`` of the folder's snapshot, confined, within the describe bounds."""
    ready = _prepare(folder, policy, store, previous)
    if isinstance(ready, Described):
        return ready
    key, snap = ready
    exe = snap.path / "module"
    with workspace.cwd(in_sandbox=gate.makes_cwd) as cwd:
        try:
            run = _run_confined(exe, cwd, policy, gate)
        except SandboxUnavailable as exc:
            return Described.refused(key, "sandbox", exc.message)
        except OSError as exc:
            return Described.refused(key, "module", f"{exe} cannot be executed: {exc}")
    evidence = RunEvidence.of(run.returncode, run.stderr_tail)
    failure = _run_failure(run, policy, evidence) or _stray_output(run, evidence)
    if failure is not None:
        return Described.refused(key, *failure, evidence=evidence.with_stdout(run.stdout))
    descriptor, errors = parse_describe_output(run.stdout, module_id, snap.path)
    if descriptor is not None:
        descriptor = _live_paths(descriptor, snap.path, folder)
    digest = descriptor_digest(descriptor) if descriptor is not None else None
    if descriptor is None:  # the output was read, but was no envelope of a descriptor
        evidence = evidence.with_stdout(run.stdout)
    return Described(key, descriptor, errors, digest, snap.digest, snap, evidence=evidence)


def _prepare(  # noqa: PLR0911 - one refusal per rule, each with its own message
    folder: Path, policy: Policy, store: SnapshotStore, previous: Described | None
) -> tuple[tuple[object, ...], Snapshot] | Described:
    """``(stat key, verified snapshot)`` of an installed, executable module, or why it is
    refused."""
    exe = folder / "module"
    try:
        key = stat_key(folder, policy)
    except Refused as exc:
        return Described.refused((), exc.where, exc.detail, code=exc.code)
    except OSError as exc:
        return Described.refused((), "module", f"{folder} cannot be read: {exc}")
    if not any(entry.rel == "module" for entry in key):
        return Described.refused(key, "module", _no_executable(exe))
    try:  # a link inside the folder: to what (nothing, a loop) is known only now
        st = exe.stat()
    except OSError as exc:
        return Described.refused(
            key, "module", f"{exe} is a link that leads to no file ({exc.strerror}); install "
            "the module executable there",
        )  # fmt: skip
    if not stat.S_ISREG(st.st_mode) or not os.access(exe, os.X_OK):
        return Described.refused(key, "module", f"{exe} is not an executable file; chmod +x it")
    # an unchanged key means unchanged bytes (a write always moves ctime): no hashing
    old = previous.snapshot if previous is not None and previous.key == key else None
    try:
        snap = old if old is not None and store.intact(old) else store.snapshot(
            folder, list(key), max_bytes=policy.max_module_bytes)
    except Refused as exc:
        return Described.refused(key, exc.where, exc.detail, code=exc.code)
    except OSError as exc:
        return Described.refused(key, "module", f"{folder} cannot be read: {exc}")
    return key, snap


def _no_executable(exe: Path) -> str:
    """Why ``module`` is not in the folder's listing: missing, or a FIFO, socket or device
    (never hashed nor run: :func:`~.snapshot.walk` leaves them out)."""
    try:
        mode = exe.lstat().st_mode
    except OSError:
        mode = 0
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "")  # fmt: skip
    if not kind:
        return f"{exe} is missing; install the module executable there"
    return f"{exe} is {kind}, not a file; install the module executable there"


def _run_confined(exe: Path, cwd: Path, policy: Policy, gate: SandboxGate) -> RunResult:
    return run_launched(
        gate.launch([str(exe), "describe"], cwd, exe.parent, {}),
        b"",
        cwd=cwd,
        deadline_s=policy.describe_deadline_ms / 1000.0,
        max_output_bytes=policy.describe_max_output_bytes,
    )


def _live_paths(descriptor: Descriptor, snapshot: Path, folder: Path) -> Descriptor:
    """Requirement details name the module folder, not the snapshot it was described from.

    A module that says where to put a missing file (``save it as <its folder>/models/x``)
    means the folder the operator installed, which is also where the next snapshot is
    made from; the snapshot's own path would be wrong advice (and would make the
    descriptor digest change with every code change).
    """
    requirements = descriptor.requirements or []
    if not any(str(snapshot) in r.detail for r in requirements):
        return descriptor
    fixed = [r.model_copy(update={"detail": r.detail.replace(str(snapshot), str(folder))})
             for r in requirements]  # fmt: skip
    return descriptor.model_copy(update={"requirements": fixed})


def _run_failure(run: RunResult, policy: Policy, evidence: RunEvidence) -> tuple[str, str] | None:
    """``(where, detail)`` when the describe run itself failed, before its output is read."""
    tail = run.stderr_text.strip()[-500:]
    hint = ""
    if run.returncode or tail:
        hint = f" (exit status {run.returncode}" + (f"; stderr: {tail!r})" if tail else ")")
    if evidence.crashed:  # describe is never granted the network
        hint += sandbox_hint(evidence, network_granted=False)
    if run.timed_out:
        return "describe", f"did not finish within {policy.describe_deadline_ms} ms{hint}"
    if run.output_exceeded:
        return "describe", f"printed more than {policy.describe_max_output_bytes} bytes{hint}"
    if not run.stdout.strip():
        return "envelope", f"describe printed nothing{hint}"
    return None


def _stray_output(run: RunResult, evidence: RunEvidence) -> tuple[str, str] | None:
    """``(where, detail)`` when standard output does not start with the envelope (a JSON
    object): a line printed before it, say. Said as ``invoke`` says it, with what it starts
    with (the JSON decoder's "Expecting value: line 1 column 1" names no culprit)."""
    if run.stdout.lstrip()[:1] == b"{":
        return None
    head = evidence.with_stdout(run.stdout).stdout_head.splitlines() or [""]
    crash = f"; {evidence.summary()}" if evidence.crashed else ""
    return "envelope", (
        f"describe output is not one JSON envelope: it starts with {head[0][:80]!r}{crash}. "
        "Only the envelope goes to standard output: print diagnostics (debug lines, "
        "progress) to standard error"
    )


def _not_a_module(name: str) -> bool:
    """A folder no one means as a module: hidden (``.git``, ``.ipynb_checkpoints``) or
    ``__pycache__``."""
    return name.startswith(".") or name == "__pycache__"


def _misnamed(folder: Path) -> ModuleInfo:
    """The listing of a folder under ``modules`` whose name is no module id: refused, never
    described (its name could not be the envelope's ``module``, nor prefix a capability id)."""
    fixed = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-._")[:128] or "my-module"
    return ModuleInfo(
        id=folder.name,
        path=folder,
        descriptor=None,
        errors=[
            DescriptorProblem(
                "module",
                f"the folder name {folder.name!r} is not a valid module id (1 to 128 of "
                "A-Z a-z 0-9 . _ -, starting with a letter or digit), so the module is never "
                f"described or run; rename the folder, e.g. to {fixed!r} (and use that "
                "name as the descriptor's module and its capability ids' prefix)",
            )
        ],
    )


class Catalog:
    """The modules installed under one ``modules`` folder, and their cached descriptors.

    ``modules_dir`` and ``policy`` are read through callables, so the host's current
    ``home`` and ``policy`` are always the ones used.
    """

    def __init__(
        self,
        modules_dir: Callable[[], Path],
        policy: Callable[[], Policy],
        workspace: Workspace,
        gate: SandboxGate,
    ) -> None:
        self._modules_dir = modules_dir
        self._policy = policy
        self._workspace = workspace
        self._gate = gate
        self._described: dict[str, Described] = {}
        self._lock = threading.Lock()
        self._store = SnapshotStore()

    def close(self) -> None:
        """Forget every module's describe outcome, and with it the hold of its snapshot (a
        prune in any kernel may remove it once no prepared call holds it either). A module
        used again is described again. Idempotent."""
        with self._lock:
            self._described.clear()

    def folder(self, module_id: str) -> Path:
        """The folder of an installed module, or :class:`~murmur_nb.ModuleNotFound`."""
        if not is_module_id(module_id):
            raise ModuleNotFound(
                f"{module_id!r} is not a valid module id (letters, digits, '.', '_', '-'); "
                "check the spelling: host.modules() lists the installed modules"
            )
        folder = self._modules_dir() / module_id
        if not folder.is_dir():
            owner = self._owner_of(module_id)
            if owner is not None:
                raise ModuleNotFound(
                    f"{module_id!r} is a capability id of module {owner!r}, not a module id: "
                    f"pass {owner!r}"
                )
            raise ModuleNotFound(
                f"no module {module_id!r}: {folder} does not exist; install it there with an "
                "executable file named 'module'"
            )
        return folder

    def _owner_of(self, capability: str) -> str | None:
        """The module whose folder is ``capability``'s longest dotted prefix, if any."""
        modules_dir = self._modules_dir()
        # only a dot within a module id's length ends a candidate: a prefix per dot of the
        # whole id held every prefix at once, a capability id of 200,000 dots 20 GB
        head = capability[: PLAIN_ID_CHARS + 1]
        candidates = [head[:i] for i, ch in enumerate(head) if ch == "."]
        for module_id in reversed(candidates):
            if is_module_id(module_id) and (modules_dir / module_id).is_dir():
                return module_id
        return None

    def described(self, module_id: str, *, refresh: bool = False) -> Described:
        """The module's describe outcome: cached while its files are unchanged."""
        folder = self.folder(module_id)
        if not refresh:
            cached = self._described.get(module_id)
            if cached is not None:
                try:
                    same = cached.key == stat_key(folder, self._policy())
                except (OSError, Refused):
                    same = False
                if same and (cached.snapshot is None or self._store.intact(cached.snapshot)):
                    return cached
        described = run_describe(
            module_id,
            folder,
            self._policy(),
            workspace=self._workspace,
            gate=self._gate,
            previous=self._described.get(module_id),
            store=self._store,
        )
        with self._lock:
            self._described[module_id] = described
        return described

    def accepted(
        self, module_id: str, described: Described | None = None, *, refresh: bool = False
    ) -> Descriptor:
        """The accepted descriptor, or :class:`~murmur_nb.InvalidDescriptor` with every error."""
        if described is None:
            described = self.described(module_id, refresh=refresh)
        if described.descriptor is None or described.errors:
            listed = "; ".join(str(e) for e in described.errors[:5])
            more = f" (+{len(described.errors) - 5} more)" if len(described.errors) > 5 else ""
            too_large = described.refusal == ModuleTooLarge.code
            # a refusal of where the module runs (its interpreter, the sandbox) says its own
            # fix: the describe output is not what is wrong
            where = all(e.path == "sandbox" for e in described.errors)
            fix = "" if where and described.errors else " Fix the module's describe output;"
            raise (ModuleTooLarge if too_large else InvalidDescriptor)(
                f"module {module_id!r} was refused: {listed}{more}.{fix} host.modules() lists "
                "every error",
                errors=described.errors,
                evidence=described.evidence if described.descriptor is None else None,
            )
        return described.descriptor

    def infos(self) -> list[ModuleInfo]:
        """Every module folder, sorted by id, refused ones included: a folder whose name is
        no module id is listed refused (it is never described), with the rename that fixes
        it."""
        modules_dir = self._modules_dir()
        if not modules_dir.is_dir():
            return []
        folders = sorted(entry for entry in modules_dir.iterdir()
                         if entry.is_dir() and not _not_a_module(entry.name))  # fmt: skip
        # every module described first: whether a capability is reachable depends on the others
        described = {f.name: self.described(f.name) for f in folders if is_module_id(f.name)}
        return [
            self._info(folder, described[folder.name])
            if folder.name in described
            else _misnamed(folder)
            for folder in folders
        ]

    def _info(self, folder: Path, described: Described) -> ModuleInfo:
        desc = described.descriptor
        accepted = desc if not described.errors else None
        return ModuleInfo(
            id=folder.name,
            path=folder,
            descriptor=accepted,
            errors=list(described.errors),
            unmet_requirements=[r for r in (desc.requirements or []) if not r.available]
            if desc is not None
            else [],
            digest=described.digest if accepted is not None else None,
            warnings=[*knowledge_warnings(accepted), *self._shadowed(accepted)]
            if accepted is not None
            else [],
            evidence=described.evidence if accepted is None else None,
        )

    def _shadowed(self, descriptor: Descriptor) -> list[DescriptorProblem]:
        """The capabilities of ``descriptor`` that a call can never reach: their id also
        starts with another module's id (``a.b.run`` of module ``a`` beside a module
        ``a.b``), and a capability goes to the module whose id is its longest prefix
        (:meth:`owner`). SPEC §1 asks each id to be namespaced by its own module, which both
        are; the host says which one loses, naming both, rather than refuse either."""
        found = []
        module_id = descriptor.module
        for i, cap in enumerate(descriptor.capabilities or []):
            owner = self._owner_of(cap.id)
            if owner is None or owner == module_id:
                continue
            other = self._described.get(owner)
            offers = (
                f"module {owner!r} offers {cap.id!r} too, and that one runs"
                if other is not None
                and other.descriptor is not None
                and other.descriptor.capability(cap.id) is not None
                else f"invoking it reaches module {owner!r}, which does not offer it"
            )
            found.append(
                DescriptorProblem(
                    f"capabilities[{i}].id",
                    f"{cap.id!r} cannot be invoked: a capability goes to the module whose id "
                    f"is its longest prefix, here {owner!r}, not {module_id!r}; {offers}. "
                    f"Rename the capability (or module {owner!r}) so that no other module's "
                    "id is a prefix of it",
                )
            )
        return found

    def owner(self, capability: str) -> str:
        """The module id owning ``capability``: its longest prefix that is a module folder."""
        module_id = self._owner_of(capability)
        if module_id is not None:
            return module_id
        modules_dir = self._modules_dir()
        if is_module_id(capability) and (modules_dir / capability).is_dir():
            raise ModuleNotFound(
                f"{capability!r} is a module id, not a capability id: name one of its "
                f"capabilities, '{capability}.<name>' (host.describe({capability!r}) lists them)"
            )
        raise ModuleNotFound(
            f"no installed module offers {capability!r}: capability ids are "
            f"'<module-id>.<name>' and no matching folder exists under {modules_dir}"
        )

    def target(self, capability: str, *, refresh: bool = False) -> Target:
        """``capability`` resolved against its module's accepted (``refresh``: fresh) descriptor."""
        return self.resolved(capability, refresh=refresh)[0]

    def resolved(self, capability: str, *, refresh: bool = False) -> tuple[Target, bool]:
        """:meth:`target`, and whether ``describe`` ran for it just now (a cold or changed
        module, or ``refresh``): a caller that must weigh the current descriptor then has it.

        A kept descriptor saying the module needs setup is not taken as it is: setup happens
        outside the module's folder (a binary installed, a model fetched), so the module is
        described again and the call after the setup runs, the folder unchanged.
        """
        module_id = self.owner(capability)
        with self._lock:
            kept = self._described.get(module_id)
        described = self.described(module_id, refresh=refresh)
        if described is kept and _needs_setup(described):
            described = self.described(module_id, refresh=True)
        fresh = refresh or described is not kept
        descriptor = self.accepted(module_id, described)
        cap = descriptor.capability(capability)
        if cap is None:
            known = ", ".join(c.id for c in descriptor.capabilities or []) or "none"
            raise ModuleNotFound(
                f"module {module_id!r} has no capability {capability!r} (it offers: {known})"
                + self._shadowed_by(capability, module_id)
            )
        assert described.digest is not None and described.snapshot is not None
        target = Target(module_id, descriptor, described.digest, cap, described.code,
                        described.snapshot.path, described.snapshot.hold)  # fmt: skip
        return target, fresh

    def _shadowed_by(self, capability: str, owner: str) -> str:
        """``"; module 'a' declares it, ..."`` when a module whose id is a shorter prefix of
        ``capability`` declares it (as last described): ``owner`` takes every call of it."""
        with self._lock:
            kept = list(self._described.items())
        for module_id, described in kept:
            desc = described.descriptor
            if (module_id != owner and owner.startswith(module_id + ".")
                    and desc is not None and desc.capability(capability) is not None):  # fmt: skip
                return (
                    f"; module {module_id!r} declares it, but a capability goes to the module "
                    f"whose id is its longest prefix: rename the capability (or module "
                    f"{owner!r})"
                )
        return ""

    def held(self, module_id: str) -> tuple[Path, Descriptor]:
        """The module folder and the descriptor held from the last describe (once if never).

        Knowledge is verified against the host's last describe, not a fresh one: a file
        changed since is caught at load time, whatever a new describe would now declare.
        Documents are read from the live folder (they are data, each checked against its
        declared SHA-256 as it is read), not from the snapshot that runs.
        """
        folder = self.folder(module_id)
        with self._lock:
            described = self._described.get(module_id)
        if described is None:
            described = self.described(module_id)
        return folder, self.accepted(module_id, described)
