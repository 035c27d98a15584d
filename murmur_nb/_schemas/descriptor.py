"""Describe-time validation of a modproto v1 module (SPEC §1, "What the host checks on describe").

Every breach becomes a :class:`DescriptorProblem` (a record, never raised) with a JSON-ish
``path`` (such as ``capabilities[2].request_schema``) and a ``detail`` saying what is wrong
and what the module author should do. Validation never stops at the first breach: a
refused module is still listed, with *all* its errors, so its author can fix them in one
pass.

``protocol_versions`` is a membership test against :data:`~murmur_nb.protocol.PROTOCOL_ID`
and nothing more: other entries are neither rejected nor honoured, there is no ordering and
no negotiation (the Go seed is explicit about this). Produced artifacts are never validated
against ``artifact_schemas``; the host only checks that every id a capability lists exists.

The canonical form of a descriptor (:func:`canonical_json`) is the normalized wire model
with sorted keys and no whitespace; its SHA-256 pins operator approvals, and
:func:`describe_changes` says what changed between two descriptors in operator terms.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from murmur_nb._exceptions import DescriptorProblem
from murmur_nb._rules import DIGEST_RE, LONE_SURROGATE, clipped
from murmur_nb._schemas.nesting import TooDeep, decode_bounded
from murmur_nb._schemas.schemas import schema_problem
from murmur_nb.protocol import (
    OPERATION_DESCRIBE,
    PROTOCOL_ID,
    Capability,
    Descriptor,
    Overlay,
    Skill,
)

__all__ = [
    "REQUIREMENT_KINDS",
    "DescriptorError",
    "canonical_json",
    "descriptor_digest",
    "describe_changes",
    "parse_describe_output",
    "validate_descriptor",
]

REQUIREMENT_KINDS = frozenset({"binary", "version", "config", "env"})


#: Deprecated name of :class:`DescriptorProblem` (it is a record, not an exception); kept so
#: existing imports and ``isinstance`` checks keep working.
DescriptorError = DescriptorProblem


def parse_describe_output(
    stdout: bytes, module_id: str, module_dir: Path
) -> tuple[Descriptor | None, list[DescriptorProblem]]:
    """Check a ``module describe`` envelope and the descriptor inside it.

    Returns the descriptor (``None`` when it could not even be read) and every breach found.
    A descriptor is usable only when the error list is empty.
    """
    try:
        raw = decode_describe(stdout)
    except (TooDeep, ValueError) as exc:
        detail = (
            f"describe output is refused: {exc}"
            if isinstance(exc, TooDeep)
            else f"describe output is not one JSON document ({exc}); print exactly one "
            "envelope on standard output and send diagnostics to standard error"
        )
        return None, [DescriptorProblem("envelope", detail)]
    if not isinstance(raw, dict):
        return None, [DescriptorProblem("envelope", "the describe envelope must be a JSON object")]
    errors = _header_problems(raw, module_id)
    if raw.get("ok") is not True:
        err = raw.get("error")
        why = f": {err.get('code')}: {err.get('message')}" if isinstance(err, dict) else ""
        errors.append(DescriptorProblem("envelope.ok", f"describe did not succeed{why}"))
        return None, errors
    result = raw.get("result")
    unreadable = _unreadable(result)
    if unreadable is not None:
        errors.append(unreadable)
        return None, errors
    try:
        descriptor = Descriptor.model_validate(result)
    except PydanticValidationError as exc:
        for item in exc.errors():
            errors.append(DescriptorProblem(_loc_path(item["loc"]), item["msg"]))
        return None, errors
    errors.extend(validate_descriptor(descriptor, module_id, module_dir))
    return descriptor, errors


def _header_problems(raw: dict[str, Any], module_id: str) -> list[DescriptorProblem]:
    """The breaches of the describe envelope's fixed fields (protocol, module, operation, id)."""
    errors: list[DescriptorProblem] = []
    if raw.get("protocol") != PROTOCOL_ID:
        errors.append(
            DescriptorProblem(
                "envelope.protocol", f"is {raw.get('protocol')!r}, must be {PROTOCOL_ID!r}"
            )
        )
    if raw.get("module") != module_id:
        errors.append(
            DescriptorProblem(
                "envelope.module",
                f"is {raw.get('module')!r}, must equal the module folder name {module_id!r}",
            )
        )
    if raw.get("operation") != OPERATION_DESCRIBE:
        errors.append(
            DescriptorProblem(
                "envelope.operation", f"is {raw.get('operation')!r}, must be 'describe'"
            )
        )
    if raw.get("request_id", "") != "":
        errors.append(DescriptorProblem("envelope.request_id", "must be empty for describe"))
    return errors


