"""A fixture module for batches: works on a number, fails on some, costs, sleeps, polls.

``work`` answers ``{"n": n, "square": n*n}`` after sleeping ``sleep`` seconds; ``n`` divisible
by ``fail_every`` (when given) fails with a module error, retryable when ``retryable`` says
so; every call reports ``estimated_cost`` and ``actual_cost`` of ``cost`` (``null`` when
``cost`` is ``-1``), and drops a ``<n>-<request_id>`` file into its ``log`` root when the
policy maps one (so a test counts real runs). ``flaky`` fails (retryable) until its ``log``
root holds ``tries`` earlier attempts for the same ``n``. ``image`` makes a small PNG.
``start``/``status`` are a long-running pair whose job lives in the ``jobs`` root.
"""

import json
import struct
import time
import zlib
from pathlib import Path

from _proto import artifact_for, capability, descriptor, envelope, execution_of, main

NUM = {"type": "object", "properties": {
    "n": {"type": "integer", "minimum": 0}, "sleep": {"type": "number"},
    "fail_every": {"type": "integer"}, "retryable": {"type": "boolean"},
    "cost": {"type": "number"}, "tries": {"type": "integer"}, "tag": {"type": "string"},
    "extra": {}}, "required": ["n"]}
RESULT = {"type": "object", "properties": {"n": {"type": "integer"},
                                           "square": {"type": "integer"}}}


def default():
    desc = descriptor(
        [
            capability("work", request_schema="num"),
            capability("flaky", request_schema="num"),
            capability("image", request_schema="num", artifacts=["image"]),
            capability("paid", request_schema="num", cost_known=False),
            capability("start", request_schema="num", long_running=True, poll="status"),
            capability("status", request_schema="job"),
        ],
        permissions={"filesystem_write": ["out", "log", "jobs"]},
        request_schemas={"num": NUM, "job": {"type": "object", "properties": {
            "job": {"type": "string"}}, "required": ["job"]}},
    )
    desc["result_schemas"]["square"] = RESULT
    for cap in desc["capabilities"]:
        if cap["id"].endswith((".work", ".paid")):
            cap["result_schema"] = "square"
    return desc


def _png(n):
    raw = b"".join(b"\x00" + bytes([n % 256, (n * 7) % 256, 90]) * 4 for _ in range(4))
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _cost(inp):
    cost = inp.get("cost", 0.0)
    return None if cost == -1 else cost


def handle(name, request):
    rid = request["request_id"]
    roots = request.get("roots") or {}
    inp = request.get("input") or {}
    n = inp.get("n", 0)
    if "log" in roots:
        Path(roots["log"]["path"], f"{name}-{n}-{rid}").write_text(json.dumps(inp))
    time.sleep(float(inp.get("sleep", 0)))
    cost = _cost(inp)
    execution = execution_of(estimated=cost, actual=cost)
    if name == "flaky":
        seen = len(list(Path(roots["log"]["path"]).glob(f"flaky-{n}-*")))
        if seen <= inp.get("tries", 1):
            return envelope("invoke", rid, error={"code": "busy", "message": f"try {seen}",
                                                  "retryable": True}, execution=execution)
        return envelope("invoke", rid, result={"n": n, "tries": seen}, execution=execution)
    if name in {"work", "paid"}:
        every = inp.get("fail_every")
        if every and n % every == 0:
            return envelope("invoke", rid, error={
                "code": "bad_number", "message": f"{n} is divisible by {every}",
                "retryable": bool(inp.get("retryable"))}, execution=execution)
        return envelope("invoke", rid, result={"n": n, "square": n * n}, execution=execution)
    if name == "image":
        data = _png(n)
        Path(roots["out"]["path"], f"img-{n}.png").write_bytes(data)
        art = artifact_for(f"img{n}", "out", f"img-{n}.png", data)
        return envelope("invoke", rid, result={"n": n},
                        execution=execution_of(estimated=cost, actual=cost, artifacts=[art]))
    if name == "start":
        job = Path(roots["jobs"]["path"], f"job-{n}-{rid}")
        job.write_text("0")
        return envelope("invoke", rid, result={"job": job.name, "state": "running", "done": 0,
                                               "total": 3}, execution=execution)
    if name == "status":
        job = Path(roots["jobs"]["path"], inp["job"])
        done = int(job.read_text()) + 1
        job.write_text(str(done))
        n = int(inp["job"].split("-")[1])
        state = "done" if done >= 3 else "running"
        result = {"job": inp["job"], "state": state, "done": done, "total": 3}
        if state == "done":
            result["square"] = n * n
        return envelope("invoke", rid, result=result, execution=execution_of(estimated=0.5,
                                                                            actual=0.5))
    return envelope("invoke", rid, error={"code": "unknown", "message": name,
                                          "retryable": False})


main(default, handle)
