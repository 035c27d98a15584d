"""A module with three faults and one warning, the way a first module gets them wrong.

* ``divide`` crashes on its schema's maximum (``100 // (10 - n)`` at ``n = 10``): an
  uncaught ZeroDivisionError, a traceback on stderr, exit status 1 and no envelope.
* ``greet`` answers ``{"txt": ...}`` where its ``result_schema`` asks for ``text``.
* ``shout`` echoes the request id in capitals instead of byte for byte.
* ``greet``'s artifact asks for a ``hologram`` presentation, which no primitive draws (a
  warning, not a failure).

The checker's report of it is the one the browser tests read: failures first, then the
warning, then the passes folded into one line.
"""

from pathlib import Path

from _proto import artifact_for, capability, descriptor, envelope, execution_of, main


def default():
    caps = [
        capability("divide", request_schema="divide_in"),
        capability("greet", request_schema="greet_in", artifacts=["note"]),
        capability("shout", request_schema="greet_in"),
    ]
    caps[1]["result_schema"] = "greeting"
    name = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}},
            "required": ["name"], "additionalProperties": False}
    desc = descriptor(caps, permissions={"filesystem_write": ["out"]}, request_schemas={
        "divide_in": {"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["n"]},
        "greet_in": name,
    })
    desc["result_schemas"]["greeting"] = {"type": "object", "properties": {
        "text": {"type": "string"}}, "required": ["text"]}
    desc["artifact_schemas"]["note"] = {"type": "object"}
    return desc


def handle(name, request):
    rid = request["request_id"]
    inp = request.get("input")
    if not isinstance(inp, dict):
        return envelope("invoke", rid, error={"code": "invalid_request",
                                              "message": "input must be an object"})
    if name == "divide":
        if not isinstance(inp.get("n"), int):
            return envelope("invoke", rid, error={"code": "invalid_request",
                                                  "message": "n must be an integer"})
        return envelope("invoke", rid, result={"quotient": 100 // (10 - int(inp.get("n", 0)))})
    if not isinstance(inp.get("name"), str):
        return envelope("invoke", rid, error={"code": "invalid_request",
                                              "message": "name must be a string"})
    text = f"Hello, {inp['name']}!"
    if name == "shout":
        return envelope("invoke", rid.upper(), result={"text": text.upper()})
    out = Path(request["roots"]["out"]["path"])
    (out / "note.txt").write_text(text)
    art = artifact_for("note", "out", "note.txt", text.encode(), kind="note",
                       media_type="text/plain", presentation="hologram")
    return envelope("invoke", rid, result={"txt": text},
                    execution=execution_of(artifacts=[art]))


main(default, handle)
