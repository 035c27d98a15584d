"""Building the request a module receives: everything in it is decided here, by the host.

* **Checked before anything runs.** ``input`` must be strict JSON and match the
  capability's ``request_schema``; the bounds must be positive integers within the
  policy's limits; a refusal raises :class:`~murmur_nb.InvalidInput` and nothing is
  started. The rules themselves are in :mod:`.request`.
* **Host fields win.** ``extra`` is inlined at the request root but can never shadow a
  host field, also not through a key a Go decoder folds onto one: such a key is dropped
  with a warning.
* **Roots, grants and binaries come from the policy** (see :mod:`.policy`), intersected
  with what the module declared; a write root the policy does not map is a fresh folder
  under the invocation's run folder, and a root it maps to no folder refuses the call
  (``root_unavailable``: nothing runs).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from murmur_nb._exceptions import InvalidInput, ModuleHostError, NotGranted
from murmur_nb._modules.catalog import Target
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.request import canonical_path, check_bounds, shadowing_keys, strict_json
from murmur_nb._modules.staging import STAGED_ROOT, ArtifactStore, StagedArtifact
from murmur_nb._modules.workspace import Workspace
from murmur_nb._schemas.bounded import check
from murmur_nb._schemas.schemas import ValidatorCache
from murmur_nb.protocol import PROTOCOL_ID, Descriptor, Grants, Request, Root

__all__ = ["HOST_FIELDS", "MODULE_CHANGED", "Call", "build_request"]

HOST_FIELDS = frozenset(Request.model_fields) - {"extra"}

#: Makes the consumer's ``staged`` root under a run folder: exactly the staged files.
StagedView = Callable[[Path, Sequence[StagedArtifact]], Path]


#: The code of a run refused because its module changed after the call was prepared (a batch
#: row whose module was edited mid-batch).
MODULE_CHANGED = "module_changed"


@dataclass(frozen=True)
class Call:
    """What the caller of one run asked for, as given (the capability is prepared)."""

    capability: str
    input: Any
    request_id: str
    deadline_ms: int | None = None
    max_output_bytes: int | None = None
    extra: dict[str, Any] | None = None
    staged: Sequence[StagedArtifact] = ()
    validate_input: bool = True
    #: the input is strict JSON already, checked against the request schema by the caller
    #: (a batch checks each row when it starts): neither is done again
    checked: bool = False
    cancel: threading.Event | None = None
    #: whether the plan's next sandbox may be made ahead (:mod:`murmur_nb._sandbox.warm`)
    ahead: bool = True


@dataclass(frozen=True)
class Built:
    """A request ready to send, and the host's warnings about how it was built."""

    request: Request
    warnings: tuple[str, ...] = ()


def build_request(
    call: Call,
    target: Target,
    *,
    policy: Policy,
    store: Callable[[], ArtifactStore],
    staged_view: StagedView,
    validators: ValidatorCache,
    workspace: Workspace,
) -> Built:
    """Check the caller's input, bounds and extra fields, then build the :class:`Request`.

    ``store`` is called only when staged artifacts are involved (it creates the store);
    ``staged_view`` makes the consumer's ``staged`` root (exactly the staged files).
    """
    input_value = checked_input(call, target, validators, policy)
    deadline, bound = _bounds(call, policy)
    extra, extra_warnings = _extra_fields(call.extra, call.capability)
    grants = policy.grants_for(target.descriptor)
    binaries = _binaries(policy, grants)
    _check_staged(call, target, store)
    run_dir = workspace.runs_dir() / call.request_id
    roots = build_roots(target.descriptor, run_dir, policy=policy, staged_view=staged_view,
                        staged=call.staged, capability=call.capability)  # fmt: skip
    request = Request(
        protocol=PROTOCOL_ID,
        capability=call.capability,
        request_id=call.request_id,
        input=input_value,
        roots=roots,
        grants=grants,
        binaries=binaries,
        deadline_ms=deadline,
        max_output_bytes=bound,
        extra=extra,
    )
    return Built(request, tuple(extra_warnings))


