"""The small modproto v1 toolkit every demo module carries (standard library only).

:func:`murmur_nb.prepare_demo_home` copies this file beside each module's ``main.py``, so an
installed demo module is a self-contained folder: it never imports :mod:`murmur_nb` (which would
cost a pydantic import on every call) and it could be moved to another host unchanged.

Everything a module writes to standard output goes through :func:`run`, which prints exactly one
envelope; diagnostics go to standard error. The key order of every JSON object follows the Go
seed's struct order so the bytes read naturally next to the seed.

Every input is checked against its capability's ``request_schema`` before the handler runs
(:func:`input_problem`), and one it cannot use is answered ``ok: false`` with ``invalid_input``.
The host already validates what it sends, but a host may be told not to (the checker's
``validate_input=False``), and a module must answer any input with a refusal, never with
``ok: true`` for a list or a number where its schema asks for an object or a string.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = [
    "PROTOCOL_ID",
    "Context",
    "Failure",
    "Handler",
    "Outcome",
    "SCHEMA_DIALECT",
    "capability",
    "digest_bytes",
    "effects",
    "input_problem",
    "run",
]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

PROTOCOL_ID = "modproto.v1"


class Failure(Exception):
    """A module error: becomes an ``ok: false`` envelope with this stable ``code``."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = dict(details) if details is not None else None


def digest_bytes(data: bytes) -> str:
    """``sha256:<lowercase hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def effects(
    *,
    local: bool = True,
    network: bool = False,
    external_writes: bool = False,
    provider: str = "",
    cost_known: bool = True,
) -> dict[str, Any]:
    """An ``Effects`` object in the seed's key order."""
    return {
        "local": local,
        "network": network,
        "external_writes": external_writes,
        "provider": provider,
        "cost_known": cost_known,
    }


def capability(
    cap_id: str,
    title: str,
    summary: str,
    *,
    artifacts: list[str],
    cap_effects: dict[str, Any] | None = None,
    skills: list[str] | None = None,
    poll: str = "",
) -> dict[str, Any]:
    """A ``Capability`` whose request/result schema ids are ``<cap_id>.request/.result``."""
    cap: dict[str, Any] = {
        "id": cap_id,
        "title": title,
        "summary": summary,
        "request_schema": f"{cap_id}.request",
        "result_schema": f"{cap_id}.result",
        "artifact_schemas": artifacts,
        "effects": cap_effects if cap_effects is not None else effects(),
        "skills": skills or [],
        "long_running": bool(poll),
    }
    if poll:
        cap["poll_capability"] = poll
    return cap


@dataclass
class Outcome:
    """What a handler returns: the result object plus execution facts that differ per call."""

    result: Any
    provider: str = ""
    estimated_cost: float | None = None
    actual_cost: float | None = None
    network: bool = False
    external_writes: bool = False


@dataclass
class Context:
    """One invocation as the module sees it: the request and the artifacts written so far."""

    module: str
    request: dict[str, Any]
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def input(self) -> dict[str, Any]:
        value = self.request.get("input")
        return value if isinstance(value, dict) else {}

    def root(self, name: str, *, mode: str | None = None) -> Path:
        """The absolute folder the host supplied as root ``name`` (optionally of ``mode``)."""
        roots = self.request.get("roots") or {}
        entry = roots.get(name) if isinstance(roots, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise Failure(
                "missing_root",
                f"the host supplied no root named {name!r} to this invocation; "
                f"roots supplied: {sorted(roots) if isinstance(roots, dict) else []}",
                details={"root": name},
            )
        if mode is not None and entry.get("mode") != mode:
            raise Failure(
                "wrong_root_mode",
                f"root {name!r} was supplied as {entry.get('mode')!r} but this module needs "
                f"{mode!r}",
                details={"root": name},
            )
        return Path(entry["path"])

    def binary(self, name: str) -> str:
        """The absolute path the host resolved for subprocess ``name``; fails closed if absent."""
        binaries = self.request.get("binaries") or {}
        path = binaries.get(name) if isinstance(binaries, dict) else None
        if not isinstance(path, str) or not path.startswith("/"):
            raise Failure(
                "missing_requirement",
                f"the host did not supply the binary {name!r} (Request.binaries has no entry); "
                f"map {name!r} to an absolute path in the host policy and grant it as a "
                "subprocess",
                details={"binary": name},
            )
        return path

    def granted(self, kind: str, name: str) -> bool:
        grants = self.request.get("grants") or {}
        values = grants.get(kind) if isinstance(grants, dict) else None
        return isinstance(values, list) and name in values

    def read_file(self, ref: Mapping[str, Any], *, limit: int = 64 * 1024 * 1024) -> bytes:
        """Read ``{"root": ..., "path": ...}`` from a read-only root, refusing escapes."""
        root_name = ref.get("root")
        rel = ref.get("path")
        if not isinstance(root_name, str) or not isinstance(rel, str):
            raise Failure("invalid_input", "a file reference needs string 'root' and 'path'")
        base = self.root(root_name).resolve()
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts:
            raise Failure(
                "invalid_input", f"path {rel!r} must be relative and stay inside its root"
            )
        target = (base / pure).resolve()
        if not target.is_relative_to(base) or not target.is_file():
            raise Failure(
                "not_found",
                f"{rel!r} is not a regular file inside root {root_name!r}",
                details={"root": root_name, "path": rel},
            )
        if target.stat().st_size > limit:
            raise Failure("too_large", f"{rel!r} is larger than {limit} bytes")
        return target.read_bytes()

    def write(
        self,
        rel_path: str,
        data: bytes,
        *,
        kind: str,
        media_type: str,
        presentation: str = "",
        title: str = "",
        root: str = "out",
        artifact_id: str | None = None,
    ) -> dict[str, Any]:
        """Write ``data`` under the rw root ``root`` and record it as an artifact."""
        base = self.root(root, mode="rw")
        target = base / rel_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        artifact: dict[str, Any] = {
            "id": artifact_id or PurePosixPath(rel_path).stem,
            "kind": kind,
            "path": rel_path,
            "root": root,
        }
        if presentation:
            artifact["presentation"] = presentation
        artifact["media_type"] = media_type
        artifact["bytes"] = len(data)
        artifact["digest"] = digest_bytes(data)
        if title:
            artifact["title"] = title
        self.artifacts.append(artifact)
        return artifact


Handler = Callable[[Context], Outcome]

#: JSON Schema's types, as Python sees a value ``json.loads`` made (``bool`` is no number).
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
}


