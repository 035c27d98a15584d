"""What is installed: module folders, running ``describe``, and the descriptor cache key.

``<home>/modules/<id>/module`` is the executable; the folder name is the module id, a plain
name (:data:`MODULE_ID_RE`). Descriptors are cached by :func:`stat_key`, a fingerprint of the
whole folder, so any change describes again. ``describe`` runs the verified, read-only
snapshot (:mod:`.snapshot`), never the live folder. :func:`run_describe` never raises for a
broken module: its :class:`Described` carries the ``errors``, so a refused module still lists.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._exceptions import (
    DescriptorProblem,
    InvalidDescriptor,
    ModuleNotFound,
    ModuleTooLarge,
    SandboxUnavailable,
)
from murmur_nb._knowledge.knowledge import knowledge_warnings
from murmur_nb._modules.gate import SandboxGate
from murmur_nb._modules.invocation import ModuleInfo
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.snapshot import Entry, Refused, Snapshot, SnapshotStore, walk
from murmur_nb._modules.workspace import Workspace
from murmur_nb._rules import PLAIN_ID_RE
from murmur_nb._sandbox import RunResult, run_launched
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

    @classmethod
    def refused(
        cls, key: tuple[object, ...], where: str, detail: str, *, code: str = ""
    ) -> Described:
        return cls(key, None, [DescriptorProblem(where, detail)], None,
                   refusal=code or InvalidDescriptor.code)  # fmt: skip


def _needs_setup(described: Described) -> bool:
    desc = described.descriptor
    return desc is not None and any(not r.available for r in desc.requirements or [])


@dataclass(frozen=True)
class Target:
    """A capability resolved against its module's accepted descriptor (and its code)."""

    module_id: str
    descriptor: Descriptor
    digest: str
    cap: Capability
    code: str = ""
    snapshot: Path = Path()


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
    failure = _run_failure(run, policy)
    if failure is not None:
        return Described.refused(key, *failure)
    descriptor, errors = parse_describe_output(run.stdout, module_id, snap.path)
    if descriptor is not None:
        descriptor = _live_paths(descriptor, snap.path, folder)
    digest = descriptor_digest(descriptor) if descriptor is not None else None
    return Described(key, descriptor, errors, digest, snap.digest, snap)


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
        return Described.refused(
            key, "module", f"{exe} is missing; install the module executable there"
        )
    run = folder / "module"
    if not stat.S_ISREG(run.stat().st_mode) or not os.access(run, os.X_OK):
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


def _run_failure(run: RunResult, policy: Policy) -> tuple[str, str] | None:
    """``(where, detail)`` when the describe run itself failed, before its output is read."""
    tail = run.stderr_text.strip()[-500:]
    hint = ""
    if run.returncode or tail:
        hint = f" (exit status {run.returncode}" + (f"; stderr: {tail!r})" if tail else ")")
    if run.timed_out:
        return "describe", f"did not finish within {policy.describe_deadline_ms} ms{hint}"
    if run.output_exceeded:
        return "describe", f"printed more than {policy.describe_max_output_bytes} bytes{hint}"
    if not run.stdout.strip():
        return "envelope", f"describe printed nothing{hint}"
    return None


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
        candidates = [capability[:i] for i, ch in enumerate(capability) if ch == "."]
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
            raise (ModuleTooLarge if too_large else InvalidDescriptor)(
                f"module {module_id!r} was refused: {listed}{more}. Fix the module's describe "
                "output; host.modules() lists every error",
                errors=described.errors,
            )
        return described.descriptor

    def infos(self) -> list[ModuleInfo]:
        """Every module folder, sorted by id, refused ones included."""
        modules_dir = self._modules_dir()
        if not modules_dir.is_dir():
            return []
        infos = []
        for entry in sorted(modules_dir.iterdir()):
            if not entry.is_dir() or not is_module_id(entry.name):
                continue
            described = self.described(entry.name)
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
            )
        assert described.digest is not None and described.snapshot is not None
        target = Target(module_id, descriptor, described.digest, cap, described.code,
                        described.snapshot.path)  # fmt: skip
        return target, fresh

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
