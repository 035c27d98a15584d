"""A well-behaved fixture module: echoes what it was given, fails on request, makes files.

Every capability first drops ``ran-<name>`` into its ``out`` root when it has one, so a test
can prove that a refused call never started.
"""

import hashlib
import os
import time
from pathlib import Path

from _proto import artifact_for, capability, descriptor, envelope, execution_of, main


def default():
    return descriptor(
        [
            capability("echo", request_schema="echo_in"),
            capability("fail"),
            capability("make", artifacts=["image", "table"]),
            capability("report", artifacts=["image"]),
            capability("consume"),
            capability("paid", cost_known=False),
            capability("sleep"),
            capability("start", long_running=True, poll="poll"),
            capability("poll"),
        ],
        permissions={
            "filesystem_read": ["src", "staged"],
            "filesystem_write": ["out", "scratch"],
            "network": ["api.example", "other.example"],
            "subprocess": ["tool", "ghost"],
        },
        request_schemas={
            "echo_in": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"count": {"type": "integer", "minimum": 0}},
                "required": ["count"],
            }
        },
    )


def environ_at_exec():
    """What exec passed as the environment (``None`` where ``/proc`` is out of reach: the
    Landlock sandbox grants none)."""
    try:
        return Path("/proc/self/environ").read_bytes().decode()
    except OSError:
        return None


def handle(name, request):
    rid = request["request_id"]
    roots = request.get("roots") or {}
    if "out" in roots:
        Path(roots["out"]["path"], f"ran-{name}").write_text(rid)
    inp = request.get("input") or {}
    if name in {"echo", "paid", "start", "poll"}:
        entries = sorted(p.name for p in Path.cwd().iterdir())
        if inp.get("litter"):
            Path("litter.txt").write_text("left behind")
        return envelope("invoke", rid, result={
            "request": request,
            "environ": dict(os.environ),
            "cwd": str(Path.cwd()),
            "cwd_entries": entries,
            "environ_at_exec": environ_at_exec(),
            "own_session": os.getsid(0) == os.getpid(),
            "stdin_rest": "",
        })
    if name == "fail":
        return envelope("invoke", rid, error={
            "code": inp.get("code", "upstream_down"), "message": "the upstream is down",
            "retryable": True, "details": {"attempts": 1}},
            execution=execution_of(estimated=inp.get("estimated"), actual=inp.get("actual")))
    if name == "make":
        root = inp.get("root", "out")
        base = Path(roots[root]["path"])
        arts = []
        for i, spec in enumerate(inp.get("files", [{"name": "a.png", "content": "png!"}])):
            data = spec["content"].encode()
            (base / spec["name"]).parent.mkdir(parents=True, exist_ok=True)
            (base / spec["name"]).write_bytes(data)
            art = artifact_for(f"a{i}", root, spec["name"], data,
                               kind=spec.get("kind", "image"),
                               media_type=spec.get("media_type", "image/png"),
                               presentation=spec.get("presentation", ""))
            art.update(spec.get("claim", {}))
            arts.append(art)
        return envelope("invoke", rid, result={"made": len(arts)},
                        execution=execution_of(estimated=0.0, actual=0.25, artifacts=arts))
    if name == "report":
        return envelope("invoke", rid, result={},
                        execution=execution_of(artifacts=inp["artifacts"]))
    if name == "consume":
        root = roots[inp["root"]]
        data = Path(root["path"], inp["path"]).read_bytes()
        return envelope("invoke", rid, result={
            "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "mode": root["mode"]})
    if name == "sleep":
        time.sleep(float(inp.get("seconds", 1)))
        return envelope("invoke", rid, result={"slept": inp.get("seconds", 1)})
    return envelope("invoke", rid, error={"code": "unknown", "message": name, "retryable": False,
                                          "details": None})


main(default, handle)