def input_problem(schema: Any, value: Any, where: str = "input") -> str | None:
    """Why ``value`` breaks ``schema``, or ``None``.

    Only the keywords the demo schemas use are checked (``type``, ``enum``, ``properties``,
    ``required``, ``additionalProperties``, ``minimum``, ``maximum``, ``minLength``,
    ``maxLength``, ``pattern``, ``items``, ``minItems``, ``maxItems``); any other is ignored,
    so this may let through an input the host would refuse, never refuse one it sends.
    """
    if not isinstance(schema, dict):
        return None
    for check in (_type_problem, _value_problem, _object_problem, _array_problem):
        problem = check(schema, value, where)
        if problem is not None:
            return problem
    return None


def _type_problem(schema: dict[str, Any], value: Any, where: str) -> str | None:
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if isinstance(kinds, list) and not any(_TYPES.get(k, lambda v: True)(value) for k in kinds):
        return f"{where} must be {' or '.join(map(str, kinds))}, got {type(value).__name__}"
    enum = schema.get("enum")
    same = [e for e in enum or [] if e == value and isinstance(e, bool) == isinstance(value, bool)]
    if isinstance(enum, list) and not same:
        return f"{where} must be one of {enum!r}, got {value!r}"
    return None


def _value_problem(schema: dict[str, Any], value: Any, where: str) -> str | None:
    """``minimum``/``maximum`` of a number, ``minLength``/``maxLength``/``pattern`` of a
    string, ``minItems``/``maxItems`` of an array."""
    if _TYPES["number"](value):
        size, low_key, high_key, unit = value, "minimum", "maximum", ""
    elif isinstance(value, str):
        size, low_key, high_key, unit = len(value), "minLength", "maxLength", " characters"
    elif isinstance(value, list):
        size, low_key, high_key, unit = len(value), "minItems", "maxItems", " items"
    else:
        return None
    low, high = schema.get(low_key), schema.get(high_key)
    if _TYPES["number"](low) and size < low:
        return f"{where} must be at least {low}{unit}, got {size}"
    if _TYPES["number"](high) and size > high:
        return f"{where} must be at most {high}{unit}, got {size}"
    pattern = schema.get("pattern")
    if isinstance(value, str) and isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                return f"{where} must match {pattern!r}"
        except re.error:  # a pattern Python reads otherwise: left to the host
            return None
    return None


def _object_problem(schema: dict[str, Any], value: Any, where: str) -> str | None:
    if not isinstance(value, dict):
        return None
    missing = [r for r in schema.get("required") or [] if r not in value]
    if missing:
        return f"{where} lacks the required property {missing[0]!r}"
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    if schema.get("additionalProperties") is False:
        unknown = sorted(k for k in value if k not in properties)
        if unknown:
            return f"{where} has the unknown property {unknown[0]!r}; it takes {sorted(properties)}"
    for name, sub in properties.items():
        if name in value:
            problem = input_problem(sub, value[name], f"{where}[{name!r}]")
            if problem is not None:
                return problem
    return None


def _array_problem(schema: dict[str, Any], value: Any, where: str) -> str | None:
    items = schema.get("items")
    if not isinstance(value, list) or not isinstance(items, dict):
        return None
    for i, item in enumerate(value):
        problem = input_problem(items, item, f"{where}[{i}]")
        if problem is not None:
            return problem
    return None


