"""A small modproto v1 module with two real bugs, checked in tutorial 06.

``greeter.hello`` greets a name and writes the greeting as a text artifact. It runs with the
standard library only. The two bugs are the kind that pass a quick manual test:

* the artifact's ``bytes`` is the length of the *string*, not of its UTF-8 encoding, so any
  name outside ASCII makes the host reject the artifact (``size_mismatch``);
* the error envelope for an input it cannot use has no ``execution``, which the protocol
  requires on failure too.
"""

import hashlib
import json
import sys
from pathlib import Path

PROTOCOL = "modproto.v1"
MODULE = "greeter"
NO_COST = {"local": True, "network": False, "external_writes": False, "provider": "",
           "estimated_cost": 0, "actual_cost": 0}
DESCRIPTOR = {
    "module": MODULE, "name": "Greeter", "version": "1.0.0", "protocol_versions": [PROTOCOL],
    "capabilities": [{
        "id": "greeter.hello", "title": "Hello", "summary": "Greet someone by name.",
        "request_schema": "hello.in", "result_schema": "hello.out",
        "artifact_schemas": ["greeting"], "skills": [], "long_running": False,
        "effects": {"local": True, "network": False, "external_writes": False, "provider": "",
                    "cost_known": True},
    }],
    "request_schemas": {"hello.in": {
        "type": "object", "properties": {"name": {"type": "string", "maxLength": 40}},
        "required": ["name"], "additionalProperties": False}},
    "result_schemas": {"hello.out": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    "artifact_schemas": {"greeting": {"type": "object"}},
    "agent_overlays": [], "skills": [], "requirements": [],
    "permissions": {"filesystem_read": [], "filesystem_write": ["out"], "network": [],
                    "credentials": [], "paid_providers": [], "publish": False, "subprocess": []},
}


def envelope(operation, request_id, **body):
    return {"protocol": PROTOCOL, "module": MODULE, "operation": operation,
            "request_id": request_id, "warnings": [], **body}


def hello(request):
    rid = request["request_id"]
    name = (request.get("input") or {}).get("name") if isinstance(request.get("input"), dict) \
        else None
    if not isinstance(name, str):
        error = {"code": "invalid_request", "message": "input.name must be a string"}
        return envelope("invoke", rid, ok=False, error=error)  # BUG 2: no execution
    text = f"Hello, {name}!"
    out = Path(request["roots"]["out"]["path"]) / "greeting.txt"
    out.write_bytes(text.encode())
    artifact = {"id": "greeting", "kind": "greeting", "root": "out", "path": "greeting.txt",
                "media_type": "text/plain", "presentation": "text",
                "bytes": len(text),  # BUG 1: characters, not bytes
                "digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest()}
    execution = {**NO_COST, "artifacts": [artifact]}
    return envelope("invoke", rid, ok=True, result={"text": text}, execution=execution)


def main():
    verb = sys.argv[1] if len(sys.argv) > 1 else ""
    if verb == "describe":
        answer = envelope("describe", "", ok=True, result=DESCRIPTOR,
                          execution={**NO_COST, "artifacts": []})
    elif verb == "invoke":
        answer = hello(json.loads(sys.stdin.buffer.read()))
    else:
        print("usage: module describe|invoke", file=sys.stderr)
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