def decode_describe(stdout: bytes) -> Any:
    """The one JSON document ``describe`` printed (``ValueError`` if it is not exactly one)."""
    text = stdout.decode("utf-8").strip()
    raw, end = decode_bounded(text)
    if end != len(text):
        raise ValueError(f"extra data after the document at character {end}")
    return raw


def _unreadable(result: object) -> DescriptorProblem | None:
    """Why the envelope's ``result`` cannot be read as a descriptor at all: not a JSON
    object, or text in it that is no Unicode text (a lone surrogate)."""
    if not isinstance(result, dict):
        return DescriptorProblem("envelope.result", "must hold the descriptor as a JSON object")
    lone = _lone_surrogate(result, ())
    if lone is None:
        return None
    where, char = lone
    return DescriptorProblem(_loc_path(where), (
        f"holds a lone surrogate (\\u{ord(char):04x}), half of a UTF-16 pair: no Unicode text, "
        "and no digest or display can hold it; write the character itself (or both halves of "
        "its \\u escape pair)"
    ))  # fmt: skip


def _lone_surrogate(
    value: object, loc: tuple[int | str, ...]
) -> tuple[tuple[int | str, ...], str] | None:
    """Where in a decoded JSON value a lone surrogate is first found (a key or a string), and
    the surrogate; ``None`` when there is none (the nesting was bounded when it was read)."""
    if isinstance(value, str):
        found = LONE_SURROGATE.search(value)
        return (loc, found.group()) if found else None
    if isinstance(value, dict):
        for key, item in value.items():
            found_key = LONE_SURROGATE.search(key)
            if found_key:
                return (*loc, key), found_key.group()
            deeper = _lone_surrogate(item, (*loc, key))
            if deeper is not None:
                return deeper
    elif isinstance(value, list):
        for i, item in enumerate(value):
            deeper = _lone_surrogate(item, (*loc, i))
            if deeper is not None:
                return deeper
    return None


def _loc_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "descriptor"


def validate_descriptor(
    descriptor: Descriptor, module_id: str, module_dir: Path
) -> list[DescriptorProblem]:
    """Every SPEC §1 describe rule applied to ``descriptor``; empty when it is accepted."""
    errors: list[DescriptorProblem] = []
    add = errors.append
    if descriptor.module != module_id:
        add(
            DescriptorProblem(
                "module", f"is {descriptor.module!r}, must equal the folder name {module_id!r}"
            )
        )
    versions = descriptor.protocol_versions or []
    if PROTOCOL_ID not in versions:
        add(
            DescriptorProblem(
                "protocol_versions",
                f"{versions!r} does not contain {PROTOCOL_ID!r}; the host speaks only "
                f"{PROTOCOL_ID} (a membership test, not a negotiation)",
            )
        )
    errors += _schema_problems(descriptor)
    errors += _capability_problems(descriptor, module_id)
    errors += _document_problems(descriptor, module_dir)
    for i, req in enumerate(descriptor.requirements or []):
        if req.kind not in REQUIREMENT_KINDS:
            add(
                DescriptorProblem(
                    f"requirements[{i}].kind",
                    f"{req.kind!r} is not one of {sorted(REQUIREMENT_KINDS)!r}",
                )
            )
    return errors


def _schema_problems(descriptor: Descriptor) -> list[DescriptorProblem]:
    """Every request and result schema must be a valid JSON Schema document."""
    problems = []
    for kind, schemas in (
        ("request_schemas", descriptor.request_schemas or {}),
        ("result_schemas", descriptor.result_schemas or {}),
    ):
        for schema_id, schema in schemas.items():
            problem = schema_problem(schema)
            if problem:
                problems.append(DescriptorProblem(f"{kind}.{schema_id}", problem))
    return problems


