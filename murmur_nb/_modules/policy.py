"""Host policy: what an invocation may be given, and when an operator must approve.

A module's ``permissions`` are a *request*; installing a module grants nothing. For each
invocation the host intersects that request with this policy:

* **roots** — logical root names mapped to folders. Only names the module declared are
  supplied, canonicalized (``realpath``), ``ro`` for ``filesystem_read`` and ``rw`` for
  ``filesystem_write``. A write root the policy does not map gets a fresh, empty
  per-invocation folder; a read root the policy does not map is simply absent. A root the
  policy maps to no folder (not made yet, a file) refuses the call, ``root_unavailable``.
* **grants** — per kind (network, credentials, paid providers, subprocess) the names the
  policy allows; ``"*"`` allows every name the module declared. ``publish`` is a boolean.
* **binaries** — a resolution table from a subprocess name to an absolute path. A granted
  name not in the table is looked up once on the *host's* ``PATH``; a name that resolves
  to nothing is absent from the request, never present-and-empty.
* **approval** — :meth:`Policy.approval_reasons` implements the SPEC default (unknown cost,
  paid providers, publish, credentials, external writes). ``approved`` is an operator
  allow-list of capability ids; the host pins each entry to the descriptor it first saw,
  so a changed descriptor needs approving again. Subclass and override
  :meth:`Policy.approval_reasons` for another gate.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murmur_nb._files.beneath import real_path
from murmur_nb._sandbox import MECHANISMS, MOST_TMPFS_BYTES, NETWORK_ISOLATION, SANDBOX_MODES
from murmur_nb._schemas.bounded import DEFAULT_BUDGET, DEFAULT_STEPS
from murmur_nb.protocol import Capability, Descriptor, Grants

__all__ = ["GRANT_KINDS", "Policy"]

#: The grant kinds a policy allows by name (``publish`` is a separate boolean).
GRANT_KINDS = ("network", "credentials", "paid_providers", "subprocess")
#: The policy's fields that are true or false, and nothing else.
_BOOL_FIELDS = ("publish",)
#: The most ``deadline_ms_limit`` / ``max_output_bytes_limit`` may be: every request carries
#: a ``deadline_ms`` and a ``max_output_bytes`` up to them, and a module written in Go reads
#: both into an ``int`` (the seed's ``Request``), which holds no more than ``2**63 - 1``.
MOST_REQUEST_BOUND = 2**63 - 1


def _names(field: str, value: Iterable[str] | str | None) -> frozenset[str]:
    """``value`` as a set of names: ``None`` none, a string one, else each item a string.

    Anything else (a YAML ``network: true``, ``[yes]``) is refused: ``frozenset(True)`` was
    a ``TypeError`` from deep inside, and a list holding ``True`` granted a host so named."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        items = list(value)
        if all(isinstance(item, str) for item in items):
            return frozenset(items)
    raise ValueError(
        f"Policy.{field} must be a list of names (or one name; '*' for every name the "
        f"module declares), like ['api.example']; got {value!r:.200}"
    )


def _path_mapping(field: str, given: object, example: str) -> dict[str, str | os.PathLike[str]]:
    """``given`` as a dict of names to non-empty paths, or a ``ValueError`` saying why not."""
    if not isinstance(given, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | os.PathLike) for k, v in given.items()
    ):
        raise ValueError(
            f"Policy.{field} must map names to paths, like {example}; got {given!r:.200}"
        )
    for name, path in given.items():
        if not os.fspath(path):
            raise ValueError(
                f"Policy.{field}[{name!r}] is an empty path, which would mean the current "
                f"folder of the kernel, whatever it is then; give the folder itself, like "
                f"{example}"
            )
    return dict(given)


