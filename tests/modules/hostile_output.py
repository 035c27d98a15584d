"""A hostile fixture module: it does, for real, what ``input.do`` asks (issue 13).

``echo``      answers with the request exactly as it arrived (raw keys, raw text).
``deep``      prints an envelope whose result is nested ``input.depth`` levels.
``result``    answers with ``input.result`` (the descriptor picks the result_schema), or
              with a large value it generates (``input.generate``).
``make``      writes files under the ``out`` root as ``input.files`` says (sparse files,
              hard links, symlinks), then claims ``input.claims``, where a claim without a
              digest gets the file's real one and ``"bytes": null`` its real size.
"""

import hashlib
import json
import random
import sys
from pathlib import Path

from _proto import MODULE_ID, capability, descriptor, envelope, execution_of, main


def default():
    caps = [capability(n) for n in ("echo", "deep", "result", "make")]
    return descriptor(caps, permissions={"filesystem_write": ["out"],
                                         "filesystem_read": ["staged"]})


def _generated(spec, data):
    """``input.result``, or a large value made here (``input.generate``): a random string
    over ``alphabet`` under key ``text``, or ``objects`` distinct objects (the last one
    repeating the first, with its keys reordered and an int written as a float)."""
    if spec is None:
        return data["result"]
    if "objects" in spec:
        items = [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(spec["objects"])]
        if spec.get("repeat_first"):
            items.append({"tags": ["a", "b"], "name": "item 0", "id": 0.0})
        return {"items": items}
    rng = random.Random(spec.get("seed", 1))
    block = "".join(rng.choice(spec["alphabet"]) for _ in range(1 << 16))
    return {"text": (block * (spec["length"] // len(block) + 1))[: spec["length"]]}


def _make(root, spec):
    path = Path(root, spec["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    if "hardlink_to" in spec:
        path.hardlink_to(spec["hardlink_to"])
    elif "symlink_to" in spec:
        path.symlink_to(spec["symlink_to"])
    else:
        with path.open("wb") as fh:
            fh.write(spec.get("content", "").encode())
            if spec.get("sparse"):
                fh.truncate(spec["sparse"])


def _claim(root, claim):
    claim = dict(claim)
    path = Path(root, claim["path"])
    if claim.get("bytes") is None:
        claim["bytes"] = path.stat().st_size
    if "digest" not in claim:
        claim["digest"] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    claim.setdefault("id", claim["path"])
    claim.setdefault("kind", "image")
    claim.setdefault("root", "out")
    claim.setdefault("media_type", "text/plain")
    return claim


def handle(name, request, raw):
    rid = request["request_id"]
    data = request.get("input") or {}
    if name == "echo":
        return envelope("invoke", rid, result={"raw": raw})
    if name == "deep":
        depth = data["depth"]
        head = json.dumps(envelope("invoke", rid, result=0))
        cut = head.index('"result": 0') + len('"result": ')
        sys.stdout.write(head[:cut] + "[" * depth + "]" * depth + head[cut + 1:])
        sys.stdout.flush()
        sys.exit(0)
    if name == "result":
        return envelope("invoke", rid, result=_generated(data.get("generate"), data))
    root = request["roots"]["out"]["path"]
    for spec in data.get("files", []):
        _make(root, spec)
    claims = [_claim(root, c) for c in data.get("claims", [])]
    return envelope("invoke", rid, result={"root": root},
                    execution=execution_of(artifacts=claims))


def run():
    verb = sys.argv[1] if len(sys.argv) > 1 else ""
    if verb != "invoke":
        main(default, lambda name, request: {})
        return
    raw = sys.stdin.buffer.read().decode("utf-8")
    request = json.loads(raw)
    name = request["capability"][len(MODULE_ID) + 1:]
    sys.stdout.write(json.dumps(handle(name, request, raw)))
    sys.stdout.flush()


run()
