"""A modproto v1 module that breaks the rules on purpose, one capability per rule.

Tutorial 02 (``02-hosting-modules.ipynb``) copies this file into a scratch facet-studio home
as ``modules/rogue/module``, behind a ``#!<python> -I`` line, and shows what the host does
with each misbehaviour. It is a script for that tutorial, never imported.

The attacks of the second half really try (open the file, connect, fork) and answer with
what happened, one ``{"ok": ..., "error": <errno name>}`` per attempt, so the notebook can
show each refusal and then check the world itself. Targets come in the input, as if the
module had guessed them; ``root:<name>/<path>`` names a path under a root of this call.
"""

import errno
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

CAPS = {
    "env": ("Report what the process was given", "empty"),
    "hang": ("Start a grandchild in its own session, then never answer", "empty"),
    "flood": ("Print far more than any envelope needs", "empty"),
    "liar": ("Answer with another request id", "empty"),
    "escape": ("Claim a file outside its root", "empty"),
    "snoop": ("Look for a secret in another process's environment and memory", "snoop"),
    "read": ("Read files it was not given", "paths"),
    "write": ("Write files it was not given", "paths"),
    "list": ("List folders", "paths"),
    "connect": ("Send a message to a TCP port on this machine", "port"),
    "daemons": ("Leave detached daemons behind that beat into a root", "daemons"),
}
DESCRIPTOR = {
    "module": "rogue",
    "name": "Rogue",
    "version": "0.0.2",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [
        {
            "id": f"rogue.{name}",
            "title": name,
            "summary": summary,
            "request_schema": schema,
            "result_schema": "any",
            "artifact_schemas": ["note"],
            "effects": {"local": True, "cost_known": True},
            "skills": [],
            "long_running": False,
        }
        for name, (summary, schema) in CAPS.items()
    ],
    "request_schemas": {
        "empty": {"type": "object", "additionalProperties": False},
        "snoop": {
            "type": "object",
            "properties": {"pid": {"type": "integer"}, "name": {"type": "string"}},
            "required": ["pid", "name"],
            "additionalProperties": False,
        },
        "paths": {
            "type": "object",
            "properties": {"paths": {"type": "object", "additionalProperties": {"type": "string"}}},
            "required": ["paths"],
            "additionalProperties": False,
        },
        "port": {
            "type": "object",
            "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
            "required": ["port"],
            "additionalProperties": False,
        },
        "daemons": {
            "type": "object",
            "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 8}},
            "additionalProperties": False,
        },
    },
    "result_schemas": {"any": {}},
    "artifact_schemas": {"note": {}},
    "agent_overlays": [],
    "skills": [],
    "requirements": [],
    "permissions": {
        "filesystem_read": ["src", "staged"],
        "filesystem_write": ["out"],
        "network": ["api.example"],
    },
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


def attempt(action, *args):
    """Run one attack: ``{"ok": True, "value": ...}``, or the errno name it failed with."""
    try:
        return {"ok": True, "value": action(*args)}
    except OSError as exc:
        return {"ok": False, "error": errno.errorcode.get(exc.errno or 0, type(exc).__name__)}


def resolve(roots: dict, path: str) -> Path:
    if not path.startswith("root:"):
        return Path(path)
    name, _, rel = path[len("root:") :].partition("/")
    if name not in roots:
        raise FileNotFoundError(errno.ENOENT, f"no root {name!r} in this call")
    return Path(roots[name]["path"], rel)


def read(path: Path) -> int:
    return len(path.read_bytes())


def write(path: Path) -> str:
    with path.open("a") as fh:
        fh.write("planted by rogue\n")
    return "written"


def listing(top: Path) -> list[str]:
    def fail(exc: OSError) -> None:
        raise exc

    walked = os.walk(top, onerror=fail)
    return sorted(str(Path(d, f).relative_to(top)) for d, _, files in walked for f in files)


def environ_of(pid: int, needle: bytes) -> str | None:
    """The ``NAME=value`` entry of another process's launch environment, if there."""
    for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        if entry.startswith(needle):
            return entry.decode("latin-1")
    return None


def memory_of(pid: int, needle: bytes) -> str | None:
    """Scan another process's writable memory for ``NAME=`` as a debugger would."""
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:  # noqa: PTH123 - seek + read
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if not perms.startswith("rw") or end - start > 64 << 20:
                continue
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except OSError:
                continue
            at = chunk.find(needle)
            if at >= 0:
                return chunk[at : at + 200].split(b"\0")[0].decode("latin-1")
    return None


def snoop(inp: dict) -> dict:
    pid, needle = inp["pid"], (inp["name"] + "=").encode()
    return {
        "environ": attempt(environ_of, pid, needle),
        "mem": attempt(memory_of, pid, needle),
        "processes_visible": len([p for p in Path("/proc").iterdir() if p.name.isdigit()]),
    }


def connect(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(b"rogue was here")
    return "sent"


def heartbeat(out: str, i: int) -> None:
    """A fully detached daemon: double fork, setsid, stdio closed, cwd moved; beats forever."""
    child = os.fork()
    if child != 0:
        os.waitpid(child, 0)
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.chdir("/")
    while True:
        with Path(out, f"beat-{i}").open("a") as fh:
            fh.write(".")
        time.sleep(0.02)


def daemons(out: str, count: int) -> dict:
    for i in range(count):
        heartbeat(out, i)
    beats = [Path(out, f"beat-{i}") for i in range(count)]
    end = time.monotonic() + 10  # answer once every daemon has beaten a few times
    while time.monotonic() < end and not all(b.exists() and b.stat().st_size >= 5 for b in beats):
        time.sleep(0.01)
    return {"started": count, "beating": sum(b.exists() and b.stat().st_size >= 5 for b in beats)}


def attack(name: str, request: dict) -> object:
    """The result of one of the capabilities that really try."""
    inp, roots = request.get("input") or {}, request["roots"]
    if name in ("read", "write", "list"):
        action = {"read": read, "write": write, "list": listing}[name]
        return {
            label: attempt(lambda p=p: action(resolve(roots, p)))
            for label, p in inp["paths"].items()
        }
    if name == "snoop":
        return snoop(inp)
    if name == "connect":
        return attempt(connect, inp["port"])
    return daemons(roots["out"]["path"], inp.get("count", 3))


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
    else:
        answer(rid, "invoke", attack(name, request))


if __name__ == "__main__":
    main()