def _capability_problems(descriptor: Descriptor, module_id: str) -> list[DescriptorProblem]:
    """Ids namespaced and unique; schema ids declared; long-running ones name a poll."""
    problems: list[DescriptorProblem] = []
    add = problems.append
    caps = descriptor.capabilities or []
    seen: dict[str, int] = {}
    prefix = f"{module_id}."
    cap_ids = {c.id for c in caps}  # once: per capability, 20,000 of them took two minutes
    known = _Known(descriptor)
    for i, cap in enumerate(caps):
        where = f"capabilities[{i}]"
        shown = _quoted(cap.id)
        if not cap.id.startswith(prefix) or len(cap.id) == len(prefix):
            add(
                DescriptorProblem(
                    f"{where}.id",
                    f"{shown} is not namespaced by the module; name it '{prefix}<name>'",
                )
            )
        if cap.id in seen:
            add(
                DescriptorProblem(
                    f"{where}.id",
                    f"duplicate capability id {shown} (also capabilities[{seen[cap.id]}])",
                )
            )
        else:
            seen[cap.id] = i
        problems += _schema_ref_problems(cap, where, known)
        poll = _poll_problem(cap, cap_ids)
        if poll:
            add(DescriptorProblem(f"{where}.poll_capability", poll))
    return problems


#: How many declared ids a problem lists as known; the others are counted.
KNOWN_SHOWN = 10


def _quoted(text: str) -> str:
    """``text`` as a problem names it: quoted, cut to a label's length."""
    return repr(clipped(text))


class _Known:
    """The schema ids a descriptor declares, each map listed once for every problem that
    names it: a list per problem made N capabilities and M schemas N x M ids of messages
    (1,000 and 10,000 made 170 MB)."""

    def __init__(self, descriptor: Descriptor) -> None:
        self.maps: dict[str, Mapping[str, Any]] = {
            "request_schemas": descriptor.request_schemas or {},
            "result_schemas": descriptor.result_schemas or {},
            "artifact_schemas": descriptor.artifact_schemas or {},
        }
        self._listed: dict[str, str] = {}

    def listed(self, map_name: str) -> str:
        if map_name not in self._listed:
            names = sorted(self.maps[map_name])
            shown = ", ".join(_quoted(n) for n in names[:KNOWN_SHOWN])
            more = f" and {len(names) - KNOWN_SHOWN} more" if len(names) > KNOWN_SHOWN else ""
            self._listed[map_name] = f"[{shown}]{more}"
        return self._listed[map_name]


def _schema_ref_problems(cap: Capability, where: str, known: _Known) -> list[DescriptorProblem]:
    """The schema ids a capability names must be declared by the descriptor."""
    problems = []
    for field, map_name in (
        ("request_schema", "request_schemas"),
        ("result_schema", "result_schemas"),
    ):
        ref = getattr(cap, field)
        if ref not in known.maps[map_name]:
            problems.append(
                DescriptorProblem(
                    f"{where}.{field}",
                    f"schema id {_quoted(ref)} is not a key of {map_name} "
                    f"(known: {known.listed(map_name)})",
                )
            )
    artifact_schemas = known.maps["artifact_schemas"]
    for j, art_id in enumerate(cap.artifact_schemas or []):
        if art_id not in artifact_schemas:
            problems.append(
                DescriptorProblem(
                    f"{where}.artifact_schemas[{j}]",
                    f"artifact schema id {_quoted(art_id)} is not declared in artifact_schemas "
                    f"(known: {known.listed('artifact_schemas')})",
                )
            )
    return problems


def _poll_problem(cap: Capability, cap_ids: set[str]) -> str | None:
    """Why a long-running capability's ``poll_capability`` is unusable, or ``None``."""
    if not cap.long_running:
        return None
    if not cap.poll_capability:
        return "a long_running capability must name its poll_capability"
    if cap.poll_capability not in cap_ids:
        return f"{_quoted(cap.poll_capability)} is not a capability of this module"
    if cap.poll_capability == cap.id:
        return "a capability cannot poll itself"
    return None