def _execution(effects: Mapping[str, Any], outcome: Outcome | None, artifacts: list[Any]) -> Any:
    # Without an outcome (describe, or a call that failed) the cost is what the effects promise:
    # 0 when the capability is known to be free, otherwise unknown (null), never a guessed 0.
    free = 0.0 if effects.get("cost_known") else None
    return {
        "local": bool(effects.get("local", False)),
        "network": outcome.network if outcome else False,
        "external_writes": outcome.external_writes if outcome else False,
        "provider": outcome.provider if outcome else str(effects.get("provider", "")),
        "estimated_cost": outcome.estimated_cost if outcome else free,
        "actual_cost": outcome.actual_cost if outcome else free,
        "artifacts": artifacts,
    }


def _emit(envelope: Mapping[str, Any]) -> None:
    out = sys.stdout.buffer
    out.write(json.dumps(envelope, separators=(",", ":"), ensure_ascii=False,
                         allow_nan=False).encode())  # fmt: skip
    out.write(b"\n")
    out.flush()


def _handle(
    ctx: Context, cap: Mapping[str, Any] | None, handlers: Mapping[str, Handler], schema: Any
) -> tuple[Outcome | None, Failure | None]:
    """Run the handler of the requested capability on an input ``schema`` allows: its
    outcome, or why it failed."""
    request, module = ctx.request, ctx.module
    capability_id = request.get("capability")
    if request.get("protocol") != PROTOCOL_ID:
        return None, Failure(
            "unsupported_protocol",
            f"request protocol {request.get('protocol')!r} is not {PROTOCOL_ID!r}",
        )
    if cap is None or not isinstance(capability_id, str) or capability_id not in handlers:
        return None, Failure(
            "unknown_capability",
            f"{module} has no capability {capability_id!r}; it offers {sorted(handlers)}",
        )
    problem = input_problem(schema, request.get("input", {}))
    if problem is not None:
        return None, Failure(
            "invalid_input",
            f"{problem}; {capability_id} did nothing. Send an input its request_schema allows",
        )
    try:
        return handlers[capability_id](ctx), None
    except Failure as exc:
        return None, exc
    except Exception as exc:  # a bug in the module: report it, never crash silently
        traceback.print_exc(file=sys.stderr)
        return None, Failure("internal_error", f"{type(exc).__name__}: {exc}")


def run(descriptor: Mapping[str, Any], handlers: Mapping[str, Handler], argv: list[str]) -> int:
    """Serve one verb (``describe`` or ``invoke``) and print exactly one envelope."""
    module = str(descriptor["module"])
    verb = argv[0] if argv else ""
    if verb == "describe":
        _emit(
            {
                "protocol": PROTOCOL_ID,
                "module": module,
                "operation": "describe",
                "request_id": "",
                "ok": True,
                "result": descriptor,
                "warnings": [],
                "execution": _execution({"local": True, "cost_known": True}, None, []),
            }
        )
        return 0
    if verb != "invoke":
        print(f"usage: module describe | module invoke < request.json (got {argv!r})",
              file=sys.stderr)
        return 2
    _emit(_invoke(descriptor, handlers, module))
    return 0


def _read_request() -> tuple[dict[str, Any], Failure | None]:
    """The request on stdin, or ``{}`` and why it is not one."""
    raw = sys.stdin.buffer.read()
    try:
        request = json.loads(raw)
        if not isinstance(request, dict):
            raise ValueError("the request is not a JSON object")
    except ValueError as exc:
        return {}, Failure("invalid_request", f"stdin is not a request: {exc}")
    return request, None


def _invoke(
    descriptor: Mapping[str, Any], handlers: Mapping[str, Handler], module: str
) -> dict[str, Any]:
    """Read the request, run its capability, and build the ``invoke`` envelope."""
    request, failure = _read_request()
    request_id = request.get("request_id", "")
    request_id = request_id if isinstance(request_id, str) else ""
    capability_id = request.get("capability")
    caps = {c["id"]: c for c in descriptor.get("capabilities", [])}
    cap = caps.get(capability_id) if isinstance(capability_id, str) else None
    schema = descriptor.get("request_schemas", {}).get(cap["request_schema"]) if cap else None
    effects: Mapping[str, Any] = cap["effects"] if cap else {"local": True}
    ctx = Context(module=module, request=request)
    outcome: Outcome | None = None
    if failure is None:
        outcome, failure = _handle(ctx, cap, handlers, schema)
    envelope: dict[str, Any] = {
        "protocol": PROTOCOL_ID,
        "module": module,
        "operation": "invoke",
        "request_id": request_id,
        "ok": failure is None,
    }
    if failure is None and outcome is not None:
        envelope["result"] = outcome.result
    elif failure is not None:
        envelope["error"] = {
            "code": failure.code,
            "message": failure.message,
            "retryable": failure.retryable,
            "details": failure.details,
        }
    envelope["warnings"] = list(ctx.warnings)
    # A failed call reports what was really written too: the host decides what to keep.
    envelope["execution"] = _execution(effects, outcome, ctx.artifacts)
    return envelope
