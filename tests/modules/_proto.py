"""Shared by the fixture modules (copied beside each installed ``module``; stdlib only).

A fixture module describes itself from ``descriptor.json`` beside it when present (tests
write variants there), else from its built-in default; ``describe.raw`` beside it is
printed verbatim instead, to break describe-envelope rules. ``describe-log`` beside it names a
file each ``describe`` appends a line to (only where the module may write it: unconfined).
A requirement's ``available_after`` (a Unix time) makes it available from then on, the
folder unchanged: as a binary installed or a model fetched outside the module would.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODULE_ID = HERE.name
PROTOCOL_ID = "modproto.v1"


def effects(*, cost_known: bool = True, external_writes: bool = False, network: bool = False,
            provider: str = "") -> dict[str, Any]:
    return {"local": True, "network": network, "external_writes": external_writes,
            "provider": provider, "cost_known": cost_known}


def capability(name: str, *, request_schema: str = "any_in", artifacts: list[str] | None = None,
               long_running: bool = False, poll: str = "", **effect: Any) -> dict[str, Any]:
    cap: dict[str, Any] = {
        "id": f"{MODULE_ID}.{name}", "title": name.title(), "summary": f"The {name} fixture.",
        "request_schema": request_schema, "result_schema": "any",
        "artifact_schemas": artifacts or [], "effects": effects(**effect), "skills": [],
        "long_running": long_running,
    }
    if poll:
        cap["poll_capability"] = f"{MODULE_ID}.{poll}"
    return cap


def descriptor(capabilities: list[dict[str, Any]], *, permissions: dict[str, Any] | None = None,
               request_schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    perms = {"filesystem_read": [], "filesystem_write": [], "network": [], "credentials": [],
             "paid_providers": [], "publish": False, "subprocess": []}
    perms.update(permissions or {})
    return {
        "module": MODULE_ID, "name": f"Fixture {MODULE_ID}", "version": "1.0.0",
        "protocol_versions": [PROTOCOL_ID], "capabilities": capabilities,
        "request_schemas": {"any_in": {"type": "object"}, **(request_schemas or {})},
        "result_schemas": {"any": {}},
        "artifact_schemas": {"image": {"type": "object"}, "table": {"type": "object"}},
        "agent_overlays": [], "skills": [], "permissions": perms, "requirements": [],
    }


def envelope(operation: str, request_id: str, *, result: Any = None, error: Any = None,
             execution: dict[str, Any] | None = None,
             warnings: list[str] | None = None) -> dict[str, Any]:
    env: dict[str, Any] = {"protocol": PROTOCOL_ID, "module": MODULE_ID, "operation": operation,
                           "request_id": request_id, "ok": error is None}
    if error is None:
        env["result"] = result
    else:
        env["error"] = error
    env["warnings"] = warnings or []
    env["execution"] = execution or execution_of()
    return env


def execution_of(*, estimated: float | None = 0.0, actual: float | None = 0.0,
                 artifacts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"local": True, "network": False, "external_writes": False, "provider": "",
            "estimated_cost": estimated, "actual_cost": actual, "artifacts": artifacts or []}


def artifact_for(aid: str, root: str, rel: str, data: bytes, *, kind: str = "image",
                 media_type: str = "image/png", presentation: str = "") -> dict[str, Any]:
    art = {"id": aid, "kind": kind, "path": rel, "root": root, "media_type": media_type,
           "bytes": len(data), "digest": "sha256:" + hashlib.sha256(data).hexdigest()}
    if presentation:
        art["presentation"] = presentation
    return art


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj))
    sys.stdout.flush()


def main(default: Callable[[], dict[str, Any]],
         handle: Callable[[str, dict[str, Any]], dict[str, Any]]) -> None:
    verb = sys.argv[1] if len(sys.argv) > 1 else ""
    if verb == "describe":
        counted = HERE / "describe-log"
        if counted.exists():  # a test counts real describes (it runs the module unconfined)
            with Path(counted.read_text().strip()).open("a") as log:
                log.write("describe\n")
        raw = HERE / "describe.raw"
        if raw.exists():
            sys.stdout.buffer.write(raw.read_bytes())
            return
        override = HERE / "descriptor.json"
        desc = json.loads(override.read_text()) if override.exists() else default()
        for requirement in desc.get("requirements") or []:
            # set up outside this folder at that time (a binary installed, a model fetched)
            after = requirement.pop("available_after", None)
            if after is not None:
                requirement["available"] = time.time() >= after
        emit(envelope("describe", "", result=desc))
    elif verb == "invoke":
        request = json.loads(sys.stdin.buffer.read())
        name = request["capability"][len(MODULE_ID) + 1:]
        emit(handle(name, request))
    else:
        sys.stderr.write(f"usage: module describe|invoke (got {verb!r})\n")
        sys.exit(2)
