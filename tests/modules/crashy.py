"""A fixture module that fails the ways a module author's code really fails (issue 24).

``raise``   writes a few diagnostics (one with a terminal escape) to stderr, then raises:
            a Python traceback on stderr, exit status 1, nothing on stdout.
``debug``   prints a stray debug line on stdout before its envelope.
``hang``    says so on stderr and sleeps past any deadline.
``flood``   says so on stderr and prints far more than any output bound.
``segv``    reads address 0: the kernel kills it with SIGSEGV.
``schema``  answers ``{"count": "three"}`` where its result_schema wants an integer.
``ghost``   reports an artifact whose file it never wrote.
"""

import ctypes
import sys
import time

from _proto import artifact_for, capability, descriptor, envelope, execution_of, main


def default():
    names = ("raise", "debug", "hang", "flood", "segv", "ghost")
    caps = [capability(n, request_schema="note_in") for n in names]
    counted = capability("schema", request_schema="note_in")
    counted["result_schema"] = "counted"
    note = {"type": "object", "properties": {"note": {"type": "string"}}}
    desc = descriptor([*caps, counted], permissions={"filesystem_write": ["out"]},
                      request_schemas={"note_in": note})
    desc["result_schemas"]["counted"] = {
        "type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    return desc


def load_model(path):
    sys.stderr.write(f"loading {path}\n\x1b[2Jcleared?\n")
    return 1 / 0


def handle(name, request):
    rid = request["request_id"]
    if name == "raise":
        load_model("weights.bin")
    if name == "debug":
        print("DEBUG: request parsed, calling the model")  # the stray print
        return envelope("invoke", rid, result={"answer": 42})
    if name == "hang":
        sys.stderr.write("waiting for the upstream to answer\n")
        sys.stderr.flush()
        time.sleep(600)
    if name == "flood":
        sys.stderr.write("dumping the whole table to stdout\n")
        sys.stderr.flush()
        while True:
            sys.stdout.write("row," * 4096)
    if name == "segv":
        sys.stderr.write("about to touch freed memory\n")
        sys.stderr.flush()
        ctypes.string_at(0)  # a real fault: the kernel's SIGSEGV (a module may be a pid 1)
    if name == "schema":
        return envelope("invoke", rid, result={"count": "three"})
    art = artifact_for("ghost", "out", "never-written.png", b"png!")
    return envelope("invoke", rid, result={}, execution=execution_of(artifacts=[art]))


main(default, handle)