def _document_problems(descriptor: Descriptor, module_dir: Path) -> list[DescriptorProblem]:
    """Overlays and skills stay inside the module folder and carry a well-formed digest."""
    problems = []
    documents: list[tuple[str, Sequence[Overlay | Skill]]] = [
        ("agent_overlays", descriptor.agent_overlays or []),
        ("skills", descriptor.skills or []),
    ]
    for list_name, items in documents:
        for i, item in enumerate(items):
            where = f"{list_name}[{i}]"
            problem = _confined_path_problem(item.path, module_dir)
            if problem:
                problems.append(DescriptorProblem(f"{where}.path", problem))
            if not DIGEST_RE.fullmatch(item.digest):
                problems.append(
                    DescriptorProblem(
                        f"{where}.digest",
                        f"{item.digest!r} is not 'sha256:' followed by 64 lowercase hex digits",
                    )
                )
    return problems


def _confined_path_problem(path: str, module_dir: Path) -> str | None:
    """Why ``path`` (module-relative) may not be used, or ``None`` when it stays inside."""
    if not path:
        return "is empty; give a path relative to the module folder"
    if "\x00" in path:
        return "contains a NUL byte"
    if posixpath.isabs(path) or path.startswith("\\"):
        return f"{path!r} is absolute; give a path relative to the module folder"
    if ".." in path.replace("\\", "/").split("/"):
        return f"{path!r} climbs out with '..'; keep it inside the module folder"
    base = os.path.realpath(module_dir)
    real = os.path.realpath(Path(base, path))
    if real != base and os.path.commonpath([base, real]) != base:
        return f"{path!r} resolves to {real!r}, outside the module folder (through a link)"
    return None


def canonical_json(descriptor: Descriptor) -> bytes:
    """The canonical JSON bytes of a descriptor: normalized model, sorted keys, compact."""
    return json.dumps(
        descriptor.model_dump(mode="json"),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def descriptor_digest(descriptor: Descriptor) -> str:
    """``sha256:<hex>`` of :func:`canonical_json`; approvals are pinned to it."""
    return "sha256:" + hashlib.sha256(canonical_json(descriptor)).hexdigest()


def _fmt(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _field_changes(prefix: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out.append(f"{prefix}{key}: {_fmt(old.get(key))} -> {_fmt(new.get(key))}")
    return out


def describe_changes(old: Descriptor, new: Descriptor) -> list[str]:
    """What changed from ``old`` to ``new``, one line each, in operator terms.

    Capabilities added or removed, each capability's effects and other fields, the
    module's permissions, and any other top-level change (schemas, version, ...).
    """
    changes: list[str] = []
    old_caps = {c.id: c for c in old.capabilities or []}
    new_caps = {c.id: c for c in new.capabilities or []}
    for cid in sorted(set(new_caps) - set(old_caps)):
        changes.append(f"capability {cid} added")
    for cid in sorted(set(old_caps) - set(new_caps)):
        changes.append(f"capability {cid} removed")
    for cid in sorted(set(old_caps) & set(new_caps)):
        a = old_caps[cid].model_dump(mode="json")
        b = new_caps[cid].model_dump(mode="json")
        changes += _field_changes(f"capability {cid} effects.", a.pop("effects"), b.pop("effects"))
        changes += _field_changes(f"capability {cid} ", a, b)
    a_desc = old.model_dump(mode="json")
    b_desc = new.model_dump(mode="json")
    changes += _field_changes("permissions.", a_desc.pop("permissions"), b_desc.pop("permissions"))
    a_desc.pop("capabilities")
    b_desc.pop("capabilities")
    for key in sorted(set(a_desc) | set(b_desc)):
        if a_desc.get(key) != b_desc.get(key):
            if key in {"name", "version", "module"}:
                changes.append(f"{key}: {_fmt(a_desc.get(key))} -> {_fmt(b_desc.get(key))}")
            else:
                changes.append(f"{key} changed")
    return changes