def checked_input(
    call: Call, target: Target, validators: ValidatorCache, policy: Policy
) -> Any:
    """The caller's input as plain JSON, checked against the capability's request schema
    (within the policy's pattern budget)."""
    capability, cap = call.capability, target.cap
    if call.checked:
        return call.input
    value = strict_json({} if call.input is None else call.input, "input", capability)
    if not call.validate_input:  # sent as is (the module checker's hostile inputs)
        return value
    schema = (target.descriptor.request_schemas or {})[cap.request_schema]
    validator = validators.get(target.digest, "request", cap.request_schema, schema)
    fast = validators.fast(target.digest, "request", cap.request_schema, schema)
    found = check(
        validator, value, budget=policy.max_pattern_work, steps=policy.max_schema_steps, fast=fast
    )
    problems = sorted(found, key=lambda e: list(e.path))
    if problems:
        listed = "; ".join(
            "at input"
            + "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in e.path)
            + f": {e.message}"
            for e in problems
        )
        raise InvalidInput(
            f"input for {capability} does not match its request_schema "
            f"{cap.request_schema!r}: {listed}{FIX_AND_INVOKE}"
        )
    return value


#: how a refused input's message ends for one call; a batch row's problem leaves it out
#: (its batch says once what to do about all of them)
FIX_AND_INVOKE = "; nothing was run. Fix the input and invoke again"


def input_problem(
    call: Call, target: Target, validators: ValidatorCache, policy: Policy
) -> str | None:
    """Why :func:`checked_input` would refuse ``call``'s input (without the single call's
    "invoke again"), or ``None`` when it would be sent."""
    try:
        checked_input(call, target, validators, policy)
    except InvalidInput as exc:
        return exc.message.removesuffix(FIX_AND_INVOKE)
    return None


def _bounds(call: Call, policy: Policy) -> tuple[int, int]:
    """``(deadline_ms, max_output_bytes)``: the call's own, else the policy's."""
    deadline = policy.deadline_ms if call.deadline_ms is None else call.deadline_ms
    bound = policy.max_output_bytes if call.max_output_bytes is None else call.max_output_bytes
    check_bounds(
        {"deadline_ms": deadline, "max_output_bytes": bound},
        {
            "deadline_ms": policy.deadline_ms_limit,
            "max_output_bytes": policy.max_output_bytes_limit,
        },
    )
    return deadline, bound


def _extra_fields(
    extra: dict[str, Any] | None, capability: str
) -> tuple[dict[str, Any], list[str]]:
    """``extra`` as strict JSON, without any key a Go decoder would take for a host field;
    and the warning about the keys dropped."""
    if not extra:
        return {}, []
    if not isinstance(extra, dict):
        raise InvalidInput(
            f"extra for {capability} must be a dict of root-level request fields, got "
            f"{type(extra).__name__}; nothing was run"
        )
    fields: dict[str, Any] = strict_json(dict(extra), "extra", capability)
    shadowed = shadowing_keys(fields, HOST_FIELDS)
    if not shadowed:
        return fields, []
    for key in shadowed:
        del fields[key]
    return fields, [
        f"extra fields {shadowed!r} name host-owned request fields (matched as a Go "
        "decoder matches keys: case-insensitively, with Unicode simple folding) and "
        "were ignored: the host fills them"
    ]


def _binaries(policy: Policy, grants: Grants) -> dict[str, str]:
    """Absolute paths of the granted subprocess binaries that resolve now."""
    binaries: dict[str, str] = {}
    for name in grants.subprocess or []:
        # resolved per invocation: a binary installed (or removed) since the last
        # call is supplied (or absent) now, never a stale path
        path = policy.resolve_binary(name)
        if path is not None:
            binaries[name] = path
    return binaries


