"""A correct module for the module checker, with one rule broken per name in ``faults.json``.

With no ``faults.json`` beside it, it passes every check. Each fault name breaks exactly one
rule, the way a real module gets it wrong (a forgotten namespace, a stale digest, a request
id that is not echoed, a traceback on standard output ...).
"""

import hashlib
import json
import sys
import time
from pathlib import Path

from _proto import HERE, MODULE_ID, artifact_for, capability, descriptor, envelope, main

FAULTS = set(json.loads((HERE / "faults.json").read_text())) if (HERE / "faults.json").exists() \
    else set()
SKILL = HERE / "skills" / "howto.md"


def default():
    caps = [
        capability("greet", request_schema="greet_in", artifacts=["note"]),
        capability("start", request_schema="any_in", long_running=True, poll="status"),
        capability("status", request_schema="status_in"),
    ]
    caps[0]["result_schema"] = "greeting"
    if "capability_ids" in FAULTS:
        caps[0]["id"] = "greet"
    if "schema_ids" in FAULTS:
        caps[0]["request_schema"] = "nowhere"
    if "artifact_schemas" in FAULTS:
        caps[0]["artifact_schemas"] = ["note", "ghost"]
    if "poll_capability" in FAULTS:
        del caps[1]["poll_capability"]
    desc = descriptor(caps, permissions={"filesystem_write": ["out", "jobs"]}, request_schemas={
        "greet_in": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12}}, "required": ["name"],
            "additionalProperties": False},
        "status_in": {"type": "object", "properties": {"job": {"type": "string"}},
                      "required": ["job"]},
    })
    desc["result_schemas"]["greeting"] = {"type": "object", "properties": {
        "text": {"type": "string"}}, "required": ["text"]}
    desc["artifact_schemas"] = {"note": {"type": "object"}}
    data = SKILL.read_bytes() if SKILL.exists() else b""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if "document_digests" in FAULTS:
        digest = "sha256:" + hashlib.sha256(data + b"stale").hexdigest()
    path = "../outside.md" if "documents_confined" in FAULTS else "skills/howto.md"
    desc["skills"] = [{"id": "howto", "path": path, "digest": digest, "tokens": 20,
                       "summary": "How to greet."}]
    if "protocol_versions" in FAULTS:
        desc["protocol_versions"] = ["modproto.v0"]
    if "schemas_valid" in FAULTS:
        desc["request_schemas"]["any_in"] = {"type": 5}
    if "requirements" in FAULTS:
        desc["requirements"] = [{"kind": "feeling", "name": "luck", "available": True}]
    if "unstable" in FAULTS:
        desc["version"] = f"1.0.{time.time_ns()}"
    return desc


def handle(name, request):
    rid = request["request_id"]
    inp = request.get("input")
    if "invalid_input" in FAULTS and not isinstance(inp, dict):
        print("Traceback (most recent call last): the input is not an object")
        sys.exit(1)
    if not isinstance(inp, dict):
        return envelope("invoke", rid, error={"code": "invalid_request",
                                              "message": "input must be an object"})
    answer = {"greet": greet, "start": start, "status": status}[name](request, inp)
    if "request_id" in FAULTS:
        answer["request_id"] = rid.upper()
    if "warnings" in FAULTS:
        answer["warnings"] = None
    if "execution" in FAULTS and not answer["ok"]:
        del answer["execution"]
    return answer


def greet(request, inp):
    rid = request["request_id"]
    if not isinstance(inp.get("name"), str):
        return envelope("invoke", rid, error={"code": "invalid_request",
                                              "message": "name must be a string"})
    if "deadline" in FAULTS:
        time.sleep(request["deadline_ms"] / 1000 + 2)
    out = Path(request["roots"]["out"]["path"])
    data = f"Hello, {inp['name']}!".encode()
    (out / "note.txt").write_bytes(data)
    art = artifact_for("note", "out", "note.txt", data, kind="note", media_type="text/plain",
                       presentation="text")
    if "artifacts_verify" in FAULTS:
        art["digest"] = "sha256:" + "0" * 64
    if "artifact_kinds" in FAULTS:
        art["kind"] = "letter"
    if "presentation" in FAULTS:
        art["presentation"] = "hologram"
    result = {"text": data.decode()}
    if "result_schema" in FAULTS:
        result = {"txt": data.decode()}
    execution = {"local": True, "network": False, "external_writes": False, "provider": "",
                 "estimated_cost": 0, "actual_cost": 0, "artifacts": [art]}
    return envelope("invoke", rid, result=result, execution=execution)


def start(request, inp):
    jobs = Path(request["roots"]["jobs"]["path"])
    (jobs / "job-1").write_text("running")
    return envelope("invoke", request["request_id"], result={"job": "job-1", "state": "running"})


def status(request, inp):
    rid = request["request_id"]
    if "poll" in FAULTS:
        return {"protocol": "modproto.v1", "module": MODULE_ID}
    jobs = Path(request["roots"]["jobs"]["path"])
    job = jobs / str(inp.get("job"))
    if not job.is_file():
        return envelope("invoke", rid, error={"code": "unknown_job", "message": "no such job"})
    return envelope("invoke", rid, result={"job": inp["job"], "state": "done"})


main(default, handle)