@dataclass(frozen=True)
class Policy:
    """What the host allows. The default allows nothing beyond fresh write roots.

    Parameters
    ----------
    roots
        Logical root name -> folder. Supplied only when the module declared the name; a
        call of a module that declares a name mapped to no folder is refused
        (``ModuleHostError``, code ``root_unavailable``). An empty path is a ``ValueError``
        (it would name whatever the kernel's current folder is).
    network, credentials, paid_providers, subprocess
        Names the policy allows per grant kind; ``"*"`` allows every declared name.
    publish
        Whether a module that declares ``publish`` is granted it: ``True`` or ``False``, and
        nothing else (``'false'`` or ``'no'`` from a config file is a ``ValueError``, not a
        grant).
    binaries
        Subprocess name -> absolute path of the binary the host supplies for it.
    approved
        Operator allow-list of capability ids that may run without ``approve=True``
        (pinned by the host to the descriptor it saw first).
    deadline_ms, max_output_bytes
        Defaults for an invocation's wall-clock budget and standard-output ceiling.
    describe_deadline_ms, describe_max_output_bytes
        The same bounds for ``module describe``.
    sandbox
        ``"required"`` (default): every module process runs in the OS sandbox, and the host
        refuses to run one (``sandbox_unavailable``) when a guarantee is missing on this
        machine. ``"best-effort"``: run with what is available and a visible warning.
        ``"off"``: run unconfined. The default is the careful one: a module you did not
        write must not silently get the run of your account because a package is missing;
        the refusal says exactly what to install, and opting out is one word.
    network_isolation
        What a network grant reaches. ``"outside-only"`` (default): outside hosts, never this
        machine's loopback, its own addresses, link-local (cloud metadata) addresses or a Unix
        socket, and only the granted hosts when the grant names them (each destination is
        checked by the host: :mod:`murmur_nb._sandbox.netguard`); where the check cannot run,
        ``sandbox="required"`` refuses network-granted calls. ``"none"``: a grant reaches every
        address, the notebook's own services included (an explicit opt-in, shown in
        ``host.sandbox``).
    sandbox_mechanisms
        The mechanisms the host may use, out of ``("bwrap", "landlock", "seccomp",
        "reaper")`` (leave out one to force another, e.g. to test a fallback; without
        ``"seccomp"`` bwrap keeps the module offline with a network namespace instead of the
        socket filter; ``"reaper"`` is the subreaper helper that holds the process tree where
        bwrap cannot run).
    deadline_ms_limit, max_output_bytes_limit
        The largest ``deadline_ms`` / ``max_output_bytes`` an invocation may ask for; above
        them ``invoke`` refuses with ``invalid_input``. Defaults: a day, and 1 GiB (a Go
        ``int`` holds both, and nothing larger belongs in an envelope); at most ``2**63 - 1``
        (a Go ``int``: a module written in Go could decode no request past it).
    max_artifact_bytes
        The largest artifact the host verifies, renders or stages, checked against the
        claim and ``fstat`` before a byte is hashed. Default 1 GiB.
    verify_budget_ms
        Wall-clock budget for verifying all artifacts of one invocation (resolving their
        paths and hashing included);
        when it is spent the remaining artifacts are rejected with
        ``verification_budget_exceeded``. Default 60 s: SHA-256 of 1 GiB takes a few
        seconds on a laptop disk.
    max_pattern_work, max_schema_steps
        What one schema check (the request check, the result check) may do: bytes scanned
        by patterns past the first 256 of each string (default 4 MiB: about 40 ms at the
        worst, and nothing at all for names, identifiers and dates), and keywords evaluated
        by ``jsonschema`` (default one million: about 6 s at the worst; a valid value of a
        schema without patterns is accepted by ``jsonschema-rs`` first and spends none).
        Past either, the value is not accepted and the message says which budget was spent
        (:mod:`murmur_nb._schemas.bounded`).
    max_module_entries, max_module_bytes
        What the host hashes and copies of one module folder for its verified snapshot
        (files, folders and links; bytes of regular files), counted before a byte is read.
        Past either, or with a sparse file, the module is refused (``module_too_large``).
        Defaults: 20,000 entries and 512 MiB (about 2 s to hash and copy once on a laptop).
    sandbox_tmpfs_bytes
        The size of a module sandbox's private tmpfs (its ``/tmp`` and working folder, held in
        the machine's memory): a write past it fails in the module with ``ENOSPC``. ``None``
        (default): ``$MURMUR_NB_SANDBOX_TMPFS``, else 1 GiB.

    Examples
    --------
    >>> p = Policy(roots={"media": "/tmp"}, network=["*"], approved=["demo.render"])
    >>> p.allows("network", "api.example")
    True
    """

    roots: Mapping[str, str | os.PathLike[str]] = field(default_factory=dict)
    network: Iterable[str] = ()
    credentials: Iterable[str] = ()
    paid_providers: Iterable[str] = ()
    publish: bool = False
    subprocess: Iterable[str] = ()
    binaries: Mapping[str, str | os.PathLike[str]] = field(default_factory=dict)
    approved: Iterable[str] = ()
    deadline_ms: int = 60_000
    max_output_bytes: int = 16 * 1024 * 1024
    describe_deadline_ms: int = 15_000
    describe_max_output_bytes: int = 8 * 1024 * 1024
    sandbox: str = "required"
    network_isolation: str = "outside-only"
    sandbox_mechanisms: Iterable[str] = MECHANISMS
    deadline_ms_limit: int = 24 * 3600 * 1000
    max_output_bytes_limit: int = 1 << 30
    max_artifact_bytes: int = 1 << 30
    verify_budget_ms: int = 60_000
    max_pattern_work: int = DEFAULT_BUDGET
    max_schema_steps: int = DEFAULT_STEPS
    max_module_entries: int = 20_000
    max_module_bytes: int = 512 * 1024 * 1024
    sandbox_tmpfs_bytes: int | None = None

    def __post_init__(self) -> None:
        for kind in (*GRANT_KINDS, "approved"):
            object.__setattr__(self, kind, _names(kind, getattr(self, kind)))
        examples = {"roots": "{'media': '/data/media'}", "binaries": "{'tool': '/usr/bin/tool'}"}
        for name, example in examples.items():
            object.__setattr__(self, name, _path_mapping(name, getattr(self, name), example))
        for name in _BOOL_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                # a string never: 'false' and 'no' are truthy, and granted what they deny
                raise ValueError(
                    f"Policy.{name} must be true or false (a bool: True/False in Python, an "
                    f"unquoted true/false in YAML or JSON), got {value!r:.200}"
                )
        if self.sandbox not in SANDBOX_MODES:
            hint = (
                " (YAML reads an unquoted off or no as false: quote it, sandbox: 'off')"
                if isinstance(self.sandbox, bool)
                else ""
            )
            raise ValueError(
                f"Policy.sandbox must be one of {SANDBOX_MODES!r}, got {self.sandbox!r}{hint}"
            )
        if self.network_isolation not in NETWORK_ISOLATION:
            raise ValueError(
                f"Policy.network_isolation must be one of {NETWORK_ISOLATION!r}, got "
                f"{self.network_isolation!r}"
            )
        mechanisms = tuple(_names("sandbox_mechanisms", self.sandbox_mechanisms))
        unknown = sorted(set(mechanisms) - set(MECHANISMS))
        if unknown:
            raise ValueError(
                f"Policy.sandbox_mechanisms: unknown {unknown!r}; the known ones are {MECHANISMS!r}"
            )
        object.__setattr__(self, "sandbox_mechanisms", tuple(sorted(mechanisms)))
        self._check_numbers()

    def _check_numbers(self) -> None:
        """Every number positive; the bounds a request carries within what its reader holds."""
        for name, value in (
            ("deadline_ms", self.deadline_ms),
            ("max_output_bytes", self.max_output_bytes),
            ("describe_deadline_ms", self.describe_deadline_ms),
            ("describe_max_output_bytes", self.describe_max_output_bytes),
            ("deadline_ms_limit", self.deadline_ms_limit),
            ("max_output_bytes_limit", self.max_output_bytes_limit),
            ("max_artifact_bytes", self.max_artifact_bytes),
            ("verify_budget_ms", self.verify_budget_ms),
            ("max_pattern_work", self.max_pattern_work),
            ("max_schema_steps", self.max_schema_steps),
            ("max_module_entries", self.max_module_entries),
            ("max_module_bytes", self.max_module_bytes),
            *(
                [("sandbox_tmpfs_bytes", self.sandbox_tmpfs_bytes)]
                if self.sandbox_tmpfs_bytes is not None
                else []
            ),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Policy.{name} must be a positive integer, got {value!r}")
        for name in ("deadline_ms_limit", "max_output_bytes_limit"):
            if getattr(self, name) > MOST_REQUEST_BOUND:
                raise ValueError(
                    f"Policy.{name}={getattr(self, name)} is above {MOST_REQUEST_BOUND} "
                    "(2**63 - 1), the most a request may carry: a module written in Go reads "
                    "deadline_ms and max_output_bytes into an int, and fails on every "
                    f"request past it; lower it (at most {MOST_REQUEST_BOUND})"
                )
        if (self.sandbox_tmpfs_bytes or 0) > MOST_TMPFS_BYTES:
            raise ValueError(
                f"Policy.sandbox_tmpfs_bytes={self.sandbox_tmpfs_bytes} is above the most a "
                f"sandbox's tmpfs takes, {MOST_TMPFS_BYTES} (1 PiB); lower it"
            )
        for name, limit in (
            ("deadline_ms", self.deadline_ms_limit),
            ("max_output_bytes", self.max_output_bytes_limit),
            ("describe_deadline_ms", self.deadline_ms_limit),
            ("describe_max_output_bytes", self.max_output_bytes_limit),
        ):
            if getattr(self, name) > limit:
                raise ValueError(
                    f"Policy.{name}={getattr(self, name)} is above its bound {limit}; lower "
                    "it or raise the bound (deadline_ms_limit / max_output_bytes_limit)"
                )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Policy:
        """A policy from a plain mapping (for example a parsed YAML or JSON file)."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown policy keys {unknown!r}; the known keys are {sorted(known)!r}"
            )
        return cls(**dict(data))

    def allows(self, kind: str, name: str) -> bool:
        """Whether the policy allows ``name`` for grant ``kind``."""
        allowed: frozenset[str] = getattr(self, kind)
        return "*" in allowed or name in allowed

    def grants_for(self, descriptor: Descriptor) -> Grants:
        """Declared ∩ allowed, per kind. The module must assume nothing else."""
        perms = descriptor.permissions
        values: dict[str, Any] = {}
        for kind in GRANT_KINDS:
            declared = getattr(perms, kind) or []
            if kind == "subprocess":
                granted = [n for n in declared if self.allows(kind, n) or n in self.binaries]
            else:
                granted = [n for n in declared if self.allows(kind, n)]
            values[kind] = sorted(set(granted))
        values["publish"] = bool(perms.publish and self.publish)
        return Grants(**values)

    def resolve_binary(self, name: str) -> str | None:
        """The absolute path supplied for subprocess ``name``, or ``None`` when unresolvable."""
        explicit = self.binaries.get(name)
        if explicit is not None:
            path = os.fspath(explicit)
            if not Path(path).is_absolute():
                return None
        else:
            if "/" in name:
                return None
            found = shutil.which(name)
            if found is None:
                return None
            path = found
        real = os.path.realpath(path)
        if Path(real).is_file() and os.access(real, os.X_OK):
            return real
        return None

    def root_path(self, name: str) -> Path | None:
        """The canonical folder policy maps root ``name`` to, or ``None``."""
        value = self.roots.get(name)
        if value is None:
            return None
        return Path(real_path(value))

    def approval_reasons(self, descriptor: Descriptor, capability: Capability) -> list[str]:
        """Why ``capability`` needs operator approval under the SPEC default; empty: it does not.

        Approval is needed when the cost is not known (``effects.cost_known`` false), or the
        module declares paid providers, publish or credentials, or the capability declares
        external writes.
        """
        reasons: list[str] = []
        effects = capability.effects
        perms = descriptor.permissions
        if not effects.cost_known:
            reasons.append(
                f"{capability.id} declares no numeric cost (effects.cost_known is false), "
                "and this host asks for approval whenever no cost is known"
            )
        if perms.paid_providers:
            reasons.append(
                f"module {descriptor.module} declares paid providers: "
                f"{', '.join(perms.paid_providers)}"
            )
        if perms.publish:
            reasons.append(f"module {descriptor.module} declares it may publish")
        if perms.credentials:
            reasons.append(
                f"module {descriptor.module} declares credentials: {', '.join(perms.credentials)}"
            )
        if effects.external_writes:
            reasons.append(f"{capability.id} writes outside the host (effects.external_writes)")
        return reasons
