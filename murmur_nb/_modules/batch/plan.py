"""What a batch runs, settled once before anything runs: the module, its digest, the checks.

What a batch needs from the host, through its two entry points and nothing private: the
resolved capability (descriptor digest, verified snapshot) from :meth:`ModuleHost.resolve`
and ``invoke``'s own input check from :meth:`ModuleHost.input_problem`. The module digest is
SHA-256 over the descriptor and code digests: what an approval pins and what the journal
keys rows by.

:func:`module_change` is how a driver that runs no ``invoke`` here (Dask) keeps the rule a
local row's own ``invoke`` keeps: a row is not started once the module no longer resolves to
the plan's digests (``module_changed``). It looks through :meth:`ModuleHost.resolve`, a
``stat`` walk of the folder unless it changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import InvalidDescriptor, ModuleNotFound

if TYPE_CHECKING:
    from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.batch.longrun import Poll

__all__ = ["Plan", "flat_result_fields", "module_change", "plan_for"]

_SCALARS = frozenset({"string", "number", "integer", "boolean", "null"})


@dataclass(frozen=True)
class Plan:
    """A capability resolved for a batch."""

    capability: str
    module: str
    descriptor_digest: str
    code: str
    snapshot: Path
    flat_result: tuple[str, ...] | None
    poll: Poll | None
    target: Any  # the host's resolved target, for the input check

    @property
    def module_digest(self) -> str:
        both = f"{self.descriptor_digest}\n{self.code}".encode()
        return "sha256:" + hashlib.sha256(both).hexdigest()


def flat_result_fields(schema: Any) -> tuple[str, ...] | None:
    """The property names of a flat object schema (every property a scalar), else ``None``."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return None
    for prop in props.values():
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if not (kinds <= _SCALARS or (isinstance(prop, Mapping) and "enum" in prop and
                                      kind is None)):
            return None
    return tuple(str(p) for p in props)


def _poll(host: ModuleHost, target: Any, every: float, timeout: float) -> Poll | None:
    if not target.cap.long_running or not target.cap.poll_capability:
        return None
    poll_cap = target.descriptor.capability(target.cap.poll_capability)
    schema = (target.descriptor.request_schemas or {}).get(poll_cap.request_schema, {})
    names = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    return Poll(target.cap.poll_capability, tuple(names), every, timeout)


def plan_for(
    host: ModuleHost, capability: str, *, poll_every: float, poll_timeout: float
) -> Plan:
    """Resolve ``capability`` against its module's current descriptor (describe runs)."""
    target = host.resolve(capability, refresh=True)
    desc = target.descriptor
    result_schema = (desc.result_schemas or {}).get(target.cap.result_schema)
    final = target.cap
    if target.cap.long_running and target.cap.poll_capability:
        poll_cap = desc.capability(target.cap.poll_capability)
        final = poll_cap if poll_cap is not None else final
        result_schema = (desc.result_schemas or {}).get(final.result_schema)
    return Plan(
        capability=capability, module=target.module_id, descriptor_digest=target.digest,
        code=target.code, snapshot=target.snapshot,
        flat_result=flat_result_fields(result_schema),
        poll=_poll(host, target, poll_every, poll_timeout), target=target,
    )  # fmt: skip


def input_problem(host: ModuleHost, plan: Plan, value: Any) -> str | None:
    """Why ``value`` would be refused by ``invoke`` (the same rules), or ``None``."""
    return host.input_problem(plan.target, value)


def module_change(host: ModuleHost, plan: Plan) -> str | None:
    """Why a row of ``plan`` may not start because its module changed since the batch was
    approved (the ``module_changed`` message, as a local row's ``invoke`` gives it), or
    ``None`` while the module still resolves to the plan's digests."""
    try:
        target = host.resolve(plan.capability)
    except (InvalidDescriptor, ModuleNotFound) as exc:
        return (
            f"the module changed after the batch started (it no longer resolves: "
            f"{exc.message}): this row was not run; fix the module, then run map() again to "
            "approve and run the new code"
        )
    if (target.digest, target.code) != (plan.descriptor_digest, plan.code):
        return (
            f"module {plan.module!r} changed after the batch started (its descriptor or code "
            "digest differs): this row was not run; run map() again to approve and run the "
            "new code"
        )
    return None
