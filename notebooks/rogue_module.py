"""A modproto v1 module that breaks the rules on purpose, one capability per rule.

Tutorial 02 (``02-hosting-modules.ipynb``) copies this file into a scratch facet-studio home
as ``modules/rogue/module``, behind a ``#!<python> -I`` line, and shows what the host does
with each misbehaviour. It is a script for that tutorial, never imported.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CAPS = {
    "env": "Report what the process was given",
    "hang": "Start a grandchild in its own session, then never answer",
    "flood": "Print far more than any envelope needs",
    "liar": "Answer with another request id",
    "escape": "Claim a file outside its root",
}
DESCRIPTOR = {
    "module": "rogue",
    "name": "Rogue",
    "version": "0.0.1",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [
        {
            "id": f"rogue.{name}",
            "title": name,
            "summary": summary,
            "request_schema": "empty",
            "result_schema": "any",
            "artifact_schemas": ["note"],
            "effects": {"local": True, "cost_known": True},
            "skills": [],
            "long_running": False,
        }
        for name, summary in CAPS.items()
    ],
    "request_schemas": {"empty": {"type": "object", "additionalProperties": False}},
    "result_schemas": {"any": {}},
    "artifact_schemas": {"note": {}},
    "agent_overlays": [],
    "skills": [],
    "requirements": [],
    "permissions": {"filesystem_write": ["out"]},
}
FREE = {"local": True, "estimated_cost": 0, "actual_cost": 0, "artifacts": []}


def answer(request_id: str, operation: str, result: object, execution: object = FREE) -> None:
    envelope = {
        "protocol": "modproto.v1",
        "module": "rogue",
        "operation": operation,
        "request_id": request_id,
        "ok": True,
        "result": result,
        "warnings": [],
        "execution": execution,
    }
    print(json.dumps(envelope))


def escape(request_id: str, out: Path) -> None:
    """Report one honest file and one that climbs out of the ``out`` root."""
    data = b"a file inside the root\n"
    (out / "note.txt").write_bytes(data)
    note = {
        "id": "note",
        "kind": "note",
        "path": "note.txt",
        "root": "out",
        "media_type": "text/plain",
        "bytes": len(data),
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
    }
    passwd = dict(note, id="passwd", path="../../../../etc/passwd")
    answer(request_id, "invoke", {}, dict(FREE, artifacts=[note, passwd]))


def main() -> None:
    if sys.argv[1] == "describe":
        answer("", "describe", DESCRIPTOR)
        return
    request = json.loads(sys.stdin.read())
    name, rid = request["capability"].split(".", 1)[1], request["request_id"]
    if name == "env":
        folder = sorted(p.name for p in Path().iterdir())
        answer(rid, "invoke", {"environment": dict(os.environ), "working_folder": folder})
    elif name == "hang":
        sleeper = [sys.executable, "-c", "import time; time.sleep(3600)"]
        subprocess.Popen(sleeper, start_new_session=True)
        time.sleep(3600)
    elif name == "flood":
        sys.stdout.write("x" * (8 << 20))
    elif name == "liar":
        answer("0" * 32, "invoke", {"said": "hello"})
    elif name == "escape":
        escape(rid, Path(request["roots"]["out"]["path"]))


if __name__ == "__main__":
    main()
