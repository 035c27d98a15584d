"""What a batch runs, settled once before anything runs: the prepared call, its digest, checks.

A batch uses the host's public API only: :meth:`ModuleHost.prepare` resolves the capability
as ``invoke`` does (``describe`` runs at most once: when the module's folder changed since
its last one, when it said it needs setup, or to weigh a standing approval) and decides its
approval on that descriptor; every row then runs that
:class:`~murmur_nb.PreparedCall` (and a long-running capability's poll its own, prepared
once too). The module digest is SHA-256 over the descriptor and code digests: what an
approval pins and what the journal keys rows by.

An approval refused here is kept (:attr:`Plan.refusal`), not raised: the batch raises it
with its own count and cost only when rows are left to run after the journal's.

:func:`module_change` is the batch's explicit look at the live module: a row is not started
once the module no longer resolves to the plan's digests (``module_changed``). Local rows
ask their run to look (``run(..., if_unchanged=True)``, audited like a refusal); on Dask the
kernel looks before each round of rows. Either way a ``stat`` walk of the folder, and
``describe`` only when it changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from murmur_nb._batch.longrun import Poll
from murmur_nb._exceptions import ApprovalRequired, ModuleHostError
from murmur_nb._modules.call import MODULE_CHANGED
from murmur_nb._modules.prepared import PreparedCall

if TYPE_CHECKING:
    from murmur_nb._modules.host import ModuleHost

__all__ = ["Plan", "flat_result_fields", "module_change", "plan_for"]

_SCALARS = frozenset({"string", "number", "integer", "boolean", "null"})


@dataclass(frozen=True)
class Plan:
    """A capability resolved and prepared for a batch."""

    capability: str
    module: str
    descriptor_digest: str
    code: str
    snapshot: Path
    #: a flat object result's properties, each with its one JSON type (``integer``,
    #: ``number``, ``string``, ``boolean``; ``""`` when the schema allows more than one):
    #: :func:`flat_result_fields`. ``None``: the result is not a flat object
    flat_result: tuple[tuple[str, str], ...] | None
    poll: Poll | None
    target: Any  # the host's resolved target
    #: the call every row runs; ``None`` when approval was refused (:attr:`refusal`)
    prepared: PreparedCall | None = None
    #: a long-running capability's poll, prepared once too
    poll_prepared: PreparedCall | None = None
    refusal: ApprovalRequired | None = None
    #: the request schema's top-level properties typed ``integer`` (a DataFrame's integral
    #: floats there go as integers: :func:`~murmur_nb._batch.inputs.canonical`)
    integer_inputs: frozenset[str] = frozenset()

    @property
    def module_digest(self) -> str:
        both = f"{self.descriptor_digest}\n{self.code}".encode()
        return "sha256:" + hashlib.sha256(both).hexdigest()


def _scalar_type(kinds: set[Any]) -> str:
    """The one JSON type a property of these ``type`` values has (``null`` aside: a missing
    value is one anyway); ``number`` for integers and numbers mixed; ``""`` otherwise."""
    kinds = kinds - {"null"}
    if kinds == {"integer"}:
        return "integer"
    if kinds and kinds <= {"integer", "number"}:
        return "number"
    if kinds in ({"string"}, {"boolean"}):
        return str(kinds.pop())
    return ""


def flat_result_fields(schema: Any) -> tuple[tuple[str, str], ...] | None:
    """The properties of a flat object schema (every property a scalar), each with its JSON
    type (:func:`_scalar_type`), else ``None``.

    Examples
    --------
    >>> flat_result_fields({"type": "object", "properties": {
    ...     "n": {"type": "integer"}, "x": {"type": ["number", "null"]}, "e": {"enum": [1]}}})
    (('n', 'integer'), ('x', 'number'), ('e', ''))
    """
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return None
    fields = []
    for name, prop in props.items():
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if not (kinds <= _SCALARS or (isinstance(prop, Mapping) and "enum" in prop and
                                      kind is None)):
            return None
        fields.append((str(name), _scalar_type(kinds)))
    return tuple(fields)


def integer_fields(schema: Any) -> frozenset[str]:
    """The top-level properties of an object schema that must be integers (``type``
    ``integer``, or a list of types holding ``integer`` and not ``number``)."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return frozenset()
    found = set()
    for name, prop in props.items():
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if "integer" in kinds and "number" not in kinds:
            found.add(str(name))
    return frozenset(found)


def _poll(target: Any, every: float, timeout: float) -> Poll | None:
    if not target.cap.long_running or not target.cap.poll_capability:
        return None
    poll_cap = target.descriptor.capability(target.cap.poll_capability)
    schema = (target.descriptor.request_schemas or {}).get(poll_cap.request_schema, {})
    names = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    return Poll(target.cap.poll_capability, tuple(names), every, timeout)


def _prepared(
    host: ModuleHost, capability: str, approve: bool
) -> tuple[PreparedCall | None, PreparedCall | None, ApprovalRequired | None]:
    """The row's prepared call and its poll's (``describe`` at most once), or the refusal."""
    try:
        prepared = host.prepare(capability, approve=approve)
        cap = prepared.target.cap
        if not (cap.long_running and cap.poll_capability):
            return prepared, None, None
        poll = host.prepare(cap.poll_capability, approve=approve)
    except ApprovalRequired as exc:
        return None, None, exc
    if (poll.digest, poll.code) != (prepared.digest, prepared.code):
        raise ModuleHostError(
            f"module {prepared.module!r} changed while the batch was being prepared; nothing "
            "was run. Run map() again", code=MODULE_CHANGED)  # fmt: skip
    return prepared, poll, None


def plan_for(
    host: ModuleHost, capability: str, *, poll_every: float, poll_timeout: float,
    approve: bool = False,
) -> Plan:  # fmt: skip
    """Resolve and prepare ``capability`` against its module's current descriptor
    (``describe`` at most once)."""
    prepared, poll_prepared, refusal = _prepared(host, capability, approve)
    target = prepared.target if prepared is not None else host.resolve(capability)
    desc = target.descriptor
    result_schema = (desc.result_schemas or {}).get(target.cap.result_schema)
    if target.cap.long_running and target.cap.poll_capability:
        poll_cap = desc.capability(target.cap.poll_capability)
        final = poll_cap if poll_cap is not None else target.cap
        result_schema = (desc.result_schemas or {}).get(final.result_schema)
    return Plan(
        capability=capability, module=target.module_id, descriptor_digest=target.digest,
        code=target.code, snapshot=target.snapshot,
        flat_result=flat_result_fields(result_schema),
        integer_inputs=integer_fields((desc.request_schemas or {}).get(target.cap.request_schema)),
        poll=_poll(target, poll_every, poll_timeout), target=target,
        prepared=prepared, poll_prepared=poll_prepared, refusal=refusal,
    )  # fmt: skip


def input_problem(host: ModuleHost, plan: Plan, value: Any) -> str | None:
    """Why ``value`` would be refused by ``invoke`` (the same rules), or ``None``."""
    if plan.prepared is not None:
        return plan.prepared.input_problem(value)
    return host.input_problem(plan.target, value)


def module_change(plan: Plan) -> str | None:
    """Why a row of ``plan`` may not start because its module changed since the batch was
    prepared (the ``module_changed`` message, as a local row's run gives it), or ``None``
    while the module still resolves to the plan's digests."""
    return None if plan.prepared is None else plan.prepared.changed()