def _check_staged(call: Call, target: Target, store: Callable[[], ArtifactStore]) -> None:
    """Staged inputs need the ``staged`` read root, and each must still hash as staged."""
    if not call.staged:
        return
    if STAGED_ROOT not in (target.descriptor.permissions.filesystem_read or []):
        raise NotGranted(
            f"module {target.module_id!r} was handed staged artifacts but does not declare "
            f"the read root {STAGED_ROOT!r} in permissions.filesystem_read; nothing "
            "was run. Add that root to the module's descriptor, or invoke it "
            "without staged="
        )
    for item in call.staged:
        store().verify(item)


def build_roots(
    descriptor: Descriptor,
    run_dir: Path,
    *,
    policy: Policy,
    staged_view: StagedView,
    staged: Sequence[StagedArtifact],
    capability: str = "",
) -> dict[str, Root]:
    """The declared roots the policy supplies (read roots ``ro``, write roots ``rw``).

    Raises
    ------
    ModuleHostError
        ``root_unavailable``: the policy maps a declared root to something that is no
        folder (a path not made yet, a file). Nothing ran: the module was promised that
        root (a write root always gets one, SPEC §1), and without it failed on its own
        line, its error pointing at the module instead of the policy.
    """
    perms = descriptor.permissions
    roots: dict[str, Root] = {}
    for name in perms.filesystem_read or []:
        if name == STAGED_ROOT and staged:
            view = staged_view(call_folder(run_dir), staged)
            roots[name] = Root(path=canonical_path(view), mode="ro")
            continue
        path = policy.root_path(name)
        if path is not None:
            _check_root(path, name, "read", descriptor, capability)
            roots[name] = Root(path=canonical_path(path), mode="ro")
    fresh = 0
    for name in perms.filesystem_write or []:
        path = policy.root_path(name)
        if path is None:
            safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64] or "root"
            path = call_folder(run_dir) / f"w{fresh}-{safe}"
            fresh += 1
            path.mkdir(mode=0o700)  # the sandbox id's way in is its ACL entry (access.py)
        else:
            _check_root(path, name, "write", descriptor, capability)
        roots[name] = Root(path=canonical_path(path), mode="rw")
    return roots


def call_folder(run_dir: Path) -> Path:
    """The call's folder ``<runs>/<request_id>``, made ``0700`` (its fresh write roots and
    staged view are made in it ``0700`` too).

    Its path is no secret: a sandboxed call's ``/proc/<pid>/mountinfo``, and bwrap's
    command line, name it to every account. On a root host the runs folder is ``0711`` so
    the sandbox id can pass, and with a ``0755`` call folder and ``0644`` files another
    account read every output and staged file of every call. Now only root (the host)
    reaches them, and the sandbox id: bwrap and the zygote bind each root as root in the
    sandbox's user namespace, then the module uses the root's own ACL entry
    (:func:`murmur_nb._sandbox.access.grant_root`); on the Landlock path, which uses real
    paths, the call folder gets the ``--x`` passage every folder above a root gets.
    """
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return run_dir


def _check_root(path: Path, name: str, kind: str, descriptor: Descriptor, capability: str) -> None:
    """Refuse the call when the policy maps root ``name`` to no folder (``root_unavailable``)."""
    if path.is_dir():
        return
    what = "is a file, not a folder" if path.exists() else "does not exist"
    given = descriptor.module
    subject = capability or f"module {given!r}"
    fix = (
        f"create it (mkdir -p {path}), or map {name!r} to an existing folder"
        if not path.exists()
        else f"map {name!r} to a folder"
    )
    raise ModuleHostError(
        f"policy maps {kind} root {name!r} to {path}, which {what}; {subject} was not run "
        f"(module {given!r} declares that root in permissions.filesystem_{kind}). Fix the "
        f"policy: {fix} in Policy(roots=...)",
        code="root_unavailable",
    )
